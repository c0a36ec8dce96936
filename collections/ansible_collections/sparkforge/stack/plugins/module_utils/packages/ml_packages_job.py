# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One run of ml_packages: resolve the matrix for this host, then per package a pip dry-run (the
probe: which wheel or source build, and whether it would replace a protected distribution) and,
unless check mode, the install, with the guard's constraints on every pip call.

The job has the shape of module_utils/_common/job.py: ``MlPackagesJob(params, system, check_mode)``.
``plan()`` refuses bad input (the matrix, the GPU build knobs, a missing venv or old pip) before
pip runs, and lists the packages to handle; in check mode (or when every package is skipped) it
probes them all and its result is the run's.  ``apply(plan)`` probes and installs one package
after the other (each probe sees what the ones before installed).  pip runs through the
``system``, so tests drive the job with a stand-in pip.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import platform as host_platform
import shutil
import tempfile
import time

from ansible_collections.sparkforge.stack.plugins.module_utils._common.clock import utc_now
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import heavy_build
from ansible_collections.sparkforge.stack.plugins.module_utils.packages.cxx_std import parse_compiler_version
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import ml_gpu
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import ml_packages as mp
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import smoke
from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import atomic_write_text, makedirs
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import Job, JobError, Plan, output_tail


class Pip:
    """pip of the venv, with the guard's constraints file on every call."""

    def __init__(self, system, venv, constraints_path, common_args, env, protected, log_dir):
        self.system = system
        self.python = os.path.join(venv, "bin", "python")
        self.constraints_path = constraints_path
        self.common_args = common_args
        self.env = env
        self.protected = protected
        self.provenance_path = os.path.join(venv, mp.PROVENANCE_FILE)
        self.provenance = {}
        if os.path.isfile(self.provenance_path):
            try:
                with open(self.provenance_path) as handle:
                    self.provenance = json.load(handle)
            except ValueError:
                self.provenance = {}
        self.log_dir = log_dir

    def run(self, args, env=None, log_name=None):
        cmd = [self.python, "-m", "pip"] + args
        rc, out, err = self.system.run(cmd, env or self.env)
        text = (out or "") + (err or "")
        if self.log_dir and log_name:
            path = os.path.join(self.log_dir, log_name + ".log")
            with open(path, "a") as handle:
                handle.write("\n=== %s at %s (rc %d) ===\n%s" % (" ".join(cmd), utc_now(), rc, text))
        return rc, text

    def inspect(self):
        rc, out, err = self.system.run([self.python, "-m", "pip", "inspect", "--local"], self.env)
        if rc != 0:
            raise JobError("pip inspect failed in the venv: %s" % (err or out).strip(), tail=output_tail(out, err))
        return mp.installed_from_inspect(json.loads(out))

    def build(self, command, extra, env, log_name):
        """pip download / pip wheel with the same constraints and index arguments as install."""
        args = [command, "--disable-pip-version-check", "--no-input", "--constraint", self.constraints_path]
        return self.run(args + self.common_args + extra, env=env, log_name=log_name)

    def install(self, extra, env, dry_run, report_path, log_name):
        args = ["install", "--disable-pip-version-check", "--no-input", "--constraint", self.constraints_path]
        args += self.common_args
        if dry_run:
            args += ["--dry-run", "--report", report_path]
        return self.run(args + extra, env=env, log_name=log_name)


def host_compiler(system):
    """(kind, version) of the host's `c++ --version` (torch's cpp_extension compiles with it), None without one."""
    cxx = system.which("c++")
    if not cxx:
        return None
    rc, out, _err = system.run([cxx, "--version"])
    return parse_compiler_version(out if rc == 0 else "") or ("unknown", "0")


def probe(pip, item, method, work, base_env):
    """Dry-run one method; return (ok, report_items, failure_kind, lines)."""
    report_path = os.path.join(work, "report-%s-%s.json" % (mp.canonical_name(item["name"]), method))
    if os.path.exists(report_path):
        os.unlink(report_path)
    rc, text = pip.install(mp.install_args(item, method), env_for(item, method, base_env), True, report_path,
                           mp.canonical_name(item["name"]))
    if rc != 0:
        kind, lines = mp.classify_failure(text, pip.protected)
        return False, [], kind, lines
    with open(report_path) as handle:
        return True, mp.report_install_items(json.load(handle)), None, []


