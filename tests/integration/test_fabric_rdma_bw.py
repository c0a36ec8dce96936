# -*- coding: utf-8 -*-
"""Each cable's RDMA bandwidth per direction (module_utils.fabric.rdma_bw): ib_write_bw's report parsed in the
format perftest prints (tests/fixtures/perftest/README.md cites it); the cables of a ring and of a direct pair read
from fabric_plan's result over stand-in DGX Spark trees; rounds where no node is in two tests; both twins of a
direction run at once through the stand-in ib_write_bw (a real TCP exchange on loopback) and summed; the sum judged
by cable.cable_verdict against the manifest's floor - 13 Gb/s degraded ConnectX-7 initialisation, 119 a degraded
cable, about half one function, 195 a pass - and a direction that did not come back failing safe."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys
import threading

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import fabric, rdma_bw
from helpers import COLLECTION, REPO

# The stand-in sysfs trees are the collection's unit-test data (its fabric tests build the same hosts).
sys.path.insert(0, os.path.join(COLLECTION, "tests", "unit", "plugins", "module_utils"))
import fabric_trees  # noqa: E402  pylint: disable=wrong-import-position

STAND_IN = os.path.join(REPO, "tests", "fixtures", "perftest", "ib_write_bw")

RULE = "-" * 87
# A client's report as perftest prints it with --report_gbits -D (peak 0.00 in duration mode) and without -F (the
# CPU-frequency warning between header and row).
REPORT_G = "\n".join([
    RULE, "                    RDMA_Write BW Test", " Dual-port       : OFF\t\tDevice         : rocep1s0f1",
    " Link type       : Ethernet", RULE,
    " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]",
    "Conflicting CPU frequency values detected: 1500.000000 != 3300.016000. CPU Frequency is not max.",
    " 65536      560845           0.00               98.02  \t\t   0.186950", RULE])
REPORT_MB = "\n".join([
    " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]",
    " 65536      5000             11682.94            11682.06\t\t   0.186913", RULE])


@pytest.fixture(scope="module")
def spec(manifest):
    return manifest["sparkforge_fabric_cable"]


def test_the_report_is_read_in_either_unit_and_a_missing_table_is_named():
    assert rdma_bw.parse(REPORT_G) == {"bytes": 65536, "iterations": 560845, "peak_gbps": 0.0, "average_gbps": 98.02}
    # perftest's MB is 2^20 bytes: 11682.06 MiB/s is 98.0 Gb/s.
    assert rdma_bw.parse(REPORT_MB)["average_gbps"] == 98.0
    with pytest.raises(rdma_bw.RdmaBwError, match="no ib_write_bw result table.*Couldn't connect to 10.0.0.2:18515"):
        rdma_bw.parse("Couldn't connect to 10.0.0.2:18515\nUnable to open file descriptor for socket connection\n")
    with pytest.raises(rdma_bw.RdmaBwError, match="header but no result row"):
        rdma_bw.parse(REPORT_G.split("Conflicting")[0] + RULE)


def spark_facts(tmp_path, name, cabled="both"):
    root = str(tmp_path / name)
    fabric_trees.spark(root, cabled=cabled)
    return {"ports": fabric.ports(fabric.read_netdevs(root), fabric.read_rdma(root))}


def ring_plan(order):
    """fabric_plan's links for a ring: node i's port 0 to node i+1's port 1, a subnet per cable and twin."""
    links = []
    for i, host in enumerate(order):
        peer = order[(i + 1) % len(order)]
        for k, (a_if, b_if) in enumerate((("enp1s0f0np0", "enp1s0f1np1"), ("enP2p1s0f0np0", "enP2p1s0f1np1"))):
            net = "10.20.%d" % (2 * i + k)
            links.append({"subnet": net + ".0/24", "a": {"host": host, "interface": a_if, "address": net + ".1/24"},
                          "b": {"host": peer, "interface": b_if, "address": net + ".2/24"}})
    return {"topology": "ring", "links": links, "hosts": dict((h, {}) for h in order)}


