# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU packages of one ml_packages run (ml_packages_job.py): each source build planned with its
arch list and job knobs (gpu_plan), built, audited and installed only when it passes (heavy_install),
a prebuilt GPU wheel audited before it is installed (prebuilt_install), and how each was built kept
beside the install (build_record) so a later run whose plan differs rebuilds it (build_changes).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import time

from ansible_collections.sparkforge.stack.plugins.module_utils.packages import gpu_audit
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import arch as cuda_arch
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import ptx_isa
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import cxx_std, elf_links, heavy_build
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import ml_packages as mp
from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import makedirs
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import JobError


def heavy_install(pip, item, row, work, env, rebuild=False):
    """Build a GPU package into a wheel (sdist fixed where needed), audit it, install only what passes.

    Returns (ok, changed).  A refused wheel is never installed: it stays in the work directory,
    which is removed at the end of the run.
    """
    canon = mp.canonical_name(item["name"])
    base = os.path.join(work, "heavy-" + canon)
    sdist_dir, wheel_dir, src_dir = (os.path.join(base, d) for d in ("sdist", "wheel", "src"))
    for path in (sdist_dir, wheel_dir, src_dir):
        makedirs(path)
    isolation = [] if item["source"]["build_isolation"] else ["--no-build-isolation"]
    gb = item["gpu_build"]
    started = time.time()
    if item["source"]["spec"]:
        if gb.get("fixes"):
            row["reason"] = "gpu_build.fixes need the sdist, but the entry builds from source.spec %s" % item["source"]["spec"]
            return False, False
        target = item["source"]["spec"]
    else:
        rc, text = pip.build("download", ["--no-deps", "--no-binary", canon] + isolation
                             + ["-d", sdist_dir, item["requirement"]], env, canon)
        archives = sorted(os.listdir(sdist_dir))
        if rc != 0 or len(archives) != 1:
            row["reason"] = "could not fetch the sdist of %s (pip download rc %d, files %s): %s" % (
                item["requirement"], rc, archives, " / ".join(text.strip().splitlines()[-5:]))
            return False, False
        try:
            target = heavy_build.unpack_sdist(os.path.join(sdist_dir, archives[0]), src_dir)
            # The sdist is at hand: its own build files decide the C++ standard, before anything compiles.
            build = cxx_check(item, item.get("torch_version"), cxx_std.project_files(target))
            if build:
                row["cxx"] = build
                if build["problems"]:
                    row["reason"] = "; ".join(build["problems"]) + " (read from the sdist; nothing was built)"
                    return False, False
            row["fixes"] = heavy_build.apply_fixes(target, gb.get("fixes"), item["name"])
        except heavy_build.HeavyBuildError as exc:
            row["reason"] = str(exc)
            return False, False
    # --no-cache-dir: a wheel the audit may refuse must not land in pip's wheel cache, where a later
    # pip install would pick it up unaudited.
    rc, text = pip.build("wheel", ["--no-deps", "--no-cache-dir"] + isolation + ["-w", wheel_dir, target], env, canon)
    row["build_s"] = round(time.time() - started, 1)
    wheels = sorted(f for f in os.listdir(wheel_dir) if f.endswith(".whl"))
    if rc != 0 or len(wheels) != 1:
        kind, lines = mp.classify_failure(text, pip.protected)
        row["reason"] = "the source build failed (%s, %s wheel(s)): %s" % (kind, len(wheels), "\n".join(lines[-20:]))
        return False, False
    wheel = os.path.join(wheel_dir, wheels[0])
    try:
        links = elf_links.HostLinks(env.get("CUDA_HOME"), elf_links.venv_site_dir(os.path.dirname(os.path.dirname(pip.python))))
        audit = gpu_audit.audit_wheel(wheel, item["audit_targets"], item["name"], env, gb, links,
                                      item.get("ptx_limit"))
    except heavy_build.HeavyBuildError as exc:
        row["reason"] = str(exc)
        return False, False
    row["audit"] = {"wheel": wheels[0], "targets": item["audit_targets"], "libraries": audit["libraries"],
                    "ok": audit["ok"], "note": audit["message"] if audit["ok"] else "",
                    "cuda_libraries": links.present}
    if not audit["ok"]:
        row["reason"] = "%s; not installed" % audit["message"]
        return False, False
    # A rebuild of the installed version replaces it (its dependencies are left as they are).
    rc, text = pip.install((["--force-reinstall", "--no-deps"] if rebuild else []) + [wheel], env, False, None, canon)
    if rc != 0:
        kind, lines = mp.classify_failure(text, pip.protected)
        row["reason"] = "pip install of the audited wheel failed (%s): %s" % (kind, "\n".join(lines[-20:]))
        return False, True
    if audit["message"]:
        row["reason"] = "; ".join(r for r in (row["reason"], audit["message"]) if r)
    return True, True