def env_for(item, method, base_env):
    """The pip environment: the entry's source env, plus the arch list and job knobs of a GPU build."""
    env = mp.build_env(item, method, base_env)
    if method == "source" and item.get("gpu_env"):
        env.update(item["gpu_env"])
        env = heavy_build.toolkit_env(env)
    return env


def plan_row(item, installed):
    before = installed.get(mp.canonical_name(item["name"]))
    return {
        "name": item["name"],
        "requirement": item["requirement"],
        "status": None,
        "version": before["version"] if before else None,
        "version_before": before["version"] if before else None,
        "method": item["method"],
        "method_used": None,
        "fallback_taken": False,
        "optional": item["optional"],
        "experimental": item["experimental"],
        "would_install": [],
        "reason": "",
        "caveats": item["caveats"],
        "log": None,
    }


def check_mode_without_venv(plan):
    """The result of a check-mode run on a host whose venv does not exist yet."""
    rows = []
    for item in plan:
        row = plan_row(item, {})
        if item["method"] == "skip":
            row["status"] = "skipped"
            row["reason"] = item["skip_reason"]
        else:
            row["status"] = "would_install"
            row["reason"] = "the venv does not exist yet (check mode)"
        rows.append(row)
    return dict(changed=any(r["status"] == "would_install" for r in rows), packages=rows,
                table=mp.format_table(rows), constraints="", protected_before={}, protected_after={},
                protected_unchanged=True, build_prereqs=[], failed_packages=[],
                report=dict(packages=mp.report_rows(rows), table=mp.format_table(mp.report_rows(rows)),
                            protected={}, failed_packages=[]))


def installed_row(pip, installed, item, row):
    """The row of a package pip just installed: the version it now has, its provenance recorded."""
    installed.clear()
    installed.update(pip.inspect())
    now = installed.get(mp.canonical_name(item["name"]))
    row["version"] = now["version"] if now else None
    row["status"] = "installed"
    mp.record_provenance(pip.provenance, row)
    atomic_write_text(pip.provenance_path, json.dumps(pip.provenance, indent=1, sort_keys=True) + "\n")
    if item.get("smoke"):
        # Once installed, it runs once here (on a host whose torch sees a GPU; else skipped, saying why).
        row["smoke"] = smoke.run(pip.system, pip.python, item["name"], item["smoke"], pip.env)
        if row["smoke"]["status"] == "failed":
            row["status"] = "failed"
        row["reason"] = "; ".join(r for r in (row["reason"], smoke.message(row["smoke"])) if r)
    return row, True