def test_a_ring_of_three_is_three_cables_in_six_rounds(tmp_path):
    order = ["spark-1", "spark-2", "spark-3"]
    facts = dict((h, spark_facts(tmp_path, h)) for h in order)
    cables = rdma_bw.cables(ring_plan(order), facts)
    assert [c["name"] for c in cables] == ["spark-1:enp1s0f0np0 - spark-2:enp1s0f1np1",
                                           "spark-2:enp1s0f0np0 - spark-3:enp1s0f1np1",
                                           "spark-3:enp1s0f0np0 - spark-1:enp1s0f1np1"]
    first = cables[0]["twins"]
    assert [(t["a"]["rdma"], t["b"]["rdma"], t["b"]["address"]) for t in first] == [
        ("rocep1s0f0", "rocep1s0f1", "10.20.0.2"), ("roceP2p1s0f0", "roceP2p1s0f1", "10.20.1.2")]
    rounds = rdma_bw.rounds(cables, 18515)
    # Every pair of cables in a ring of three shares a node: one test a round, each cable both ways.
    assert [len(r["tests"]) for r in rounds] == [1] * 6
    assert sorted((t["cable"], t["direction"]) for r in rounds for t in r["tests"]) == sorted(
        (c["name"], d) for c in cables for d in (rdma_bw.direction(c["a"]["host"], c["b"]["host"]),
                                                  rdma_bw.direction(c["b"]["host"], c["a"]["host"])))
    test = rounds[0]["tests"][0]
    assert test["direction"] == "spark-1 -> spark-2"
    assert rdma_bw.argv("ib_write_bw", "client", test["runs"][1], 5) == [
        "ib_write_bw", "-d", "roceP2p1s0f0", "-i", "1", "-p", "18516", "-D", "5", "-F", "--report_gbits", "10.20.1.2"]
    assert rdma_bw.argv("ib_write_bw", "server", test["runs"][1], 5)[:3] == ["ib_write_bw", "-d", "roceP2p1s0f1"]


def test_a_ring_of_four_runs_two_cables_at_once_and_a_switch_has_no_cable_between_nodes(tmp_path):
    order = ["s1", "s2", "s3", "s4"]
    facts = dict((h, spark_facts(tmp_path, h)) for h in order)
    rounds = rdma_bw.rounds(rdma_bw.cables(ring_plan(order), facts), 18515)
    assert [len(r["tests"]) for r in rounds] == [2, 2, 2, 2]
    for r in rounds:
        hosts = [h for t in r["tests"] for h in (t["client"], t["server"])]
        assert len(hosts) == len(set(hosts)) == len(r["roles"])
    assert rdma_bw.cables({"topology": "switch", "hosts": {"s1": {}, "s2": {}, "s3": {}}}, facts) == []


def direct(tmp_path):
    facts = dict((h, spark_facts(tmp_path, h, "f1")) for h in ("spark-a", "spark-b"))
    plan = {"topology": "direct", "links": [], "hosts": dict(
        (h, {"interface": "enp1s0f1np1", "twins": ["enP2p1s0f1np1"], "address": "192.168.100.%d/24" % n})
        for n, h in ((10, "spark-a"), (11, "spark-b")))}
    return rdma_bw.cables(plan, facts), facts


def test_a_direct_cable_measures_both_twins_over_the_one_address(tmp_path):
    cables, _facts = direct(tmp_path)
    assert len(cables) == 1 and cables[0]["name"] == "spark-a:enp1s0f1np1 - spark-b:enp1s0f1np1"
    assert [(t["b"]["rdma"], t["b"]["address"]) for t in cables[0]["twins"]] == [
        ("rocep1s0f1", "192.168.100.11"), ("roceP2p1s0f1", "192.168.100.11")]
    assert [len(r["tests"]) for r in rdma_bw.rounds(cables, 18515)] == [1, 1]


def loopback(runs):
    return [dict(r, address="127.0.0.1") for r in runs]


def twin_runs(port):
    return [{"tcp_port": port + k, "client_rdma": "c%d" % k, "client_ib_port": "1", "server_rdma": "s%d" % k,
             "server_ib_port": "1", "address": "127.0.0.1"} for k in range(2)]


def test_both_twins_run_at_once_through_the_stand_in_and_are_summed(monkeypatch):
    runs = twin_runs(18731)
    monkeypatch.setenv("SPARKFORGE_IB_WRITE_BW_GBPS", "97.6")
    monkeypatch.setenv("SPARKFORGE_IB_WRITE_BW_GBPS_c1", "97.4")
    server = {}
    thread = threading.Thread(target=lambda: server.update(r=rdma_bw.run_role(STAND_IN, "server", runs, 1, 10)))
    # The client may start before its server listens: it retries, as in a round where both ends start at once.
    thread.start()
    client = rdma_bw.run_role(STAND_IN, "client", runs, 1, 10)
    thread.join()
    assert [(r["rdma"], r["average_gbps"], r["error"]) for r in client] == [("c0", 97.6, None), ("c1", 97.4, None)]
    assert rdma_bw.measured_direction(client) == 195.0
    assert [(r["rdma"], r["rc"]) for r in server["r"]] == [("s0", 0), ("s1", 0)]


def test_a_server_no_client_reaches_is_ended():
    server = rdma_bw.run_role(STAND_IN, "server", twin_runs(18735)[:1], 0, 0, grace=1)
    assert server[0]["rc"] is None and "no result within 1 s: ended" in server[0]["output"]


