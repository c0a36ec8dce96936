# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One run of domain_wheel_build: a torchvision/torchaudio wheel built from a checked-out tree
against the torch in the build venv, reproducibly (module_utils/build/repro), under a lock, with a log,
published atomically with a manifest that carries its cache key.

The job has the shape of module_utils/_common/job.py: ``DomainWheelJob(params, system, check_mode)``,
``plan()`` (the source commit, the build python, the cache key: published, or the build and why)
and ``apply(plan)`` (the build under the lock, the publish).  The probes go through the ``system``;
the build runs with its log on disk (build_common.run_logged).  No Ansible imports.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import json
import os
import platform
import shutil
import tempfile
import time

from ansible_collections.sparkforge.stack.plugins.module_utils.build import repro
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import Job, Plan, git_output
from ansible_collections.sparkforge.stack.plugins.module_utils.build.torch_job import python_version
from ansible_collections.sparkforge.stack.plugins.module_utils.build.build_common import (
    JobError,
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

# Variables that change how fast a build runs, not what it writes (left out of the key).
NON_OUTPUT_ENV = frozenset(["MAX_JOBS", "CMAKE_BUILD_PARALLEL_LEVEL", "http_proxy", "https_proxy", "no_proxy",
                            "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"])


def key_inputs(p, commit, python_id):
    return {
        "what": "domain", "name": p["name"], "version": p["version"], "commit": commit, "python": python_id,
        "env": dict((k, v) for k, v in sorted((p["environment"] or {}).items()) if k not in NON_OUTPUT_ENV),
        "depends_on": p["depends_on"] or "", "reproducible": repro.SCHEME,
    }


def find_published(wheel_dir, name, key):
    """(wheel, manifest data) published with this key, whole (its sha256 checked), or (None, None)."""
    for path in sorted(glob.glob(os.path.join(wheel_dir, "%s-*.whl.manifest.json" % name))):
        try:
            with open(path) as handle:
                data = json.load(handle)
        except (IOError, OSError, ValueError):
            continue
        wheel = path[:-len(".manifest.json")]
        if data.get("cache_key") == key and os.path.isfile(wheel) and sha256_file(wheel) == data.get("sha256"):
            return wheel, data
    return None, None


class DomainWheelJob(Job):
    """params: domain_wheel_build's options; system: module_utils/_common/job.py's seam.  The result carries
    ``warnings`` for the caller to show."""

    def plan(self):
        """Published with this cache key (nothing to do), or the build and why; reads only."""
        p = self.params
        src, wheel_dir = p["src"], p["wheel_dir"]
        if not os.path.isdir(os.path.join(src, ".git")):
            raise JobError("src %s is not a git checkout (clone the library there first)" % src)
        commit = git_output(self.system, ["rev-parse", "HEAD"], src)
        key_in = key_inputs(p, commit, python_version(p["python"], self.system))
        key = cache_key(key_in)
        log = p["log_file"] or os.path.join(os.path.dirname(os.path.abspath(src)), "%s-build.log" % p["name"])
        result = dict(changed=False, name=p["name"], version=p["version"], commit=commit, cache_key=key, log=log)
        wheel, data = (None, None) if p["force"] else find_published(wheel_dir, p["name"], key)
        if wheel:
            result.update(wheel=wheel, sha256=data["sha256"], reproducible=data.get("reproducible"),
                          plan="%s is published with this cache key: nothing to do" % os.path.basename(wheel))
            return Plan([], result)
        why = "force: rebuilding" if p["force"] else "no published %s wheel has cache key %s" % (p["name"], key[:12])
        change = "build %s %s (%s): %s" % (p["name"], p["version"], commit[:12], why)
        if self.check_mode:
            result.update(changed=True, wheel=None, sha256=None, plan="would " + change)
        return Plan([change], result, {"commit": commit, "key_inputs": key_in, "key": key, "log": log, "why": why})

    def apply(self, plan):
        return build(self.params, dict(plan.result), plan.state)


def build(p, result, state):
    """The build under the wheel dir's lock, the wheel normalised and published with its manifest."""
    src, wheel_dir = p["src"], p["wheel_dir"]
    commit, key_in, key, log, why = state["commit"], state["key_inputs"], state["key"], state["log"], state["why"]
    makedirs(wheel_dir)
    started = time.time()
    with BuildLock(os.path.join(wheel_dir, ".%s.lock" % p["name"])):
        env = dict(os.environ)
        env.update(dict((str(k), str(v)) for k, v in (p["environment"] or {}).items()))
        epoch, maps, env = repro.build_settings(src, commit, [
            (src, "%s/%s" % (repro.MAPPED_ROOT, p["name"])), (env.get("TMPDIR"), "/tmp")], env)
        out = tempfile.mkdtemp(prefix=".%s-dist-" % p["name"], dir=os.path.dirname(os.path.abspath(src)))
        try:
            run_logged([p["python"], "-m", "pip", "wheel", "--disable-pip-version-check", "--no-build-isolation",
                        "--no-deps", "-w", out, "."], log, "%s-wheel" % p["name"], cwd=src, env=env)
            wheels = sorted(glob.glob(os.path.join(out, "*.whl")))
            if len(wheels) != 1 or not os.path.basename(wheels[0]).startswith("%s-%s" % (p["name"], p["version"])):
                raise JobError("pip wheel made %s in %s, not one %s %s wheel: see %s" % (
                    [os.path.basename(w) for w in wheels] or "nothing", out, p["name"], p["version"], log))
            home = os.path.expanduser("~")
            record = repro.finish_wheel(wheels[0], epoch, maps, {
                "src_dir": os.path.realpath(src), "home": home if home not in ("", "/") else None,
                "host_name": platform.node()})
            wheel = atomic_publish(wheels[0], wheel_dir)
        finally:
            shutil.rmtree(out, ignore_errors=True)
        digest = sha256_file(wheel)
        data = {"cache_key": key, "key_inputs": key_in, "wheel_file": os.path.basename(wheel), "sha256": digest,
                "size": os.path.getsize(wheel), "reproducible": record, "log": log,
                "duration_s": round(time.time() - started, 1)}
        atomic_write_text(wheel + ".manifest.json", json.dumps(data, indent=1, sort_keys=True) + "\n")
    result.update(changed=True, wheel=wheel, sha256=digest, reproducible=record,
                  warnings=repro.leak_warnings(os.path.basename(wheel), record),
                  plan="built %s %s (%s): %s" % (p["name"], p["version"], commit[:12], why))
    return result
