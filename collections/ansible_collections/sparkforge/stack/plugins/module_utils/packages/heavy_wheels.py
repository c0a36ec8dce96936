# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A fleet class's GPU packages (matrix entries with ``gpu_build``), built once on its builder.

The same shape as the domain libraries (module_utils/build/domain_build.py): each package is built
against the torch in the builder's venv, under a lock, into a directory keyed by every input of
the build, and published whole with ``<wheel>.manifest.json`` (its sha256 and the inputs).  The
key covers the torch build (``depends_on``: the torch wheel's sha256), the requirement, the
sdist's file and sha256, the arch list in every form the build reads, the force-build flags,
the fixes applied, the CUDA release, the build Python and the audit targets; so an unchanged
rerun finds the published wheel and builds nothing, and a change to any of them builds again.

The audit (gpu_audit.audit_wheel) runs on the builder before publishing: a refused
wheel is never published, so it never reaches M(fleet_wheels) or another host.

The job has the shape of module_utils/_common/job.py: ``HeavyWheelsJob(params, system, check_mode)``
(params: the module's options plus ``plan``, the resolved matrix items).  ``plan()`` refuses bad
input (venv, depends_on, nvcc) before anything is fetched or built and lists the packages to
build or reuse; in check mode it also fetches each sdist into a temporary directory to key the
build, and its result is the run's.  ``apply(plan)`` reuses or builds, audits and publishes each
package.  nvcc and the build python are asked through the ``system``; pip download and pip wheel
run with their logs on disk (build_common.run_logged).  No Ansible imports.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shutil
import tempfile
import time

from ansible_collections.sparkforge.stack.plugins.module_utils.packages import gpu_audit
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import arch as cuda_arch
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import cxx_std, heavy_build, ml_gpu
from ansible_collections.sparkforge.stack.plugins.module_utils.packages.ml_packages_job import host_compiler
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import elf_links
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import ml_packages as mp
from ansible_collections.sparkforge.stack.plugins.module_utils.build.build_common import (
    JobError,
    BuildFailed,
    BuildLock,
    cache_key,
    run_logged,
)
from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import (
    atomic_publish,
    atomic_write_text,
    makedirs,
    sha256_file,
)
from ansible_collections.sparkforge.stack.plugins.module_utils.build.domain_build import NON_OUTPUT_ENV, find_published
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import Job, LocalSystem, Plan, output_tail
from ansible_collections.sparkforge.stack.plugins.module_utils.packages.pip_env import isolated_environ
from ansible_collections.sparkforge.stack.plugins.module_utils.build.torch_job import python_version

SCHEME = 1


def class_builds(plan):
    """(items built on the class's builder, notes on GPU packages each host still builds itself).

    Only entries whose method on this platform is ``source``: a wheel-first entry that falls back
    to source is decided per host by pip's probe (ml_packages), not here."""
    heavy, notes = [], []
    for item in plan:
        if not item.get("gpu_build"):
            continue
        if item["method"] == "source":
            heavy.append(item)
        elif item["method"] != "skip":
            notes.append("%s installs by method %s here; a source fallback would be built on each host"
                         % (item["name"], item["method"]))
    return heavy, notes


def plan_item(item, arch_list, audit_targets, cpus=None, memory_gib=None):
    """(build environment, notes, audit targets) of one GPU package, as ml_packages plans it on a host;
    bad input raises HeavyBuildError naming the variable and the value."""
    for target in audit_targets or []:
        try:
            cuda_arch.capability(target)
        except cuda_arch.ArchError:
            raise heavy_build.HeavyBuildError("audit_targets: %r is not a compute capability (give one like 12.1 "
                                              "or 9.0)" % (target,))
    if not audit_targets:
        raise heavy_build.HeavyBuildError(
            "audit_targets is empty and %s compiles CUDA kernels: its wheel must be audited against the class's "
            "compute capability before it is published; give audit_targets" % item["name"])
    if memory_gib is None:
        with open("/proc/meminfo") as handle:
            memory_gib = heavy_build.memory_available_gib(handle.read())
    env, notes = heavy_build.build_env(item["name"], item["gpu_build"], arch_list, cpus or os.cpu_count() or 1,
                                       memory_gib, variable="cuda_arch_list")
    return env, notes, list(audit_targets)


def cuda_release(cuda_home, system=None):
    """nvcc's release line (``Cuda compilation tools, release 13.0, V13.0.88``): part of the key."""
    nvcc = os.path.join(cuda_home, "bin", "nvcc")
    if not os.access(nvcc, os.X_OK):
        raise JobError("cuda_home=%r: %s is not an executable nvcc; the GPU packages are compiled with it"
                       % (cuda_home, nvcc))
    rc, out, err = (system or LocalSystem()).run([nvcc, "--version"])
    if rc != 0:
        raise JobError("%s --version failed (exit %s): %s" % (nvcc, rc, output_tail(out, err)),
                       tail=output_tail(out, err))
    lines = [line.strip() for line in out.splitlines() if "release" in line]
    return lines[-1] if lines else out.strip().splitlines()[-1]


def key_inputs(item, sdist_name, sdist_sha256, p, cuda, python_id):
    """Every input that decides the bytes of the wheel (job counts and proxies left out)."""
    gb = item["gpu_build"]
    speed = set([gb["jobs_env"]] + ([gb["threads_env"]] if gb.get("threads_env") else []))
    env = dict(item["source"]["env"])
    env.update(item["gpu_env"])
    return {
        "what": "heavy", "scheme": SCHEME, "name": item["name"], "requirement": item["requirement"],
        "sdist": {"file": sdist_name, "sha256": sdist_sha256}, "spec": item["source"]["spec"],
        "env": dict((k, v) for k, v in sorted(env.items()) if k not in NON_OUTPUT_ENV and k not in speed),
        "arch_list": p["cuda_arch_list"], "audit_targets": sorted(item["audit_targets"]),
        "fixes": gb.get("fixes") or [], "build_isolation": item["source"]["build_isolation"],
        "cuda": cuda, "python": python_id, "depends_on": p["depends_on"] or "",
    }


def _pip(python, command, index, extra):
    return [python, "-m", "pip", command, "--disable-pip-version-check", "--no-input"] + index + extra


def _download(python, item, index, env, dest, log):
    canon = mp.canonical_name(item["name"])
    isolation = [] if item["source"]["build_isolation"] else ["--no-build-isolation"]
    try:
        run_logged(_pip(python, "download", index, ["--no-deps", "--no-binary", canon] + isolation
                        + ["-d", dest, item["requirement"]]), log, "%s-download" % canon, env=env)
    except BuildFailed as exc:
        raise JobError("could not fetch the sdist of %s: %s" % (item["requirement"], exc))
    archives = sorted(os.listdir(dest))
    if len(archives) != 1:
        raise JobError("pip download of %s gave %s, not one sdist (see %s)" % (item["requirement"], archives, log))
    return os.path.join(dest, archives[0])


def build_one(item, p, index, base_env, cuda, python_id, check_mode=False):
    """Reuse or build, audit and publish one GPU package. Returns its result entry."""
    python = os.path.join(p["venv"], "bin", "python")
    canon = mp.canonical_name(item["name"])
    log = os.path.join(p["log_dir"] or p["wheel_dir"], "%s-class-build.log" % canon)
    env = isolated_environ(os.environ, base_env)
    env.update(item["source"]["env"])
    env.update(item["gpu_env"])
    env = heavy_build.toolkit_env(env)
    work = tempfile.mkdtemp(prefix=".heavy-%s-" % canon, dir=None if check_mode else p["wheel_dir"])
    if check_mode:
        # Check mode writes nothing on the host but its temporary directory (the sdist, to key the build).
        log = os.path.join(work, "download.log")
    try:
        sdist = _download(python, item, index, env, os.path.join(work, "sdist"), log)
        sdist_sha = sha256_file(sdist)
        key_in = key_inputs(item, os.path.basename(sdist), sdist_sha, p, cuda, python_id)
        key = cache_key(key_in)
        dest = os.path.join(p["wheel_dir"], "%s-%s" % (canon, key[:16]))
        result = {"name": item["name"], "requirement": item["requirement"], "cache_key": key, "dir": dest,
                  "sdist": {"file": os.path.basename(sdist), "sha256": sdist_sha}, "build_env": item["gpu_env"],
                  "module": canon.replace("-", "_"), "log": log if not check_mode else None}
        wheel, data = (None, None) if p["force"] else find_published(dest, "*", key)
        if wheel:
            result.update(changed=False, wheel=wheel, sha256=data["sha256"], audit=data.get("audit"),
                          version=data.get("version"),
                          plan="%s is published with this cache key: nothing to build" % os.path.basename(wheel))
            return result
        why = "force: rebuilding" if p["force"] else "no published %s wheel has cache key %s" % (canon, key[:12])
        if item.get("cxx_facts") and not item["source"]["spec"]:
            # The sdist's own build files against the venv's torch, before anything compiles (check mode too).
            project = heavy_build.unpack_sdist(sdist, os.path.join(work, "read"))
            build = ml_gpu.cxx_check(item, item.get("torch_version"), cxx_std.project_files(project))
            if build:
                result["cxx"] = build
                if build["problems"]:
                    raise JobError("; ".join(build["problems"]) + " (read from the sdist; nothing was built)")
        if check_mode:
            result.update(changed=True, wheel=None, sha256=None, audit=None, version=None,
                          plan="would build %s from %s, audit it for %s and publish it: %s" % (
                              item["name"], os.path.basename(sdist), ",".join(item["audit_targets"]), why))
            return result
        started = time.time()
        with BuildLock(os.path.join(p["wheel_dir"], ".%s.lock" % canon)):
            target = item["source"]["spec"]
            fixes = []
            if not target:
                target = heavy_build.unpack_sdist(sdist, os.path.join(work, "src"))
                fixes = heavy_build.apply_fixes(target, item["gpu_build"].get("fixes"), item["name"])
            elif item["gpu_build"].get("fixes"):
                raise JobError("%s: gpu_build.fixes need the sdist, but the entry builds from source.spec %s"
                               % (item["name"], target))
            out = os.path.join(work, "wheel")
            isolation = [] if item["source"]["build_isolation"] else ["--no-build-isolation"]
            # --no-cache-dir: an unaudited wheel never lands in pip's cache.
            try:
                run_logged(_pip(python, "wheel", index, ["--no-deps", "--no-cache-dir"] + isolation
                                + ["-w", out, target]), log, "%s-wheel" % canon, env=env)
            except BuildFailed as exc:
                raise JobError("the source build of %s failed: %s" % (item["name"], exc))
            wheels = sorted(f for f in os.listdir(out) if f.endswith(".whl"))
            if len(wheels) != 1:
                raise JobError("pip wheel of %s made %s, not one wheel (see %s)" % (item["name"], wheels, log))
            built = os.path.join(out, wheels[0])
            links = elf_links.HostLinks(env.get("CUDA_HOME"), elf_links.venv_site_dir(p["venv"]))
            audit = gpu_audit.audit_wheel(built, item["audit_targets"], item["name"], env, item["gpu_build"], links)
            audit_record = {"wheel": wheels[0], "targets": item["audit_targets"], "libraries": audit["libraries"],
                            "ok": audit["ok"], "note": audit["message"] if audit["ok"] else ""}
            if not audit["ok"]:
                # Refused on the builder: not published, so no host of the class ever gets it.
                raise JobError("%s; not published to the class wheelhouse" % audit["message"])
            wheel = atomic_publish(built, dest)
            digest = sha256_file(wheel)
            version = wheels[0].split("-")[1]
            data = {"cache_key": key, "key_inputs": key_in, "wheel_file": os.path.basename(wheel), "sha256": digest,
                    "size": os.path.getsize(wheel), "version": version, "requirement": item["requirement"],
                    "arch_list": p["cuda_arch_list"], "depends_on": p["depends_on"] or "", "cuda": cuda,
                    "sdist": result["sdist"], "fixes": fixes, "audit": audit_record, "log": log,
                    "duration_s": round(time.time() - started, 1)}
            atomic_write_text(wheel + ".manifest.json", json.dumps(data, indent=1, sort_keys=True) + "\n")
        result.update(changed=True, wheel=wheel, sha256=digest, audit=audit_record, version=version,
                      plan="built %s %s from %s, audited for %s, published: %s" % (
                          item["name"], version, os.path.basename(sdist), ",".join(item["audit_targets"]), why))
        return result
    except heavy_build.HeavyBuildError as exc:
        raise JobError(str(exc))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def resolve_items(p):
    """The matrix resolved for the class (as the hosts' ml_packages resolves it), each GPU build given
    its environment and audit targets; JobError on bad input."""
    host = {"arch": p["arch"], "platform_class": p["platform_class"], "cuda_major": p["cuda_major"]}
    try:
        items = mp.resolve(p["matrix"], p["profiles"], p["pins"], host, profile=p["profile"], packages=p["packages"],
                           allow_source_builds=p["allow_source_builds"])
        for item in class_builds(items)[0]:
            item["gpu_env"], item["gpu_notes"], item["audit_targets"] = plan_item(
                item, p["cuda_arch_list"], p["audit_targets"], p["build_cpus"], p["build_memory_gib"])
    except (mp.MatrixError, heavy_build.HeavyBuildError) as exc:
        raise JobError("cannot plan the class's GPU package builds: %s" % exc)
    return items


class HeavyWheelsJob(Job):
    """params: heavy_wheel_build's options (``plan``: the items already resolved, else resolve_items);
    system: module_utils/_common/job.py's seam."""

    def plan(self):
        p = self.params
        items = p["plan"] if p.get("plan") is not None else resolve_items(p)
        heavy, notes = class_builds(items)
        result = {"changed": False, "wheels": [], "notes": notes}
        if not heavy:
            return Plan([], result)
        python = os.path.join(p["venv"], "bin", "python")
        if self.check_mode and (not os.access(python, os.X_OK) or not p["depends_on"]):
            # Before the torch this run builds exists: each package would be built against it.
            for item in heavy:
                result["wheels"].append({
                    "name": item["name"], "requirement": item["requirement"], "changed": True, "wheel": None,
                    "sha256": None, "cache_key": None, "build_env": item["gpu_env"],
                    "plan": "would build %s against the torch this run builds, audit it for %s and publish it"
                            % (item["requirement"], ",".join(item["audit_targets"]))})
            result["changed"] = True
            return Plan([w["plan"] for w in result["wheels"]], result)
        if not os.access(python, os.X_OK):
            raise JobError("venv=%r: %s is not a Python; the GPU packages build against the torch installed there"
                           % (p["venv"], python))
        if not re.match(r"^[0-9a-f]{64}$", p["depends_on"] or ""):
            raise JobError("depends_on=%r: give the sha256 of the torch wheel the packages are built against "
                           "(it is part of their cache key)" % (p["depends_on"],))
        state = {"heavy": heavy, "cuda": cuda_release(p["cuda_home"], self.system),
                 "python_id": python_version(python, self.system),
                 "index": mp.index_args(p["index_url"], p["extra_index_urls"], p["find_links"], p["no_index"])}
        if p.get("cxx_facts"):
            compiler, torch_version = host_compiler(self.system), mp.venv_torch_version(p["venv"])
            for item in heavy:
                item.update(cxx_facts=p["cxx_facts"], cxx_compiler=compiler, torch_version=torch_version)
        base_env = dict((str(k), str(v)) for k, v in (p["env"] or {}).items())
        base_env.setdefault("CUDA_HOME", p["cuda_home"])
        state["base_env"] = base_env
        if self.check_mode:
            # Each sdist fetched into a temporary directory, to key the build: the run's own answer.
            return self.each(Plan([], result, state))
        # Whether each is published is known once its sdist is fetched (apply): each is to build or reuse.
        return Plan(["build or reuse %s" % item["requirement"] for item in heavy], result, state)

    def apply(self, plan):
        p = self.params
        makedirs(p["wheel_dir"])
        if p["log_dir"]:
            makedirs(p["log_dir"])
        return self.each(plan).result

    def each(self, plan):
        """Reuse or build (in check mode: plan) every package in turn; the plan with the result filled."""
        p, state, result = self.params, plan.state, plan.result
        for item in state["heavy"]:
            entry = build_one(item, p, state["index"], state["base_env"], state["cuda"], state["python_id"],
                              self.check_mode)
            result["wheels"].append(entry)
            result["changed"] = result["changed"] or entry["changed"]
            if entry["changed"]:
                plan.changes.append(entry["plan"])
        return plan
