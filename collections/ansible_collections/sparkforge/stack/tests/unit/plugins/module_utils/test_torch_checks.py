# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""torch_verify's logic without a GPU: the check script's no-torch / no-GPU paths, judging, rendering."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import glob
import json
import os
import sys

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils.verify import png_chart, torch_checks
from ansible_collections.sparkforge.stack.tests.unit.utils.harness import shared_manifest

HERE = os.path.dirname(os.path.abspath(__file__))
COLLECTION = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
FIXTURES = os.path.join(COLLECTION, "tests", "unit", "fixtures", "verify")


def _platforms():
    return copy.deepcopy(shared_manifest()["sparkforge_gpu_platforms"])


def _raw_gpu():
    """A GPU result as the check script prints it (the one captured on the H100 test machine when present)."""
    captured = sorted(glob.glob(os.path.join(FIXTURES, "*.raw.json")))
    if captured:
        with open(captured[0]) as handle:
            return json.load(handle)
    return {
        "schema": 1, "status": "ok", "versions": {"torch": "2.11.0+cu130", "cuda": "13.0", "cudnn": 91900,
                                                  "cusparselt": 800, "nccl": "2.28.9", "triton": "3.6.0"},
        "device": {"name": "NVIDIA H100 80GB HBM3", "capability": "9.0", "sm_count": 132, "memory_bytes": 85e9,
                   "integrated": False, "l2_bytes": 52428800, "count": 1},
        "arch_list": ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"], "warnings": [],
        "checks": [{"name": "gemm_bf16", "status": "pass", "rel_err": 0.003, "tolerance": 0.02, "reference": "f64"},
                   {"name": "sdpa_flash", "status": "pass", "rel_err": 0.004, "tolerance": 0.02, "reference": "math"},
                   {"name": "sdpa_cudnn", "status": "pass", "rel_err": 0.004, "tolerance": 0.02, "reference": "math"},
                   {"name": "gds_cufile", "status": "info", "detail": "not usable"}],
        "benchmarks": [{"group": "gemm", "name": "fp32 8192x8192x8192", "median_ms": 21.5, "tflops": 51.1, "peak_key": "fp32"},
                       {"group": "gemm", "name": "tf32 8192x8192x8192", "median_ms": 2.9, "tflops": 379.1, "peak_key": "tf32"},
                       {"group": "gemm", "name": "bf16 8192x8192x8192", "median_ms": 1.4, "tflops": 785.0, "peak_key": "bf16"},
                       {"group": "sdpa", "name": "flash", "median_ms": 1.9, "tflops": 290.0, "peak_key": "bf16", "backend": "flash"},
                       {"group": "sdpa", "name": "cudnn", "median_ms": 0.93, "tflops": 590.0, "peak_key": "bf16", "backend": "cudnn"},
                       {"group": "memory", "name": "device copy 1024 MiB", "median_ms": 0.74, "gbs": 2900.0, "peak_key": "mem_bw"}],
    }


def _run_script(tmp_path, python_path_dirs=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(python_path_dirs or [])
    raw, _out, _err = torch_checks.run_script(sys.executable, {"benchmarks": True}, 120, env=env)
    return raw


def test_script_without_torch(tmp_path):
    raw = _run_script(tmp_path, [str(tmp_path / "empty")])
    assert raw["status"] == "no_torch" and "torch cannot be imported" in raw["reason"]
    report = torch_checks.evaluate(raw, _platforms(), host="h1")
    assert report["passed"] is False and report["failures"] == [raw["reason"]]


def _fake_torch(tmp_path, cuda_version, device_count):
    """A stand-in for a torch build where no GPU is reachable: the attributes the script reads first."""
    pkg = tmp_path / "stand_in" / "torch"
    (pkg / "backends").mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        "__version__ = '2.11.0+%s'\n"
        "from . import backends, version, cuda\n" % ("cpu" if cuda_version is None else "cu130"))
    (pkg / "version.py").write_text("cuda = %r\n" % cuda_version)
    (pkg / "cuda.py").write_text(
        "def is_available():\n    return %r\n"
        "def device_count():\n    return %d\n" % (device_count > 0, device_count))
    (pkg / "backends" / "__init__.py").write_text("from . import cudnn, cusparselt\n")
    for name in ("cudnn", "cusparselt"):
        (pkg / "backends" / (name + ".py")).write_text("def is_available():\n    return False\n")
    return str(tmp_path / "stand_in")


