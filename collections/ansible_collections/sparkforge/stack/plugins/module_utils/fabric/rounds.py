# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rounds of the cross-host check: which pairs of ranks measure at once. Pure."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def pair_rounds(n):
    """Every pair of n ranks exactly once, in rounds of disjoint pairs (the circle method of a round-robin
    tournament): rank 0 stays put, the others turn one place a round, and round r pairs the i-th place with
    the (m-1-i)-th. n - 1 rounds of n/2 pairs for even n; for odd n a bye rank is added and its partner
    sits the round out, n rounds of (n-1)/2 pairs. Returns [[(a, b), ...], ...] with a < b."""
    if n < 2:
        return []
    m = n + (n % 2)
    places = list(range(m))
    rounds = []
    for dummy in range(m - 1):
        pairs = []
        for i in range(m // 2):
            a, b = places[i], places[m - 1 - i]
            if a < n and b < n:             # rank n (odd n) is the bye
                pairs.append((min(a, b), max(a, b)))
        rounds.append(sorted(pairs))
        places = [places[0], places[-1]] + places[1:-1]
    return rounds


def ring_rounds(n):
    """A ring's pairs: only the cabled neighbours (rank i's port 0 to rank i+1's port 1, the last back to the first),
    in rounds where no node has two cables busy - both ports of a GB10 share its PCIe controllers, so a cable is
    measured with both ends' other cables idle. Even n: two rounds of n/2 cables; odd n: the last cable alone in a
    third round. [[(a, b), ...], ...] with a < b."""
    if n < 3:
        return pair_rounds(n)
    cables = [(i, (i + 1) % n) for i in range(n)]
    rounds = [[c for k, c in enumerate(cables) if k % 2 == 0 and (n % 2 == 0 or k < n - 1)],
              [c for k, c in enumerate(cables) if k % 2 == 1]]
    if n % 2:
        rounds.append([cables[-1]])
    return [sorted((min(a, b), max(a, b)) for a, b in r) for r in rounds]


def rounds_for(n, topology=None):
    """The pair rounds of a topology: a ring's cabled neighbours (ring_rounds), every pair otherwise."""
    return ring_rounds(n) if topology == "ring" else pair_rounds(n)
