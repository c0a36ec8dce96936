#!/bin/bash
# Issue 53 on the GPU test machine (offline; CUDA 13, torch 2.11.0+cu130 in the owner's /opt/torch/.venv, adopted):
# causal-conv1d 1.7.0 from its real sdist through the provisioning playbook (bench/gpu/cxx.yml imports
# sparkforge.stack.spark), sparkforge_components [ml_packages], arch list 9.0:
#   1. --check: preflight's plan shows the GPU build's torch release, C++ standard, compiler, arch list and fixes;
#      the role's dry run (nothing built, nothing written on the host);
#   2. for real: the role reads the C++ standard from the sdist, applies the fixes, builds, audits, installs and
#      runs the entry's `smoke` test on the GPU (the module's row: rows-run.json).
# The build takes about 8 minutes, near the device's 10-minute limit per command, and the role builds in a
# temporary directory it removes (nothing to resume from).  So the real run goes on in its own process session
# (setsid) with its state in $STATE, a directory under /tmp that stays on the machine between calls
# while it is warm, and the script is idempotent: the first call runs step 1, starts step 2 and waits for it
# until BUDGET_S; a second call (same command) only waits and collects.  On a fresh machine it starts over.
# SDISTS is the role's find-links (ml_packages_no_index): causal_conv1d-1.7.0.tar.gz (sha256 3202758494eaa7b5...d32b)
# and packaging-26.4-py3-none-any.whl: causal-conv1d requires `packaging`, which the owner's venv lacks (issue 52's
# pip freeze of it), and the modules no longer pass the carried Ansible's PYTHONPATH (/tmp/site, where issue 35's
# run found it) to the venv's pip.  The device tool sends the session's checkout, not a helper's worktree: run it
# from the checkout that holds this script, with .whl and the sdist directory ignored there and carried.
# Usage (repository root; CHECK_ONLY=1 for step 1 alone): WHEELS=.whl SDISTS=$PWD/.sdist OUT=dir bash bench/gpu/run_cxx_causal_conv1d.sh
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$REPO/gpu-out}
# Not in the checkout: the device tool does not keep an ignored directory of it between calls (stop 59's run).
STATE=${STATE:-/tmp/sparkforge-cxx-run}
BUDGET_S=${BUDGET_S:-560}
SDISTS=${SDISTS:-$REPO/.sdist}
PY=${SPARKFORGE_GPU_PYTHON:-/opt/torch/.venv/bin/python3}
VENV=$(dirname "$(dirname "$PY")")
export SPARKFORGE_GPU_PYTHON=$PY SPARKFORGE_GPU_VENV=$VENV PYTHONUNBUFFERED=1
T0=$(date +%s)
cd "$REPO"
mkdir -p "$OUT" "$STATE"
# shellcheck source=bench/gpu/lib.sh
source "$REPO/bench/gpu/lib.sh"
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$STATE/console.txt"; }

book() {  # book NAME ARGS...: bench/gpu/cxx.yml with this run's variables, output in $STATE/NAME.log
  local name=$1; shift
  "$PY" /tmp/site/bin/ansible-playbook bench/gpu/cxx.yml -i bench/gpu/inventory.yml "$@" \
    -e cxx_out="$STATE" -e cxx_run="$name" \
    -e '{"sparkforge_components": ["ml_packages"]}' -e sparkforge_torch_version="$TORCH_VERSION" \
    -e sparkforge_cuda_arch_list=9.0 -e sparkforge_ml_profile= -e '{"ml_packages_packages": ["causal-conv1d"]}' \
    -e ml_packages_no_index=true -e "{\"ml_packages_find_links\": [\"$SDISTS\"]}" \
    -e ml_packages_install_prereqs=false -e sparkforge_fleet_report_dir=/tmp/sparkforge-collected \
    > "$STATE/$name.log" 2>&1
}

