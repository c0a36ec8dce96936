# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import os

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.sparkforge.stack.plugins.module_utils.packages import cxx_std
from ansible_collections.sparkforge.stack.plugins.module_utils.plan import preflight as pf
from ansible_collections.sparkforge.stack.tests.unit.utils.harness import shared_manifest


def manifest():
    # A copy: the tests change it, and build_plan is given it as a module is given its arguments.
    return copy.deepcopy(shared_manifest())


def spark_facts(driver="580.95.05"):
    return {
        "gpus": [{"index": 0, "name": "NVIDIA GB10", "compute_capability": "12.1", "sm": "sm_121",
                  "driver_version": driver, "memory_mib": None, "uuid": "GPU-x", "platform_class": "dgx_spark"}],
        "compute_capabilities": ["12.1"], "sm_archs": ["sm_121"], "platform_class": "dgx_spark",
        "cpu": {"arch": "aarch64", "cores": 20, "sve2": True},
        "memory": {"total_mib": 122502, "available_mib": 120000},
        "disk": {"/opt/sparkforge/build": {"measured_at": "/opt", "free_mib": 900000, "total_mib": 1900000}},
        "gpu_error": None,
    }


HOST = {"distribution": "Ubuntu", "distribution_version": "24.04", "python_version": "3.12.3"}
CHECKS = {
    "allow_x86_64": False,
    "supported_distributions": [{"distribution": "Ubuntu", "versions": ["22.04", "24.04"]}],
    "min_python": "3.10", "require_gpu": True, "min_driver_blackwell": "580",
    "min_ram_gib": 8, "min_ram_gib_source_build": 32, "min_disk_gib": 20, "min_disk_gib_source_build": 120,
    "build_dir": "/opt/sparkforge/build", "source_build": True,
}


def checks_of(problems):
    return sorted(p["check"] for p in problems)


def test_dgx_spark_is_ready():
    assert pf.problems(spark_facts(), HOST, CHECKS) == []


def test_each_problem_is_reported_with_what_to_do():
    facts = spark_facts(driver="570.86.10")
    facts["cpu"]["arch"] = "x86_64"
    facts["memory"]["total_mib"] = 16 * 1024
    facts["disk"]["/opt/sparkforge/build"]["free_mib"] = 50 * 1024
    host = {"distribution": "Debian", "distribution_version": "12", "python_version": "3.9.2"}
    found = pf.problems(facts, host, CHECKS)
    assert checks_of(found) == ["cpu_arch", "disk", "driver", "os", "python", "ram"]
    text = " ".join(p["message"] for p in found)
    for hint in ("preflight_allow_x86_64", "nvidia-open-580", "sparkforge_build_dir", "3.10"):
        assert hint in text


@pytest.mark.parametrize("row_id", [pytest.param("H16", id="H16")])
def test_a_build_dir_on_a_kernel_file_system_is_named_as_such_not_as_no_free_space(row_id):
    """H16: the prefix under /sys: the disk facts measured at /sys/fs say why nothing can be made there (sysfs
    reports 0 free), and the plan says that instead of asking to free space."""
    from ansible_collections.sparkforge.stack.plugins.module_utils.host import host_facts
    disk = host_facts.disk_free("/sys/fs/sparkforge/build")
    assert disk["unwritable"] == "/sys/fs is on the kernel's sysfs file system (mounted at /sys), where no " \
                                 "directory can be made"
    assert "unwritable" not in host_facts.disk_free(os.path.dirname(__file__))
    facts = spark_facts()
    facts["disk"] = {"/sys/fs/sparkforge/build": disk}
    found = pf.problems(facts, HOST, dict(CHECKS, build_dir="/sys/fs/sparkforge/build"))
    assert [p["message"] for p in found] == [
        "sparkforge_build_dir /sys/fs/sparkforge/build: /sys/fs is on the kernel's sysfs file system (mounted at "
        "/sys), where no directory can be made: nothing can be made there; give sparkforge_prefix (or "
        "sparkforge_build_dir) a path on a writable disk"]


