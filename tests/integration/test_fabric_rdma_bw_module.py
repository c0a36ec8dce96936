"""fabric_rdma_bw as Ansible runs it (tests/helpers.run_module), its four modes in the order the cluster play uses
them (roles/cluster_fabric/tasks/rdma_bw.yml) on two stand-in DGX Spark trees cabled directly: probe finds the
stand-in ib_write_bw (tests/fixtures/perftest) or names its absence, plan gives two rounds (one per direction), run
has the server and the client of each round exchange over loopback at the rate the test sets, and judge writes
cluster-cables.json - a 13 Gb/s direction failing both nodes with "degraded ConnectX-7 initialisation". A cable with
no ib_write_bw at an end is named and returned as left to the NCCL pair test; check mode sends no traffic."""

import importlib.util
import json
import os
import threading


from helpers import COLLECTION, REPO, run_module

TREES = os.path.join(COLLECTION, "tests", "unit", "plugins", "module_utils", "fabric_trees.py")
_spec = importlib.util.spec_from_file_location("fabric_trees", TREES)
fabric_trees = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fabric_trees)

STAND_IN = os.path.join(REPO, "tests", "fixtures", "perftest", "ib_write_bw")
HOSTS = ["spark-a", "spark-b"]


def facts(tmp_path):
    out = {}
    for host in HOSTS:
        sysfs, proc = str(tmp_path / host), str(tmp_path / (host + "-proc"))
        fabric_trees.spark(sysfs, proc)
        res, rc = run_module("fabric_facts", {"sysfs_root": sysfs, "proc_root": proc, "addresses": {}})
        assert rc == 0, res
        out[host] = res["fabric"]
    return out


def plan_of():
    # Both ends' addresses on loopback: the stand-in's server listens on every address, as the real one does.
    return {"topology": "direct", "links": [], "hosts": dict(
        (h, {"interface": "enp1s0f1np1", "twins": ["enP2p1s0f1np1"], "address": "127.0.0.1/8"}) for h in HOSTS)}


def test_probe_plan_run_judge_names_a_slow_direction(tmp_path, manifest):
    fabrics = facts(tmp_path)
    found, rc = run_module("fabric_rdma_bw", {"mode": "probe", "command": STAND_IN}, check_mode=True)
    assert rc == 0 and found["path"] == STAND_IN, found
    absent, rc = run_module("fabric_rdma_bw", {"mode": "probe", "command": "ib_write_bw_not_here"})
    assert rc == 0 and absent["path"] is None, absent
    args = {"mode": "plan", "command": STAND_IN, "plan": plan_of(), "fabrics": fabrics, "tcp_port": 18751}
    unmeasured, rc = run_module("fabric_rdma_bw", dict(args, probes={"spark-a": STAND_IN, "spark-b": None}))
    assert rc == 0 and unmeasured["rounds"] == [] and unmeasured["unmeasured"] == [
        "spark-a:enp1s0f1np1 - spark-b:enp1s0f1np1: no %s on spark-b (install perftest): the NCCL pair test "
        "measures it" % STAND_IN], unmeasured
    assert [c["name"] for c in unmeasured["pair_cables"]] == ["spark-a:enp1s0f1np1 - spark-b:enp1s0f1np1"]
    link_local = plan_of()
    link_local["hosts"]["spark-b"]["address"] = None
    probes = dict((h, STAND_IN) for h in HOSTS)
    unaddressed, rc = run_module("fabric_rdma_bw", dict(args, plan=link_local, probes=probes))
    assert rc == 0 and unaddressed["unmeasured"] == [
        "spark-a:enp1s0f1np1 - spark-b:enp1s0f1np1: no fabric address on spark-b for ib_write_bw to reach: the NCCL "
        "pair test measures it"] and len(unaddressed["pair_cables"]) == 1, unaddressed
    plan, rc = run_module("fabric_rdma_bw", dict(args, probes=dict((h, STAND_IN) for h in HOSTS)))
    assert rc == 0 and [r["tests"][0]["direction"] for r in plan["rounds"]] == ["spark-a -> spark-b",
                                                                              "spark-b -> spark-a"], plan
    results = []
    for rnd, gbps in zip(plan["rounds"], ("6.5", "97.6")):
        test = rnd["tests"][0]
        run = {"mode": "run", "command": STAND_IN, "runs": test["runs"], "duration": 1}
        served = {}
        server = threading.Thread(
            target=lambda: served.update(r=run_module("fabric_rdma_bw", dict(run, role="server"))))
        server.start()
        client, rc = run_module("fabric_rdma_bw", dict(run, role="client"), env={"SPARKFORGE_IB_WRITE_BW_GBPS": gbps})
        server.join()
        assert rc == 0 and served["r"][1] == 0 and [r["error"] for r in client["results"]] == [None, None], client
        results.append({"cable": test["cable"], "direction": test["direction"], "results": client["results"]})
    skipped, rc = run_module("fabric_rdma_bw", dict(run, role="client"), check_mode=True)
    assert rc == 0 and skipped["results"] == [] and skipped["skipped"], skipped

    spec = manifest["sparkforge_fabric_cable"]
    reports = tmp_path / "reports"
    judged, rc = run_module("fabric_rdma_bw", {
        "mode": "judge", "cables": plan["cables"], "results": results, "fabrics": fabrics, "hosts": HOSTS,
        "cable_checks": spec, "report_dir": str(reports), "unmeasured": []})
    assert rc == 0 and judged["failed_hosts"] == HOSTS, judged
    reason = ("enp1s0f1np1: spark-a -> spark-b: 13 Gb/s, below the floor of 184 Gb/s (degraded ConnectX-7 "
              "initialisation: reboot that node)")
    assert judged["nodes"]["spark-b"]["reasons"] == [reason]
    report = json.loads((reports / "cluster-cables.json").read_text())
    assert report["cables"][0]["measured"] == {"spark-a -> spark-b": 13.0, "spark-b -> spark-a": 195.2}
    assert report["nodes"]["spark-a"]["verdict"] == "fail" and report["nodes"]["spark-a"]["cables"][0]["measured"]


def test_a_duration_out_of_range_is_refused():
    res, rc = run_module("fabric_rdma_bw", {"mode": "probe", "duration": 0})
    assert rc != 0 and res["msg"] == "duration 0 is out of range (from 1 to 60 seconds)", res