real_run() {  # in its own session: the real run, the build's ninja file caught while it exists, then the evidence
  date +%s > "$STATE/real.start"
  (  # torch's cpp_extension writes build.ninja (every compile flag) into the role's temporary source tree
    while [ ! -f "$STATE/real.done" ]; do
      f=$(ls /tmp/sparkforge-ml-*/heavy-causal-conv1d/src/*/build/temp*/build.ninja 2>/dev/null | head -1)
      if [ -n "$f" ]; then sleep 2; cp "$f" "$STATE/build.ninja"; break; fi
      sleep 3
    done
  ) &
  book run
  rc=$?
  date +%s > "$STATE/real.end"
  touch "$STATE/real.done"
  site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  cp /tmp/sparkforge-reports/ml_packages_logs/causal-conv1d.log "$STATE/pip.log" 2>/dev/null
  so=$(ls "$site"/causal_conv1d_cuda*.so 2>/dev/null | head -1)
  [ -n "$so" ] && /usr/local/cuda/bin/cuobjdump --list-elf --list-ptx "$so" > "$STATE/cuobjdump.txt" 2>&1
  echo "$rc" > "$STATE/real.rc"
}

collect() {  # the evidence into $OUT: 8 files at most
  local rc=${1:-}
  if [ -f "$STATE/real.rc" ]; then
    log "real run: ansible-playbook exit $(cat "$STATE/real.rc") after $(( $(cat "$STATE/real.end") - $(cat "$STATE/real.start" 2>/dev/null || cat "$STATE/real.end") )) s"
    grep -A3 "PLAY RECAP" "$STATE/run.log" | tee -a "$STATE/console.txt"
  fi
  for f in check run; do
    [ -f "$STATE/rows-$f.json" ] || continue
    log "rows of the $f run (rows-$f.json):"
    "$PY" - "$STATE/rows-$f.json" <<'PYEOF' | tee -a "$STATE/console.txt"
import json, sys
for row in json.load(open(sys.argv[1])):
    print("  row:", row["name"], row["status"], "version", row.get("version"), "method", row.get("method_used"),
          "would_install", row.get("would_install"))
    cxx = row.get("cxx") or {}
    if cxx:
        print("  cxx: C++%s (%s), torch %s headers C++%s, compiler %s, forced %s (%s)" % (
            cxx.get("std"), cxx.get("std_from"), cxx.get("torch"), cxx.get("torch_std"), cxx.get("compiler"),
            cxx.get("forced"), cxx.get("forced_from")))
        for flag in cxx.get("ignored") or []:
            print("    ignored:", flag)
        print("  cxx problems:", cxx.get("problems"))
    print("  build_env:", row.get("build_env"), "notes:", row.get("build_notes"))
    print("  fixes:", row.get("fixes"), "build_s:", row.get("build_s"), "duration_s:", row.get("duration_s"))
    audit = row.get("audit") or {}
    for lib in audit.get("libraries", []):
        print("  audit:", lib.get("path"), "sass", lib.get("sass"), "ptx", lib.get("ptx"), "verdicts", lib.get("verdicts"))
    if audit:
        print("  audit ok:", audit.get("ok"), "targets:", audit.get("targets"))
    print("  smoke:", json.dumps(row.get("smoke")))
    print("  reason:", row.get("reason"))
PYEOF
  done
  if [ -f "$STATE/build.ninja" ]; then
    log "build.ninja (torch's cpp_extension, caught during the build): the -std and arch flags"
    grep -E "^(cflags|cuda_cflags|cuda_post_cflags) " "$STATE/build.ninja" | grep -oE -- "-std=[^ ]+|-gencode[= ][^ ]+|arch=[^ ]+|--threads [0-9]+" \
      | sort | uniq -c | tee -a "$STATE/console.txt"
  fi
  [ -f "$STATE/cuobjdump.txt" ] && { log "cuobjdump of the installed library:"; tee -a "$STATE/console.txt" < "$STATE/cuobjdump.txt"; }
  cp "$STATE/console.txt" "$OUT/console.txt"
  for f in check.log run.log rows-check.json rows-run.json pip.log build.ninja; do
    [ -f "$STATE/$f" ] && cp "$STATE/$f" "$OUT/$f"
  done
  [ -n "$rc" ] && exit "$rc"
}

