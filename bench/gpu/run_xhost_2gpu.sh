#!/bin/bash
# The xhost play's NCCL path on the 2-GPU test machine (device kind nvidia-h100-x2 / nvidia-h200-x2):
#   1. playbooks/xhost.yml with two inventory hosts on this one machine (bench/gpu/xhost-inventory.yml: both
#      local, each pinned to its GPU by CUDA_VISIBLE_DEVICES in xhost_env, NCCL_DEBUG=INFO), each pair judged
#      against the GPUs' NVLink speed (nvidia-smi nvlink -s; LINK_GBPS overrides);
#   2. an independent measurement of the same pair (bench/gpu/pingpong_ref.py: its own launcher, CUDA-event
#      timing, same sizes and round trips);
#   3. the play again with NCCL forced off its fast path (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
#      NCCL_IB_DISABLE=1: the pair goes through NET/Socket on lo) and a floor (xhost_min_gbs) that fails it: the
#      diagnosis from NCCL's own lines lands in xhost-socket.md and the fleet summary's cross_host. Should NCCL
#      refuse that single-machine NET path (NVIDIA/nccl issue 2057), the run is repeated with NCCL_HOSTID per
#      host (NCCL then takes the two ranks for two machines) and the log says so; the independent measurement
#      runs under the same environment;
#   4. copies the reports, the fleet summary, the independent figures and the log to $OUT (8 files).
# A fleet-summary.json stands in for the spark play's (one line per host) so cross_host has a file to join.
# Usage (repository root): WHEELS=.whl OUT=/some/dir bash bench/gpu/run_xhost_2gpu.sh
# Local test without GPUs: XHOST_BACKEND=gloo LINK_GBPS=100 SKIP_INSTALL=1 ANSIBLE_PLAYBOOK=ansible-playbook
#   SPARKFORGE_GPU_PYTHON=$PWD/.venv/bin/python XHOST_PYTHONPATH=<torch cpu dir> SIZES=4194304,16777216 ITERS=3
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$REPO/gpu-out}
PY=${SPARKFORGE_GPU_PYTHON:-/opt/torch/.venv/bin/python3}
[ -x "$PY" ] || PY=$(command -v python3)
BACKEND=${XHOST_BACKEND:-nccl}
SIZES=${SIZES:-67108864,268435456}
ITERS=${ITERS:-10}
# NVLink run: a pair below this fraction of the GPUs' NVLink speed fails (see the README of the results).
FRACTION=${FRACTION:-0.25}
# Forced-socket run: a pair below this many GB/s fails, whatever the link.
SOCKET_MIN_GBS=${SOCKET_MIN_GBS:-20}
WORK=${WORK:-/tmp/sparkforge-xhost}
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

say "$(date -u +%FT%TZ) host $(hostname) python $PY backend $BACKEND sizes $SIZES iters $ITERS"
# shellcheck source=bench/gpu/xhost_lib.sh
source "$REPO/bench/gpu/xhost_lib.sh"
install_ansible
read_link_speed
say "link speed for the pair: ${LINK_GBPS:-unknown} Gb/s; fraction $FRACTION; socket floor $SOCKET_MIN_GBS GB/s"
EXTRA_PP='{}'
[ -n "${XHOST_PYTHONPATH:-}" ] && EXTRA_PP="{\"PYTHONPATH\": \"$XHOST_PYTHONPATH\"}"

fleet_standin() {  # $1: report dir; a fleet-summary.json with the two hosts, as the spark play leaves one
    "$PY" -c 'import sys; sys.path.insert(0, "collections")
from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import fleet_report as f
f.write(sys.argv[1], f.summarize(dict((h, {"seen": True, "state": "provisioned", "class": "gpu-test"})
                                      for h in ("gpu0", "gpu1"))))' "$1"
}

xhost_play() {  # $1: report dir, $2: extra env (JSON), then more ansible-playbook arguments
    local dir=$1 env=$2
    shift 2
    fleet_standin "$dir"
    say "ansible-playbook playbooks/xhost.yml -i bench/gpu/xhost-inventory.yml (report $dir, env $env $*)"
    timeout 300 $PLAYBOOK playbooks/xhost.yml -i bench/gpu/xhost-inventory.yml \
        -e xhost_report_dir="$dir" -e "{\"xhost_sizes\": [$SIZES]}" -e xhost_iters="$ITERS" \
        -e xhost_join_timeout=60 -e xhost_op_timeout=60 -e xhost_master_port="${PORT:-29531}" \
        ${LINK_GBPS:+-e xhost_link_speed_gbps=$LINK_GBPS} -e "{\"bench_extra_env\": $env}" "$@" 2>&1 | tee -a "$LOG"
    local rc=${PIPESTATUS[0]}
    say "ansible-playbook exit $rc"
    return "$rc"
}

measured() {  # $1: xhost.json -> 0 when the pair was measured (judged), whatever the verdict
    "$PY" -c 'import json, sys; s = json.load(open(sys.argv[1])); sys.exit(0 if s.get("judged") else 1)' "$1" 2>/dev/null
}