def test_x86_allowed_by_variable_and_thresholds_follow_the_plan():
    facts = spark_facts()
    facts["cpu"]["arch"] = "x86_64"
    facts["memory"]["total_mib"] = 16 * 1024
    checks = dict(CHECKS, allow_x86_64=True, source_build=False)
    assert pf.problems(facts, HOST, checks) == []


def test_no_gpu():
    facts = spark_facts()
    facts.update(gpus=[], compute_capabilities=[], sm_archs=[], platform_class="none",
                 gpu_error="nvidia-smi not found")
    assert checks_of(pf.problems(facts, HOST, CHECKS)) == ["gpu"]
    assert pf.problems(facts, HOST, dict(CHECKS, require_gpu=False)) == []


def test_hopper_needs_no_580_driver():
    facts = spark_facts(driver="550.54.15")
    facts["gpus"][0].update(compute_capability="9.0", sm="sm_90", name="NVIDIA GH200 480GB")
    assert pf.problems(facts, HOST, CHECKS) == []


def test_plan_for_spark_builds_working_kernels():
    m = manifest()
    plan = pf.build_plan(spark_facts(), {"torch_source": "source"}, m)
    newest_good = max((v for v, r in m["sparkforge_torch_releases"].items() if "dgx_spark" in r["good_for"]),
                      key=lambda v: tuple(int(x) for x in v.split(".")))
    assert plan["torch"]["version"] == newest_good
    # 12.1 SASS only where the release has no sm_121 trap; 12.0 SASS (runs on 12.1) otherwise.
    trapped = "mem_eff_sm121_guard" in (m["sparkforge_torch_releases"][newest_good].get("traps") or [])
    assert plan["arch"]["list"] == ("12.0" if trapped else "12.1")


def test_plan_on_a_trap_release_avoids_sm_121():
    plan = pf.build_plan(spark_facts(), {"torch_version": "2.9.1"}, manifest())
    assert plan["arch"]["list"] == "12.0"
    assert "trap avoided" in plan["arch"]["reason"]
    # Asking for 12.1 on that release applies the release's fix (or is refused when it has none).
    plan = pf.build_plan(spark_facts(), {"torch_version": "2.9.1", "cuda_arch_list": "12.1"}, manifest())
    assert "mem_eff_sm121_guard" in plan["arch"]["reason"]
    assert plan["source_build"] is True
    assert [s["component"] for s in plan["steps"]] == list(pf.COMPONENTS)
    assert {s["action"] for s in plan["steps"] if s["component"] in ("triton", "pytorch")} == {"build"}


def test_latest_skips_a_release_with_unconfirmed_pairings_and_a_pin_still_gets_it():
    m = manifest()
    releases = m["sparkforge_torch_releases"]
    newest = max(releases, key=lambda v: tuple(int(x) for x in v.split(".")))
    draft = dict(releases[newest], triton=releases[newest]["triton"], unconfirmed=["triton"])
    m["sparkforge_torch_releases"] = dict(releases, **{"9.99.0": draft})
    assert pf.build_plan(spark_facts(), {}, m)["torch"]["version"] == newest
    assert pf.build_plan(spark_facts(), {"torch_version": "9.99.0"}, m)["torch"]["version"] == "9.99.0"
    m["sparkforge_torch_releases"] = {"9.99.0": draft}
    with pytest.raises(pf.PlanError, match="unconfirmed pairings.*sparkforge_torch_version"):
        pf.build_plan(spark_facts(), {}, m)


def test_plan_index_source_and_component_subset():
    plan = pf.build_plan(spark_facts(), {"torch_source": "index", "components": ["pytorch", "verify"],
                                         "torch_version": "2.9.1"}, manifest())
    assert [s["component"] for s in plan["steps"]] == ["pytorch", "verify"]
    assert plan["torch"]["version"] == "2.9.1" and plan["triton"]["version"] == "3.5.1"
    assert plan["source_build"] is False


