#!/bin/bash
# The cross-host acceptance at N nodes on one N-GPU test machine (device kind nvidia-h100-x4: four inventory
# hosts, one GPU each; any N >= 2 works):
#   1. playbooks/xhost.yml on N local inventory hosts (gpu0 .. gpuN-1, each pinned to its GPU through
#      CUDA_VISIBLE_DEVICES in xhost_env, rendezvous and NCCL's sockets on lo): parity, the pair test in N-1
#      rounds of disjoint pairs (all pairs of a round at once), then all_reduce and all_gather over all N,
#      judged against the GPUs' NVLink speed (nvidia-smi nvlink -s; LINK_GBPS overrides); its wall time;
#   2. independent measurements in the same call: bench/gpu/collective_ref.py (its own launcher, CUDA-event
#      timing, all_gather_into_tensor, nccl-tests' busbw) at the same sizes and runs, and
#      bench/gpu/pingpong_ref.py for the pair gpu0 - gpu1 alone;
#   3. to $OUT: xhost.json, xhost.md, every node's xhost-<node>.json (in xhost-nodes.json), the independent
#      figures, the log, and a comparison (compare.txt): 7 files.
# Usage (repository root): WHEELS=.whl OUT=/some/dir bash bench/gpu/run_xhost_ngpu.sh
# On one GPU (SHARE_GPU=1, N default 4): every node on GPU 0 with NCCL_HOSTID=xhost-<node>, so NCCL takes the
# nodes for N machines and joins them over its network transport (NET/IB where RDMA devices are up, else
# NET/Socket on lo), never P2P or SHM; LINK_GBPS must then be given. SOCKET_NODE=<node> adds NCCL's own
# NCCL_IB_DISABLE=1 to that node alone; EXPECT_RDMA=<node,...> gives those nodes xhost_fabric {rdma: true},
# what the cluster play sets for a node whose fabric port has its RDMA functions up (bench/gpu/run_xhost_one_gpu.sh).
# Local test without GPUs: XHOST_BACKEND=gloo N=4 LINK_GBPS=100 SKIP_INSTALL=1 ANSIBLE_PLAYBOOK=ansible-playbook
#   SPARKFORGE_GPU_PYTHON=$PWD/.venv/bin/python XHOST_PYTHONPATH=<torch cpu dir> SIZES=4194304 CSIZES=4194304 ITERS=3
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$REPO/gpu-out}
PY=${SPARKFORGE_GPU_PYTHON:-/opt/torch/.venv/bin/python3}
[ -x "$PY" ] || PY=$(command -v python3)
BACKEND=${XHOST_BACKEND:-nccl}
SIZES=${SIZES:-67108864,268435456}
CSIZES=${CSIZES:-268435456}
ITERS=${ITERS:-10}
CITERS=${CITERS:-20}
WARMUP=${WARMUP:-5}
# A pair or the collective below this fraction of the GPUs' NVLink speed fails.
FRACTION=${FRACTION:-0.25}
WORK=${WORK:-/tmp/sparkforge-xhost-n}
LOG=$OUT/ansible.log
export SPARKFORGE_GPU_PYTHON=$PY XHOST_BACKEND=$BACKEND PYTHONUNBUFFERED=1
export ANSIBLE_CONFIG=$REPO/ansible.cfg ANSIBLE_LOCAL_TEMP=/tmp/ansible-local ANSIBLE_REMOTE_TEMP=/tmp/ansible-remote
export ANSIBLE_FORCE_COLOR=0 ANSIBLE_NOCOLOR=1
mkdir -p "$OUT"
rm -rf "$WORK"
mkdir -p "$WORK"
cd "$REPO"
: > "$LOG"
say() { echo "== $*" | tee -a "$LOG"; }

if [ "$BACKEND" = nccl ] && [ -z "${SHARE_GPU:-}" ]; then
    N=${N:-$(nvidia-smi -L | grep -c '^GPU ')}
else
    N=${N:-4}
fi
if [ -n "${SHARE_GPU:-}" ] && [ -z "${LINK_GBPS:-}" ]; then
    echo "SHARE_GPU: give LINK_GBPS (the nodes meet over NCCL's network transport, not NVLink)" >&2
    exit 2
