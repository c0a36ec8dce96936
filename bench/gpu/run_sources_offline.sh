#!/bin/bash
# Issue 13's sources preflight on the GPU test machine (offline: no DNS, no index, no NVIDIA servers;
# CUDA and torch preinstalled in /opt/torch/.venv):
#   1. playbooks/spark.yml with every default component and torch source `existing`, twice: the plan
#      needs no remote source (cuda_libs/cusparselt/llvm skipped, ML packages from pip's own
#      configuration, not probed), so it converges; the rerun changes nothing but verify's report;
#   2. the same with torch source `index`, run and --check: preflight probes the torch index,
#      finds it unreachable and stops the host with the sources table; a snapshot of the places the
#      roles write (/opt/sparkforge, /etc/apt, /etc/profile.d, /var/cache/sparkforge) is the same
#      before and after.
# Usage (repository root): WHEELS=.whl OUT=/some/dir bash bench/gpu/run_sources_offline.sh
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
TORCH_VERSION=$("$PY" -c 'import torch; print(torch.__version__.split("+")[0])')
# Every component (the one list, validate.COMPONENTS), over the inventory's [runtime_env, verify].
ALL=$(PYTHONPATH=$REPO/collections "$PY" -c 'import json; from ansible_collections.sparkforge.stack.plugins.module_utils.plan.validate import COMPONENTS; print(json.dumps({"sparkforge_components": list(COMPONENTS)}))')
RC=0
for run in 1 2; do
  "$PY" /tmp/site/bin/ansible-playbook playbooks/spark.yml -i bench/gpu/inventory.yml -e "$ALL" \
      -e sparkforge_torch_version="$TORCH_VERSION" -e verify_benchmarks=false -e verify_extended_benchmarks=false \
      -e sparkforge_fleet_report_dir=/tmp/sparkforge-collected -e verify_controller_dir=/tmp/sparkforge-collected \
      -e verify_run=existing-run$run > "$OUT/existing-run$run.log" 2>&1
  rc=$?; echo "existing run $run: ansible-playbook exit $rc"; [ $rc -ne 0 ] && RC=$rc
  grep -A3 "PLAY RECAP" "$OUT/existing-run$run.log"
done
snapshot() { find /opt/sparkforge /etc/apt /etc/profile.d /var/cache/sparkforge -xdev -printf '%p %s %T@\n' 2>/dev/null | sort; }
snapshot > /tmp/before.txt
"$PY" /tmp/site/bin/ansible-playbook playbooks/spark.yml -i bench/gpu/inventory.yml -e "$ALL" \
    -e sparkforge_torch_source=index -e sparkforge_torch_version="$TORCH_VERSION" \
    -e sparkforge_fleet_report_dir=/tmp/sparkforge-index > "$OUT/index-run.log" 2>&1
echo "index run: ansible-playbook exit $? (expected 2: stopped in preflight)"
grep -A3 "PLAY RECAP" "$OUT/index-run.log"
snapshot > /tmp/after.txt
if diff -q /tmp/before.txt /tmp/after.txt >/dev/null; then
  echo "snapshot: unchanged ($(wc -l < /tmp/before.txt) paths)" | tee "$OUT/snapshot.txt"
else
  { echo "snapshot: CHANGED"; diff /tmp/before.txt /tmp/after.txt | head -40; } | tee "$OUT/snapshot.txt"; RC=1
fi
# The same in check mode (what `sparkforge plan` runs; ansible-runner is not carried here).
"$PY" /tmp/site/bin/ansible-playbook playbooks/spark.yml -i bench/gpu/inventory.yml -e "$ALL" --check \
    -e sparkforge_torch_source=index -e sparkforge_torch_version="$TORCH_VERSION" \
    -e sparkforge_fleet_report_dir=/tmp/sparkforge-index-check > "$OUT/index-check.log" 2>&1
echo "index --check: ansible-playbook exit $?"
grep -A4 "sources (probed)" "$OUT/index-check.log" | head -8
exit $RC
