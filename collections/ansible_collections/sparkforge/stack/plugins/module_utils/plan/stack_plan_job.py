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


class StackPlanJob(Job):
    """params: stack_plan's options, with ``facts`` and ``host`` filled (gathered by the module when
    asked); opener(url, timeout) -> None or why not, fetcher(url, timeout, limit) -> (bytes, why not)."""

    def __init__(self, params, system, check_mode=False, opener=None, fetcher=None):
        Job.__init__(self, params, system, check_mode)
        self.opener = opener
        self.fetcher = fetcher

    def plan(self):
        params = self.params
        bundle_spec = params["bundle"]
        check_bundle(bundle_spec)
        params["sources"] = sources.fill_platform_names(params["sources"], params["host"], params["platform_maps"])
        missing = [k for k in REQUIRED_CHECKS if k not in params["checks"]]
        missing += [k for k in REQUIRED_MANIFEST if k not in params["manifest"]]
        if missing:
            raise JobError("stack_plan is missing %s" % ", ".join(missing))
        if "gpus" not in params["facts"]:
            raise JobError("facts must be the ansible_facts.sparkforge dict of sparkforge.stack.gpu_facts")

        checks = dict(params["checks"])
        plan = None
        plan_error = None
        settings = dict(params["settings"])
        settings.setdefault("python_version", params["host"].get("python_version"))
        if settings.get("torch_source") == "existing" and settings.get("venv"):
            read, unread = installed_archs(self.system, settings["venv"])
            settings.update(installed_archs=read, installed_archs_unread=unread)
        try:
            plan = build_plan(params["facts"], settings, params["manifest"])
        except PlanError as exc:
            plan_error = str(exc)
        # The host is judged as an installer of wheels; whether it can also build them (the source-build
        # RAM/disk thresholds) is a separate verdict: in a fleet only one host per platform class builds,
        # and the fleet planning fails a class none of whose hosts can (a single host is its own builder).
        checks["source_build"] = False
        # Each place that grows, measured on its own file system against what the plan puts there.
        places, needs = checks.get("disk_places") or [], params["manifest"].get("sparkforge_disk_needs_gib")
        checks["disk_places"] = growing_places(plan, places, needs)
        found = problems(params["facts"], params["host"], checks)
        build_problems = [p for p in problems(params["facts"], params["host"], dict(
            checks, source_build=True, disk_places=growing_places(plan, places, needs, building=True)))
            if p["check"] in ("ram", "disk")]
        compiler, warnings = "unasked", []
        # Who runs it: the components that need root, against the user the module runs as.
        found += root_problems((plan or {}).get("actions"), params["facts"].get("user"),
                               params["manifest"].get("sparkforge_root_needs"), self.sudo_works)
        if plan and plan["source_build"]:
            compiler = self.compiler()
            release = params["manifest"]["sparkforge_torch_releases"][plan["torch"]["version"]]
            build_problems += compiler_problems(plan["torch"]["version"], release,
                                                params["manifest"].get("sparkforge_cxx_min_compilers"), compiler)
        if plan_error:
            found.append({"check": "plan", "message": plan_error})
        gpu_items = gpu_source_builds(params["facts"], settings, params["manifest"]) if plan else []
        if gpu_items:
            # Each GPU source build's C++ standard against the torch of the plan, and the compiler for it: from
            # data, before anything is fetched or built (the sdist is read again once the role fetches it).
            compiler = self.compiler() if compiler == "unasked" else compiler
            plan["gpu_builds"], cxx_problems, warnings = cxx_builds(gpu_items, settings, plan, params["manifest"],
                                                                    compiler)
            found += cxx_problems
        if plan and settings.get("venv") and settings.get("torch_source") == "existing" and \
                "pytorch" in (settings.get("components") or []):
            found += existing_torch_problems(settings["venv"], venv_torch_version(settings["venv"]),
                                             plan["torch"]["version"])
        # Known-bad kernels, driver flavours and host settings (the manifest's sparkforge_host_traps), read from the
        # files the kernel and driver write, before anything changes.
        traps = host_trap_check(params.get("host_traps"), params["facts"])
        found += traps["problems"]
        # A malformed proxy is named as such (a probe through it would blame each mirror instead).
        bad_proxies = sources.proxy_problems(os.environ)
        found += [{"check": "proxy", "message": message} for message in bad_proxies]
        if plan and bundle_spec is None and (plan.get("actions") or {}).get("pytorch") == "install" \
                and (plan.get("torch") or {}).get("source") == "wheelhouse":
            # What pip would install from the wheelhouse: valid wheels for this host's Python and CPU.
            wanted = {"torch": plan["torch"]["version"]}
            if (plan.get("actions") or {}).get("torch_domains") == "install":
                wanted.update(torchvision=plan.get("torchvision"), torchaudio=plan.get("torchaudio"))
            if (plan.get("actions") or {}).get("triton") == "install":
                wanted["triton"] = (plan.get("triton") or {}).get("version")
            variable = (params["sources"].get("variables") or {}).get("wheelhouse") or "sparkforge_wheel_dir"
            # pip matches the wheels' tags against the venv's Python, which may not be the one Ansible runs.
            python_version = venv_python_version(self.system, settings.get("venv"), settings.get("venv_python"))[0]
            found += [{"check": "wheelhouse", "message": message} for message in wheel_check.wheelhouse_problems(
                params["sources"].get("wheelhouse"), wanted, python_version or params["host"].get("python_version")
                or "", params["host"].get("architecture") or "", variable, params["host"].get("glibc"))]
        if plan:
            plan["cuda_distro"] = params["sources"].get("cuda_distro") or ""
            apt_components = [c for c in ("cuda_libs", "cusparselt") if plan["actions"].get(c) == "install"]
            if apt_components and not plan["cuda_distro"] and params["host"].get("distribution"):
                host = params["host"]
                found.append({"check": "cuda_distro", "message": (
                    "sparkforge_cuda_distro_map has no NVIDIA repository for %s %s (tried %s; it knows %s), which %s "
                    "install from: add an entry (e.g. '%s: ubuntu2404' if that repository fits) or set cuda_libs_distro"
                    % (host.get("distribution"), host.get("distribution_version"),
                       ", ".join(cuda_distro_keys(host.get("distribution"), host.get("distribution_version"))),
                       ", ".join(sorted((params["platform_maps"].get("cuda_distro_map") or {}))) or "nothing",
                       " and ".join(apt_components),
                       cuda_distro_keys(host.get("distribution"), host.get("distribution_version"))[-1]))})
            # Every remote source the plan will fetch from, probed before anything changes.
            items = sources.plan_sources(plan, params["sources"], params["host"])
            # What picks the host's apt repository, cuSPARSELt installer and wheels in an offline bundle.
            try:
                target = bundle.target_of(dict(params["sources"], **params["host"]))
            except bundle.BundleError as exc:
                target = None
                if bundle_spec is not None:
                    raise JobError("bundle: %s" % exc)
            plan["target"] = target
            if bundle_spec is not None:
                # An offline bundle replaces every source: nothing is probed, each must be in the bundle.
                rows, missing = bundle.match(bundle_spec["manifest"], items, target, plan, bundle_spec.get("bad") or [])
                plan["sources"] = rows
                dirs, copies = bundle.host_copy(rows, target)
                plan["bundle"] = {"dir": bundle_spec["dir"], "host_dir": bundle_spec["host_dir"], "target": target,
                                  "overrides": bundle.overrides(rows, bundle_spec["host_dir"], target),
                                  "dirs": dirs, "paths": copies}
                for message in missing:
                    found.append({"check": "bundle", "message": message})
            elif params["probe_sources"] and not bad_proxies:
                probed = sources.probe(items, params["probe_timeout"], self.opener, fetcher=self.fetcher)
            else:
                # Not probed, but a root of trust without TLS or a pinned sha256 is refused all the same.
                probed = sources.unprobed(items)
            if bundle_spec is None:
                plan["sources"] = probed
            for item in plan["sources"]:
                if item["status"] in ("unreachable", "refused"):
                    # Short: the sources table beside it has the URL and the error.
                    if item["status"] == "refused":
                        # The error names the URL and the sha256 variable that would prove it.
                        message = "%s: %s is refused: %s" % (item["component"], item["source"], item["error"])
                    else:
                        message = "%s: %s is unreachable: point %s at a mirror (sources table: URL and error)" % (
                            item["component"], item["source"], item["variable"])
                    found.append({"check": "sources", "message": message})
        text = render_plan(plan, found) if plan else ["no plan: %s" % plan_error] + [
            "  - [%s] %s" % (p["check"], p["message"]) for p in found]
        if plan and plan["sources"]:
            text += ["sources (%s):" % ("from the offline bundle %s" % bundle_spec["dir"] if bundle_spec is not None else
                                        "not probed: a proxy variable is malformed" if bad_proxies else
                                        "probed" if params["probe_sources"] else
                                        "not probed: sparkforge_probe_sources is false")]
            text += ["  " + line for line in sources.table(params["host"].get("name") or "this host", plan["sources"])]
        if plan and plan.get("gpu_builds"):
            text.append("GPU source builds (C++ standard and compiler, checked before anything is fetched):")
            for build in plan["gpu_builds"]:
                text += ["  " + line for line in cxx_std.describe(build, build["arch_list"])]
        text += ["warning: [%s] %s (optional: it is not built, the run goes on)" % (w["check"], w["message"])
                 for w in warnings]
        text += ["host trap (warning): %s" % line for line in traps["warnings"]]
        if plan and plan["source_build"] and build_problems:
            text.append("cannot build from source here (only a builder of its platform class must): %s"
                        % " | ".join(p["message"] for p in build_problems))
        # The host's PYTHON*/PIP_* variables the run's python and pip go without (the system made the
        # environment its own: _common/run_env.py), said once in the plan.
        dropped = list(getattr(self.system, "environment_dropped", None) or [])
        if dropped:
            text.append("environment: %s" % run_env.dropped_words(dropped))
        result = dict(changed=False, plan=plan, problems=found, plan_text=text, ready=not found,
                      build_warnings=[w["message"] for w in warnings],
                      can_build=not build_problems, build_problems=build_problems,
                      environment_dropped=dropped, host_traps=traps["report"])
        return Plan([], result)

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
