#!/bin/bash
# Issue 35 on the GPU test machine (offline; CUDA 13, torch in /opt/torch/.venv): causal-conv1d 1.7.0
# from its real sdist through the ml_packages role (bench/gpu/heavy.yml), torch source `existing`.
#   VARIANT=host    : arch list = the host's (the plan's default); built, audited, installed, imported,
#                     its op checked against a plain PyTorch reference on the GPU.
#   VARIANT=refused : arch list 8.0 (excludes the H100's 9.0): built, refused by the audit, nothing installed.
# Usage (repository root): VARIANT=host WHEELS=dir-of-ansible-wheels SDISTS=dir-with-the-sdist OUT=dir \
#        bash bench/gpu/run_heavy_causal_conv1d.sh
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
VARIANT=${VARIANT:-host}
OUT=${OUT:-$REPO/gpu-out}/$VARIANT
PY=${SPARKFORGE_GPU_PYTHON:-/opt/torch/.venv/bin/python3}
VENV=$(dirname "$(dirname "$PY")")
export SPARKFORGE_GPU_PYTHON=$PY SPARKFORGE_GPU_VENV=$VENV PYTHONUNBUFFERED=1
mkdir -p "$OUT"
cd "$REPO"
# shellcheck source=bench/gpu/lib.sh
source "$REPO/bench/gpu/lib.sh"
carry_ansible || exit 3
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | head -1 | tee "$OUT/device.txt"
echo "cpus $(nproc); $(grep -E 'MemTotal|MemAvailable' /proc/meminfo | tr -s ' ' | tr '\n' ' ')" | tee -a "$OUT/device.txt"
# The fact the fix rests on: torch's cpp_extension drops TORCH_CUDA_ARCH_LIST when a flag names an arch.
grep -n "if 'arch' in flag" "$("$PY" -c 'import torch.utils.cpp_extension as c; print(c.__file__)')" | tee "$OUT/torch-arch-rule.txt"
site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
before=$(ls -d "$site"/causal_conv1d* 2>/dev/null | wc -l)
extra=()
[ "$VARIANT" = refused ] && extra=(-e sparkforge_cuda_arch_list=8.0)
start=$(date +%s)
"$PY" /tmp/site/bin/ansible-playbook bench/gpu/heavy.yml -i bench/gpu/inventory.yml \
  -e heavy_out="$OUT" -e ml_packages_profile= -e '{"ml_packages_packages": ["causal-conv1d"]}' \
  -e ml_packages_no_index=true -e "{\"ml_packages_find_links\": [\"$SDISTS\"]}" -e ml_packages_install_prereqs=false \
  -e ml_packages_report_dir=/tmp/heavy-reports-$VARIANT "${extra[@]}" > "$OUT/ansible.log" 2>&1
rc=$?
echo "ansible-playbook exit $rc after $(( $(date +%s) - start )) s"; grep -A2 "PLAY RECAP" "$OUT/ansible.log"
cp /tmp/heavy-reports-$VARIANT/ml_packages_logs/causal-conv1d.log "$OUT/pip.log" 2>/dev/null
"$PY" - "$OUT/ml_packages_rows.json" <<'PYEOF'
import json, sys
for row in json.load(open(sys.argv[1])):
    print("row:", row["name"], row["status"], "build_s", row.get("build_s"), "env", row.get("build_env"))
    print("fixes:", row.get("fixes"))
    for lib in (row.get("audit") or {}).get("libraries", []):
        print("audit:", lib["path"], "sass", lib["sass"], "ptx", lib["ptx"], "verdicts", lib["verdicts"])
    print("reason:", row.get("reason"))
PYEOF
after=$(ls -d "$site"/causal_conv1d* 2>/dev/null | wc -l)
echo "causal_conv1d entries in site-packages: before $before, after $after"
if [ "$VARIANT" = host ]; then
  so=$(ls "$site"/causal_conv1d_cuda*.so 2>/dev/null | head -1)
  [ -n "$so" ] && /usr/local/cuda/bin/cuobjdump --list-elf --list-ptx "$so" | tee "$OUT/cuobjdump.txt"
  (cd /tmp && "$PY" "$REPO/bench/gpu/heavy_check.py") | tee "$OUT/numeric.json"; echo "numeric check exit ${PIPESTATUS[0]}"
else
  [ "$after" -eq "$before" ] && echo "refused variant: nothing installed" || echo "refused variant INSTALLED something"
fi
exit $rc
