"""stack_venv: a real venv made in tmp, left without pip as a killed run leaves it, then repaired."""

import glob
import os
import shutil
import subprocess
import sys

from ansible_collections.sparkforge.stack.tests.unit.utils.harness import run_module

from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import JobError, LocalSystem
from ansible_collections.sparkforge.stack.plugins.module_utils.host.venv import MARKER, VenvJob, pending_path

# The interpreter that makes the venvs: the one running the tests (it has ensurepip, as python3-venv brings).
PYTHON = sys.executable


def _imports_pip(venv):
    return subprocess.run([os.path.join(venv, "bin", "python"), "-c", "import pip"], check=False).returncode == 0


def _job(venv, check_mode=False):
    return VenvJob({"path": str(venv), "python": PYTHON}, LocalSystem(), check_mode)


def test_made_once_marked_not_remade_and_an_incomplete_one_remade(tmp_path):
    venv = tmp_path / "opt" / "venv"
    args = {"path": str(venv), "python": PYTHON}
    preview, rc = run_module("stack_venv", args, check_mode=True)
    assert rc == 0 and preview["changed"] and preview["action"] == "create" and not venv.exists(), preview
    made, rc = run_module("stack_venv", args)
    assert rc == 0 and made["action"] == "create" and (venv / MARKER).exists() and _imports_pip(str(venv)), made
    assert not os.path.exists(pending_path(str(venv)))
    again = _job(venv).run()
    assert not again["changed"] and again["action"] == "none", again

    # A venv of an earlier version: complete, no marker -> marked, the same files kept.
    (venv / MARKER).unlink()
    keep = venv / "kept-by-the-user.txt"
    keep.write_text("mine")
    marked = _job(venv).run()
    assert marked["changed"] and marked["action"] == "mark" and (venv / MARKER).exists() and keep.exists(), marked

    # What Ctrl-C inside `python -m venv` leaves: python, no pip (and no marker).
    for pip_dir in glob.glob(str(venv / "lib" / "python*" / "site-packages" / "pip*")):
        shutil.rmtree(pip_dir)
    (venv / MARKER).unlink()
    assert not _imports_pip(str(venv))
    check, rc = run_module("stack_venv", args, check_mode=True)
    assert rc == 0 and check["changed"] and check["msg"] == "would remake the incomplete venv at %s: no pip" % venv
    assert not _imports_pip(str(venv)) and keep.exists(), "check mode changed the venv"
    # The marker alone is no proof either: a marked venv without pip is remade too.
    (venv / MARKER).write_text("{}\n")
    repaired = _job(venv).run()
    assert repaired["action"] == "remake" and repaired["reason"] == "no pip", repaired
    assert _imports_pip(str(venv)) and (venv / MARKER).exists() and not keep.exists()
    assert not _job(venv).run()["changed"]


def test_a_directory_that_is_not_a_venv_is_refused_and_kept(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "results.csv").write_text("1,2\n")
    try:
        _job(data).run()
    except JobError as exc:
        assert str(data) in exc.msg and "not a venv" in exc.msg and "nothing changed" in exc.msg
    else:
        raise AssertionError("a directory holding user files was taken as a venv")
    assert (data / "results.csv").read_text() == "1,2\n"
    # One a killed run of this job was making (its pending file beside it) is ours to remake.
    (data / "bin").mkdir()
    open(pending_path(str(data)), "w").close()
    plan = _job(data, check_mode=True).plan()
    assert plan.state["action"] == "remake" and plan.result["reason"] == "no bin/python", plan.result
