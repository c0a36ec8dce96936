# -*- coding: utf-8 -*-
"""The class build of GPU packages: which entries the builder builds, and what keys a build."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils.packages import heavy_build
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import heavy_wheels as hw
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import ml_packages as mp
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import JobError, LocalSystem

sys.path.insert(0, os.path.dirname(__file__))
from fake_system import FakeSystem  # noqa: E402  pylint: disable=wrong-import-position

GPU_BUILD = {
    "arch_env": [{"name": "TORCH_CUDA_ARCH_LIST", "form": "torch"},
                 {"name": "FLASH_ATTN_CUDA_ARCHS", "form": "sm_numbers", "choices": ["80", "90", "100", "120"]}],
    "force_build": {"FLASH_ATTENTION_FORCE_BUILD": "TRUE"},
    "jobs_env": "MAX_JOBS", "threads_env": "NVCC_THREADS", "nvcc_threads": 4, "job_memory_gib": 9,
    "checked": ["flash-attn setup.py"],
}
MATRIX = {
    "flash-attn": {"methods": [{"method": "source"}], "source": {"build_isolation": False},
                   "gpu_build": GPU_BUILD},
    "xformers": {"methods": [{"when": {"arch": "x86_64"}, "method": "wheel", "fallback": "source"},
                             {"method": "source"}], "gpu_build": GPU_BUILD},
    "einops": {"methods": [{"method": "wheel"}]},
}


def plan(arch="aarch64"):
    return mp.resolve(MATRIX, {}, {"flash-attn": "2.8.3.post2"}, {"arch": arch, "platform_class": "dgx_spark",
                                                                  "cuda_major": 13},
                      packages=["flash-attn", "xformers", "einops"])


def test_the_builder_builds_the_source_gpu_entries_and_names_the_fallbacks():
    heavy, notes = hw.class_builds(plan("aarch64"))
    assert [i["name"] for i in heavy] == ["flash-attn", "xformers"] and notes == []
    heavy, notes = hw.class_builds(plan("x86_64"))
    assert [i["name"] for i in heavy] == ["flash-attn"]
    assert notes == ["xformers installs by method wheel here; a source fallback would be built on each host"]


def keyed(**change):
    item = [i for i in plan() if i["name"] == "flash-attn"][0]
    p = {"cuda_arch_list": "12.1", "depends_on": "a" * 64}
    p.update(dict((k, v) for k, v in change.items() if k in p))
    item["gpu_env"], _notes, item["audit_targets"] = hw.plan_item(
        item, p["cuda_arch_list"], change.get("targets", ["12.1"]), cpus=change.get("cpus", 8), memory_gib=64)
    return hw.key_inputs(item, "flash_attn-2.8.3.post2.tar.gz", change.get("sdist", "s" * 64), p,
                         change.get("cuda", "release 13.0, V13.0.88"), "3.12.3 aarch64 cpython-312")


def test_every_build_input_changes_the_key_and_the_job_count_does_not():
    base = keyed()
    assert base["env"] == {"FLASH_ATTENTION_FORCE_BUILD": "TRUE", "FLASH_ATTN_CUDA_ARCHS": "120",
                           "TORCH_CUDA_ARCH_LIST": "12.1"}
    assert base["depends_on"] == "a" * 64 and base["sdist"]["sha256"] == "s" * 64
    for change in ({"depends_on": "b" * 64}, {"cuda_arch_list": "12.1+PTX"}, {"sdist": "t" * 64},
                   {"cuda": "release 13.1, V13.1.0"}, {"targets": ["12.1", "9.0"]}):
        assert keyed(**change) != base, change
    # MAX_JOBS and NVCC_THREADS change how fast it builds, not the bytes.
    assert keyed(cpus=2) == base


def test_bad_audit_targets_are_refused_naming_the_variable():
    item = [i for i in plan() if i["name"] == "flash-attn"][0]
    with pytest.raises(heavy_build.HeavyBuildError, match="audit_targets: 'sm121' is not a compute capability"):
        hw.plan_item(item, "12.1", ["sm121"], cpus=8, memory_gib=64)
    with pytest.raises(heavy_build.HeavyBuildError, match="audit_targets is empty and flash-attn compiles CUDA kernels"):
        hw.plan_item(item, "12.1", [], cpus=8, memory_gib=64)
    with pytest.raises(heavy_build.HeavyBuildError, match="cuda_arch_list='sm_121'"):
        hw.plan_item(item, "sm_121", ["12.1"], cpus=8, memory_gib=64)


def test_without_a_torch_build_or_nvcc_nothing_is_built(tmp_path):
    p = {"venv": str(tmp_path / "venv"), "depends_on": "", "cuda_home": str(tmp_path)}
    item = [i for i in plan() if i["name"] == "flash-attn"][0]
    item["gpu_env"], _n, item["audit_targets"] = hw.plan_item(item, "12.1", ["12.1"], cpus=8, memory_gib=64)
    p["plan"] = [item]
    with pytest.raises(JobError, match="is not a Python; the GPU packages build against the torch"):
        hw.HeavyWheelsJob(p, LocalSystem()).run()
    result = hw.HeavyWheelsJob(p, LocalSystem(), check_mode=True).run()
    assert result["changed"] is True and "against the torch this run builds" in result["wheels"][0]["plan"]
    with pytest.raises(JobError, match=r"cuda_home=.*is not an executable nvcc"):
        hw.cuda_release(str(tmp_path))


def test_a_broken_nvcc_is_refused_with_its_output_before_any_download(tmp_path):
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").write_text("")
    (venv_bin / "python").chmod(0o755)
    nvcc = tmp_path / "cuda" / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text("")
    nvcc.chmod(0o755)
    item = [i for i in plan() if i["name"] == "flash-attn"][0]
    item["gpu_env"], _n, item["audit_targets"] = hw.plan_item(item, "12.1", ["12.1"], cpus=8, memory_gib=64)
    p = {"venv": str(tmp_path / "venv"), "depends_on": "a" * 64, "cuda_home": str(tmp_path / "cuda"), "plan": [item],
         "index_url": None, "extra_index_urls": [], "find_links": [], "no_index": False, "env": {},
         "wheel_dir": str(tmp_path / "wheels"), "log_dir": None, "force": False, "cuda_arch_list": "12.1"}
    host = FakeSystem(commands={str(nvcc): (1, "", "nvcc: error while loading shared libraries: libnvvm.so\n")})
    with pytest.raises(JobError) as info:
        hw.HeavyWheelsJob(p, host).run()
    assert info.value.msg.startswith("%s --version failed (exit 1): nvcc: error while loading" % nvcc)
    assert info.value.tail == "nvcc: error while loading shared libraries: libnvvm.so"
    assert host.ran == [[str(nvcc), "--version"]] and not os.path.exists(p["wheel_dir"])


def test_the_job_resolves_the_matrix_and_refuses_a_bad_arch_list_before_the_host_is_asked(tmp_path):
    p = {"venv": str(tmp_path / "venv"), "depends_on": "", "cuda_home": str(tmp_path), "matrix": MATRIX,
         "profiles": {}, "pins": {"flash-attn": "2.8.3.post2"}, "profile": None, "packages": ["flash-attn"],
         "arch": "aarch64", "platform_class": "dgx_spark", "cuda_major": 13, "allow_source_builds": True,
         "cuda_arch_list": "sm_121", "audit_targets": ["12.1"], "build_cpus": 8, "build_memory_gib": 64.0}
    host = FakeSystem()
    with pytest.raises(JobError, match="cannot plan the class's GPU package builds: .*cuda_arch_list='sm_121'"):
        hw.HeavyWheelsJob(p, host, check_mode=True).run()
    res = hw.HeavyWheelsJob(dict(p, cuda_arch_list="12.1"), host, check_mode=True).run()
    assert [w["name"] for w in res["wheels"]] == ["flash-attn"] and res["changed"] is True
    assert "against the torch this run builds" in res["wheels"][0]["plan"] and host.ran == []


def test_the_build_finds_the_plans_nvcc_first_on_path(tmp_path):
    """A setup.py that looks for nvcc on PATH (many do, not only torch's cpp_extension) must find the toolkit
    the plan chose, not the host's: pip runs with $CUDA_HOME/bin first on PATH (heavy_build.toolkit_env)."""
    seen = tmp_path / "path-seen"
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    # The venv's python records the PATH pip would run with, then fails the download: nothing further runs.
    (venv_bin / "python").write_text("#!/bin/sh\nprintf '%%s' \"$PATH\" > %s\nexit 1\n" % seen)
    (venv_bin / "python").chmod(0o755)
    cuda = tmp_path / "cuda"
    (cuda / "bin").mkdir(parents=True)
    (cuda / "bin" / "nvcc").write_text("")
    (cuda / "bin" / "nvcc").chmod(0o755)
    item = [i for i in plan() if i["name"] == "flash-attn"][0]
    item["gpu_env"], _n, item["audit_targets"] = hw.plan_item(item, "12.1", ["12.1"], cpus=8, memory_gib=64)
    p = {"venv": str(tmp_path / "venv"), "depends_on": "a" * 64, "cuda_home": str(cuda), "plan": [item],
         "index_url": None, "extra_index_urls": [], "find_links": [], "no_index": False,
         "env": {"PATH": "/usr/local/cuda-11/bin:/usr/bin:/bin"}, "wheel_dir": str(tmp_path / "wheels"),
         "log_dir": None, "force": False, "cuda_arch_list": "12.1"}
    host = FakeSystem(commands={str(cuda / "bin" / "nvcc"): (0, "Cuda compilation tools, release 13.0, V13.0.88\n",
                                                             ""),
                                str(venv_bin / "python"): (0, "cp312\n", "")})
    with pytest.raises(JobError, match="could not fetch the sdist of flash-attn"):
        hw.HeavyWheelsJob(p, host).run()
    assert seen.read_text().split(os.pathsep)[0] == str(cuda / "bin"), seen.read_text()
