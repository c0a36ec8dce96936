# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cross-host acceptance: the collective over every node judged as nccl-tests reports it, the thresholds and
memory bound it runs under, and the verdict per node. Thresholds are data (sparkforge_xhost_acceptance in the
manifest's fabric.yml); xhost.summarize calls these, the xhost_collectives module checks with them first."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import fabric


class AcceptanceError(Exception):
    pass


# Bus bandwidth as nccl-tests defines it (NVIDIA/nccl-tests doc/PERFORMANCE.md, "Bus bandwidth"): algbw = S/t;
# AllReduce busbw = algbw * 2(n-1)/n; AllGather busbw = algbw * (n-1)/n with S the total gathered bytes
# (sendcount * sizeof(type) * n). So busbw is comparable to one node's link, whatever n.
BUSBW_FACTOR = {"all_reduce": lambda n: 2.0 * (n - 1) / n, "all_gather": lambda n: (n - 1) / float(n)}

# option -> (role variable, lowest, highest, whether the lowest is allowed, what it is)
THRESHOLDS = {
    "min_link_fraction": ("xhost_min_link_fraction", 0.0, 1.0, True, "a fraction of the link"),
    "min_busbw_fraction": ("xhost_min_busbw_fraction", 0.0, 1.0, True, "a fraction of the link"),
    "max_memory_fraction": ("xhost_max_memory_fraction", 0.0, 0.9, False, "a fraction of MemAvailable"),
}
COUNTS = {
    "collective_iters": ("xhost_collective_iters", 1),
    "warmup_iters": ("xhost_warmup_iters", 0),
    "max_message_bytes": ("xhost_max_message_bytes", 4),
    # Below 6 nodes, one of the ceil(sqrt(N)) first-round groups would hold a single node: nothing to measure.
    "screen_min_nodes": ("xhost_screen_min_nodes", 6),
}


def check_acceptance(params):
    """Every threshold, count and size of the acceptance, against its range: one sentence per bad value naming
    the role variable, the module option and the value ("xhost_min_busbw_fraction: 1.5 is out of range:
    min_busbw_fraction must be between 0 and 1 (a fraction of the link)"); [] when all are good."""
    errors = []
    for key, (var, low, high, low_ok, what) in sorted(THRESHOLDS.items()):
        value = params.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            errors.append("%s: %r is not a number: %s must be %s" % (var, value, key, what))
        elif value > high or value < low or (value == low and not low_ok):
            rule = ("between %g and %g" if low_ok else "above %g and at most %g") % (low, high)
            errors.append("%s: %r is out of range: %s must be %s (%s)" % (var, value, key, rule, what))
    for key, (var, low) in sorted(COUNTS.items()):
        value = params.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            errors.append("%s: %r is out of range: %s must be a whole number of at least %d" % (var, value, key, low))
    cap = params.get("max_message_bytes")
    for key, var in (("sizes", "xhost_sizes"), ("collective_sizes", "xhost_collective_sizes")):
        sizes = params.get(key)
        if sizes is None:
            continue
        if not sizes:
            errors.append("%s: [] has no size: %s needs at least one" % (var, key))
        bad = [s for s in sizes if isinstance(s, bool) or not isinstance(s, int) or s <= 0 or s % 4]
        if bad:
            errors.append("%s: %s: %s must be positive multiples of 4 bytes" % (var, bad, key))
        if isinstance(cap, int) and not isinstance(cap, bool) and cap >= 4:
            over = [s for s in sizes if s not in bad and s > cap]
            if over:
                errors.append("%s: %s above xhost_max_message_bytes %d: %s may be at most max_message_bytes"
                              % (var, over, cap, key))
    return errors


def buffer_bytes(sizes, collective_sizes, n):
    """The most buffer memory one host's part of the check holds at once: one pair buffer (the largest size; each
    is freed before the next), or the all_gather's input and its output, n times the input (the all_reduce's
    one buffer is freed before it). The collectives' own staging is not counted."""
    pair = max(sizes or [0])
    collective = (n + 1) * max(collective_sizes or [0])
    return max(pair, collective)


def mem_available(path="/proc/meminfo"):
    """MemAvailable in bytes (the kernel's estimate of what can be allocated without swapping; on a unified-
    memory host like the DGX Spark the GPU allocates from the same memory). Raises AcceptanceError when unread."""
    try:
        with open(path) as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    fields = line.split()
                    return int(fields[1]) * (1024 if fields[2:] == ["kB"] else 1)
    except (IOError, OSError, ValueError, IndexError) as exc:
        raise AcceptanceError("cannot read MemAvailable from %s: %s" % (path, exc))
    raise AcceptanceError("%s has no MemAvailable line" % path)


def _gib(num):
    return "%.2f GiB" % (num / float(2 ** 30))


def check_memory(node, sizes, collective_sizes, n, available, fraction):
    """None when the buffers fit under fraction * available; else a sentence naming the node, the bytes and the cap.
    Refused, not capped: smaller sizes would measure something else than what was asked."""
    need = buffer_bytes(sizes, collective_sizes, n)
    cap = int(fraction * available)
    if need <= cap:
        return None
    return ("%s: the check would hold %d bytes (%s) of buffers - the all_gather of %d bytes per node across %d nodes "
            "keeps %d times that, or the largest pair buffer - above its cap of %d bytes (%s, xhost_max_memory_"
            "fraction %g of MemAvailable %s): lower xhost_collective_sizes or xhost_sizes, nothing was run"
            % (node, need, _gib(need), max(collective_sizes or [0]), n, n + 1, cap, _gib(cap), fraction,
               _gib(available)))


def judge_collectives(raw, n, link_gbps, min_fraction):
    """Rows of the collective over all nodes: per operation and size the slowest rank's time per run (the
    operation ends when its last rank does), algbw = S/t and busbw as nccl-tests defines them (BUSBW_FACTOR), the
    busbw against the slowest node's link (Gb/s / 8 = GB/s), and the nodes whose result was not exact."""
    rows = []
    for c in raw or []:
        seconds = max(c["seconds"].values())
        total = c["bytes"] * (n if c["op"] == "all_gather" else 1)
        algbw = total / seconds / 1e9 if seconds > 0 else 0.0
        busbw = algbw * BUSBW_FACTOR[c["op"]](n)
        link_gbs = link_gbps / 8.0 if link_gbps else None
        fraction = busbw / link_gbs if link_gbs else None
        not_exact = sorted(h for h, ok in c["exact"].items() if not ok)
        reasons = []
        if min_fraction and fraction is not None and fraction < min_fraction:
            reasons.append("busbw %.3f GB/s is %.1f%% of the slowest node's %g Gb/s link (%.3f GB/s), below %.0f%%"
                           % (busbw, 100 * fraction, link_gbps, link_gbs, 100 * min_fraction))
        unjudged = bool(min_fraction) and fraction is None
        if unjudged:
            # A missing measurement fails safe: a collective no link rate judges is not passed.
            reasons.append("no node's link rate to judge it against (set xhost_link_speed_gbps, or give xhost_ifname "
                           "or xhost_hca whose rate sysfs reports)")
        if not_exact:
            reasons.append("result not exact on %s" % ", ".join(not_exact))
        rows.append({"op": c["op"], "bytes": c["bytes"], "total_bytes": total, "nodes": n, "iters": c.get("iters"),
                     "seconds": round(seconds, 6), "algbw": round(algbw, 3), "busbw": round(busbw, 3),
                     "link_gbps": link_gbps, "pct_of_link": round(100 * fraction, 1) if fraction is not None else None,
                     "exact": not not_exact, "not_exact_on": not_exact, "slow": unjudged or bool(
                         fraction is not None and min_fraction and fraction < min_fraction),
                     "why": "; ".join(reasons) or None})
    return rows


def port_reasons(speeds, rated=None):
    """Per node, why its port speed is wrong: below its rated speed (when given), or below the speed most nodes'
    links run at (a node on a slower cable sets every collective's pace). {node: [sentences]}."""
    out = {}
    known = dict((h, s) for h, s in speeds.items() if s)
    counts = {}
    for s in known.values():
        counts[s] = counts.get(s, 0) + 1
    if not counts:
        return out
    common = max(counts, key=lambda s: (counts[s], s))
    for h, s in known.items():
        why = []
        if rated and s < rated:
            why.append("its link runs at %g Gb/s, below its rated %g Gb/s" % (s, rated))
        elif counts[common] > 1 and s < common:
            why.append("its link runs at %g Gb/s, where the other nodes' run at %g Gb/s" % (s, common))
        if why:
            out[h] = why
    return out


def transport_reasons(lines, expected=()):
    """Per node, why its transport is wrong. A node in `expected` (its fabric port has RDMA functions up and the
    backend is NCCL) fails unless NCCL's own lines (fabric.nccl_transport) say IB/RoCE: sockets are named with the
    devices NCCL reported, and no line at all fails too (NCCL_DEBUG=INFO missing: the transport is unproven, so it
    fails safe). Any other node fails when it went over sockets where most nodes that printed lines went over
    IB/RoCE. lines: {node: nccl_net lines}. {node: [sentences]}."""
    used = dict((h, fabric.nccl_transport(v or [])) for h, v in lines.items() if v)
    kinds = [u["transport"] for u in used.values() if u["transport"]]
    out = {}
    for h in sorted(expected):
        u = used.get(h)
        if u is None:
            out[h] = ["NCCL printed no transport line (NET/IB or NET/Socket) though the fabric port has RDMA up: the "
                      "transport is unproven; run with NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=INIT,NET"]
        elif u["transport"] == "Socket":
            out[h] = ["NCCL went over sockets (NET/Socket on %s) though the fabric port has RDMA up: check "
                      "NCCL_IB_HCA, NCCL_IB_DISABLE and that the RDMA functions are active on it"
                      % (", ".join(u["sockets"]) or "?")]
        elif u["transport"] != "IB":
            out[h] = ["NCCL reported transport %s, not RoCE/InfiniBand, though the fabric port has RDMA up"
                      % (u["transport"] or "none it named")]
    if kinds.count("IB") * 2 <= len(kinds):
        return out
    for h, u in used.items():
        if u["transport"] == "Socket" and h not in out:
            out[h] = ["NCCL went over sockets (NET/Socket on %s) where the other nodes used RoCE/InfiniBand: check "
                      "NCCL_IB_HCA and NCCL_IB_DISABLE on it" % (", ".join(u["sockets"]) or "?")]
    return out


def node_verdicts(summary, parity_differences=None):
    """The verdict per node, {node, verdict: pass|fail|not checked, reasons}, from what summarize found: its pairs
    (all of them slow while others are fine), its transport (NCCL's lines via fabric.diagnose), its port speed,
    parity (sentences starting "node: "), a result not exact, an error, a node that never joined; and the
    collective over all nodes: slow with no node isolated fails every node, since none explains it."""
    hosts = summary.get("hosts") or []
    per_host = summary.get("per_host") or {}
    reasons = dict((h, []) for h in hosts)
    for line in parity_differences or []:
        node = line.split(":", 1)[0]
        if node in reasons:
            reasons[node].append("parity: " + line.split(":", 1)[1].strip())
    for h in summary.get("failed_hosts") or []:
        entry = per_host.get(h) or {}
        if entry.get("reason") or entry.get("status"):
            reasons[h].append(entry.get("reason") or entry.get("status"))
    for source in ("port", "transport", "screening"):
        for h, why in (summary.get(source) or {}).items():
            if h in reasons:
                reasons[h] += [w for w in why if w not in reasons[h]]
    for row in summary.get("collectives") or []:
        for h in row.get("not_exact_on") or []:
            reasons[h].append("its %s result was not exact" % row["op"])
    slow = [r for r in summary.get("collectives") or [] if r.get("slow")]
    if slow:
        what = "; ".join("%s of %d bytes per node: %s" % (r["op"], r["bytes"], r["why"]) for r in slow)
        isolated = [h for h in hosts if reasons[h]]
        for h in isolated or hosts:
            reasons[h].append("the collective across all nodes is slow (%s)%s" % (
                what, "" if isolated else ": no node's pairs, transport or port isolate it"))
    missing = summary.get("missing") or []
    out = []
    for h in hosts:
        entry = per_host.get(h) or {}
        if reasons[h] or h in missing:
            verdict = "fail"
            if not reasons[h]:
                reasons[h].append(entry.get("reason") or "never joined")
        elif parity_differences:
            verdict = "not checked"
            reasons[h].append("no collective was run: other nodes differ")
        elif missing or summary.get("judged") is None:
            verdict = "not checked"
            reasons[h].append(entry.get("reason") or "the check did not run")
        else:
            verdict = "pass"
        out.append({"node": h, "verdict": verdict, "reasons": reasons[h]})
    return out


def group_verdict(nodes):
    """The group's verdict from its nodes': pass only when every node passed."""
    failed = [v["node"] for v in nodes if v["verdict"] == "fail"]
    unchecked = [v["node"] for v in nodes if v["verdict"] == "not checked"]
    return {"verdict": "pass" if nodes and not failed and not unchecked else "fail",
            "failed": failed, "not_checked": unchecked,
            "reasons": ["%s: %s" % (v["node"], "; ".join(v["reasons"])) for v in nodes if v["verdict"] == "fail"]}


def node_file(node):
    """The per-node verdict's file name beside xhost.json; a node name with a path separator is refused."""
    if not node or "/" in node or node in (".", ".."):
        raise AcceptanceError("node name %r cannot name a file" % node)
    return "xhost-%s.json" % node
