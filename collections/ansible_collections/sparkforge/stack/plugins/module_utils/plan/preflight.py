# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight checks and the per-host plan, as plain functions.

``problems()`` says what stops a host from being provisioned, each with what to do.
``build_plan()`` says what the later roles will install or build on the host, and why.
Both read only their arguments (facts from gpu_facts/setup, the user's settings and
the version manifest), so unit tests drive them with recorded facts.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.sparkforge.stack.plugins.module_utils.build.build_common import JobError
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import cxx_std
from ansible_collections.sparkforge.stack.plugins.module_utils.packages.ml_packages import MatrixError
from ansible_collections.sparkforge.stack.plugins.module_utils.packages.ml_packages import canonical_name
from ansible_collections.sparkforge.stack.plugins.module_utils.packages.ml_packages import resolve as ml_resolve
from ansible_collections.sparkforge.stack.plugins.module_utils.host.platforms import version_tuple
from ansible_collections.sparkforge.stack.plugins.module_utils.plan import arch_plan
from ansible_collections.sparkforge.stack.plugins.module_utils.build.torch_build import (
    default_version,
    plan_arch_list,
    python_allowed,
)
# The components, in the order the plays run them (validate holds the one list).
from ansible_collections.sparkforge.stack.plugins.module_utils.plan.validate import COMPONENTS
# Room and rights on the host (each growing place's file system, who runs it): plan/host_room.py.
from ansible_collections.sparkforge.stack.plugins.module_utils.plan.host_room import disk_problems

# Compute capability major from which a GPU is a Blackwell (10.x B200/GB200, 11.0 Thor, 12.x GB10/RTX 50).
BLACKWELL_MIN_MAJOR = 10

TORCH_SOURCES = ("source", "index", "wheelhouse", "existing")


class PlanError(Exception):
    pass


def _problem(check, message):
    return {"check": check, "message": message}


def distribution_supported(distribution, version, supported):
    for entry in supported:
        if entry.get("distribution") == distribution:
            versions = [str(v) for v in entry.get("versions", [])]
            if not versions or str(version) in versions or str(version).split(".", 1)[0] in versions:
                return True
    return False


def problems(facts, host, config):
    """Every reason this host cannot be provisioned, each with what to do about it.

    ``facts``: ansible_facts.sparkforge; ``host``: distribution, distribution_version,
    python_version; ``config``: the preflight settings (see the preflight role's defaults).
    """
    found = []
    arch = facts["cpu"]["arch"]
    if arch == "x86_64":
        if not config.get("allow_x86_64"):
            found.append(_problem(
                "cpu_arch",
                "this host is x86_64; sparkforge targets aarch64 DGX Spark/GH200 hosts. Set "
                "preflight_allow_x86_64: true to provision an x86_64 GPU host anyway."))
    elif arch != "aarch64":
        found.append(_problem("cpu_arch", "CPU architecture %s is not supported (aarch64, or x86_64 when allowed)" % arch))

    supported = config.get("supported_distributions", [])
    if not distribution_supported(host.get("distribution"), host.get("distribution_version"), supported):
        names = ", ".join("%s %s" % (e["distribution"], "/".join(str(v) for v in e.get("versions", [])))
                          for e in supported)
        found.append(_problem(
            "os",
            "%s %s is not supported: install one of %s (or extend preflight_supported_distributions "
            "if you know what you are doing)" % (host.get("distribution"), host.get("distribution_version"), names)))

    if version_tuple(host.get("python_version", "0")) < version_tuple(config.get("min_python", "3.10")):
        found.append(_problem(
            "python",
            "Python %s is too old: the stack needs %s or newer (Ubuntu 22.04 has 3.10, 24.04 has 3.12)"
            % (host.get("python_version"), config.get("min_python", "3.10"))))

    if not facts["gpus"]:
        reason = facts.get("gpu_error") or "nvidia-smi lists no GPU"
        if config.get("require_gpu", True):
            found.append(_problem("gpu", "no NVIDIA GPU found: %s" % reason))
    else:
        min_driver = str(config.get("min_driver_blackwell", "580"))
        for gpu in facts["gpus"]:
            major = int(gpu["compute_capability"].split(".")[0])
            if major >= BLACKWELL_MIN_MAJOR and version_tuple(gpu["driver_version"]) < version_tuple(min_driver):
                found.append(_problem(
                    "driver",
                    "GPU %d (%s, %s) is a Blackwell and needs NVIDIA driver %s or newer, found %s: install "
                    "nvidia-open-%s (the open kernel modules) and reboot"
                    % (gpu["index"], gpu["name"], gpu["sm"], min_driver, gpu["driver_version"], min_driver)))

    source_build = config.get("source_build", False)
    need_ram = config["min_ram_gib_source_build"] if source_build else config["min_ram_gib"]
    have_ram = facts["memory"]["total_mib"] / 1024.0
    if have_ram < need_ram:
        found.append(_problem(
            "ram",
            "%.1f GiB of RAM, the planned work needs %s GiB (%s). Add memory or swap, or install torch from "
            "an index/wheelhouse instead of building it" % (
                have_ram, need_ram, "building from source" if source_build else "installing")))

    need_disk = config["min_disk_gib_source_build"] if source_build else config["min_disk_gib"]
    build_dir = config.get("build_dir")
    places = [{"variable": "sparkforge_build_dir", "path": build_dir, "need_gib": need_disk}] if build_dir else []
    found += disk_problems(facts.get("disk", {}), places + list(config.get("disk_places") or []))
    return found


