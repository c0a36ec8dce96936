# -*- coding: utf-8 -*-
"""Collectives across hosts (module_utils.fabric.xhost): link speeds, the judgement of host pairs and the
group's verdict, without torch. The container test (tests/e2e/test_xhost_containers.py) runs the script."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import xhost


def pair(a, b, gbs, size=1 << 26, exact=True):
    return {"a": a, "b": b, "bytes": size, "gbs": gbs, "seconds": 1.0, "exact": exact}


def test_link_speed_from_sysfs(tmp_path):
    net = tmp_path / "net" / "enp1s0f0np0"
    net.mkdir(parents=True)
    (net / "speed").write_text("200000\n")
    assert xhost.link_speed("enp1s0f0np0", sysfs=str(tmp_path)) == (200.0, str(net / "speed"))
    port = tmp_path / "infiniband" / "mlx5_0" / "ports" / "1"
    port.mkdir(parents=True)
    (port / "rate").write_text("400 Gb/sec (4X NDR)\n")
    assert xhost.link_speed(hca="mlx5_0:1", sysfs=str(tmp_path))[0] == 400.0
    (tmp_path / "net" / "veth0").mkdir()
    (tmp_path / "net" / "veth0" / "speed").write_text("-1\n")
    speed, why = xhost.link_speed("veth0", sysfs=str(tmp_path))
    assert speed is None and "reports no speed" in why
    speed, why = xhost.link_speed("lo9", sysfs=str(tmp_path))
    assert speed is None and "lo9" in why
    assert xhost.parse_rate("\tSpeed: 100000Mb/s") == 100.0


def test_a_ring_is_judged_against_the_fabric_port_not_the_management_port(tmp_path):
    """In a ring the check's interface is the 10 GbE management port: the fabric port's rated 200 Gb/s comes
    before it; the user's link_speed_gbps before both."""
    net = tmp_path / "net" / "enP7s7"
    net.mkdir(parents=True)
    (net / "speed").write_text("10000\n")
    assert xhost.check_rate(None, None, "enP7s7", sysfs=str(tmp_path)) == (10.0, str(net / "speed"))
    speed, source = xhost.check_rate(None, 200.0, "enP7s7", sysfs=str(tmp_path))
    assert speed == 200.0 and "fabric port" in source
    assert xhost.check_rate(1.0, 200.0, "enP7s7", sysfs=str(tmp_path)) == (1.0, "link_speed_gbps")


@pytest.mark.parametrize("n", [3, 4, 5, 6])
def test_a_ring_pairs_only_cabled_neighbours_with_each_ends_other_cable_idle(n):
    rounds = xhost.rounds_for(n, "ring")
    cables = sorted((min(i, (i + 1) % n), max(i, (i + 1) % n)) for i in range(n))
    assert sorted(p for r in rounds for p in r) == cables            # every cable once, no uncabled pair
    for r in rounds:
        ends = [x for p in r for x in p]
        assert len(ends) == len(set(ends))                           # no node with both cables busy
    assert len(rounds) == (2 if n % 2 == 0 else 3)
    assert xhost.rounds_for(n, "switch") == xhost.pair_rounds(n)


def test_a_host_whose_every_pair_is_slow_fails_and_is_named():
    # a, b, c on 200 Gb/s (25 GB/s); c's pairs reach 3 GB/s (12%), a-b 20 GB/s (80%).
    pairs = [pair("a", "b", 20.0), pair("a", "c", 3.0), pair("b", "c", 2.5), pair("a", "b", 12.0, size=1 << 23)]
    judged = xhost.judge(pairs, {"a": 200.0, "b": 200.0, "c": 200.0}, 0.5)
    assert judged["failed_hosts"] == ["c"]
    assert judged["slowest"]["a"] == "b" and judged["slowest"]["b"] == "c" and judged["slowest"]["gbs"] == 2.5
    ab = [p for p in judged["pairs"] if (p["a"], p["b"]) == ("a", "b")]
    assert len(ab) == 1 and ab[0]["gbs"] == 20.0 and ab[0]["pct_of_link"] == 80.0 and not ab[0]["slow"]
    bc = [p for p in judged["pairs"] if (p["a"], p["b"]) == ("b", "c")][0]
    assert bc["slow"] and "10.0% of the 200 Gb/s link, below 50%" == bc["why"]


