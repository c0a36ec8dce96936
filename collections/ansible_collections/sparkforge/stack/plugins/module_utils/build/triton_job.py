# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One run of triton_llvm_build: the probe (what would be built and why), the lock, the fetch,
the LLVM and Triton builds with their logs and status file, and the atomic publish.

The job has the shape of module_utils/_common/job.py: ``TritonLlvmJob(params, system, check_mode)``,
``plan()`` (what would be built and why: the Triton wheel, and LLVM when its stamp does not match),
``apply(plan)`` (fetch, build, publish); ``run()`` holds the work dir's lock around both.  The
probes (git, the compiler, the build python, ptxas) go through the ``system``, so unit tests plan
without a toolchain; the long phases run with their logs on disk (build_common.run_logged).
No Ansible imports.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import hashlib
import json
import os
import platform
import shutil
import sys
import time

from ansible_collections.sparkforge.stack.plugins.module_utils._common.clock import utc_file_stamp, utc_now
from ansible_collections.sparkforge.stack.plugins.module_utils.build.build_common import (
    BuildFailed,
    BuildLock,
    StatusFile,
    run_logged,
)
from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import (
    atomic_publish,
    atomic_write_text,
    log_tail,
    makedirs,
    sha256_file,
)
from ansible_collections.sparkforge.stack.plugins.module_utils.build import git_fetch
from ansible_collections.sparkforge.stack.plugins.module_utils.build import repro
from ansible_collections.sparkforge.stack.plugins.module_utils.build import triton_build as tb
from ansible_collections.sparkforge.stack.plugins.module_utils.host.host_paths import build_dir_problem
from ansible_collections.sparkforge.stack.plugins.module_utils.build.triton_build import (
    find_record,
    ptxas_identity,
    python_identity,
    read_json,
)
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import (
    Job,
    JobError,
    Plan,
    capture,
    git_output,
)

DEFAULT_TRITON_REPO = "https://github.com/triton-lang/triton.git"
DEFAULT_LLVM_REPO = "https://github.com/llvm/llvm-project.git"


class TritonSource:
    """Reads files of the Triton source at a commit without changing any tree."""

    def __init__(self, system, src, repo, ref, checkout):
        self.system = system
        self.src = src
        self.repo = repo
        self.given_ref = ref
        self.checkout = checkout
        self.commit = None
        self.diff = ""
        self.ref = None

    def resolve(self, version):
        if self.src:
            if not os.path.isdir(self.src):
                raise JobError("triton_src %s does not exist" % self.src)
            self.commit = git_output(self.system, ["rev-parse", "HEAD"], self.src)
            diff = git_output(self.system, ["diff", "HEAD"], self.src)
            if diff:
                self.diff = hashlib.sha256(diff.encode("utf-8")).hexdigest()
            return
        self.ref = self.ref_for(version)
        if tb.looks_like_commit(self.ref):
            self.commit = self.ref.lower()
            return
        out = git_output(self.system, ["ls-remote", self.repo, self.ref, self.ref + "^{}"], "/")
        found = {}
        for line in out.splitlines():
            sha, dummy, name = line.partition("\t")
            found[name] = sha
        for name in ("refs/tags/%s^{}" % self.ref, "refs/tags/%s" % self.ref, "refs/heads/%s" % self.ref,
                     self.ref):
            if name in found:
                self.commit = found[name]
                return
        raise JobError("ref %s not found in %s (git ls-remote found nothing); check triton_ref/triton_version"
                       % (self.ref, self.repo))

    def ref_for(self, version):
        return self.given_ref or ("v%s" % version if version else None)

    def read(self, relpath):
        """The file at the resolved commit, or None when it cannot be read without fetching."""
        if self.src:
            try:
                with open(os.path.join(self.src, relpath)) as handle:
                    return handle.read()
            except (IOError, OSError):
                return None
        for where in (self.checkout, tb.local_repo_path(self.repo)):
            if where and os.path.isdir(where):
                rc, out = capture(self.system, ["git", "show", "%s:%s" % (self.commit, relpath)], cwd=where)
                if rc == 0:
                    return out
        return None


