# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 27: clocks, power and flags per benchmark figure, the peak row, the side-by-side table; no GPU.

The NVML windows are recorded ones (H100 80GB HBM3, bench/gpu/verify_diag.py, 20 ms samples): verify's
bf16 GEMM before the fix (power-capped, SM clock 1185 MHz), a plain tf32 GEMM on a cool GPU (no reason
set) and a sustained bf16 load (power-capped at about 1.4 GHz)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os


from ansible_collections.sparkforge.stack.plugins.module_utils.verify import gpu_clocks, png_chart, torch_checks
from ansible_collections.sparkforge.stack.tests.unit.utils.harness import shared_manifest

HERE = os.path.dirname(os.path.abspath(__file__))
COLLECTION = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
with open(os.path.join(COLLECTION, "tests", "unit", "fixtures", "verify", "h100-nvml-windows.json")) as _handle:
    REC = json.load(_handle)
INFO = REC["info"]


def _platforms():
    return copy.deepcopy(shared_manifest()["sparkforge_gpu_platforms"])


def _gemm(tflops, samples, spread=0.02, name="bf16 8192x8192x8192", key="bf16"):
    return {"group": "gemm", "name": name, "median_ms": 2.0 * 8192 ** 3 / tflops / 1e9, "tflops": tflops,
            "peak_key": key, "timing": {"t0": 0, "t1": 1, "chunk_spread": spread}, "nvml_samples": copy.deepcopy(samples)}


def _names(flags):
    return [f["flag"] for f in flags]


def test_reason_names():
    assert gpu_clocks.reason_names(0) == []
    assert gpu_clocks.reason_names(0x4) == ["sw_power_cap"]
    assert gpu_clocks.reason_names(0x1 | 0x40) == ["gpu_idle", "hw_thermal_slowdown"]
    assert gpu_clocks.reason_names(0x4 | 0x10000) == ["sw_power_cap", "0x10000"]


def test_summarise_recorded_power_capped_window():
    summary = gpu_clocks.summarise(REC["sustained_bf16"]["samples"], INFO)
    assert summary["reasons"] == ["sw_power_cap"]
    assert 1200 <= summary["sm_mhz"]["median"] <= 1500 and summary["sm_pct_of_max"] < 80
    assert summary["power_limit_w"] == 700.0 and summary["power_pct_of_limit"] > 95
    assert summary["mem_mhz"] == 2619 and summary["temp_c"]["max"] < 80


def test_not_throttled_cool_gpu():
    samples = REC["plain_tf32_cool"]["samples"]
    summary = gpu_clocks.summarise(samples, INFO)
    assert summary["reasons"] == [] and summary["sm_mhz"]["median"] >= 1900
    item = _gemm(REC["plain_tf32_cool"]["tflops"], samples, name="tf32 8192x8192x8192", key="tf32")
    flags = gpu_clocks.judge(item, summary, INFO, peak=494.7)
    assert flags == []


def test_power_capped_is_a_note_with_the_clock_and_limit():
    samples = REC["sustained_bf16"]["samples"]
    summary = gpu_clocks.summarise(samples, INFO)
    flags = gpu_clocks.judge(_gemm(REC["sustained_bf16"]["tflops"], samples), summary, INFO, peak=989.4)
    assert _names(flags) == ["power_capped"]
    assert flags[0]["severity"] == "note"
    assert "700 W power limit" in flags[0]["detail"] and "of max 1980" in flags[0]["detail"]


def test_throttled_thermal_is_a_warning():
    samples = [s[:5] + [s[5] | 0x40] for s in REC["sustained_bf16"]["samples"]]  # the same window, HW thermal bit set
    summary = gpu_clocks.summarise(samples, INFO)
    flags = gpu_clocks.judge(_gemm(REC["sustained_bf16"]["tflops"], samples), summary, INFO, peak=989.4)
    assert _names(flags) == ["throttled", "power_capped"]
    assert flags[0]["severity"] == "warn" and "hw_thermal_slowdown" in flags[0]["detail"]
    # a reason seen in fewer than reason_share of the samples is not counted
    few = [s[:5] + [s[5] | (0x20 if i == 0 else 0)] for i, s in enumerate(REC["sustained_bf16"]["samples"])]
    assert "sw_thermal_slowdown" not in gpu_clocks.summarise(few, INFO)["reasons"]


def test_missing_nvml():
    item = _gemm(700.0, [])
    assert gpu_clocks.summarise(item["nvml_samples"], INFO) is None
    flags = gpu_clocks.judge(item, None, {}, peak=989.4, nvml_error="ModuleNotFoundError: No module named 'pynvml'")
    assert _names(flags) == ["no_clocks"] and "pynvml" in flags[0]["detail"]
    # NVML answered, but no sample fell in the window (a figure shorter than the sampling interval)
    flags = gpu_clocks.judge(item, None, dict(INFO), peak=989.4)
    assert _names(flags) == ["no_clocks"] and "window" in flags[0]["detail"]
    # the report says why there are no clocks at all
    limits = torch_checks.physical_limits({}, [item], {"available": False, "error": "NVMLError_LibraryNotFound"})
    assert any("NVMLError_LibraryNotFound" in line for line in limits)


