#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Kept whole: some 250 of its lines are DOCUMENTATION, EXAMPLES and RETURN, which ansible-doc reads from
# the module file; its Pip orchestration moves to module_utils with issue 34 item 3.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: ml_packages
short_description: Install the ML package layer into a venv without ever replacing its torch
description:
  - Resolves the package matrix (the manifest's C(sparkforge_ml_packages)) for this host and a
    profile or a list of packages, then installs each package into the venv with its own
    C(pip install), one at a time.
  - Every pip call ignores the host's own pip configuration (its C(PIP_*) environment variables and pip.conf
    files); the sources are O(index_url), O(extra_index_urls), O(find_links) and O(env).
  - Every pip call runs with a constraints file that pins the protected distributions (torch,
    torchvision, torchaudio, triton) to the builds installed in the venv (by exact version, and by
    local wheel file when that file still exists).
  - Before installing, C(pip install --dry-run --report) probes each package. A package that
    cannot be installed without installing or replacing a protected distribution fails on its own
    with a clear message; the other packages go on.
  - When the matrix allows it (C(fallback=source)) and no wheel fits the host, the package is
    built from source instead.
  - The protected distributions are hashed (every file their RECORD lists, byte code caches
    excepted) before and after; a difference fails the module.
  - Already-satisfied pins install nothing and report C(changed=false). In check mode the module
    lists what would be installed (including dependencies) and installs nothing.
  - Needs pip >= 23 in the venv.
version_added: "0.1.0"
author:
  - sparkforge developers (@sparkforge)
