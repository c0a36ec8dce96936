# -*- coding: utf-8 -*-
"""pytorch_wheel_build's job (module_utils/build/torch_job.py) planned on a stand-in host
(fake_system.FakeSystem): the toolchain it reads feeds the cache key, a published wheel with that
key means nothing to do, and a missing tool is refused with its output before anything is written.
The build itself (git fetch, pip wheel) is tests/unit/plugins/modules/test_build_jobs.py's, on real fixture repos."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os
import sys

import pytest

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import sha256_file
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import JobError
from ansible_collections.sparkforge.stack.plugins.module_utils.build.torch_job import TorchWheelJob
from ansible_collections.sparkforge.stack.plugins.modules import pytorch_wheel_build
from ansible_collections.sparkforge.stack.tests.unit.utils.harness import shared_manifest

sys.path.insert(0, os.path.dirname(__file__))
from fake_system import FakeSystem  # noqa: E402  pylint: disable=wrong-import-position

COMMIT = "0123456789abcdef0123456789abcdef01234567"
NVCC = "Cuda compilation tools, release 13.0, V13.0.88\nBuild cuda_13.0.r13.0/compiler.36424714_0\n"


def torch_data():
    # A copy: the job under test is given these tables, as a module is given its arguments.
    data = copy.deepcopy(shared_manifest())
    return {"releases": data["sparkforge_torch_releases"], "arch_min_version": data["sparkforge_torch_arch_min_version"],
            "arch_defaults": data["sparkforge_torch_arch_defaults"], "traps": data["sparkforge_torch_traps"],
            "fixes": data["sparkforge_torch_fixes"]}


@pytest.fixture
def host_dirs(tmp_path):
    """The stand-in host's paths: a source tree, a build venv's python, a CUDA home."""
    src = tmp_path / "src"
    src.mkdir()
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").write_text("")
    return {"src": str(src), "python": str(venv_bin / "python"), "cuda_home": str(tmp_path / "cuda"),
            "build_dir": str(tmp_path / "build"), "wheel_dir": str(tmp_path / "wheels")}


def params(dirs, **more):
    args = dict(torch_data=torch_data(), src=dirs["src"], python=dirs["python"], cuda_home=dirs["cuda_home"],
                build_dir=dirs["build_dir"], wheel_dir=dirs["wheel_dir"], version="2.9.1", platform_class="gh200",
                compute_capabilities=["9.0"], machine="aarch64", jobs=2, ccache=False,
                features={"cuda": True, "cusparselt": False})
    args.update(more)
    result = ArgumentSpecValidator(pytorch_wheel_build.ARGUMENT_SPEC).validate(args)
    assert not result.error_messages, result.error_messages
    return result.validated_parameters


def a_host(dirs, nvcc=NVCC):
    commands = {
        ("git", "rev-parse", "HEAD"): (0, COMMIT + "\n", ""),
        ("cc", "--version"): (0, "cc (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0\n", ""),
        ("c++", "--version"): (0, "c++ (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0\n", ""),
        ("cmake", "--version"): (0, "cmake version 3.28.3\n", ""),
        dirs["python"]: (0, "3.12.3 aarch64 cpython-312\n", ""),
    }
    if nvcc is not None:
        commands[(os.path.join(dirs["cuda_home"], "bin", "nvcc"), "--version")] = (0, nvcc, "")
    return FakeSystem(commands=commands)


def test_check_mode_plans_the_build_and_why_from_the_probes_only(host_dirs):
    host = a_host(host_dirs)
    plan = TorchWheelJob(params(host_dirs), host, check_mode=True).plan()
    assert plan.changed and len(plan.changes) == 1
    change = plan.changes[0]
    assert change.startswith("build torch 2.9.1 (%s) for 9.0: no published wheel has cache key " % COMMIT[:12])
    assert plan.result["plan"] == "would " + change and plan.result["changed"] is True
    assert plan.result["commit"] == COMMIT and plan.result["wheel"] is None
    assert plan.state["toolchain"]["nvcc"] == "Build cuda_13.0.r13.0/compiler.36424714_0"
    assert plan.state["py_version"] == "3.12.3 aarch64 cpython-312"
    # Probes only: no pip, no fetch; nothing written.
    assert sorted(set(cmd[0] for cmd in host.ran)) == sorted(["git", "cc", "c++", "cmake", host_dirs["python"],
                                                             os.path.join(host_dirs["cuda_home"], "bin", "nvcc"),
                                                             os.path.join(os.path.dirname(host_dirs["python"]),
                                                                          "cmake")])
    assert not any("pip" in cmd for cmd in host.ran)
    assert not os.path.exists(host_dirs["build_dir"]) and not os.path.exists(host_dirs["wheel_dir"])


def test_the_cache_key_follows_the_toolchain_the_host_reports(host_dirs):
    first = TorchWheelJob(params(host_dirs), a_host(host_dirs), check_mode=True).plan()
    other_nvcc = NVCC.replace("36424714", "36836380")
    second = TorchWheelJob(params(host_dirs), a_host(host_dirs, other_nvcc), check_mode=True).plan()
    same = TorchWheelJob(params(host_dirs), a_host(host_dirs), check_mode=True).plan()
    assert first.result["cache_key"] != second.result["cache_key"]
    assert first.result["cache_key"] == same.result["cache_key"]


def test_a_published_wheel_with_the_key_means_nothing_to_do(host_dirs):
    key = TorchWheelJob(params(host_dirs), a_host(host_dirs), check_mode=True).plan().result["cache_key"]
    os.makedirs(host_dirs["wheel_dir"])
    wheel = os.path.join(host_dirs["wheel_dir"], "torch-2.9.1-cp312-cp312-linux_aarch64.whl")
    with open(wheel, "wb") as handle:
        handle.write(b"a wheel's bytes")
    with open(wheel + ".manifest.json", "w") as handle:
        json.dump({"cache_key": key, "wheel_file": os.path.basename(wheel), "sha256": sha256_file(wheel),
                   "fixes": []}, handle)
    host = a_host(host_dirs)
    res = TorchWheelJob(params(host_dirs), host, check_mode=False).run()
    assert res["changed"] is False and res["wheel"] == wheel and res["sha256"] == sha256_file(wheel)
    assert res["plan"] == "a wheel with the same cache key is published (%s): nothing to do" % os.path.basename(wheel)
    assert not os.path.exists(host_dirs["build_dir"])


def test_a_host_without_nvcc_is_refused_with_what_the_shell_said(host_dirs):
    host = a_host(host_dirs, nvcc=None)
    with pytest.raises(JobError) as info:
        TorchWheelJob(params(host_dirs), host, check_mode=False).run()
    assert info.value.msg.startswith("nvcc not found under %s: install the CUDA toolkit" % host_dirs["cuda_home"])
    assert "command not found" in info.value.tail and info.value.fail_args()["output_tail"] == info.value.tail
    assert not os.path.exists(host_dirs["build_dir"]) and not os.path.exists(host_dirs["wheel_dir"])


def test_a_build_python_that_does_not_run_is_refused(host_dirs):
    host = a_host(host_dirs)
    host.commands[host_dirs["python"]] = (1, "", "error while loading shared libraries: libpython3.12.so.1.0\n")
    with pytest.raises(JobError, match="the build python .* does not run .*libpython3.12.so.1.0.*create the build "
                                       "venv first"):
        TorchWheelJob(params(host_dirs), host, check_mode=False).plan()


def test_a_build_dir_of_the_users_is_refused_before_anything_and_one_of_a_build_planned(host_dirs):
    """Issue 52: the build removes or cleans <build_dir>/src and removes <build_dir>/dist-tmp; a build_dir that holds
    something and no build's lock file (.lock) is the user's: refused in the plan, check mode too, untouched."""
    build = host_dirs["build_dir"]
    os.makedirs(os.path.join(build, "src"))
    with open(os.path.join(build, "src", "notes.txt"), "w") as handle:
        handle.write("mine\n")
    for check in (True, False):
        with pytest.raises(JobError) as refused:
            TorchWheelJob(params(host_dirs), a_host(host_dirs), check_mode=check).plan()
        assert refused.value.msg.startswith("build_dir (pytorch_build_dir)=%s is a directory sparkforge did not make "
                                            "(no build lock file .lock or .build.lock in it; it holds src)" % build)
        assert "nothing was changed" in refused.value.msg, "O11"
    assert sorted(os.listdir(build)) == ["src"] and os.listdir(os.path.join(build, "src")) == ["notes.txt"]
    # A build's directory (its lock file there, as every build leaves it) is planned as before.
    open(os.path.join(build, ".lock"), "w").close()
    assert TorchWheelJob(params(host_dirs), a_host(host_dirs), check_mode=True).plan().changed
