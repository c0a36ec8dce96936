# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One run of pytorch_wheel_build: the plan (version, arch list, fixes, features, environment,
cache key over every input), the published-wheel check, and the build under a lock with its
status file, log, fixes and atomic publish.

The job has the shape of module_utils/_common/job.py: ``TorchWheelJob(params, system, check_mode)``,
``plan()`` (the published-wheel check: nothing to do, or the build and why), ``apply(plan)`` (the
build and publish).  The probes (nvcc, the build python, compilers, git, build requirements) go
through the ``system``, so unit tests drive the plan without a toolchain; the build's long phases
(git fetch, pip wheel) run with their logs on disk (build_common.run_logged, git_fetch).
No Ansible imports.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import platform
import shutil
import time

from ansible_collections.sparkforge.stack.plugins.module_utils._common.clock import utc_now
from ansible_collections.sparkforge.stack.plugins.module_utils.build.build_common import (
    JobError,
    BuildFailed,
    BuildLock,
    StatusFile,
    run_logged,
)
from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import (
    atomic_publish,
    atomic_write_text,
    makedirs,
    sha256_file,
)
from ansible_collections.sparkforge.stack.plugins.module_utils.build import git_fetch
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import (
    Job,
    LocalSystem,
    Plan,
    git_output,
    output_tail,
)
from ansible_collections.sparkforge.stack.plugins.module_utils.build import repro
from ansible_collections.sparkforge.stack.plugins.module_utils.build import torch_build as tb
from ansible_collections.sparkforge.stack.plugins.module_utils.build import torch_fixes
from ansible_collections.sparkforge.stack.plugins.module_utils.host.host_paths import build_dir_problem


def nvcc_version(system, cuda_home):
    """Last line of nvcc --version ('Build cuda_13.0.r13.0/compiler.36424714_0')."""
    rc, out, err = system.run([os.path.join(cuda_home, "bin", "nvcc"), "--version"])
    if rc != 0 or not (out + err).strip():
        raise JobError("nvcc not found under %s: install the CUDA toolkit or set cuda_home (or features.cuda: false)"
                       % cuda_home, tail=output_tail(out, err))
    return (out + err).strip().splitlines()[-1]


def python_version(python, system=None):
    """'3.12.3 aarch64 cpython-312' of the build python; raises JobError when it does not run."""
    rc, out, err = (system or LocalSystem()).run([python, "-c", "import sys, platform; print(sys.version.split()[0], "
                                                  "platform.machine(), sys.implementation.cache_tag)"])
    if rc != 0:
        raise JobError("the build python %s does not run (exit %s: %s): create the build venv first"
                       % (python, rc, output_tail(out, err)), tail=output_tail(out, err))
    return out.strip()


def tool_version(system, cmd):
    """First line of ``cmd --version`` (or '' when the tool is missing): build_common.command_version
    through the job's system."""
    rc, out, err = system.run(list(cmd) + ["--version"])
    if rc != 0:
        return ""
    lines = (out + err).strip().splitlines()
    return lines[0] if lines else ""


def resolve_commit(src_dir, repo, ref, cloned, check_mode):
    """The commit ``ref`` names: from the kept source tree when it was fetched before (no network),
    else from the remote (git ls-remote). None when neither knows it."""
    if cloned:
        local = git_fetch.local_ref(src_dir, ref)
        if local:
            return local
    try:
        return git_fetch.remote_commit(repo, ref)
    except BuildFailed as exc:
        if check_mode:
            return None
        raise JobError("cannot resolve %s: %s" % (ref, exc.tail))


def find_published(wheel_dir, key):
    """(wheel, manifest, data) of a published wheel with this cache key, or None."""
    if not os.path.isdir(wheel_dir):
        return None
    for name in sorted(os.listdir(wheel_dir)):
        if not name.endswith(".whl.manifest.json"):
            continue
        path = os.path.join(wheel_dir, name)
        try:
            with open(path) as handle:
                data = json.load(handle)
        except (IOError, OSError, ValueError):
            continue
        if data.get("cache_key") != key:
            continue
        wheel = os.path.join(wheel_dir, data.get("wheel_file", ""))
        if os.path.isfile(wheel) and sha256_file(wheel) == data.get("sha256"):
            return wheel, path, data
    return None


