# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""torch_verify's run (VerifyJob) driven directly: bad input refused before the script runs, a GPU result
judged and reported, check mode naming the report it would write; and the check groups' one list (the
check script's @check functions) that the module and the role take their names from."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import shutil
import subprocess
import sys
import time

import pytest
import yaml

from ansible_collections.sparkforge.stack.plugins.module_utils.verify import torch_check_script, torch_checks
from ansible_collections.sparkforge.stack.plugins.module_utils.verify.torch_verify_job import ARGUMENT_SPEC, VerifyJob

HERE = os.path.dirname(os.path.abspath(__file__))
COLLECTION = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))


class Host:
    """This machine as the module's system: its PATH and its commands, run for real."""

    @staticmethod
    def get_bin_path(name):
        return shutil.which(name)

    @staticmethod
    def run_command(argv):
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              check=False)
        return proc.returncode, proc.stdout, proc.stderr


class RecordedGpu:
    """The check script's side on a GPU we cannot reach here: returns a result as the script prints it."""

    def __init__(self, raw):
        self.raw = raw
        self.calls = []

    def __call__(self, python, config, timeout, env=None):
        self.calls.append(config)
        return dict(self.raw), "", "a warning on stderr"


def params(**given):
    out = dict((name, spec.get("default")) for name, spec in ARGUMENT_SPEC.items())
    out.update(python=sys.executable, **given)
    return out


def _platforms():
    with open(os.path.join(COLLECTION, "roles", "manifest", "defaults", "main", "platforms.yml")) as handle:
        return yaml.safe_load(handle)["sparkforge_gpu_platforms"]


def _raw(bf16_status="pass"):
    return {"schema": 1, "status": "ok", "versions": {"torch": "2.11.0+cu130", "cuda": "13.0"},
            "device": {"name": "NVIDIA H100 80GB HBM3", "capability": "9.0", "sm_count": 132, "memory_bytes": 85e9,
                       "integrated": False, "count": 1},
            "arch_list": ["sm_80", "sm_90"], "warnings": [],
            "checks": [{"name": "gemm_bf16", "status": bf16_status, "rel_err": 0.003, "tolerance": 0.02,
                        "reference": "f64", "detail": "ok" if bf16_status == "pass" else "output has NaN/Inf"}],
            "benchmarks": [{"group": "gemm", "name": "bf16 8192x8192x8192", "median_ms": 1.4, "tflops": 785.0,
                            "peak_key": "bf16"}]}


@pytest.mark.parametrize("given, message", [
    ({"checks": ["gemm", "bogus"]}, "checks: unknown check group(s) 'bogus' (known: gemm, fp8, sdpa, "),
    ({"bench_scale": 0.0}, "bench_scale must be positive"),
    ({"inject_failure": {"check": "gemm_bf16"}}, "inject_failure needs a 'gpu' index"),
])
def test_bad_input_is_refused_before_the_script_runs(tmp_path, given, message):
    runner = RecordedGpu(_raw())
    for check_mode in (False, True):
        with pytest.raises(torch_checks.VerifyError) as err:
            VerifyJob(params(report_dir=str(tmp_path / "r"), **given), Host(), check_mode, runner).run()
        assert message in str(err.value)
    assert runner.calls == [] and not (tmp_path / "r").exists()


def test_a_gpu_result_is_judged_against_the_peak_row_and_reported(tmp_path):
    runner = RecordedGpu(_raw())
    result, failure = VerifyJob(params(report_dir=str(tmp_path), host_label="h1", platforms=_platforms(),
                                       checks=["gemm"], bench_scale=0.5), Host(), False, runner).run()
    assert failure is None and result["passed"] and result["changed"]
    assert runner.calls[0]["checks"] == ["gemm"] and runner.calls[0]["bench_scale"] == 0.5
    assert result["platform"]["key"] == "h100_sxm" and result["benchmarks"][0]["pct_of_peak"] == 79.3
    assert sorted(os.listdir(str(tmp_path))) == ["verify.json", "verify.md", "verify.png"]
    assert result["script_stderr_tail"] == "a warning on stderr"


def test_a_failing_check_fails_with_the_check_named(tmp_path):
    result, failure = VerifyJob(params(host_label="h1"), Host(), False, RecordedGpu(_raw("fail"))).run()
    assert failure == "verification failed on h1: gemm_bf16: output has NaN/Inf"
    assert result["failed_checks"] == ["gemm_bf16"] and result["changed"] is False
    result, failure = VerifyJob(params(host_label="h1", fail_on_failure=False), Host(), False,
                                RecordedGpu(_raw("fail"))).run()
    assert failure is None and result["passed"] is False


