# -*- coding: utf-8 -*-
"""The grouped search for the bad node (module_utils.fabric.screening) over a synthetic switched cluster: a group's
collective passes when no bad node is in it. 64 and 256 nodes with one and two bad nodes: every bad node found, no
healthy node named, far fewer rounds than the round-robin's N-1, every round's groups disjoint; a measurement that
never came back fails safe; below the threshold the pair rounds stay."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import screening


def cluster(bad, missing=()):
    def measure(groups):
        return [None if set(g) & set(missing) else not (set(g) & set(bad)) for g in groups]
    return measure


@pytest.mark.parametrize("n", [64, 256])
@pytest.mark.parametrize("bad", [(7,), (3, 200)], ids=["one bad", "two bad"])
def test_the_bad_nodes_are_found_in_few_rounds(n, bad):
    nodes = ["n%03d" % i for i in range(n)]
    bad_names = [nodes[b % n] for b in bad]
    out = screening.screen(nodes, cluster(bad_names))
    assert out["mode"] == "groups" and sorted(out["bad"]) == sorted(bad_names)
    assert sorted(out["healthy"] + list(out["bad"])) == sorted(nodes)
    assert len(out["rounds"]) <= 2 + (n - 1).bit_length() // 2 < n - 1
    for groups in out["rounds"]:
        flat = [x for g in groups for x in g]
        assert len(flat) == len(set(flat))          # disjoint: one round runs at once
    assert all("healthy buddy" in why for why in out["bad"].values())


def test_a_missing_measurement_fails_safe_and_small_clusters_keep_the_pair_rounds():
    nodes = ["n%02d" % i for i in range(16)]
    out = screening.screen(nodes, cluster([], missing=["n05"]))
    assert list(out["bad"]) == ["n05"] and "no measurement came back" in out["bad"]["n05"]
    assert screening.screen(nodes[:15], cluster([]))["mode"] == "pairs"
    # Every node bad: no healthy buddy is left, and each is named as such instead of cleared.
    out = screening.screen(nodes, cluster(nodes))
    assert sorted(out["bad"]) == nodes and out["healthy"] == []