def cxx_check(item, torch_version, files=None):
    """The C++ plan of one GPU source build (cxx_std.plan_build) against ``torch_version`` (the venv's torch),
    from the sdist's build files when given, else from the entry's data; None without the module's cxx_facts
    or a torch to build against."""
    facts = item.get("cxx_facts")
    if not facts or not facts.get("releases") or not torch_version:
        return None
    torch = cxx_std.torch_requirement(torch_version, facts["releases"], facts.get("checked"))
    release = item["requirement"].split("==", 1)[1] if "==" in item["requirement"] else "(unpinned)"
    return cxx_std.plan_build(item["name"], release, item["gpu_build"], torch, facts["releases"],
                              facts.get("min_compilers"), item.get("cxx_compiler"), files,
                              prereqs=item["source"]["prereqs"])


def prebuilt_install(pip, item, method, version, row, work, env):
    """Download the exact prebuilt GPU wheel the probe chose, audit it (device code for this host's GPUs, links),
    install only that file.  Returns (ok, changed); a refused wheel is never installed."""
    canon = mp.canonical_name(item["name"])
    dest = os.path.join(work, "prebuilt-" + canon)
    makedirs(dest)
    args = mp.install_args(item, method)
    requirement = "%s==%s" % (canon, version) if version else item["requirement"]
    rc, text = pip.build("download", ["--no-deps", "-d", dest] + args[:-1] + [requirement], env, canon)
    wheels = sorted(f for f in os.listdir(dest) if f.endswith(".whl"))
    if rc != 0 or len(wheels) != 1:
        row["reason"] = "could not fetch the wheel of %s to audit it (pip download rc %d, files %s): %s" % (
            requirement, rc, wheels, " / ".join(text.strip().splitlines()[-5:]))
        return False, False
    wheel = os.path.join(dest, wheels[0])
    links = elf_links.HostLinks(env.get("CUDA_HOME"), elf_links.venv_site_dir(os.path.dirname(os.path.dirname(pip.python))))
    audit = gpu_audit.audit_prebuilt(wheel, item.get("audit_targets") or [], item["name"], links, item.get("ptx_limit"))
    row["audit"] = {"wheel": wheels[0], "targets": item.get("audit_targets") or [], "libraries": audit["libraries"],
                    "ok": audit["ok"], "note": audit["message"] if audit["ok"] else "", "cuda_libraries": links.present}
    if not audit["ok"]:
        row["reason"] = "%s; not installed" % audit["message"]
        return False, False
    rc, text = pip.install(args[:-1] + [wheel], env, False, None, canon)
    if rc != 0:
        kind, lines = mp.classify_failure(text, pip.protected)
        row["reason"] = "pip install of the audited wheel failed (%s): %s" % (kind, "\n".join(lines[-20:]))
        return False, True
    if audit["message"]:
        row["reason"] = audit["message"]
    return True, True


def build_record(item, installed, cuda):
    """How a GPU source build is made here: its arch and force-build variables (not the job counts), the venv's
    torch, the CUDA release and the entry's fixes.  Kept beside the install (the venv's provenance record)."""
    gb = item["gpu_build"]
    speed = set([gb["jobs_env"]] + ([gb["threads_env"]] if gb.get("threads_env") else []))
    torch = installed.get("torch")
    return {"env": dict((k, v) for k, v in sorted(item["gpu_env"].items()) if k not in speed),
            "torch": torch["version"] if torch else None, "cuda": cuda,
            "fixes": [dict((k, f.get(k)) for k in ("file", "pattern", "replace", "count")) for f in gb.get("fixes") or []]}


