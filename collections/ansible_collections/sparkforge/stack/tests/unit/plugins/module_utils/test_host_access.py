# -*- coding: utf-8 -*-
"""Who runs it, and where it grows (issue 52): preflight refuses a plan that needs root when the host's tasks run
as another user without become (naming the user and what to do, in check mode too), and measures the free space of
each place that grows on its own file system, places on one file system adding up."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import collections
import copy
import os
import stat
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import LocalSystem
from ansible_collections.sparkforge.stack.plugins.module_utils.host import host_facts
from ansible_collections.sparkforge.stack.plugins.module_utils.plan import host_room, preflight
from ansible_collections.sparkforge.stack.plugins.module_utils.plan.stack_plan_job import StackPlanJob

sys.path.insert(0, os.path.dirname(__file__))
from fake_system import FakeSystem  # noqa: E402  pylint: disable=wrong-import-position
from test_stack_plan_job import SPARK, Mirror, params  # noqa: E402  pylint: disable=wrong-import-position

ALICE = {"uid": 1000, "name": "alice"}
ROOT_NEEDS = {"cuda_libs": "apt", "cusparselt": "dpkg", "llvm": "apt", "runtime_env": "/etc/profile.d"}
GIB = 1024


def job_params(user, components=("pytorch", "runtime_env"), **more):
    args = params(probe_sources=False, facts=dict(SPARK, user=user), **more)
    args["settings"] = dict(args["settings"], components=list(components))
    args["manifest"]["sparkforge_root_needs"] = ROOT_NEEDS
    return args


def root_problems(result):
    return [p["message"] for p in result["problems"] if p["check"] == "root"]


@pytest.mark.parametrize("row_id", [pytest.param("E05+E07", id="E05+E07")])
def test_a_user_who_cannot_become_root_is_refused_naming_the_user_and_what_to_do(row_id):
    system = FakeSystem(tools={"sudo": "/usr/bin/sudo"},
                        commands={"/usr/bin/sudo": (1, "", "sudo: a password is required")})
    for check_mode in (False, True):
        result = StackPlanJob(job_params(ALICE), system, check_mode=check_mode, opener=Mirror()).run()
        (message,) = root_problems(result)
        assert not result["ready"]
        assert "tasks run as alice (uid 1000)" in message and "runtime_env (/etc/profile.d)" in message
        assert "sudo: a password is required" in message and "pytorch" not in message.split(", but")[0]
        assert "--ask-become-pass" in message and "ansible_user: root" in message
    assert ["/usr/bin/sudo", "-n", "true"] in system.ran


@pytest.mark.parametrize("row_id", [pytest.param("E06", id="E06")])
def test_a_user_who_can_sudo_is_told_to_set_become_and_root_passes(row_id):
    system = FakeSystem(tools={"sudo": "/usr/bin/sudo"}, commands={"/usr/bin/sudo": (0, "", "")})
    (message,) = root_problems(StackPlanJob(job_params(ALICE), system, opener=Mirror()).run())
    assert "alice can sudo without a password" in message and "ansible_become: true" in message
    as_root = StackPlanJob(job_params({"uid": 0, "name": "root"}), FakeSystem(), opener=Mirror()).run()
    assert root_problems(as_root) == [] and as_root["ready"]
    no_sudo = StackPlanJob(job_params(ALICE), FakeSystem(), opener=Mirror()).run()
    assert "no sudo on this host" in root_problems(no_sudo)[0]


def test_a_plan_that_needs_no_root_is_not_refused():
    """torch from an index, nothing compiled (cuda_libs skipped), no runtime_env: nothing needs root."""
    args = job_params(ALICE, components=("cuda_libs", "pytorch"))
    args["settings"]["torch_source"] = "index"
    result = StackPlanJob(args, FakeSystem(), opener=Mirror()).run()
    assert result["plan"]["actions"]["cuda_libs"] == "skip"
    assert root_problems(result) == []


@pytest.mark.parametrize("row_id", [pytest.param("E05", id="E05")])
def test_a_stand_in_sudo_on_path_decides_the_message(tmp_path, monkeypatch, row_id):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    sudo = bindir / "sudo"
    sudo.write_text("#!/bin/sh\necho 'sudo: alice is not in the sudoers file' >&2\nexit 1\n")
    sudo.chmod(sudo.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(bindir) + os.pathsep + os.environ.get("PATH", ""))
    (message,) = root_problems(StackPlanJob(job_params(ALICE), LocalSystem(), opener=Mirror()).run())
    assert "alice is not in the sudoers file" in message
    sudo.write_text("#!/bin/sh\nexit 0\n")
    (message,) = root_problems(StackPlanJob(job_params(ALICE), LocalSystem(), opener=Mirror()).run())
    assert "alice can sudo without a password" in message


def test_the_process_user_is_the_real_one():
    assert host_facts.process_user()["uid"] == os.geteuid()


@settings(max_examples=100, deadline=None)
@given(uid=st.sampled_from([0, 1000, 65534]),
       actions=st.dictionaries(st.sampled_from(preflight.COMPONENTS),
                               st.sampled_from(["install", "skip", "build", "configure", "check"])))
def test_root_is_asked_for_exactly_when_a_component_that_needs_it_acts(uid, actions):
    found = host_room.root_problems(actions, {"uid": uid, "name": "u"}, ROOT_NEEDS, lambda: (False, "no"))
    needed = [c for c, a in actions.items() if c in ROOT_NEEDS and a != "skip"]
    assert bool(found) == bool(uid != 0 and needed)
    for component in needed if found else []:
        assert component in found[0]["message"]


# ------------------------------------------------------------------ free space per file system

StatVfs = collections.namedtuple("StatVfs", "f_bavail f_frsize f_blocks")


def stand_in_disks(devices, free_gib):
    """(statvfs, device_of) of a host whose directories lie on the devices ``devices`` names ({dir: device})
    with ``free_gib`` ({device: GiB free}): the real directories are walked, the figures are the stand-in's."""
    def device_of(path):
        best = max((d for d in devices if path == d or path.startswith(d + os.sep)), key=len)
        return devices[best]

    def statvfs(path):
        return StatVfs(int(free_gib[device_of(path)] * 1024 * 1024), 1024, 10 ** 12)
    return statvfs, device_of


