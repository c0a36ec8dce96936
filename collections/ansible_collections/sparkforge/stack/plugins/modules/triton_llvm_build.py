#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: triton_llvm_build
short_description: Build a Triton wheel against an LLVM built from source at the commit Triton pins
version_added: "0.1.0"
description:
  - Fetches the Triton source at a ref (or uses a local tree), reads the LLVM commit Triton pins in
    C(cmake/llvm-hash.txt), builds that LLVM with CMake and Ninja into an install prefix (only when that
    LLVM is not built yet), then builds the Triton wheel against it with C(LLVM_INCLUDE_DIRS),
    C(LLVM_LIBRARY_DIR), C(LLVM_SYSPATH), C(TRITON_OFFLINE_BUILD=1) (nothing is downloaded during the
    build) and the CUDA tool paths (C(TRITON_PTXAS_PATH), from Triton 3.6 also
    C(TRITON_PTXAS_BLACKWELL_PATH)), from the setup.py location of the version (the repository root from
    Triton 3.4, C(python/) before).
  - The wheel is identified by a cache key over every input that changes it (Triton commit and local
    changes, LLVM commit, LLVM projects/targets/build type/assertions/extra CMake arguments, compiler
    version, Python version, ptxas version, extra environment). A run whose key matches the record next to
    a published wheel does nothing (C(changed=false)). A changed Triton ref that pins the same LLVM reuses
    the built LLVM; a changed LLVM pin builds the new LLVM into its own prefix.
  - The LLVM prefix holds a stamp file (C(.sparkforge-llvm.json)) with the LLVM cache key; LLVM is
    rebuilt only when the stamp is missing or different. The published wheel has a JSON record beside it
    (C(<wheel>.sparkforge.json)) with the Triton cache key, the wheel name and its sha256.
  - Build trees are kept (LLVM under C(work_dir/build/), Triton's in its source tree), so a killed or failed
    build resumes where it stopped. Wheels are published atomically; C(wheel_dir) never holds a partial
    wheel. A lock file in C(work_dir) refuses a second concurrent build there.
  - Meant to run under C(async); the status file (phase, ninja's [done/total], elapsed seconds) shows the
    progress of a build of several hours. Every command's output goes to a log file under C(work_dir/logs/).
  - Check mode resolves the refs and returns the plan (what would be built and why, the cache keys)
    without fetching or building anything.
author:
  - sparkforge developers (@sparkforge)
options:
  triton_repo:
    description:
      - Git URL of the Triton source (https, ssh, C(file://) or a local path). Fetched into
        C(work_dir/src/triton) at O(triton_ref).
      - When neither O(triton_repo) nor O(triton_src) is given, C(https://github.com/triton-lang/triton.git).
    type: str
  triton_ref:
    description:
      - Tag, branch or commit of O(triton_repo) to build. Defaults to C(v<triton_version>).
    type: str
  triton_version:
    description:
      - The Triton version (for example C(3.5.1)). Decides where setup.py must be and whether
        C(TRITON_PTXAS_BLACKWELL_PATH) is set. When not given it is read from the source
        (C(python/triton/__init__.py)).
    type: str
  triton_src:
    description:
      - A local Triton git work tree to build in place instead of fetching O(triton_repo). Uncommitted
        changes to tracked files are part of the cache key.
    type: path
  llvm_repo:
    description:
      - Git URL of llvm-project (https, ssh, C(file://) or a local path). Only the needed commit is fetched,
        into C(work_dir/src/llvm-project).
      - When neither O(llvm_repo) nor O(llvm_src) is given, C(https://github.com/llvm/llvm-project.git).
    type: str
  llvm_src:
    description:
      - A local llvm-project git work tree, checked out at the LLVM commit Triton pins, to build instead of
        fetching O(llvm_repo).
    type: path
  llvm_commit:
    description:
      - The LLVM commit to build. By default read from Triton's C(cmake/llvm-hash.txt); when given it must
        match that file (the module fails otherwise), which catches a stale version manifest.
    type: str
  work_dir:
    description:
      - Directory for sources, build trees, logs, the status file and the lock.
    type: path
    required: true
  llvm_install_prefix:
    description:
      - Where LLVM is installed. Default C(work_dir/llvm/llvm-<first 12 digits of the LLVM commit>), so
        Triton versions that pin the same LLVM share one build.
    type: path
  llvm_projects:
    description: C(LLVM_ENABLE_PROJECTS) (semicolon-separated).
    type: str
    default: mlir;llvm;lld
  llvm_targets:
    description: C(LLVM_TARGETS_TO_BUILD) (semicolon-separated). Triton builds its AMD backend too.
    type: str
    default: host;NVPTX;AMDGPU
  llvm_cmake_args:
    description: Extra arguments for LLVM's CMake configure step (part of the cache key).
    type: list
    elements: str
    default: []
  build_type:
    description: C(CMAKE_BUILD_TYPE) of LLVM.
    type: str
    default: Release
    choices: [Release, RelWithDebInfo, Debug, MinSizeRel]
  assertions:
    description: C(LLVM_ENABLE_ASSERTIONS).
    type: bool
    default: true
  jobs:
    description:
      - Parallel compile jobs, or C(auto). C(auto) takes the smaller of the CPU count and what fits in the
        available RAM with 2 GiB reserved, counting 2 GiB per LLVM compile job and 3 GiB per Triton
        compile job (C(MAX_JOBS)). LLVM links run at most one per four compile jobs
        (C(LLVM_PARALLEL_LINK_JOBS)). Not part of the cache key.
    type: str
    default: auto
  python:
    description:
      - The Python interpreter that builds the wheel (the stack's venv); it needs pip, setuptools, wheel and
        Triton's build requirements. Default the interpreter running this module.
    type: path
  wheel_dir:
    description: Directory the finished wheel and its record are published to.
    type: path
    required: true
  ptxas_path:
    description:
      - The ptxas Triton uses (and bundles); CUDA 13's ptxas knows sm_121a (GB10), Triton 3.5's own does not.
        Also used for C(TRITON_PTXAS_BLACKWELL_PATH) from Triton 3.6. C(cuobjdump) and C(nvdisasm) beside it
        are used when present.
    type: path
    default: /usr/local/cuda/bin/ptxas
  json_syspath:
    description:
      - C(JSON_SYSPATH) for the offline build (a prefix holding C(include/nlohmann/json.hpp); Debian and
        Ubuntu's C(nlohmann-json3-dev) install it under C(/usr)).
    type: path
    default: /usr
  extra_env:
    description: More environment variables for the Triton build (part of the cache key).
    type: dict
    default: {}
  ccache:
    description: Compile through C(ccache) (LLVM's compiler launcher, C(TRITON_BUILD_WITH_CCACHE)).
    type: bool
    default: false
  force:
    description: Build again even when the records say the wheel and the LLVM are up to date.
    type: bool
    default: false
  status_file:
    description: The progress file (JSON). Default C(work_dir/status.json).
    type: path
attributes:
  check_mode:
    description: Returns the plan (what would be built, why, the cache keys) and builds nothing.
    support: full
  diff_mode:
    description: Shows the cache key of the published wheel before and after.
    support: full
notes:
  - Build trees are never deleted by the module; remove C(work_dir/build) to reclaim space.
  - The compiler is C($CXX), or C(c++) when unset; its version is part of both cache keys.
"""

EXAMPLES = r"""
- name: Build Triton 3.5.1 against its pinned LLVM (hours on the first run), polling the status file
  sparkforge.stack.triton_llvm_build:
    triton_version: "3.5.1"
    work_dir: /opt/sparkforge/build/triton
    wheel_dir: /opt/sparkforge/wheels
    python: /opt/sparkforge/venv/bin/python
  async: 21600
  poll: 0
  register: triton_job

- name: Show what would be built and why
  sparkforge.stack.triton_llvm_build:
    triton_repo: https://github.com/triton-lang/triton.git
    triton_ref: v3.6.0
    work_dir: /opt/sparkforge/build/triton
    wheel_dir: /opt/sparkforge/wheels
  check_mode: true
  register: plan
"""

RETURN = r"""
wheel:
  description: Path of the published wheel (or, in check mode, of the wheel that is already up to date).
  returned: success
  type: str
  sample: /opt/sparkforge/wheels/triton-3.5.1-cp312-cp312-linux_aarch64.whl
wheel_sha256:
  description: sha256 of the wheel.
  returned: success
  type: str
triton_commit:
  description: The Triton commit built.
  returned: success
  type: str
triton_version:
  description: The Triton version built.
  returned: success
  type: str
llvm_commit:
  description: The LLVM commit Triton is built against.
  returned: success
  type: str
  sample: 7d5de3033187c8a3bb4d2e322f5462cdaf49808f
llvm_prefix:
  description: The LLVM install prefix.
  returned: success
  type: str
cache_key:
  description: The Triton cache key (sha256 over every input of the wheel).
  returned: success
  type: str
llvm_cache_key:
  description: The LLVM cache key (recorded in the stamp file of the prefix).
  returned: success
  type: str
built:
  description: The parts that were built in this run (C(llvm), C(triton)); empty when nothing was.
  returned: success
  type: list
  elements: str
  sample: [llvm, triton]
duration_s:
  description: Seconds this run took.
  returned: always
  type: float
log:
  description: The log file of this run (or of the build that made the wheel, when nothing was built).
  returned: success
  type: str
status_file:
  description: The progress file.
  returned: always
  type: str
plan:
  description: What would be (or was) built and why, with the cache keys and the jobs.
  returned: success
  type: dict
phase:
  description: The phase that failed (clone, llvm-configure, llvm-build, llvm-install, triton-wheel, publish).
  returned: failure
  type: str
rc:
  description: Exit code of the command that failed.
  returned: failure of a build phase
  type: int
log_tail:
  description: The last lines of the log when a phase failed.
  returned: failure
  type: str
error_lines:
  description: The lines of the log that look like errors (the cause may sit above the tail).
  returned: failure of a build phase
  type: list
  elements: str
"""

import glob
import hashlib
import json
import os
import shutil
import sys
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkforge.stack.plugins.module_utils.build_common import (
    BuildError,
    BuildFailed,
    BuildLock,
    StatusFile,
    atomic_publish,
    atomic_write_text,
    command_version,
    git,
    log_tail,
    makedirs,
    run_logged,
    sha256_file,
)
from ansible_collections.sparkforge.stack.plugins.module_utils import git_fetch
from ansible_collections.sparkforge.stack.plugins.module_utils import triton_build as tb
from ansible_collections.sparkforge.stack.plugins.module_utils.triton_build import (
    find_record,
    ptxas_identity,
    python_identity,
    read_json,
    run_capture as _run,
)

DEFAULT_TRITON_REPO = "https://github.com/triton-lang/triton.git"
DEFAULT_LLVM_REPO = "https://github.com/llvm/llvm-project.git"


class TritonSource:
    """Reads files of the Triton source at a commit without changing any tree."""

    def __init__(self, src, repo, ref, checkout):
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
                raise BuildError("triton_src %s does not exist" % self.src)
            self.commit = git(["rev-parse", "HEAD"], cwd=self.src)
            diff = git(["diff", "HEAD"], cwd=self.src)
            if diff:
                self.diff = hashlib.sha256(diff.encode("utf-8")).hexdigest()
            return
        self.ref = self.ref_for(version)
        if tb.looks_like_commit(self.ref):
            self.commit = self.ref.lower()
            return
        out = git(["ls-remote", self.repo, self.ref, self.ref + "^{}"], cwd="/")
        found = {}
        for line in out.splitlines():
            sha, dummy, name = line.partition("\t")
            found[name] = sha
        for name in ("refs/tags/%s^{}" % self.ref, "refs/tags/%s" % self.ref, "refs/heads/%s" % self.ref,
                     self.ref):
            if name in found:
                self.commit = found[name]
                return
        raise BuildError("ref %s not found in %s (git ls-remote found nothing); check triton_ref/triton_version"
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
                rc, out = _run(["git", "show", "%s:%s" % (self.commit, relpath)], cwd=where)
                if rc == 0:
                    return out
        return None


class Builder:
    def __init__(self, module):
        self.module = module
        p = module.params
        self.p = p
        self.work_dir = p["work_dir"]
        self.wheel_dir = p["wheel_dir"]
        self.status_path = p["status_file"] or os.path.join(self.work_dir, "status.json")
        self.python = p["python"] or sys.executable
        self.triton_checkout = p["triton_src"] or os.path.join(self.work_dir, "src", "triton")
        self.llvm_checkout = p["llvm_src"] or os.path.join(self.work_dir, "src", "llvm-project")
        self.started = time.time()
        self.log = None

    # --- the probe: what would be built and why (no side effects) ---------------------------
    def probe(self):
        p = self.p
        if p["ccache"] and not shutil.which("ccache"):
            raise BuildError("ccache: true but there is no ccache in PATH; install ccache or set ccache: false")
        if p["triton_src"] and p["triton_repo"]:
            raise BuildError("give triton_repo or triton_src, not both")
        if p["llvm_src"] and p["llvm_repo"]:
            raise BuildError("give llvm_repo or llvm_src, not both")
        if not p["triton_src"]:
            p["triton_repo"] = p["triton_repo"] or DEFAULT_TRITON_REPO
            if not (p["triton_ref"] or p["triton_version"]):
                raise BuildError("give triton_ref or triton_version (the ref defaults to v<triton_version>)")
        if not p["llvm_src"]:
            p["llvm_repo"] = p["llvm_repo"] or DEFAULT_LLVM_REPO

        source = TritonSource(p["triton_src"], p["triton_repo"], p["triton_ref"],
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
            raise BuildError(
                "Triton %s (%s) pins LLVM %s in cmake/llvm-hash.txt, but llvm_commit is %s: fix the version "
                "manifest (sparkforge_triton_releases) or leave llvm_commit out" % (
                    version or "?", source.commit[:12], pinned, p["llvm_commit"]))
        self.version = version
        self.llvm_commit = llvm_commit

        compiler = command_version([os.environ.get("CXX") or "c++"])
        self.jobs_llvm, why_llvm = tb.resolve_llvm_jobs(p["jobs"])
        self.jobs_triton, why_triton = tb.resolve_triton_jobs(p["jobs"])
        python_id = python_identity(self.python)
        ptxas_id = ptxas_identity(p["ptxas_path"])

        plan = {
            "triton": {"commit": source.commit, "version": version, "ref": source.ref,
                       "source": p["triton_src"] or p["triton_repo"]},
            "llvm": {"commit": llvm_commit or None, "source": p["llvm_src"] or p["llvm_repo"]},
            "jobs": {"llvm": self.jobs_llvm, "llvm_why": why_llvm, "triton": self.jobs_triton,
                     "triton_why": why_triton},
            "python": python_id, "compiler": compiler, "ptxas": ptxas_id,
        }
        self.plan = plan
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
            raise BuildError("the Triton source pins LLVM %s, the plan was %s; run again" % (pinned, self.llvm_commit))
        setup_rel = tb.resolve_setup_dir(self.triton_checkout, version)
        setup_dir = os.path.join(self.triton_checkout, setup_rel)

        if self.plan["llvm"]["build"]:
            if p["llvm_src"]:
                head = git(["rev-parse", "HEAD"], cwd=p["llvm_src"])
                if head != self.llvm_commit:
                    raise BuildError("llvm_src %s is at %s but Triton pins %s: check out that commit there" % (
                        p["llvm_src"], head, self.llvm_commit))
            else:
                git_fetch.fetch_checkout(p["llvm_repo"], None, self.llvm_commit, self.llvm_checkout, log, status)
            self.build_llvm(status)
            built.append("llvm")

        env = dict(os.environ)
        env.update(tb.triton_build_env(self.llvm_prefix, version, p["ptxas_path"], self.jobs_triton,
                                       json_syspath=p["json_syspath"], ccache=p["ccache"],
                                       extra_env=p["extra_env"]))
        dist = os.path.join(self.work_dir, "dist", "triton-%s" % self.triton_key[:16])
        if os.path.isdir(dist):
            shutil.rmtree(dist)
        makedirs(dist)
        run_logged([self.python, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-v",
                    "-w", dist, setup_dir], log, "triton-wheel", status, cwd=setup_dir, env=env, tail_lines=80)
        wheels = sorted(glob.glob(os.path.join(dist, "triton-*.whl")))
        if len(wheels) != 1:
            raise BuildError("pip wheel produced %d triton wheels in %s (expected one): %s" % (
                len(wheels), dist, ", ".join(os.path.basename(w) for w in wheels)))
        built.append("triton")

        status.phase("publish")
        name = os.path.basename(wheels[0])
        if version and not tb.wheel_version_matches(name, version):
            raise BuildError("the wheel %s does not carry version %s" % (name, version))
        digest = sha256_file(wheels[0])
        published = atomic_publish(wheels[0], self.wheel_dir)
        record = {
            "wheel": name, "sha256": digest, "cache_key": self.triton_key, "llvm_cache_key": self.llvm_key,
            "triton_commit": self.source.commit, "triton_version": version, "llvm_commit": self.llvm_commit,
            "llvm_prefix": self.llvm_prefix, "log": log,
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "inputs": self.plan,
        }
        atomic_write_text(tb.record_path(self.wheel_dir, name), json.dumps(record, indent=1, sort_keys=True) + "\n")
        return built, published, record

    def build_llvm(self, status):
        p = self.p
        log = self.log
        build_dir = tb.llvm_build_dir(self.work_dir, self.llvm_key)
        if not os.path.isfile(os.path.join(build_dir, "build.ninja")):
            cmd = tb.llvm_cmake_command(self.llvm_checkout, build_dir, self.llvm_prefix, p["llvm_projects"],
                                        p["llvm_targets"], p["build_type"], p["assertions"], p["ccache"],
                                        self.jobs_llvm, p["llvm_cmake_args"])
            run_logged(cmd, log, "llvm-configure", status)
        run_logged(["ninja", "-C", build_dir, "-j", str(self.jobs_llvm)], log, "llvm-build", status)
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
            raise BuildError("the LLVM install in %s has no bin/llvm-config; see %s" % (self.llvm_prefix, log))
        stamp = {"cache_key": self.llvm_key, "llvm_commit": self.llvm_commit, "build_dir": build_dir,
                 "inputs": tb.llvm_key_inputs(self.llvm_commit, p["llvm_projects"], p["llvm_targets"],
                                              p["build_type"], p["assertions"], self.plan["compiler"],
                                              p["llvm_cmake_args"]),
                 "built_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
        atomic_write_text(stamp_path, json.dumps(stamp, indent=1, sort_keys=True) + "\n")


def clean_partials(wheel_dir):
    """Temporary files of a publish that was killed half way (never named *.whl)."""
    for path in glob.glob(os.path.join(wheel_dir, ".partial-*.tmp")):
        os.unlink(path)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            triton_repo=dict(type="str"),
            triton_ref=dict(type="str"),
            triton_version=dict(type="str"),
            triton_src=dict(type="path"),
            llvm_repo=dict(type="str"),
            llvm_src=dict(type="path"),
            llvm_commit=dict(type="str"),
            work_dir=dict(type="path", required=True),
            llvm_install_prefix=dict(type="path"),
            llvm_projects=dict(type="str", default=tb.DEFAULT_LLVM_PROJECTS),
            llvm_targets=dict(type="str", default=tb.DEFAULT_LLVM_TARGETS),
            llvm_cmake_args=dict(type="list", elements="str", default=[]),
            build_type=dict(type="str", default="Release", choices=["Release", "RelWithDebInfo", "Debug",
                                                                    "MinSizeRel"]),
            assertions=dict(type="bool", default=True),
            jobs=dict(type="str", default="auto"),
            python=dict(type="path"),
            wheel_dir=dict(type="path", required=True),
            ptxas_path=dict(type="path", default="/usr/local/cuda/bin/ptxas"),
            json_syspath=dict(type="path", default="/usr"),
            extra_env=dict(type="dict", default={}),
            ccache=dict(type="bool", default=False),
            force=dict(type="bool", default=False),
            status_file=dict(type="path"),
        ),
        mutually_exclusive=[["triton_repo", "triton_src"], ["llvm_repo", "llvm_src"]],
        supports_check_mode=True,
    )
    builder = Builder(module)
    result = dict(changed=False, status_file=builder.status_path)

    def fail(msg, **extra):
        result.update(extra)
        result["duration_s"] = round(time.time() - builder.started, 2)
        module.fail_json(msg=msg, **result)

    lock = None
    if not module.check_mode:
        try:
            lock = BuildLock(os.path.join(builder.work_dir, ".build.lock")).acquire()
        except BuildError as exc:
            fail(str(exc), phase="lock")
    try:
        try:
            plan = builder.probe()
        except BuildError as exc:
            fail(str(exc), phase="plan")
        result["plan"] = plan
        result.update(triton_commit=builder.source.commit, triton_version=builder.version,
                      llvm_commit=builder.llvm_commit, cache_key=builder.triton_key,
                      llvm_cache_key=builder.llvm_key, llvm_prefix=getattr(builder, "llvm_prefix", None))
        needed = plan["triton"]["build"]
        if module._diff:
            before = builder.record["cache_key"] if builder.record else "(no wheel with this key)"
            result["diff"] = {"before": "triton wheel: %s\n" % before,
                              "after": "triton wheel: %s\n" % builder.triton_key}
        if not needed:
            record = builder.record
            result.update(wheel=os.path.join(builder.wheel_dir, record["wheel"]), wheel_sha256=record["sha256"],
                          built=[], log=record.get("log"))
        elif module.check_mode:
            result.update(changed=True, built=[], wheel=None, log=None)
        else:
            makedirs(os.path.join(builder.work_dir, "logs"))
            builder.log = os.path.join(builder.work_dir, "logs", "build-%s-%s.log" % (
                time.strftime("%Y%m%d-%H%M%S"), builder.triton_key[:12]))
            status = StatusFile(builder.status_path, "triton_llvm_build", log_path=builder.log)
            status.update(plan=plan)
            result["log"] = builder.log
            makedirs(builder.wheel_dir)
            clean_partials(builder.wheel_dir)
            try:
                with tb.Heartbeat(status):
                    built, wheel, record = builder.build(status)
            except BuildFailed as exc:
                errors = tb.error_lines(exc.log_path)
                msg = str(exc)
                if errors:
                    msg += "\n--- error lines of the log ---\n" + "\n".join(errors)
                fail(msg, phase=exc.phase, rc=exc.returncode, log_tail=exc.tail, error_lines=errors)
            except (BuildError, OSError) as exc:
                phase = status.state.get("phase")
                status.finish("failed", str(exc))
                fail("phase '%s' failed: %s" % (phase, exc), phase=phase, log_tail=log_tail(builder.log))
            status.finish("done", "published %s" % os.path.basename(wheel))
            result.update(changed=True, wheel=wheel, wheel_sha256=record["sha256"], built=built)
    finally:
        if lock is not None:
            lock.release()
    result["duration_s"] = round(time.time() - builder.started, 2)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
