# -*- coding: utf-8 -*-
"""Issue 33's rules (engineer h3): the result is the plan, pip isolated from the host, an arch list that
covers the host's GPUs, paths the run can create, the CUDA distro by major version."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils._common import path_rules
from ansible_collections.sparkforge.stack.plugins.module_utils.host import host_paths, platforms
from ansible_collections.sparkforge.stack.plugins.module_utils._common import run_env
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import pip_env
from ansible_collections.sparkforge.stack.plugins.module_utils.build import torch_build as tb
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import arch
from ansible_collections.sparkforge.stack.plugins.module_utils.build import torch_result as tr


@pytest.mark.parametrize("url, local, cuda", [
    ("https://download.pytorch.org/whl/cu130", "cu130", "13.0"),
    ("https://download.pytorch.org/whl/cu128/", "cu128", "12.8"),
    ("https://download.pytorch.org/whl/cu118", "cu118", "11.8"),
    ("https://pypi.org/simple", None, None),
])
def test_the_index_directory_pins_its_cuda_build(url, local, cuda):
    plan = tr.planned_build("2.11.0", "index", url)
    assert (plan["local"], plan["cuda"]) == (local, cuda)


def test_a_source_build_pins_the_bare_release_and_a_wheelhouse_only_the_cuda_major():
    assert tr.planned_build("2.11.0", "source")["local"] == ""
    wheelhouse = tr.planned_build("2.11.0", "wheelhouse", cuda_major=13)
    assert wheelhouse["local"] is None and wheelhouse["words"] == "2.11.0 (CUDA 13.x)"
    assert tr.result_problems(wheelhouse, "2.11.0+cu130", "13.0") == []
    assert tr.result_problems(wheelhouse, "2.11.0+cpu", None) == ["a CPU build on a host with a GPU"]
    assert tr.result_problems(wheelhouse, "", None) == ["nothing imports as torch"]


def test_a_cpu_build_passes_only_where_no_cuda_build_is_planned():
    plan = tr.planned_build("2.11.0", "source")
    assert tr.result_problems(plan, "2.11.0", None, gpu=False) == []
    assert tr.result_problems(plan, "2.11.0", "None", gpu=True) == ["a CPU build on a host with a GPU"]


@pytest.mark.parametrize("entry, capability, runs", [
    ("12.0", "12.1", True), ("12.1", "12.0", False), ("9.0", "12.1", False), ("12.0a", "12.0", True),
    ("12.0a", "12.1", False), ("9.0+PTX", "12.1", True), ("12.1+PTX", "12.0", False), ("10.0", "11.0", False),
])
def test_binary_compatibility(entry, capability, runs):
    assert arch.runs_on(entry, capability) is runs


def test_an_explicit_arch_list_names_the_capability_it_misses_and_the_variable():
    with pytest.raises(tb.ArchListError) as caught:
        tb.plan_arch_list("9.0", "2.11.0", {}, "dgx_spark", ["12.1"], {"arch_min_version": {"9.0": "1.0"}}, {},
                          variable="sparkforge_cuda_arch_list")
    assert "sparkforge_cuda_arch_list '9.0' has no code for this host's GPU capability 12.1 (the host has 12.1)" \
        in str(caught.value)


def test_the_isolated_environment_drops_every_pip_variable_of_the_host():
    env = pip_env.isolated_environ({"PIP_FIND_LINKS": "/x", "PIP_PRE": "1", "HOME": "/root", "PYTHONPATH": "/t"})
    assert env == {"HOME": "/root", "PIP_CONFIG_FILE": os.devnull, "PYTHONNOUSERSITE": "1"}
    environ = {"PIP_FIND_LINKS": "/x", "PATH": "/bin"}
    assert pip_env.scrub_process_environ(environ) == ["PIP_FIND_LINKS"]
    assert environ == {"PATH": "/bin", "PIP_CONFIG_FILE": os.devnull, "PYTHONNOUSERSITE": "1"}


def test_the_plans_pip_settings_become_options():
    assert pip_env.options_from_env({"PIP_NO_INDEX": "true", "PIP_FIND_LINKS": "/a /b", "PIP_CERT": "/c.pem",
                                     "PIP_PRE": "0", "PIP_CONFIG_FILE": "/dev/null"}) == [
        "--cert", "/c.pem", "--find-links", "/a", "--find-links", "/b", "--no-index"]
    assert pip_env.task_environment({"PIP_CONFIG_FILE": "/etc/site-pip.conf", "no_proxy": "x"}) == dict(
        run_env.task_blanks(), no_proxy="x", PIP_CONFIG_FILE="/etc/site-pip.conf")


def test_paths(tmp_path):
    (tmp_path / "f").write_text("x")
    assert "its parent %s/f is a regular file" % tmp_path in host_paths.path_problem("v", str(tmp_path / "f" / "d"))
    assert host_paths.path_problem("v", "rel/path") == "v=rel/path is not an absolute path"
    assert host_paths.paths_problems([{"variable": "a", "path": str(tmp_path / "ok")},
                                      {"variable": "b", "path": str(tmp_path / "f" / "x"), "kind": "file"}]) == [
        "b=%s/f/x: its parent %s/f is a regular file, not a directory: nothing can be created under it"
        % (tmp_path, tmp_path)]
    with pytest.raises(ValueError):
        host_paths.path_problem("v", "/x", "socket")


def test_a_default_resolved_where_the_user_runs_is_not_held_to_the_checkout_rule(tmp_path):
    """The reports directory's default is the directory ansible-playbook runs in (a molecule scenario's inside a
    checkout): protect false exempts it from the checkout rule; the same path set by a user is refused."""
    checkout = tmp_path / "checkout"
    (checkout / "collections" / "ansible_collections" / "sparkforge" / "stack").mkdir(parents=True)
    (checkout / "ansible.cfg").write_text("")
    protected = path_rules.protected_dirs(str(checkout / "collections" / "ansible_collections" / "sparkforge" / "stack"))
    inside = str(checkout / "molecule" / "default" / "reports")
    assert host_paths.paths_problems([{"variable": "the default reports directory", "path": inside,
                                       "protect": False}], protected) == []
    refused = host_paths.paths_problems([{"variable": "sparkforge_fleet_report_dir", "path": inside}], protected)
    assert len(refused) == 1 and "sparkforge_fleet_report_dir" in refused[0] and "is inside" in refused[0]


def test_the_cuda_distro_by_major_version():
    table = {"Debian-12": "debian12", "Ubuntu-24.04": "ubuntu2404"}
    assert platforms.cuda_distro("Debian", "12.11", table) == "debian12"
    assert platforms.cuda_distro("Ubuntu", "24.04", table) == "ubuntu2404"
    assert platforms.cuda_distro("Ubuntu", "24.10", table) is None
    assert platforms.cuda_distro("Debian", "12", table) == "debian12"
    assert platforms.cuda_distro_keys("Debian", "12") == ["Debian-12"]