def build_changes(have, want):
    """What differs between the recorded build and the planned one, in words (empty when they match)."""
    if not have:
        # Installed by another path (the fleet's class wheel, whose manifest holds its build; pip by hand):
        # nothing to compare, so it is kept; the caller says so.
        return []
    changes = []
    names = sorted(set(have.get("env") or {}) | set(want["env"]))
    for name in names:
        old, new = (have.get("env") or {}).get(name), want["env"].get(name)
        if old != new:
            changes.append("%s %s -> %s" % (name, old, new))
    for key, label in (("torch", "torch"), ("cuda", "CUDA")):
        if have.get(key) != want[key]:
            changes.append("%s %s -> %s" % (label, have.get(key), want[key]))
    if (have.get("fixes") or []) != want["fixes"]:
        changes.append("the entry's fixes changed")
    return changes


def cuda_of(env, system):
    """nvcc's release line (``Cuda compilation tools, release 13.0, V13.0.88``) of the build's CUDA_HOME, or None
    without a runnable nvcc there: part of the build record."""
    nvcc = os.path.join(env.get("CUDA_HOME") or "", "bin", "nvcc")
    if not env.get("CUDA_HOME") or not os.access(nvcc, os.X_OK):
        return None
    rc, out, _err = system.run([nvcc, "--version"])
    lines = [line.strip() for line in (out or "").splitlines() if "release" in line]
    return lines[-1] if rc == 0 and lines else None


def gpu_plan(p, plan):
    """Give every planned GPU source build its environment and audit targets; refuse bad input first."""
    for target in p["audit_targets"]:
        try:
            cuda_arch.capability(target)
        except cuda_arch.ArchError:
            raise JobError("audit_targets: %r is not a compute capability (give one like 12.1 or 9.0)" % target)
    limit = None
    if p.get("ptx_isa"):
        # What PTX this host's driver loads: PTX-only coverage of a newer ISA is refused, not "jit".
        try:
            if p.get("driver_cuda"):
                ptx_isa.key(p["driver_cuda"])
            limit = ptx_isa.driver_limit(p.get("driver_cuda") or None, p["ptx_isa"])
        except ptx_isa.PtxIsaError as exc:
            raise JobError("driver_cuda %r / ptx_isa: %s (driver_cuda is nvidia-smi's 'CUDA Version', e.g. 13.0)"
                           % (p.get("driver_cuda"), exc))
    for item in plan:
        if item.get("gpu_wheel") or item.get("gpu_build"):
            # A prebuilt GPU wheel is audited for this host's GPUs when it has any (links always).
            item["audit_targets"] = list(p["audit_targets"])
            item["ptx_limit"] = limit
    heavy = [item for item in plan if item.get("gpu_build") and item["method"] == "source"]
    if not heavy:
        return
    if not p["audit_targets"]:
        raise JobError("audit_targets is empty and %s build(s) compile CUDA kernels (%s): the built wheels "
                       "must be audited against this host's compute capability; give audit_targets (gpu_facts' "
                       "compute_capabilities)" % (len(heavy), ", ".join(i["name"] for i in heavy)))
    cpus = p["build_cpus"] or os.cpu_count() or 1
    memory = p["build_memory_gib"]
    try:
        if memory is None:
            with open("/proc/meminfo") as handle:
                memory = heavy_build.memory_available_gib(handle.read())
        for item in heavy:
            item["gpu_env"], item["gpu_notes"] = heavy_build.build_env(
                item["name"], item["gpu_build"], p["cuda_arch_list"], cpus, memory, variable="cuda_arch_list")
            item["audit_targets"] = list(p["audit_targets"])
    except heavy_build.HeavyBuildError as exc:
        raise JobError("cannot plan the GPU source build(s): %s" % exc)
