# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One run of stack_plan: the stack plan for a host (versions, actions, sources) and every problem
that would stop the real run, judged before anything changes.

The job has the shape of module_utils/_common/job.py, with nothing to apply: ``plan()`` is the whole
answer (its ``changes`` are always empty: stack_plan only reads).  The compiler probe goes through
the ``system``; the source probes through the ``opener`` and ``fetcher`` the caller passes (the
module's use Ansible's open_url: TLS verified, proxies honoured).  The module keeps the Ansible
glue: its options, fact gathering, and turning JobError into fail_json.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import bundle
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import cxx_std
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import wheel_check
from ansible_collections.sparkforge.stack.plugins.module_utils.plan import host_traps, sources
from ansible_collections.sparkforge.stack.plugins.module_utils._common import run_env
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import Job, JobError, Plan
from ansible_collections.sparkforge.stack.plugins.module_utils.host.platforms import cuda_distro_keys
from ansible_collections.sparkforge.stack.plugins.module_utils.plan.preflight import (
    PlanError,
    build_plan,
    compiler_problems,
    cxx_builds,
    existing_torch_problems,
    gpu_source_builds,
    problems,
    render_plan,
)
from ansible_collections.sparkforge.stack.plugins.module_utils.plan.host_room import growing_places, root_problems
from ansible_collections.sparkforge.stack.plugins.module_utils.packages.cxx_std import parse_compiler_version
from ansible_collections.sparkforge.stack.plugins.module_utils.packages.ml_packages import venv_torch_version

REQUIRED_CHECKS = ("min_ram_gib", "min_ram_gib_source_build", "min_disk_gib", "min_disk_gib_source_build")
REQUIRED_MANIFEST = ("sparkforge_torch_releases", "sparkforge_torch_arch_min_version")


def check_bundle(bundle_spec):
    """The bundle option names offline_bundle_info's result; refused first, before facts are gathered."""
    if bundle_spec is not None:
        lacking = [k for k in ("dir", "host_dir", "manifest") if not bundle_spec.get(k)]
        if lacking:
            raise JobError("bundle needs %s (sparkforge.stack.offline_bundle_info's result)" % ", ".join(lacking))


# The venv's torch's own arch list (what an existing torch carries); one import, on the host, read only.
ARCHS_READ = "import json, torch; print(json.dumps(torch.cuda.get_arch_list()))"


def installed_archs(system, venv):
    """(torch.cuda.get_arch_list() of the venv's torch, e.g. ['sm_90'], None) or (None, why it could not be
    read: no venv, a torch that does not import; existing_torch_problems names a venv without torch)."""
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        return None, "%s does not exist" % python
    rc, out, err = system.run([python, "-c", ARCHS_READ])
    lines = (out or "").strip().splitlines()
    try:
        found = json.loads(lines[-1]) if rc == 0 and lines else None
    except ValueError:
        found = None
    if not isinstance(found, list):
        last = ((err or out or "").strip().splitlines() or ["no output"])[-1]
        return None, "%s -c '%s' exited %s: %s" % (python, ARCHS_READ, rc, last[:200])
    return [str(name) for name in found], None


# The Python the venv runs (what pip matches a wheel's cpXY tag against); one call, read only.
PYTHON_READ = "import sys; print('%d.%d' % sys.version_info[:2])"


def venv_python_version(system, venv, python):
    """(X.Y of the Python the venv has or will be made with, that interpreter) - the venv's own bin/python
    when it exists, else ``python`` (pytorch_venv_python) as found on the host; (None, None) when neither runs."""
    own = os.path.join(venv, "bin", "python") if venv else ""
    found = own if own and os.path.exists(own) else (system.which(python) if python else None)
    if not found:
        return None, None
    rc, out, _err = system.run([found, "-c", PYTHON_READ])
    lines = (out or "").strip().splitlines()
    if rc != 0 or not lines or not re.match(r"^\d+\.\d+$", lines[-1].strip()):
        return None, None
    return lines[-1].strip(), found