reference() {  # $1: tag, $2: output json, then pingpong_ref.py arguments; the environment is the run's
    local tag=$1 out=$2
    shift 2
    say "independent ping-pong ($tag): bench/gpu/pingpong_ref.py $*"
    PYTHONPATH=${XHOST_PYTHONPATH:-} NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET NCCL_SOCKET_IFNAME=lo \
        timeout 240 "$PY" bench/gpu/pingpong_ref.py --backend "$BACKEND" --sizes "$SIZES" --iters "$ITERS" \
        --tag "$tag" --out "$out" "$@" 2>&1 | tee -a "$LOG"
}

# 1. The fast path (NVLink / P2P on this machine).
xhost_play "$WORK/fast" "$EXTRA_PP" -e xhost_min_link_fraction="$FRACTION"
FAST_RC=$?
# 2. The same pair, measured apart from the play.
reference fast "$WORK/ref-fast.json"

# 3. Off the fast path: NCCL's network transport, sockets on lo; the floor fails the pair.
SOCKET_ENV='{"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_IB_DISABLE": "1"}'
[ -n "${XHOST_PYTHONPATH:-}" ] && SOCKET_ENV="{\"NCCL_P2P_DISABLE\": \"1\", \"NCCL_SHM_DISABLE\": \"1\", \"NCCL_IB_DISABLE\": \"1\", \"PYTHONPATH\": \"$XHOST_PYTHONPATH\"}"
HOSTID=""
xhost_play "$WORK/socket" "$SOCKET_ENV" -e xhost_min_link_fraction="$FRACTION" -e xhost_min_gbs="$SOCKET_MIN_GBS"
SOCKET_RC=$?
if ! measured "$WORK/socket/xhost.json"; then
    say "forced-socket run measured no pair (NCCL refused the single-machine NET path?): again with NCCL_HOSTID per host"
    HOSTID=1
    mv "$WORK/socket" "$WORK/socket-samehost"
    xhost_play "$WORK/socket" "$SOCKET_ENV" -e xhost_min_link_fraction="$FRACTION" -e xhost_min_gbs="$SOCKET_MIN_GBS" \
        -e bench_own_hostid=true
    SOCKET_RC=$?
fi
(
    export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1
    reference socket "$WORK/ref-socket.json" ${HOSTID:+--hostid}
)

# 4. What comes back (8 files at most).
"$PY" - "$WORK" "$OUT/pingpong-ref.json" <<'EOF'
import json, os, sys
work, out = sys.argv[1], sys.argv[2]
both = {}
for tag in ("fast", "socket"):
    try:
        both[tag] = json.load(open(os.path.join(work, "ref-%s.json" % tag)))
    except (IOError, OSError, ValueError) as exc:
        both[tag] = {"ok": False, "error": str(exc)}
json.dump(both, open(out, "w"), indent=1)
for tag in ("fast", "socket"):
    try:
        xh = json.load(open(os.path.join(work, tag, "xhost.json")))
    except (IOError, OSError, ValueError):
        print("%s: no xhost.json" % tag)
        continue
    pairs = (xh.get("judged") or {}).get("pairs") or []
    ref = dict((r["bytes"], r["gbs"]) for r in both[tag].get("pingpong") or [])
    for p in pairs:
        print("%s: %s - %s best %.3f GB/s at %d MiB (%s%% of %s Gb/s, slow %s); independent %s GB/s; ratio %s" % (
            tag, p["a"], p["b"], p["gbs"], p["bytes"] >> 20, p["pct_of_link"], p["link_gbps"], p["slow"],
            ref.get(p["bytes"]), "%.3f" % (p["gbs"] / ref[p["bytes"]]) if ref.get(p["bytes"]) else "-"))
    for h in xh.get("failed_hosts") or []:
        for why in (xh["per_host"].get(h) or {}).get("diagnosis") or []:
            print("%s: %s failed: %s" % (tag, h, why))
EOF
cp "$WORK/fast/xhost.json" "$OUT/xhost.json" 2>/dev/null || echo "missing fast xhost.json"
cp "$WORK/fast/xhost.md" "$OUT/xhost.md" 2>/dev/null || echo "missing fast xhost.md"
cp "$WORK/socket/xhost.json" "$OUT/xhost-socket.json" 2>/dev/null || echo "missing socket xhost.json"
cp "$WORK/socket/xhost.md" "$OUT/xhost-socket.md" 2>/dev/null || echo "missing socket xhost.md"
cp "$WORK/socket/fleet-summary.json" "$OUT/fleet-summary.json" 2>/dev/null || echo "missing fleet-summary.json"
# The fleet summary's markdown: the NVLink run's cross_host section, then the forced-socket run's whole file.
{ echo "<!-- NVLink run -->"; sed -n '/^## Collectives across hosts/,$p' "$WORK/fast/fleet-summary.md";
  echo; echo "<!-- forced-socket run -->"; cat "$WORK/socket/fleet-summary.md"; } > "$OUT/fleet-summary.md" 2>/dev/null
echo "fast run exit $FAST_RC, forced-socket run exit $SOCKET_RC (expected non-zero: the pair is below the floor)" | tee -a "$LOG"
[ "$FAST_RC" = 0 ] && measured "$WORK/socket/xhost.json" && [ "$SOCKET_RC" != 0 ]
