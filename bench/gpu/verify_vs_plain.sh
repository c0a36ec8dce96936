#!/bin/bash
# Issue 27's proof on the GPU test machine (offline; torch preinstalled in /opt/torch/.venv):
#   1. playbooks/spark.yml with torch source `existing` and the inventory's components (runtime_env, verify),
#      verify at its defaults (every check, benchmarks and extended benchmarks, NVML clocks per figure);
#   2. then, in its own process on the same GPU, the independent plain measurement (plain_measure.py);
#   3. the side-by-side table with the ratios (verify_vs_plain.py): side-by-side.md / .json.
# Usage (repository root): WHEELS=.whl OUT=/some/dir bash bench/gpu/verify_vs_plain.sh
# VERIFY_EXTRA adds ansible-playbook arguments. Exit status: the playbook's, else 2 when a figure misses the bar.
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$REPO/gpu-out}
PY=${SPARKFORGE_GPU_PYTHON:-/opt/torch/.venv/bin/python3}
export SPARKFORGE_GPU_PYTHON=$PY SPARKFORGE_GPU_VENV=$(dirname "$(dirname "$PY")") PYTHONUNBUFFERED=1
mkdir -p "$OUT"
cd "$REPO"
# shellcheck source=bench/gpu/lib.sh
source "$REPO/bench/gpu/lib.sh"
carry_ansible || exit 3
DEVICE=$(nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader | head -1)
echo "== $(date -u +%FT%TZ) $DEVICE"
TORCH_VERSION=$("$PY" -c 'import torch; print(torch.__version__.split("+")[0])')
RUN=verify-vs-plain
"$PY" /tmp/site/bin/ansible-playbook playbooks/spark.yml -i bench/gpu/inventory.yml \
    -e sparkforge_torch_version="$TORCH_VERSION" -e sparkforge_fleet_report_dir=/tmp/sparkforge-collected \
    -e verify_controller_dir=/tmp/sparkforge-collected -e verify_run=$RUN ${VERIFY_EXTRA:-} > "$OUT/ansible.log" 2>&1
RC=$?
echo "ansible-playbook exit $RC"; grep -A3 "PLAY RECAP" "$OUT/ansible.log"
for f in verify.json verify.md verify.png; do
    cp "/tmp/sparkforge-collected/$RUN/gpu-test/$f" "$OUT/" 2>/dev/null || echo "missing $f"
done
[ -f "$OUT/verify.json" ] || exit 1
echo "== $(date -u +%FT%TZ) independent measurement"
"$PY" bench/gpu/plain_measure.py "$OUT/plain.json" > /dev/null || exit 1
"$PY" bench/gpu/verify_vs_plain.py "$OUT/verify.json" "$OUT/plain.json" "$OUT/side-by-side" "$DEVICE"
CMP=$?
[ $RC -ne 0 ] && exit $RC
exit $CMP
