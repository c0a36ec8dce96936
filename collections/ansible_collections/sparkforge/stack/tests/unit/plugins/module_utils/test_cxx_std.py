# -*- coding: utf-8 -*-
"""The C++ standard of GPU source builds (module_utils/packages/cxx_std.py): what a setup.py forces on a Linux
CUDA build, the standard a torch release's headers need, a fix that sets it, the compiler floor, and the jobs
that refuse a conflict before anything is fetched or built (ml_packages, stack_plan).  The real sdists of
flash-attn, causal-conv1d and xformers are the checkout's tests/integration/test_cxx_std_real.py's."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os
import re
import sys

import pytest
from hypothesis import given, settings, strategies as st

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import cxx_std, heavy_build
from ansible_collections.sparkforge.stack.plugins.module_utils.packages.ml_packages_job import MlPackagesJob
from ansible_collections.sparkforge.stack.plugins.module_utils.plan.stack_plan_job import StackPlanJob
from ansible_collections.sparkforge.stack.plugins.modules import ml_packages
from ansible_collections.sparkforge.stack.tests.unit.utils.harness import shared_manifest

sys.path.insert(0, os.path.dirname(__file__))
from fake_system import FakeSystem  # noqa: E402  pylint: disable=wrong-import-position
from test_ml_packages_job import FakePip  # noqa: E402  pylint: disable=wrong-import-position
from test_stack_plan_job import CHECKS, HOST, SPARK  # noqa: E402  pylint: disable=wrong-import-position

FLOORS = {"17": {"gcc": "9", "clang": "9"}, "20": {"gcc": "11", "clang": "10"}, "23": {"gcc": "13", "clang": "16"}}
GCC_LINE = "c++ (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0\nCopyright (C) 2023 Free Software Foundation, Inc.\n"


def setup_py(cuda_std=None, hip_std=14, windows=True):
    """A setup.py shaped like the real ones: the CUDA flags, a ROCm branch and a Windows branch."""
    cuda = '"-O3", "-std=c++%d"' % cuda_std if cuda_std else '"-O3"'
    text = "import sys\nHIP_BUILD = bool(torch.version.hip)\nif HIP_BUILD:\n    flags = [\"-std=c++%d\"]\n" % hip_std
    text += "else:\n    flags = [%s]\n" % cuda
    if windows:
        text += "if sys.platform == \"win32\":\n    flags = [\"-std=c++14\"]\n"
    return text


# ---- what a build file forces ---------------------------------------------------------------------------------

def test_rocm_and_windows_branches_are_named_and_left_out():
    found = cxx_std.read_setup_py(setup_py(17))
    assert [(f["line"], f["std"], f["applies"]) for f in found] == [(4, 14, False), (6, 17, True), (8, 14, False)]
    assert found[0]["why"] == "under `if HIP_BUILD:` (not taken by a Linux CUDA build)"
    assert found[2]["why"] == 'under `if sys.platform == "win32":` (not taken by a Linux CUDA build)'


@pytest.mark.parametrize("text, applies", [
    ("if not IS_ROCM:\n    f = ['-std=c++17']\nelse:\n    f = ['-std=c++14']\n", [True, False]),
    ("if IS_ROCM:\n    f = ['-std=c++14']\nelse:\n    f = ['-std=c++17']\n", [False, True]),
    # Unknown conditions (an environment variable): both branches count.
    ("if os.getenv('X') == '1':\n    f = ['-std=c++17']\nelse:\n    f = ['--std=gnu++2a']\n", [True, True]),
    ("if not SKIP and torch.version.hip:\n    f = ['-std=c++14']\n", [False]),
    ("if sys.platform.startswith('linux'):\n    f = ['-std=c++17']\nelse:\n    f = ['-std=c++14']\n", [True, False]),
    ("f = ['-std=c++17' if torch.version.hip else '-std=c++20']\n", [False, True]),
    # Not Python: read line by line, every flag counts, comments left out.
    ("if (:\n  '-std=c++17'\n# '-std=c++14'\n", [True]),
])
def test_which_flags_a_linux_cuda_build_reaches(text, applies):
    assert [f["applies"] for f in cxx_std.read_setup_py(text)] == applies


def test_cmake_standard_and_flags_are_read_comments_left_out():
    found = cxx_std.read_cmake("set(CMAKE_CXX_STANDARD 17)\n# set(CMAKE_CXX_STANDARD 14)\n"
                               "add_compile_options(-std=c++2a)\n")
    assert [(f["line"], f["std"]) for f in found] == [(1, 17), (3, 20)]


def test_draft_and_gnu_names_are_the_standards_they_stand_for():
    assert [cxx_std.std_number(t) for t in ("c++17", "gnu++20", "c++1z", "c++2a", "c++2b", "c++x")] == \
        [17, 20, 17, 20, 23, None]


# ---- the torch release ----------------------------------------------------------------------------------------

RELEASES = {"2.13.0": {"cxx_standard": 17}, "2.14.0": {"cxx_standard": 20}, "2.15.0": {"cxx_standard": 20}}


def test_a_release_the_manifest_lacks_carries_the_nearest_older_one_and_says_so():
    known = cxx_std.torch_requirement("2.14.0+cu130", RELEASES, {"2.14.0": "ATen.h of the 2.14.0 wheel"})
    assert known == {"torch": "2.14.0+cu130", "std": 20, "source": "ATen.h of the 2.14.0 wheel"}
    newer = cxx_std.torch_requirement("2.16.0", RELEASES, {"2.15.0": "ATen.h of the 2.15.0 wheel"})
    assert newer["std"] == 20 and "carried from 2.15.0 (ATen.h of the 2.15.0 wheel)" in newer["source"]
    assert cxx_std.torch_requirement("1.13.1", RELEASES)["std"] is None
    assert cxx_std.newest_accepting(17, RELEASES) == "2.13.0" and cxx_std.newest_accepting(14, RELEASES) is None


def test_the_manifest_says_where_each_release_standard_was_read():
    m = shared_manifest()
    for release, text in m["sparkforge_torch_cxx_checked"].items():
        std = m["sparkforge_torch_releases"][release]["cxx_standard"]
        assert "ATen/ATen.h" in text and "C++%d or later compatible compiler is required" % std in text, release
    assert m["sparkforge_torch_releases"]["2.13.0"]["cxx_standard"] == 17
    assert m["sparkforge_torch_releases"]["2.14.0"]["cxx_standard"] == 20
    assert m["sparkforge_cxx_min_compilers"]["20"]["gcc"] == "11"


# ---- one build: every torch standard x package standard x fix x compiler -------------------------------------

@settings(max_examples=150, deadline=None)
@given(need=st.sampled_from([17, 20, 23]), forced=st.sampled_from([None, 14, 17, 20, 23]),
       fix=st.sampled_from([None, 17, 20, 23]), gcc=st.integers(min_value=7, max_value=14),
       from_sdist=st.booleans())
def test_a_conflict_is_refused_exactly_when_the_build_standard_is_below_the_headers(need, forced, fix, gcc,
                                                                                    from_sdist):
    releases = {"2.13.0": {"cxx_standard": 17}, "3.0.0": {"cxx_standard": need}}
    torch = cxx_std.torch_requirement("3.0.0", releases, {"3.0.0": "its ATen.h"})
    # A fix rewrites the flag the build hard-codes (so there is one to rewrite).
    fixes = [{"file": "setup.py", "pattern": r"-std=c\+\+\d\d", "replace": "-std=c++%d" % fix,
              "count": 1, "cxx_std": fix}] if fix and forced else []
    gpu_build = {"fixes": fixes, "cxx": {"forces": forced, "checked": "its setup.py"}}
    files = {"setup.py": setup_py(forced)} if from_sdist else None
    build = cxx_std.plan_build("pkg", "1.0", gpu_build, torch, releases, FLOORS, ("gcc", "%d.1.0" % gcc), files)
    std = (fixes and fix) or forced or need
    assert build["std"] == std
    conflicts = [p for p in build["problems"] if "headers require" in p]
    if std < need:
        (message,) = conflicts
        assert message.startswith("pkg 1.0 builds as C++%d" % std)
        assert "torch 3.0.0's headers require C++%d (its ATen.h)" % need in message and "or leave pkg out" in message
        assert ("pin sparkforge_torch_version to 2.13.0" in message) == (std >= 17)
    else:
        assert conflicts == []
    old = [p for p in build["problems"] if "this host's c++ is GCC" in p]
    assert bool(old) == (gcc < int(FLOORS.get(str(std), {}).get("gcc", 0)))


def test_a_fix_whose_count_no_longer_matches_is_refused_at_plan_time():
    gpu_build = {"fixes": [{"file": "setup.py", "pattern": r"-std=c\+\+17", "replace": "-std=c++20", "count": 4,
                            "cxx_std": 20}]}
    torch = cxx_std.torch_requirement("2.15.0", RELEASES)
    build = cxx_std.plan_build("flash-attn", "9.9", gpu_build, torch, RELEASES, FLOORS, ("gcc", "13.3.0"),
                               {"setup.py": setup_py(17)})
    assert build["problems"] == ["flash-attn: the fix that sets C++20 matched 1 time(s) in setup.py, the checked "
                                 "release has 4: the file changed; check the new release and update gpu_build.fixes"], \
        "K05"


def test_no_compiler_is_named_with_what_to_install():
    torch = cxx_std.torch_requirement("2.15.0", RELEASES)
    build = cxx_std.plan_build("causal-conv1d", "1.7.0", {}, torch, RELEASES, FLOORS, None, {"setup.py": setup_py()})
    assert build["std"] == 20 and build["problems"] == [
        "causal-conv1d 1.7.0 builds as C++20, which needs Clang >= 10 or GCC >= 11: no C++ compiler (c++) on PATH; "
        "install g++ (apt install g++)"]
    # Before the role installs the build's prerequisites (after the plan), build-essential brings c++.
    later = cxx_std.plan_build("causal-conv1d", "1.7.0", {}, torch, RELEASES, FLOORS, None, {"setup.py": setup_py()},
                               prereqs=["build-essential", "ninja-build"])
    assert later["problems"] == [] and later["compiler"].startswith("none yet: build-essential (a prerequisite")


@pytest.mark.parametrize("cxx, message", [
    ({"forces": "17", "checked": "x"}, "flash-attn: gpu_build.cxx.forces must be a C++ standard such as 17"),
    ({"forces": 17}, "flash-attn: gpu_build.cxx.checked is empty"),
    ({"forces": 17, "checked": "x", "std": 20}, "flash-attn: gpu_build.cxx must be a mapping of forces, text and"),
])
def test_malformed_cxx_data_is_refused_by_the_matrix(cxx, message):
    gpu_build = copy.deepcopy(shared_manifest()["sparkforge_ml_packages"]["flash-attn"]["gpu_build"])
    gpu_build["cxx"] = cxx
    with pytest.raises(heavy_build.HeavyBuildError, match=re.escape(message)):
        heavy_build.validate_gpu_build("flash-attn", gpu_build)


# ---- ml_packages: refused before the sdist is fetched -------------------------------------------------------

class RecordingPip(FakePip):
    """FakePip that records every pip command: a refused build must not reach download or wheel."""

    def __init__(self, index, installed):
        FakePip.__init__(self, index, installed)
        self.commands = []

    def __call__(self, cmd):
        self.commands.append(cmd[3:])
        return FakePip.__call__(self, cmd)


def ml_params(venv, matrix, cxx=True):
    m = shared_manifest()
    args = dict(venv=venv, matrix=matrix, pins={"flash-attn": "2.8.3.post2"}, packages=["flash-attn"],
                arch="aarch64", platform_class="dgx_spark", cuda_major=13, index_url="https://pypi.example/simple",
                cuda_arch_list="12.1", audit_targets=["12.1"], build_cpus=4, build_memory_gib=64.0,
                cxx_facts={"releases": m["sparkforge_torch_releases"], "checked": m["sparkforge_torch_cxx_checked"],
                           "min_compilers": m["sparkforge_cxx_min_compilers"]} if cxx else {})
    result = ArgumentSpecValidator(ml_packages.ARGUMENT_SPEC).validate(args)
    assert not result.error_messages, result.error_messages
    return result.validated_parameters


@pytest.fixture
def venv(tmp_path):
    path = tmp_path / "venv"
    (path / "bin").mkdir(parents=True)
    (path / "bin" / "python").write_text("")
    (path / "bin" / "python").chmod(0o755)
    return str(path)


def flash_attn_matrix(with_fix):
    entry = copy.deepcopy(shared_manifest()["sparkforge_ml_packages"]["flash-attn"])
    if not with_fix:
        entry["gpu_build"]["fixes"] = [f for f in entry["gpu_build"]["fixes"] if "cxx_std" not in f]
    return {"flash-attn": entry}


def ml_host(venv, pip, gcc_line=GCC_LINE):
    return FakeSystem(commands={os.path.join(venv, "bin", "python"): pip, ("/usr/bin/c++", "--version"):
                                (0, gcc_line, "")}, tools={"c++": "/usr/bin/c++"})


@pytest.mark.parametrize("check_mode", [True, False])
def test_ml_packages_refuses_the_build_before_fetching_anything(venv, check_mode):
    pip = RecordingPip({"flash-attn": "2.8.3.post2"}, {"torch": "2.15.0+cu130"})
    res = MlPackagesJob(ml_params(venv, flash_attn_matrix(False)), ml_host(venv, pip), check_mode=check_mode).run()
    (row,) = res["packages"]
    assert row["status"] == "failed" and row["cxx"]["std"] == 17 and row["cxx"]["torch_std"] == 20
    assert row["reason"].startswith("flash-attn 2.8.3.post2 builds as C++17 (setup.py line 201")
    assert "torch 2.15.0+cu130's headers require C++20" in row["reason"]
    assert row["reason"].endswith("(nothing was fetched or built)"), "K03"
    # pip was asked the dry run only: no download, no wheel, nothing installed.
    assert [c[0] for c in pip.commands if c[0] in ("download", "wheel")] == []
    assert not [c for c in pip.commands if c[0] == "install" and "--dry-run" not in c]
    assert pip.installed == {"torch": "2.15.0+cu130"}


def test_ml_packages_plans_the_fixed_build_as_cxx20_and_an_old_gcc_is_refused(venv):
    pip = RecordingPip({"flash-attn": "2.8.3.post2"}, {"torch": "2.15.0+cu130"})
    res = MlPackagesJob(ml_params(venv, flash_attn_matrix(True)), ml_host(venv, pip), check_mode=True).run()
    (row,) = res["packages"]
    assert row["status"] == "would_install" and row["cxx"]["std"] == 20 and row["cxx"]["problems"] == []
    old = "g++ (Debian 10.2.1-6) 10.2.1 20210110\nCopyright (C) 2020 Free Software Foundation, Inc.\n"
    res = MlPackagesJob(ml_params(venv, flash_attn_matrix(True)), ml_host(venv, pip, old), check_mode=True).run()
    (row,) = res["packages"]
    assert row["status"] == "failed" and "which needs Clang >= 10 or GCC >= 11" in row["reason"]
    assert "this host's c++ is GCC 10.2.1" in row["reason"]


def test_ml_packages_against_a_torch_that_needs_only_cxx17_builds_unfixed(venv):
    pip = RecordingPip({"flash-attn": "2.8.3.post2"}, {"torch": "2.13.0"})
    res = MlPackagesJob(ml_params(venv, flash_attn_matrix(False)), ml_host(venv, pip), check_mode=True).run()
    assert res["packages"][0]["status"] == "would_install" and res["packages"][0]["cxx"]["std"] == 17


# ---- stack_plan: --check names each conflict, from data, before anything is fetched ---------------------------

def plan_params(settings_more, manifest=None):
    m = copy.deepcopy(manifest or shared_manifest())
    settings_ = {"components": ["ml_packages"], "torch_version": "2.15.0", "torch_source": "index",
                 "cuda_arch_list": "", "ml_profile": "minimal", "dev_libraries": "auto"}
    settings_.update(settings_more)
    return {"facts": SPARK, "gather": None, "host": HOST, "platform_maps": {}, "checks": CHECKS, "settings": settings_,
            "manifest": m, "sources": {}, "probe_sources": False, "probe_timeout": 5, "bundle": None}


def plan_host(gcc_line=GCC_LINE):
    return FakeSystem(commands={("/usr/bin/c++", "--version"): (0, gcc_line, "")}, tools={"c++": "/usr/bin/c++"})


def test_stack_plan_prints_each_build_with_the_facts_it_rests_on():
    res = StackPlanJob(plan_params({"ml_packages": ["flash-attn", "causal-conv1d"]}), plan_host()).run()
    assert [p for p in res["problems"] if p["check"] == "cxx"] == []
    text = "\n".join(res["plan_text"])
    assert "flash-attn 2.8.3.post2: torch 2.15.0, C++20 (set by the entry's fix), compiler GCC 13.3.0, arch list 12.1" \
        in text
    assert ("causal-conv1d 1.7.0: torch 2.15.0, C++20 (no -std of its own: torch's cpp_extension adds "
            "-std=c++20)") in text
    assert "torch 2.15.0 headers: C++20 (torch 2.15.0 wheel (sha256 48c2d861" in text
    assert "fix: setup.py: setup.py hard-codes -std=c++17" in text
    assert json.dumps(res["plan"]["gpu_builds"])  # the plan's JSON carries them


def test_stack_plan_refuses_a_requested_package_whose_build_conflicts():
    m = copy.deepcopy(shared_manifest())
    fixes = m["sparkforge_ml_packages"]["flash-attn"]["gpu_build"]["fixes"]
    m["sparkforge_ml_packages"]["flash-attn"]["gpu_build"]["fixes"] = [f for f in fixes if "cxx_std" not in f]
    res = StackPlanJob(plan_params({"ml_packages": ["flash-attn"]}, m), plan_host()).run()
    (problem,) = [p["message"] for p in res["problems"] if p["check"] == "cxx"]
    assert problem.startswith("flash-attn 2.8.3.post2 builds as C++17 (setup.py line 201")
    assert "pin sparkforge_torch_version to 2.13.0" in problem and res["ready"] is False, "K01"
    assert any(line.strip().startswith("conflict: flash-attn 2.8.3.post2 builds as C++17") for line in res["plan_text"])
    assert any(line.strip() == "setup.py line 201: \"-std=c++17\", (nvcc_flags)" for line in res["plan_text"])


def test_stack_plan_refuses_an_old_compiler_for_the_fixed_build():
    old = "g++ (Ubuntu 10.5.0-1ubuntu1~22.04) 10.5.0\nCopyright (C) 2022 Free Software Foundation, Inc.\n"
    res = StackPlanJob(plan_params({"ml_packages": ["flash-attn"]}), plan_host(old)).run()
    (problem,) = [p["message"] for p in res["problems"] if p["check"] == "cxx"]
    assert "flash-attn 2.8.3.post2 builds as C++20, which needs Clang >= 10 or GCC >= 11" in problem, "K02"


def test_an_optional_package_of_a_profile_is_a_warning_not_a_refusal():
    # xformers on aarch64 (the inference profile) is built from source: C++17, torch 2.15.0 needs C++20.
    res = StackPlanJob(plan_params({"ml_profile": "inference"}), plan_host()).run()
    assert [p for p in res["problems"] if p["check"] == "cxx"] == []
    (warning,) = res["build_warnings"]
    assert warning.startswith("xformers 0.0.35 builds as C++17") and "or leave xformers out" in warning
    assert any(line.startswith("warning: [cxx] xformers 0.0.35") for line in res["plan_text"]), "K06"
    # Named by the user, the same conflict refuses the plan.
    res = StackPlanJob(plan_params({"ml_profile": "inference", "ml_packages": ["xformers"]}), plan_host()).run()
    assert [p["message"] for p in res["problems"] if p["check"] == "cxx"] == [warning]


# ---- the class builder: the sdist's own setup.py, read before anything compiles ------------------------------

def stand_in_venv(tmp_path, sdist):
    """A venv whose `python -m pip download ... -d DEST REQ` puts ``sdist`` into DEST (and does nothing else)."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text("#!/bin/sh\nwhile [ $# -gt 0 ]; do [ \"$1\" = -d ] && dest=$2; shift; done\n"
                      "mkdir -p \"$dest\" && cp %s \"$dest\"/\n" % sdist)
    python.chmod(0o755)
    return str(venv)


