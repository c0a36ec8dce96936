# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host traps as data (issue 53, item 3), read by preflight from stand-in hosts: trees of the files the kernel
and the driver write (/proc/sys/kernel/osrelease, /proc/meminfo, /proc/driver/nvidia/version,
/sys/class/infiniband, /etc/systemd/system), in their real formats, judged with the manifest's rows."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import os
import sys

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import JobError
from ansible_collections.sparkforge.stack.plugins.module_utils.plan import host_traps
from ansible_collections.sparkforge.stack.plugins.module_utils.plan.stack_plan_job import StackPlanJob
from ansible_collections.sparkforge.stack.tests.unit.utils.harness import shared_manifest

sys.path.insert(0, os.path.dirname(__file__))
import test_stack_plan_job as spj  # noqa: E402  pylint: disable=wrong-import-position

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "node_health")
# /proc/meminfo as an arm64 kernel with CMA prints it (the fields and their alignment: fs/proc/meminfo.c, "%8lu kB"
# in a 16-column field); CmaTotal/CmaFree as quoted from a DGX Spark in MiaAI-Lab issue 259.
MEMINFO = """MemTotal:       128452608 kB
MemFree:        92274688 kB
MemAvailable:   119537664 kB
Buffers:          148044 kB
Cached:          4131220 kB
SwapCached:            0 kB
HugePages_Total:       0
HugePages_Free:        0
Hugepagesize:       2048 kB
CmaTotal:        {cma_total} kB
CmaFree:          940604 kB
"""
GB10 = ["NVIDIA GB10"]


def traps():
    """The manifest's rows as Ansible renders them (the GPU list is the node health spec's)."""
    manifest = shared_manifest()
    rows = copy.deepcopy(manifest["sparkforge_host_traps"])
    for row in rows:
        if row["check"] == "driver_flavour":
            row["gpus"] = list(manifest["sparkforge_node_health"]["open_modules_required"])
    return rows