def select_torch_version(requested, releases, platform_class, python_version=None):
    """'latest' -> torch_build.default_version for the class and the host's Python; else the
    requested one, checked (known, and its wheels accept the host's Python)."""
    if requested in (None, "", "latest"):
        try:
            # No GPU: the host is refused anyway; plan with the newest release to show the work.
            return default_version(releases, None if platform_class == "none" else platform_class, python_version)
        except JobError as exc:
            raise PlanError("%s (sparkforge_torch_version)" % exc)
    if requested not in releases:
        raise PlanError("PyTorch %s is not in the manifest (known: %s); add it to sparkforge_torch_releases"
                        % (requested, ", ".join(sorted(releases, key=version_tuple))))
    if not python_allowed(releases[requested], python_version):
        needs = sorted({f.get("requires_python") for f in releases[requested]["wheels"].values()})
        raise PlanError("PyTorch %s requires Python %s and this host has %s: pin an older release or "
                        "install a newer Python" % (requested, " / ".join(needs), python_version))
    return requested


def compiler_problems(torch_version, release, min_compilers, compiler):
    """Why this host's C++ compiler cannot build the release (its ``cxx_standard``), with what to
    install; ``compiler``: parse_compiler_version's result or None when `c++` is missing."""
    std = release.get("cxx_standard")
    if not std:
        return []
    floors = (min_compilers or {}).get(str(std)) or {}
    wanted = " or ".join("%s >= %s" % ("GCC" if k == "gcc" else "Clang", v) for k, v in sorted(floors.items()))
    if compiler is None:
        return [_problem("compiler", "no C++ compiler (c++) found: building PyTorch %s needs C++%s (%s): "
                                     "install g++ (apt install g++)" % (torch_version, std, wanted or "any"))]
    kind, version = compiler
    floor = floors.get(kind)
    if floor and version_tuple(version) < version_tuple(floor):
        return [_problem("compiler", "PyTorch %s builds as C++%s, which needs %s; this host's c++ is %s %s: "
                                     "install a newer one (e.g. apt install g++-%s) and make it c++"
                         % (torch_version, std, wanted, "GCC" if kind == "gcc" else "Clang", version,
                            floors.get("gcc", "12")))]
    return []


def existing_torch_problems(venv, have, planned):
    """With torch source ``existing``, the venv must already hold the planned torch: a problem per mismatch.
    ``have``: what venv_torch_version read; ``planned``: the plan's torch version."""
    if have is None:
        return [_problem("existing_torch", "torch source existing keeps the venv's torch, but %s holds none: install "
                                           "torch there, or set sparkforge_torch_source to index, wheelhouse or source"
                         % venv)]
    if have.split("+", 1)[0] != planned:
        return [_problem("existing_torch", "torch source existing keeps the venv's torch, but %s holds torch %s and the "
                                           "plan wants %s: set sparkforge_torch_version=%s"
                         % (venv, have, planned, have.split("+", 1)[0]))]
    return []