def test_plan_errors():
    m = manifest()
    with pytest.raises(pf.PlanError, match="not in the manifest"):
        pf.build_plan(spark_facts(), {"torch_version": "1.0.0"}, m)
    with pytest.raises(pf.PlanError, match="unknown component"):
        pf.build_plan(spark_facts(), {"components": ["bogus"]}, m)
    with pytest.raises(pf.PlanError, match="torch_source"):
        pf.build_plan(spark_facts(), {"torch_source": "conda"}, m)
    old = copy.deepcopy(m)
    old["sparkforge_torch_releases"] = {"2.7.0": {"triton": "3.5.0", "good_for": ["dgx_spark"]}}
    with pytest.raises(pf.PlanError, match="cannot be built with torch 2.7.0"):
        pf.build_plan(spark_facts(), {}, old)
    with pytest.raises(pf.PlanError, match="12.1f"):
        pf.build_plan(spark_facts(), {"cuda_arch_list": "12.1f"}, m)


def test_mixed_host_arch_list_covers_every_gpu():
    facts = spark_facts()
    facts["gpus"].append(dict(facts["gpus"][0], index=1, name="NVIDIA H100", compute_capability="9.0", sm="sm_90",
                              platform_class="hopper"))
    facts.update(compute_capabilities=["9.0", "12.1"], sm_archs=["sm_90", "sm_121"], platform_class="mixed")
    plan = pf.build_plan(facts, {"torch_version": "2.9.1"}, manifest())
    assert plan["arch"]["list"] == "9.0;12.0"


def test_render_plan_lists_problems():
    plan = pf.build_plan(spark_facts(), {}, manifest())
    lines = pf.render_plan(plan, [{"check": "os", "message": "Debian is not supported"}])
    assert lines[0].startswith("platform dgx_spark (12.1)")
    assert lines[-1] == "  - [os] Debian is not supported"


# ------------------------------------------------------------ compiler guard (source builds)

@pytest.mark.parametrize("text, expected", [
    ("g++ (Ubuntu 13.2.0-23ubuntu4) 13.2.0\nCopyright (C) 2023 Free Software Foundation, Inc.\n", ("gcc", "13.2.0")),
    ("c++ (Debian 12.2.0-14+deb12u1) 12.2.0\nCopyright (C) 2022 Free Software Foundation, Inc.\n", ("gcc", "12.2.0")),
    ("Ubuntu clang version 18.1.3 (1ubuntu1)\nTarget: aarch64-unknown-linux-gnu\n", ("clang", "18.1.3")),
    ("something else 1.0\n", None),
    ("", None),
])
def test_parse_compiler_version(text, expected):
    assert cxx_std.parse_compiler_version(text) == expected


def test_compiler_guard_refuses_an_old_gcc_for_a_cxx20_release_with_what_to_install():
    floors = {"17": {"gcc": "9", "clang": "9"}, "20": {"gcc": "10", "clang": "10"}}
    found = pf.compiler_problems("2.14.0", {"cxx_standard": 20}, floors, ("gcc", "9.4.0"))
    assert [p["check"] for p in found] == ["compiler"]
    assert "C++20" in found[0]["message"] and "GCC 9.4.0" in found[0]["message"]
    assert "apt install g++" in found[0]["message"]
    assert pf.compiler_problems("2.13.0", {"cxx_standard": 17}, floors, ("gcc", "9.4.0")) == []
    assert pf.compiler_problems("2.14.0", {"cxx_standard": 20}, floors, ("clang", "18.1.3")) == []
    assert "no C++ compiler" in pf.compiler_problems("2.14.0", {"cxx_standard": 20}, floors, None)[0]["message"]
    # Data without a standard: no opinion.
    assert pf.compiler_problems("2.14.0", {}, floors, ("gcc", "4.8.5")) == []


