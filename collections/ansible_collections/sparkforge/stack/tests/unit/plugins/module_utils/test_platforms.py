# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils.host import platforms as p
from ansible_collections.sparkforge.stack.plugins.module_utils.verify import torch_checks
from ansible_collections.sparkforge.stack.tests.unit.utils.harness import FIXTURES, shared_manifest

SMI = os.path.join(FIXTURES, "nvidia-smi")


# The GPU table: platforms.yml's rows, the one place that maps a GPU to its class.
TABLE = shared_manifest()["sparkforge_gpu_platforms"]

GB10 = (
    "index, name, compute_cap, driver_version, memory.total [MiB], uuid, pci.bus_id\n"
    "0, NVIDIA GB10, 12.1, 580.95.05, [N/A], GPU-5c0a3b5e-0c3f-4a55-9c1e-0f2b8d7e6a11, 0000000F:01:00.0\n"
)

GRACE_CPUINFO = "".join(
    "processor\t: %d\nBogoMIPS\t: 2000.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics "
    "fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat "
    "ilrcpc flagm sb paca pacg dcpodp sve2 sveaes svepmull svebitperm svesha3 svesm4\nCPU implementer\t: 0x41\n"
    "CPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: %s\nCPU revision\t: 1\n\n"
    % (i, "0xd85" if i < 10 else "0xd87") for i in range(20))


def test_real_h200_csv_with_units_in_header():
    with open(os.path.join(SMI, "h200-query-nounits.csv")) as handle:
        gpus = p.parse_nvidia_smi_csv(handle.read(), TABLE)
    assert gpus == [{
        "index": 0, "name": "NVIDIA H200", "compute_capability": "9.0", "sm": "sm_90",
        "driver_version": "580.159.04", "memory_mib": 143771,
        "uuid": "GPU-2a1a566f-9b79-ebb4-2484-9f081ddc687e", "pci_bus_id": "00000000:00:06.0",
        "platform_class": "hopper",
    }]


def test_real_csv_with_units_in_values():
    with open(os.path.join(SMI, "h200-query-units.csv")) as handle:
        assert p.parse_nvidia_smi_csv(handle.read(), TABLE)[0]["memory_mib"] == 143771


def test_gb10_unified_memory_is_null():
    gpu = p.parse_nvidia_smi_csv(GB10, TABLE)[0]
    assert gpu["memory_mib"] is None
    assert (gpu["compute_capability"], gpu["sm"], gpu["platform_class"]) == ("12.1", "sm_121", "dgx_spark")


@pytest.mark.parametrize("value", ["[N/A]", "[Not Supported]", "N/A"])
def test_memory_not_supported_values(value):
    assert p.parse_memory_mib(value) is None


def test_memory_garbage_is_an_error():
    with pytest.raises(p.FactsError):
        p.parse_memory_mib("lots")


PLATFORM_CASES = [
    ("NVIDIA GB10", "dgx_spark"),
    ("NVIDIA GH200 480GB", "gh200"),
    ("NVIDIA GH200 144G HBM3e", "gh200"),
    ("NVIDIA Thor", "jetson_thor"),
    ("NVIDIA B200", "blackwell_dc"),
    ("NVIDIA GB200", "blackwell_dc"),
    ("NVIDIA GeForce RTX 5090", "blackwell_rtx"),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "blackwell_rtx"),
    ("NVIDIA H100 80GB HBM3", "hopper"),
    ("NVIDIA H200", "hopper"),
    ("NVIDIA A100-SXM4-80GB", "generic"),
    ("Tesla T4", "generic"),
    # Models of a class without a row of their own (the rows that only classify).
    ("NVIDIA B300", "blackwell_dc"),
    ("NVIDIA GB300", "blackwell_dc"),
    ("NVIDIA GeForce RTX 5080", "blackwell_rtx"),
    ("NVIDIA RTX PRO 4500 Blackwell", "blackwell_rtx"),
    ("NVIDIA H800", "hopper"),
    ("NVIDIA H20", "hopper"),
    ("NVIDIA H100 NVL", "hopper"),
    ("NVIDIA H100 PCIe", "hopper"),
    ("NVIDIA GB100", "blackwell_dc"),
]


@pytest.mark.parametrize("name,klass", PLATFORM_CASES)
def test_platform_table(name, klass):
    rows = p.platform_rows(TABLE)
    # A GPU class added as docs/guides/version-pins-and-releases.md says (a new first row: GB300 out of
    # blackwell_dc) moves its model to the new class on purpose; every other model keeps its class.
    first = next((k for _key, pattern, k in rows if pattern.search(name)), "generic")
    moved = first not in set(k for _n, k in PLATFORM_CASES)
    assert p.classify_gpu(name, rows) == (first if moved else klass)


def test_a_gpu_of_a_new_class_is_one_row_of_the_table():
    table = dict(TABLE, rubin={"match": r"\bR(100|200)\b", "class": "rubin", "label": "a future part"})
    gpus = p.parse_nvidia_smi_csv("index, name, compute_cap\n0, NVIDIA R100, 11.5\n", table)
    assert gpus[0]["platform_class"] == "rubin"
    # verify finds no peak figures for it (the row has none) and says so, as for any unknown GPU.
    assert torch_checks.match_platform("NVIDIA R100", table) == (None, None)


