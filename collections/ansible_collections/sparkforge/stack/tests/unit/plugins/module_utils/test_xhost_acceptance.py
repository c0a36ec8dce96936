# -*- coding: utf-8 -*-
"""The cross-host acceptance (module_utils.fabric.acceptance, and xhost.summarize): the collective over all nodes
judged as nccl-tests reports it (busbw against the slowest node's link), the thresholds and their ranges (docs/bad-inputs.md rows
A01..), the memory bound, and the verdict per node - its pairs, its transport, its port speed, parity - on
fabricated results; then the module writing xhost.json and xhost-NODE.json. The real SCRIPT with gloo:
tests/e2e/test_xhost_rounds.py."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest
import yaml

from ansible_collections.sparkforge.stack.tests.unit.utils.harness import COLLECTION, run_module

from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import acceptance, fabric, xhost


SOCKETS_LOG = """\
x3:4711:4711 [0] NCCL INFO NET/IB : No device found.
x3:4711:4711 [0] NCCL INFO NET/Socket : Using [0]enP7s7:192.168.1.13<0>
x3:4711:4711 [0] NCCL INFO Using network Socket
x3:4711:4760 [0] NCCL INFO Channel 00/0 : 2[0] -> 0[0] [send] via NET/Socket/0
"""


def pair(a, b, gbs, size=1 << 26):
    return {"a": a, "b": b, "bytes": size, "gbs": gbs, "seconds": 1.0, "exact": True}


def raw(op, size, seconds, exact=None):
    """What SCRIPT's rank 0 reports for one collective: each node's seconds per run and whether it was exact."""
    return {"op": op, "bytes": size, "iters": 20, "warmup": 5, "seconds": seconds,
            "exact": exact or dict((h, True) for h in seconds)}


def test_busbw_as_nccl_tests_defines_it():
    """4 nodes. all_reduce of 1e9 bytes in 0.1 s: algbw 10 GB/s, busbw 10 x 2(4-1)/4 = 15. all_gather of 2.5e8 bytes
    per node (1e9 gathered) in 0.1 s: algbw 10 (of the total), busbw 10 x 3/4 = 7.5. The slowest rank's time
    counts (0.1 s, not the others' 0.08)."""
    n = 4
    hosts = ["x%d" % i for i in range(n)]
    times = dict((h, 0.08) for h in hosts)
    times["x2"] = 0.1
    rows = acceptance.judge_collectives([raw("all_reduce", 10 ** 9, times), raw("all_gather", 25 * 10 ** 7, times)],
                                        n, 200.0, 0.5)
    ar, ag = rows
    assert (ar["algbw"], ar["busbw"], ar["total_bytes"], ar["seconds"]) == (10.0, 15.0, 10 ** 9, 0.1)
    assert (ag["algbw"], ag["busbw"], ag["total_bytes"]) == (10.0, 7.5, 10 ** 9)
    # Against 200 Gb/s = 25 GB/s: all_reduce 60% passes, all_gather 30% is below 50%.
    assert ar["pct_of_link"] == 60.0 and not ar["slow"] and ar["why"] is None and ar["exact"]
    assert ag["pct_of_link"] == 30.0 and ag["slow"]
    assert ag["why"] == "busbw 7.500 GB/s is 30.0% of the slowest node's 200 Gb/s link (25.000 GB/s), below 50%"
    # Two nodes: all_reduce busbw = algbw (2 x 1/2), all_gather busbw = algbw / 2.
    two = acceptance.judge_collectives([raw("all_reduce", 10 ** 9, {"a": 0.1, "b": 0.1}),
                                        raw("all_gather", 10 ** 9, {"a": 0.2, "b": 0.2})], 2, None, 0.5)
    got = [(r["algbw"], r["busbw"], r["pct_of_link"], r["slow"]) for r in two]
    # No node's link rate: nothing proves the collective fast, so it is not passed (a missing measurement fails safe).
    assert got == [(10.0, 10.0, None, True), (10.0, 5.0, None, True)]
    assert two[0]["why"] == ("no node's link rate to judge it against (set xhost_link_speed_gbps, or give "
                             "xhost_ifname or xhost_hca whose rate sysfs reports)")
    # Without a fraction to judge by, there is nothing to miss.
    assert not acceptance.judge_collectives([raw("all_reduce", 10 ** 9, {"a": 0.1, "b": 0.1})], 2, None, None)[0][
        "slow"]


def test_a_result_not_exact_names_its_node():
    # No busbw threshold: only the exactness judges here.
    rows = acceptance.judge_collectives([raw("all_gather", 1 << 20, {"a": 0.1, "b": 0.1, "c": 0.1},
                                        {"a": True, "b": True, "c": False})], 3, None, None)
    assert not rows[0]["exact"] and rows[0]["not_exact_on"] == ["c"] and "result not exact on c" in rows[0]["why"]
    summary = {"hosts": ["a", "b", "c"], "per_host": {}, "judged": {"pairs": []}, "collectives": rows}
    verdicts = dict((v["node"], v) for v in acceptance.node_verdicts(summary))
    assert verdicts["c"]["verdict"] == "fail" and verdicts["c"]["reasons"] == ["its all_gather result was not exact"]
    assert verdicts["a"]["verdict"] == "pass" and verdicts["a"]["reasons"] == []


def four_node_run(pairs, collectives, nccl=None, speeds=None):
    hosts = ["x1", "x2", "x3", "x4"]
    speeds = speeds or dict((h, 200.0) for h in hosts)
    first = {"status": "ok", "backend": "nccl", "checks": [{"name": "all_reduce", "status": "pass", "detail": "-"}],
             "pairs": pairs, "collectives": collectives}
    nccl = nccl or {}
    results = dict((h, {"status": "ok", "link_gbps": speeds[h], "nccl_net": fabric.nccl_net_lines(nccl.get(h, ""))})
                   for h in hosts)
    results["x1"].update(first)
    return hosts, results, speeds


def all_pairs(hosts, slow_node, fast=20.0, slow=2.0):
    return [pair(a, b, slow if slow_node in (a, b) else fast) for i, a in enumerate(hosts) for b in hosts[i + 1:]]


def test_the_bad_node_is_named_with_its_pairs_and_its_transport():
    """x3's three pairs are slow (2 of 25 GB/s) while the others' are fine, and its NCCL lines say sockets: x3
    fails with both reasons; the collective, slow too, is put on x3 and no other node fails."""
    hosts = ["x1", "x2", "x3", "x4"]
    times = dict((h, 1.0) for h in hosts)
    hosts, results, speeds = four_node_run(all_pairs(hosts, "x3"),
                                           [raw("all_reduce", 10 ** 9, times), raw("all_gather", 10 ** 9, times)],
                                           nccl={"x3": SOCKETS_LOG})
    s = xhost.summarize(results, hosts, speeds, 0.5, min_busbw_fraction=0.5)
    verdicts = dict((v["node"], v) for v in s["nodes"])
    assert s["failed_hosts"] == ["x3"] and not s["passed"]
    assert [verdicts[h]["verdict"] for h in hosts] == ["pass", "pass", "fail", "pass"]
    why = "; ".join(verdicts["x3"]["reasons"])
    assert "8.0% of the 200 Gb/s link, below 50%" in why
    assert "NCCL used sockets, not RoCE/InfiniBand (NET/Socket on enP7s7)" in why
    assert "the collective across all nodes is slow (all_reduce of 1000000000 bytes per node: busbw 1.500 GB/s" in why
    assert s["verdict"] == {"verdict": "fail", "failed": ["x3"], "not_checked": [],
                            "reasons": ["x3: " + "; ".join(verdicts["x3"]["reasons"])]}
    assert s["collective_link_gbps"] == 200.0 and [r["op"] for r in s["collectives"]] == ["all_reduce", "all_gather"]
    md = xhost.render_markdown(s)
    assert "| all_reduce | 1000000000 | 1000000000 | 1.000000 | 1.000 | 1.500 | 6.0 | yes | SLOW |" in md
    assert "| x3 | fail | " in md and "| x1 | pass | - |" in md
    cross = xhost.cross_host(s)
    assert cross["collectives"] == s["collectives"] and cross["nodes"] == s["nodes"]


def test_a_slow_collective_no_node_explains_fails_every_node():
    hosts = ["x1", "x2", "x3", "x4"]
    times = dict((h, 1.0) for h in hosts)
    hosts, results, speeds = four_node_run(all_pairs(hosts, None), [raw("all_reduce", 10 ** 9, times)])
    s = xhost.summarize(results, hosts, speeds, 0.5, min_busbw_fraction=0.5)
    assert s["failed_hosts"] == hosts
    for v in s["nodes"]:
        assert v["verdict"] == "fail" and v["reasons"][0].endswith(
            ": no node's pairs, transport or port isolate it"), v
    # Under a lower threshold it passes, every node.
    s = xhost.summarize(results, hosts, speeds, 0.5, min_busbw_fraction=0.05)
    assert s["passed"] and [v["verdict"] for v in s["nodes"]] == ["pass"] * 4
    assert s["verdict"] == {"verdict": "pass", "failed": [], "not_checked": [], "reasons": []}


def test_a_port_below_its_rate_or_below_the_others_fails_its_node():
    assert acceptance.port_reasons({"a": 200.0, "b": 100.0, "c": 200.0}) == {
        "b": ["its link runs at 100 Gb/s, where the other nodes' run at 200 Gb/s"]}
    assert acceptance.port_reasons({"a": 200.0, "b": 100.0}, rated=200.0) == {
        "b": ["its link runs at 100 Gb/s, below its rated 200 Gb/s"]}
    # Two nodes at different speeds and no rate: neither is "most".
    assert acceptance.port_reasons({"a": 200.0, "b": 100.0}) == {}
    assert acceptance.port_reasons({"a": None, "b": 200.0}) == {}
    hosts = ["x1", "x2", "x3", "x4"]
    speeds = {"x1": 200.0, "x2": 200.0, "x3": 200.0, "x4": 100.0}
    hosts, results, speeds = four_node_run(all_pairs(hosts, None, fast=10.0), [], speeds=speeds)
    s = xhost.summarize(results, hosts, speeds, 0.5, min_busbw_fraction=0.5)
    assert s["failed_hosts"] == ["x4"] and s["per_host"]["x4"]["status"] == "failed"
    assert s["per_host"]["x4"]["reason"] == "its link runs at 100 Gb/s, where the other nodes' run at 200 Gb/s"


ROCE_LOG = """\
x1:5120:5120 [0] NCCL INFO NET/IB : Using [0]rocep1s0f0:1/RoCE [1]roceP2p1s0f0:1/RoCE [RO]; OOB enp1s0f0np0:10.0.0.1<0>
x1:5120:5120 [0] NCCL INFO Using network IB
x1:5120:5160 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA
"""


def test_a_node_whose_nccl_went_over_sockets_is_named_though_its_pairs_pass():
    """x3's NCCL lines say NET/Socket where x1, x2 and x4 used RoCE; its pairs are not below the threshold (a
    generous one), yet x3 is the odd node, named with NCCL's word."""
    hosts = ["x1", "x2", "x3", "x4"]
    nccl = dict((h, ROCE_LOG) for h in hosts)
    nccl["x3"] = SOCKETS_LOG
    hosts, results, speeds = four_node_run(all_pairs(hosts, None), [], nccl=nccl)
    s = xhost.summarize(results, hosts, speeds, 0.5, min_busbw_fraction=0.5)
    assert s["failed_hosts"] == ["x3"], s["nodes"]
    assert s["per_host"]["x3"]["reasons"] == [
        "NCCL went over sockets (NET/Socket on enP7s7) where the other nodes used RoCE/InfiniBand: check "
        "NCCL_IB_HCA and NCCL_IB_DISABLE on it"]
    # Sockets everywhere (gloo, or a cluster without RDMA): no node is odd.
    assert acceptance.transport_reasons(dict((h, fabric.nccl_net_lines(SOCKETS_LOG)) for h in hosts)) == {}
    assert acceptance.transport_reasons({"a": [], "b": None}) == {}


def test_a_ring_all_on_sockets_fails_every_node_where_rdma_was_expected():
    """Every node's fabric port has RDMA up (expect_rdma, backend nccl) yet every NCCL went over sockets: no node is
    the odd one, and still each fails, named with the transport NCCL reported. A node that printed no NCCL line
    fails too (the transport is unproven), and gloo, which never uses RDMA, is not judged on it."""
    hosts = ["x1", "x2", "x3", "x4"]
    hosts, results, speeds = four_node_run(all_pairs(hosts, None), [], nccl=dict((h, SOCKETS_LOG) for h in hosts))
    for h in hosts:
        results[h].update(expect_rdma=True, backend="nccl")
    results["x4"]["nccl_net"] = []
    s = xhost.summarize(results, hosts, speeds, 0.5, min_busbw_fraction=0.5)
    assert sorted(s["failed_hosts"]) == hosts, s["nodes"]
    assert s["per_host"]["x2"]["reasons"] == [
        "NCCL went over sockets (NET/Socket on enP7s7) though the fabric port has RDMA up: check NCCL_IB_HCA, "
        "NCCL_IB_DISABLE and that the RDMA functions are active on it"]
    assert s["per_host"]["x4"]["reasons"][0].startswith("NCCL printed no transport line")
    # RoCE where RDMA was expected passes; gloo is not held to RDMA.
    hosts, results, speeds = four_node_run(all_pairs(hosts, None), [], nccl=dict((h, ROCE_LOG) for h in hosts))
    for h in hosts:
        results[h].update(expect_rdma=True, backend="nccl")
    assert xhost.summarize(results, hosts, speeds, 0.5)["failed_hosts"] == []
    for h in hosts:
        results[h].update(backend="gloo", nccl_net=[])
    assert xhost.summarize(results, hosts, speeds, 0.5)["failed_hosts"] == []


def fake_python(tmp_path, body):
    """A stand-in for the nodes' python: run_script calls it as ``python -c SCRIPT CONFIG``; this one ignores both,
    prints what NCCL_DEBUG=INFO prints when it connects (SOCKETS_LOG) on stderr, then does ``body``."""
    path = tmp_path / "python"
    path.write_text("#!/bin/sh\ncat >&2 <<'EOF'\n%sEOF\n%s\n" % (SOCKETS_LOG, body))
    path.chmod(0o755)
    return str(path)


def test_nccl_s_lines_are_kept_when_the_check_times_out_or_ends_without_a_result(tmp_path):
    """A node on sockets among RoCE peers cannot connect (each NCCL process picks its own network): its check hangs
    or dies after NCCL printed its transport. Those lines stay in the result, so the verdict can name the cause."""
    result, tail = xhost.run_script(fake_python(tmp_path, "exec sleep 30"), {}, 2)
    assert result["status"] == "timeout" and result["reason"] == "the check did not end within 2 s", result
    assert "Using network Socket" in result["nccl_net"], result
    assert fabric.nccl_transport(result["nccl_net"])["transport"] == "Socket"
    assert "NET/Socket" in tail
    result, tail = xhost.run_script(fake_python(tmp_path, "echo 'RuntimeError: NCCL error: remote process exited' >&2"
                                                          "; exit 1"), {}, 30)
    assert result["status"] == "error", result
    # The reason is the error, not NCCL's INFO lines before it.
    assert result["reason"] == ("the check ended (exit 1) without a result: RuntimeError: NCCL error: remote "
                                "process exited"), result
    assert "Using network Socket" in result["nccl_net"], result


def test_the_node_on_sockets_among_roce_peers_is_named_when_the_collective_never_ends():
    """The mixed fabric as it fails on real nodes: x3's NCCL went over sockets (NCCL_IB_DISABLE=1 on it) and died
    without a result; x1, x2 and x4 on RoCE waited until their timeout. Every node fails (none ran the collective),
    and x3 is named with NCCL's word on its transport."""
    hosts = ["x1", "x2", "x3", "x4"]
    results = dict((h, {"status": "timeout", "reason": "the check did not end within 300 s", "link_gbps": 200.0,
                        "backend": "nccl", "expect_rdma": True, "nccl_net": fabric.nccl_net_lines(ROCE_LOG)})
                   for h in hosts)
    results["x3"].update(status="error", reason="the check ended (exit 1) without a result: RuntimeError: NCCL "
                         "error", nccl_net=fabric.nccl_net_lines(SOCKETS_LOG))
    s = xhost.summarize(results, hosts, dict((h, 200.0) for h in hosts), 0.5, min_busbw_fraction=0.5)
    verdicts = dict((v["node"], v) for v in s["nodes"])
    assert sorted(s["failed_hosts"]) == hosts and not s["passed"]
    assert verdicts["x3"]["reasons"] == [
        "the check ended (exit 1) without a result: RuntimeError: NCCL error",
        "NCCL went over sockets (NET/Socket on enP7s7) where the other nodes used RoCE/InfiniBand: check "
        "NCCL_IB_HCA and NCCL_IB_DISABLE on it"]
    assert verdicts["x1"]["reasons"] == ["the check did not end within 300 s"]


def test_parity_and_missing_nodes_in_the_verdict():
    summary = {"hosts": ["a", "b", "c"], "per_host": {}, "judged": None}
    nodes = acceptance.node_verdicts(summary, ["c: torch 2.9.1+cpu, where a has 2.13.0+cpu"])
    assert nodes == [{"node": "a", "verdict": "not checked", "reasons": ["no collective was run: other nodes differ"]},
                     {"node": "b", "verdict": "not checked", "reasons": ["no collective was run: other nodes differ"]},
                     {"node": "c", "verdict": "fail", "reasons": ["parity: torch 2.9.1+cpu, where a has 2.13.0+cpu"]}]
    group = acceptance.group_verdict(nodes)
    assert group["failed"] == ["c"] and group["not_checked"] == ["a", "b"]
    results = {"a": {"status": "not_joined", "missing": ["c"]}, "b": {"status": "not_joined", "missing": ["c"]}}
    s = xhost.summarize(results, ["a", "b", "c"], {}, 0.5)
    expected = [("a", "not checked"), ("b", "not checked"), ("c", "fail")]
    assert [(v["node"], v["verdict"]) for v in s["nodes"]] == expected
    assert s["nodes"][0]["reasons"] == ["waiting for c"] and s["failed_hosts"] == ["c"]


def test_node_file_names():
    assert acceptance.node_file("spark-1") == "xhost-spark-1.json"
    for bad in ("../x", "a/b", "", ".."):
        with pytest.raises(acceptance.AcceptanceError):
            acceptance.node_file(bad)


# ------------------------------------------------------------------------------------------ memory
def test_buffer_bytes_and_the_memory_cap(tmp_path):
    # 8 nodes, 256 MiB per node: the all_gather's input and its 8 x 256 MiB output, more than the 1 GiB pair buffer.
    assert acceptance.buffer_bytes([1 << 26, 1 << 30], [1 << 28], 8) == 9 << 28
    assert acceptance.buffer_bytes([1 << 30], [1 << 20], 2) == 1 << 30
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       130000000 kB\nMemFree:         1000000 kB\nMemAvailable:    8388608 kB\n")
    available = acceptance.mem_available(str(meminfo))
    assert available == 8 << 30
    # 6 nodes: 7 x 256 MiB = 1.75 GiB under the 2 GiB cap (0.25 of 8 GiB); 16 nodes: 17 x 256 MiB is not.
    assert acceptance.check_memory("x1", [1 << 26], [1 << 28], 6, available, 0.25) is None
    msg = acceptance.check_memory("x1", [1 << 26], [1 << 28], 16, available, 0.25)
    assert msg.startswith("x1: the check would hold 4563402752 bytes (4.25 GiB) of buffers - the all_gather of "
                          "268435456 bytes per node across 16 nodes keeps 17 times that"), msg
    assert "above its cap of 2147483648 bytes (2.00 GiB, xhost_max_memory_fraction 0.25 of MemAvailable 8.00 GiB)" \
        in msg and msg.endswith("lower xhost_collective_sizes or xhost_sizes, nothing was run")
    meminfo.write_text("MemTotal: 1 kB\n")
    with pytest.raises(acceptance.AcceptanceError, match="has no MemAvailable line"):
        acceptance.mem_available(str(meminfo))
    with pytest.raises(acceptance.AcceptanceError, match="cannot read MemAvailable from /nonexistent"):
        acceptance.mem_available("/nonexistent/meminfo")


# ------------------------------------------------------------------------------------------ thresholds (A rows)
# Each row: the bad module arguments, the message (as docs/bad-inputs.md writes it).
A_ROWS = [
    pytest.param({"min_link_fraction": 1.5}, "xhost_min_link_fraction: 1.5 is out of range: min_link_fraction must "
                 "be between 0 and 1 (a fraction of the link)", id="A01"),
    pytest.param({"min_busbw_fraction": -0.1}, "xhost_min_busbw_fraction: -0.1 is out of range: min_busbw_fraction "
                 "must be between 0 and 1 (a fraction of the link)", id="A02"),
    pytest.param({"max_memory_fraction": 0.0}, "xhost_max_memory_fraction: 0.0 is out of range: max_memory_fraction "
                 "must be above 0 and at most 0.9 (a fraction of MemAvailable)", id="A03"),
    pytest.param({"max_memory_fraction": 1.0}, "xhost_max_memory_fraction: 1.0 is out of range: max_memory_fraction "
                 "must be above 0 and at most 0.9 (a fraction of MemAvailable)", id="A04"),
    pytest.param({"collective_sizes": [1000001]}, "xhost_collective_sizes: [1000001]: collective_sizes must be "
                 "positive multiples of 4 bytes", id="A05"),
    pytest.param({"collective_sizes": []}, "xhost_collective_sizes: [] has no size: collective_sizes needs at least "
                 "one", id="A06"),
    pytest.param({"sizes": [1 << 31], "max_message_bytes": 1 << 30}, "xhost_sizes: [2147483648] above "
                 "xhost_max_message_bytes 1073741824: sizes may be at most max_message_bytes", id="A07"),
    pytest.param({"collective_iters": 0}, "xhost_collective_iters: 0 is out of range: collective_iters must be a "
                 "whole number of at least 1", id="A08"),
    pytest.param({"warmup_iters": -1}, "xhost_warmup_iters: -1 is out of range: warmup_iters must be a whole "
                 "number of at least 0", id="A09"),
    pytest.param({"max_message_bytes": 0}, "xhost_max_message_bytes: 0 is out of range: max_message_bytes must be a "
                 "whole number of at least 4", id="A10"),
]


@pytest.mark.parametrize("bad,message", A_ROWS)
def test_a_threshold_out_of_range_is_named_by_the_rule(bad, message):
    good = {"min_link_fraction": 0.5, "min_busbw_fraction": 0.5, "max_memory_fraction": 0.25,
            "collective_sizes": [1 << 28], "sizes": [1 << 26], "collective_iters": 20, "warmup_iters": 5,
            "max_message_bytes": 1 << 30}
    assert acceptance.check_acceptance(good) == []
    assert acceptance.check_acceptance(dict(good, **bad)) == [message]


def test_a_threshold_of_the_wrong_type_is_named():
    """Types: the module's argument_spec converts ("0.5" to 0.5) and refuses what is no number; the rule itself
    refuses a bool or a string it is handed."""
    assert acceptance.check_acceptance({"min_busbw_fraction": True}) == [
        "xhost_min_busbw_fraction: True is not a number: min_busbw_fraction must be a fraction of the link"]
    assert acceptance.check_acceptance({"collective_iters": "20"}) == [
        "xhost_collective_iters: '20' is out of range: collective_iters must be a whole number of at least 1"]


def tree(path):
    out = {}
    for base, dirs, files in os.walk(str(path)):
        for name in dirs + files:
            st = os.lstat(os.path.join(base, name))
            out[os.path.join(base, name)] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return out


def collection_files():
    """Every file of the collection with its size and time (Python's byte-code caches left out: importing the
    module_utils may write them): the module must change none of them."""
    out = {}
    for base, dirs, files in os.walk(COLLECTION):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            st = os.lstat(os.path.join(base, name))
            out[os.path.join(base, name)] = (st.st_size, st.st_mtime_ns)
    return out


# The module end to end: exit code, message, nothing written (report_dir not made) and the checkout untouched.
@pytest.mark.parametrize("bad,message", [
    pytest.param({"min_busbw_fraction": 1.5}, "xhost_min_busbw_fraction: 1.5 is out of range", id="A02-module"),
    pytest.param({"max_memory_fraction": 0.95, "collective_iters": 0},
                 "xhost_max_memory_fraction: 0.95 is out of range: max_memory_fraction must be above 0 and at most "
                 "0.9 (a fraction of MemAvailable); xhost_collective_iters: 0 is out of range", id="A04-A08-module"),
    pytest.param({"collective_sizes": [6], "sizes": [1 << 31]}, "xhost_sizes: [2147483648] above "
                 "xhost_max_message_bytes 1073741824", id="A05-A07-module"),
    pytest.param({"min_busbw_fraction": "fast"}, "argument 'min_busbw_fraction' is of type str and we were unable "
                 "to convert to float", id="A11"),
    # One run, five rows: every bad value is named in the one message.
    pytest.param({"min_link_fraction": 1.5, "max_memory_fraction": 0.0, "collective_sizes": [], "warmup_iters": -1,
                  "max_message_bytes": 0},
                 [A_ROWS[0].values[1], A_ROWS[2].values[1], A_ROWS[5].values[1], A_ROWS[8].values[1],
                  A_ROWS[9].values[1]], id="A01-A03-A06-A09-A10-module"),
])
@pytest.mark.parametrize("mode", ["summarize", "run"])
def test_the_module_refuses_before_anything_runs_or_is_written(tmp_path, bad, message, mode):
    before, files = tree(tmp_path), collection_files()
    args = {"mode": mode, "hosts": ["a", "b"], "results": {}, "report_dir": str(tmp_path / "reports"),
            "python": "/nonexistent/python", "host": "a", "master_addr": "127.0.0.1", "backend": "gloo"}
    args.update(bad)
    res, rc = run_module("xhost_collectives", args)
    for one in [message] if isinstance(message, str) else message:
        assert rc != 0 and res["failed"] and one in res["msg"], (one, res)
    assert "nothing was run" in res["msg"] or "unable to convert to float" in res["msg"], res["msg"]
    assert tree(tmp_path) == before and collection_files() == files


@pytest.mark.parametrize("check", [pytest.param(True, id="A12-check"), pytest.param(False, id="A12")])
@pytest.mark.parametrize("mode", ["facts", "run"])
def test_a_host_whose_buffers_do_not_fit_is_refused_naming_it(tmp_path, mode, check):
    """Row A12: 16 nodes, 256 MiB per node, a host with 1 GiB available at 0.25: refused in facts and run, in check
    mode too, before python is even looked at."""
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemAvailable:    1048576 kB\n")
    hosts = ["n%02d" % i for i in range(16)]
    before = tree(tmp_path)
    res, rc = run_module("xhost_collectives", {"mode": mode, "hosts": hosts, "host": "n03", "meminfo": str(meminfo),
                                               "python": "/nonexistent/python", "master_addr": "127.0.0.1",
                                               "collective_sizes": [1 << 28]}, check_mode=check)
    assert rc != 0 and res["failed"], res
    assert res["msg"].startswith("n03: the check would hold 4563402752 bytes (4.25 GiB) of buffers"), res["msg"]
    assert "above its cap of 268435456 bytes (0.25 GiB" in res["msg"] and res["host"] == "n03"
    assert res["memory"] == {"need": 4563402752, "cap": 268435456, "available": 1 << 30}
    assert tree(tmp_path) == before


def test_module_defaults_are_the_manifests_data(manifest):
    """The acceptance's numbers live in the manifest (sparkforge_xhost_acceptance); the module's defaults must say
    the same, and the role's defaults read the data."""
    data = manifest["sparkforge_xhost_acceptance"]
    from ansible_collections.sparkforge.stack.plugins.modules import xhost_collectives
    options = yaml.safe_load(xhost_collectives.DOCUMENTATION)["options"]
    for key, value in data.items():
        assert options[key]["default"] == value, key
    with open(os.path.join(COLLECTION, "roles", "xhost_collectives", "defaults", "main.yml")) as handle:
        defaults = yaml.safe_load(handle)
    for key in data:
        assert defaults["xhost_" + key] == "{{ sparkforge_xhost_acceptance.%s }}" % key, key


def test_summarize_writes_the_verdict_per_node(tmp_path):
    hosts = ["x1", "x2", "x3", "x4"]
    times = dict((h, 0.01) for h in hosts)
    collectives = [raw("all_reduce", 1 << 26, times), raw("all_gather", 1 << 26, times)]
    hosts, results, speeds = four_node_run(all_pairs(hosts, "x3"), collectives, nccl={"x3": SOCKETS_LOG})
    for h in hosts:
        results[h]["link_gbps"] = speeds[h]
    fleet = tmp_path / "fleet-summary.json"
    fleet.write_text(json.dumps(dict((h, {"state": "provisioned"}) for h in hosts)))
    res, rc = run_module("xhost_collectives", {"mode": "summarize", "hosts": hosts, "results": results,
                                               "report_dir": str(tmp_path), "fleet_summary": str(fleet)})
    assert rc == 0 and res["failed_hosts"] == ["x3"] and res["verdict"]["failed"] == ["x3"], res
    group = json.loads((tmp_path / "xhost.json").read_text())
    assert group["verdict"]["verdict"] == "fail" and group["verdict"]["failed"] == ["x3"]
    assert [r["op"] for r in group["collectives"]] == ["all_reduce", "all_gather"]
    for h in hosts:
        node = json.loads((tmp_path / ("xhost-%s.json" % h)).read_text())
        assert node["node"] == h and node["verdict"] == ("fail" if h == "x3" else "pass"), node
    assert res["report_files"]["nodes"]["x3"] == str(tmp_path / "xhost-x3.json")
    md = (tmp_path / "fleet-summary.md").read_text()
    assert "| collective | bytes per node | algbw GB/s | busbw GB/s | % of link | exact | slow |" in md
    assert "| all_reduce | 67108864 | 6.711 | 10.066 | 40.3 | yes | SLOW |" in md, md


def test_parity_module_writes_the_odd_node_s_verdict(tmp_path):
    versions = {"driver": None, "cuda": None, "nccl": None, "torch": "2.13.0+cpu", "kernel": "6.8", "user": "u",
                "uid": 1000, "notes": []}
    results = {"a": {"versions": versions}, "b": {"versions": versions},
               "c": {"versions": dict(versions, torch="2.9.1+cpu")}}
    res, rc = run_module("xhost_collectives", {"mode": "parity", "hosts": ["a", "b", "c"], "results": results,
                                               "report_dir": str(tmp_path)})
    assert rc != 0 and res["failed_hosts"] == ["c"], res
    assert json.loads((tmp_path / "xhost-c.json").read_text()) == {
        "node": "c", "verdict": "fail", "reasons": ["parity: torch 2.9.1+cpu, where a has 2.13.0+cpu"]}
    assert json.loads((tmp_path / "xhost-a.json").read_text())["verdict"] == "not checked"
    assert json.loads((tmp_path / "xhost.json").read_text())["verdict"]["not_checked"] == ["a", "b"]
    # Check mode writes nothing and fails the same.
    res, rc = run_module("xhost_collectives", {"mode": "parity", "hosts": ["a", "b", "c"], "results": results,
                                               "report_dir": str(tmp_path / "check")}, check_mode=True)
    assert rc != 0 and res["failed_hosts"] == ["c"] and not (tmp_path / "check").exists()


def test_a_ring_is_judged_against_the_fabric_ports_rate_not_its_management_port(tmp_path):
    """A ring's check talks over the management interface (ifname), whose speed is not the fabric's: each node's
    run mode takes the fabric port's rated speed (fabric_link_gbps, as the role passes fabric_facts' port.link_gbps),
    and the summary judges the ring's pairs against it. A ring at 88 Gb/s of a 200 Gb/s fabric (on sockets, say)
    fails every node; judged against no rate or the management port's it would pass."""
    hosts = ["s1", "s2", "s3"]
    first = {"status": "ok", "backend": "nccl", "checks": [{"name": "all_reduce", "status": "pass", "detail": "-"}],
             "pairs": [pair("s1", "s2", 11.0), pair("s2", "s3", 11.0), pair("s1", "s3", 11.0)], "collectives": []}
    results = {}
    for host in hosts:
        # The host's python is the boundary: a stand-in that prints what the collectives script prints on that rank.
        python = tmp_path / ("python-%s" % host)
        printed = first if host == "s1" else {"status": "ok", "backend": "nccl"}
        python.write_text("#!/bin/sh\ncat <<'EOF'\n%s\nEOF\n" % json.dumps(printed))
        python.chmod(0o755)
        res, rc = run_module("xhost_collectives", {
            "mode": "run", "hosts": hosts, "host": host, "master_addr": "127.0.0.1", "python": str(python),
            "topology": "ring", "ifname": "sparkforge-no-such-port0", "fabric_link_gbps": 200.0})
        assert rc == 0 and res["link_gbps"] == 200.0 and "fabric port" in res["link_source"], res
        results[host] = res
    res, rc = run_module("xhost_collectives", {"mode": "summarize", "hosts": hosts, "results": results,
                                               "report_dir": str(tmp_path / "reports")})
    assert res["failed_hosts"] == hosts and not res["passed"], res
    slow = res["summary"]["judged"]["pairs"][0]
    assert slow["link_gbps"] == 200.0 and slow["why"] == "44.0% of the 200 Gb/s link, below 50%", slow
