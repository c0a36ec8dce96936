# -*- coding: utf-8 -*-
"""fleet_wheel_install's job (module_utils/fleet/fleet_install_job.py) on a stand-in host: copies that
are not the builder's are refused before anything changes, the plan names each wheel to reinstall
and the host record's move, apply runs pip through the system and records the install; a failing
pip is the one error with its output."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os
import sys

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import fleet_wheels as fw
from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import generations as gen
from ansible_collections.sparkforge.stack.plugins.module_utils.fleet.fleet_install_job import FleetWheelInstallJob
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import JobError

sys.path.insert(0, os.path.dirname(__file__))
from fake_system import FakeSystem  # noqa: E402  pylint: disable=wrong-import-position

WHEEL = "torch-2.9.1-cp312-cp312-linux_aarch64.whl"


@pytest.fixture
def host(tmp_path):
    copies = tmp_path / "copies"
    copies.mkdir()
    (copies / WHEEL).write_bytes(b"the builder's torch")
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").write_text("")
    return {"venv": str(tmp_path / "venv"), "wheel_dir": str(copies), "host_record": str(tmp_path / "host.json"),
            "wheels": [{"name": "torch", "file": WHEEL, "sha256": hashlib.sha256(b"the builder's torch").hexdigest()}]}


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