@pytest.mark.parametrize("table, message", [
    ({}, "platforms must be the manifest's sparkforge_gpu_platforms"),
    (None, "platforms must be the manifest's sparkforge_gpu_platforms"),
    ({"gb10": {"match": "GB10"}}, "sparkforge_gpu_platforms.gb10: class must be a platform class name such as "
                                  "hopper (lower case, digits, _), got None"),
    ({"gb10": {"match": "GB10", "class": "DGX Spark"}}, "class must be a platform class name"),
    ({"gb10": {"class": "dgx_spark"}}, "sparkforge_gpu_platforms.gb10: match must be a regular expression"),
    ({"gb10": {"match": "GB(10", "class": "dgx_spark"}}, "sparkforge_gpu_platforms.gb10: match 'GB(10' is not a "
                                                         "regular expression"),
    # The peaks verify compares with, checked where the table is read (preflight), not when verify divides by them.
    pytest.param({"gb10": {"match": "GB10", "class": "dgx_spark", "mem_bw_gbs": "fast"}},
                 "sparkforge_gpu_platforms.gb10: mem_bw_gbs 'fast' is not a positive number (or null where the "
                 "datasheet gives none)", id="V46"),
    pytest.param({"gb10": {"match": "GB10", "class": "dgx_spark", "tflops": {"bf16": -1, "fp4": None}}},
                 "sparkforge_gpu_platforms.gb10: tflops.bf16 -1 is not a positive number", id="V47"),
    ({"gb10": {"match": "GB10", "class": "dgx_spark", "tflops": {"bf16": float("nan")}}}, "tflops.bf16 nan is not"),
])
def test_a_table_that_cannot_classify_is_refused(table, message):
    with pytest.raises(p.FactsError) as err:
        p.parse_nvidia_smi_csv(GB10, table)
    assert message in str(err.value)


def test_every_class_the_manifest_names_is_a_class_of_the_gpu_table():
    classes = set(row["class"] for row in TABLE.values())
    torch = shared_manifest()
    named = set(torch["sparkforge_torch_arch_defaults"]) - {"none"}
    for release in torch["sparkforge_torch_releases"].values():
        named.update(release.get("good_for") or [])
    assert named and named <= classes, sorted(named - classes)


def test_verify_takes_peaks_only_from_rows_with_figures():
    # The rows that only classify carry no tflops: verify reports no peak row for those GPUs, as before.
    assert torch_checks.match_platform("NVIDIA H800", TABLE) == (None, None)
    assert torch_checks.match_platform("NVIDIA H100 80GB HBM3", TABLE)[0] == "h100_sxm"
    assert torch_checks.match_platform("NVIDIA GB10", TABLE)[0] == "gb10"


def test_mixed_gpus_of_different_capability():
    text = (
        "index, name, compute_cap, driver_version, memory.total [MiB], uuid\n"
        "1, NVIDIA GeForce RTX 5090, 12.0, 580.95.05, 32607, GPU-b\n"
        "0, NVIDIA H100 PCIe, 9.0, 580.95.05, 81559, GPU-a\n"
    )
    gpus = p.parse_nvidia_smi_csv(text, TABLE)
    assert [g["index"] for g in gpus] == [0, 1]
    facts = p.summarize(gpus, p.parse_cpuinfo(""), "x86_64", {"total": 2 ** 34, "available": 2 ** 33}, "/usr/bin/nvidia-smi")
    assert facts["compute_capabilities"] == ["9.0", "12.0"]
    assert facts["sm_archs"] == ["sm_90", "sm_120"]
    assert facts["platform_class"] == "mixed"
    assert facts["platform_classes"] == ["blackwell_rtx", "hopper"]
    assert facts["unified_memory"] is False


def test_grace_blackwell_cpu():
    cpu = p.parse_cpuinfo(GRACE_CPUINFO)
    assert cpu["cores"] == 20 and cpu["sve2"] is True
    assert cpu["arm_parts"] == {"Cortex-X925": 10, "Cortex-A725": 10}
    assert cpu["model"] == "10x Cortex-A725 + 10x Cortex-X925"


def test_x86_cpu_has_no_sve2():
    cpu = p.parse_cpuinfo("processor : 0\nmodel name : AMD EPYC 9554\nflags : fpu sse avx2\n\nprocessor : 1\n")
    assert cpu == {"cores": 2, "model": "AMD EPYC 9554", "sve": False, "sve2": False, "arm_parts": {}}


def test_unknown_format_is_an_error():
    with pytest.raises(p.FactsError):
        p.parse_nvidia_smi_csv("foo, bar\n1, 2\n", TABLE)
    with pytest.raises(p.FactsError):
        p.parse_nvidia_smi_csv("index, name, compute_cap\n0, a, 9.0, extra\n", TABLE)


def test_no_gpus_summary():
    facts = p.summarize([], p.parse_cpuinfo(GRACE_CPUINFO), "aarch64", {"total": 0, "available": 0}, None)
    assert facts["platform_class"] == "none" and facts["gpu_count"] == 0 and facts["unified_memory"] is False
