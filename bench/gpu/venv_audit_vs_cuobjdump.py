"""Issue 35 item 4 on the GPU machine: the venv-wide audit (module_utils/packages/gpu_audit.venv_audit) timed
against cuobjdump --list-elf / --list-ptx over the same libraries, and their SASS lists compared.

Usage: python3 bench/gpu/venv_audit_vs_cuobjdump.py SITE_PACKAGES TARGET OUT.json [cuobjdump]
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "collections"))
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import fatbin  # noqa: E402
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import gpu_audit  # noqa: E402

site, target, out = sys.argv[1:4]
cuobjdump = sys.argv[4] if len(sys.argv) > 4 else "/usr/local/cuda/bin/cuobjdump"
started = time.time()
result = gpu_audit.venv_audit(site, target)
audit_s = time.time() - started
libs = [lib for slot in result["packages"].values() for lib in slot["libraries"]]
size = sum(os.path.getsize(os.path.join(site, lib["path"])) for lib in libs)
started = time.time()
disagree = []
for lib in libs:
    path = os.path.join(site, lib["path"])
    proc = subprocess.run([cuobjdump, "--list-elf", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True)
    subprocess.run([cuobjdump, "--list-ptx", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    elf = sorted(set(fatbin.parse_cuobjdump_list(proc.stdout)))
    mine = sorted(set(a if not a.endswith("f") else a[:-1] for a in lib["sass"]))
    if elf != mine:
        disagree.append({"path": lib["path"], "audit": mine, "cuobjdump": elf})
cuobjdump_s = time.time() - started
summary = {"site": site, "target": target, "files_scanned": result["scanned"], "gpu_libraries": len(libs),
           "gpu_bytes": size, "packages": len(result["packages"]), "audit_s": round(audit_s, 2),
           "cuobjdump_s": round(cuobjdump_s, 2), "sass_disagreements": disagree, "verdict": result["verdict"],
           "failures": result["failures"], "notes": result["notes"],
           "per_package": dict((k, v["verdict"]) for k, v in sorted(result["packages"].items()))}
with open(out, "w") as handle:
    json.dump(summary, handle, indent=1)
print(json.dumps(dict((k, v) for k, v in summary.items() if k != "per_package"), indent=1))
print("packages:", summary["per_package"])
