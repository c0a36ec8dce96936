# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Finding the bad node of a switched cluster in few rounds: ceil(sqrt(N)) disjoint groups screened at once with a
collective each, every failed group bisected (its halves measured at once, in the same round as the other failed
groups' halves), and a node left alone confirmed against a healthy buddy - a node from a group that passed. About
1 + log2(sqrt(N)) rounds instead of the round-robin's N-1 pair rounds. A measurement that did not come back counts
as a failure, so a node is cleared only by a collective that passed. The shape (sqrt(N) groups, bisection, buddy)
follows what issue 44 cites from NVIDIA's cluster-readiness-engine ADR-055; that document could not be read here,
so the round counts are this scheduler's own (bench/xhost_screening.py).

Pure: measure(groups) -> [True | False | None per group] stands for one round of collectives, run at once."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

# Below this many nodes the round-robin pair rounds (rounds.pair_rounds) are few enough and say more (each pair). The
# scheduler's default; the play's threshold is the manifest's sparkforge_xhost_acceptance.screen_min_nodes, and the
# play runs this file's own source inside the check's process (scripts/collectives.py), so it stays self-contained.
MIN_NODES = 16


def groups_of(nodes, count):
    """nodes cut into count groups whose sizes differ by at most one, in order."""
    size, extra = divmod(len(nodes), count)
    out, start = [], 0
    for i in range(count):
        end = start + size + (1 if i < extra else 0)
        if end > start:
            out.append(list(nodes[start:end]))
        start = end
    return out


def screen(nodes, measure, min_nodes=MIN_NODES):
    """{"mode": "pairs"} below min_nodes; else {"mode": "groups", "rounds": [[group, ...], ...], "bad": {node: why},
    "healthy": [...]} - every round's groups (disjoint) and what was found."""
    nodes = list(nodes)
    if len(nodes) < min_nodes:
        return {"mode": "pairs", "rounds": [], "bad": {}, "healthy": nodes}
    rounds, bad, healthy = [], {}, []
    first = groups_of(nodes, int(math.ceil(math.sqrt(len(nodes)))))
    suspects = []                    # groups (lists) that failed and must be narrowed
    results = _run(measure, first, rounds)
    for group, ok in zip(first, results):
        if ok is True:
            healthy.extend(group)
        else:
            suspects.append((group, ok))
    while suspects:
        tests, owners = [], []
        buddies = list(healthy)
        for group, verdict in suspects:
            halves = [group] if len(group) == 1 else [group[:len(group) // 2], group[len(group) // 2:]]
            for half in halves:
                if len(half) == 1:
                    # A node alone has no collective: it runs with a healthy buddy, one buddy per node a round.
                    if not buddies:
                        bad[half[0]] = ("its group failed (%s) and no healthy node was left to confirm it against"
                                        % _said(verdict))
                        continue
                    tests.append(half + [buddies.pop(0)])
                else:
                    tests.append(half)
                owners.append(half)
        if not tests:
            break
        results = _run(measure, tests, rounds)
        suspects = []
        for half, test, ok in zip(owners, tests, results):
            if ok is True:
                healthy.extend(half)
            elif len(half) == 1:
                bad[half[0]] = ("failed against healthy buddy %s (%s)" % (test[1], _said(ok)))
            else:
                suspects.append((half, ok))
    return {"mode": "groups", "rounds": rounds, "bad": bad, "healthy": sorted(healthy, key=nodes.index)}


def _run(measure, groups, rounds):
    rounds.append([list(g) for g in groups])
    got = list(measure([list(g) for g in groups]) or [])
    # A group whose measurement did not come back fails safe.
    return [got[i] if i < len(got) else None for i in range(len(groups))]


def _said(verdict):
    return "no measurement came back" if verdict is None else "below the threshold"