def test_the_slower_nic_of_a_pair_sets_its_link_and_two_hosts_fail_together():
    judged = xhost.judge([pair("a", "b", 5.0)], {"a": 400.0, "b": 100.0}, 0.5)
    assert judged["pairs"][0]["link_gbps"] == 100.0 and judged["pairs"][0]["pct_of_link"] == 40.0
    assert judged["failed_hosts"] == ["a", "b"]
    # Unknown speeds fail safe (issue 54, item 4): a pair no link rate judges is not passed, and says why.
    judged = xhost.judge([pair("a", "b", 5.0)], {"a": None, "b": None}, 0.5, min_gbs=10)
    assert judged["pairs"][0]["pct_of_link"] is None and judged["failed_hosts"] == ["a", "b"]
    unknown = xhost.judge([pair("a", "b", 50.0)], {}, 0.5)
    assert unknown["failed_hosts"] == ["a", "b"] and unknown["pairs"][0]["why"] == (
        "no link rate of a or b to judge it against (set xhost_link_speed_gbps, or give xhost_ifname or xhost_hca "
        "whose rate sysfs reports)")
    # One known rate judges the pair; without a fraction to judge, only the absolute floor does.
    assert xhost.judge([pair("a", "b", 50.0)], {"a": 200.0}, 0.5)["failed_hosts"] == []
    assert xhost.judge([pair("a", "b", 5.0)], {}, None)["failed_hosts"] == []


def test_a_result_that_is_not_exact_fails_its_hosts():
    judged = xhost.judge([pair("a", "b", 20.0, exact=False)], {"a": 200.0, "b": 200.0}, 0.5)
    assert judged["failed_hosts"] == ["a", "b"]


def test_summary_names_the_hosts_that_never_joined():
    hosts = ["h1", "h2", "h3"]
    results = {"h1": {"status": "not_joined", "missing": ["h3"], "link_gbps": 200.0},
               "h2": {"status": "not_joined", "missing": ["h3"], "link_gbps": 200.0}}
    s = xhost.summarize(results, hosts, {"h1": 200.0, "h2": 200.0}, 0.5)
    assert s["missing"] == ["h3"] and s["failed_hosts"] == ["h3"] and not s["passed"]
    assert s["per_host"]["h3"]["status"] == "unreachable"
    assert s["per_host"]["h1"]["status"] == "not checked" and "h3" in s["per_host"]["h1"]["reason"]
    # A host that ran but never reached the store (its own error) is named too.
    results["h3"] = {"status": "error", "reason": "rendezvous on h1 did not answer", "link_gbps": None}
    s = xhost.summarize(results, hosts, {}, 0.5)
    assert "h3" in s["failed_hosts"] and s["per_host"]["h3"]["status"] == "never joined"
    assert "Never joined: h3." in xhost.render_markdown(s)


def test_summary_of_a_good_run():
    hosts = ["h1", "h2"]
    first = {"status": "ok", "backend": "nccl", "checks": [{"name": "all_reduce", "status": "pass", "detail": "x"}],
             "pairs": [pair("h1", "h2", 22.0)], "link_gbps": 200.0, "link_source": "/sys/class/net/e/speed"}
    s = xhost.summarize({"h1": first, "h2": {"status": "ok", "link_gbps": 200.0}}, hosts,
                        {"h1": 200.0, "h2": 200.0}, 0.5)
    assert s["passed"] and s["failed_hosts"] == [] and s["judged"]["slowest"]["pct_of_link"] == 88.0
    text = xhost.render_markdown(s)
    assert "Slowest pair: h1 - h2, 22.000 GB/s (88.0% of 200 Gb/s)." in text
    # A wrong all_reduce sum fails every host.
    first["checks"][0]["status"] = "fail"
    s = xhost.summarize({"h1": first, "h2": {"status": "ok"}}, hosts, {"h1": 200.0, "h2": 200.0}, 0.5)
    assert s["failed_hosts"] == ["h1", "h2"]


def test_rank_of():
    assert xhost.rank_of("b", ["a", "b"]) == 1
    with pytest.raises(xhost.XhostError):
        xhost.rank_of("c", ["a", "b"])


@pytest.mark.parametrize("n", list(range(0, 18)) + [64])
def test_pair_rounds_meet_every_pair_once_with_no_host_twice_in_a_round(n):
    rounds = xhost.pair_rounds(n)
    met = [pair for rnd in rounds for pair in rnd]
    assert sorted(met) == [(a, b) for a in range(n) for b in range(a + 1, n)]     # every pair exactly once
    for rnd in rounds:
        ranks = [r for pair in rnd for r in pair]
        assert len(ranks) == len(set(ranks))                                       # no host twice in a round
        assert len(rnd) == n // 2                                                  # every round full (one bye)
    assert len(rounds) == (0 if n < 2 else n - 1 if n % 2 == 0 else n)