def check_build_deps(system, python, requirements):
    names = list(requirements)
    code = (
        "import sys, re\n"
        "from importlib import metadata\n"
        "missing = []\n"
        "for req in sys.argv[1:]:\n"
        "    name = re.split(r'[<>=!~;\\[ ]', req, 1)[0]\n"
        "    try:\n"
        "        metadata.version(name)\n"
        "    except metadata.PackageNotFoundError:\n"
        "        missing.append(req)\n"
        "print(' '.join(missing))\n"
    )
    rc, out, err = system.run([python, "-c", code] + names)
    if rc != 0:
        raise JobError("could not check the build requirements with %s (exit %s): %s"
                       % (python, rc, output_tail(out, err)), tail=output_tail(out, err))
    out = out.strip()
    return out.split() if out else []


class TorchWheelJob(Job):
    """params: the module's options (see its DOCUMENTATION); system: module_utils/_common/job.py's seam.
    The result carries ``warnings`` for the caller to show."""

    def __init__(self, params, system, check_mode=False):
        Job.__init__(self, params, system, check_mode)
        self.p = self.params

    def plan(self):
        """Nothing to do (a wheel with the same cache key is published), or the build and why.
        Reads only; raises JobError on bad input before anything on the host changes."""
        result, plan = self.probe(self.check_mode)
        published = None if self.p["force"] else find_published(self.p["wheel_dir"], plan["key"])
        if published:
            wheel, manifest, mdata = published
            result.update(wheel=wheel, manifest=manifest, sha256=mdata.get("sha256"), fixes=mdata.get("fixes", []),
                          reproducible=mdata.get("reproducible"),
                          plan="a wheel with the same cache key is published (%s): nothing to do" % os.path.basename(wheel))
            return Plan([], result, plan)
        plan["why"] = "force: rebuilding" if self.p["force"] else "no published wheel has cache key %s" % plan["key"][:12]
        if plan["py_version"] is None:
            plan["why"] = "the build venv %s does not exist yet (the real run makes it first)" % self.p["python"]
        change = "build torch %s (%s) for %s: %s" % (plan["version"], (plan["commit"] or plan["ref"])[:12],
                                                     plan["arch"]["arch_list"], plan["why"])
        if self.check_mode:
            result.update(changed=True, fixes=self.fixes_would_apply(plan), plan="would " + change)
        return Plan([change], result, plan)

    def apply(self, plan):
        result = dict(plan.result)
        built = self.build_and_publish(plan.state)
        result["warnings"] = result["warnings"] + built.pop("leak_warnings")
        result.update(built)
        return result

    def probe(self, check_mode):
        """(the result so far, the plan's state): version, arch list, fixes, features, environment, source
        commit, toolchain and the cache key over all of them.  Reads only; nothing on the host changes."""
        p = self.p
        data = p["torch_data"]
        for key in ("releases", "arch_min_version", "traps", "fixes"):
            if key not in data:
                raise JobError("torch_data has no '%s': pass the manifest's sparkforge_torch_* variables" % key)
        releases = data["releases"]
        fixes_data = data["fixes"] or {}
        version = p["version"] or tb.default_version(releases, p["platform_class"])
        release = tb.release_entry(releases, version)
        warnings = []
        for field in release.get("unconfirmed") or []:
            warnings.append("torch %s: the version data's %s pairing (%s) is not confirmed against the release"
                            % (version, field, release.get(field)))
        if p["platform_class"] not in ("none", "generic", "mixed") and p["platform_class"] not in (
                release.get("good_for") or []):
            warnings.append("torch %s is not marked good for platform class %s in the version data"
                            % (version, p["platform_class"]))

        arch = tb.plan_arch_list(p["cuda_arch_list"], version, release, p["platform_class"],
                                 p["compute_capabilities"], data, fixes_data,
                                 variable="cuda_arch_list (sparkforge_cuda_arch_list)")
        fix_names = tb.select_fixes(release, arch["fixes_needed"], fixes_data, p["fixes"])
        machine = p["machine"] or platform.machine()

        cusparselt = None
        if p["cusparselt_include_dir"] or p["cusparselt_library"] or p["cusparselt_root"]:
            root = p["cusparselt_root"]
            cusparselt = {
                "root": root or os.path.dirname(p["cusparselt_include_dir"] or ""),
                "include": p["cusparselt_include_dir"] or (os.path.join(root, "include") if root else None),
                "library": p["cusparselt_library"] or (os.path.join(root, "lib", "libcusparseLt.so") if root else None),
            }
        else:
            cusparselt = tb.find_cusparselt(machine, p["cuda_major"])
        features = tb.resolve_features(p["features"], machine, cusparselt)

        jobs, jobs_why = tb.plan_jobs(p["jobs"])
        build_dir = p["build_dir"]
        # Its src/ is removed or cleaned and its dist-tmp/ removed: only in a build directory of a build's.
        why = build_dir_problem("build_dir (pytorch_build_dir)", build_dir)
        if why:
            raise JobError(why)
        status_path = p["status_file"] or os.path.join(build_dir, "status.json")
        log_path = p["log_file"] or os.path.join(build_dir, "build.log")
        venv_bin = os.path.dirname(p["python"])
        ccache = None
        if p["ccache"]:
            ccache = self.system.which("ccache") or None
        env = tb.build_env({
            "arch_list": arch["arch_list"], "features": features, "machine": machine, "blas": p["blas"],
            "cuda_home": p["cuda_home"], "venv_bin": venv_bin, "cusparselt": cusparselt,
            "build_version": version, "build_number": p["build_number"], "jobs": jobs,
            "extra_env": p["extra_env"], "home": os.environ.get("HOME"), "tmpdir": os.environ.get("TMPDIR"),
            "ccache": ccache, "caller_env": dict(os.environ),
        })

        # Source and commit.
        if p["src"]:
            src_dir = p["src"]
            if not os.path.isdir(src_dir):
                raise JobError("src %s does not exist" % src_dir)
            commit = git_output(self.system, ["rev-parse", "HEAD"], src_dir)
            ref = p["ref"] or "HEAD"
            cloned = True
        else:
            src_dir = os.path.join(build_dir, "src")
            ref = p["ref"] or "v%s" % version
            cloned = os.path.isdir(os.path.join(src_dir, ".git"))
            commit = resolve_commit(src_dir, p["repo"], ref, cloned, check_mode)
            if commit is None and not check_mode:
                raise JobError("ref %s not found in %s" % (ref, p["repo"]))

        toolchain = {"nvcc": nvcc_version(self.system, p["cuda_home"]) if features["cuda"] else None}
        toolchain["cc"] = tool_version(self.system, ["cc"])
        toolchain["cxx"] = tool_version(self.system, ["c++"])
        toolchain["cmake"] = (tool_version(self.system, [os.path.join(venv_bin, "cmake")])
                              or tool_version(self.system, ["cmake"]))
        if check_mode and not os.path.exists(p["python"]):
            # Check mode on a fresh host: the venv is made by an earlier task of the real run.
            py_version = None
        else:
            py_version = python_version(p["python"], self.system)

        patches = {}
        for patch in p["patches"]:
            if not os.path.isfile(patch):
                raise JobError("patch file %s does not exist" % patch)
            patches[patch] = sha256_file(patch)
        fix_defs = dict((name, torch_fixes.fix_fingerprint(fixes_data[name])) for name in fix_names)
        key_inputs = {
            "commit": commit, "version": version, "build_number": p["build_number"],
            "arch_list": arch["arch_list"], "features": features, "env": tb.output_env(env),
            "fixes": fix_defs, "patches": dict((os.path.basename(k), v) for k, v in patches.items()),
            "toolchain": toolchain, "python": py_version, "reproducible": repro.SCHEME,
        }
        key = tb.build_key(key_inputs)
        pairing = dict((k, release.get(k)) for k in ("triton", "torchvision", "torchaudio"))
        result = dict(changed=False, warnings=warnings, version=version, commit=commit, src_dir=src_dir,
                      arch_list=arch["arch_list"], arch_list_why=arch["why"], env=env,
                      jobs=dict(jobs=jobs, why=jobs_why), cache_key=key, wheel=None, duration_s=0.0, fixes=[],
                      pairing=pairing, status_file=status_path, log_file=log_path)
        plan = dict(version=version, release=release, arch=arch, fix_names=fix_names, fixes_data=fixes_data,
                    machine=machine, features=features, jobs=jobs, jobs_why=jobs_why, build_dir=build_dir,
                    status_path=status_path, log_path=log_path, env=env, src_dir=src_dir, ref=ref, cloned=cloned,
                    commit=commit, toolchain=toolchain, py_version=py_version, patches=patches,
                    key_inputs=key_inputs, key=key, pairing=pairing)
        return result, plan

    def fixes_would_apply(self, plan):
        """What the fixes would do to the kept source tree (check mode); raises when one would not apply."""
        names, src_dir = plan["fix_names"], plan["src_dir"]
        not_checked = [{"name": n, "kind": "fix", "state": "would apply", "files": []} for n in names]
        if not (plan["cloned"] and plan["commit"]):
            return not_checked
        if git_output(self.system, ["rev-parse", "HEAD"], src_dir) != plan["commit"]:
            return not_checked
        try:
            return torch_fixes.apply_all(src_dir, names, plan["fixes_data"], list(plan["patches"]), check_only=True)
        except torch_fixes.FixError as exc:
            raise JobError("the build would fail: %s" % exc)

    def build_and_publish(self, plan):
        """Build under the lock, publish the wheel atomically with its manifest; the result's fields."""
        p = self.p
        version, key, build_dir, why = plan["version"], plan["key"], plan["build_dir"], plan["why"]
        status_path, log_path, commit, arch = plan["status_path"], plan["log_path"], plan["commit"], plan["arch"]
        fix_names, fixes_data, patches = plan["fix_names"], plan["fixes_data"], plan["patches"]
        started = time.time()
        makedirs(build_dir)
        with BuildLock(os.path.join(build_dir, ".lock")):
            status = StatusFile(status_path, "pytorch %s" % version, log_path)
            status.update(message=why)
            try:
                built = build(p, self.system, status, plan["env"], plan["src_dir"], commit, plan["ref"], plan["cloned"], fix_names,
                              fixes_data, list(patches), log_path, version)
            except JobError as exc:
                if status.state.get("state") == "running":
                    status.finish("failed", str(exc).splitlines()[0])
                raise
            status.phase("publish")
            wheel = atomic_publish(built["wheel"], p["wheel_dir"])
            digest = sha256_file(wheel)
            finished = time.time()
            manifest_data = {
                "cache_key": key, "key_inputs": plan["key_inputs"], "wheel_file": os.path.basename(wheel),
                "sha256": digest, "size": os.path.getsize(wheel), "torch_version": version,
                "build_number": p["build_number"], "repo": None if p["src"] else p["repo"], "src": plan["src_dir"],
                "ref": plan["ref"], "commit": commit, "arch_list": arch["arch_list"], "arch_list_why": arch["why"],
                "features": plan["features"], "env": plan["env"], "fixes": built["fixes"],
                "fix_definitions": dict((n, fixes_data[n]) for n in fix_names),
                "patches": patches, "toolchain": plan["toolchain"], "python": plan["py_version"], "jobs": plan["jobs"],
                "jobs_why": plan["jobs_why"], "platform_class": p["platform_class"], "machine": plan["machine"],
                "pairing": plan["pairing"], "build_host": platform.node(), "started": utc_now(started),
                "finished": utc_now(finished),
                "duration_s": round(finished - started, 1), "log": log_path,
                "reproducible": built["reproducible"],
            }
            manifest = wheel + ".manifest.json"
            atomic_write_text(manifest, json.dumps(manifest_data, indent=1, sort_keys=True) + "\n")
            status.finish("done", "published %s" % os.path.basename(wheel))
        return dict(changed=True, wheel=wheel, sha256=digest, manifest=manifest, fixes=built["fixes"],
                    duration_s=round(finished - started, 1), reproducible=built["reproducible"],
                    leak_warnings=repro.leak_warnings(os.path.basename(wheel), built["reproducible"]),
                    plan="built torch %s (%s) for %s: %s" % (version, commit[:12], arch["arch_list"], why))