def test_check_mode_reads_the_device_only_and_names_the_report(tmp_path):
    runner = RecordedGpu(dict(_raw(), checks=[], benchmarks=[]))
    result, failure = VerifyJob(params(report_dir=str(tmp_path / "r")), Host(), True, runner).run()
    assert runner.calls == [{"checks": ["none"], "benchmarks": False, "gpu_index": 0}]
    assert failure is None and result["changed"] and not (tmp_path / "r").exists()
    assert result["report_files"]["json"] == str(tmp_path / "r" / "verify.json")
    assert result["summary"] == "check mode: versions and device only"


def test_the_check_groups_are_the_scripts_check_functions_in_file_order():
    with open(torch_check_script.__file__) as handle:
        decorated = re.findall(r'^@check\("(\w+)"\)', handle.read(), re.MULTILINE)
    assert decorated and torch_check_script.check_groups() == tuple(decorated)
    assert torch_checks.CHECK_GROUPS == torch_check_script.check_groups()
    # No copy elsewhere: the module documents where the list is instead of repeating it.
    with open(os.path.join(COLLECTION, "plugins", "modules", "torch_verify.py")) as handle:
        module = handle.read()
    assert "choices: [gemm" not in module and "choices" not in ARGUMENT_SPEC["checks"]


def test_the_script_text_is_this_file_and_runs_as_a_program(tmp_path):
    with open(torch_check_script.__file__) as handle:
        assert torch_checks.script_source() == handle.read()
    raw, _out, _err = torch_checks.run_script(sys.executable, {"benchmarks": True}, 120,
                                              env={"PYTHONPATH": str(tmp_path)})
    assert raw["status"] == "no_torch" and raw["schema"] == 1


def test_the_script_runs_with_its_nvml_sampler_beside_it(tmp_path):
    """The host's python cannot import the collection: run_script writes the check script and its NVML sampler into
    one directory, and the script loads the sampler from beside itself (by path, not through sys.path)."""
    seen = tmp_path / "seen"
    python = tmp_path / "python"
    # The venv's python is the boundary: this one lists the directory the script was written to, then answers.
    python.write_text("#!/bin/sh\nls \"$(dirname \"$1\")\" > %s\necho '{\"schema\": 1, \"status\": \"no_torch\"}'\n"
                      % seen)
    python.chmod(0o755)
    raw, _out, _err = torch_checks.run_script(str(python), {}, 60)
    assert raw["status"] == "no_torch"
    assert seen.read_text().split() == ["nvml_sampler.py", "torch_check_script.py"]
    # As the host loads it: from the file beside the script, with no GPU library here the sampler says why.
    sampler = torch_check_script._sampler()(None, 0.05)
    sampler.stop()
    assert sampler.info["available"] is False and sampler.error, sampler.info


def test_the_sampler_reads_nvml_in_its_thread(tmp_path, monkeypatch):
    """With an NVML that answers (a stand-in pynvml: NVML is the boundary, the GPU's driver), the sampler loaded as
    the host loads it records the device's limits and samples [time, SM MHz, memory MHz, W, C, reasons]."""
    (tmp_path / "pynvml.py").write_text(
        "NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 0, 1, 0, 1\n"
        "def nvmlInit(): pass\n"
        "def nvmlDeviceGetHandleByUUID(uuid): return 'gpu0'\n"
        "def nvmlDeviceGetHandleByIndex(index): return 'gpu0'\n"
        "def nvmlDeviceGetCurrentClocksEventReasons(handle): return 4\n"
        "def nvmlDeviceGetEnforcedPowerLimit(handle): return 700000\n"
        "def nvmlDeviceGetPowerManagementDefaultLimit(handle): return 700000\n"
        "def nvmlDeviceGetMaxClockInfo(handle, kind): return 1980 if kind == 0 else 2619\n"
        "def nvmlDeviceGetTemperatureThreshold(handle, kind): return 90\n"
        "def nvmlSystemGetDriverVersion(): return b'580.65.06'\n"
        "def nvmlDeviceGetClockInfo(handle, kind): return 1755 if kind == 0 else 2619\n"
        "def nvmlDeviceGetPowerUsage(handle): return 650500\n"
        "def nvmlDeviceGetTemperature(handle, kind): return 61\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sampler = torch_check_script._sampler()("GPU-1234", 0.01)
    try:
        deadline = time.time() + 10
        while len(sampler.samples) < 2 and time.time() < deadline:
            time.sleep(0.01)
    finally:
        sampler.stop()
        sampler._thread.join(5)
    assert sampler.error is None and sampler.info["available"] and sampler.info["driver"] == "580.65.06"
    assert sampler.info["power_limit_w"] == 700.0 and sampler.info["max_sm_mhz"] == 1980
    assert sampler.samples[0][1:] == [1755, 2619, 650.5, 61, 4]
    assert sampler.window(0, time.time() + 1) == sampler.samples
