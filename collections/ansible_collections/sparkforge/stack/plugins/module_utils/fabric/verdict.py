# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cross-host check's verdict: every host's run result combined (who never joined, each pair against its
links, the collective over all nodes, each node's port and transport) into the group's summary, its markdown and
the fleet summary's cross_host entry. Pure; the xhost_collectives module's summarize mode calls it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import fabric
from ansible_collections.sparkforge.stack.plugins.module_utils.fabric.acceptance import (
    group_verdict, judge_collectives, node_verdicts, port_reasons, transport_reasons)


def judge(pairs, speeds, min_fraction, min_gbs=None):
    """Per pair, its best bandwidth against the slower NIC of the two (Gb/s -> GB/s); a host fails
    when every pair it is in is below the threshold (with two hosts, both).

    speeds: {host: Gb/s or None}. Returns {"pairs": [...], "slowest": {...}, "failed_hosts": [...]}.
    """
    best = {}
    for p in pairs:
        key = (p["a"], p["b"])
        if key not in best or p["gbs"] > best[key]["gbs"]:
            best[key] = p
    rows, hosts = [], []
    for (a, b), p in sorted(best.items()):
        for h in (a, b):
            if h not in hosts:
                hosts.append(h)
        sa, sb = speeds.get(a), speeds.get(b)
        link = min(s for s in (sa, sb) if s) if (sa or sb) else None
        link_gbs = link / 8.0 if link else None
        fraction = p["gbs"] / link_gbs if link_gbs else None
        reasons = []
        if min_fraction and fraction is not None and fraction < min_fraction:
            reasons.append("%.1f%% of the %g Gb/s link, below %.0f%%" % (100 * fraction, link, 100 * min_fraction))
        elif min_fraction and link is None:
            # A missing measurement fails safe: a pair no link rate judges is not passed.
            reasons.append("no link rate of %s or %s to judge it against (set xhost_link_speed_gbps, or give "
                           "xhost_ifname or xhost_hca whose rate sysfs reports)" % (a, b))
        if min_gbs and p["gbs"] < min_gbs:
            reasons.append("%.2f GB/s, below %g GB/s" % (p["gbs"], min_gbs))
        rows.append({"a": a, "b": b, "bytes": p["bytes"], "gbs": p["gbs"], "link_gbps": link,
                     "pct_of_link": round(100 * fraction, 1) if fraction is not None else None,
                     "exact": p.get("exact", True), "slow": bool(reasons), "why": "; ".join(reasons) or None})
    failed = []
    for h in hosts:
        mine = [r for r in rows if h in (r["a"], r["b"])]
        if mine and all(r["slow"] or not r["exact"] for r in mine):
            failed.append(h)
    slowest = min(rows, key=lambda r: r["gbs"]) if rows else None
    return {"pairs": rows, "slowest": slowest, "failed_hosts": failed}