def an_sdist(tmp_path, text):
    import tarfile
    project = tmp_path / "pkg-1.0"
    project.mkdir()
    (project / "setup.py").write_text(text)
    archive = str(tmp_path / "pkg-1.0.tar.gz")
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(str(project), arcname="pkg-1.0")
    return archive


@pytest.mark.parametrize("fixed", [False, True])
def test_the_class_builder_reads_the_sdist_and_refuses_before_building(tmp_path, fixed):
    from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import JobError
    from ansible_collections.sparkforge.stack.plugins.module_utils.packages import heavy_wheels
    m = shared_manifest()
    venv = stand_in_venv(tmp_path, an_sdist(tmp_path, setup_py(17)))
    fixes = [{"file": "setup.py", "pattern": r"-std=c\+\+17", "replace": "-std=c++20", "count": 1, "cxx_std": 20}]
    item = {"name": "pkg", "requirement": "pkg==1.0",
            "source": {"spec": None, "env": {}, "build_isolation": False, "prereqs": []},
            "gpu_env": {"TORCH_CUDA_ARCH_LIST": "12.1"}, "audit_targets": ["12.1"],
            "gpu_build": {"jobs_env": "MAX_JOBS", "fixes": fixes if fixed else []},
            "cxx_facts": {"releases": m["sparkforge_torch_releases"], "checked": m["sparkforge_torch_cxx_checked"],
                          "min_compilers": m["sparkforge_cxx_min_compilers"]},
            "cxx_compiler": ("gcc", "13.3.0"), "torch_version": "2.15.0"}
    p = {"venv": venv, "wheel_dir": str(tmp_path / "wheels"), "log_dir": None, "force": False,
         "cuda_arch_list": "12.1", "depends_on": "0" * 64}
    if not fixed:
        with pytest.raises(JobError, match=r"pkg 1\.0 builds as C\+\+17 \(setup\.py line 6: flags = \[\"-O3\", "
                                           r"\"-std=c\+\+17\"\]\), but torch 2\.15\.0's headers require C\+\+20"):
            heavy_wheels.build_one(item, p, [], {}, "release 13.0", "3.12", check_mode=True)
        assert not os.path.exists(p["wheel_dir"]), "K04"
        return
    result = heavy_wheels.build_one(item, p, [], {}, "release 13.0", "3.12", check_mode=True)
    assert result["cxx"]["std"] == 20 and result["plan"].startswith("would build pkg from pkg-1.0.tar.gz")


