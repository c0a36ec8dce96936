#!/bin/bash
# The whole-machine verification on a host with two or more GPUs (device kind nvidia-h200-x2):
#   1. the NVLink/PCIe facts verify reads (nvidia-smi nvlink -s, topo -m, PCIe link),
#   2. an independent all_reduce measurement (bench/gpu/allreduce_ref.py), same sizes as verify,
#   3. playbooks/spark.yml with components runtime_env + verify (torch source `existing`) through
#      run_on_gpu.sh: every GPU's checks, the collectives, benchmarks, report,
#   4. verify again with a failure injected on GPU 1 (verify_inject_failure, a test-only variable):
#      the host must fail and the failure must name GPU 1.
# Usage (repository root): WHEELS=.whl OUT=/some/dir bash bench/gpu/run_2gpu.sh
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$REPO/gpu-out}
PY=${SPARKFORGE_GPU_PYTHON:-$(command -v python3)}
mkdir -p "$OUT"
cd "$REPO"
{
  echo "== nvidia-smi nvlink -s"; nvidia-smi nvlink -s
  echo "== nvidia-smi topo -m"; nvidia-smi topo -m
  echo "== PCIe links"; nvidia-smi --query-gpu=index,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader,nounits
} > "$OUT/extras.txt" 2>&1
echo "== independent all_reduce"
"$PY" bench/gpu/allreduce_ref.py "$OUT/allreduce-ref.json" 20 2>&1 | tail -40
SKIP_AUDIT=1 WHEELS=${WHEELS:-$REPO/.whl} OUT=$OUT bash bench/gpu/run_on_gpu.sh
RC=$?
cp /tmp/sparkforge-collected/gpu-test/gpu-test/verify-collectives.png "$OUT/" 2>/dev/null || echo "missing verify-collectives.png"
rm -f "$OUT/fleet-summary.json"
echo "== verify with a failure injected on GPU 1 (test-only variable)"
export PYTHONPATH=/tmp/site ANSIBLE_CONFIG=$REPO/ansible.cfg
"$PY" /tmp/site/bin/ansible-playbook playbooks/spark.yml -i bench/gpu/inventory.yml --tags preflight,verify \
    -e sparkforge_torch_version="$("$PY" -c 'import torch; print(torch.__version__.split("+")[0])')" \
    -e verify_controller_dir=/tmp/sparkforge-inject -e verify_run=inject -e sparkforge_fleet_report_dir=/tmp/sparkforge-inject \
    -e verify_benchmarks=false -e verify_extended_benchmarks=false -e verify_collectives=false \
    -e '{"verify_inject_failure": {"gpu": 1, "check": "gemm_bf16"}}' >> "$OUT/extras.txt" 2>&1
echo "inject run exit $? (expected non-zero)" | tee -a "$OUT/extras.txt"
grep -o "Verification failed on [^\"]*" "$OUT/extras.txt" | head -2
exit $RC
