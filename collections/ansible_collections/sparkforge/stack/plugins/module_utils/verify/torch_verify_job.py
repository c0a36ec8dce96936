# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""torch_verify's run, from its parameters to its result: the module is glue around ``VerifyJob``.

``system`` is the seam to the host: ``get_bin_path(name)`` and ``run_command(argv)`` as AnsibleModule has
them (the module passes itself); ``runner`` runs the check script (torch_checks.run_script by default), so
unit tests drive the whole run with a recorded GPU result where no GPU can be reached.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import platform as pyplatform
import time

from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import LocalSystem
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import fatbin
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import ptx_isa
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import elf_links, smoke
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import gpu_audit
from ansible_collections.sparkforge.stack.plugins.module_utils.verify import multi_gpu
from ansible_collections.sparkforge.stack.plugins.module_utils.verify.torch_checks import (
    VerifyError,
    evaluate,
    report_paths,
    run_script,
    unknown_groups,
    write_reports,
)

# torch_verify's options (its DOCUMENTATION describes them); unit tests build their parameters from it.
ARGUMENT_SPEC = dict(
    python=dict(type="path", required=True),
    report_dir=dict(type="path"),
    report_name=dict(type="str", default="verify"),
    host_label=dict(type="str"),
    # The groups are the check script's (torch_check_script.check_groups()); VerifyJob.validate refuses others.
    checks=dict(type="list", elements="str"),
    benchmarks=dict(type="bool", default=True),
    extended_benchmarks=dict(type="bool", default=True),
    bench_scale=dict(type="float", default=1.0),
    gemm_size=dict(type="int", default=8192),
    audit=dict(type="bool", default=True),
    venv_audit=dict(type="bool", default=True),
    venv_audit_exempt=dict(type="dict", default={}),
    ptx_isa=dict(type="dict"),
    smoke_matrix=dict(type="dict", default={}),
    platforms=dict(type="dict", default={}),
    env=dict(type="dict", default={}),
    timeout=dict(type="int", default=900),
    fail_on_failure=dict(type="bool", default=True),
    gpus=dict(type="list", elements="int"),
    collectives=dict(type="bool", default=True),
    collective_sizes=dict(type="list", elements="int"),
    collective_iters=dict(type="int", default=20),
    inject_failure=dict(type="dict"),
    acceptance=dict(type="dict"),
)


