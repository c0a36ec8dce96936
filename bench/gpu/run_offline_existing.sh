#!/bin/bash
# Issue 13's real-host check on the GPU test machine (offline: no index, no NVIDIA servers; CUDA and
# torch preinstalled in /opt/torch/.venv): playbooks/spark.yml with EVERY default component and torch
# source `existing`, twice. The first run must converge, skipping what the host does not need with the
# plan's reasons; the second must change nothing but verify's report.
# Usage (repository root): WHEELS=.whl OUT=/some/dir bash bench/gpu/run_offline_existing.sh
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
"$PY" -m pip list 2>/dev/null | grep -iE "^(torch|triton|torchvision|torchaudio|numpy|transformers|accelerate) " > "$OUT/venv.txt"
# Every component (the one list, validate.COMPONENTS), over the inventory's [runtime_env, verify].
ALL=$(PYTHONPATH=$REPO/collections "$PY" -c 'import json; from ansible_collections.sparkforge.stack.plugins.module_utils.plan.validate import COMPONENTS; print(json.dumps({"sparkforge_components": list(COMPONENTS)}))')
RC=0
for run in 1 2; do
  "$PY" /tmp/site/bin/ansible-playbook playbooks/spark.yml -i bench/gpu/inventory.yml \
      -e "$ALL" \
      -e sparkforge_torch_version="$TORCH_VERSION" -e verify_benchmarks=false -e verify_extended_benchmarks=false \
      -e sparkforge_fleet_report_dir=/tmp/sparkforge-collected -e verify_controller_dir=/tmp/sparkforge-collected \
      -e verify_run=offline-run$run > "$OUT/ansible-run$run.log" 2>&1
  rc=$?; echo "run $run: ansible-playbook exit $rc"; [ $rc -ne 0 ] && RC=$rc
  grep -A3 "PLAY RECAP" "$OUT/ansible-run$run.log"
done
cp /tmp/sparkforge-collected/offline-run2/gpu-test/verify.md "$OUT/verify.md" 2>/dev/null
exit $RC