def test_index_plan_names_the_index_and_what_its_wheel_carries():
    plan = pf.build_plan(spark_facts(), {"torch_source": "index", "torch_version": "2.14.1",
                                         "index_url": "https://pypi.org/simple/"}, manifest())
    step = [s for s in plan["steps"] if s["component"] == "pytorch"][0]
    assert "https://pypi.org/simple/" in step["detail"]
    assert "nvidia-cudnn-cu13==9.24.0.43" in step["why"]
    assert plan["torch"]["wheel"]["cuda"]["nvidia-cusparselt-cu13"] == "==0.8.1"
    assert plan["torch"]["index_url"] == "https://pypi.org/simple/"
    # torch 2.10.0's aarch64 wheels on the index are CPU-only: the plan says so.
    plan = pf.build_plan(spark_facts(), {"torch_source": "index", "torch_version": "2.10.0"}, manifest())
    assert "CPU-only" in [s for s in plan["steps"] if s["component"] == "pytorch"][0]["why"]


def test_pinned_release_needing_a_newer_python_is_refused_and_latest_skips_it():
    with pytest.raises(pf.PlanError) as err:
        pf.build_plan(spark_facts(), {"torch_version": "2.15.0", "python_version": "3.10.12"}, manifest())
    assert "requires Python >=3.11" in str(err.value) and "3.10.12" in str(err.value)
    plan = pf.build_plan(spark_facts(), {"torch_version": "latest", "python_version": "3.10.12"}, manifest())
    # latest on 3.10 is a release whose wheels take 3.10 (the data's newest one that does, whatever it is)
    releases = manifest()["sparkforge_torch_releases"]
    assert plan["torch"]["version"] != "2.15.0"
    assert all(not (f or {}).get("requires_python", "").startswith(">=3.11")
               for f in (releases[plan["torch"]["version"]].get("wheels") or {}).values())


def test_index_plan_shows_the_audited_arch_list_of_the_real_wheel():
    """torch 2.15.0's aarch64 wheel was audited (docs/results/arch-audit-torch-2.15.0-aarch64.json)."""
    plan = pf.build_plan(spark_facts(), {"torch_source": "index", "torch_version": "2.15.0"}, manifest())
    why = [s for s in plan["steps"] if s["component"] == "pytorch"][0]["why"]
    assert "audited CUDA code: SASS 8.0;9.0;10.0;11.0;12.0, PTX none" in why
    assert plan["torch"]["wheel_archs"]["sass"] == "8.0;9.0;10.0;11.0;12.0"


# ------------------------------------------------------------ a plan that follows need

def gh200_facts():
    facts = spark_facts()
    facts["gpus"][0].update(name="NVIDIA GH200 480GB", compute_capability="9.0", sm="sm_90", platform_class="gh200")
    facts.update(compute_capabilities=["9.0"], sm_archs=["sm_90"], platform_class="gh200")
    return facts


def h100_facts():
    facts = gh200_facts()
    facts["gpus"][0].update(name="NVIDIA H100 80GB HBM3", platform_class="hopper")
    facts.update(platform_class="hopper")
    facts["cpu"] = {"arch": "x86_64", "cores": 16, "sve2": False}
    return facts


DEV = ("cuda_libs", "cusparselt", "llvm")


@pytest.mark.parametrize("facts", [spark_facts, gh200_facts, h100_facts], ids=["gb10", "gh200", "h100"])
@pytest.mark.parametrize("source", ["source", "index", "wheelhouse", "existing"])
def test_dev_libraries_only_where_something_compiles(facts, source):
    plan = pf.build_plan(facts(), {"torch_source": source, "ml_profile": "minimal"}, manifest())
    actions = plan["actions"]
    if source == "source":
        assert [actions[c] for c in DEV] == ["install"] * 3
        assert plan["compiles"] == ["triton, pytorch, torch_domains built from source"]
        why = [s for s in plan["steps"] if s["component"] == "cuda_libs"][0]["why"]
        assert "triton, pytorch, torch_domains built from source" in why
    else:
        assert [actions[c] for c in DEV] == ["skip"] * 3, actions
        why = [s for s in plan["steps"] if s["component"] == "cusparselt"][0]["why"]
        assert "nothing on this host compiles" in why and "sparkforge_dev_libraries: always" in why
        assert actions["pytorch"] == "install"