fi
say "$(date -u +%FT%TZ) host $(hostname) python $PY backend $BACKEND nodes $N pair sizes $SIZES x $ITERS collective $CSIZES x $CITERS (warm-up $WARMUP)"
# shellcheck source=bench/gpu/xhost_lib.sh
source "$REPO/bench/gpu/xhost_lib.sh"
install_ansible
read_link_speed
say "link speed: ${LINK_GBPS:-unknown} Gb/s; fraction $FRACTION"

# N hosts on this machine, each pinned to its GPU (bench/gpu/xhost-inventory.yml's settings, N of them).
"$PY" - "$WORK/inventory.yml" "$N" "${XHOST_PYTHONPATH:-}" <<'EOF'
import json, os, sys
path, n, pythonpath = sys.argv[1], int(sys.argv[2]), sys.argv[3]
share = bool(os.environ.get("SHARE_GPU"))
socket_node = os.environ.get("SOCKET_NODE") or ""
expect_rdma = [h for h in (os.environ.get("EXPECT_RDMA") or "").split(",") if h]
env = "{{ {'CUDA_VISIBLE_DEVICES': bench_gpu | string, 'NCCL_DEBUG': 'INFO', 'NCCL_DEBUG_SUBSYS': 'INIT,NET'}" \
      + (" | combine({'NCCL_HOSTID': 'xhost-' ~ inventory_hostname})" if share else "") \
      + " | combine(bench_extra_env | default({}))" \
      + (" | combine({'PYTHONPATH': %s})" % json.dumps(pythonpath) if pythonpath else "") + " }}"
hosts = dict(("gpu%d" % i, {"bench_gpu": 0 if share else i}) for i in range(n))
assert not socket_node or socket_node in hosts, socket_node
assert all(h in hosts for h in expect_rdma), expect_rdma
if socket_node:
    hosts[socket_node]["bench_extra_env"] = {"NCCL_IB_DISABLE": "1"}
for h in expect_rdma:
    hosts[h]["xhost_fabric"] = {"rdma": True}
inventory = {"all": {"children": {"gpus": {
    "hosts": hosts,
    "vars": {"ansible_connection": "local",
             "ansible_python_interpreter": "{{ lookup('env', 'SPARKFORGE_GPU_PYTHON') }}",
             "xhost_python": "{{ ansible_python_interpreter }}",
             "xhost_backend": "{{ lookup('env', 'XHOST_BACKEND') | default('nccl', true) }}",
             "xhost_master_addr": "127.0.0.1", "xhost_ifname": "lo", "xhost_env": env}}}}}
json.dump(inventory, open(path, "w"), indent=1)
EOF
# A fleet-summary.json like the spark play's, so the cross_host entry has a file to join.
"$PY" -c 'import sys; sys.path.insert(0, "collections")
from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import fleet_report as f
f.write(sys.argv[1], f.summarize(dict(("gpu%d" % i, {"seen": True, "state": "provisioned", "class": "gpu-test"})
                                      for i in range(int(sys.argv[2])))))' "$WORK" "$N"

say "ansible-playbook playbooks/xhost.yml -i $WORK/inventory.yml"
begun=$("$PY" -c "import time; print(time.time())")
timeout 480 $PLAYBOOK playbooks/xhost.yml -i "$WORK/inventory.yml" \
    -e xhost_report_dir="$WORK" -e "{\"xhost_sizes\": [$SIZES], \"xhost_collective_sizes\": [$CSIZES]}" \
    -e xhost_iters="$ITERS" -e xhost_collective_iters="$CITERS" -e xhost_warmup_iters="$WARMUP" \
    -e xhost_min_link_fraction="$FRACTION" -e xhost_min_busbw_fraction="$FRACTION" \
    -e xhost_join_timeout=60 -e xhost_op_timeout=120 -e xhost_master_port="${PORT:-29541}" \
    ${LINK_GBPS:+-e xhost_link_speed_gbps=$LINK_GBPS} 2>&1 | tee -a "$LOG"
PLAY_RC=${PIPESTATUS[0]}
PLAY_S=$("$PY" -c "import sys, time; print(round(time.time() - float(sys.argv[1]), 1))" "$begun")
say "ansible-playbook exit $PLAY_RC after $PLAY_S s"

