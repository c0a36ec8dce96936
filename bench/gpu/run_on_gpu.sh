#!/bin/bash
# What runs on the GPU test machine (H100/H200, CUDA 13, torch preinstalled, no registry):
#   1. installs Ansible from the wheels carried in $WHEELS (ansible-core 2.19.14 + deps, cp312 x86_64),
#   2. compares the fat binary audit with cuobjdump on torch's libtorch_cuda.so and times both,
#   3. runs playbooks/spark.yml over the local connection with torch source `existing` (the machine's torch)
#      and components runtime_env + verify: preflight, fleet planning, runtime_env, verify, summary,
#   4. copies the reports to $OUT (the device tool brings them back).
# Usage (from the repository root): WHEELS=.whl OUT=/some/dir bash bench/gpu/run_on_gpu.sh
# SKIP_AUDIT=1 leaves out step 2; VERIFY_EXTRA adds ansible-playbook arguments (e.g. "-e verify_bench_scale=2").
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
WHEELS=${WHEELS:-$REPO/.whl}
OUT=${OUT:-$REPO/gpu-out}
PY=${SPARKFORGE_GPU_PYTHON:-$(command -v python3)}
export SPARKFORGE_GPU_PYTHON=$PY
export SPARKFORGE_GPU_VENV=${SPARKFORGE_GPU_VENV:-$(dirname "$(dirname "$PY")")}
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
cd "$REPO"
echo "== $(date -u +%FT%TZ) host $(hostname) python $PY"
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv

echo "== install Ansible from carried wheels"
# shellcheck source=bench/gpu/lib.sh
source "$REPO/bench/gpu/lib.sh"
carry_ansible || exit 3
"$PY" -c 'import ansible; print("ansible-core", ansible.__version__ if hasattr(ansible, "__version__") else "")' || true

if [ -z "${SKIP_AUDIT:-}" ]; then
echo "== audit vs cuobjdump"
TORCH_LIB=$("$PY" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
CAP=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' ')
command -v zstd >/dev/null && echo "zstd: $(command -v zstd)" || echo "zstd: not installed"
"$PY" bench/audit_vs_cuobjdump.py --cuobjdump "${CUOBJDUMP:-/usr/local/cuda/bin/cuobjdump}" --target "$CAP" \
    --repeat 3 --out "$OUT/arch-audit-torch.json" "$TORCH_LIB/libtorch_cuda.so" "$TORCH_LIB/libc10_cuda.so" \
    || echo "audit/cuobjdump DISAGREE (rc=$?)"
/usr/bin/time -f "whole torch/lib directory audit: %e s" "$PY" -c "
import sys; sys.path.insert(0, 'collections')
from ansible_collections.sparkforge.stack.plugins.module_utils import fatbin
r = fatbin.audit('$TORCH_LIB', target='$CAP')
print('torch/lib verdict', r['verdict'], [(l['path'], l['verdict']) for l in r['libraries']])
" 2>&1 | tee "$OUT/torch-lib-audit.txt"
fi

TORCH_VERSION=$("$PY" -c 'import torch; print(torch.__version__.split("+")[0])')
echo "== ansible-playbook playbooks/spark.yml (torch $TORCH_VERSION, source existing)"
export ANSIBLE_CONFIG=$REPO/ansible.cfg
export ANSIBLE_LOCAL_TEMP=/tmp/ansible-local ANSIBLE_REMOTE_TEMP=/tmp/ansible-remote
set +e
"$PY" /tmp/site/bin/ansible-playbook playbooks/spark.yml -i bench/gpu/inventory.yml \
    -e sparkforge_torch_version="$TORCH_VERSION" -e sparkforge_fleet_report_dir=/tmp/sparkforge-collected \
    -e verify_controller_dir=/tmp/sparkforge-collected -e verify_run=gpu-test ${VERIFY_EXTRA:-} 2>&1 | tee "$OUT/ansible.log"
RC=${PIPESTATUS[0]}
set -e
echo "ansible-playbook exit $RC" | tee -a "$OUT/ansible.log"
for f in verify.json verify.md verify.png; do
    cp /tmp/sparkforge-collected/gpu-test/gpu-test/$f "$OUT/" 2>/dev/null || echo "missing $f"
done
cp /tmp/sparkforge-collected/gpu-test/summary.md "$OUT/fleet-summary.md" 2>/dev/null || echo "missing summary"
cp /tmp/sparkforge-collected/fleet-summary.json "$OUT/" 2>/dev/null || echo "missing fleet-summary.json"
exit $RC
