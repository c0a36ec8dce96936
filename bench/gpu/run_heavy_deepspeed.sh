#!/bin/bash
# Issue 43 on the GPU test machine (offline; CUDA 13, torch 2.11 in /opt/torch/.venv): deepspeed 0.19.8 from its
# real sdist through the ml_packages role (bench/gpu/heavy.yml), as a gpu_build, with its op selection narrowed
# to the fused Adam op (DS_BUILD_OPS=0, DS_BUILD_FUSED_ADAM=1: the manifest's entry otherwise, declared through
# ml_packages_extra_matrix as a user would), in one call:
#   host    : arch list = the host's (the role's default without a plan); built, audited (device code against the
#             requested list and the GPU, links against the host), installed, its smoke test run by the module
#             (FusedAdam against torch.optim.AdamW on the GPU, 5 steps); cuobjdump of the installed op.
#   other   : the same installed op library held to a plan for another arch (10.0): refused by the audit.
#   refused : the role again with arch list 8.0: the build record differs, so it rebuilds, and the audit refuses
#             the wheel (nothing runs on 9.0); the installed op is unchanged (sha256 before/after).
# Usage (repository root): WHEELS=dir-of-ansible-wheels SDISTS=dir-with-the-sdist-and-its-missing-deps OUT=dir \
#        bash bench/gpu/run_heavy_deepspeed.sh
# VARIANT=all (default) runs the three in order; VARIANT=host or VARIANT=refused runs one (refused after host, on
# the same machine: it needs the installed op), should one device call not hold both builds.
# (the sdist and deepspeed's runtime dependencies absent from the machine: hjson, pydantic and its own; see
#  docs/results/gpu-deepspeed-h200/README.md for how they were downloaded)
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$REPO/gpu-out}
VARIANT=${VARIANT:-all}
PY=${SPARKFORGE_GPU_PYTHON:-/opt/torch/.venv/bin/python3}
VENV=$(dirname "$(dirname "$PY")")
export SPARKFORGE_GPU_PYTHON=$PY SPARKFORGE_GPU_VENV=$VENV PYTHONUNBUFFERED=1
mkdir -p "$OUT/host" "$OUT/refused"
cd "$REPO"
# shellcheck source=bench/gpu/lib.sh
source "$REPO/bench/gpu/lib.sh"
carry_ansible || exit 3
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | head -1 | tee "$OUT/device.txt"
echo "cpus $(nproc); $(grep -E 'MemTotal|MemAvailable' /proc/meminfo | tr -s ' ' | tr '\n' ' ')" | tee -a "$OUT/device.txt"
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' | tee -a "$OUT/device.txt"
# The manifest's deepspeed entry with its op selection narrowed to the fused Adam op.
"$PY" - "$OUT/extra.json" <<'PYEOF'
import json, sys, yaml
path = "collections/ansible_collections/sparkforge/stack/roles/manifest/defaults/main/ml_packages.yml"
entry = yaml.safe_load(open(path))["sparkforge_ml_packages"]["deepspeed"]
env = entry["source"]["env"]
for name in [n for n in env if n.startswith("DS_BUILD_")]:
    del env[name]
env.update(DS_BUILD_OPS="0", DS_BUILD_FUSED_ADAM="1")
json.dump({"ml_packages_extra_matrix": {"deepspeed": entry}}, open(sys.argv[1], "w"), indent=1)
print("op selection:", dict((k, v) for k, v in env.items() if k.startswith("DS_")))
PYEOF
site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
op_sha() { sha256sum "$site"/deepspeed/ops/adam/fused_adam_op*.so 2>/dev/null | cut -c1-64; }

play() {  # $1: variant, then extra ansible-playbook arguments
  local variant=$1; shift
  local start; start=$(date +%s)
  "$PY" /tmp/site/bin/ansible-playbook bench/gpu/heavy.yml -i bench/gpu/inventory.yml -e @"$OUT/extra.json" \
    -e heavy_out="$OUT/$variant" -e ml_packages_profile= -e '{"ml_packages_packages": ["deepspeed"]}' \
    -e ml_packages_no_index=true -e "{\"ml_packages_find_links\": [\"$SDISTS\"]}" -e ml_packages_install_prereqs=false \
    -e ml_packages_report_dir=/tmp/heavy-reports-$variant "$@" > "$OUT/$variant/ansible.log" 2>&1
  local rc=$?
  echo "$variant: ansible-playbook exit $rc after $(( $(date +%s) - start )) s"; grep -A2 "PLAY RECAP" "$OUT/$variant/ansible.log"
  cp /tmp/heavy-reports-$variant/ml_packages_logs/deepspeed.log "$OUT/$variant/pip.log" 2>/dev/null
  "$PY" - "$OUT/$variant/ml_packages_rows.json" <<'PYEOF'
import json, sys
for row in json.load(open(sys.argv[1])):
    print("row:", row["name"], row["status"], "build_s", row.get("build_s"), "env", row.get("build_env"))
    print("build record:", json.dumps(row.get("build"), sort_keys=True))
    for lib in (row.get("audit") or {}).get("libraries", []):
        print("audit:", lib["path"], "sass", lib["sass"], "ptx", lib["ptx"], "verdicts", lib["verdicts"],
              "missing", lib.get("missing"), "extra", lib.get("extra"), "links", lib.get("links"))
    print("smoke:", json.dumps(row.get("smoke"), sort_keys=True))
    print("reason:", row.get("reason"))
PYEOF
  return $rc
}

rc_host=0; rc_refused=0
if [ "$VARIANT" != refused ]; then play host; rc_host=$?; fi
so=$(ls "$site"/deepspeed/ops/adam/fused_adam_op*.so 2>/dev/null | head -1)
if [ -n "$so" ]; then
  /usr/local/cuda/bin/cuobjdump --list-elf --list-ptx "$so" | tee "$OUT/host/cuobjdump.txt"
  # The same library, held to a plan for another arch (10.0): what the audit says (refused).
  "$PY" - "$so" <<'PYEOF' | tee "$OUT/other-arch.txt"
import os, sys, tempfile, zipfile, yaml
sys.path.insert(0, "collections")
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import gpu_audit
entry = yaml.safe_load(open("collections/ansible_collections/sparkforge/stack/roles/manifest/defaults/main/"
                            "ml_packages.yml"))["sparkforge_ml_packages"]["deepspeed"]
with tempfile.TemporaryDirectory() as tmp:
    wheel = os.path.join(tmp, "deepspeed-0.19.8-cp312-cp312-linux_x86_64.whl")
    with zipfile.ZipFile(wheel, "w") as whl:
        whl.write(sys.argv[1], "deepspeed/ops/adam/" + os.path.basename(sys.argv[1]))
    for asked in ("9.0", "10.0"):
        result = gpu_audit.audit_wheel(wheel, [asked], "deepspeed", {"TORCH_CUDA_ARCH_LIST": asked}, entry["gpu_build"])
        print("plan %s: ok %s: %s" % (asked, result["ok"], result["message"] or "-"))
PYEOF
else
  echo "no fused_adam_op library installed"
fi
if [ "$VARIANT" != host ]; then
  before=$(op_sha)
  play refused -e sparkforge_cuda_arch_list=8.0; rc_refused=$?
  after=$(op_sha)
  echo "fused_adam_op sha256 before the refused run: ${before:-none}; after: ${after:-none}"
  [ -n "$before" ] && [ "$before" = "$after" ] && echo "refused run: the installed op is unchanged" \
    || echo "refused run: the installed op CHANGED or is missing"
fi
exit $(( rc_host || rc_refused ))
