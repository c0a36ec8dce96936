"""stack_venv: a real venv made in tmp, left without pip as a killed run leaves it, then repaired; a venv the user
made (with pip, or without it as `uv venv` and `python -m venv --without-pip` make them) refused untouched, or
adopted keeping its packages (issue 52)."""

import glob
import json
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


def _job(venv, check_mode=False, adopt=False):
    return VenvJob({"path": str(venv), "python": PYTHON, "adopt": adopt}, LocalSystem(), check_mode)


def _site(venv):
    return glob.glob(str(venv / "lib" / "python*" / "site-packages"))[0]


def users_package(venv):
    """A package of the user's in the venv: an importable module and its dist-info, as pip or uv leave them."""
    site = _site(venv)
    os.makedirs(os.path.join(site, "mylib"))
    with open(os.path.join(site, "mylib", "__init__.py"), "w") as handle:
        handle.write("VALUE = 42\n")
    info = os.path.join(site, "mylib-1.0.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as handle:
        handle.write("Metadata-Version: 2.1\nName: mylib\nVersion: 1.0\n")


def listing(top):
    """Every path under ``top`` with its mode and, for a file, its bytes: what any change would show."""
    out = {}
    for base, dirs, files in os.walk(str(top)):
        for name in dirs + files:
            path = os.path.join(base, name)
            st = os.lstat(path)
            data = None
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, "rb") as handle:
                    data = handle.read()
            out[os.path.relpath(path, str(top))] = (st.st_mode, data)
    return out


def test_made_once_not_remade_and_an_incomplete_one_of_ours_remade(tmp_path):
    venv = tmp_path / "opt" / "venv"
    args = {"path": str(venv), "python": PYTHON}
    preview, rc = run_module("stack_venv", args, check_mode=True)
    assert rc == 0 and preview["changed"] and preview["action"] == "create" and not venv.exists(), preview
    made, rc = run_module("stack_venv", args)
    assert rc == 0 and made["action"] == "create" and (venv / MARKER).exists() and _imports_pip(str(venv)), made
    assert not os.path.exists(pending_path(str(venv)))
    again = _job(venv).run()
    assert not again["changed"] and again["action"] == "none", again

    # Ours (the marker in it) without pip, as a user's pip uninstall leaves it: remade, pip back.
    for pip_dir in glob.glob(str(venv / "lib" / "python*" / "site-packages" / "pip*")):
        shutil.rmtree(pip_dir)
    assert not _imports_pip(str(venv))
    check, rc = run_module("stack_venv", args, check_mode=True)
    assert rc == 0 and check["changed"] and check["msg"] == "would remake the incomplete venv at %s: no pip" % venv
    assert not _imports_pip(str(venv)), "check mode changed the venv"
    repaired = _job(venv).run()
    assert repaired["action"] == "remake" and repaired["reason"] == "no pip", repaired
    assert _imports_pip(str(venv)) and (venv / MARKER).exists()
    assert not _job(venv).run()["changed"]


def test_a_venv_without_the_marker_is_the_users_refused_then_adopted_keeping_its_packages(tmp_path):
    """Before: a venv with pip and no marker was marked as sparkforge's; one without pip (uv venv, python -m venv
    --without-pip) was removed and made again, its packages gone, exit 0."""
    for pip in (False, True):
        venv = tmp_path / ("with-pip" if pip else "without-pip") / "venv"
        subprocess.run([PYTHON, "-m", "venv"] + ([] if pip else ["--without-pip"]) + [str(venv)], check=True)
        users_package(venv)
        before = listing(venv)
        args = {"path": str(venv), "python": PYTHON}
        row = "O02" if pip else "O01"  # docs/bad-inputs.md
        for check in (True, False):
            refused, rc = run_module("stack_venv", args, check_mode=check)
            assert rc != 0, (row, refused)
            assert refused["msg"].startswith("sparkforge_venv=%s: %s is a venv sparkforge did not make" % (venv, venv))
            assert ("with pip" if pip else "without pip") in refused["msg"] and "mylib-1.0" in refused["msg"]
            assert "set sparkforge_venv_adopt: true" in refused["msg"] and "set sparkforge_venv to another path" \
                in refused["msg"] and "nothing was changed" in refused["msg"], refused
            assert listing(venv) == before, "a refused run changed the user's venv"
        preview = _job(venv, check_mode=True, adopt=True).run()
        assert preview["action"] == "adopt" and preview["msg"].startswith("would adopt the venv at %s" % venv)
        assert listing(venv) == before
        adopted, rc = run_module("stack_venv", dict(args, adopt=True))
        assert rc == 0 and adopted["action"] == "adopt", adopted
        assert ("python -m ensurepip" in adopted["msg"]) is (not pip), adopted
        # Every file of the user's is still there, byte for byte; pip now imports; the marker says adopted.
        after = listing(venv)
        assert all(after.get(path) == what for path, what in before.items()), "adoption changed the user's files"
        assert _imports_pip(str(venv))
        assert subprocess.check_output([str(venv / "bin" / "python"), "-c", "import mylib; print(mylib.VALUE)"]) \
            == b"42\n"
        with open(str(venv / MARKER)) as handle:
            assert json.load(handle)["adopted"] is True
        assert not _job(venv).run()["changed"], "an adopted venv is the run's from then on"
    # An adopted venv that loses pip gets it back with ensurepip: never removed.
    for pip_dir in glob.glob(str(venv / "lib" / "python*" / "site-packages" / "pip*")):
        shutil.rmtree(pip_dir)
    again = _job(venv).run()
    assert again["action"] == "adopt" and _imports_pip(str(venv)), again
    assert os.path.exists(os.path.join(_site(venv), "mylib", "__init__.py"))


def test_a_directory_that_is_not_a_venv_is_refused_and_kept_adopt_or_not(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "results.csv").write_text("1,2\n")
    for adopt in (False, True):  # O03: adopted or not
        try:
            _job(data, adopt=adopt).run()
        except JobError as exc:
            assert str(data) in exc.msg and "not a venv" in exc.msg and "nothing was changed" in exc.msg, exc.msg
            assert "move it away or set sparkforge_venv to another path" in exc.msg
        else:
            raise AssertionError(("O03", "a directory holding user files was taken as a venv"))
    assert (data / "results.csv").read_text() == "1,2\n"
    # One a killed run of this job was making (its pending file beside it) is ours to remake.
    (data / "bin").mkdir()
    open(pending_path(str(data)), "w").close()
    plan = _job(data, check_mode=True).plan()
    assert plan.state["action"] == "remake" and plan.result["reason"] == "no bin/python", plan.result


def test_an_empty_directory_is_made_into_the_venv_in_place(tmp_path):
    venv = tmp_path / "venv"
    venv.mkdir(mode=0o750)
    made = _job(venv).run()
    assert made["action"] == "create" and _imports_pip(str(venv)), made
    # The directory itself was kept (not removed and made again): its mode is the user's.
    assert os.stat(str(venv)).st_mode & 0o777 == 0o750