class SdistPip(RecordingPip):
    """RecordingPip whose `pip download -d DEST` puts ``sdist`` into DEST, as pip does for --no-binary."""

    def __init__(self, index, installed, sdist):
        RecordingPip.__init__(self, index, installed)
        self.sdist = sdist

    def __call__(self, cmd):
        args = cmd[3:]
        if args and args[0] == "download":
            self.commands.append(args)
            dest = args[args.index("-d") + 1]
            if not os.path.isdir(dest):
                os.makedirs(dest)
            with open(self.sdist, "rb") as src, open(os.path.join(dest, os.path.basename(self.sdist)), "wb") as out:
                out.write(src.read())
            return 0, "Saved %s\n" % os.path.basename(self.sdist), ""
        return RecordingPip.__call__(self, cmd)


def test_ml_packages_reads_the_fetched_sdist_and_refuses_before_the_wheel_is_built(venv, tmp_path):
    # The data says the build gives no -std (so the plan lets it through); the sdist's setup.py says otherwise.
    matrix = flash_attn_matrix(False)
    matrix["flash-attn"]["gpu_build"]["cxx"] = {"forces": None, "checked": "a release that gave no -std"}
    import tarfile
    project = tmp_path / "flash_attn-2.8.3.post2"
    project.mkdir()
    (project / "setup.py").write_text(setup_py(17))
    sdist = str(tmp_path / "flash_attn-2.8.3.post2.tar.gz")
    with tarfile.open(sdist, "w:gz") as tar:
        tar.add(str(project), arcname=project.name)
    pip = SdistPip({"flash-attn": "2.8.3.post2"}, {"torch": "2.15.0"}, sdist)
    res = MlPackagesJob(ml_params(venv, matrix), ml_host(venv, pip)).run()
    (row,) = res["packages"]
    assert row["status"] == "failed" and row["cxx"]["forced_from"] == "read from the sdist's setup.py"
    assert row["reason"].startswith("flash-attn 2.8.3.post2 builds as C++17 (setup.py line 6: flags = [")
    assert row["reason"].endswith("(read from the sdist; nothing was built)")
    assert [c[0] for c in pip.commands if c[0] in ("download", "wheel")] == ["download"], "K04"
    assert pip.installed == {"torch": "2.15.0"}