def build(p, system, status, env, src_dir, commit, ref, cloned, fix_names, fixes_data, patches, log_path,
          version):
    genv = {"PATH": env["PATH"], "HOME": env["HOME"], "LANG": "C.UTF-8"}
    for name in env:
        if name in tb.PASSTHROUGH_ENV or name.startswith(tb.PASSTHROUGH_PREFIXES):
            genv[name] = env[name]
    if not p["src"]:
        if not cloned and os.path.exists(src_dir):
            shutil.rmtree(src_dir)
        head = ""
        if cloned:
            rc, out, _err = system.run(["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=src_dir)
            head = out.strip() if rc == 0 else ""
        if head != commit and os.path.exists(os.path.join(src_dir, torch_fixes.MARKER)):
            # Another commit: its pristine tree (checked out and cleaned below) has no fixes applied.
            os.unlink(os.path.join(src_dir, torch_fixes.MARKER))
        # The tag's commit and the submodules' pinned commits only, at depth 1 (a resumed run fetches nothing).
        git_fetch.fetch_checkout(p["repo"], ref, commit, src_dir, log_path, status, submodules=p["submodules"],
                                 jobs=p["fetch_jobs"], env=genv, clean=True)
    status.phase("fixes")
    try:
        fixes = torch_fixes.apply_all(src_dir, fix_names, fixes_data, patches)
    except torch_fixes.FixError as exc:
        status.finish("failed", str(exc))
        raise
    reqs = p["build_requirements"] or tb.read_build_requirements(src_dir)
    if p["build_deps"] == "install":
        run_logged([p["python"], "-m", "pip", "install", "--disable-pip-version-check"] + reqs, log_path,
                   "build-deps", status, cwd=src_dir, env=env)
    elif p["build_deps"] == "check":
        status.phase("build-deps")
        missing = check_build_deps(system, p["python"], reqs)
        if missing:
            raise JobError("build requirements missing from %s: %s; install them or use build_deps: install"
                           % (p["python"], ", ".join(missing)))
    out_dir = os.path.join(p["build_dir"], "dist-tmp")
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    makedirs(out_dir)
    # Same key, same bytes: the commit's time, the build's paths mapped to fixed names (not in the
    # key: they change nothing once mapped), and the wheel normalised below.
    epoch, maps, wheel_env = repro.build_settings(src_dir, commit, [
        (p["build_dir"], repro.MAPPED_ROOT + "/build"), (src_dir, repro.MAPPED_ROOT + "/src"),
        (env.get("TMPDIR"), "/tmp")], env)
    run_logged([p["python"], "-m", "pip", "wheel", ".", "--no-build-isolation", "--no-deps",
                "--disable-pip-version-check", "-v", "-w", out_dir], log_path, "build", status, cwd=src_dir,
               env=wheel_env)
    wheels = [w for w in os.listdir(out_dir) if w.endswith(".whl")]
    if len(wheels) != 1:
        raise JobError("pip wheel produced %d wheels in %s (expected one): see %s" % (len(wheels), out_dir,
                                                                                      log_path))
    if not tb.wheel_matches(wheels[0], version):
        raise JobError("the built wheel %s does not carry version %s: PYTORCH_BUILD_VERSION was not honoured"
                       % (wheels[0], version))
    wheel = os.path.join(out_dir, wheels[0])
    status.phase("normalize")
    record = repro.finish_wheel(wheel, epoch, maps, {
        "build_dir": os.path.realpath(p["build_dir"]), "src_dir": os.path.realpath(src_dir),
        "home": env.get("HOME") if env.get("HOME") not in (None, "", "/") else None, "host_name": platform.node()})
    return {"wheel": wheel, "fixes": fixes, "reproducible": record}
