"""fabric_facts and fabric_netplan run as modules (tests/helpers.run_module) on stand-in sysfs trees
and a temporary root: seconds in all, no containers."""

import importlib.util
import os

from helpers import run_module

TREES = os.path.join(os.path.dirname(__file__), "..", "collections", "ansible_collections", "sparkforge", "stack",
                     "tests", "unit", "plugins", "module_utils", "fabric_trees.py")
_spec = importlib.util.spec_from_file_location("fabric_trees", TREES)
fabric_trees = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fabric_trees)


def spark(tmp_path, name="sys", **kw):
    sysfs, proc = str(tmp_path / name), str(tmp_path / (name + "-proc"))
    fabric_trees.spark(sysfs, proc, **kw)
    return sysfs, proc


def test_fabric_facts_on_a_spark_tree(tmp_path):
    sysfs, proc = spark(tmp_path, ipv4="169.254.35.62")
    res, rc = run_module("fabric_facts", {"sysfs_root": sysfs, "proc_root": proc, "connection_address": "192.168.1.20",
                                          "addresses": {"enP7s7": ["192.168.1.20"]}}, check_mode=True)
    assert rc == 0 and not res["changed"], res
    assert res["fabric"]["cabled_ports"] == ["enp1s0f1np1"]
    assert res["fabric"]["management"] == {"enP7s7": "holds 192.168.1.20, the address Ansible connects to"}
    assert res["nccl_env"]["NCCL_IB_HCA"] == "=rocep1s0f1:1,roceP2p1s0f1:1"
    assert res["port"]["usable_gbps"] == 200.0


def test_fabric_facts_refuses_an_unknown_interface(tmp_path):
    sysfs, proc = spark(tmp_path)
    res, rc = run_module("fabric_facts", {"sysfs_root": sysfs, "proc_root": proc, "addresses": {},
                                          "fabric_interface": "enp9s0"})
    assert rc != 0 and "enp9s0 is not a function" in res["msg"], res