def test_low_for_its_clock_and_unsteady():
    samples = REC["sustained_bf16"]["samples"]
    summary = gpu_clocks.summarise(samples, INFO)
    # 300 TFLOP/s at ~1.4 GHz is far below what that clock allows (989.4 x 1400/1980 = ~700)
    flags = gpu_clocks.judge(_gemm(300.0, samples, spread=0.4), summary, INFO, peak=989.4)
    assert _names(flags) == ["power_capped", "low_for_clock", "unsteady"]
    assert all(f["severity"] == "warn" for f in flags if f["flag"] != "power_capped")
    # the recorded verify figure before the fix is low, but its clock explains it: no low_for_clock
    before = REC["verify_bf16_before"]
    flags = gpu_clocks.judge(_gemm(before["tflops"], before["samples"]),
                             gpu_clocks.summarise(before["samples"], INFO), INFO, peak=989.4)
    assert "low_for_clock" not in _names(flags) and "power_capped" in _names(flags)
    # SDPA is not a peak-bound figure: no low_for_clock whatever its share
    sdpa = dict(_gemm(100.0, samples), group="sdpa")
    assert "low_for_clock" not in _names(gpu_clocks.judge(sdpa, summary, INFO, peak=989.4))


def test_evaluate_reports_clocks_row_and_reasons(tmp_path):
    samples = REC["sustained_bf16"]["samples"]
    raw = {"schema": 1, "status": "ok", "versions": {"torch": "2.11.0+cu130"}, "arch_list": ["sm_90"], "warnings": [],
           "device": {"name": "NVIDIA H100 80GB HBM3", "capability": "9.0", "sm_count": 132, "memory_bytes": 85e9,
                      "count": 1},
           "checks": [{"name": "gemm_bf16", "status": "pass", "rel_err": 0.003, "tolerance": 0.02, "reference": "f64"}],
           "nvml": dict(INFO, slowdown_temp_c=90, driver="580.159.04"),
           "bench_method": {"warm_s": 1.0, "min_timed_s": 1.0},
           "benchmarks": [_gemm(REC["sustained_bf16"]["tflops"], samples),
                          dict(_gemm(2900.0, REC["plain_tf32_cool"]["samples"]), group="memory", name="device copy 1024 MiB",
                               peak_key="mem_bw", gbs=2900.0, tflops=None)]}
    report = torch_checks.evaluate(raw, _platforms(), host="gpu1")
    bf16 = report["benchmarks"][0]
    assert bf16["peak_row"] == "h100_sxm" and bf16["peak_value"] == 989.4
    assert "nvml_samples" not in bf16 and bf16["clocks"]["reasons"] == ["sw_power_cap"]
    assert bf16["pct_of_clock_peak"] > bf16["pct_of_peak"]
    assert any("700 W power limit" in line for line in report["physical_limits"])
    md = torch_checks.render_markdown(report)
    assert "peak table row `h100_sxm`" in md and "power_capped" in md and "MHz" in md
    assert "source (tflops)" in md and "Why figures sit below the peak" in md
    paths, _renderer = torch_checks.write_reports(report, str(tmp_path))
    assert png_chart.read_png_size(paths["png"])[1] > 50
    labels = [b[0] for b in torch_checks.chart_bars(report)]
    assert "MHz" in labels[0] and "power cap" in labels[0]


def test_side_by_side_rows_and_bar():
    samples = REC["sustained_bf16"]["samples"]
    verify = [_gemm(690.0, samples), _gemm(355.0, samples, name="tf32 8192x8192x8192", key="tf32"),
              {"group": "sdpa", "name": "flash bf16 ...", "backend": "flash", "tflops": 300.0, "median_ms": 1.0},
              {"group": "memory", "name": "device copy 1024 MiB", "gbs": 2950.0, "median_ms": 0.7, "peak_key": "mem_bw"}]
    gpu_clocks.annotate(verify, INFO)
    plain = {"gemm_bf16": {"value": 700.0, "clocks": gpu_clocks.summarise(samples, INFO), "burst_value": 741.0},
             "gemm_tf32": {"value": 400.0}, "sdpa_flash": {"value": 290.0}, "copy": {"value": 3000.0}}
    rows = dict((r["figure"], r) for r in gpu_clocks.side_by_side(verify, plain))
    assert rows["gemm_bf16"]["ratio"] == round(690.0 / 700.0, 3) and rows["gemm_bf16"]["meets"] is True
    assert rows["gemm_tf32"]["meets"] is False            # 355 / 400 = 0.89
    assert rows["sdpa_flash"]["ratio"] > 1 and rows["copy"]["unit"] == "GB/s"
    assert rows["gemm_fp8"]["ratio"] is None and rows["gemm_fp8"]["meets"] is None
    assert "MHz" in rows["gemm_bf16"]["verify_clocks"] and "MHz" in rows["gemm_bf16"]["plain_clocks"]
    md = gpu_clocks.side_by_side_markdown(list(rows.values()))
    assert "| GEMM bf16 8192^3 | TFLOP/s | 690.0 | 700.0 | 0.986 | yes |" in md and "**no**" in md
    assert "741.0" in md