def handle_package(check_mode, pip, item, installed, work, base_env, protected, prereqs):
    row = plan_row(item, installed)
    if pip.log_dir:
        row["log"] = os.path.join(pip.log_dir, mp.canonical_name(item["name"]) + ".log")
    if item["method"] == "skip":
        row["status"] = "skipped"
        row["reason"] = item["skip_reason"]
        return row, False

    method = item["method"]
    ok, items, kind, lines = probe(pip, item, method, work, base_env)
    if not ok and kind == "no_wheel" and item.get("fallback") == "source":
        first = "; ".join(lines[-2:])
        method = "source"
        row["fallback_taken"] = True
        ok, items, kind, lines = probe(pip, item, method, work, base_env)
        if ok:
            row["reason"] = "no wheel fits this host (%s): built from source" % first
    row["method_used"] = method
    if not ok:
        row["status"] = "failed"
        if kind == "guard":
            row["reason"] = ("cannot be installed without replacing a protected package (%s) of the venv: %s. "
                             "Pin a release of %s that accepts the installed build, or rebuild torch to match."
                             % (", ".join(protected), " / ".join(lines), item["name"]))
        elif kind == "no_wheel":
            row["reason"] = "no installable distribution for this host: %s%s" % (
                " / ".join(lines), "" if item.get("fallback") or method == "source" else
                " (the matrix allows no source fallback here)")
        else:
            row["reason"] = "pip could not resolve it (%s): %s" % (kind, " / ".join(lines[-8:]))
        return row, False

    violations = mp.guard_violations(items, protected, installed)
    if violations:
        row["status"] = "failed"
        row["reason"] = "refused: %s. Install the stack's own build of it first (torch role)." % "; ".join(violations)
        return row, False

    row["would_install"] = ["%s==%s" % (i["name"], i["version"]) for i in items]
    rebuild = None
    if method == "source" and item.get("gpu_env"):
        env = env_for(item, method, base_env)
        row["build"] = ml_gpu.build_record(item, installed, ml_gpu.cuda_of(env, pip.system))
        if not items:
            changes = ml_gpu.build_changes((pip.provenance.get(mp.canonical_name(item["name"])) or {}).get("build"),
                                           row["build"])
            if changes:
                rebuild = "rebuilt: the installed build differs from the plan (%s)" % "; ".join(changes)
    if not items and not rebuild:
        row["status"] = "present"
        mp.apply_provenance(row, pip.provenance)
        if row.get("build") and not (pip.provenance.get(mp.canonical_name(item["name"])) or {}).get("build"):
            row["reason"] = "; ".join(r for r in (row["reason"], "installed without a record of how it was built "
                                                  "(another installer): kept, not compared with the plan") if r)
        return row, False
    if method == "source":
        prereqs.update(item["source"]["prereqs"])
    mine = [i for i in items if i["name"] == mp.canonical_name(item["name"])]
    if method == "source" and item.get("gpu_env"):
        row["build_env"] = item["gpu_env"]
        row["build_notes"] = item["gpu_notes"]
        item["torch_version"] = (installed.get("torch") or {}).get("version")
        build = ml_gpu.cxx_check(item, item["torch_version"])
        if build:
            row["cxx"] = build
            if build["problems"]:
                # Refused before the sdist is fetched: the build would stop hours in.
                row["status"] = "failed"
                row["reason"] = "; ".join(build["problems"]) + " (nothing was fetched or built)"
                return row, False
    if rebuild:
        row["reason"] = rebuild
    if check_mode:
        row["status"] = "would_install"
        row["version"] = mine[0]["version"] if mine else row["version"]
        return row, True

    started = time.time()
    if method == "source" and item.get("gpu_env"):
        ok, touched = ml_gpu.heavy_install(pip, item, row, work, env_for(item, method, base_env), bool(rebuild))
        row["duration_s"] = round(time.time() - started, 1)
        if not ok:
            row["status"] = "failed"
            return row, touched
        return installed_row(pip, installed, item, row)

    if method in ("wheel", "index") and (item.get("gpu_wheel") or item.get("gpu_build")):
        ok, touched = ml_gpu.prebuilt_install(pip, item, method, mine[0]["version"] if mine else None, row, work,
                                              mp.build_env(item, method, base_env))
        row["duration_s"] = round(time.time() - started, 1)
        if not ok:
            row["status"] = "failed"
            return row, touched
        return installed_row(pip, installed, item, row)
    rc, text = pip.install(mp.install_args(item, method), mp.build_env(item, method, base_env), False, None,
                           mp.canonical_name(item["name"]))
    row["duration_s"] = round(time.time() - started, 1)
    if rc != 0:
        kind, lines = mp.classify_failure(text, protected)
        row["status"] = "failed"
        row["reason"] = "pip install failed (%s, method %s): %s" % (kind, method, "\n".join(lines[-20:]))
        return row, True
    return installed_row(pip, installed, item, row)


