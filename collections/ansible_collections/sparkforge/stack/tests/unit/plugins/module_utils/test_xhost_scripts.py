# -*- coding: utf-8 -*-
"""The programs the cross-host check runs with the stack's python (module_utils/fabric/scripts): real Python files,
whose text the module reads through the loader that imported them - as AnsiballZ ships module_utils, inside a zip
that zipimport reads, where no file of that path exists."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import json
import os
import subprocess
import sys
import zipfile

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import acceptance, scripts, xhost
from ansible_collections.sparkforge.stack.plugins.module_utils.fabric.scripts import collectives, probe

COLLECTIONS = os.path.abspath(os.path.join(os.path.dirname(scripts.__file__), *[".."] * 7))


def test_each_script_is_a_python_file_whose_source_is_what_runs():
    for module in (collectives, probe):
        with open(module.__file__) as handle:
            text = handle.read()
        assert scripts.source_of(module) == text
        tree = ast.parse(text)
        # Run as `python -c SOURCE`, __name__ is __main__: the file's last statement calls main().
        assert isinstance(tree.body[-1], ast.If) and "__main__" in ast.dump(tree.body[-1].test), module.__name__
    assert xhost.script_source() == scripts.source_of(collectives)


def test_the_source_is_read_from_a_zip_as_ansiballz_ships_it(tmp_path):
    """The module_utils packed the way AnsiballZ packs them (a zip on sys.path, imported by zipimport): the source
    comes back whole, and the probe run from that text prints its JSON line."""
    payload = tmp_path / "payload.zip"
    base = os.path.join("ansible_collections", "sparkforge", "stack", "plugins", "module_utils", "fabric", "scripts")
    with zipfile.ZipFile(str(payload), "w") as zipped:
        parts = base.split(os.sep)
        for depth in range(1, len(parts)):
            zipped.writestr("/".join(parts[:depth]) + "/__init__.py", "")
        for name in ("__init__.py", "probe.py"):
            zipped.write(os.path.join(COLLECTIONS, base, name), base.replace(os.sep, "/") + "/" + name)
    code = ("import sys; sys.path.insert(0, %r)\n"
            "from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import scripts\n"
            "from ansible_collections.sparkforge.stack.plugins.module_utils.fabric.scripts import probe\n"
            "assert '.zip' in probe.__file__, probe.__file__\n"
            "sys.stdout.write(scripts.source_of(probe))\n" % str(payload))
    got = subprocess.run([sys.executable, "-I", "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True, check=False)
    assert got.returncode == 0, got.stderr
    assert got.stdout == scripts.source_of(probe)
    ran = subprocess.run([sys.executable, "-I", "-c", got.stdout], stdout=subprocess.PIPE, universal_newlines=True,
                         check=False)
    assert ran.stdout.strip().startswith("{") and ("torch" in ran.stdout or "error" in ran.stdout), ran.stdout


# ------------------------------------------------------------------------------------------ the grouped search
# Rank 0's side of it runs here for real (screen_rounds -> coordinate -> screening.screen from its own source ->
# judge_group from the store); what stands in is the store (torch's TCPStore: set/get/check/wait) and the round's
# collectives on the other hosts (a GPU boundary): run_round writes each member's seconds as the script's
# group_all_reduce would, slower for a group holding a slowed node.

SIZE = 1 << 28
LINK = 200.0


class Store(object):
    """torch.distributed.TCPStore's calls the script makes, in one process: values come back as bytes."""

    def __init__(self):
        self.data = {}

    def set(self, key, value):
        self.data[key] = value.encode() if isinstance(value, str) else value

    def get(self, key):
        return self.data[key]

    def check(self, keys):
        return all(k in self.data for k in keys)

    def wait(self, keys, timeout=None):
        assert self.check(keys), "waited for %s, which nobody set" % keys


def cluster(n, slowed=(), silent=(), healthy_gbs=24.0, slow_gbs=1.6):
    """n hosts on a 200 Gb/s switch: a group's all_reduce reaches healthy_gbs busbw, slow_gbs when a slowed node is
    in it (13 Gb/s, a degraded ConnectX-7 init); a silent node never writes its measurement."""
    hosts = ["n%02d" % (i + 1) for i in range(n)]
    store, rounds = Store(), []
    for r in range(1, n):
        store.set("link/%d" % r, json.dumps(LINK))

    def run_round(k, groups):
        assert store.check(["screen/round/%d" % k]), "round %d ran before it was published" % k
        rounds.append(groups)
        for i, g in enumerate(groups):
            m = len(g)
            busbw = slow_gbs if any(hosts[r] in slowed for r in g) else healthy_gbs
            seconds = SIZE / (busbw * 1e9) * 2.0 * (m - 1) / m
            for r in g:
                if hosts[r] not in silent:
                    store.set("screen/%d/%d/%d" % (k, i, r), json.dumps({"seconds": seconds, "exact": True}))
    return hosts, store, run_round, rounds


