#!/bin/bash
# Issue 42's proof on the GPU test machine (offline; CUDA and torch preinstalled in /opt/torch/.venv):
# "provisioned" is what the host was proven to hold, on a real GPU.
#   1. spark.yml with the inventory's components (runtime_env, verify), torch source `existing`: after the roles
#      the host is compared with its plan (venv, the runtime profile files read back, verify's verdict on the
#      GPU) and recorded provisioned; exit 0;
#   2. status.yml: no drift;
#   3. the runtime profile edited by hand (TORCH_CUDA_ARCH_LIST): status names the file and the variable and
#      exits non-zero; the file restored;
#   4. spark.yml --check on the provisioned host: nothing changed, the run ends `checked`, not provisioned;
#   5. spark.yml with ml_packages added: offline, its required packages cannot be installed: exit non-zero and
#      the host failed, the packages named (never provisioned).
# Each step's exit status and the host's state go to $OUT/proof.txt.
# Usage (repository root): WHEELS=.whl OUT=/some/dir bash bench/gpu/run_proof.sh
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
REPORTS=/tmp/sparkforge-collected
PROFILE=/etc/profile.d/sparkforge.sh
book() {  # book NAME PLAYBOOK ARGS...: one run, its log in $OUT/NAME.log, its exit status and the host's state
  local name=$1 playbook=$2; shift 2
  "$PY" /tmp/site/bin/ansible-playbook "$playbook" -i bench/gpu/inventory.yml \
      -e sparkforge_torch_version="$TORCH_VERSION" -e verify_benchmarks=false -e verify_extended_benchmarks=false \
      -e sparkforge_fleet_report_dir=$REPORTS -e verify_controller_dir=$REPORTS "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  local state  # as the summary play prints it (a check run writes no summary file)
  state=$(sed -n "s/^ *- '\\{0,1\\}gpu-test  *\\([a-z]*\\) .*/\\1/p" "$OUT/$name.log" | tail -1)
  echo "$name: exit $rc, state ${state:-none}" | tee -a "$OUT/proof.txt"
  grep -E "drifted|not provisioned|required package" "$OUT/$name.log" | sort -u | head -5 | sed 's/^/    /' \
      | tee -a "$OUT/proof.txt"
}
: > "$OUT/proof.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$OUT/proof.txt"
book 1-provision playbooks/spark.yml -e verify_run=proof-1
book 2-status playbooks/status.yml
cp "$PROFILE" /tmp/profile.saved
sed -i 's/^\(export TORCH_CUDA_ARCH_LIST=\).*/\1"8.0"/' "$PROFILE"
grep TORCH_CUDA_ARCH_LIST "$PROFILE" | sed 's/^/    edited: /' | tee -a "$OUT/proof.txt"
book 3-status-after-edit playbooks/status.yml
cp /tmp/profile.saved "$PROFILE"
book 4-check playbooks/spark.yml --check -e verify_run=proof-4
book 5-ml-packages-offline playbooks/spark.yml -e '{"sparkforge_components": ["ml_packages", "runtime_env", "verify"]}' \
    -e verify_run=proof-5
find / -xdev -name provisioned.json -path '*sparkforge*' 2>/dev/null | head -1 | xargs -r -I{} cp {} "$OUT/provisioned.json"
cp $REPORTS/fleet-history.jsonl "$OUT/" 2>/dev/null
exit 0