DEV_LIBRARIES = ("auto", "always", "never")
TORCH_SOURCE_WORDS = {"index": "a package index", "wheelhouse": "a wheelhouse", "existing": "the existing venv"}


def compile_needs(config, enabled, manifest, facts, klass, ml_out=None, gpu_out=None):
    """What compiles on this host, each as a reason (empty: nothing does, so no CUDA development
    libraries, cuSPARSELt or LLVM are needed).  ``gpu_out`` gets the resolved items of the GPU source builds."""
    needs = []
    if config.get("torch_source", "source") == "source":
        built = [c for c in ("triton", "pytorch", "torch_domains") if c in enabled]
        if built:
            needs.append("%s built from source" % ", ".join(built))
    matrix = manifest.get("sparkforge_ml_packages")
    if "ml_packages" in enabled and matrix:
        platform = {"arch": facts["cpu"]["arch"], "platform_class": klass,
                    "cuda_major": manifest.get("sparkforge_cuda_major", 13)}
        # What the ml_packages role resolves: the manifest's matrix and pins with the user's extra entries and
        # pins over them, its profile ("" is none) and its package list.
        matrix = dict(matrix, **(config.get("ml_extra_matrix") or {}))
        pins = dict(manifest.get("sparkforge_ml_package_pins") or {}, **(config.get("ml_pins") or {}))
        profile = config.get("ml_profile")
        try:
            items = ml_resolve(matrix, manifest.get("sparkforge_ml_profiles") or {}, pins, platform,
                               profile="minimal" if profile is None else profile or None,
                               packages=config.get("ml_packages") or None)
        except MatrixError as exc:
            raise PlanError("ML package matrix: %s" % exc)
        if ml_out is not None:  # the packages the profile installs (what an offline bundle must carry)
            # (optional: may fail without failing the run, so the result check leaves it out)
            ml_out.extend({"name": i["name"], "requirement": i["requirement"], "method": i["method"],
                           "optional": i["optional"]} for i in items)
        if gpu_out is not None:
            gpu_out.extend(i for i in items if i.get("gpu_build") and i["method"] == "source")
        source_built = [i["name"] for i in items if i["method"] == "source"]
        if source_built:
            needs.append("ML package(s) %s built from source on %s (profile %s)"
                         % (", ".join(source_built), facts["cpu"]["arch"], config.get("ml_profile")))
    return needs


def gpu_source_builds(facts, config, manifest):
    """The ML packages this host builds from source with CUDA kernels (matrix items with gpu_build), resolved as
    the plan resolves them; empty when ml_packages is not a component."""
    enabled = config.get("components") or list(COMPONENTS)
    out = []
    compile_needs(config, enabled, manifest, facts, facts["platform_class"], None, out)
    return out


def cxx_builds(items, config, plan, manifest, compiler):
    """(builds, problems, warnings): the C++ plan of each GPU source build against the plan's torch
    (cxx_std.plan_build, from data: nothing is fetched).  A conflict of a package the user asked for
    (ml_packages_packages) or one that is not optional is a problem; of an optional one a profile brings, a
    warning (the ml_packages role refuses to build it, and an optional failure does not fail the run)."""
    releases = manifest["sparkforge_torch_releases"]
    torch = cxx_std.torch_requirement(plan["torch"]["version"], releases, manifest.get("sparkforge_torch_cxx_checked"))
    asked = set(canonical_name(n) for n in config.get("ml_packages") or [])
    builds, problems, warnings = [], [], []
    for item in items:
        release = item["requirement"].split("==", 1)[1] if "==" in item["requirement"] else "(unpinned)"
        build = cxx_std.plan_build(item["name"], release, item["gpu_build"], torch, releases,
                                   manifest.get("sparkforge_cxx_min_compilers"), compiler,
                                   prereqs=item["source"]["prereqs"])
        build["arch_list"] = (plan.get("arch") or {}).get("list")
        builds.append(build)
        blocking = canonical_name(item["name"]) in asked or not item["optional"]
        for message in build["problems"]:
            (problems if blocking else warnings).append({"check": "cxx", "message": message})
    return builds, problems, warnings


def ml_words(config):
    """The ML packages asked for, as the plan shows them: the profile and the extra packages."""
    profile = config.get("ml_profile", "minimal")
    words = ["profile %s" % profile] if profile else []
    if config.get("ml_packages"):
        words.append("packages %s" % ", ".join(config["ml_packages"]))
    return " + ".join(words) or "nothing selected"


