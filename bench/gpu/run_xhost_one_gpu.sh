#!/bin/bash
# Issue 44's four-node NCCL proof on a test machine with ONE GPU (no 4-GPU kind is lent): four inventory hosts,
# every one on GPU 0 with NCCL_HOSTID=xhost-<node>, so NCCL takes them for four machines and joins them over its
# network transport (NCCL refuses two ranks on one GPU of one host; on distinct "hosts" it never tries P2P/SHM).
#   1. as-today/: playbooks/xhost.yml over the four (parity, 3 pair rounds, all_reduce and all_gather over all),
#      and the independent collective and ping-pong on the same GPU the same way (bench/gpu/run_xhost_ngpu.sh).
#   2. socket-node/: the same with NCCL's own NCCL_IB_DISABLE=1 on SOCKET_NODE (gpu2) and that node's fabric port
#      given as RDMA-up (xhost_fabric {rdma: true}, what the cluster play sets for a Spark whose port has its RDMA
#      functions up). With RDMA devices active on this machine every node is given RDMA-up (a Spark cluster);
#      without, SOCKET_NODE alone is, the others having none (their sockets are then what they have). The run must
#      fail SOCKET_NODE naming NET/Socket, from NCCL's own lines.
# verdict.txt says whether both came out as they must; the exit status is 0 only then.
# Usage (repository root, Ansible's wheels in .whl carried): OUT=/some/dir bash bench/gpu/run_xhost_one_gpu.sh
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$REPO/gpu-out}
PY=${SPARKFORGE_GPU_PYTHON:-/opt/torch/.venv/bin/python3}
[ -x "$PY" ] || PY=$(command -v python3)
SOCKET_NODE=${SOCKET_NODE:-gpu2}
N=${N:-4}
mkdir -p "$OUT/as-today" "$OUT/socket-node"
LOG=$OUT/run.log
: > "$LOG"
say() { echo "== $*" | tee -a "$LOG"; }

# RDMA devices with an ACTIVE port (what NCCL's IB transport would use).
active=""
for port in /sys/class/infiniband/*/ports/*; do
    [ -r "$port/state" ] && grep -q ACTIVE "$port/state" && active="$active $(basename "$(dirname "$(dirname "$port")")"):$(basename "$port")"
done
say "$(date -u +%FT%TZ) $(hostname): RDMA devices: $(ls /sys/class/infiniband 2>/dev/null | tr '\n' ' ')- active ports:${active:- none}"
nvidia-smi -L | tee -a "$LOG"
if [ -n "$active" ]; then
    EXPECT=$("$PY" -c "import sys; print(','.join('gpu%d' % i for i in range(int(sys.argv[1]))))" "$N")
else
    EXPECT=$SOCKET_NODE
fi
say "nodes given an RDMA-up fabric port in the second run: $EXPECT; forced onto sockets: $SOCKET_NODE"

# Small enough for four ranks sharing one GPU over loopback sockets; the floor is low: this proves the transport,
# the bandwidth figures are set beside the independent ones in compare.txt.
export SHARE_GPU=1 N LINK_GBPS=${LINK_GBPS:-25} FRACTION=${FRACTION:-0.02} SIZES=${SIZES:-67108864}
export CSIZES=${CSIZES:-67108864} ITERS=${ITERS:-5} CITERS=${CITERS:-10} WARMUP=${WARMUP:-3}

say "1. four nodes on one GPU, as today"
OUT=$OUT/as-today WORK=/tmp/sparkforge-xhost-1 PORT=29561 bash "$REPO/bench/gpu/run_xhost_ngpu.sh" 2>&1 | tail -n 25 | tee -a "$LOG"
TODAY_RC=${PIPESTATUS[0]}
say "2. the same with $SOCKET_NODE forced onto sockets (NCCL_IB_DISABLE=1)"
OUT=$OUT/socket-node WORK=/tmp/sparkforge-xhost-2 PORT=29571 SOCKET_NODE=$SOCKET_NODE EXPECT_RDMA=$EXPECT \
    bash "$REPO/bench/gpu/run_xhost_ngpu.sh" 2>&1 | tail -n 25 | tee -a "$LOG"
SOCKET_RC=${PIPESTATUS[0]}

"$PY" - "$OUT" "$SOCKET_NODE" "$EXPECT" "$TODAY_RC" "$SOCKET_RC" > "$OUT/verdict.txt" <<'EOF'
import json, os, sys
out, node, expect, today_rc, socket_rc = sys.argv[1], sys.argv[2], sys.argv[3].split(","), sys.argv[4], sys.argv[5]
ok = True


def nodes(tag):
    try:
        files = json.load(open(os.path.join(out, tag, "xhost-nodes.json")))
    except (IOError, OSError, ValueError) as exc:
        return {"?": {"verdict": "missing", "reasons": [str(exc)]}}
    return dict((v.get("node"), v) for v in files.values())


today = nodes("as-today")
print("as-today: play exit %s; %s" % (today_rc, "; ".join("%s %s" % (h, v.get("verdict")) for h, v in sorted(today.items()))))
if today_rc != "0" or any(v.get("verdict") != "pass" for v in today.values()):
    ok = False
    print("  NOT AS IT MUST BE: every node passes")
forced = nodes("socket-node")
for h, v in sorted(forced.items()):
    print("socket-node: %s %s: %s" % (h, v.get("verdict"), "; ".join(v.get("reasons") or [])))
mine = forced.get(node) or {}
if socket_rc == "0" or mine.get("verdict") != "fail" or not any("NET/Socket" in r for r in mine.get("reasons") or []):
    ok = False
    print("  NOT AS IT MUST BE: %s fails naming NET/Socket, the play exits non-zero (exit %s)" % (node, socket_rc))
others = [h for h in forced if h != node and h not in expect]
if any(forced[h].get("verdict") != "pass" for h in others):
    ok = False
    print("  NOT AS IT MUST BE: the nodes not given RDMA (%s) pass" % ", ".join(others))
print("RESULT: %s" % ("as it must be" if ok else "NOT as it must be"))
sys.exit(0 if ok else 1)
EOF
VERDICT_RC=$?
tee -a "$LOG" < "$OUT/verdict.txt"
exit $VERDICT_RC