def test_an_ml_package_built_from_source_brings_the_dev_libraries_back():
    """xformers is a source build on aarch64 in the inference profile (the matrix), not on x86_64."""
    plan = pf.build_plan(gh200_facts(), {"torch_source": "index", "ml_profile": "inference"}, manifest())
    assert plan["actions"]["cuda_libs"] == "install"
    assert plan["compiles"] == ["ML package(s) xformers built from source on aarch64 (profile inference)"]
    plan = pf.build_plan(h100_facts(), {"torch_source": "index", "ml_profile": "inference"}, manifest())
    assert plan["actions"]["cuda_libs"] == "skip"


def test_dev_libraries_can_be_forced_either_way():
    plan = pf.build_plan(h100_facts(), {"torch_source": "existing", "dev_libraries": "always"}, manifest())
    assert [plan["actions"][c] for c in DEV] == ["install"] * 3
    assert "sparkforge_dev_libraries: always" in plan["steps"][0]["why"]
    plan = pf.build_plan(spark_facts(), {"torch_source": "source", "dev_libraries": "never"}, manifest())
    assert [plan["actions"][c] for c in DEV] == ["skip"] * 3
    with pytest.raises(pf.PlanError) as err:
        pf.build_plan(spark_facts(), {"dev_libraries": "sometimes"}, manifest())
    assert "sparkforge_dev_libraries must be one of auto, always, never" in str(err.value)


def _venv_with_torch(root, version):
    info = root / "lib" / "python3.12" / "site-packages" / ("torch-%s.dist-info" % version.split("+")[0])
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: %s\n\nlong description\n" % version)
    return str(root)


def test_existing_torch_is_read_from_the_venvs_dist_info(tmp_path):
    from ansible_collections.sparkforge.stack.plugins.module_utils.packages.ml_packages import venv_torch_version
    assert venv_torch_version(_venv_with_torch(tmp_path / "v", "2.11.0+cu130")) == "2.11.0+cu130"
    assert venv_torch_version(str(tmp_path / "absent")) is None
    (tmp_path / "empty" / "lib" / "python3.12" / "site-packages").mkdir(parents=True)
    assert venv_torch_version(str(tmp_path / "empty")) is None


def test_existing_torch_must_be_there_and_the_planned_one(tmp_path):
    from ansible_collections.sparkforge.stack.plugins.module_utils.plan.preflight import existing_torch_problems
    assert existing_torch_problems("/v", "2.11.0+cu130", "2.11.0") == []
    none = existing_torch_problems("/v", None, "2.11.0")
    assert [p["check"] for p in none] == ["existing_torch"]
    assert "/v holds none" in none[0]["message"] and "sparkforge_torch_source" in none[0]["message"]
    other = existing_torch_problems("/v", "2.10.0", "2.11.0")
    assert "holds torch 2.10.0 and the plan wants 2.11.0: set sparkforge_torch_version=2.10.0" in other[0]["message"]


def test_the_plan_resolves_the_ml_packages_the_role_installs():
    """Issue 42 item 2: the plan reads the role's inputs - an empty profile is none (not minimal), the role's
    package list, the user's pins and extra matrix entries over the manifest's."""
    m = manifest()
    config = {"components": ["ml_packages"], "torch_source": "index", "ml_profile": "", "ml_packages": ["einops"],
              "ml_pins": {"einops": "0.8.0"}}
    plan = pf.build_plan(spark_facts(), config, m)
    assert [s["detail"] for s in plan["steps"] if s["component"] == "ml_packages"] == ["packages einops"]
    items = []
    pf.compile_needs(config, ["ml_packages"], m, spark_facts(), "dgx_spark", ml_out=items)
    assert items == [{"name": "einops", "requirement": "einops==0.8.0", "method": "wheel", "optional": False}]
    with pytest.raises(pf.PlanError, match="unknown profile 'trainig'"):
        pf.compile_needs({"ml_profile": "trainig"}, ["ml_packages"], m, spark_facts(), "dgx_spark")