def render_markdown(summary):
    lines = ["# Collectives across hosts", "",
             "%d hosts, backend %s; threshold %s of the slower NIC's link speed." % (
                 len(summary.get("hosts", [])), summary.get("backend"),
                 "%.0f%%" % (100 * summary["min_fraction"]) if summary.get("min_fraction") else "none"), ""]
    if summary.get("missing"):
        lines += ["Never joined: %s." % ", ".join(summary["missing"]), ""]
    lines += ["| host | link | status |", "|---|---|---|"]
    for h in summary.get("hosts", []):
        r = summary["per_host"].get(h, {})
        lines.append("| %s | %s | %s |" % (h, "%g Gb/s (%s)" % (r["link_gbps"], r.get("link_source"))
                                           if r.get("link_gbps") else (r.get("link_source") or "-"),
                                           r.get("status")))
    judged = summary.get("judged") or {}
    if judged.get("pairs"):
        lines += ["", "| pair | size | GB/s | link Gb/s | % of link | exact | slow | why |",
                  "|---|---|---|---|---|---|---|---|"]
        for p in judged["pairs"]:
            lines.append("| %s - %s | %d MiB | %.3f | %s | %s | %s | %s | %s |" % (
                p["a"], p["b"], p["bytes"] // 2 ** 20, p["gbs"],
                "%g" % p["link_gbps"] if p.get("link_gbps") else "-",
                p["pct_of_link"] if p["pct_of_link"] is not None else "-", "yes" if p["exact"] else "NO",
                "SLOW" if p.get("slow") else "no", pair_why(p)))
        s = judged["slowest"]
        lines += ["", "Slowest pair: %s - %s, %.3f GB/s%s." % (
            s["a"], s["b"], s["gbs"], " (%s%% of %g Gb/s)" % (s["pct_of_link"], s["link_gbps"])
            if s["pct_of_link"] is not None else "")]
    if summary.get("collectives"):
        lines += ["", "Collective over all %d nodes (nccl-tests' busbw: all_reduce algbw x 2(n-1)/n, all_gather "
                  "algbw x (n-1)/n of the total gathered bytes), against the slowest node's link%s:" % (
                      len(summary.get("hosts", [])), ", threshold %.0f%%" % (100 * summary["min_busbw_fraction"])
                      if summary.get("min_busbw_fraction") else ""), "",
                  "| op | bytes per node | total bytes | s per run | algbw GB/s | busbw GB/s | % of link | exact "
                  "| slow |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for r in summary["collectives"]:
            lines.append("| %s | %d | %d | %.6f | %.3f | %.3f | %s | %s | %s |" % (
                r["op"], r["bytes"], r["total_bytes"], r["seconds"], r["algbw"], r["busbw"],
                r["pct_of_link"] if r["pct_of_link"] is not None else "-",
                "yes" if r["exact"] else "NO (%s)" % ", ".join(r["not_exact_on"]), "SLOW" if r["slow"] else "no"))
    screen = summary.get("screen")
    if screen:
        lines += ["", "Grouped search (screening): %d rounds for %d nodes, where the round-robin pairs take %d; bad: %s."
                  % (screen["rounds"], len(summary.get("hosts", [])), screen["round_robin_rounds"],
                     ", ".join(sorted(screen.get("bad") or {})) or "none"), "",
                  "| round | group | busbw GB/s | % of link | passed | why |", "|---|---|---|---|---|---|"]
        for g in screen.get("groups") or []:
            lines.append("| %d | %s | %s | %s | %s | %s |" % (
                g["round"] + 1, ", ".join(g["group"]), "-" if g["busbw"] is None else "%.3f" % g["busbw"],
                "-" if g["pct_of_link"] is None else g["pct_of_link"],
                {True: "yes", False: "NO", None: "no measurement"}[g["passed"]], g["why"] or ""))
    if summary.get("nodes"):
        lines += ["", "| node | verdict | reasons |", "|---|---|---|"]
        for v in summary["nodes"]:
            lines.append("| %s | %s | %s |" % (v["node"], v["verdict"], "; ".join(v["reasons"]) or "-"))
    if summary.get("failed_hosts"):
        lines += ["", "Failed: %s." % ", ".join(summary["failed_hosts"])]
        for h in summary["failed_hosts"]:
            for why in summary["per_host"].get(h, {}).get("diagnosis") or []:
                lines.append("- %s: %s" % (h, why))
    return "\n".join(lines) + "\n"


def pair_why(pair):
    """One cell: why the pair is slow (the threshold it missed), then NCCL's and the fabric's explanation."""
    return "; ".join([pair["why"]] * bool(pair.get("why")) + list(pair.get("diagnosis") or [])) or ""


def diagnose_pair(pair, results):
    """Why one slow pair is slow: fabric.diagnose with each end's NCCL lines and fabric figures, each sentence
    once (the two ends usually say the same)."""
    out = []
    for h in (pair["a"], pair["b"]):
        r = results.get(h) or {}
        for why in fabric.diagnose(pair["gbs"], r.get("nccl_net") or [], pair.get("link_gbps"),
                                   r.get("per_function_gbps"), r.get("functions"), r.get("management_gbps")):
            if why not in out:
                out.append(why)
    return out


def cross_host(summary, at=None, report=None):
    """The fleet summary's `cross_host` entry: every pair against its link (a, b, GB/s, link Gb/s, % of link,
    slow, why and NCCL's diagnosis), the slowest pair, the hosts that failed with each one's diagnosis, the
    hosts that never joined, and whether the group passed."""
    judged = summary.get("judged") or {}
    pairs = [dict((k, p.get(k)) for k in ("a", "b", "bytes", "gbs", "link_gbps", "pct_of_link", "exact", "slow",
                                          "why", "diagnosis")) for p in judged.get("pairs") or []]
    diagnosis = {}
    for h in summary.get("failed_hosts") or []:
        entry = (summary.get("per_host") or {}).get(h) or {}
        diagnosis[h] = list(entry.get("diagnosis") or []) or [entry.get("reason") or entry.get("status") or "failed"]
    return {"at": at, "hosts": list(summary.get("hosts") or []), "backend": summary.get("backend"),
            "min_fraction": summary.get("min_fraction"), "min_gbs": summary.get("min_gbs"),
            "pairs": pairs, "slowest": judged.get("slowest"), "failed_hosts": list(summary.get("failed_hosts") or []),
            "diagnosis": diagnosis, "missing": list(summary.get("missing") or []), "passed": summary.get("passed"),
            "min_busbw_fraction": summary.get("min_busbw_fraction"),
            "collectives": list(summary.get("collectives") or []), "nodes": list(summary.get("nodes") or []),
            "screen": summary.get("screen"), "report": report}


def diagnose_host(host, result, pairs):
    """Why a slow host's best pair is slow: NCCL's NET lines (NCCL_DEBUG=INFO) and its fabric's figures
    (per_function_gbps, functions, management_gbps from fabric_facts, when the run was given them)."""
    mine = [p for p in pairs if host in (p["a"], p["b"])]
    if not mine:
        return []
    best = max(mine, key=lambda p: p["gbs"])
    return fabric.diagnose(best["gbs"], result.get("nccl_net") or [], best.get("link_gbps"),
                           result.get("per_function_gbps"), result.get("functions"), result.get("management_gbps"))


def rdma_expected(results, hosts, missing=()):
    """The nodes that ran NCCL with their fabric port's RDMA functions up (expect_rdma from the cluster play): their
    NCCL must have gone over RoCE/InfiniBand."""
    return [h for h in hosts if h not in missing and (results.get(h) or {}).get("expect_rdma")
            and (results.get(h) or {}).get("backend") == "nccl"]


def summarize(results, hosts, speeds, min_fraction, min_gbs=None, min_busbw_fraction=None, rated_gbps=None):
    """Combine every host's run result (keyed by host; a host with none did not run) into the
    group's verdict: which hosts never joined or failed, the pairs judged against the links, the collective over
    all nodes against the slowest node's link, each node's port speed, and the verdict per node (node_verdicts)."""
    per_host, missing, failed = {}, [], []
    for h in hosts:
        r = results.get(h)
        if not r:
            per_host[h] = {"status": "unreachable", "reason": "no result: the host did not run the check"}
            if h not in missing:
                missing.append(h)
            continue
        per_host[h] = {"status": r.get("status"), "reason": r.get("reason"), "link_gbps": speeds.get(h),
                       "link_source": r.get("link_source"), "nccl_net": list(r.get("nccl_net") or [])}
        for m in r.get("missing") or []:
            if m not in missing:
                missing.append(m)
    for h in missing:
        per_host[h]["status"] = "never joined" if per_host[h]["status"] != "unreachable" else "unreachable"
    judged = None
    first = results.get(hosts[0]) if hosts else None
    if first and first.get("status") == "ok":
        judged = judge(first.get("pairs") or [], speeds, min_fraction, min_gbs)
        bad_checks = [c for c in first.get("checks") or [] if c.get("status") != "pass"]
        for p in judged["pairs"]:
            p["diagnosis"] = diagnose_pair(p, results) if p["slow"] else []
        for h in judged["failed_hosts"]:
            per_host[h]["status"] = "slow link"
            per_host[h]["reason"] = "; ".join(sorted(set(p["why"] or "result not exact" for p in judged["pairs"]
                                                         if h in (p["a"], p["b"]))))
            diagnosis = diagnose_host(h, results.get(h) or {}, judged["pairs"])
            if diagnosis:
                per_host[h]["diagnosis"] = diagnosis
                per_host[h]["reason"] += "; " + "; ".join(diagnosis)
        failed += judged["failed_hosts"]
        if bad_checks:
            failed += [h for h in hosts if h not in failed]
            for h in hosts:
                per_host[h]["reason"] = "; ".join(c["detail"] for c in bad_checks)
    for h in hosts:
        status = per_host[h]["status"]
        if status in ("error", "timeout") or h in missing:
            if h not in failed:
                failed.append(h)
    if missing:
        # The others could not run the check: they are not failed, but not checked either.
        for h in hosts:
            if h not in failed and per_host[h]["status"] in ("not_joined", "ok"):
                per_host[h]["status"] = "not checked"
                per_host[h]["reason"] = "waiting for %s" % ", ".join(missing)
    known = [s for s in (speeds.get(h) for h in hosts) if s]
    link = min(known) if known else None
    collectives = judge_collectives(first.get("collectives"), len(hosts), link, min_busbw_fraction) \
        if judged is not None else []
    expected = rdma_expected(results, hosts, missing) if judged is not None else ()
    summary = {"hosts": list(hosts), "per_host": per_host, "missing": missing, "failed_hosts": failed,
               "judged": judged, "min_fraction": min_fraction, "min_gbs": min_gbs,
               "min_busbw_fraction": min_busbw_fraction, "rated_gbps": rated_gbps,
               "collectives": collectives, "collective_link_gbps": link,
               "port": port_reasons(dict((h, speeds.get(h)) for h in hosts), rated_gbps),
               "transport": transport_reasons(dict((h, per_host[h].get("nccl_net")) for h in hosts), expected),
               "backend": (first or {}).get("backend")}
    screen = (first or {}).get("screening") if judged is not None else None
    if screen:
        # The grouped search's report (rounds used against the round-robin's, each group's row), and its bad nodes'
        # reasons for the verdict per node.
        summary["screen"] = screen
        summary["screening"] = dict((h, ["screening: %s" % why]) for h, why in (screen.get("bad") or {}).items())
    nodes = node_verdicts(summary)
    for v in nodes:
        per_host[v["node"]]["verdict"] = v["verdict"]
        per_host[v["node"]]["reasons"] = v["reasons"]
        if v["verdict"] == "fail" and v["node"] not in failed:
            failed.append(v["node"])
            per_host[v["node"]]["status"] = "failed"
            per_host[v["node"]]["reason"] = "; ".join(v["reasons"])
    summary["nodes"] = nodes
    summary["verdict"] = group_verdict(nodes)
    summary["passed"] = summary["verdict"]["verdict"] == "pass"
    return summary