def build_plan(facts, config, manifest, steps=None):
    """What each component will do on this host and why: PLAN_STEPS in order over the plan so far (``steps``:
    another list, as a test passes), the first problem a step returns raised as PlanError.

    ``config``: components (list), torch_version, torch_source, cuda_arch_list (optional: the user's
    sparkforge_cuda_arch_list), installed_archs (torch source existing: the venv's
    torch.cuda.get_arch_list(), read on the host; installed_archs_unread: why it could not be) and venv,
    ml_profile, ml_packages, ml_pins, ml_extra_matrix (what the ml_packages role resolves).
    ``manifest``: sparkforge_torch_releases, sparkforge_triton_releases, sparkforge_torch_arch_min_version.
    """
    so_far = {"facts": facts, "config": config, "manifest": manifest, "klass": facts["platform_class"], "steps": []}
    for step in PLAN_STEPS if steps is None else steps:
        problem = step(so_far)
        if problem:
            raise PlanError(problem)
    return plan_of(so_far)


# build_plan's steps: each step_<name>(so_far) reads the plan so far, adds what it decides and returns the
# problem that stops the plan (its message, beside the check) or None; a helper's PlanError stops it as well.


def step_components(so_far):
    """The components asked for (sparkforge_components; none: all), each a known one."""
    enabled = so_far["enabled"] = so_far["config"].get("components") or list(COMPONENTS)
    unknown = [c for c in enabled if c not in COMPONENTS]
    if unknown:
        return "unknown component(s) %s; known: %s" % (", ".join(unknown), ", ".join(COMPONENTS))
    return None


def step_torch_source(so_far):
    source = so_far["source"] = so_far["config"].get("torch_source", "source")
    if source not in TORCH_SOURCES:
        return "torch_source must be one of %s, got %r" % (", ".join(TORCH_SOURCES), source)
    return None


def step_torch_version(so_far):
    """The torch release: the requested one, checked, or the newest for the class and the host's Python."""
    config, manifest, klass = so_far["config"], so_far["manifest"], so_far["klass"]
    releases = manifest["sparkforge_torch_releases"]
    torch_version = select_torch_version(config.get("torch_version"), releases, klass, config.get("python_version"))
    so_far.update(torch_version=torch_version, release=releases[torch_version])
    return None


def step_arch(so_far):
    """The arch list of each consumer (the block is the arch list's own logic, moved here unchanged)."""
    facts, config, manifest, klass = so_far["facts"], so_far["config"], so_far["manifest"], so_far["klass"]
    torch_version, release, source = so_far["torch_version"], so_far["release"], so_far["source"]
    capabilities = facts["compute_capabilities"]
    data = {
        "arch_defaults": manifest.get("sparkforge_torch_arch_defaults") or {},
        "arch_min_version": manifest["sparkforge_torch_arch_min_version"],
        "traps": manifest.get("sparkforge_torch_traps") or {},
    }
    try:
        arch = plan_arch_list(config.get("cuda_arch_list") or None, torch_version, release, klass, capabilities,
                              data, manifest.get("sparkforge_torch_fixes") or {},
                              variable="sparkforge_cuda_arch_list")
    except JobError as exc:
        raise PlanError(str(exc))
    arch_list = arch["arch_list"]
    arch_why = arch_plan.planned_reason(arch, bool(config.get("cuda_arch_list")))
    # The one list with its reason (torch source existing: the venv's torch's own, as read on the host).
    archs = arch_plan.for_plan(arch_list, arch_why, bool(config.get("cuda_arch_list")), source,
                               config.get("installed_archs"), config.get("venv"), config.get("installed_archs_unread"))
    arch_list, arch_why = archs["list"], archs["reason"]
    so_far.update(capabilities=capabilities, archs=archs, arch_list=arch_list, arch_why=arch_why)
    return None


def step_triton(so_far):
    triton_version = so_far["triton_version"] = so_far["release"]["triton"]
    so_far["triton_release"] = so_far["manifest"].get("sparkforge_triton_releases", {}).get(triton_version, {})
    return None


