# -*- coding: utf-8 -*-
"""fleet_wheel_install's job (module_utils/fleet/fleet_install_job.py) on a stand-in host: copies that
are not the builder's are refused before anything changes, the plan names each wheel to reinstall
and the host record's move, apply runs pip through the system and records the install; a failing
pip is the one error with its output."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import io
import os
import platform
import zipfile
import sys

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import fleet_wheels as fw
from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import generations as gen
from ansible_collections.sparkforge.stack.plugins.module_utils.fleet.fleet_install_job import FleetWheelInstallJob
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import JobError

sys.path.insert(0, os.path.dirname(__file__))
from fake_system import FakeSystem  # noqa: E402  pylint: disable=wrong-import-position

WHEEL = "torch-2.9.1-py3-none-any.whl"


def wheel_bytes(name="torch", version="2.9.1", info=None):
    """A wheel pip would open: its .dist-info METADATA (Name, Version) and RECORD."""
    out = io.BytesIO()
    info = info or "%s-%s.dist-info" % (name, version)
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr(info + "/METADATA", "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version))
        archive.writestr(info + "/RECORD", "")
    return out.getvalue()


BUILT = wheel_bytes()


@pytest.fixture
def host(tmp_path):
    copies = tmp_path / "copies"
    copies.mkdir()
    (copies / WHEEL).write_bytes(BUILT)
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").write_text("")
    (tmp_path / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.12.3\n")
    return {"venv": str(tmp_path / "venv"), "wheel_dir": str(copies), "host_record": str(tmp_path / "host.json"),
            "wheels": [{"name": "torch", "file": WHEEL, "sha256": hashlib.sha256(BUILT).hexdigest()}]}


def params(host, **more):
    args = dict(host, pip_extra_args="", python="python3", copies="fail", rehash=False, generation=None,
                venv_state=[])
    args.update(more)
    return args


def pip_answers(rc=0, err=""):
    """The venv's python: pip install (the isolated argv) answers ``rc``."""
    return lambda argv: (rc, "Successfully installed torch-2.9.1\n" if rc == 0 else "", err)


def test_copies_that_are_not_the_builders_are_refused_before_anything_changes(host):
    with open(os.path.join(host["wheel_dir"], WHEEL), "wb") as handle:
        handle.write(b"another torch")
    system = FakeSystem()
    with pytest.raises(JobError) as info:
        FleetWheelInstallJob(params(host), system).run()
    assert info.value.msg.startswith("the class's wheels on this host are not the builder's, nothing installed: ")
    assert info.value.result["mismatches"] == [WHEEL]
    assert system.ran == [] and not os.path.exists(os.path.join(host["venv"], fw.RECORD_NAME))


def test_check_mode_plans_the_reinstall_and_the_record_move_and_changes_nothing(host):
    generation = {"lineage": "L1", "class": "spark", "number": 1}
    system = FakeSystem()
    job = FleetWheelInstallJob(params(host, generation=generation), system, check_mode=True)
    plan = job.plan()
    assert plan.changes == ["reinstall %s: not what the venv's record holds" % WHEEL,
                            "move the host record %s to generation 1 of L1: first install (generation 1)"
                            % host["host_record"]]
    res = FleetWheelInstallJob(params(host, generation=generation), system, check_mode=True).run()
    assert res["changed"] is True and res["reinstalled"] == ["torch"] and res["how"] == "first install (generation 1)"
    assert system.ran == [] and not os.path.exists(host["host_record"])


def test_apply_installs_through_the_system_and_records_it_then_nothing_to_do(host):
    generation = {"lineage": "L1", "class": "spark", "number": 1}
    python = os.path.join(host["venv"], "bin", "python")
    system = FakeSystem(commands={python: pip_answers()})
    res = FleetWheelInstallJob(params(host, generation=generation), system).run()
    assert res["changed"] is True and [cmd[0] for cmd in system.ran] == [python]
    assert os.path.join(host["wheel_dir"], WHEEL) in system.ran[0]
    assert fw.read_record(os.path.join(host["venv"], fw.RECORD_NAME)) == {"torch": host["wheels"][0]["sha256"]}
    assert gen.read_host(host["host_record"])["state"] == "installed"
    again = FakeSystem(commands={python: pip_answers()})
    res = FleetWheelInstallJob(params(host, generation=generation), again).run()
    assert res["changed"] is False and again.ran == []


def test_a_failing_pip_is_the_one_error_with_its_output(host):
    python = os.path.join(host["venv"], "bin", "python")
    err = "ERROR: torch-2.9.1-cp312-cp312-linux_aarch64.whl is not a supported wheel on this platform.\n"
    system = FakeSystem(commands={python: pip_answers(1, err)})
    with pytest.raises(JobError) as info:
        FleetWheelInstallJob(params(host), system).run()
    assert info.value.msg == "pip could not install %s (exit 1):\n%s" % (WHEEL, err.strip())
    assert info.value.tail == err.strip() and info.value.result["stderr"] == err
    assert not os.path.exists(os.path.join(host["venv"], fw.RECORD_NAME))


def test_a_bad_generation_is_refused_first(host):
    with pytest.raises(JobError, match="generation needs lineage, class and number"):
        FleetWheelInstallJob(params(host, generation={"lineage": "L1", "number": "x"}), FakeSystem()).plan()
    assert os.listdir(host["wheel_dir"]) == [WHEEL]  # not even the hash cache written