say "independent collective: bench/gpu/collective_ref.py --world $N"
PYTHONPATH=${XHOST_PYTHONPATH:-} NCCL_SOCKET_IFNAME=lo timeout 300 "$PY" bench/gpu/collective_ref.py \
    --out "$WORK/ref-collective.json" --world "$N" --sizes "$CSIZES" --iters "$CITERS" --warmup "$WARMUP" \
    --backend "$BACKEND" ${SHARE_GPU:+--share-gpu} 2>&1 | tee -a "$LOG"
say "independent ping-pong gpu0 - gpu1: bench/gpu/pingpong_ref.py"
PAIR_GPUS=0,1
[ -n "${SHARE_GPU:-}" ] && PAIR_GPUS=0,0
PYTHONPATH=${XHOST_PYTHONPATH:-} NCCL_SOCKET_IFNAME=lo timeout 240 "$PY" bench/gpu/pingpong_ref.py \
    --backend "$BACKEND" --sizes "$SIZES" --iters "$ITERS" --gpus "$PAIR_GPUS" ${SHARE_GPU:+--hostid} \
    --tag pair --out "$WORK/ref-pair.json" 2>&1 | tail -n 3 | tee -a "$LOG"

"$PY" - "$WORK" "$PLAY_S" > "$OUT/compare.txt" <<'EOF'
import json, os, sys
work, play_s = sys.argv[1], float(sys.argv[2])
try:
    xh = json.load(open(os.path.join(work, "xhost.json")))
except (IOError, OSError, ValueError) as exc:
    print("no xhost.json: %s" % exc)
    sys.exit(0)
coll = json.load(open(os.path.join(work, "ref-collective.json")))
pair = json.load(open(os.path.join(work, "ref-pair.json")))
print("play wall time: %.1f s for %d nodes (parity, %d pair rounds, the collective)" % (
    play_s, len(xh.get("hosts", [])), max(1, len(xh.get("hosts", [])) - 1)))
ref = dict(((r["op"], r["bytes"]), r) for r in coll.get("rows") or [])
for r in xh.get("collectives") or []:
    other = ref.get((r["op"], r["bytes"]))
    print("collective %s %d MiB/node: play busbw %.3f GB/s (%s%% of link, exact %s); independent %s GB/s; ratio %s"
          % (r["op"], r["bytes"] >> 20, r["busbw"], r.get("pct_of_link"), r.get("exact"),
             other and other["busbw"], "%.3f" % (r["busbw"] / other["busbw"]) if other and other["busbw"] else "-"))
pp = dict((r["bytes"], r["gbs"]) for r in pair.get("pingpong") or [])
for p in (xh.get("judged") or {}).get("pairs") or []:
    print("pair %s - %s %d MiB: %.3f GB/s (%s%% of link, slow %s)%s" % (
        p["a"], p["b"], p["bytes"] >> 20, p["gbs"], p["pct_of_link"], p["slow"],
        "; independent alone %.3f GB/s, ratio %.3f" % (pp[p["bytes"]], p["gbs"] / pp[p["bytes"]])
        if (p["a"], p["b"]) == ("gpu0", "gpu1") and pp.get(p["bytes"]) else ""))
for node in xh.get("nodes") or []:
    print("node %s: %s %s" % (node.get("node"), node.get("verdict"), "; ".join(node.get("reasons") or [])))
print("passed: %s" % xh.get("passed"))
EOF
cat "$OUT/compare.txt" | tee -a "$LOG"
# Every node's xhost-<node>.json in one file (what comes back from the device is a few files).
"$PY" -c 'import glob, json, os, sys
print(json.dumps(dict((os.path.basename(p), json.load(open(p))) for p in sorted(glob.glob(sys.argv[1] + "/xhost-*.json"))),
                 indent=1))' "$WORK" > "$OUT/xhost-nodes.json"
cp "$WORK/xhost.json" "$WORK/xhost.md" "$WORK/ref-collective.json" "$WORK/ref-pair.json" "$OUT/" 2>/dev/null
echo "play exit $PLAY_RC" | tee -a "$LOG"
[ "$PLAY_RC" = 0 ]