def step_compiles(so_far):
    so_far["ml_items"] = []
    so_far["needs"] = compile_needs(so_far["config"], so_far["enabled"], so_far["manifest"], so_far["facts"],
                                    so_far["klass"], so_far["ml_items"])
    return None


def step_dev_libraries(so_far):
    dev_libraries = so_far["dev_libraries"] = so_far["config"].get("dev_libraries") or "auto"
    if dev_libraries not in DEV_LIBRARIES:
        return "sparkforge_dev_libraries must be one of %s, got %r" % (", ".join(DEV_LIBRARIES), dev_libraries)
    return None


def _row(so_far, component, action, detail, why):
    """One component's row of the plan's steps (a component the run leaves out has none)."""
    if component in so_far["enabled"]:
        so_far["steps"].append({"component": component, "action": action, "detail": detail, "why": why})


def step_dev_rows(so_far):
    """The CUDA development libraries, cuSPARSELt and LLVM: installed when something compiles, and why."""
    dev_libraries, needs, source = so_far["dev_libraries"], so_far["needs"], so_far["source"]
    cuda_detail = "cuBLAS, cuDNN, NCCL, cuFile for CUDA %s from NVIDIA's apt repo" % so_far["manifest"].get(
        "sparkforge_cuda_major", 13)
    if dev_libraries == "always" or (dev_libraries == "auto" and needs):
        because = "; ".join(needs) if needs else "sparkforge_dev_libraries: always"
        _row(so_far, "cuda_libs", "install", cuda_detail, "headers and libraries to compile against: %s" % because)
        _row(so_far, "cusparselt", "install", "cuSPARSELt (local-repo package)",
             "2:4 sparse matmul (USE_CUSPARSELT): %s" % because)
        _row(so_far, "llvm", "install", "the distribution's LLVM/clang/lld",
             "build scripts expect clang and llvm-config: %s" % because)
        return None
    if dev_libraries == "never":
        because = "sparkforge_dev_libraries: never"
    else:
        because = ("nothing on this host compiles (torch from %s%s): torch runs with the CUDA libraries of its "
                   "own pip wheels. sparkforge_dev_libraries: always installs them anyway"
                   % (TORCH_SOURCE_WORDS.get(source, source),
                      ", no ML package of the profile built from source" if "ml_packages" in so_far["enabled"] else ""))
    _row(so_far, "cuda_libs", "skip", cuda_detail, because)
    _row(so_far, "cusparselt", "skip", "cuSPARSELt (local-repo package)", because)
    _row(so_far, "llvm", "skip", "the distribution's LLVM/clang/lld", because)
    return None


def step_torch_rows(so_far):
    """Triton and PyTorch: built from source or installed, and why."""
    config, source, release = so_far["config"], so_far["source"], so_far["release"]
    torch_version = so_far["torch_version"]
    triton_version, arch = so_far["triton_version"], so_far["facts"]["cpu"]["arch"]
    if source == "source":
        llvm = so_far["triton_release"].get("llvm_commit")
        _row(so_far, "triton", "build", "Triton %s against LLVM %s built from source" % (
            triton_version, llvm[:12] if llvm else "(the commit its cmake/llvm-hash.txt pins)"),
            "PyTorch %s pairs with Triton %s; its bundled ptxas cannot target sm_121a"
            % (torch_version, triton_version))
        _row(so_far, "pytorch", "build", "PyTorch %s wheel, TORCH_CUDA_ARCH_LIST=%s" % (
            torch_version, so_far["arch_list"]), so_far["arch_why"])
        return None
    _row(so_far, "triton", "install", "Triton %s from the %s" % (triton_version, source),
         "paired with PyTorch %s" % torch_version)
    _row(so_far, "pytorch", "install", "PyTorch %s from the %s%s" % (
        torch_version, source, " %s (%s)" % (config["index_url"], config.get("index_url_variable")
                                             or "sparkforge_torch_index_url")
        if source == "index" and config.get("index_url") else ""),
        "torch_source=%s; %s" % (source, wheel_carries(release, arch, (
            (so_far["manifest"].get("sparkforge_torch_wheel_archs") or {}).get(torch_version) or {}).get(arch))))
    return None