def test_the_plan_gives_every_build_one_arch_list_and_why():
    """issues 45, 55: the arch list is decided once, in the plan: sparkforge_plan.arch = {list, reason}, one list for
    every build (torch, domains, ML GPU builds, runtime_env's export); the roles read it."""
    m = manifest()
    # (a) no override on a GB10: the release's default for the class (or the host's GPUs).
    plan = pf.build_plan(spark_facts(), {"torch_source": "source"}, m)
    arch = plan["arch"]
    assert sorted(arch) == ["list", "reason"]
    assert "cuda_arch_list" not in plan["torch"] and "why" not in plan["torch"]
    assert "dgx_spark" in arch["reason"] or "the host's compute capabilities" in arch["reason"]
    # Shown in the plan: the list once, with who compiles for it and where it came from.
    assert "  arch list %s for torch, domains, ml_builds, runtime  [%s]" % (arch["list"], arch["reason"]) \
        in pf.render_plan(plan, [])
    # (b) an override, named by the one variable, validated for the release.
    plan = pf.build_plan(spark_facts(), {"torch_source": "source", "cuda_arch_list": "12.0"}, m)
    assert plan["arch"]["list"] == "12.0" and plan["arch"]["reason"].startswith("set by sparkforge_cuda_arch_list")
    with pytest.raises(pf.PlanError, match="sparkforge_cuda_arch_list '9.0' has no code for this host's GPU "
                                           "capability 12.1"):
        pf.build_plan(spark_facts(), {"cuda_arch_list": "9.0"}, m)
    # (c) torch existing: the venv's torch's own list (read on the host by the plan), whatever the release's default.
    existing = {"torch_source": "existing", "venv": "/opt/v", "installed_archs": ["sm_90", "sm_120", "compute_120"]}
    plan = pf.build_plan(spark_facts(), existing, m)
    assert plan["arch"]["list"] == "9.0;12.0+PTX"
    assert "the installed torch's own arch list (torch.cuda.get_arch_list() in /opt/v: sm_90, sm_120, " \
           "compute_120)" in plan["arch"]["reason"]
    # A torch that reports none (a CPU build, no GPU visible) leaves the plan's own list, saying so.
    plan = pf.build_plan(spark_facts(), dict(existing, installed_archs=[]), m)
    assert "the venv's torch reported no arch list" in plan["arch"]["reason"]
    assert plan["arch"]["list"] == pf.build_plan(spark_facts(), {}, m)["arch"]["list"]
    # The user's override wins over the installed torch's list, as it does over the default.
    plan = pf.build_plan(spark_facts(), dict(existing, cuda_arch_list="12.0"), m)
    assert plan["arch"]["list"] == "12.0" and plan["arch"]["reason"].startswith("set by")


def test_without_a_plan_the_same_rules_answer_for_the_host():
    """A role run without preflight (cluster.yml's runtime_env) asks arch_plan.without_plan, never a regex."""
    from ansible_collections.sparkforge.stack.plugins.module_utils.cuda.arch import ArchError
    from ansible_collections.sparkforge.stack.plugins.module_utils.plan.arch_plan import without_plan
    got = without_plan(["sm_121a", "sm_90", "12.1"])
    # A GPU's own sm_121a names what it supports: its code is plain SASS for 12.1.
    assert got["list"] == "9.0;12.1"
    assert got["reason"].startswith("this host's GPUs (gpu_facts: sm_121a, sm_90, 12.1; no plan")
    assert without_plan(["sm_121"], "12.0;9.0+PTX")["list"] == "9.0+PTX;12.0"
    assert without_plan([]) == {"list": "", "reason": "no plan and no GPU found: nothing to compile for"}
    with pytest.raises(ArchError, match="sparkforge_cuda_arch_list='sm90': 'sm90' is not an architecture"):
        without_plan(["sm_121"], "sm90")


RELEASES = sorted(shared_manifest()["sparkforge_torch_releases"])


def _torch_data(m):
    return {"releases": m["sparkforge_torch_releases"], "arch_min_version": m["sparkforge_torch_arch_min_version"],
            "arch_defaults": m["sparkforge_torch_arch_defaults"], "traps": m["sparkforge_torch_traps"],
            "fixes": m["sparkforge_torch_fixes"]}