snapshot() {  # what there is so far into $OUT (it comes back even when the device tool kills the call at its limit)
  [ -f "$STATE/real.done" ] || cp /tmp/sparkforge-reports/ml_packages_logs/causal-conv1d.log "$STATE/pip.log" 2>/dev/null
  cp "$STATE/console.txt" "$OUT/console.txt" 2>/dev/null
  for f in check.log run.log rows-check.json rows-run.json pip.log build.ninja; do
    [ -f "$STATE/$f" ] && cp "$STATE/$f" "$OUT/$f"
  done
}

wait_real() {  # until the real run ends or this call's budget is spent (a snapshot into $OUT every 15 s)
  n=0
  while [ ! -f "$STATE/real.rc" ] && [ $(( $(date +%s) - T0 )) -lt "$BUDGET_S" ]; do
    sleep 5; n=$((n + 1)); [ $((n % 3)) = 0 ] && snapshot
  done
  if [ -f "$STATE/real.rc" ]; then
    collect "$(cat "$STATE/real.rc")"
  fi
  log "the real run is still going after $(( $(date +%s) - $(cat "$STATE/real.start") )) s (pid $(cat "$STATE/real.pid")): call again"
  tail -5 "$STATE/run.log" | tee -a "$STATE/console.txt"
  collect 75
}

[ "${1:-}" = __real ] && { TORCH_VERSION=$(cat "$STATE/torch_version"); real_run; exit 0; }

if [ -f "$STATE/real.rc" ]; then
  log "second call: the real run had ended"; collect "$(cat "$STATE/real.rc")"
elif [ -f "$STATE/real.pid" ] && kill -0 "$(cat "$STATE/real.pid")" 2>/dev/null; then
  log "second call: waiting for the real run (pid $(cat "$STATE/real.pid"))"; wait_real
fi

# A fresh start.
rm -f "$STATE"/*
carry_ansible || exit 3
log "$(nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | head -1); cpus $(nproc); $(grep MemAvailable /proc/meminfo | tr -s ' ')"
log "c++: $(c++ --version | head -1); nvcc: $(/usr/local/cuda/bin/nvcc --version | tail -2 | head -1)"
TORCH_VERSION=$("$PY" -c 'import torch; print(torch.__version__.split("+")[0])')
echo "$TORCH_VERSION" > "$STATE/torch_version"
log "torch $("$PY" -c 'import torch; print(torch.__version__)') in $VENV"
# What torch's cpp_extension adds when a build gives no -std (the plan's "torch's cpp_extension adds -std=c++N").
ext=$("$PY" -c 'import torch.utils.cpp_extension as c; print(c.__file__)')
log "cpp_extension -std lines: $(grep -n -- "-std=c++" "$ext" | tr -s ' ' | head -6 | tr '\n' '|')"
log "sdists: $(cd "$SDISTS" && sha256sum ./* | tr '\n' ' ')"
log "causal_conv1d in site-packages before: $(ls -d "$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"/causal_conv1d* 2>/dev/null | wc -l)"

start=$(date +%s)
book check --check --diff
rc=$?
log "check run: ansible-playbook --check exit $rc after $(( $(date +%s) - start )) s"
grep -A3 "PLAY RECAP" "$STATE/check.log" | tee -a "$STATE/console.txt"
log "the plan's GPU source builds (check.log):"
grep -A12 "GPU source builds" "$STATE/check.log" | tee -a "$STATE/console.txt"

snapshot  # step 1's output into $OUT before the build starts
# CHECK_ONLY=1: step 1 alone (a call too short for the build).
[ "${CHECK_ONLY:-}" = 1 ] && collect "$rc"

setsid nohup bash "$REPO/bench/gpu/run_cxx_causal_conv1d.sh" __real > "$STATE/real.out" 2>&1 < /dev/null &
echo $! > "$STATE/real.pid"
log "real run started (pid $(cat "$STATE/real.pid"))"
wait_real