options:
  venv:
    description: The virtual environment to install into (it must exist and hold pip >= 23).
    type: path
    required: true
  matrix:
    description: The package matrix (C(sparkforge_ml_packages) of the manifest).
    type: dict
    required: true
  profiles:
    description: Named lists of matrix packages (C(sparkforge_ml_profiles)); C(*) means every package not opt_in.
    type: dict
    default: {}
  pins:
    description: Version per package; a bare version means C(==), a specifier is used as written, empty means unpinned.
    type: dict
    default: {}
  profile:
    description: The profile to install. Either this or O(packages) (or both) must select something.
    type: str
  packages:
    description: Matrix packages to install in addition to the profile's.
    type: list
    elements: str
    default: []
  arch:
    description: CPU architecture of the host (C(ansible_facts.sparkforge.cpu.arch)); defaults to the machine's.
    type: str
  platform_class:
    description: Platform class from gpu_facts (C(dgx_spark), C(gh200), ..., C(none)).
    type: str
    default: generic
  cuda_major:
    description: The CUDA major the stack targets.
    type: int
    default: 13
  allow_source_builds:
    description: Allow source builds (method C(source) and the C(source) fallback). When false such packages are skipped.
    type: bool
    default: true
  protected:
    description: Distributions that are never installed, upgraded or replaced.
    type: list
    elements: str
    default: [torch, torchvision, torchaudio, triton]
  index_url:
    description: Base URL of the package index (a mirror); default is pip's own configuration.
    type: str
  extra_index_urls:
    description: Extra package indexes.
    type: list
    elements: str
    default: []
  find_links:
    description: Local directories or URLs with wheels/sdists (air-gapped installs).
    type: list
    elements: str
    default: []
  no_index:
    description: Use only O(find_links), never an index.
    type: bool
    default: false
  env:
    description: Extra environment for every pip call (proxies, C(PIP_CERT), C(CUDA_HOME), ...).
    type: dict
    default: {}
  log_dir:
    description: Directory for one pip log per package (created; not in check mode, which writes nothing). Without it, failures carry the log tail only.
    type: path
  cuda_arch_list:
    description:
      - The plan's arch list (TORCH_CUDA_ARCH_LIST form, e.g. C(9.0) or C(12.1)) for the packages whose matrix
        entry has C(gpu_build). Each such build gets it in every form its setup.py reads (see the manifest),
        its force-build flags and a job count sized to the host's memory.
      - Required (non-empty) when the plan holds such a source build.
    type: str
    default: ""
  audit_targets:
    description:
      - Compute capabilities (C(12.1), C(9.0)) every shared object of a built GPU wheel is audited against
        before it is installed. A wheel with no SASS of the same major and a lower or equal minor, and no
        PTX the driver can compile, for one of them is refused and never installed.
      - Required when the plan holds a GPU source build.
    type: list
    elements: str
    default: []
  build_cpus:
    description: CPUs for GPU source builds (the job count's upper bound); default the machine's.
    type: int
  build_memory_gib:
    description: Memory (GiB) GPU source builds may plan with; default MemAvailable of C(/proc/meminfo).
    type: float
"""

EXAMPLES = r"""
- name: Install the training profile into the stack's venv
  sparkforge.stack.ml_packages:
    venv: /opt/sparkforge/venv
    matrix: "{{ sparkforge_ml_packages }}"
    profiles: "{{ sparkforge_ml_profiles }}"
    pins: "{{ sparkforge_ml_package_pins }}"
    profile: training
    arch: "{{ ansible_facts.sparkforge.cpu.arch }}"
    platform_class: "{{ ansible_facts.sparkforge.platform_class }}"
    cuda_major: "{{ sparkforge_cuda_major }}"
  register: ml

- name: Air-gapped, two packages from a local wheel directory
  sparkforge.stack.ml_packages:
    venv: /opt/sparkforge/venv
    matrix: "{{ sparkforge_ml_packages }}"
    packages: [einops, omegaconf]
    no_index: true
    find_links: [/srv/wheels]
"""

RETURN = r"""
packages:
  description: One row per package of the plan, in install order.
  returned: always
  type: list
  elements: dict
  contains:
    name: {description: Matrix name., type: str}
    requirement: {description: The pinned requirement., type: str}
    status:
      description: C(present), C(installed), C(would_install), C(failed) or C(skipped).
      type: str
    version: {description: Installed version afterwards (or the version that would be installed)., type: str}
    version_before: {description: Installed version before the run., type: str}
    method: {description: The matrix method for this host., type: str}
    method_used: {description: How it was (or would be) installed., type: str}
    fallback_taken: {description: True when the source fallback replaced the wheel., type: bool}
    optional: {description: A failure of an optional package does not fail the module., type: bool}
    experimental: {description: The matrix marks this method experimental here., type: bool}
    would_install: {description: Distributions pip installs for it (name==version)., type: list}
    reason: {description: Why it was skipped or failed., type: str}
    caveats: {description: Caveats from the matrix., type: list}
    log: {description: Path of its pip log (with O(log_dir))., type: str}
    build_env: {description: "Arch list forms, force-build flags and job knobs of a GPU source build.", type: dict}
    build_notes: {description: How the job count was sized., type: list}
    fixes: {description: "Fixes applied to the sdist (file, replaced, why).", type: list}
    build_s: {description: Seconds the GPU source build took (download + build)., type: float}
    audit:
      description:
        - The arch audit of a built GPU wheel (wheel, targets, ok, note, libraries with sass, ptx and the verdict
          per target); a refused wheel is never installed.
      type: dict
table:
  description: The rows as a plain-text table (for the host report).
  returned: always
  type: str
constraints:
  description: The constraints file content every pip call used.
  returned: always
  type: str
protected_before:
  description: Version, source URL, file count and sha256 of each protected distribution before the run (null if absent).
  returned: always
  type: dict
protected_after:
  description: The same after the run; equal to RV(protected_before) unless the module failed loudly.
  returned: always
  type: dict
protected_unchanged:
  description: True when every protected distribution is byte-identical after the run.
  returned: always
  type: bool
build_prereqs:
  description: Debian/Ubuntu packages the planned source builds need (from the probe).
  returned: always
  type: list
  elements: str
failed_packages:
  description: Names of the packages that failed (optional ones included).
  returned: always
  type: list
  elements: str
report:
  description:
    - What the host report stores; free of run-dependent fields, so a rerun that installs nothing
      gives the same report. C(state) is installed, failed, skipped or would_install; how a package
      already present was installed comes from C(sparkforge-ml-packages.json) in the venv, which the
      module writes after each install.
  returned: always
  type: dict
  contains:
    packages:
      description:
        - One row per package with name, state, version, method, method_used, fallback_taken, optional,
          experimental, reason, caveats, audit (the arch audit of a GPU source build, kept on later runs; else null).
      type: list
    table:
      description: The rows as a plain-text table.
      type: str
    protected:
      description: The protected distributions after the run (version, url, files, sha256).
      type: dict
    failed_packages:
      description: Names of the packages that failed.
      type: list
"""

import json
import os
import platform as host_platform
import shutil
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkforge.stack.plugins.module_utils import fatbin
from ansible_collections.sparkforge.stack.plugins.module_utils import heavy_build
from ansible_collections.sparkforge.stack.plugins.module_utils import ml_packages as mp
from ansible_collections.sparkforge.stack.plugins.module_utils.build_common import atomic_write_text, makedirs
from ansible_collections.sparkforge.stack.plugins.module_utils.pip_env import scrub_process_environ


class Pip:
    """pip of the venv, with the guard's constraints file on every call."""

    def __init__(self, module, venv, constraints_path, common_args, env, protected, log_dir):
        self.module = module
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
        rc, out, err = self.module.run_command(cmd, environ_update=env or self.env)
        text = (out or "") + (err or "")
        if self.log_dir and log_name:
            path = os.path.join(self.log_dir, log_name + ".log")
            with open(path, "a") as handle:
                handle.write("\n=== %s at %s (rc %d) ===\n%s" % (" ".join(cmd), time.strftime("%Y-%m-%dT%H:%M:%S"), rc, text))
        return rc, text

    def inspect(self):
        rc, out, err = self.module.run_command([self.python, "-m", "pip", "inspect", "--local"], environ_update=self.env)
        if rc != 0:
            self.module.fail_json(msg="pip inspect failed in the venv: %s" % (err or out).strip())
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
    return env


def heavy_install(pip, item, row, work, env):
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
        audit = heavy_build.audit_wheel(wheel, item["audit_targets"], item["name"])
    except heavy_build.HeavyBuildError as exc:
        row["reason"] = str(exc)
        return False, False
    row["audit"] = {"wheel": wheels[0], "targets": item["audit_targets"], "libraries": audit["libraries"],
                    "ok": audit["ok"], "note": audit["message"] if audit["ok"] else ""}
    if not audit["ok"]:
        row["reason"] = "%s; not installed" % audit["message"]
        return False, False
    rc, text = pip.install([wheel], env, False, None, canon)
    if rc != 0:
        kind, lines = mp.classify_failure(text, pip.protected)
        row["reason"] = "pip install of the audited wheel failed (%s): %s" % (kind, "\n".join(lines[-20:]))
        return False, True
    if audit["message"]:
        row["reason"] = audit["message"]
    return True, True


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
    return row, True


def handle_package(module, pip, item, installed, work, base_env, protected, prereqs):
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
    if not items:
        row["status"] = "present"
        mp.apply_provenance(row, pip.provenance)
        return row, False
    if method == "source":
        prereqs.update(item["source"]["prereqs"])
    mine = [i for i in items if i["name"] == mp.canonical_name(item["name"])]
    if method == "source" and item.get("gpu_env"):
        row["build_env"] = item["gpu_env"]
        row["build_notes"] = item["gpu_notes"]
    if module.check_mode:
        row["status"] = "would_install"
        row["version"] = mine[0]["version"] if mine else row["version"]
        return row, True

    started = time.time()
    if method == "source" and item.get("gpu_env"):
        ok, touched = heavy_install(pip, item, row, work, env_for(item, method, base_env))
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


def gpu_plan(module, plan):
    """Give every planned GPU source build its environment and audit targets; refuse bad input first."""
    p = module.params
    heavy = [item for item in plan if item.get("gpu_build") and item["method"] == "source"]
    if not heavy:
        return
    for target in p["audit_targets"]:
        try:
            fatbin.parse_capability(target)
        except fatbin.FatbinError:
            module.fail_json(msg="audit_targets: %r is not a compute capability (give one like 12.1 or 9.0)" % target)
    if not p["audit_targets"]:
        module.fail_json(msg="audit_targets is empty and %s build(s) compile CUDA kernels (%s): the built wheels "
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
        module.fail_json(msg="cannot plan the GPU source build(s): %s" % exc)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            venv=dict(type="path", required=True),
            matrix=dict(type="dict", required=True),
            profiles=dict(type="dict", default={}),
            pins=dict(type="dict", default={}),
            profile=dict(type="str"),
            packages=dict(type="list", elements="str", default=[]),
            arch=dict(type="str"),
            platform_class=dict(type="str", default="generic"),
            cuda_major=dict(type="int", default=13),
            allow_source_builds=dict(type="bool", default=True),
            protected=dict(type="list", elements="str", default=["torch", "torchvision", "torchaudio", "triton"]),
            index_url=dict(type="str"),
            extra_index_urls=dict(type="list", elements="str", default=[]),
            find_links=dict(type="list", elements="str", default=[]),
            no_index=dict(type="bool", default=False),
            env=dict(type="dict", default={}),
            log_dir=dict(type="path"),
            cuda_arch_list=dict(type="str", default=""),
            audit_targets=dict(type="list", elements="str", default=[]),
            build_cpus=dict(type="int"),
            build_memory_gib=dict(type="float"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    venv = p["venv"]
    python = os.path.join(venv, "bin", "python")
    host = {"arch": p["arch"] or host_platform.machine(), "platform_class": p["platform_class"],
            "cuda_major": p["cuda_major"]}
    try:
        plan = mp.resolve(p["matrix"], p["profiles"], p["pins"], host, profile=p["profile"],
                          packages=p["packages"], allow_source_builds=p["allow_source_builds"])
    except mp.MatrixError as exc:
        module.fail_json(msg="cannot resolve the ML package matrix: %s" % exc)
    gpu_plan(module, plan)
    if not os.access(python, os.X_OK):
        if module.check_mode:
            # Check mode before the torch role made the venv: every package the plan does not skip
            # would be installed (what the real run then does), nothing is asked of pip.
            module.exit_json(**check_mode_without_venv(plan))
        module.fail_json(msg="%s is not a virtual environment (no bin/python); create it first (the torch role does)" % venv)

    # The host's own pip configuration (PIP_* variables, pip.conf) adds nothing: every source is the plan's.
    scrub_process_environ()
    base_env = dict((str(k), str(v)) for k, v in p["env"].items())
    base_env.setdefault("PIP_NO_INPUT", "1")
    rc, out, err = module.run_command([python, "-m", "pip", "--version"], environ_update=base_env)
    if rc != 0 or not mp.pip_version_ok(out):
        module.fail_json(msg="the venv's pip is missing or older than 23 (%s); run '%s -m pip install -U pip' first"
                         % ((out or err).strip(), python))

    # Check mode writes nothing on the host, pip's logs included.
    log_dir = None if module.check_mode else p["log_dir"]
    if log_dir:
        makedirs(log_dir)
    work = tempfile.mkdtemp(prefix="sparkforge-ml-")
    try:
        constraints_path = os.path.join(work, "constraints.txt")
        pip = Pip(module, venv, constraints_path,
                  mp.index_args(p["index_url"], p["extra_index_urls"], p["find_links"], p["no_index"]),
                  base_env, p["protected"], log_dir)
        installed = pip.inspect()
        constraints = mp.constraints_text(installed, p["protected"])
        atomic_write_text(constraints_path, constraints)
        before = mp.protected_state(installed, p["protected"])

        rows = []
        changed = False
        prereqs = set()
        for item in plan:
            row, touched = handle_package(module, pip, item, installed, work, base_env, p["protected"], prereqs)
            rows.append(row)
            changed = changed or touched
        after = mp.protected_state(pip.inspect(), p["protected"])
    finally:
        shutil.rmtree(work, ignore_errors=True)

    unchanged = before == after
    failed = [row["name"] for row in rows if row["status"] == "failed"]
    required_failed = [row["name"] for row in rows if row["status"] == "failed" and not row["optional"]]
    result = dict(
        changed=changed,
        packages=rows,
        table=mp.format_table(rows),
        constraints=constraints,
        protected_before=before,
        protected_after=after,
        protected_unchanged=unchanged,
        build_prereqs=sorted(prereqs),
        failed_packages=failed,
        report=dict(packages=mp.report_rows(rows), table=mp.format_table(mp.report_rows(rows)),
                    protected=after, failed_packages=failed),
    )
    if module._diff:
        result["diff"] = {
            "before": "".join("%s %s\n" % (r["name"], r["version_before"] or "-") for r in rows),
            "after": "".join("%s %s\n" % (r["name"], r["version"] or "-") for r in rows),
        }
    if not unchanged:
        module.fail_json(msg="a protected distribution changed during the run (before %s, after %s): the venv's "
                         "torch is no longer the stack's build; reinstall it with the torch role" % (before, after),
                         **result)
    if required_failed:
        module.fail_json(msg="required package(s) failed: %s (the others were handled; see packages/table)"
                         % ", ".join(required_failed), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
