# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import fleet


def plan(version="2.11.0", arch_list="12.0", triton="3.6.0", llvm="f6ded0be897e"):
    return {"torch": {"version": version, "source": "source"}, "arch": {"list": arch_list, "reason": "test"},
            "triton": {"version": triton, "llvm_commit": llvm}, "source_build": True}


def host(arch="aarch64", caps=("12.1",), klass="dgx_spark", os_version="24.04", py="3.12.3", cuda=13,
         arch_list="12.0", can_build=True, problems=None):
    return {"arch": arch, "capabilities": list(caps), "platform_class": klass, "distribution": "Ubuntu",
            "distribution_version": os_version, "python_version": py, "cuda_major": cuda,
            "plan": plan(arch_list=arch_list), "can_build": can_build, "build_problems": problems or []}


SPARK = host()
GH200 = host(caps=("9.0",), klass="gh200", arch_list="9.0")
X86 = host(arch="x86_64", caps=("9.0",), klass="hopper", arch_list="9.0")


def test_class_key_fields_and_capability_set():
    key = fleet.class_key(host(caps=("9.0", "12.1", "9.0")))
    assert list(key) == list(fleet.KEY_FIELDS)
    assert key["capabilities"] == ["9.0", "12.1"]  # a set, numerically ordered
    assert key["python"] == "3.12" and key["os"] == "Ubuntu 24.04" and key["cuda_major"] == "13"
    assert key["torch_version"] == "2.11.0" and key["cuda_arch_list"] == "12.0"


def test_class_id_is_readable_and_stable():
    cid = fleet.class_id(fleet.class_key(SPARK), "dgx_spark")
    assert cid.startswith("dgx_spark-aarch64-sm121-py312-") and len(cid.rsplit("-", 1)[1]) == 8
    assert cid == fleet.class_id(fleet.class_key(copy.deepcopy(SPARK)), "dgx_spark")
    # The patch level of Python does not split a class; the minor does.
    assert fleet.class_id(fleet.class_key(host(py="3.12.9")), "dgx_spark") == cid
    assert fleet.class_id(fleet.class_key(host(py="3.10.12")), "dgx_spark") != cid


@pytest.mark.parametrize("change", [
    {"arch": "x86_64"}, {"caps": ("12.0",)}, {"os_version": "22.04"}, {"cuda": 12}, {"arch_list": "12.1"},
])
def test_every_input_changes_the_class(change):
    base = fleet.class_id(fleet.class_key(SPARK), "dgx_spark")
    assert fleet.class_id(fleet.class_key(host(**change)), "dgx_spark") != base


def test_fleet_groups_and_picks_first_able_host():
    hosts = {"s1": host(can_build=False, problems=[{"check": "ram", "message": "16 GiB"}]), "s2": SPARK,
             "s3": SPARK, "g1": GH200, "x1": X86}
    result = fleet.plan_fleet(hosts, ["s1", "s2", "s3", "g1", "x1"])
    assert result["errors"] == []
    assert len(result["classes"]) == 3
    by_host = result["hosts"]
    assert by_host["s1"]["class"] == by_host["s2"]["class"] == by_host["s3"]["class"]
    assert by_host["s1"]["builder_host"] == "s2" and by_host["s2"]["builder"] and not by_host["s3"]["builder"]
    assert by_host["g1"]["builder"] and by_host["x1"]["builder"]
    spark_class = result["classes"][by_host["s1"]["class"]]
    assert spark_class["hosts"] == ["s1", "s2", "s3"]
    assert "no host of the builders group" in spark_class["builder_why"]
    assert any("builder s2" in line for line in result["lines"])


def test_builders_group_wins_inside_its_class_only():
    hosts = {"s1": SPARK, "s2": SPARK, "g1": GH200}
    result = fleet.plan_fleet(hosts, ["s1", "s2", "g1"], builders=["s2", "elsewhere"])
    assert result["hosts"]["s1"]["builder_host"] == "s2"
    assert result["classes"][result["hosts"]["s2"]["class"]]["builder_why"] == "in the builders group"
    assert result["hosts"]["g1"]["builder"]  # its class has no builders-group host: first host


def test_builders_group_host_that_cannot_build_is_passed_over():
    hosts = {"s1": SPARK, "s2": host(can_build=False)}
    result = fleet.plan_fleet(hosts, ["s1", "s2"], builders=["s2"])
    entry = result["classes"][result["hosts"]["s1"]["class"]]
    assert entry["builder"] == "s1" and "s2 cannot build" in entry["builder_why"]


def test_class_without_builder_fails_with_reason_and_only_itself():
    hosts = {"s1": host(can_build=False, problems=[{"check": "ram", "message": "16.0 GiB of RAM, needs 32"}]),
             "g1": GH200}
    result = fleet.plan_fleet(hosts, ["s1", "g1"])
    assert len(result["errors"]) == 1
    message = result["errors"][0]
    assert "has no host that can build" in message and "s1: 16.0 GiB of RAM, needs 32" in message
    assert "preflight_min_ram_gib_source_build" in message
    assert result["hosts"]["s1"]["error"] == message and result["hosts"]["g1"]["error"] is None
    assert any("builder NONE" in line for line in result["lines"])


def test_no_builder_needed_without_source_build():
    hosts = {"s1": host(can_build=False), "g1": GH200}
    result = fleet.plan_fleet(hosts, ["s1", "g1"], source_build=False)
    assert result["errors"] == []
    assert all(h["builder_host"] is None and not h["builder"] for h in result["hosts"].values())


def test_arch_list_change_of_one_class_changes_only_that_class():
    order = ["s1", "s2", "g1", "x1"]
    before = fleet.plan_fleet({"s1": SPARK, "s2": SPARK, "g1": GH200, "x1": X86}, order)
    after = fleet.plan_fleet({"s1": SPARK, "s2": SPARK, "g1": GH200,
                              "x1": host(arch="x86_64", caps=("9.0",), klass="hopper", arch_list="9.0;10.0")}, order)
    changed = [h for h in order if before["hosts"][h]["class"] != after["hosts"][h]["class"]]
    assert changed == ["x1"]


def test_class_of_index_installs_needs_no_builder():
    index = host(can_build=False)
    index["plan"] = dict(index["plan"], source_build=False, torch=dict(index["plan"]["torch"], source="index"))
    result = fleet.plan_fleet({"s1": index, "s2": SPARK}, ["s1", "s2"])
    assert result["errors"] == [] and result["hosts"]["s1"]["class"] != result["hosts"]["s2"]["class"]
    assert result["hosts"]["s1"]["builder_host"] is None and result["hosts"]["s2"]["builder"]


def test_single_host_is_its_own_builder():
    result = fleet.plan_fleet({"localhost": SPARK}, ["localhost"])
    assert result["hosts"]["localhost"]["builder"] is True


def test_bad_input_is_an_error():
    with pytest.raises(fleet.FleetError, match="lack"):
        fleet.plan_fleet({"a": {"arch": "aarch64"}}, ["a"])
    with pytest.raises(fleet.FleetError, match="missing from the order"):
        fleet.plan_fleet({"a": SPARK}, [])
