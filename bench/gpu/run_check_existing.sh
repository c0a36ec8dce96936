#!/bin/bash
# Issue 26's real-host check on the GPU test machine (offline; CUDA 13 and torch preinstalled in
# /opt/torch/.venv): playbooks/spark.yml with EVERY default component and torch source `existing`:
#   0. with --check --diff: must exit 0 and change nothing (a snapshot of the venv, the stack's prefix,
#      /etc/profile.d and the report directories, taken before and after, must be equal);
#   1. for real: must converge;
#   2. again: must change nothing but verify's report.
# Usage (repository root): WHEELS=.whl OUT=/some/dir bash bench/gpu/run_check_existing.sh
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$REPO/gpu-out}
PY=${SPARKFORGE_GPU_PYTHON:-/opt/torch/.venv/bin/python3}
VENV=$(dirname "$(dirname "$PY")")
export SPARKFORGE_GPU_PYTHON=$PY SPARKFORGE_GPU_VENV=$VENV PYTHONUNBUFFERED=1
mkdir -p "$OUT"
cd "$REPO"
# shellcheck source=bench/gpu/lib.sh
source "$REPO/bench/gpu/lib.sh"
carry_ansible || exit 3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee "$OUT/device.txt"
TORCH_VERSION=$("$PY" -c 'import torch; print(torch.__version__.split("+")[0])')
snapshot() {  # what a run may change on the host: the venv, the stack's files, the shell profile, the host's reports
  # (/tmp/sparkforge-collected is the controller's side: its fleet history records check runs too)
  find "$VENV" /opt/sparkforge /etc/profile.d /etc/ld.so.conf.d /tmp/sparkforge-reports \
    -xdev -path '*/__pycache__' -prune -o -printf '%p %s %T@\n' 2>/dev/null | sort
}
# Every component (the one list, validate.COMPONENTS), over the inventory's [runtime_env, verify].
ALL=$(PYTHONPATH=$REPO/collections "$PY" -c 'import json; from ansible_collections.sparkforge.stack.plugins.module_utils.plan.validate import COMPONENTS; print(json.dumps({"sparkforge_components": list(COMPONENTS)}))')
RC=0
for run in check 1 2; do
  extra=()
  [ "$run" = check ] && extra=(--check --diff) && snapshot > "$OUT/before.txt"
  "$PY" /tmp/site/bin/ansible-playbook playbooks/spark.yml -i bench/gpu/inventory.yml "${extra[@]}" \
      -e "$ALL" \
      -e sparkforge_torch_version="$TORCH_VERSION" -e verify_benchmarks=false -e verify_extended_benchmarks=false \
      -e sparkforge_fleet_report_dir=/tmp/sparkforge-collected -e verify_controller_dir=/tmp/sparkforge-collected \
      -e verify_run=existing-$run > "$OUT/ansible-$run.log" 2>&1
  rc=$?; echo "run $run: ansible-playbook exit $rc"; [ $rc -ne 0 ] && RC=$rc
  grep -A2 "PLAY RECAP" "$OUT/ansible-$run.log"
  if [ "$run" = check ]; then
    snapshot > "$OUT/after.txt"
    if diff "$OUT/before.txt" "$OUT/after.txt" > "$OUT/check-changed.txt"; then
      echo "check mode changed nothing ($(wc -l < "$OUT/before.txt") paths compared)"
    else
      echo "check mode CHANGED the host:"; head -20 "$OUT/check-changed.txt"; RC=3
    fi
    rm -f "$OUT/before.txt" "$OUT/after.txt"
  fi
done
cp /tmp/sparkforge-collected/existing-2/gpu-test/verify.md "$OUT/verify.md" 2>/dev/null
exit $RC