@pytest.mark.parametrize("cuda,count,reason", [
    (None, 0, "CPU-only build"),
    ("13.0", 0, "sees no GPU"),
])
def test_script_reports_no_gpu(tmp_path, cuda, count, reason):
    raw = _run_script(tmp_path, [_fake_torch(tmp_path, cuda, count)])
    assert raw["status"] == "no_gpu" and reason in raw["reason"]
    assert raw["versions"]["torch"].startswith("2.11.0")
    report = torch_checks.evaluate(raw, _platforms(), host="cpu-box")
    assert not report["passed"]
    md = torch_checks.render_markdown(report)
    assert "No verification ran" in md and reason in md
    paths, renderer = torch_checks.write_reports(report, str(tmp_path / "out"))
    assert png_chart.read_png_size(paths["png"])[0] > 100
    assert json.load(open(paths["json"]))["status"] == "no_gpu"


def test_platform_table_and_matching():
    plats = _platforms()
    assert torch_checks.match_platform("NVIDIA H100 80GB HBM3", plats)[0] == "h100_sxm"
    assert torch_checks.match_platform("NVIDIA H100 PCIe", plats)[0] == "h100_pcie"
    assert torch_checks.match_platform("NVIDIA GH200 480GB", plats)[0] == "gh200"
    assert torch_checks.match_platform("NVIDIA H200", plats)[0] == "h200"
    assert torch_checks.match_platform("NVIDIA GB10", plats)[0] == "gb10"
    assert torch_checks.match_platform("NVIDIA GeForce RTX 5090", plats)[0] == "rtx_5090"
    assert torch_checks.match_platform("NVIDIA B200", plats)[0] == "b200"
    assert torch_checks.match_platform("Tesla T4", plats) == (None, None)
    # Every row with figures is complete; the rows that only classify (a class, no tflops) have no figures at all.
    for key, entry in plats.items():
        if "tflops" not in entry:
            assert entry["class"] and not set(entry) & {"mem_bw_gbs", "sources", "notes"}, key
            continue
        assert set(entry["tflops"]) == {"fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "fp4"}, key
        assert entry["mem_bw_gbs"] > 0
        # every number has the document it comes from, and the row says why figures sit below it
        assert entry["sources"]["tflops"] and entry["sources"]["mem_bw_gbs"], key
        assert isinstance(entry["notes"], list), key
    assert torch_checks.match_platform("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", plats)[0] == \
        "rtx_pro_6000_blackwell"
    assert any("LPDDR5x" in note for note in plats["gb10"]["notes"])


@pytest.mark.parametrize("arch_list,cap,covers,level", [
    (["sm_80", "sm_90", "sm_100", "sm_120"], "12.1", True, "compatible"),
    (["sm_80", "sm_90", "sm_120", "sm_121"], "12.1", True, "native"),
    (["sm_80", "sm_90", "compute_90"], "12.1", True, "jit"),
    (["sm_80", "sm_90"], "12.1", False, "unsupported"),
    (["sm_90a"], "9.0", True, "native"),
])
def test_arch_coverage(arch_list, cap, covers, level):
    cov = torch_checks.arch_coverage(arch_list, cap)
    assert cov["covers"] is covers and cov["level"] == level


def test_evaluate_pass_percentages_and_derived(tmp_path):
    report = torch_checks.evaluate(_raw_gpu(), _platforms(), audit={"verdict": "native", "target": "9.0",
                                                                    "libraries": []}, host="gpu1")
    assert report["passed"], report["failures"]
    assert report["platform"]["key"].startswith("h1") or report["platform"]["key"].startswith("h2")
    gemm = [b for b in report["benchmarks"] if b["group"] == "gemm"]
    assert all(b["pct_of_peak"] for b in gemm)
    assert report["derived"]["tf32_speedup"] > 1
    assert report["derived"]["sdpa_fastest_correct"] in ("cudnn", "flash", "mem_efficient")
    md = torch_checks.render_markdown(report)
    assert "PASS" in md and "% of peak" in md
    # torch_verify adds the venv-wide audit after evaluate(); the report shows its failures and notes.
    venv = {"target": "9.0", "verdict": "unsupported", "packages": {"a": {}, "b": {}}, "seconds": 5.8,
            "failures": ["b has no code for compute capability 9.0: b/_k.so (SASS sm_80, PTX none)"],
            "notes": ["a runs on 9.0 only through the driver's PTX JIT"]}
    assert ("| audit of the venv for 9.0 | unsupported (2 distributions with GPU code, 5.8 s); b has no code for "
            "compute capability 9.0: b/_k.so (SASS sm_80, PTX none); a runs on 9.0 only through the driver's PTX JIT |"
            in torch_checks.render_markdown(dict(report, venv_audit=venv)))
    paths, _renderer = torch_checks.write_reports(report, str(tmp_path))
    width, height = png_chart.read_png_size(paths["png"])
    assert width >= 600 and height > 100
    table = torch_checks.fleet_table([report, dict(report, host="gpu0")])
    assert table.count("| gpu") == 2 and "PASS" in table


def test_evaluate_zero_output_and_coverage_failures():
    raw = _raw_gpu()
    raw = copy.deepcopy(raw)
    raw["checks"].append({"name": "sdpa_mem_efficient", "status": "fail", "rel_err": 1.0, "tolerance": 0.02,
                          "detail": "output norm 0 is less than half the reference's 181 (zeros?)"})
    raw["arch_list"] = ["sm_80"]
    raw["warnings"] = ["Found GPU0 NVIDIA GB10 which is of cuda capability 12.1."]
    raw["device"] = dict(raw["device"], capability="12.1", name="NVIDIA GB10")
    report = torch_checks.evaluate(raw, _platforms(), audit={"verdict": "unsupported", "target": "12.1",
                                                             "libraries": [{"path": "libtorch_cuda.so",
                                                                            "verdict": "unsupported"}]})
    assert not report["passed"]
    assert "sdpa_mem_efficient" in report["failed_checks"]
    assert any("arch list" in f for f in report["failures"])
    assert any("libtorch_cuda.so" in f for f in report["failures"])
    assert report["arch_coverage"]["capability_warning"].startswith("Found GPU0")
    # GB10 has no published dense tensor-core peak: no percentage, no crash (FP32 has one).
    assert all(b["pct_of_peak"] is None for b in report["benchmarks"]
               if b["group"] == "gemm" and b["peak_key"] != "fp32")
    assert report["platform"]["key"] == "gb10" and report["physical_limits"]
    assert report["derived"]["sdpa_fastest_correct"] in ("cudnn", "flash")
    assert "FAIL" in torch_checks.render_markdown(report)


def test_builtin_png_writer(tmp_path):
    path = str(tmp_path / "c.png")
    png_chart.bar_chart(path, "TEST 100%", [("gemm bf16", 79.3, 0), ("copy", 86.0, 1), ("none", None, 2)])
    assert png_chart.read_png_size(path) == (900, 34 + 16 * 3 + 24)
    import zlib
    data = open(path, "rb").read()
    idat = data.index(b"IDAT")
    length = int.from_bytes(data[idat - 4:idat], "big")
    raw = zlib.decompress(data[idat + 4:idat + 4 + length])
    assert len(raw) == (900 * 3 + 1) * (34 + 16 * 3 + 24)
    # Some pixels carry the bar colour.
    assert bytes(png_chart.PALETTE[0]) in raw


def test_parse_output_errors():
    with pytest.raises(torch_checks.VerifyError):
        torch_checks.parse_output("Traceback ...\nSegmentation fault", "boom", 139)
    assert torch_checks.parse_output('noise\n{"status": "ok"}\n')["status"] == "ok"
    with pytest.raises(torch_checks.VerifyError):
        torch_checks.run_script("/nonexistent/python", {}, 10)
