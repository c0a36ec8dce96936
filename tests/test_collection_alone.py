"""The collection's unit tests need nothing outside the collection (issue 45, item 3): the collection alone,
copied to <tmp>/ansible_collections/sparkforge/stack with no sparkforge checkout above it, runs its tests/unit
with pytest and they pass, and none of them imported a file of the checkout.

The child's sys.path holds no path of the checkout: this Python's environment stays (a venv made inside the
checkout, which has pytest and ansible), and the editable install's entry (the checkout's src/) is taken out
before pytest starts. Its environment names no checkout path either, but PATH and VIRTUAL_ENV (the same venv)."""

import os
import shutil
import subprocess
import sys

from helpers import COLLECTION, REPO

# The child: the checkout's paths out of sys.path, the unit tests run, then every module it imported must come
# from the copy or this Python's environment, never from the checkout.
CHILD = r"""
import os, sys
checkout, prefix = sys.argv[1], sys.prefix
def ours(path):
    path = os.path.abspath(path or ".")
    return (path + os.sep).startswith(checkout + os.sep) and not (path + os.sep).startswith(prefix + os.sep)
sys.path[:] = [p for p in sys.path if not ours(p)]
import pytest
rc = pytest.main(sys.argv[2:])
leaked = sorted(name for name, module in list(sys.modules.items()) if ours(getattr(module, "__file__", None) or ""))
if leaked:
    print("imported from the checkout: %s" % ", ".join(leaked))
    rc = rc or 3
sys.exit(int(rc))
"""


def test_the_collection_alone_passes_its_unit_tests(tmp_path):
    root = tmp_path / "alone"
    copy = root / "ansible_collections" / "sparkforge" / "stack"
    shutil.copytree(COLLECTION, str(copy), ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache"))
    env = dict((k, v) for k, v in os.environ.items() if REPO not in v or k in ("PATH", "VIRTUAL_ENV"))
    env["PYTHONPATH"] = str(root)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # Their own report (scripts/test counts it beside pytest's: the full run's summary names them, skips too).
    junit = os.environ.get("SPARKFORGE_JUNIT_ALONE")
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, REPO, "-q", "-ra", "-p", "no:cacheprovider",
         "--basetemp", str(tmp_path / "basetemp"), "tests/unit"] + (["--junitxml", junit] if junit else []),
        cwd=str(copy), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
        timeout=1800, check=False)
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert " passed" in proc.stdout.strip().splitlines()[-1] and " failed" not in proc.stdout, proc.stdout[-3000:]
    print(proc.stdout.strip().splitlines()[-1])  # their count, with -rA in pytest's report
