# -*- coding: utf-8 -*-
"""The fabric read from stand-in sysfs trees (module_utils.fabric.fabric): a DGX Spark's twin ConnectX-7
functions per QSFP port and a GH200's InfiniBand HCAs."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import fabric

sys.path.insert(0, os.path.dirname(__file__))
import fabric_trees  # noqa: E402  pylint: disable=wrong-import-position


@pytest.fixture
def spark_tree(tmp_path):
    sysfs, proc = str(tmp_path / "sys"), str(tmp_path / "proc")
    fabric_trees.spark(sysfs, proc, ipv4="169.254.35.62")
    return sysfs, proc


def test_netdevs_from_sysfs(spark_tree):
    nd = fabric.read_netdevs(spark_tree[0])
    assert sorted(nd) == ["enP2p1s0f0np0", "enP2p1s0f1np1", "enP7s7", "enp1s0f0np0", "enp1s0f1np1"]
    up = nd["enp1s0f1np1"]
    assert (up["driver"], up["pci"], up["operstate"], up["speed_mbps"], up["mtu"]) == \
        ("mlx5_core", "0000:01:00.1", "up", 200000, 1500)
    assert up["pcie_gbps"] == 126.0          # 32 GT/s x4, 128b/130b
    down = nd["enP2p1s0f0np0"]
    assert (down["pci"], down["operstate"], down["speed_mbps"], down["carrier"]) == ("0002:01:00.0", "down", None, False)
    assert nd["enP7s7"]["speed_mbps"] == 10000 and not nd["enP7s7"]["virtual"]


def test_rdma_devices_and_ibdev2netdev(spark_tree):
    rdma = fabric.read_rdma(spark_tree[0])
    assert rdma["roceP2p1s0f1"]["netdevs"] == ["enP2p1s0f1np1"]
    assert rdma["roceP2p1s0f1"]["pci"] == "0002:01:00.1"
    port = rdma["rocep1s0f1"]["ports"]["1"]
    assert (port["state"], port["phys_state"], port["link_layer"], port["rate_gbps"]) == \
        ("ACTIVE", "LinkUp", "Ethernet", 200.0)
    assert [g["type"] for g in port["gids"]] == ["IB/RoCE v1", "RoCE v2", "IB/RoCE v1", "RoCE v2"]
    lines = fabric.ibdev2netdev(rdma, fabric.read_netdevs(spark_tree[0]))
    # The same lines NVIDIA's guides show for a cable in the f1 port.
    assert lines == ["roceP2p1s0f0 port 1 ==> enP2p1s0f0np0 (Down)",
                     "roceP2p1s0f1 port 1 ==> enP2p1s0f1np1 (Up)",
                     "rocep1s0f0 port 1 ==> enp1s0f0np0 (Down)",
                     "rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)"]


def test_spark_ports_twins_and_speed(spark_tree):
    facts = fabric.gather(*spark_tree)
    ports = dict((p["name"], p) for p in facts["ports"])
    assert sorted(ports) == ["enp1s0f0np0", "enp1s0f1np1"]
    f1 = ports["enp1s0f1np1"]
    assert f1["netdevs"] == ["enp1s0f1np1", "enP2p1s0f1np1"]
    assert f1["hcas"] == ["rocep1s0f1:1", "roceP2p1s0f1:1"]
    assert f1["cabled"] and not f1["degraded"] and f1["link_layer"] == "RoCE"
    # 200 Gb/s shared by two functions, each behind a PCIe Gen5 x4 link: about 100 each.
    assert (f1["link_gbps"], f1["per_function_gbps"], f1["usable_gbps"]) == (200.0, 100.0, 200.0)
    assert not ports["enp1s0f0np0"]["cabled"]
    assert facts["cabled_ports"] == ["enp1s0f1np1"]
    assert facts["management"] == {"enP7s7": "carries the default route"}
    assert facts["management_speed_gbps"] == 10.0


def test_one_function_down_is_degraded(tmp_path):
    fabric_trees.spark(str(tmp_path), both_functions=False)
    port = fabric.port_of(fabric.ports(fabric.read_netdevs(str(tmp_path)), fabric.read_rdma(str(tmp_path))),
                          "enP2p1s0f1np1")
    assert port["degraded"] and port["active"] == ["enp1s0f1np1"] and port["usable_gbps"] == 100.0
    env, notes = fabric.nccl_env(port)
    assert env["NCCL_IB_HCA"] == "=rocep1s0f1:1"
    assert any("only 1 of the port's 2 functions" in n and "enP2p1s0f1np1" in n for n in notes)


def test_nccl_env_names_both_twins_and_the_gid_index(spark_tree):
    port = fabric.port_of(fabric.gather(*spark_tree)["ports"], "enp1s0f1np1")
    env, notes = fabric.nccl_env(port)
    assert env == {"NCCL_SOCKET_IFNAME": "=enp1s0f1np1", "GLOO_SOCKET_IFNAME": "enp1s0f1np1",
                   "NCCL_IB_HCA": "=rocep1s0f1:1,roceP2p1s0f1:1", "NCCL_IB_DISABLE": "0", "NCCL_IB_GID_INDEX": "3"}
    assert "index 3" in notes[0]


def test_gid_index_left_to_nccl_without_ipv4(tmp_path):
    fabric_trees.spark(str(tmp_path))
    port = fabric.port_of(fabric.ports(fabric.read_netdevs(str(tmp_path)), fabric.read_rdma(str(tmp_path))),
                          "rocep1s0f1")
    env, notes = fabric.nccl_env(port)
    assert "NCCL_IB_GID_INDEX" not in env and "no RoCE v2 IPv4 GID" in notes[0]


def test_no_cable(tmp_path):
    fabric_trees.spark(str(tmp_path), cabled=None)
    facts = fabric.gather(str(tmp_path), str(tmp_path / "noproc"))
    assert facts["cabled_ports"] == [] and facts["management"] == {}
    with pytest.raises(fabric.FabricError):
        fabric.nccl_env(facts["ports"][0])


def test_gh200_infiniband(tmp_path):
    sysfs, proc = str(tmp_path / "sys"), str(tmp_path / "proc")
    fabric_trees.gh200(sysfs, proc, hcas=2, down=(1,))
    facts = fabric.gather(sysfs, proc)
    ports = dict((p["name"], p) for p in facts["ports"])
    assert sorted(ports) == ["ibp16s0", "ibp17s0"]
    ib = ports["ibp16s0"]
    assert (ib["link_layer"], ib["hcas"], ib["usable_gbps"], ib["degraded"]) == ("InfiniBand", ["mlx5_0:1"], 400.0, False)
    assert not ports["ibp17s0"]["cabled"]
    env, notes = fabric.nccl_env(ib)
    assert env["NCCL_IB_HCA"] == "=mlx5_0:1" and "NCCL_IB_GID_INDEX" not in env and "not RoCE" in notes[0]
    assert facts["management"] == {"enP9p1s0": "carries the default route"}


def test_management_from_connection_address(spark_tree):
    mgmt = fabric.management_interfaces(fabric.read_netdevs(spark_tree[0]), [], "10.1.2.3",
                                        {"enp1s0f0np0": ["10.1.2.3"]}, protect=["enP7s7"])
    assert mgmt == {"enp1s0f0np0": "holds 10.1.2.3, the address Ansible connects to", "enP7s7": "named in protect"}


def test_parsers():
    assert fabric.parse_pci("0002:01:00.1") == ("0002", "01", "00", 1)
    assert fabric.parse_pci("virtual") is None
    assert fabric.parse_rate("100 Gb/sec (2X HDR)") == 100.0
    assert fabric.pcie_gbps("16.0 GT/s PCIe", "16") == 252.1
    assert fabric.pcie_gbps("5.0 GT/s", "1") == 4.0
    assert fabric.pcie_gbps(None, "4") is None


SOCKET_LOG = """spark-1:1234:1234 [0] NCCL INFO Bootstrap : Using enP7s7:192.168.1.20<0>
spark-1:1234:1250 [0] NCCL INFO NET/IB : No device found.
spark-1:1234:1250 [0] NCCL INFO NET/Socket : Using [0]enP7s7:192.168.1.20<0>
spark-1:1234:1250 [0] NCCL INFO Using network Socket
"""
IB_ONE_LOG = """spark-1:1234:1250 [0] NCCL INFO NET/IB : Using [0]rocep1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:192.168.100.11<0>
spark-1:1234:1250 [0] NCCL INFO Using network IB
"""
IB_BOTH_LOG = ("spark-1:1:2 [0] NCCL INFO NET/IB : Using [0]rocep1s0f1:1/RoCE [1]roceP2p1s0f1:1/RoCE [RO]; "
               "OOB enp1s0f1np1:192.168.100.11<0>\nspark-1:1:2 [0] NCCL INFO Using network IB\n")


def test_nccl_lines_say_the_transport():
    assert fabric.nccl_transport(fabric.nccl_net_lines(SOCKET_LOG)) == \
        {"transport": "Socket", "devices": [], "sockets": ["enP7s7"], "channels": []}
    assert fabric.nccl_transport(fabric.nccl_net_lines(IB_BOTH_LOG)) == \
        {"transport": "IB", "devices": ["rocep1s0f1:1", "roceP2p1s0f1:1"], "sockets": [], "channels": []}
    # Older NCCL prints no "Using network": the NET/IB line decides.
    assert fabric.nccl_transport(fabric.nccl_net_lines(IB_ONE_LOG.splitlines()[0]))["transport"] == "IB"


def test_diagnose_slow_pairs():
    lines = fabric.nccl_net_lines(SOCKET_LOG)
    why = fabric.diagnose(1.1, lines, 200.0, 100.0, 2, 10.0)
    assert why[0].startswith("NCCL used sockets, not RoCE/InfiniBand (NET/Socket on enP7s7)")
    assert "management-port speed (10 Gb/s)" in why[1]
    why = fabric.diagnose(11.5, fabric.nccl_net_lines(IB_ONE_LOG), 200.0, 100.0, 2, 10.0)
    assert why[0].startswith("NCCL used rocep1s0f1:1 only - 1 of the port's 2 functions")
    assert "one function's speed (100 of the port's 200 Gb/s)" in why[1]
    assert fabric.diagnose(23.0, fabric.nccl_net_lines(IB_BOTH_LOG), 200.0, 100.0, 2, 10.0) == []
    # Far below every rate (a port slowed to 1 Mb/s): no path is named, neither the management port nor one function.
    assert fabric.diagnose(0.000125, fabric.nccl_net_lines(IB_BOTH_LOG), 200.0, 100.0, 2, 10.0) == []
    assert fabric.diagnose(2.0, fabric.nccl_net_lines(IB_BOTH_LOG), 200.0, 100.0, 2, 10.0) == []


def test_xhost_summary_says_why_a_pair_is_slow():
    from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import xhost
    lines = fabric.nccl_net_lines(SOCKET_LOG)
    pair = {"a": "s1", "b": "s2", "bytes": 1 << 28, "gbs": 1.1, "seconds": 1.0, "exact": True}
    fab = {"per_function_gbps": 100.0, "functions": 2, "management_gbps": 10.0, "nccl_net": lines}
    results = {"s1": dict(fab, status="ok", backend="nccl", checks=[], pairs=[pair]),
               "s2": dict(fab, status="ok", backend="nccl")}
    summary = xhost.summarize(results, ["s1", "s2"], {"s1": 200.0, "s2": 200.0}, 0.5)
    assert summary["failed_hosts"] == ["s1", "s2"]
    assert "NCCL used sockets, not RoCE/InfiniBand" in summary["per_host"]["s1"]["reason"]
    assert summary["per_host"]["s2"]["diagnosis"][1].startswith("8.8 Gb/s is management-port speed")
    assert "- s1: NCCL used sockets" in xhost.render_markdown(summary)


def test_grace_compute_and_storage_hcas_are_not_twins(tmp_path):
    """Issue 36: a GH200 lays every root port in its own PCI domain, each card at 01:00.0, so a compute HCA
    at 0000:01:00.0 and a storage HCA at 0002:01:00.0 share bus/device/function and driver like a Spark's
    twins. Their sys_image_guids differ (one per adapter): two ports, each HCA alone in NCCL_IB_HCA."""
    sysfs, proc = str(tmp_path / "sys"), str(tmp_path / "proc")
    fabric_trees.gh200_grace(sysfs, proc, storage=True)
    facts = fabric.gather(sysfs, proc)
    ports = dict((p["name"], p) for p in facts["ports"])
    assert sorted(ports) == ["ibP2p1s0", "ibp1s0"]
    compute = ports["ibp1s0"]
    assert (compute["hcas"], compute["netdevs"], compute["degraded"]) == (["mlx5_0:1"], ["ibp1s0"], False)
    assert ports["ibP2p1s0"]["hcas"] == ["mlx5_1:1"]
    env = fabric.nccl_env(compute, "ibp1s0")[0]
    assert env["NCCL_IB_HCA"] == "=mlx5_0:1"
    assert sorted(facts["cabled_ports"]) == ["ibP2p1s0", "ibp1s0"]


def test_gh200_managed_over_an_rdma_ethernet_port(tmp_path):
    """The management port is a RoCE-capable ConnectX port at 0002:01:00.0, the InfiniBand HCA at
    0000:01:00.0: the IB port is the one cabled fabric port, the Ethernet one stays management."""
    sysfs, proc = str(tmp_path / "sys"), str(tmp_path / "proc")
    fabric_trees.gh200_grace(sysfs, proc, roce_management=True)
    facts = fabric.gather(sysfs, proc)
    ports = dict((p["name"], p) for p in facts["ports"])
    assert ports["ibp1s0"]["management"] == [] and ports["ibp1s0"]["hcas"] == ["mlx5_0:1"]
    assert ports["enP2p1s0f0np0"]["management"] == ["enP2p1s0f0np0"]
    assert facts["cabled_ports"] == ["ibp1s0"]
    assert facts["management"] == {"enP2p1s0f0np0": "carries the default route"}


def test_twins_are_what_the_adapter_says():
    """twin_key: the same sys_image_guid and function number are twins whatever the domain; another adapter
    at the same bus/device/function is not; without a GUID the full address (domain included) decides."""
    spark_f1 = {"name": "rocep1s0f1", "sys_image_guid": "4821:0b03:0096:04cb"}
    assert fabric.twin_key(spark_f1, "0000:01:00.1") == fabric.twin_key(
        dict(spark_f1, name="roceP2p1s0f1"), "0002:01:00.1")
    assert fabric.twin_key(spark_f1, "0000:01:00.1") != fabric.twin_key(spark_f1, "0000:01:00.0")
    assert fabric.twin_key({"name": "mlx5_0", "sys_image_guid": "a088:c203:0010:0000"}, "0000:01:00.0") != \
        fabric.twin_key({"name": "mlx5_1", "sys_image_guid": "a088:c203:0020:0000"}, "0002:01:00.0")
    assert fabric.twin_key({"name": "x"}, "0000:01:00.0") != fabric.twin_key({"name": "y"}, "0002:01:00.0")
    # Soft RoCE prints an all-zero GUID: it says nothing about the hardware.
    assert fabric.twin_key({"name": "rxe0", "sys_image_guid": None}, "0000:01:00.0") == ("pci", "0000:01:00.0")


def test_spark_without_guids_keeps_functions_apart(tmp_path):
    fabric_trees.spark(str(tmp_path))
    for name in os.listdir(str(tmp_path / "class" / "infiniband")):
        os.unlink(str(tmp_path / "class" / "infiniband" / name / "sys_image_guid"))
    plist = fabric.ports(fabric.read_netdevs(str(tmp_path)), fabric.read_rdma(str(tmp_path)))
    assert sorted(p["name"] for p in plist) == ["enP2p1s0f0np0", "enP2p1s0f1np1", "enp1s0f0np0", "enp1s0f1np1"]
    assert all(len(p["functions"]) == 1 for p in plist)