@pytest.mark.parametrize("row_id", [pytest.param("E08", id="E08")])
def test_a_venv_on_a_small_file_system_of_its_own_is_refused_there(tmp_path, row_id):
    """The build directory has room; the venv's own file system does not: it is named, with its free space."""
    (tmp_path / "big").mkdir()
    (tmp_path / "small").mkdir()
    statvfs, device_of = stand_in_disks({str(tmp_path / "big"): 1, str(tmp_path / "small"): 2}, {1: 900, 2: 4})
    build, venv = str(tmp_path / "big" / "build"), str(tmp_path / "small" / "venv")
    measured = dict((p, host_facts.disk_free(p, statvfs, device_of)) for p in (build, venv))
    assert measured[venv]["measured_at"] == str(tmp_path / "small") and measured[venv]["device"] == 2
    places = [{"variable": "sparkforge_build_dir", "path": build, "need_gib": 20},
              {"variable": "sparkforge_venv", "path": venv, "need_gib": 10}]
    (problem,) = host_room.disk_problems(measured, places)
    assert "4.0 GiB free at %s" % venv in problem["message"] and "sparkforge_venv" in problem["message"]
    assert "needs 10 GiB" in problem["message"]
    # Today's check would have passed: the build directory alone has room.
    assert host_room.disk_problems(measured, places[:1]) == []


@pytest.mark.parametrize("row_id", [pytest.param("E09", id="E09")])
def test_places_on_one_file_system_add_up(tmp_path, row_id):
    statvfs, device_of = stand_in_disks({str(tmp_path): 7}, {7: 25})
    places = [{"variable": "sparkforge_build_dir", "path": str(tmp_path / "build"), "need_gib": 20},
              {"variable": "sparkforge_venv", "path": str(tmp_path / "venv"), "need_gib": 10},
              {"variable": "sparkforge_report_dir", "path": str(tmp_path / "reports"), "need_gib": 1}]
    measured = dict((p["path"], host_facts.disk_free(p["path"], statvfs, device_of)) for p in places)
    (problem,) = host_room.disk_problems(measured, places)
    for place in places:
        assert "%s %s (%d GiB)" % (place["variable"], place["path"], place["need_gib"]) in problem["message"]
    assert "25.0 GiB free" in problem["message"] and "puts 31 GiB there" in problem["message"]


@pytest.mark.parametrize("row_id", [pytest.param("E08", id="E08")])
def test_the_job_measures_the_venv_where_the_plan_installs_into_it(tmp_path, row_id):
    (tmp_path / "small").mkdir()
    statvfs, device_of = stand_in_disks({"/opt": 1, str(tmp_path / "small"): 2}, {1: 900, 2: 4})
    venv = str(tmp_path / "small" / "venv")
    facts = copy.deepcopy(SPARK)
    facts["disk"] = {"/opt/sparkforge/build": {"measured_at": "/opt", "free_mib": 900 * GIB, "device": 1},
                     venv: host_facts.disk_free(venv, statvfs, device_of)}
    args = params(probe_sources=False, facts=facts)
    args["checks"] = dict(args["checks"], disk_places=[{"variable": "sparkforge_venv", "path": venv,
                                                        "place": "venv"}])
    args["manifest"]["sparkforge_disk_needs_gib"] = {"venv": 10, "wheel_dir": 3, "report_dir": 1}
    result = StackPlanJob(args, FakeSystem(), opener=Mirror()).run()
    assert [p for p in result["problems"] if p["check"] == "disk" and venv in p["message"]]
    # A plan that puts nothing in the venv does not measure it.
    assert host_room.growing_places({"actions": {"cuda_libs": "install", "pytorch": "existing"}},
                                    args["checks"]["disk_places"], {"venv": 10}) == []


@settings(max_examples=150, deadline=None)
@given(layout=st.lists(st.tuples(st.integers(1, 3), st.integers(0, 30)), min_size=1, max_size=6),
       free=st.fixed_dictionaries({1: st.integers(0, 60), 2: st.integers(0, 60), 3: st.integers(0, 60)}))
def test_a_file_system_is_refused_exactly_when_its_places_need_more_than_it_has(layout, free):
    measured, places = {}, []
    for index, (device, need) in enumerate(layout):
        path = "/d%d/place%d" % (device, index)
        measured[path] = {"measured_at": "/d%d" % device, "free_mib": free[device] * GIB, "device": device}
        places.append({"variable": "v%d" % index, "path": path, "need_gib": need})
    found = host_room.disk_problems(measured, places)
    devices = [d for i, (d, _n) in enumerate(layout) if d not in [dd for dd, _unused in layout[:i]]]
    over = [d for d in devices if sum(n for dd, n in layout if dd == d) > free[d]]
    assert len(found) == len(over)
    for device, problem in zip(over, found):
        for index, (d, _need) in enumerate(layout):
            assert ("v%d" % index in problem["message"]) == (d == device)
