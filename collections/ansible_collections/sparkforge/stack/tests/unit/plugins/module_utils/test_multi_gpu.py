# -*- coding: utf-8 -*-
"""Every GPU and the collectives between them (module_utils.verify.multi_gpu), without a GPU.

The per-GPU results are the real raw output of the check script on an H200
(fixtures/verify/h200.raw.json), given two GPU identities; the nvidia-smi outputs are in the real
format (fixtures/verify/h200x2-nvlink-s.txt, captured on the 2xH200 test machine)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils.verify import multi_gpu, torch_checks

HERE = os.path.dirname(os.path.abspath(__file__))
COLLECTION = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
RAW = os.path.join(COLLECTION, "tests", "unit", "fixtures", "verify", "h200.raw.json")
SMI = os.path.join(COLLECTION, "tests", "unit", "fixtures", "verify")


def gpu_raw(index):
    with open(RAW) as handle:
        raw = json.load(handle)
    raw["gpu_index"] = index
    raw["device"] = dict(raw["device"], uuid="GPU-0000000%d-aaaa-bbbb-cccc-dddddddddddd" % index, index=index, count=2)
    return raw


def test_select_gpus():
    assert multi_gpu.select_gpus(None, 2) == [0, 1]
    assert multi_gpu.select_gpus("all", 3) == [0, 1, 2]
    assert multi_gpu.select_gpus([1], 2) == [1]
    with pytest.raises(multi_gpu.MultiGpuError) as err:
        multi_gpu.select_gpus([2], 2)
    assert "GPU 2 does not exist: this host has 2 GPU(s)" in str(err.value)


@pytest.mark.parametrize("op, world, factor", [
    ("all_reduce", 2, 1.0), ("all_reduce", 8, 1.75), ("all_gather", 2, 0.5), ("reduce_scatter", 4, 0.75)])
def test_bus_bandwidth_uses_the_nccl_tests_factors(op, world, factor):
    algbw, bus = multi_gpu.busbw(op, 1 << 30, 0.01, world)
    assert algbw == pytest.approx((1 << 30) / 0.01 / 1e9)
    assert bus == pytest.approx(algbw * factor)


def test_link_peak_from_nvlink_status_and_pcie():
    with open(os.path.join(SMI, "h200x2-nvlink-s.txt")) as handle:
        nvlink = multi_gpu.parse_nvlink_status(handle.read())
    assert sorted(nvlink) == [0, 1] and len(nvlink[0]) == 18 and nvlink[0][0] == pytest.approx(26.562)
    peak = multi_gpu.link_peak([0, 1], nvlink, {})
    assert peak["kind"] == "nvlink" and peak["gbs"] == pytest.approx(478.1)
    pcie = multi_gpu.parse_pcie("0, 5, 16\n1, 4, 16\n")
    peak = multi_gpu.link_peak([0, 1], {0: [], 1: []}, pcie)
    assert peak == {"kind": "pcie", "gbs": 31.5, "detail": "PCIe gen4 x16 (GPU 1)"}
    assert multi_gpu.link_peak([0, 1], {}, {}) is None


def test_one_bad_gpu_fails_the_host_and_is_named():
    raws = multi_gpu.inject_failure([gpu_raw(0), gpu_raw(1)], {"gpu": 1, "check": "gemm_bf16"})
    per_gpu = multi_gpu.merge_per_gpu(raws)
    assert [g["index"] for g in per_gpu["gpus"]] == [0, 1]
    assert len(per_gpu["rows"]) == 2 * len(gpu_raw(0)["checks"])
    report = torch_checks.evaluate(raws[0], per_gpu=per_gpu, host="gpu-test")
    assert not report["passed"]
    assert report["failed_checks"] == ["GPU 1: gemm_bf16"]
    assert report["failures"] == ["GPU 1 (NVIDIA H200, GPU-00000001-aaaa-bbbb-cccc-dddddddddddd): gemm_bf16: "
                                  "injected failure (verify_inject_failure, for tests only)"]
    assert report["summary"].endswith("on 2 GPUs")
    md = torch_checks.render_markdown(report)
    assert "## Every GPU" in md and "| 1 | GPU-00000001-aaaa-bbbb-cccc-dddddddddddd | NVIDIA H200 |" in md
    # Without the injection both pass.
    healthy = torch_checks.evaluate(gpu_raw(0), per_gpu=multi_gpu.merge_per_gpu([gpu_raw(0), gpu_raw(1)]))
    assert healthy["passed"], healthy["failures"]
    with pytest.raises(multi_gpu.MultiGpuError):
        multi_gpu.inject_failure([gpu_raw(0)], {"gpu": 0, "check": "no_such_check"})


def test_collectives_rows_checks_and_report(tmp_path):
    raw = {"checks": [{"name": "nccl_all_reduce", "status": "pass", "detail": "exact on every rank"},
                      {"name": "nccl_all_gather", "status": "fail", "detail": "a rank got wrong values"}],
           "bandwidth": [{"op": "all_reduce", "bytes": 1 << 30, "seconds": 0.00327},
                         {"op": "all_gather", "bytes": 8 << 20, "error": "RuntimeError: boom"}]}
    peak = {"kind": "nvlink", "gbs": 478.1, "detail": "18 NVLink links x 26.562 GB/s (GPU 0)"}
    coll = multi_gpu.evaluate_collectives(raw, 2, peak)
    row = coll["bandwidth"][0]
    assert row["busbw_gbs"] == pytest.approx(328.4, abs=0.1) and row["pct_of_link_peak"] == pytest.approx(68.7, abs=0.1)
    report = torch_checks.evaluate(gpu_raw(0), per_gpu=multi_gpu.merge_per_gpu([gpu_raw(0), gpu_raw(1)]),
                                   collectives=coll, host="gpu-test")
    assert not report["passed"]
    assert "collective nccl_all_gather across 2 GPUs: a rank got wrong values" in report["failures"]
    paths, _renderer = torch_checks.write_reports(copy.deepcopy(report), str(tmp_path))
    md = open(paths["markdown"]).read()
    assert "| all_reduce | 1 GiB | 3.27 | 328.4 | 328.4 | 68.7 |" in md
    assert "error: RuntimeError: boom" in md
    with open(paths["collectives_png"], "rb") as handle:
        assert handle.read(8) == b"\x89PNG\r\n\x1a\n"
    table = torch_checks.fleet_table([report])
    assert "| 2 | 328.4 GB/s |" in table


def test_one_gpu_skips_the_collectives_with_the_reason():
    report = torch_checks.evaluate(gpu_raw(0), collectives={"skipped": "one GPU: there is nothing to run a "
                                                                       "collective between"})
    md = torch_checks.render_markdown(report)
    assert "Skipped: one GPU: there is nothing to run a collective between." in md
    assert report["passed"]
