# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet summary: each host's state, class, builds and installed wheels, as plain functions.

The summary is <report dir>/fleet-summary.json (this run) and one line per run appended to
<report dir>/fleet-history.jsonl, which later runs and people compare against.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.sparkforge.stack.plugins.module_utils._common.clock import utc_now
from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import atomic_write_text

STOPPED = "stopped in preflight or unreachable"


def summarize(hosts):
    """Host name -> raw facts ({seen, state, error, class, builder, builds, wheels}) to the summary.

    A host is in the summary once the run has seen it (preflight planned it or fleet planning
    took its inputs).  A host without a state failed; without an error of its own it stopped in
    preflight or could not be reached.
    """
    out = {}
    for name in hosts:
        raw = hosts[name] or {}
        if not raw.get("seen"):
            continue
        state = raw.get("state") or None
        error = raw.get("error")
        if not error:
            error = None if state else STOPPED
        out[name] = {
            "state": state or "failed",
            "error": error,
            "class": raw.get("class") or None,
            "lineage": raw.get("lineage") or None,
            "builder": bool(raw.get("builder")),
            "builds": list(raw.get("builds") or []),
            "wheels": dict(raw.get("wheels") or {}),
            # The generation of its class the host ends on, and how it got there (rollouts).
            "generation": raw.get("generation"),
            "how": raw.get("how"),
        }
    return out


def render(summary):
    """Lines a person reads: one per host, then one per installed wheel."""
    lines = []
    for name, entry in summary.items():
        builder = ""
        if entry["builder"]:
            builder = " (builder, built: %s)" % (", ".join(entry["builds"]) or "nothing")
        error = ": %s" % entry["error"] if entry["error"] else ""
        generation = ""
        if entry.get("generation") is not None:
            generation = " generation %s" % entry["generation"]
            if entry.get("how"):
                generation += " (%s)" % entry["how"]
        lines.append("%-20s %-11s %s%s%s%s" % (name, entry["state"], entry["class"] or "-", generation, builder, error))
        for wheel, sha in entry["wheels"].items():
            lines.append("    %-12s sha256 %s" % (wheel, sha))
    return lines


def _cell(value):
    return "-" if value is None or value == "" else str(value).replace("|", "/")


def cross_host_lines(cross):
    """Markdown for the fleet summary's `cross_host` (xhost_collectives): each host pair against its link, the
    slow ones with why, each failed host's diagnosis, the hosts that never joined."""
    if not cross:
        return []
    verdict = "PASS" if cross.get("passed") else "FAIL"
    lines = ["## Collectives across hosts", "",
             "%s: %d hosts, backend %s, checked %s (threshold: %s of the link%s)." % (
                 verdict, len(cross.get("hosts") or []), _cell(cross.get("backend")), _cell(cross.get("at")),
                 "%.0f%%" % (100 * cross["min_fraction"]) if cross.get("min_fraction") else "no fraction",
                 ", %g GB/s" % cross["min_gbs"] if cross.get("min_gbs") else ""), ""]
    pairs = cross.get("pairs") or []
    if pairs:
        lines += ["| a | b | GB/s | link Gb/s | % of link | slow | why |", "|---|---|---|---|---|---|---|"]
        for p in pairs:
            why = [p["why"]] if p.get("why") else []
            why += list(p.get("diagnosis") or [])
            if p.get("exact") is False:
                why.append("result not exact")
            lines.append("| %s | %s | %.3f | %s | %s | %s | %s |" % (
                _cell(p.get("a")), _cell(p.get("b")), p.get("gbs") or 0.0,
                "%g" % p["link_gbps"] if p.get("link_gbps") else "-", _cell(p.get("pct_of_link")),
                "SLOW" if p.get("slow") else "no", _cell("; ".join(why))))
        lines.append("")
    elif cross.get("slowest"):
        s = cross["slowest"]
        lines += ["Slowest pair: %s - %s, %s GB/s." % (s.get("a"), s.get("b"), s.get("gbs")), ""]
    if cross.get("collectives"):
        lines += ["| collective | bytes per node | algbw GB/s | busbw GB/s | % of link | exact | slow |",
                  "|---|---|---|---|---|---|---|"]
        for r in cross["collectives"]:
            lines.append("| %s | %s | %.3f | %.3f | %s | %s | %s |" % (
                _cell(r.get("op")), _cell(r.get("bytes")), r.get("algbw") or 0.0, r.get("busbw") or 0.0,
                _cell(r.get("pct_of_link")), "yes" if r.get("exact") else "NO", "SLOW" if r.get("slow") else "no"))
        lines.append("")
    diagnosis = cross.get("diagnosis") or {}
    for host in cross.get("failed_hosts") or []:
        lines.append("- **%s failed**: %s" % (host, "; ".join(diagnosis.get(host) or ["no diagnosis"])))
    if cross.get("missing"):
        lines.append("- never joined: %s" % ", ".join(cross["missing"]))
    if cross.get("report"):
        lines.append("- report: `%s`" % cross["report"])
    return lines


def render_markdown(fleet):
    """fleet-summary.md: one row per host of fleet-summary.json, then its `cross_host` entry when there is one."""
    lines = ["# Fleet summary", "", "| host | state | class | generation | builder | error |",
             "|---|---|---|---|---|---|"]
    for name in sorted(k for k, v in fleet.items() if k != "cross_host" and isinstance(v, dict)):
        entry = fleet[name]
        builder = "-"
        if entry.get("builder"):
            builder = "yes (%s)" % (", ".join(entry.get("builds") or []) or "built nothing")
        generation = entry.get("generation")
        if generation is not None and entry.get("how"):
            generation = "%s (%s)" % (generation, entry["how"])
        lines.append("| %s | %s | %s | %s | %s | %s |" % (
            name, _cell(entry.get("state")), _cell(entry.get("class")), _cell(generation), builder,
            _cell(entry.get("error"))))
    if fleet.get("cross_host"):
        lines += [""] + cross_host_lines(fleet["cross_host"])
    return "\n".join(lines).rstrip("\n") + "\n"


def write(report_dir, summary, now=None):
    """Write fleet-summary.json and append the run to fleet-history.jsonl (stamped ``now``, a utc_now()
    text, default the present); returns the paths."""
    os.makedirs(report_dir, mode=0o755, exist_ok=True)
    path = os.path.join(report_dir, "fleet-summary.json")
    atomic_write_text(path, json.dumps(summary, indent=4, sort_keys=True) + "\n")
    history = os.path.join(report_dir, "fleet-history.jsonl")
    with open(history, "a") as handle:
        handle.write(json.dumps({"at": now or utc_now(), "check": False, "hosts": summary}, sort_keys=True) + "\n")
    return [path, history]