def step_other_rows(so_far):
    """The components after torch: its domains, the ML packages, the runtime settings, verify."""
    release, torch_version = so_far["release"], so_far["torch_version"]
    _row(so_far, "torch_domains", "build" if so_far["source"] == "source" else "install",
         "torchvision %s, torchaudio %s" % (release.get("torchvision"), release.get("torchaudio")),
         "the versions paired with PyTorch %s" % torch_version)
    _row(so_far, "ml_packages", "install", ml_words(so_far["config"]),
         "constrained so the custom torch is never replaced")
    _row(so_far, "runtime_env", "configure", "CUDA_MODULE_LOADING=LAZY, allocator, TF32, Triton ptxas",
         "runtime tuning")
    _row(so_far, "verify", "check", "numerical checks and benchmarks on the GPU", "prove the result")
    return None


# build_plan's steps, in the order they run: the one place the order lives.  A new check is a step_<name>
# function above and its name here.
PLAN_STEPS = (step_components, step_torch_source, step_torch_version, step_arch, step_triton, step_compiles,
              step_dev_libraries, step_dev_rows, step_torch_rows, step_other_rows)


def plan_of(so_far):
    """The plan the steps decided, as the later roles read it."""
    facts, config, manifest, steps = so_far["facts"], so_far["config"], so_far["manifest"], so_far["steps"]
    source, torch_version, release = so_far["source"], so_far["torch_version"], so_far["release"]
    return {
        "actions": dict((item["component"], item["action"]) for item in steps),
        "compiles": so_far["needs"],
        "platform_class": so_far["klass"],
        "compute_capabilities": so_far["capabilities"],
        # The one arch list every build compiles for, with its reason (arch_plan.py).
        "arch": so_far["archs"],
        "torch": {"version": torch_version, "source": source,
                  "index_url": config.get("index_url") if source == "index" else None,
                  "wheel": (release.get("wheels") or {}).get(facts["cpu"]["arch"]),
                  "wheel_archs": ((manifest.get("sparkforge_torch_wheel_archs") or {}).get(torch_version)
                                  or {}).get(facts["cpu"]["arch"]),
                  "cxx_standard": release.get("cxx_standard")},
        "triton": {"version": so_far["triton_version"], "llvm_commit": so_far["triton_release"].get("llvm_commit")},
        "torchvision": release.get("torchvision"),
        "torchaudio": release.get("torchaudio"),
        "source_build": source == "source",
        "ml_packages": so_far["ml_items"],
        "steps": steps,
    }


def wheel_carries(release, arch, audited=None):
    """What the release's wheels on the package index carry on this CPU (``wheels`` data, and the
    audited arch list ``audited`` = sparkforge_torch_wheel_archs[version][arch] when there is one)."""
    facts = (release.get("wheels") or {}).get(arch)
    if not facts:
        return "the package index's %s wheels of this release are not recorded" % arch
    cuda = facts.get("cuda") or {}
    if not cuda:
        return "the package index's %s wheels of this release are CPU-only (no CUDA libraries)" % arch
    keys = [k for k in sorted(cuda) if re.match(r"^nvidia-(cudnn|cusparselt|nccl)", k)] or sorted(cuda)
    text = "the package index's %s wheels pin %s" % (arch, ", ".join("%s%s" % (k, cuda[k]) for k in keys))
    if audited:
        text += "; audited CUDA code: SASS %s, PTX %s" % (audited.get("sass") or "none", audited.get("ptx") or "none")
    else:
        text += "; their arch list was not audited"
    return text


def render_plan(plan, host_problems):
    """A short text a person reads in the play output."""
    lines = ["platform %s (%s), PyTorch %s from %s" % (
        plan["platform_class"], ", ".join(plan["compute_capabilities"]) or "no GPU",
        plan["torch"]["version"], plan["torch"]["source"])]
    for item in plan["steps"]:
        lines.append("  %-13s %-9s %s  [%s]" % (item["component"], item["action"], item["detail"], item["why"]))
    # Each arch list once, with the consumers that compile for it and where it came from.
    archs = plan.get("arch")
    if archs:
        lines.append("  arch list %s for %s  [%s]" % (archs["list"] or "(none)", arch_plan.USERS, archs["reason"]))
    if host_problems:
        lines.append("blocked by %d problem(s):" % len(host_problems))
        for item in host_problems:
            lines.append("  - [%s] %s" % (item["check"], item["message"]))
    return lines