class MlPackagesJob(Job):
    """params: the ml_packages module's options; system: module_utils/_common/job.py's seam (pip runs there)."""

    def plan(self):
        p = self.params
        venv = p["venv"]
        python = os.path.join(venv, "bin", "python")
        host = {"arch": p["arch"] or host_platform.machine(), "platform_class": p["platform_class"],
                "cuda_major": p["cuda_major"]}
        try:
            items = mp.resolve(p["matrix"], p["profiles"], p["pins"], host, profile=p["profile"],
                               packages=p["packages"], allow_source_builds=p["allow_source_builds"])
        except mp.MatrixError as exc:
            raise JobError("cannot resolve the ML package matrix: %s" % exc)
        ml_gpu.gpu_plan(p, items)
        heavy = [item for item in items if item.get("gpu_env") and item["method"] == "source"]
        if heavy and p.get("cxx_facts"):
            compiler = host_compiler(self.system)
            for item in heavy:
                item["cxx_facts"], item["cxx_compiler"] = p["cxx_facts"], compiler
        if not os.access(python, os.X_OK):
            if self.check_mode:
                # Check mode before the torch role made the venv: every package the plan does not skip
                # would be installed (what the real run then does), nothing is asked of pip.
                result = check_mode_without_venv(items)
                return Plan(["install %s: the venv does not exist yet" % r["name"] for r in result["packages"]
                             if r["status"] == "would_install"], result, {"no_venv": True})
            raise JobError("%s is not a virtual environment (no bin/python); create it first (the torch role does)"
                           % venv)
        base_env = dict((str(k), str(v)) for k, v in p["env"].items())
        base_env.setdefault("PIP_NO_INPUT", "1")
        rc, out, err = self.system.run([python, "-m", "pip", "--version"], base_env)
        if rc != 0 or not mp.pip_version_ok(out):
            raise JobError("the venv's pip is missing or older than 23 (%s); run '%s -m pip install -U pip' first"
                           % ((out or err).strip(), python), tail=output_tail(out, err))
        state = {"items": items, "base_env": base_env}
        handled = [item for item in items if item["method"] != "skip"]
        if self.check_mode or not handled:
            # Every probe is a pip dry-run: the result of check mode (and of a run with nothing to install).
            result = self.handle_all(state)
            return Plan(["install %s: %s" % (r["name"], ", ".join(r["would_install"])) for r in result["packages"]
                         if r["status"] == "would_install"], result, state)
        return Plan(["ensure %s (%s)" % (item["name"], item["method"]) for item in handled], None, state)

    def apply(self, plan):
        return self.handle_all(plan.state)

    def report(self, plan, diff):
        if plan.state.get("no_venv"):
            return plan.result  # as the real run would find it: nothing asked of pip, no diff
        return self.finish(plan.result, diff)

    def applied(self, result, plan, diff):
        return self.finish(result, diff)

    def handle_all(self, state):
        """Probe (and unless check mode install) every package in order; the module's result."""
        p = self.params
        items, base_env = state["items"], state["base_env"]
        # Check mode writes nothing on the host, pip's logs included.
        log_dir = None if self.check_mode else p["log_dir"]
        if log_dir:
            makedirs(log_dir)
        work = tempfile.mkdtemp(prefix="sparkforge-ml-")
        try:
            constraints_path = os.path.join(work, "constraints.txt")
            pip = Pip(self.system, p["venv"], constraints_path,
                      mp.index_args(p["index_url"], p["extra_index_urls"], p["find_links"], p["no_index"]),
                      base_env, p["protected"], log_dir)
            installed = pip.inspect()
            constraints = mp.constraints_text(installed, p["protected"])
            atomic_write_text(constraints_path, constraints)
            before = mp.protected_state(installed, p["protected"])

            rows = []
            changed = False
            prereqs = set()
            for item in items:
                row, touched = handle_package(self.check_mode, pip, item, installed, work, base_env, p["protected"],
                                              prereqs)
                rows.append(row)
                changed = changed or touched
            after = mp.protected_state(pip.inspect(), p["protected"])
        finally:
            shutil.rmtree(work, ignore_errors=True)

        failed = [row["name"] for row in rows if row["status"] == "failed"]
        return dict(
            changed=changed,
            packages=rows,
            table=mp.format_table(rows),
            constraints=constraints,
            protected_before=before,
            protected_after=after,
            protected_unchanged=before == after,
            build_prereqs=sorted(prereqs),
            failed_packages=failed,
            report=dict(packages=mp.report_rows(rows), table=mp.format_table(mp.report_rows(rows)),
                        protected=after, failed_packages=failed),
        )

    @staticmethod
    def finish(result, diff):
        """The diff, and the run's failures: a protected distribution that changed, a required package that failed
        (raised with the whole result, as the module reports it)."""
        rows = result["packages"]
        if diff:
            result["diff"] = {
                "before": "".join("%s %s\n" % (r["name"], r["version_before"] or "-") for r in rows),
                "after": "".join("%s %s\n" % (r["name"], r["version"] or "-") for r in rows),
            }
        if not result["protected_unchanged"]:
            raise JobError("a protected distribution changed during the run (before %s, after %s): the venv's "
                           "torch is no longer the stack's build; reinstall it with the torch role"
                           % (result["protected_before"], result["protected_after"]), **result)
        required_failed = [row["name"] for row in rows if row["status"] == "failed" and not row["optional"]]
        if required_failed:
            raise JobError("required package(s) failed: %s (the others were handled; see packages/table)"
                           % ", ".join(required_failed), **result)
        return result
