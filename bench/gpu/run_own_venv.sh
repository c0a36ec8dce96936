#!/bin/bash
# Issue 52's proof on the GPU test machine (offline; CUDA and torch preinstalled by the machine's owner in
# /opt/torch/.venv, a venv sparkforge did not make): the default playbook with every default component and torch
# source `existing`, sparkforge_venv naming that venv.
#   1. sparkforge_venv_adopt=false: refused before any change (exit non-zero, the message names the venv and
#      sparkforge_venv_adopt); the venv's files and /etc/profile.d as they were;
#   2. sparkforge_venv_adopt=true: provisioned (exit 0), the owner's packages still there (pip freeze before = after);
#   3. status.yml: no drift (exit 0);
#   4. runtime_env_profile_path naming a file of the owner's (0600, an exported token): refused before any change,
#      naming runtime_env_profile_adopt; the file byte for byte and mode as it was.
# Every step's exit status and what it found go to $OUT/own.txt.
# Usage (repository root): WHEELS=.whl OUT=/some/dir bash bench/gpu/run_own_venv.sh
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
TORCH_VERSION=$("$PY" -c 'import torch; print(torch.__version__.split("+")[0])')
ALL=$(PYTHONPATH=$REPO/collections "$PY" -c 'import json; from ansible_collections.sparkforge.stack.plugins.module_utils.plan.validate import COMPONENTS; print(json.dumps({"sparkforge_components": list(COMPONENTS)}))')
REPORTS=/tmp/sparkforge-collected
log() { echo "$*" | tee -a "$OUT/own.txt"; }
# The venv's files (bytecode left out: the modules run with this venv's python, which may compile what it imports).
listing() { find "$VENV" /etc/profile.d -xdev ! -name '*.pyc' ! -name __pycache__ -printf '%p %m %U %s %T@\n' | sort | sha256sum | cut -c1-16; }
book() {  # book NAME PLAYBOOK ARGS...: one run, its log in $OUT/NAME.log, its exit status
  local name=$1 playbook=$2; shift 2
  "$PY" /tmp/site/bin/ansible-playbook "$playbook" -i bench/gpu/inventory.yml \
      -e sparkforge_torch_version="$TORCH_VERSION" -e verify_benchmarks=false -e verify_extended_benchmarks=false \
      -e sparkforge_fleet_report_dir=$REPORTS -e verify_controller_dir=$REPORTS "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  log "$name: exit $rc"
  grep -A2 "PLAY RECAP" "$OUT/$name.log" | sed 's/^/    /' | tee -a "$OUT/own.txt"
  return 0
}
: > "$OUT/own.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$OUT/own.txt"
log "venv: $VENV (marker: $(ls "$VENV"/.sparkforge-venv-complete 2>/dev/null || echo none))"
"$PY" -m pip freeze 2>/dev/null | sort > "$OUT/freeze-before.txt"
before=$(listing)
book 1-refused playbooks/spark.yml -e "$ALL" -e sparkforge_venv_adopt=false -e verify_run=own-1
grep -o "[^\"']*sparkforge_venv_adopt[^\"']*" "$OUT/1-refused.log" | sort -u | head -3 | sed 's/^/    /' | tee -a "$OUT/own.txt"
after=$(listing)
log "venv and /etc/profile.d after the refusal: $([ "$before" = "$after" ] && echo unchanged || echo CHANGED) ($before -> $after)"
book 2-adopted playbooks/spark.yml -e "$ALL" -e sparkforge_venv_adopt=true -e verify_run=own-2
sed -n "s/^ *- '\\{0,1\\}gpu-test  *\\([a-z]*\\) .*/    state: \\1/p" "$OUT/2-adopted.log" | tail -1 | tee -a "$OUT/own.txt"
"$PY" -m pip freeze 2>/dev/null | sort > "$OUT/freeze-after.txt"
log "owner's packages after adoption: $(comm -23 "$OUT/freeze-before.txt" "$OUT/freeze-after.txt" | wc -l) of $(wc -l < "$OUT/freeze-before.txt") gone"
book 3-status playbooks/status.yml -e sparkforge_venv_adopt=true
grep -E "drift|drifted" "$OUT/3-status.log" | sort -u | head -5 | sed 's/^/    /' | tee -a "$OUT/own.txt"
PROFILE=/root/.config/owner-profile.sh
mkdir -p "$(dirname "$PROFILE")"
printf 'export HF_TOKEN=hf_owner_secret\n' > "$PROFILE"; chmod 600 "$PROFILE"
sum_before=$(stat -c '%a %U' "$PROFILE")" $(sha256sum < "$PROFILE" | cut -c1-16)"
book 4-profile-refused playbooks/spark.yml -e "$ALL" -e sparkforge_venv_adopt=true -e runtime_env_profile_path=$PROFILE \
    -e verify_run=own-4
grep -o "[^\"']*runtime_env_profile_adopt[^\"']*" "$OUT/4-profile-refused.log" | sort -u | head -3 | sed 's/^/    /' \
    | tee -a "$OUT/own.txt"
sum_after=$(stat -c '%a %U' "$PROFILE")" $(sha256sum < "$PROFILE" | cut -c1-16)"
log "owner's profile file: $sum_before -> $sum_after ($([ "$sum_before" = "$sum_after" ] && echo unchanged || echo CHANGED))"
exit 0
