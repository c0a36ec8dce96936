# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Collectives across the hosts of a group: torch.distributed with one process per host (scripts/collectives.py),
started here with the rounds it runs (rounds.py) and the rate each host is judged against.

The xhost_collectives module's one entry: beside what lives here it gives the names of the files the check is cut
into by job - rounds.py (which pairs measure at once), verdict.py (the group's verdict and report), parity.py (the
same stack on every node) - so a caller needs one import. Plain functions; the module is the Ansible glue.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math
import os
import re
import subprocess

from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import fabric, screening, scripts
from ansible_collections.sparkforge.stack.plugins.module_utils.fabric.scripts import collectives
from ansible_collections.sparkforge.stack.plugins.module_utils.fabric.rounds import pair_rounds, ring_rounds, rounds_for
from ansible_collections.sparkforge.stack.plugins.module_utils.fabric.verdict import (
    cross_host, diagnose_host, diagnose_pair, judge, pair_why, rdma_expected, render_markdown, summarize)
from ansible_collections.sparkforge.stack.plugins.module_utils.fabric.parity import (
    PARITY_ITEMS, PYTHON_ITEMS, ParityError, driver_version, host_facts, parity, user_facts)

# The names given from the other files (the callers' one import).
__all__ = ["XhostError", "rank_of", "script_source", "screens", "screen_spec", "screen_round_bound", "run_script", "parse_rate", "link_speed", "check_rate",
           "pair_rounds", "ring_rounds", "rounds_for",
           "cross_host", "diagnose_host", "diagnose_pair", "judge", "pair_why", "rdma_expected", "render_markdown",
           "summarize",
           "PARITY_ITEMS", "PYTHON_ITEMS", "ParityError", "driver_version", "host_facts", "parity", "user_facts"]


class XhostError(Exception):
    pass


def rank_of(host, hosts):
    if host not in hosts:
        raise XhostError("%s is not in the host list %s" % (host, ", ".join(hosts)))
    return hosts.index(host)


def script_source():
    """The text of scripts/collectives.py, what every host's python runs."""
    return scripts.source_of(collectives)


def screens(n, topology=None, min_nodes=None):
    """Whether the grouped search (screening.py) replaces the pair rounds: a switched cluster - not a ring, whose
    pairs are its cables - of at least min_nodes nodes (None: never)."""
    return topology != "ring" and min_nodes is not None and n >= min_nodes


def screen_spec(min_nodes, collective_sizes, iters, warmup, min_busbw_fraction):
    """What the script's rank 0 needs to screen: screening.py's own source (it runs there, beside the rounds), the
    threshold, and each group's all_reduce - the largest collective size, its runs, judged against the collective's
    busbw fraction."""
    return {"source": scripts.source_of(screening), "min_nodes": min_nodes, "size": max(collective_sizes),
            "iters": iters, "warmup": warmup, "min_busbw_fraction": min_busbw_fraction}


def screen_round_bound(n):
    """The most rounds the grouped search of n nodes can take: the screen, one halving per doubling of the largest
    group (ceil(n / ceil(sqrt n)) nodes), and the buddy round."""
    largest = int(math.ceil(n / math.ceil(math.sqrt(n))))
    return 2 + int(math.ceil(math.log(max(largest, 1), 2)))


def _text(data):
    """What a killed child left on a pipe: bytes (TimeoutExpired keeps them undecoded), text or None."""
    if data is None:
        return ""
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data


def run_script(python, config, timeout, env=None):
    """Run scripts/collectives.py for this host; (result dict, stderr tail). NCCL_DEBUG=INFO lines are kept in
    the result's nccl_net whatever the end, a timeout or an exit without a result too: NCCL prints its transport
    when it connects, and a node on sockets among RoCE peers is the one that cannot connect (each process picks its
    own network), so its transport is the cause the verdict must name."""
    child = dict(os.environ)
    child.update(env or {})
    try:
        proc = subprocess.run([python, "-c", script_source(), json.dumps(config)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout, env=child,
                              check=False)
    except subprocess.TimeoutExpired as exc:
        out, err = _text(exc.stdout), _text(exc.stderr)
        return {"status": "timeout", "reason": "the check did not end within %d s" % timeout,
                "nccl_net": fabric.nccl_net_lines(out + "\n" + err)}, err[-2000:]
    except OSError as exc:
        return {"status": "error", "reason": "cannot run %s: %s" % (python, exc)}, ""
    nccl_net = fabric.nccl_net_lines(proc.stdout + "\n" + proc.stderr)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        # The error, not NCCL's INFO chatter before it.
        tail = [line for line in proc.stderr.strip().splitlines() if "NCCL INFO" not in line][-5:]
        return {"status": "error", "reason": "the check ended (exit %s) without a result: %s"
                % (proc.returncode, " | ".join(tail) or "no output"), "nccl_net": nccl_net}, proc.stderr[-2000:]
    result = json.loads(lines[-1])
    result["nccl_net"] = nccl_net
    return result, proc.stderr[-2000:]


def parse_rate(text):
    """Gb/s from an InfiniBand sysfs rate ("400 Gb/sec (4X NDR)") or an ethtool "Speed: 200000Mb/s"."""
    m = re.search(r"(\d+(?:\.\d+)?)\s*Gb/sec", text)
    if m:
        return float(m.group(1))
    m = re.search(r"Speed:\s*(\d+)\s*Mb/s", text)
    if m:
        return int(m.group(1)) / 1000.0
    return None


def link_speed(ifname=None, hca=None, sysfs="/sys/class"):
    """(Gb/s, where it was read) of the interface or HCA port the collectives use; (None, why) when unknown."""
    if hca:
        name, port = (hca.split(":", 1) + ["1"])[:2]
        path = os.path.join(sysfs, "infiniband", name, "ports", port, "rate")
        try:
            with open(path) as handle:
                return parse_rate(handle.read()), path
        except (IOError, OSError) as exc:
            return None, "%s: %s" % (path, exc)
    if ifname:
        path = os.path.join(sysfs, "net", ifname, "speed")
        try:
            with open(path) as handle:
                mbs = int(handle.read().strip())
        except (IOError, OSError, ValueError) as exc:
            return None, "%s: %s" % (path, getattr(exc, "strerror", None) or exc)
        if mbs <= 0:
            return None, "%s reports no speed (%d)" % (path, mbs)
        return mbs / 1000.0, path
    return None, "no interface or HCA given"


def check_rate(link_speed_gbps=None, fabric_link_gbps=None, ifname=None, hca=None, sysfs="/sys/class"):
    """(Gb/s, source) each pair and collective of this node is judged against: the user's link_speed_gbps, else the
    fabric port's rated speed (fabric_facts, both functions of the port together), else what sysfs says of the
    interface or HCA the check uses. In a ring that interface is the management port, so the fabric's rate comes
    before it: a 200 Gb/s ring judged against 10 Gb/s would pass on sockets."""
    if link_speed_gbps is not None:
        return link_speed_gbps, "link_speed_gbps"
    if fabric_link_gbps:
        return fabric_link_gbps, "the fabric port's rated speed (fabric_facts port.link_gbps)"
    return link_speed(ifname, hca, sysfs)