def test_a_venv_it_makes_is_marked_as_sparkforges_so_the_next_run_takes_it_as_its_own(host, tmp_path):
    """A fleet member's first install makes the venv (no torch role ran there): it is made as the stack venv is,
    with the completion marker, so the next run's preflight knows it as sparkforge's, not the user's (the rollout's
    generation 2 refused every member's venv: issue 52's ownership)."""
    from ansible_collections.sparkforge.stack.plugins.module_utils.host import venv as stack_venv
    fresh = str(tmp_path / "fresh-venv")
    python = os.path.join(fresh, "bin", "python")

    def make_venv(argv):
        if argv[1] == "-c":  # the Python the venv will have, asked before the wheels' tags are judged
            return 0, "3.12\n", ""
        assert argv[1:] == ["-m", "venv", fresh]
        os.makedirs(os.path.dirname(python))
        open(python, "w").close()
        return 0, "", ""

    def venv_python(argv):
        return (0, "", "") if argv[1:] == ["-c", "import pip"] else pip_answers()(argv)
    system = FakeSystem(commands={"python3": make_venv, python: venv_python})
    FleetWheelInstallJob(params(host, venv=fresh, generation={"lineage": "L1", "class": "spark", "number": 1}),
                         system).run()
    assert os.path.exists(os.path.join(fresh, stack_venv.MARKER))
    assert not os.path.exists(stack_venv.pending_path(fresh))
    assert stack_venv.VenvJob(dict(path=fresh, python="python3"), FakeSystem(commands={python: venv_python}),
                              True).run()["changed"] is False


def _host_tags():
    """A platform tag of this machine (its glibc's manylinux), and one of another machine."""
    machine = platform.machine()
    return "manylinux_2_17_%s" % machine, "manylinux_2_17_%s" % ("x86_64" if machine != "x86_64" else "aarch64")


@pytest.mark.parametrize("row", ["W18"])
@pytest.mark.parametrize("case", ["metadata version", "local tag", "name", "machine", "python", "glibc", "not a zip"])
def test_a_class_wheel_this_host_cannot_install_is_refused_naming_it_nothing_installed(host, case, row):
    """The local wheelhouse's preflight checks (packages/wheel_check.py), on the fleet's wheels before their install:
    METADATA's name, version and local tag against the file name, the machine, the Python tag, manylinux's glibc,
    a file that is not a wheel. The host fails naming the wheel and why; check mode too; nothing installed."""
    here, other = _host_tags()
    files = {"metadata version": ("torch-2.9.1-py3-none-any.whl", wheel_bytes(version="2.9.0")),
             "local tag": ("torch-2.9.1+cu130-py3-none-any.whl", wheel_bytes(version="2.9.1+cu129")),
             "name": ("torch-2.9.1-py3-none-any.whl", wheel_bytes(name="torchvision", info="torch-2.9.1.dist-info")),
             "machine": ("torch-2.9.1-cp312-cp312-%s.whl" % other, wheel_bytes()),
             "python": ("torch-2.9.1-cp39-cp39-%s.whl" % here, wheel_bytes()),
             "glibc": ("torch-2.9.1-cp312-cp312-%s.whl" % here.replace("2_17", "2_999"), wheel_bytes()),
             "not a zip": ("torch-2.9.1-py3-none-any.whl", b"the builder's torch")}
    name, data = files[case]
    os.unlink(os.path.join(host["wheel_dir"], WHEEL))
    with open(os.path.join(host["wheel_dir"], name), "wb") as handle:
        handle.write(data)
    wheels = [{"name": "torch", "file": name, "sha256": hashlib.sha256(data).hexdigest()}]
    python = os.path.join(host["venv"], "bin", "python")
    for check in (True, False):
        system = FakeSystem(commands={python: pip_answers()})
        with pytest.raises(JobError) as info:
            FleetWheelInstallJob(params(host, wheels=wheels, generation={"lineage": "L1", "class": "spark",
                                                                         "number": 1}), system, check_mode=check).run()
        assert info.value.msg.startswith("the class's wheels cannot be installed on this host (Python 3.12, "), \
            (row, info.value.msg)
        assert "nothing installed: %s %s" % (os.path.join(host["wheel_dir"], name), "") in info.value.msg + " "
        assert info.value.result["uninstallable"] == [name]
        assert system.ran == [] and not os.path.exists(host["host_record"])
        assert not os.path.exists(os.path.join(host["venv"], fw.RECORD_NAME))


def test_a_wheel_that_fits_this_host_is_installed(host):
    """The check does not refuse a wheel of this machine's manylinux platform and the venv's Python."""
    here, _other = _host_tags()
    name, data = "torch-2.9.1-cp312-cp312-%s.whl" % here, wheel_bytes()
    with open(os.path.join(host["wheel_dir"], name), "wb") as handle:
        handle.write(data)
    wheels = [{"name": "torch", "file": name, "sha256": hashlib.sha256(data).hexdigest()}]
    python = os.path.join(host["venv"], "bin", "python")
    system = FakeSystem(commands={python: pip_answers()})
    res = FleetWheelInstallJob(params(host, wheels=wheels), system).run()
    assert res["reinstalled"] == ["torch"] and system.ran[0][0] == python