@settings(max_examples=40, deadline=None)
@given(planned=st.sampled_from(RELEASES), wanted=st.sampled_from(RELEASES + [""]),
       klass=st.sampled_from([("dgx_spark", ["12.1"]), ("gh200", ["9.0"]), ("blackwell_dc", ["10.0", "10.3"])]),
       override=st.sampled_from(["", "12.0;9.0+PTX"]))
def test_every_role_reads_the_plans_list_or_the_plans_rules_for_its_torch(planned, wanted, klass, override):
    """arch_plan.for_role, the plan_arch filter's one rule: the plan's block when the plan is for the role's torch
    (or the role names none); for another torch, preflight's own answer for that release on this host."""
    from ansible_collections.sparkforge.stack.plugins.module_utils.plan.arch_plan import for_role
    platform_class, caps = klass
    plan = {"torch": {"version": planned}, "arch": {"list": "8.6", "reason": "the plan's"}}
    m = manifest()
    data = _torch_data(m)
    try:
        got = for_role(plan, caps, override, wanted, data, platform_class)
    except Exception as exc:  # the same refusal preflight gives for that release and host
        got = exc
    if wanted in ("", planned):
        assert got == {"list": "8.6", "reason": "the plan's"}
        return
    facts = dict(spark_facts(), compute_capabilities=caps, platform_class=platform_class)
    try:
        expected = pf.build_plan(facts, {"torch_version": wanted, "cuda_arch_list": override}, m)["arch"]
    except pf.PlanError as exc:
        assert not isinstance(got, dict) and str(got) in str(exc), (got, exc)
        return
    assert isinstance(got, dict) and got["list"] == expected["list"], (got, expected)
    assert "the plan's rules for torch %s on this host: the plan is for torch %s" % (wanted, planned) in got["reason"]


def test_a_role_without_a_plan_for_an_unknown_torch_is_refused():
    from ansible_collections.sparkforge.stack.plugins.module_utils.build.torch_build import ArchListError
    from ansible_collections.sparkforge.stack.plugins.module_utils.plan.arch_plan import for_role
    with pytest.raises(ArchListError, match="torch 2.99.0 is not in the version data"):
        for_role({}, ["12.1"], "", "2.99.0", _torch_data(manifest()), "dgx_spark")


@pytest.mark.parametrize("capability, nearest", [("10.3", "10.0"), ("11.5", "11.0"), ("12.7", "12.1")])
def test_a_gpu_class_newer_than_the_names_torch_knows_plans_the_nearest_known_arch_that_runs_on_it(
        capability, nearest):
    # A GPU class added as the guide says (a platforms.yml row, the class in good_for) on a capability that
    # sparkforge_torch_arch_min_version does not list: the plan compiles the highest known name of the same
    # major at or below it (its SASS runs there) and says so, rather than refusing the host.
    m = manifest()
    for entry in m["sparkforge_torch_releases"].values():
        entry["good_for"] = list(entry.get("good_for") or []) + ["newclass"]
    facts = spark_facts()
    sm = "sm_" + capability.replace(".", "")
    facts["gpus"][0].update(name="NVIDIA NEW", compute_capability=capability, sm=sm, platform_class="newclass")
    facts.update(compute_capabilities=[capability], sm_archs=[sm], platform_class="newclass")
    plan = pf.build_plan(facts, {}, m)
    assert plan["arch"]["list"] == nearest
    assert "nearest known arch: %s -> %s" % (capability, nearest) in plan["arch"]["reason"]


def test_a_gpu_of_a_major_torch_does_not_know_is_refused_naming_the_data_to_add():
    m = manifest()
    facts = spark_facts()
    facts["gpus"][0].update(compute_capability="13.0", sm="sm_130", platform_class="newclass")
    facts.update(compute_capabilities=["13.0"], sm_archs=["sm_130"], platform_class="newclass")
    with pytest.raises(pf.PlanError, match="PyTorch does not know the arch 13.0.*sparkforge_torch_arch_min_version"):
        pf.build_plan(facts, {"torch_version": "2.11.0"}, m)