def test_a_client_whose_server_never_listens_comes_back_unmeasured():
    runs = [{"tcp_port": 18741, "client_rdma": "c0", "client_ib_port": "1", "server_rdma": "s0",
             "server_ib_port": "1", "address": "127.0.0.1"}]
    client = rdma_bw.run_role(STAND_IN, "client", runs, 1, 1, grace=1)
    assert client[0]["average_gbps"] is None and "Couldn't connect to 127.0.0.1:18741" in client[0]["error"]
    assert rdma_bw.measured_direction(client) is None


def client_result(cable, direction_, per_twin):
    return {"cable": cable, "direction": direction_,
            "results": [{"rdma": "r%d" % k, "average_gbps": g, "error": None if g is not None else "no table"}
                        for k, g in enumerate(per_twin)]}


@pytest.mark.parametrize("twins, verdict, cause", [
    ((6.5, 6.5), "fail", "degraded ConnectX-7 initialisation: reboot that node"),
    ((59.5, 59.5), "fail", "a degraded cable link: reboot both ends"),
    ((97.6, 0.0), "fail", "about half the rate: one HCA function of the port's pair only"),
    ((97.6, 97.4), "pass", None)])
def test_each_direction_is_judged_against_the_floor_with_its_cause(tmp_path, spec, twins, verdict, cause):
    cables, facts = direct(tmp_path)
    name = cables[0]["name"]
    results = [client_result(name, "spark-a -> spark-b", twins),
               client_result(name, "spark-b -> spark-a", (97.6, 97.6))]
    out = rdma_bw.judge(cables, results, facts, spec, ["spark-a", "spark-b"])
    assert out["cables"][0]["measured"] == {"spark-a -> spark-b": round(sum(twins), 2), "spark-b -> spark-a": 195.2}
    for host in ("spark-a", "spark-b"):
        node = out["nodes"][host]
        assert node["verdict"] == verdict and node["cables"][0]["port"] == "enp1s0f1np1"
        if cause:
            assert node["reasons"] == ["enp1s0f1np1: spark-a -> spark-b: %g Gb/s, below the floor of 184 Gb/s (%s)"
                                       % (sum(twins), cause)]
    assert out["failed_hosts"] == ([] if verdict == "pass" else ["spark-a", "spark-b"])


def test_a_direction_that_did_not_come_back_fails_safe_named(tmp_path, spec):
    cables, facts = direct(tmp_path)
    name = cables[0]["name"]
    # spark-b -> spark-a never reported; spark-a -> spark-b lost one twin's table.
    out = rdma_bw.judge(cables, [client_result(name, "spark-a -> spark-b", (97.6, None))], facts, spec,
                        ["spark-a", "spark-b"])
    assert out["cables"][0]["measured"] == {"spark-a -> spark-b": None, "spark-b -> spark-a": None}
    assert out["nodes"]["spark-a"]["reasons"] == [
        "enp1s0f1np1: spark-a -> spark-b: no bandwidth measured (a test that did not come back fails); "
        "spark-b -> spark-a: no bandwidth measured (a test that did not come back fails)"]
    assert out["cables"][0]["tests"][0]["results"][1]["error"] == "no table"


def test_without_ib_write_bw_the_nccl_pair_figure_judges_the_cable(tmp_path, spec):
    cables, facts = direct(tmp_path)
    # The pair rounds' judged pairs (xhost): the best size counts, GB/s x 8 is Gb/s.
    pairs = [{"a": "spark-a", "b": "spark-b", "bytes": 67108864, "gbs": 14.1},
             {"a": "spark-a", "b": "spark-b", "bytes": 268435456, "gbs": 14.9}]
    out = rdma_bw.judge([], [], facts, spec, ["spark-a", "spark-b"], cables, pairs)
    assert out["cables"][0]["measured"] == {"spark-a <-> spark-b (NCCL pair test)": 119.2}
    assert out["nodes"]["spark-b"]["reasons"] == [
        "enp1s0f1np1: spark-a <-> spark-b (NCCL pair test): 119.2 Gb/s, below the floor of 184 Gb/s "
        "(a degraded cable link: reboot both ends)"]
    healthy = rdma_bw.judge([], [], facts, spec, ["spark-a", "spark-b"], cables, [dict(pairs[1], gbs=24.4)])
    assert healthy["failed_hosts"] == [] and healthy["cables"][0]["measured"] == {
        "spark-a <-> spark-b (NCCL pair test)": 195.2}
    # A pair that did not run fails safe; without the pairs (before the check) the cable is judged from sysfs only.
    assert rdma_bw.judge([], [], facts, spec, ["spark-a"], cables, [])["failed_hosts"] == ["spark-a"]
    assert rdma_bw.judge([], [], facts, spec, ["spark-a"], cables)["failed_hosts"] == []