def host_trap_check(spec, facts):
    """{problems, warnings, report} of the host traps (module_utils/plan/host_traps.py); nothing when not asked."""
    if not spec:
        return {"problems": [], "warnings": [], "report": None}
    try:
        problems, warnings, report = host_traps.check(
            spec.get("traps") or [], [g.get("name") or "" for g in facts.get("gpus") or []], spec.get("root") or "/",
            spec.get("uses") or [], spec.get("ignore") or [])
    except host_traps.TrapError as exc:
        raise JobError("host_traps: %s" % exc)
    report["warnings"] = warnings
    return {"problems": problems, "warnings": warnings, "report": report}


class PlanRun:
    """What one plan run knows so far: each step reads it and puts here what it finds (the plan, the compiler,
    the warnings ...), for the steps after it and the result."""

    def __init__(self, params):
        self.params = params
        self.settings = None
        self.plan = None
        self.plan_error = None
        self.compiler = "unasked"
        self.warnings = []
        self.build_problems = []
        self.traps = {"problems": [], "warnings": [], "report": None}
        self.bad_proxies = []
        self.items = []


class StackPlanJob(Job):
    """params: stack_plan's options, with ``facts`` and ``host`` filled (gathered by the module when
    asked); opener(url, timeout) -> None or why not, fetcher(url, timeout, limit) -> (bytes, why not)."""

    # The plan's steps, in the order they run: the one place the order lives.  Each is a method step_<name>(run)
    # that returns the problems it finds (each {"check", "message"}, the message beside its check) and puts what
    # it learns on ``run`` (a PlanRun).  A new preflight check is one method and its name here.
    STEPS = ("inputs", "settings", "plan", "host", "builder", "root", "compiler", "plan_error", "gpu_builds",
             "existing_torch", "host_traps", "proxy", "wheelhouse", "cuda_distro", "target", "bundle", "probe",
             "sources")

    def __init__(self, params, system, check_mode=False, opener=None, fetcher=None):
        Job.__init__(self, params, system, check_mode)
        self.opener = opener
        self.fetcher = fetcher

    def plan(self):
        run = PlanRun(self.params)
        found = []
        for name in self.STEPS:
            found += getattr(self, "step_" + name)(run)
        # The host's PYTHON*/PIP_* variables the run's python and pip go without (the system made the
        # environment its own: _common/run_env.py), said once in the plan.
        dropped = list(getattr(self.system, "environment_dropped", None) or [])
        plan, warnings = run.plan, run.warnings
        result = dict(changed=False, plan=plan, problems=found, plan_text=self.plan_text(run, found, dropped),
                      ready=not found, build_warnings=[w["message"] for w in warnings],
                      can_build=not run.build_problems, build_problems=run.build_problems,
                      environment_dropped=dropped, host_traps=run.traps["report"])
        return Plan([], result)

    def step_inputs(self, run):
        """The options themselves, refused (JobError) before the host is asked anything."""
        params = run.params
        check_bundle(params["bundle"])
        params["sources"] = sources.fill_platform_names(params["sources"], params["host"], params["platform_maps"])
        missing = [k for k in REQUIRED_CHECKS if k not in params["checks"]]
        missing += [k for k in REQUIRED_MANIFEST if k not in params["manifest"]]
        if missing:
            raise JobError("stack_plan is missing %s" % ", ".join(missing))
        if "gpus" not in params["facts"]:
            raise JobError("facts must be the ansible_facts.sparkforge dict of sparkforge.stack.gpu_facts")
        return []

    def step_settings(self, run):
        """The settings the plan is made from; with torch source existing, the venv's torch's arch list."""
        settings = run.settings = dict(run.params["settings"])
        settings.setdefault("python_version", run.params["host"].get("python_version"))
        if settings.get("torch_source") == "existing" and settings.get("venv"):
            read, unread = installed_archs(self.system, settings["venv"])
            settings.update(installed_archs=read, installed_archs_unread=unread)
        return []

    def step_plan(self, run):
        """The plan itself (preflight.build_plan); why there is none is the problem step_plan_error names."""
        try:
            run.plan = build_plan(run.params["facts"], run.settings, run.params["manifest"])
        except PlanError as exc:
            run.plan_error = str(exc)
        return []

    def step_host(self, run):
        """The host judged as an installer of wheels, each place that grows measured on its own file system
        against what the plan puts there."""
        # Whether it can also build them (the source-build RAM/disk thresholds) is a separate verdict
        # (step_builder): in a fleet only one host per platform class builds, and the fleet planning fails a class
        # none of whose hosts can (a single host is its own builder).
        params = run.params
        places, needs = params["checks"].get("disk_places") or [], params["manifest"].get("sparkforge_disk_needs_gib")
        checks = dict(params["checks"], source_build=False, disk_places=growing_places(run.plan, places, needs))
        return problems(params["facts"], params["host"], checks)

    def step_builder(self, run):
        """Whether the host could build from source (RAM and disk): build_problems, not the host's."""
        params = run.params
        places, needs = params["checks"].get("disk_places") or [], params["manifest"].get("sparkforge_disk_needs_gib")
        checks = dict(params["checks"], source_build=True,
                      disk_places=growing_places(run.plan, places, needs, building=True))
        run.build_problems += [p for p in problems(params["facts"], params["host"], checks)
                               if p["check"] in ("ram", "disk")]
        return []

    def step_root(self, run):
        """Who runs it: the components that need root, against the user the module runs as."""
        return root_problems((run.plan or {}).get("actions"), run.params["facts"].get("user"),
                             run.params["manifest"].get("sparkforge_root_needs"), self.sudo_works)

    def step_compiler(self, run):
        """A source build's C++ compiler against the release's standard (build_problems, not the host's)."""
        plan, manifest = run.plan, run.params["manifest"]
        if plan and plan["source_build"]:
            run.compiler = self.compiler()
            release = manifest["sparkforge_torch_releases"][plan["torch"]["version"]]
            run.build_problems += compiler_problems(plan["torch"]["version"], release,
                                                    manifest.get("sparkforge_cxx_min_compilers"), run.compiler)
        return []

    def step_plan_error(self, run):
        """Why there is no plan (build_plan's PlanError), after the host's own problems."""
        return [{"check": "plan", "message": run.plan_error}] if run.plan_error else []

    def step_gpu_builds(self, run):
        """Each GPU source build's C++ standard against the torch of the plan, and the compiler for it: from
        data, before anything is fetched or built (the sdist is read again once the role fetches it)."""
        params, plan = run.params, run.plan
        gpu_items = gpu_source_builds(params["facts"], run.settings, params["manifest"]) if plan else []
        if not gpu_items:
            return []
        run.compiler = self.compiler() if run.compiler == "unasked" else run.compiler
        plan["gpu_builds"], cxx_problems, run.warnings = cxx_builds(gpu_items, run.settings, plan, params["manifest"],
                                                                    run.compiler)
        return cxx_problems

    def step_existing_torch(self, run):
        """With torch source existing, the venv's torch must be the plan's."""
        settings = run.settings
        if run.plan and settings.get("venv") and settings.get("torch_source") == "existing" and \
                "pytorch" in (settings.get("components") or []):
            return existing_torch_problems(settings["venv"], venv_torch_version(settings["venv"]),
                                           run.plan["torch"]["version"])
        return []

    def step_host_traps(self, run):
        """Known-bad kernels, driver flavours and host settings (the manifest's sparkforge_host_traps), read from
        the files the kernel and driver write, before anything changes."""
        run.traps = host_trap_check(run.params.get("host_traps"), run.params["facts"])
        return run.traps["problems"]

    def step_proxy(self, run):
        """A malformed proxy is named as such (a probe through it would blame each mirror instead)."""
        run.bad_proxies = sources.proxy_problems(os.environ)
        return [{"check": "proxy", "message": message} for message in run.bad_proxies]

    def step_wheelhouse(self, run):
        """What pip would install from the wheelhouse: valid wheels for this host's Python and CPU."""
        params, plan = run.params, run.plan
        if not (plan and params["bundle"] is None and (plan.get("actions") or {}).get("pytorch") == "install"
                and (plan.get("torch") or {}).get("source") == "wheelhouse"):
            return []
        wanted = {"torch": plan["torch"]["version"]}
        if (plan.get("actions") or {}).get("torch_domains") == "install":
            wanted.update(torchvision=plan.get("torchvision"), torchaudio=plan.get("torchaudio"))
        if (plan.get("actions") or {}).get("triton") == "install":
            wanted["triton"] = (plan.get("triton") or {}).get("version")
        variable = (params["sources"].get("variables") or {}).get("wheelhouse") or "sparkforge_wheel_dir"
        # pip matches the wheels' tags against the venv's Python, which may not be the one Ansible runs.
        python_version = venv_python_version(self.system, run.settings.get("venv"),
                                             run.settings.get("venv_python"))[0]
        return [{"check": "wheelhouse", "message": message} for message in wheel_check.wheelhouse_problems(
            params["sources"].get("wheelhouse"), wanted, python_version or params["host"].get("python_version")
            or "", params["host"].get("architecture") or "", variable, params["host"].get("glibc"))]

    def step_cuda_distro(self, run):
        """The NVIDIA apt repository of the host's distribution, for the components installed from it."""
        params, plan, host = run.params, run.plan, run.params["host"]
        if not plan:
            return []
        plan["cuda_distro"] = params["sources"].get("cuda_distro") or ""
        apt_components = [c for c in ("cuda_libs", "cusparselt") if plan["actions"].get(c) == "install"]
        if not (apt_components and not plan["cuda_distro"] and host.get("distribution")):
            return []
        keys = cuda_distro_keys(host.get("distribution"), host.get("distribution_version"))
        return [{"check": "cuda_distro", "message": (
            "sparkforge_cuda_distro_map has no NVIDIA repository for %s %s (tried %s; it knows %s), which %s "
            "install from: add an entry (e.g. '%s: ubuntu2404' if that repository fits) or set cuda_libs_distro"
            % (host.get("distribution"), host.get("distribution_version"), ", ".join(keys),
               ", ".join(sorted((params["platform_maps"].get("cuda_distro_map") or {}))) or "nothing",
               " and ".join(apt_components), keys[-1]))}]

    def step_target(self, run):
        """Every remote source the plan will fetch from, and what picks the host's apt repository, cuSPARSELt
        installer and wheels in an offline bundle (a bundle refuses a host without one)."""
        params, plan = run.params, run.plan
        if not plan:
            return []
        run.items = sources.plan_sources(plan, params["sources"], params["host"])
        try:
            plan["target"] = bundle.target_of(dict(params["sources"], **params["host"]))
        except bundle.BundleError as exc:
            plan["target"] = None
            if params["bundle"] is not None:
                raise JobError("bundle: %s" % exc)
        return []

    def step_bundle(self, run):
        """An offline bundle replaces every source: nothing is probed, each must be in the bundle."""
        bundle_spec, plan = run.params["bundle"], run.plan
        if not plan or bundle_spec is None:
            return []
        target = plan["target"]
        rows, missing = bundle.match(bundle_spec["manifest"], run.items, target, plan, bundle_spec.get("bad") or [])
        plan["sources"] = rows
        dirs, copies = bundle.host_copy(rows, target)
        plan["bundle"] = {"dir": bundle_spec["dir"], "host_dir": bundle_spec["host_dir"], "target": target,
                          "overrides": bundle.overrides(rows, bundle_spec["host_dir"], target),
                          "dirs": dirs, "paths": copies}
        return [{"check": "bundle", "message": message} for message in missing]

    def step_probe(self, run):
        """Each source probed, before anything changes (unless asked not to, or a proxy is malformed)."""
        params, plan = run.params, run.plan
        if not plan or params["bundle"] is not None:
            return []
        if params["probe_sources"] and not run.bad_proxies:
            plan["sources"] = sources.probe(run.items, params["probe_timeout"], self.opener, fetcher=self.fetcher)
        else:
            # Not probed, but a root of trust without TLS or a pinned sha256 is refused all the same.
            plan["sources"] = sources.unprobed(run.items)
        return []

    def step_sources(self, run):
        """A source unreachable or refused, said short: the sources table beside it has the URL and the error."""
        found = []
        for item in (run.plan or {}).get("sources") or []:
            if item["status"] == "refused":
                # The error names the URL and the sha256 variable that would prove it.
                found.append({"check": "sources", "message": "%s: %s is refused: %s" % (
                    item["component"], item["source"], item["error"])})
            elif item["status"] == "unreachable":
                found.append({"check": "sources", "message": (
                    "%s: %s is unreachable: point %s at a mirror (sources table: URL and error)"
                    % (item["component"], item["source"], item["variable"]))})
        return found

    def plan_text(self, run, found, dropped):
        """The plan as a person reads it in the play output: the plan, its problems, sources, builds, warnings."""
        plan, params, bundle_spec = run.plan, run.params, run.params["bundle"]
        text = render_plan(plan, found) if plan else ["no plan: %s" % run.plan_error] + [
            "  - [%s] %s" % (p["check"], p["message"]) for p in found]
        if plan and plan["sources"]:
            how = ("from the offline bundle %s" % bundle_spec["dir"] if bundle_spec is not None else
                   "not probed: a proxy variable is malformed" if run.bad_proxies else
                   "probed" if params["probe_sources"] else "not probed: sparkforge_probe_sources is false")
            text += ["sources (%s):" % how]
            text += ["  " + line for line in sources.table(params["host"].get("name") or "this host", plan["sources"])]
        if plan and plan.get("gpu_builds"):
            text.append("GPU source builds (C++ standard and compiler, checked before anything is fetched):")
            for build in plan["gpu_builds"]:
                text += ["  " + line for line in cxx_std.describe(build, build["arch_list"])]
        text += ["warning: [%s] %s (optional: it is not built, the run goes on)" % (w["check"], w["message"])
                 for w in run.warnings]
        text += ["host trap (warning): %s" % line for line in run.traps["warnings"]]
        if plan and plan["source_build"] and run.build_problems:
            text.append("cannot build from source here (only a builder of its platform class must): %s"
                        % " | ".join(p["message"] for p in run.build_problems))
        if dropped:
            text.append("environment: %s" % run_env.dropped_words(dropped))
        return text

    def compiler(self):
        """(kind, version) of the host's `c++ --version` (the compiler PyTorch's CMake and torch's cpp_extension
        take from the clean build env), ('unknown', '0') when it does not say, None without a c++."""
        cxx = self.system.which("c++")
        if not cxx:
            return None
        rc, out, _err = self.system.run([cxx, "--version"])
        return parse_compiler_version(out if rc == 0 else "") or ("unknown", "0")

    def sudo_works(self):
        """(whether ``sudo -n true`` succeeds for the user the module runs as, why not): read only."""
        sudo = self.system.which("sudo", opt_dirs=["/usr/bin", "/bin", "/usr/sbin"])
        if not sudo:
            return False, "no sudo on this host"
        rc, out, err = self.system.run([sudo, "-n", "true"])
        last = ((err or out or "").strip().splitlines() or ["exit %s" % rc])[-1]
        return rc == 0, last[:200]

    def apply(self, plan):
        """Nothing to apply: stack_plan reads the host and changes nothing."""
        return plan.result
