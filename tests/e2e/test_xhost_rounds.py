"""The cross-host check's pair rounds run for real: scripts/collectives.py as the module runs it, one process per rank
on this machine, torch's gloo over 127.0.0.1, five ranks (odd: every round has a bye) and four. Rank 0's
result must hold every pair exactly once, each exact; then the collective over all ranks (all_reduce and
all_gather), every rank's result exact, judged into algbw/busbw rows and a verdict per node. Then the role itself
(playbooks/xhost.yml) on three inventory hosts that are all this machine: a memory refusal failing only the node
named. (A pass per node and a parity failure naming the odd node run on container hosts:
tests/e2e/test_xhost_topologies.py.) Needs the CPU torch the container test installs
(~/.cache/sparkforge/xhost-torch-2.13.0, or SPARKFORGE_XHOST_TORCH); skipped without it."""

import json
import os
import re
import socket
import subprocess
import sys
import threading

import pytest
import yaml

from helpers import REPO, user_checkout

sys.path.insert(0, os.path.join(REPO, "collections"))
from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import xhost  # noqa: E402

TORCH_DIR = os.environ.get("SPARKFORGE_XHOST_TORCH") or os.path.expanduser("~/.cache/sparkforge/xhost-torch-2.13.0")


@pytest.fixture
def needs_torch():
    """Looked for when each test runs, not when pytest collects: from nothing, the container test that runs
    first in the same session installs it (a collection-time skipif skipped these on every first run)."""
    if not os.path.isdir(os.path.join(TORCH_DIR, "torch")):
        pytest.skip("no CPU torch at %s (tests/e2e/test_xhost_containers.py installs it)" % TORCH_DIR)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_ranks(n, sizes=(1 << 20,), iters=3, collective_sizes=(), collective_iters=3, screen=None):
    hosts = ["h%d" % i for i in range(n)]
    port, results = free_port(), {}
    env = {"PYTHONPATH": TORCH_DIR, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}

    def one(rank):
        config = {"rank": rank, "hosts": hosts, "master_addr": "127.0.0.1", "master_port": port, "backend": "gloo",
                  "sizes": list(sizes), "iters": iters, "join_timeout": 60, "op_timeout": 60,
                  "rounds": xhost.pair_rounds(n), "collective_sizes": list(collective_sizes),
                  "collective_iters": collective_iters, "warmup_iters": 1}
        if screen:
            config.update(rounds=[], screen=screen, link_gbps=1.0)
        results[rank] = xhost.run_script(sys.executable, config, 240, env=env)

    threads = [threading.Thread(target=one, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return hosts, results


@pytest.mark.usefixtures("needs_torch")
@pytest.mark.parametrize("n", [5, 4])
def test_every_pair_once_in_rounds_over_gloo(n):
    hosts, results = run_ranks(n)
    for rank in range(n):
        assert results[rank][0]["status"] == "ok", results[rank]
    first = results[0][0]
    assert first["checks"][0]["status"] == "pass", first
    met = sorted((p["a"], p["b"]) for p in first["pairs"])
    assert met == [(hosts[a], hosts[b]) for a in range(n) for b in range(a + 1, n)]
    assert all(p["exact"] and p["gbs"] > 0 for p in first["pairs"]), first["pairs"]
    assert first["collectives"] == []


@pytest.mark.usefixtures("needs_torch")
@pytest.mark.parametrize("n", [3, 4])
def test_the_collective_over_all_ranks_is_exact_and_judged(n):
    """all_reduce and all_gather over every rank at two sizes after the pair rounds: every rank reports its time and
    an exact result; summarize turns them into nccl-tests' algbw/busbw rows against the (stand-in) 1 Gb/s link, and
    every node passes at a 0 threshold (gloo over loopback is no fabric to hold to a fraction of anything)."""
    sizes = (1 << 20, 4 << 20)
    hosts, results = run_ranks(n, collective_sizes=sizes)
    for rank in range(n):
        assert results[rank][0]["status"] == "ok", results[rank]
    first = results[0][0]
    assert [(c["op"], c["bytes"]) for c in first["collectives"]] == [
        (op, size) for size in sizes for op in ("all_reduce", "all_gather")]
    for c in first["collectives"]:
        assert sorted(c["seconds"]) == sorted(hosts) and all(t > 0 for t in c["seconds"].values()), c
        assert c["exact"] == dict((h, True) for h in hosts), c
    speeds = dict((h, 1.0) for h in hosts)
    summary = xhost.summarize(dict((hosts[r], dict(results[r][0], link_gbps=1.0)) for r in range(n)), hosts,
                              speeds, 0.0, min_busbw_fraction=0.0)
    rows = summary["collectives"]
    assert [r["op"] for r in rows] == ["all_reduce", "all_gather"] * 2 and all(r["exact"] for r in rows), rows
    for r in rows:
        factor = 2.0 * (n - 1) / n if r["op"] == "all_reduce" else (n - 1) / float(n)
        total = r["bytes"] * (n if r["op"] == "all_gather" else 1)
        # seconds is reported rounded to the microsecond and algbw to 3 places, each from the unrounded time
        assert r["total_bytes"] == total and r["algbw"] == pytest.approx(total / r["seconds"] / 1e9, abs=2e-3), r
        assert abs(r["busbw"] - r["algbw"] * factor) < 0.002 and r["link_gbps"] == 1.0, r
    assert summary["passed"] and [v["verdict"] for v in summary["nodes"]] == ["pass"] * n, summary["nodes"]


@pytest.mark.usefixtures("needs_torch")
def test_the_grouped_search_runs_its_rounds_as_group_collectives():
    """Six ranks at the screening threshold: every rank makes the round's groups (torch.distributed.new_group), each
    group's all_reduce runs at once and is exact, rank 0 judges them from the store (a 0 threshold: gloo over
    loopback is no fabric) and reports one round - every group passed, nobody bad - and the pair rounds are not run."""
    hosts, results = run_ranks(6, screen=xhost.screen_spec(6, [1 << 16], 2, 1, 0.0))
    for rank in range(6):
        assert results[rank][0]["status"] == "ok", results[rank]
    report = results[0][0]["screening"]
    assert report["mode"] == "groups" and report["rounds"] == 1 and report["bad"] == {}, report
    assert [g["group"] for g in report["groups"]] == [hosts[0:2], hosts[2:4], hosts[4:6]], report
    assert all(g["passed"] is True and g["busbw"] > 0 for g in report["groups"]), report
    assert report["healthy"] == hosts and results[0][0]["pairs"] == [], results[0][0]
    assert all(results[r][0]["screening"] is None for r in range(1, 6))


@pytest.mark.usefixtures("needs_torch")
def test_the_probe_reads_real_torch():
    """Parity's probe with the real CPU torch: its version, no CUDA and no NCCL (a CPU build)."""
    got = xhost.host_facts(sys.executable, None, "/nonexistent-sysfs", env={"PYTHONPATH": TORCH_DIR})
    assert got["torch"].endswith("+cpu") and got["cuda"] is None and got["nccl"] is None, got
    assert got["driver"] is None and got["notes"] == []


def test_parity_module_refuses_before_any_collective(tmp_path):
    """xhost_collectives mode facts on this host, then mode parity (the controller's step) with a second host
    whose torch and UID differ: failed, naming the node, each item and both values; in check mode the same."""
    from helpers import run_module
    me, rc = run_module("xhost_collectives", {"mode": "facts", "hosts": ["a", "b"], "python": sys.executable,
                                              "sysfs_root": str(tmp_path)}, check_mode=True)
    assert rc == 0 and not me["changed"], me
    other = dict(me["versions"], torch="2.9.1+cu130", uid=(me["versions"]["uid"] or 0) + 1)
    for check in (True, False):
        res, rc = run_module("xhost_collectives", {"mode": "parity", "hosts": ["a", "b"],
                                                   "results": {"a": me, "b": {"versions": other}}}, check_mode=check)
        assert rc != 0 and res["failed"], res
        assert res["msg"].startswith("the hosts differ, no collective was run: "), res["msg"]
        assert "b: torch 2.9.1+cu130, where a has none" in res["msg"] or check, res["msg"]
        assert "b: uid %d, where a has %d" % (other["uid"], me["versions"]["uid"]) in res["msg"], res["msg"]
    ok, rc = run_module("xhost_collectives", {"mode": "parity", "hosts": ["a", "b"],
                                              "results": {"a": me, "b": me}})
    assert rc == 0 and ok["differences"] == [], ok
    bad, rc = run_module("xhost_collectives", {"mode": "facts", "hosts": ["a", "b"], "python": sys.executable,
                                               "user": "no-such-user-sparkforge"})
    assert rc != 0 and "xhost_user no-such-user-sparkforge: user no-such-user-sparkforge does not exist" in bad["msg"]


def playbook_on_local_hosts(tmp_path, port, host_vars=None):
    """playbooks/xhost.yml on three inventory hosts that are all this machine (connection local), gloo over
    127.0.0.1: the role as a user runs it - the versions and memory bound, parity, the run, the verdict."""
    hosts = dict((h, dict((host_vars or {}).get(h, {}))) for h in ("h1", "h2", "h3"))
    inventory = {"all": {"children": {"sparks": {"hosts": hosts, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable, "sparkforge_venv": "/unused",
        "xhost_backend": "gloo", "xhost_python": sys.executable, "xhost_master_addr": "127.0.0.1",
        "xhost_master_port": port, "xhost_link_speed_gbps": 1.0, "xhost_join_timeout": 30,
        "xhost_env": {"PYTHONPATH": TORCH_DIR, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"},
        "xhost_sizes": [1 << 20], "xhost_iters": 3, "xhost_collective_sizes": [4 << 20], "xhost_collective_iters": 3,
        "xhost_warmup_iters": 1,
        # gloo on a loaded 2-core machine: the collective's speed is not what these runs prove (see
        # test_xhost_containers); the floor only keeps a stalled one failing.
        "xhost_min_busbw_fraction": 0.01}}}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"))
    # From a stand-in checkout's root, as the guide's line runs: the reports go to its reports/ (the role's
    # default, which the guide does not set).
    checkout = user_checkout(tmp_path)
    proc = subprocess.run(["ansible-playbook", "-i", str(tmp_path / "inventory.yml"), "playbooks/xhost.yml",
                           "-e", "xhost_group=sparks"], cwd=checkout, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=400, check=False)
    reports = tmp_path / "checkout" / "reports"
    read = dict((p.name, json.loads(p.read_text())) for p in reports.glob("*.json")) if reports.is_dir() else {}
    return proc.returncode, proc.stdout, read


def test_the_role_refuses_a_node_whose_buffers_do_not_fit(tmp_path):
    """h2 asks for 1 GiB per node under 0.01 of its MemAvailable (4 GiB of buffers with three nodes): h2 fails
    before anything runs, named with the bytes and its cap, and h1 and h3 end not checked (not failed)."""
    rc, out, read = playbook_on_local_hosts(tmp_path, free_port(), {"h2": {"xhost_collective_sizes": [1 << 30],
                                                                           "xhost_max_memory_fraction": 0.01}})
    assert rc == 2, out[-5000:]
    assert "h2: the check would hold 4294967296 bytes (4.00 GiB) of buffers" in " ".join(out.split()), out[-5000:]
    assert "h1: not checked (refused before the check: h2)" in out, out[-5000:]
    assert re.search(r"^h1\s+: ok=\d+\s+changed=0\s+unreachable=0\s+failed=0", out, re.M), out[-3000:]
    assert re.search(r"^h2\s+: ok=\d+\s+changed=0\s+unreachable=0\s+failed=1", out, re.M), out[-3000:]
    assert read == {}
