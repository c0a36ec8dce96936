#!/bin/bash
# Issue 44 item 5 on the GPU test machine: node_health's reading of a real GPU (nvidia-smi's clocks and power
# sampled while a torch load runs, the driver's version file, the kernel log since boot) and its comparison of
# two nodes - the same GPU read at idle and under load, so the idle one is the node "stuck at low power".
# Writes $OUT/node-health.json (both readings and the verdicts) and $OUT/node-health.log.
# Usage (repository root): WHEELS=.whl OUT=/some/dir bash bench/gpu/run_node_health.sh
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$REPO/gpu-out}
PY=${SPARKFORGE_GPU_PYTHON:-/opt/torch/.venv/bin/python3}
mkdir -p "$OUT"
cd "$REPO"
# shellcheck source=bench/gpu/lib.sh
source "$REPO/bench/gpu/lib.sh"
carry_ansible || exit 3
cat > /tmp/node-health-inventory.yml <<INV
all:
  hosts:
    idle: {ansible_connection: local, ansible_python_interpreter: $PY}
    loaded: {ansible_connection: local, ansible_python_interpreter: $PY}
    localhost: {ansible_connection: local, ansible_python_interpreter: $PY}
INV
"$PY" /tmp/site/bin/ansible-playbook bench/gpu/node_health.yml -i /tmp/node-health-inventory.yml \
    -e load_python="$PY" -e load_seconds="${LOAD_SECONDS:-30}" -e out_dir="$OUT" > "$OUT/node-health.log" 2>&1
rc=$?
echo "exit $rc" | tee -a "$OUT/node-health.log"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
exit $rc