def _w(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


def stand_in(root, release="6.17.0-1032-nvidia", cma_total=65536, driver="version-open-gb10.txt", rdma=True,
             toolkit=False, cdi_enabled=False):
    """A host as the kernel and driver lay it out under ``root``."""
    root = str(root)
    _w(os.path.join(root, "proc/sys/kernel/osrelease"), release + "\n")
    _w(os.path.join(root, "proc/meminfo"), MEMINFO.format(cma_total="%8d" % cma_total if cma_total else "       0"))
    if driver:
        with open(os.path.join(FIXTURES, driver)) as handle:
            _w(os.path.join(root, "proc/driver/nvidia/version"), handle.read())
    if rdma:
        # The class entry is a link into the device tree, as the kernel makes it.
        target = os.path.join(root, "sys/devices/pci0000:00/0000:00:00.0/0000:01:00.0/infiniband/rocep1s0f0")
        os.makedirs(target)
        os.makedirs(os.path.join(root, "sys/class/infiniband"))
        os.symlink(os.path.relpath(target, os.path.join(root, "sys/class/infiniband")),
                   os.path.join(root, "sys/class/infiniband/rocep1s0f0"))
    if toolkit:
        _w(os.path.join(root, "usr/bin/nvidia-ctk"), "#!/bin/sh\n")
        for unit in ("nvidia-cdi-refresh.path", "nvidia-cdi-refresh.service"):
            _w(os.path.join(root, "usr/lib/systemd/system", unit), "[Unit]\n")
    os.makedirs(os.path.join(root, "etc/systemd/system/multi-user.target.wants"), exist_ok=True)
    if cdi_enabled:
        # What systemctl enable makes: a link in the wants directory of the unit's WantedBy target.
        os.symlink("/usr/lib/systemd/system/nvidia-cdi-refresh.path",
                   os.path.join(root, "etc/systemd/system/multi-user.target.wants/nvidia-cdi-refresh.path"))
    return root


def test_a_good_spark_is_clear(tmp_path):
    problems, warnings, report = host_traps.check(traps(), GB10, stand_in(tmp_path))
    assert problems == [] and warnings == []
    assert report["kernel_release"] == "6.17.0-1032-nvidia" and report["rdma_devices"] == ["rocep1s0f0"]
    assert {r["id"]: r["status"] for r in report["rows"]} == {
        "cma_total_zero": "clear", "kernel_7_0_0_1019_nvidia_rdma": "clear", "kernel_7_0_0_31_generic_rdma": "clear",
        "open_kernel_modules": "clear", "cdi_refresh_service": "n/a"}


@pytest.mark.parametrize("row", ["D10"])
def test_cma_total_zero_with_rdma_is_refused_and_the_kernel_warned(tmp_path, row):
    """D10: kernel 7.0.0-1019-nvidia whose /proc/meminfo says CmaTotal 0 on a host with RDMA devices."""
    problems, warnings, _report = host_traps.check(traps(), GB10,
                                                   stand_in(tmp_path, release="7.0.0-1019-nvidia", cma_total=0))
    assert [p["check"] for p in problems] == ["host_traps"]
    message = problems[0]["message"]
    assert message.startswith("cma_total_zero: no CMA memory where RDMA is used: /proc/meminfo has CmaTotal: 0 kB "
                              "(kernel 7.0.0-1019-nvidia). What to do: RDMA memory registration")
    assert "kho=off" in message and "MiaAI-Lab/DeepSeek-v4-Flash-DSpark-2x-DGX-Spark issue 259" in message
    assert [w.split(":")[0] for w in warnings] == ["kernel_7_0_0_1019_nvidia_rdma"]


def test_without_rdma_cma_is_not_asked(tmp_path):
    problems, warnings, report = host_traps.check(traps(), GB10, stand_in(tmp_path, release="7.0.0-1019-nvidia",
                                                                          cma_total=0, rdma=False))
    assert problems == [] and warnings == []
    assert {r["id"]: r["status"] for r in report["rows"]}["cma_total_zero"] == "n/a"
    problems, _w2, _r = host_traps.check(traps(), GB10, stand_in(tmp_path / "b", cma_total=0, rdma=False),
                                         uses=["rdma"])
    assert [p["message"].split(":")[0] for p in problems] == ["cma_total_zero"]


def test_ignore_turns_a_refusal_into_a_warning(tmp_path):
    problems, warnings, _report = host_traps.check(traps(), GB10, stand_in(tmp_path, cma_total=0),
                                                   ignore=["cma_total_zero"])
    assert problems == [] and [w.split(":")[0] for w in warnings] == ["cma_total_zero"]


@pytest.mark.parametrize("row", ["D11"])
def test_gb10_on_the_proprietary_modules_is_refused(tmp_path, row):
    """D11: /proc/driver/nvidia/version of the proprietary flavour on a GB10; an H200 may run it."""
    root = stand_in(tmp_path, driver="version-proprietary.txt")
    problems, _warnings, _report = host_traps.check(traps(), GB10, root)
    assert len(problems) == 1
    assert problems[0]["message"].startswith(
        "open_kernel_modules: GPUs supported only by the open kernel modules: the proprietary kernel modules are "
        "loaded (/proc/driver/nvidia/version) and NVIDIA GB10 needs the open ones. What to do: install the driver's "
        "open flavour")
    assert host_traps.check(traps(), ["NVIDIA H200"], root)[0] == []
    assert host_traps.check(traps(), GB10, stand_in(tmp_path / "open", driver="version-open-h200.txt"))[0] == []


@pytest.mark.parametrize("row", ["D12"])
def test_containers_without_the_cdi_refresh_service_are_warned(tmp_path, row):
    """D12: NVIDIA's container toolkit installed, nvidia-cdi-refresh not enabled: a warning marked unconfirmed."""
    problems, warnings, _report = host_traps.check(traps(), GB10, stand_in(tmp_path, toolkit=True))
    assert problems == []
    assert len(warnings) == 1 and warnings[0].startswith(
        "cdi_refresh_service: NVIDIA's CDI refresh service where containers are used: nvidia-cdi-refresh.path / "
        "nvidia-cdi-refresh.service not enabled (no link in /etc/systemd/system/*.wants/)")
    assert warnings[0].endswith("; not confirmed by a public source)")
    assert host_traps.check(traps(), GB10, stand_in(tmp_path / "on", toolkit=True, cdi_enabled=True))[1] == []


def test_the_hwe_kernel_is_warned_only_where_rdma_is_used(tmp_path):
    warnings = host_traps.check(traps(), GB10, stand_in(tmp_path, release="7.0.0-31-generic"))[1]
    assert [w.split(":")[0] for w in warnings] == ["kernel_7_0_0_31_generic_rdma"]
    assert host_traps.check(traps(), GB10, stand_in(tmp_path / "b", release="7.0.0-30-generic"))[1] == []


def test_every_manifest_row_has_its_source_and_what_to_do():
    rows = host_traps.validate(traps())
    assert {r["id"] for r in rows} >= {"cma_total_zero", "open_kernel_modules", "cdi_refresh_service"}
    assert all(r["source"] and r["what_to_do"] and r["severity"] in ("refuse", "warn") for r in rows)
    assert [r["id"] for r in rows if r.get("confirmed") is False] == ["cdi_refresh_service"]


@pytest.mark.parametrize("bad,words", [
    ([{"id": "x", "check": "kernel_release", "severity": "refuse", "source": "s", "what_to_do": "w"}],
     "check kernel_release needs match"),
    ([{"id": "x", "check": "uptime", "severity": "refuse", "source": "s", "what_to_do": "w"}], "check 'uptime' is not"),
    ([{"id": "x", "check": "meminfo_zero", "field": "CmaTotal", "severity": "fatal", "source": "s",
       "what_to_do": "w"}], "severity 'fatal' is not one of refuse, warn"),
    ([{"id": "x", "check": "meminfo_zero", "field": "CmaTotal", "severity": "warn"}], "missing source, what_to_do"),
    ([{"id": "x", "check": "kernel_release", "match": "(", "severity": "warn", "source": "s", "what_to_do": "w"}],
     "is not a regular expression"),
])
def test_bad_rows_are_refused(bad, words):
    with pytest.raises(host_traps.TrapError, match=words.replace("(", "\\(").replace("*", "\\*")):
        host_traps.validate(bad)


def test_meminfo_parsing():
    assert host_traps.meminfo_kib(MEMINFO.format(cma_total="       0"), "CmaTotal") == 0
    assert host_traps.meminfo_kib(MEMINFO.format(cma_total="   65536"), "CmaTotal") == 65536
    assert host_traps.meminfo_kib("MemTotal:       128452608 kB\n", "CmaTotal") is None  # a kernel without CMA


# ---------------------------------------------------------------- preflight (stack_plan) ------

@pytest.mark.parametrize("row", ["D10"])
def test_preflight_refuses_before_anything_changes(tmp_path, row):
    """stack_plan (preflight) on a stand-in Spark: the trap is a problem, the host is not ready, nothing ran."""
    root = stand_in(tmp_path, release="7.0.0-1019-nvidia", cma_total=0, toolkit=True)
    host, mirror = spj.a_host("c++ (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0"), spj.Mirror()
    res = StackPlanJob(spj.params(host_traps={"traps": traps(), "root": root}), host, opener=mirror).run()
    assert res["ready"] is False
    assert [p for p in res["problems"] if p["check"] == "host_traps"][0]["message"].startswith("cma_total_zero:")
    assert [w.split(":")[0] for w in res["host_traps"]["warnings"]] == ["kernel_7_0_0_1019_nvidia_rdma",
                                                                        "cdi_refresh_service"]
    assert any(line.startswith("host trap (warning): cdi_refresh_service:") for line in res["plan_text"])
    assert any("[host_traps] cma_total_zero" in line for line in res["plan_text"])
    clear = StackPlanJob(spj.params(host_traps={"traps": traps(), "root": stand_in(tmp_path / "ok")}),
                         spj.a_host("c++ 13.3.0"), opener=spj.Mirror()).run()
    assert [p for p in clear["problems"] if p["check"] == "host_traps"] == []
    with pytest.raises(JobError, match=r"host_traps: sparkforge_host_traps\[0\] \(x\): missing source"):
        StackPlanJob(spj.params(host_traps={"traps": [{"id": "x", "check": "meminfo_zero", "field": "CmaTotal",
                                                       "severity": "warn", "what_to_do": "w"}]}),
                     spj.a_host("c++ 13.3.0"), opener=spj.Mirror()).run()