class VerifyJob:
    """One host's verify: the check script on the selected GPUs, the audits, the report and its verdict."""

    def __init__(self, params, system, check_mode=False, runner=None):
        self.params = params
        self.system = system
        self.check_mode = check_mode
        self.runner = runner or run_script

    def validate(self):
        """Refuse bad parameters before anything runs (check mode too)."""
        params = self.params
        problem = unknown_groups(params["checks"])
        if problem:
            raise VerifyError(problem)
        if params["bench_scale"] <= 0:
            raise VerifyError("bench_scale must be positive")
        if params["inject_failure"] and "gpu" not in params["inject_failure"]:
            raise VerifyError("inject_failure needs a 'gpu' index (and optionally 'check'); it is for tests only")

    def config(self):
        """The check script's config: in check mode versions and the device only."""
        params = self.params
        if self.check_mode:
            return {"checks": ["none"], "benchmarks": False}
        return {"checks": params["checks"] or [], "benchmarks": params["benchmarks"],
                "extended_benchmarks": params["extended_benchmarks"],
                "bench_scale": params["bench_scale"], "gemm_size": params["gemm_size"]}

    def gpu_count(self):
        """Visible GPUs by nvidia-smi (0 when it is missing or lists none: the check script says why)."""
        smi = self.system.get_bin_path("nvidia-smi")
        if not smi:
            return 0
        rc, out, _err = self.system.run_command([smi, "--query-gpu=index", "--format=csv,noheader"])
        return len([line for line in out.splitlines() if line.strip().isdigit()]) if rc == 0 else 0

    def collectives(self, indices, env):
        """NCCL collectives across the selected GPUs, against the link peak nvidia-smi reports."""
        params = self.params
        if not params["collectives"]:
            return {"skipped": "collectives disabled (collectives: false)"}
        if len(indices) < 2:
            return {"skipped": "one GPU: there is nothing to run a collective between"}
        smi = self.system.get_bin_path("nvidia-smi")
        nvlink = pcie = {}
        if smi:
            rc, out, _err = self.system.run_command([smi, "nvlink", "-s"])
            nvlink = multi_gpu.parse_nvlink_status(out) if rc == 0 else {}
            rc, out, _err = self.system.run_command([smi, "--query-gpu=index,pcie.link.gen.current,"
                                                     "pcie.link.width.current", "--format=csv,noheader,nounits"])
            pcie = multi_gpu.parse_pcie(out) if rc == 0 else {}
        peak = multi_gpu.link_peak(indices, nvlink, pcie)
        raw = multi_gpu.run_collectives(params["python"], indices, params["timeout"], env=env,
                                        sizes=params["collective_sizes"], iters=params["collective_iters"])
        return multi_gpu.evaluate_collectives(raw, len(indices), peak)

    def checks(self, config, env):
        """(raw result of the first GPU, per-GPU merge, collectives, stderr): the script on every selected GPU."""
        params = self.params
        count = self.gpu_count()
        try:
            indices = multi_gpu.select_gpus(params["gpus"], count) if count else []
        except multi_gpu.MultiGpuError as exc:
            raise VerifyError(str(exc))
        if indices and params["gpus"]:
            # The first selected GPU becomes cuda:0 of the main run (checks and benchmarks).
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in indices)
        try:
            raw, _stdout, stderr = self.runner(params["python"], dict(config, gpu_index=indices[0] if indices else 0),
                                               params["timeout"], env=env)
            raw["gpu_index"] = indices[0] if indices else 0
            per_gpu = collectives = None
            if raw.get("status") == "ok" and not self.check_mode and indices:
                # The other GPUs' functional checks run in parallel, after the benchmarks of the first
                # (benchmark timings are not shared with other work on the host).
                raws = [raw] + multi_gpu.run_per_gpu(self.runner, params["python"], config, params["timeout"], env,
                                                     indices[1:])
                multi_gpu.inject_failure(raws, params["inject_failure"])
                per_gpu = multi_gpu.merge_per_gpu(raws)
                collectives = self.collectives(indices, env)
        except multi_gpu.MultiGpuError as exc:
            raise VerifyError(str(exc))
        return raw, per_gpu, collectives, stderr

    def ptx_limit(self, raw):
        """What PTX the driver torch ran on loads (the check script's cuDriverGetVersion against ptx_isa), or None."""
        if not self.params.get("ptx_isa"):
            return None
        cuda = None
        if raw.get("driver_cuda_version"):
            cuda = ptx_isa.driver_int_cuda(raw["driver_cuda_version"])
        try:
            return ptx_isa.driver_limit(cuda, self.params["ptx_isa"])
        except ptx_isa.PtxIsaError as exc:
            raise VerifyError("ptx_isa: %s" % exc)

    def audits(self, raw):
        """(torch/lib audit, venv audit) for the device, each None where it is off or nothing ran."""
        params = self.params
        ran = raw.get("status") == "ok" and raw.get("torch_lib_dir") and not self.check_mode
        audit = venv_result = None
        limit = self.ptx_limit(raw) if ran else None
        isa_max = (limit or {}).get("ptx_isa_max")
        if params["audit"] and ran:
            try:
                audit = fatbin.audit(raw["torch_lib_dir"], target=raw["device"]["capability"], ptx_isa_max=isa_max)
                audit["driver"] = limit
                audit["ptx_refusals"] = [ptx_isa.refusal(lib["path"], lib["ptx_refused"], limit)
                                         for lib in audit["libraries"] if lib.get("ptx_refused")]
                for lib in audit["libraries"]:
                    lib.pop("cuobjdump_elf", None)
                    lib.pop("cuobjdump_ptx", None)
            except (fatbin.FatbinError, OSError) as exc:
                audit = {"verdict": None, "error": str(exc), "libraries": [], "target": raw["device"]["capability"]}
        if params["venv_audit"] and ran:
            # torch_lib_dir is <site-packages>/torch/lib: every distribution beside torch is audited too.
            site_dir = os.path.dirname(os.path.dirname(raw["torch_lib_dir"]))
            started = time.time()
            try:
                # What each GPU library links is held to this host: the toolkit CUDA_HOME names, the loader's
                # directories, the venv's torch and nvidia-* wheels.
                links = elf_links.HostLinks((params["env"] or {}).get("CUDA_HOME"), site_dir)
                venv_result = gpu_audit.venv_audit(site_dir, raw["device"]["capability"],
                                                   params["venv_audit_exempt"], links, limit)
            except (fatbin.FatbinError, OSError) as exc:
                venv_result = {"verdict": None, "error": str(exc), "packages": {}, "failures": [],
                               "target": raw["device"]["capability"]}
            venv_result["seconds"] = round(time.time() - started, 2)
        return audit, venv_result

    def smoke_tests(self, raw, env):
        """The smoke test of every package of ``smoke_matrix`` installed in the venv (a distribution of that name in
        site-packages), each run once with the venv's Python; skipped, saying why, where torch sees no GPU."""
        matrix = self.params["smoke_matrix"] or {}
        if not matrix or not raw.get("torch_lib_dir"):
            return []
        site_dir = os.path.dirname(os.path.dirname(raw["torch_lib_dir"]))
        installed = set(gpu_audit.canonical(name) for name in gpu_audit.record_distributions(site_dir))
        results = []
        for name in sorted(matrix):
            spec = (matrix[name] or {}).get("smoke")
            if not spec or gpu_audit.canonical(name) not in installed:
                continue
            try:
                spec = smoke.validate(name, spec)
            except smoke.SmokeError as exc:
                results.append({"package": name, "op": "-", "status": "failed", "error": str(exc), "reason": ""})
                continue
            # The module's system runs argv without an environment of its own: the test gets verify's env.
            results.append(smoke.run(LocalSystem(), self.params["python"], name, spec, env))
        return results

    def run(self):
        """(result, failure): the module's result, and the message to fail with (None when it passes)."""
        self.validate()
        params = self.params
        env = dict((str(k), str(v)) for k, v in params["env"].items())
        raw, per_gpu, collectives, stderr = self.checks(self.config(), env)
        audit, venv_result = self.audits(raw)
        report = evaluate(raw, params["platforms"], audit=audit, host=params["host_label"] or pyplatform.node(),
                          per_gpu=per_gpu, collectives=collectives, acceptance=params["acceptance"])
        if venv_result is not None:
            report["venv_audit"] = venv_result
            if venv_result["failures"]:
                report["failures"] = report["failures"] + venv_result["failures"]
                report["failed_checks"] = report["failed_checks"] + ["venv_audit"]
                report["passed"] = False
                report["summary"] += "; %d package(s) in the venv without code for this GPU or unable to load" % len(
                    venv_result["failures"])
        smoke_results = self.smoke_tests(raw, env) if not self.check_mode else []
        if smoke_results:
            report["smoke"] = smoke_results
            failed = [smoke.message(r) for r in smoke_results if r["status"] == "failed"]
            if failed:
                report["failures"] = report["failures"] + failed
                report["failed_checks"] = report["failed_checks"] + ["smoke"]
                report["passed"] = False
                report["summary"] += "; %d package smoke test(s) failed" % len(failed)
        if self.check_mode:
            report["failures"] = [f for f in report["failures"] if raw.get("status") != "ok"]
            report["summary"] = "check mode: versions and device only"
        report_files = {}
        renderer = None
        changed = False
        if params["report_dir"] and self.check_mode:
            # Every real run writes a new report: check mode says so, and where (nothing is written).
            report_files, changed = report_paths(params["report_dir"], params["report_name"]), True
        elif params["report_dir"]:
            report_files, renderer = write_reports(report, params["report_dir"], params["report_name"])
            changed = True
        result = dict(
            changed=changed,
            status=raw.get("status"),
            passed=report["passed"] if not self.check_mode else raw.get("status") == "ok",
            summary=report["summary"],
            failures=report["failures"],
            failed_checks=report["failed_checks"],
            versions=raw.get("versions", {}),
            device=raw.get("device"),
            arch_list=raw.get("arch_list", []),
            arch_coverage=report.get("arch_coverage"),
            audit_verdict=(audit or {}).get("verdict"),
            venv_audit=venv_result,
            checks=raw.get("checks", []),
            benchmarks=raw.get("benchmarks", []),
            derived=report.get("derived"),
            platform=report.get("platform"),
            report_files=report_files,
            png_renderer=renderer,
            script_stderr_tail=stderr[-2000:] if stderr else "",
            per_gpu=per_gpu,
            collectives=collectives,
            acceptance=report.get("acceptance"),
            smoke=smoke_results,
        )
        failure = None
        if not self.check_mode and params["fail_on_failure"] and not report["passed"]:
            failure = "verification failed on %s: %s" % (report["host"], "; ".join(report["failures"]))
        return result, failure