class TritonLlvmJob(Job):
    """params: the module's options (see its DOCUMENTATION); system: module_utils/_common/job.py's seam."""

    def __init__(self, params, system, check_mode=False):
        Job.__init__(self, params, system, check_mode)
        p = self.params
        self.p = p
        self.work_dir = p["work_dir"]
        self.wheel_dir = p["wheel_dir"]
        self.status_path = p["status_file"] or os.path.join(self.work_dir, "status.json")
        self.python = p["python"] or sys.executable
        self.triton_checkout = p["triton_src"] or os.path.join(self.work_dir, "src", "triton")
        self.llvm_checkout = p["llvm_src"] or os.path.join(self.work_dir, "src", "llvm-project")
        self.started = time.time()
        self.log = None
        self.inputs = None
        self.result = dict(changed=False, status_file=self.status_path)
        self.want_diff = False

    # --- the probe: what would be built and why (no side effects) ---------------------------
    def probe(self):
        p = self.p
        if p["ccache"] and not self.system.which("ccache"):
            raise JobError("ccache: true but there is no ccache in PATH; install ccache or set ccache: false")
        if p["triton_src"] and p["triton_repo"]:
            raise JobError("give triton_repo or triton_src, not both")
        if p["llvm_src"] and p["llvm_repo"]:
            raise JobError("give llvm_repo or llvm_src, not both")
        if not p["triton_src"]:
            p["triton_repo"] = p["triton_repo"] or DEFAULT_TRITON_REPO
            if not (p["triton_ref"] or p["triton_version"]):
                raise JobError("give triton_ref or triton_version (the ref defaults to v<triton_version>)")
        if not p["llvm_src"]:
            p["llvm_repo"] = p["llvm_repo"] or DEFAULT_LLVM_REPO

        source = TritonSource(self.system, p["triton_src"], p["triton_repo"], p["triton_ref"],
                              None if p["triton_src"] else self.triton_checkout)
        source.resolve(p["triton_version"])
        self.source = source

        version = p["triton_version"]
        if not version:
            init = source.read("python/triton/__init__.py")
            if init is not None:
                version = tb.version_from_text(init)
        pinned = source.read("cmake/llvm-hash.txt")
        if pinned is not None:
            pinned = pinned.strip().split()[0].lower() if pinned.strip() else ""
        llvm_commit = (p["llvm_commit"] or "").lower() or pinned
        if p["llvm_commit"] and pinned and pinned != p["llvm_commit"].lower():
            raise JobError(
                "Triton %s (%s) pins LLVM %s in cmake/llvm-hash.txt, but llvm_commit is %s: fix the version "
                "manifest (sparkforge_triton_releases) or leave llvm_commit out" % (
                    version or "?", source.commit[:12], pinned, p["llvm_commit"]))
        self.version = version
        self.llvm_commit = llvm_commit

        compiler = self.tool_version([os.environ.get("CXX") or "c++"])
        self.jobs_llvm, why_llvm = tb.resolve_llvm_jobs(p["jobs"])
        self.jobs_triton, why_triton = tb.resolve_triton_jobs(p["jobs"])
        python_id = python_identity(self.python, run=self.capture)
        ptxas_id = ptxas_identity(p["ptxas_path"], run=self.capture)

        plan = {
            "triton": {"commit": source.commit, "version": version, "ref": source.ref,
                       "source": p["triton_src"] or p["triton_repo"]},
            "llvm": {"commit": llvm_commit or None, "source": p["llvm_src"] or p["llvm_repo"]},
            "jobs": {"llvm": self.jobs_llvm, "llvm_why": why_llvm, "triton": self.jobs_triton,
                     "triton_why": why_triton},
            "python": python_id, "compiler": compiler, "ptxas": ptxas_id,
        }
        self.inputs = plan
        if not llvm_commit:
            # Only in check mode without a local copy of the Triton commit.
            plan["llvm"].update(build=None, why="the LLVM pin is unknown until the Triton source is fetched")
            plan["triton"].update(build=True, why="no record of this Triton commit's build can be checked yet")
            self.llvm_key = self.triton_key = None
            self.record = None
            return plan

        self.llvm_key = tb.llvm_cache_key(llvm_commit, p["llvm_projects"], p["llvm_targets"], p["build_type"],
                                          p["assertions"], compiler, p["llvm_cmake_args"])
        self.llvm_prefix = p["llvm_install_prefix"] or tb.default_llvm_prefix(self.work_dir, llvm_commit)
        self.triton_key = tb.triton_cache_key(source.commit, version, self.llvm_key, python_id, compiler, ptxas_id,
                                              source.diff, p["extra_env"])
        self.record = find_record(self.wheel_dir, self.triton_key) if os.path.isdir(self.wheel_dir) else None
        stamp = read_json(os.path.join(self.llvm_prefix, tb.LLVM_STAMP))
        self.stamp = stamp

        if p["force"]:
            triton_build, triton_why = True, "force: true"
        elif self.record:
            triton_build, triton_why = False, "%s is up to date (same cache key)" % self.record["wheel"]
        else:
            triton_build, triton_why = True, "no published wheel has cache key %s" % self.triton_key[:16]
        if not triton_build:
            llvm_build, llvm_why = False, "not needed: the Triton wheel is up to date"
        elif p["force"]:
            llvm_build, llvm_why = True, "force: true"
        elif not stamp:
            llvm_build, llvm_why = True, "no LLVM stamp in %s" % self.llvm_prefix
        elif stamp.get("cache_key") != self.llvm_key:
            llvm_build, llvm_why = True, "the LLVM in %s has another cache key (%s, wanted %s)" % (
                self.llvm_prefix, str(stamp.get("cache_key"))[:16], self.llvm_key[:16])
        else:
            llvm_build, llvm_why = False, "LLVM %s is already built in %s" % (llvm_commit[:12], self.llvm_prefix)
        plan["triton"].update(build=triton_build, why=triton_why, cache_key=self.triton_key,
                              setup_dir=tb.expected_setup_dir(version) if version else None)
        plan["llvm"].update(build=llvm_build, why=llvm_why, cache_key=self.llvm_key, prefix=self.llvm_prefix,
                            build_dir=tb.llvm_build_dir(self.work_dir, self.llvm_key))
        return plan

    def capture(self, cmd, cwd=None):
        return capture(self.system, cmd, cwd)

    def tool_version(self, cmd):
        """First line of ``cmd --version``, '' when the tool is missing (build_common.command_version's)."""
        rc, out = self.capture(list(cmd) + ["--version"])
        lines = out.strip().splitlines()
        return lines[0] if rc == 0 and lines else ""

    def fail(self, msg, tail=None, **extra):
        """The JobError of this run: ``msg`` with the result so far and ``extra``."""
        self.result.update(extra)
        self.result["duration_s"] = round(time.time() - self.started, 2)
        return JobError(msg, tail=tail, **self.result)

    # --- the job's shape: plan, apply, and run under the lock ---------------------------------
    def plan(self):
        """What would be built and why; raises JobError (phase: plan) before anything is built."""
        result = self.result
        try:
            plan = self.probe()
        except JobError as exc:
            raise self.fail(str(exc), tail=exc.tail, phase="plan")
        result["plan"] = plan
        result.update(triton_commit=self.source.commit, triton_version=self.version,
                      llvm_commit=self.llvm_commit, cache_key=self.triton_key,
                      llvm_cache_key=self.llvm_key, llvm_prefix=getattr(self, "llvm_prefix", None))
        before = self.record["cache_key"] if self.record else "(no wheel with this key)"
        if self.want_diff:
            result["diff"] = {"before": "triton wheel: %s\n" % before, "after": "triton wheel: %s\n" % self.triton_key}
        if not plan["triton"]["build"]:
            record = self.record
            result.update(wheel=os.path.join(self.wheel_dir, record["wheel"]), wheel_sha256=record["sha256"],
                          built=[], log=record.get("log"), reproducible=record.get("reproducible"))
            return Plan([], result)
        changes = ["build triton: %s" % plan["triton"]["why"]]
        if plan["llvm"]["build"] is not False:
            changes.insert(0, "build llvm: %s" % plan["llvm"]["why"])
        if self.check_mode:
            result.update(changed=True, built=[], wheel=None, log=None)
        return Plan(changes, result)

    def apply(self, plan):
        self.result.update(self.build_and_publish(plan.result["plan"], self.fail))
        return self.result

    def run(self, diff=False):
        """The module's result: plan and apply under the work dir's lock (none in check mode)."""
        self.want_diff = diff
        # Its checkouts are cleaned and its dist directories removed: only in a work directory of a build's,
        # refused before the lock file is made in it.
        why = build_dir_problem("work_dir (triton_work_dir)", self.work_dir)
        if why:
            raise self.fail(why, phase="plan")
        lock = None
        if not self.check_mode:
            try:
                lock = BuildLock(os.path.join(self.work_dir, ".build.lock")).acquire()
            except JobError as exc:
                raise self.fail(str(exc), phase="lock")
        try:
            result = Job.run(self, diff)
        finally:
            if lock is not None:
                lock.release()
        result["duration_s"] = round(time.time() - self.started, 2)
        return result

    def build_and_publish(self, plan, fail):
        makedirs(os.path.join(self.work_dir, "logs"))
        self.log = os.path.join(self.work_dir, "logs", "build-%s-%s.log" % (
            utc_file_stamp(), self.triton_key[:12]))
        status = StatusFile(self.status_path, "triton_llvm_build", log_path=self.log)
        status.update(plan=plan)
        makedirs(self.wheel_dir)
        clean_partials(self.wheel_dir)
        try:
            with tb.Heartbeat(status):
                built, wheel, record = self.build(status)
        except BuildFailed as exc:
            errors = tb.error_lines(exc.log_path)
            msg = str(exc)
            if errors:
                msg += "\n--- error lines of the log ---\n" + "\n".join(errors)
            raise fail(msg, tail=exc.tail, log=self.log, phase=exc.phase, rc=exc.returncode, log_tail=exc.tail,
                       error_lines=errors)
        except (JobError, OSError) as exc:
            phase = status.state.get("phase")
            status.finish("failed", str(exc))
            tail = log_tail(self.log)
            raise fail("phase '%s' failed: %s" % (phase, exc), tail=tail, log=self.log, phase=phase, log_tail=tail)
        status.finish("done", "published %s" % os.path.basename(wheel))
        return dict(changed=True, log=self.log, wheel=wheel, wheel_sha256=record["sha256"], built=built,
                    reproducible=record["reproducible"])

    # --- the build ----------------------------------------------------------------------------
    def build(self, status):
        p = self.p
        built = []
        log = self.log
        if not p["triton_src"]:
            git_fetch.fetch_checkout(p["triton_repo"], self.source.ref, self.source.commit, self.triton_checkout, log, status)
        version = self.version or tb.version_from_tree(self.triton_checkout)
        pinned = tb.read_llvm_hash(self.triton_checkout)
        if pinned != self.llvm_commit:
            raise JobError("the Triton source pins LLVM %s, the plan was %s; run again" % (pinned, self.llvm_commit))
        setup_rel = tb.resolve_setup_dir(self.triton_checkout, version)
        setup_dir = os.path.join(self.triton_checkout, setup_rel)

        if self.inputs["llvm"]["build"]:
            if p["llvm_src"]:
                head = git_output(self.system, ["rev-parse", "HEAD"], p["llvm_src"])
                if head != self.llvm_commit:
                    raise JobError("llvm_src %s is at %s but Triton pins %s: check out that commit there" % (
                        p["llvm_src"], head, self.llvm_commit))
            else:
                git_fetch.fetch_checkout(p["llvm_repo"], None, self.llvm_commit, self.llvm_checkout, log, status)
            self.build_llvm(status)
            built.append("llvm")

        env = dict(os.environ)
        env.update(tb.triton_build_env(self.llvm_prefix, version, p["ptxas_path"], self.jobs_triton,
                                       json_syspath=p["json_syspath"], ccache=p["ccache"],
                                       extra_env=p["extra_env"]))
        epoch, maps, env = repro.build_settings(self.triton_checkout, self.source.commit, self.mapped_dirs(), env)
        dist = os.path.join(self.work_dir, "dist", "triton-%s" % self.triton_key[:16])
        if os.path.isdir(dist):
            shutil.rmtree(dist)
        makedirs(dist)
        run_logged([self.python, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-v",
                    "-w", dist, setup_dir], log, "triton-wheel", status, cwd=setup_dir, env=env, tail_lines=80)
        wheels = sorted(glob.glob(os.path.join(dist, "triton-*.whl")))
        if len(wheels) != 1:
            raise JobError("pip wheel produced %d triton wheels in %s (expected one): %s" % (
                len(wheels), dist, ", ".join(os.path.basename(w) for w in wheels)))
        built.append("triton")

        status.phase("publish")
        name = os.path.basename(wheels[0])
        if version and not tb.wheel_version_matches(name, version):
            raise JobError("the wheel %s does not carry version %s" % (name, version))
        reproducible = repro.finish_wheel(wheels[0], epoch, maps, self.leak_needles())
        digest = sha256_file(wheels[0])
        published = atomic_publish(wheels[0], self.wheel_dir)
        record = {
            "reproducible": reproducible,
            "wheel": name, "sha256": digest, "cache_key": self.triton_key, "llvm_cache_key": self.llvm_key,
            "triton_commit": self.source.commit, "triton_version": version, "llvm_commit": self.llvm_commit,
            "llvm_prefix": self.llvm_prefix, "log": log,
            "built_at": utc_now(), "inputs": self.inputs,
        }
        atomic_write_text(tb.record_path(self.wheel_dir, name), json.dumps(record, indent=1, sort_keys=True) + "\n")
        return built, published, record

    def mapped_dirs(self):
        """The directories whose names a build could record, each with the fixed name it gets."""
        p = self.p
        return [(self.work_dir, repro.MAPPED_ROOT + "/work"), (p["triton_src"], repro.MAPPED_ROOT + "/triton"),
                (p["llvm_src"], repro.MAPPED_ROOT + "/llvm"), (self.llvm_prefix, repro.MAPPED_ROOT + "/llvm-install"),
                (os.environ.get("TMPDIR"), "/tmp")]

    def leak_needles(self):
        home = os.path.expanduser("~")
        return {"work_dir": os.path.realpath(self.work_dir), "llvm_prefix": os.path.realpath(self.llvm_prefix),
                "home": home if home not in ("", "/") else None, "host_name": platform.node()}

    def build_llvm(self, status):
        p = self.p
        log = self.log
        build_dir = tb.llvm_build_dir(self.work_dir, self.llvm_key)
        # Triton links LLVM's static libraries in: their recorded paths (assertions print __FILE__) must
        # not depend on where this builder keeps its work.
        _epoch, _maps, env = repro.build_settings(self.llvm_checkout, "HEAD", self.mapped_dirs(), os.environ)
        if not os.path.isfile(os.path.join(build_dir, "build.ninja")):
            cmd = tb.llvm_cmake_command(self.llvm_checkout, build_dir, self.llvm_prefix, p["llvm_projects"],
                                        p["llvm_targets"], p["build_type"], p["assertions"], p["ccache"],
                                        self.jobs_llvm, p["llvm_cmake_args"])
            run_logged(cmd, log, "llvm-configure", status, env=env)
        run_logged(["ninja", "-C", build_dir, "-j", str(self.jobs_llvm)], log, "llvm-build", status, env=env)
        stamp_path = os.path.join(self.llvm_prefix, tb.LLVM_STAMP)
        if self.stamp and os.path.isdir(self.llvm_prefix):
            # We own this prefix (our stamp is there): clear the other build out before installing.
            for entry in os.listdir(self.llvm_prefix):
                path = os.path.join(self.llvm_prefix, entry)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
        run_logged(["ninja", "-C", build_dir, "install"], log, "llvm-install", status)
        if not os.path.isfile(os.path.join(self.llvm_prefix, "bin", "llvm-config")):
            raise JobError("the LLVM install in %s has no bin/llvm-config; see %s" % (self.llvm_prefix, log))
        stamp = {"cache_key": self.llvm_key, "llvm_commit": self.llvm_commit, "build_dir": build_dir,
                 "inputs": tb.llvm_key_inputs(self.llvm_commit, p["llvm_projects"], p["llvm_targets"],
                                              p["build_type"], p["assertions"], self.inputs["compiler"],
                                              p["llvm_cmake_args"]),
                 "built_at": utc_now()}
        atomic_write_text(stamp_path, json.dumps(stamp, indent=1, sort_keys=True) + "\n")


def clean_partials(wheel_dir):
    """Temporary files of a publish that was killed half way (never named *.whl)."""
    for path in glob.glob(os.path.join(wheel_dir, ".partial-*.tmp")):
        os.unlink(path)
