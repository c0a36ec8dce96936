# -*- coding: utf-8 -*-
"""Each cable proven from sysfs with the cause named (module_utils.fabric.cable) on stand-in DGX Spark trees: a
healthy port passes; a twin down is "one HCA function only"; a function whose PCIe link trained at half its width is
named with firmware/BIOS; a measured bandwidth below the manifest's floor is named by the band that holds it (13 Gb/s
degraded init, 119 a degraded cable, about half one function); a direction not measured fails safe; and the node's
verdict follows its cables'."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import cable, fabric

sys.path.insert(0, os.path.dirname(__file__))
import fabric_trees  # noqa: E402  pylint: disable=wrong-import-position


@pytest.fixture(scope="module")
def spec(manifest):
    return manifest["sparkforge_fabric_cable"]


def port_of(root, name="enp1s0f1np1"):
    return fabric.port_of(fabric.ports(fabric.read_netdevs(root), fabric.read_rdma(root)), name)


def test_a_healthy_cable_passes_and_the_node_with_it(tmp_path, spec):
    fabric_trees.spark(str(tmp_path))
    port = port_of(str(tmp_path))
    assert port["functions"][0]["pcie"]["max_link_width"] == "4"
    v = cable.cable_verdict(port, spec, {"a->b": 196.0, "b->a": 195.2})
    assert v["verdict"] == "pass" and v["reasons"] == []
    assert cable.node_verdict("spark-1", [v])["verdict"] == "pass"
    assert cable.node_verdict("spark-1", [])["reasons"] == ["no cabled port"]


def test_one_function_down_and_pcie_below_its_width_are_named(tmp_path, spec):
    fabric_trees.spark(str(tmp_path / "one"), both_functions=False)
    v = cable.cable_verdict(port_of(str(tmp_path / "one")), spec)
    assert v["verdict"] == "fail" and v["reasons"] == [
        "enP2p1s0f1np1 down: 1 of 2 functions carry the port (%s)" % spec["causes"]["function"]]
    root = str(tmp_path / "half")
    fabric_trees.spark(root)
    # An older BIOS trains the second controller at half its width: the stand-in's x4 device at x2.
    fdir = os.path.join(root, "devices", "pci0002:00", "0002:00:00.0", "0002:01:00.1")
    with open(os.path.join(fdir, "current_link_width"), "w") as handle:
        handle.write("2\n")
    v = cable.cable_verdict(port_of(root), spec)
    assert v["reasons"] == ["enP2p1s0f1np1: PCIe x2 of x4 (%s)" % spec["causes"]["pcie"]]
    node = cable.node_verdict("spark-2", [v])
    assert node["verdict"] == "fail" and node["reasons"][0].startswith("enp1s0f1np1: enP2p1s0f1np1: PCIe x2 of x4")


@pytest.mark.parametrize("gbps, cause", [(13.0, "degraded ConnectX-7 initialisation: reboot that node"),
                                         (119.0, "a degraded cable link: reboot both ends"),
                                         (98.0, "about half the rate: one HCA function of the port's pair only"),
                                         (160.0, "no known cause at this rate: reseat or swap the cable")])
def test_a_measured_shortfall_is_named_by_its_band(tmp_path, spec, gbps, cause):
    fabric_trees.spark(str(tmp_path))
    v = cable.cable_verdict(port_of(str(tmp_path)), spec, {"a->b": gbps, "b->a": 196.0, "b->a again": None})
    assert v["reasons"] == [
        "a->b: %g Gb/s, below the floor of %g Gb/s (%s)" % (gbps, spec["floor_gbps"], cause),
        "b->a again: no bandwidth measured (a test that did not come back fails)"]