def test_pair_rounds_small():
    assert xhost.pair_rounds(2) == [[(0, 1)]]
    assert xhost.pair_rounds(4) == [[(0, 3), (1, 2)], [(0, 2), (1, 3)], [(0, 1), (2, 3)]]
    # Eight hosts: 7 rounds instead of 28 pair slots one after another.
    assert len(xhost.pair_rounds(8)) == 7 and len(xhost.pair_rounds(16)) == 15


def versions(**kw):
    base = {"driver": "580.95.05", "cuda": "13.0", "nccl": "2.27.7", "torch": "2.10.0+cu130",
            "kernel": "6.11.0-1016-nvidia", "user": "nvidia", "uid": 1000, "notes": []}
    base.update(kw)
    return base


def test_parity_of_equal_hosts_says_nothing():
    hosts = ["s1", "s2", "s3"]
    assert xhost.parity(dict((h, versions()) for h in hosts), hosts) == []


def test_parity_names_the_odd_node_the_item_and_both_values():
    hosts = ["s1", "s2", "s3", "s4"]
    facts = {"s1": versions(), "s2": versions(torch="2.9.1+cu130", nccl="2.26.2"), "s3": versions(uid=1001),
             "s4": versions(kernel="6.8.0-1015-nvidia", driver=None)}
    assert xhost.parity(facts, hosts) == [
        "s4: driver none, where s1 has 580.95.05",
        "s2: nccl 2.26.2, where s1 has 2.27.7",
        "s2: torch 2.9.1+cu130, where s1 has 2.10.0+cu130",
        "s4: kernel 6.8.0-1015-nvidia, where s1 has 6.11.0-1016-nvidia",
        "s3: uid 1001, where s1 has 1000"]


def test_parity_the_majority_is_the_reference_even_against_the_first_host():
    hosts = ["s1", "s2", "s3"]
    facts = {"s1": versions(user="ubuntu"), "s2": versions(), "s3": versions()}
    assert xhost.parity(facts, hosts) == ["s1: user ubuntu, where s2 has nvidia"]
    # Two hosts that differ: the first host's value is the reference.
    assert xhost.parity({"s1": versions(), "s2": versions(cuda="12.9")}, ["s1", "s2"]) == \
        ["s2: cuda 12.9, where s1 has 13.0"]


def test_parity_a_host_without_versions_and_check_mode_unread_items():
    hosts = ["s1", "s2"]
    # An unreachable host has no versions: the run names it (never joined), parity compares the others.
    assert xhost.parity({"s1": versions()}, hosts) == []
    unread = versions(torch=None, cuda=None, nccl=None)
    assert xhost.parity({"s1": versions(), "s2": unread}, hosts, skip_unread=True) == []
    assert len(xhost.parity({"s1": versions(), "s2": unread}, hosts)) == 3


def test_host_facts_from_a_stand_in_sysfs(tmp_path):
    import os
    import pwd
    import sys
    (tmp_path / "module" / "nvidia").mkdir(parents=True)
    (tmp_path / "module" / "nvidia" / "version").write_text("580.95.05\n")
    probe = tmp_path / "python"
    # A stand-in for the stack's python: prints what torch would report.
    probe.write_text("#!%s\nimport json; print(json.dumps({'torch': '2.10.0+cu130', 'cuda': '13.0', "
                     "'nccl': '2.27.7'}))\n" % sys.executable)
    probe.chmod(0o755)
    got = xhost.host_facts(str(probe), None, str(tmp_path))
    me = pwd.getpwuid(os.getuid())
    assert got == {"driver": "580.95.05", "cuda": "13.0", "nccl": "2.27.7", "torch": "2.10.0+cu130",
                   "kernel": os.uname()[2], "user": me.pw_name, "uid": me.pw_uid, "notes": []}
    assert xhost.host_facts(str(tmp_path / "missing"), None, str(tmp_path / "none"))["notes"] == \
        ["no python at %s: torch, CUDA and NCCL not read" % (tmp_path / "missing")]
    with pytest.raises(xhost.ParityError):
        xhost.user_facts("no-such-user-sparkforge")