def screen_on(n, **kw):
    hosts, store, run_round, rounds = cluster(n, **kw)
    cfg = {"screen": xhost.screen_spec(16, [SIZE], 20, 5, 0.5), "link_gbps": LINK, "op_timeout": 60}
    report = collectives.screen_rounds(cfg, 0, hosts, store, run_round)
    # The followers are told it is over: the key after the last round says done.
    assert json.loads(store.get("screen/round/%d" % len(rounds))) == {"done": True}
    return hosts, report, rounds


def test_a_slowed_node_is_found_by_the_grouped_search_in_few_rounds():
    hosts, report, rounds = screen_on(16, slowed=("n07",))
    assert report["mode"] == "groups" and report["rounds"] == len(rounds) == 3, report
    assert report["round_robin_rounds"] == 15
    assert list(report["bad"]) == ["n07"], report["bad"]
    assert report["bad"]["n07"].startswith("failed against healthy buddy n"), report["bad"]
    assert "busbw 1.600 GB/s, 6.4% of the 200 Gb/s link, below 50%" in report["bad"]["n07"], report["bad"]
    assert sorted(report["healthy"]) == sorted(h for h in hosts if h != "n07")
    # The first round screens ceil(sqrt(16)) = 4 groups of 4 at once; every group ran is a row.
    assert [len(g) for g in rounds[0]] == [4, 4, 4, 4]
    assert len(report["groups"]) == sum(len(r) for r in rounds)
    passed = [g for g in report["groups"] if g["passed"]]
    assert all(g["busbw"] == 24.0 and g["pct_of_link"] == 96.0 for g in passed), passed


def test_two_slowed_nodes_of_sixty_four_are_both_named():
    hosts, report, rounds = screen_on(64, slowed=("n03", "n50"))
    assert sorted(report["bad"]) == ["n03", "n50"] and report["rounds"] < 63, report


def test_a_missing_measurement_never_clears_a_node():
    """n05 never writes its time: its groups are not judged passed, so the search narrows down to it and names it
    (fail safe); the nodes beside it are cleared by groups that did measure."""
    hosts, report, rounds = screen_on(16, silent=("n05",))
    assert list(report["bad"]) == ["n05"], report
    assert "no measurement came back" in report["bad"]["n05"], report["bad"]
    lost = [g for g in report["groups"] if "n05" in g["group"]]
    assert lost and all(g["passed"] is None and g["why"] == "no measurement came back from n05" for g in lost), lost


def test_the_screen_report_reaches_the_verdict_per_node_and_the_markdown():
    hosts, report, rounds = screen_on(16, slowed=("n07",))
    first = {"status": "ok", "checks": [{"name": "all_reduce", "status": "pass", "detail": "-"}], "pairs": [],
             "collectives": [], "backend": "nccl", "screening": report}
    results = dict((h, {"status": "ok", "link_gbps": LINK}) for h in hosts)
    results[hosts[0]].update(first)
    summary = xhost.summarize(results, hosts, dict((h, LINK) for h in hosts), 0.5, min_busbw_fraction=0.5)
    assert summary["verdict"]["failed"] == ["n07"] and not summary["passed"], summary["verdict"]
    n07 = [v for v in summary["nodes"] if v["node"] == "n07"][0]
    assert n07["reasons"] == ["screening: " + report["bad"]["n07"]], n07
    assert all(v["verdict"] == "pass" for v in summary["nodes"] if v["node"] != "n07")
    text = xhost.render_markdown(summary)
    assert "Grouped search (screening): 3 rounds for 16 nodes, where the round-robin pairs take 15; bad: n07." in text
    assert xhost.cross_host(summary)["screen"]["rounds"] == 3


def test_the_pair_rounds_stay_below_the_threshold_and_on_a_ring():
    assert xhost.screens(16, "switch", 16) and xhost.screens(16, None, 16)
    assert not xhost.screens(15, "switch", 16) and not xhost.screens(16, "ring", 16)
    assert not xhost.screens(64, "switch", None)
    # The module's bound on the rounds covers every round the search used, up to 512 nodes and 4 bad ones.
    for n in (16, 64, 256, 512):
        hosts, report, rounds = screen_on(n, slowed=("n01", "n%02d" % n, "n%02d" % (n // 2), "n%02d" % (n // 3)))
        assert report["rounds"] <= xhost.screen_round_bound(n), (n, report["rounds"])


@pytest.mark.parametrize("value", [5, 0], ids=["A16", "A16-zero"])
def test_a_screening_threshold_below_six_is_refused(value):
    good = {"min_busbw_fraction": 0.5, "collective_sizes": [1 << 28], "screen_min_nodes": 16}
    assert acceptance.check_acceptance(good) == []
    assert acceptance.check_acceptance(dict(good, screen_min_nodes=value)) == [
        "xhost_screen_min_nodes: %d is out of range: screen_min_nodes must be a whole number of at least 6" % value]
