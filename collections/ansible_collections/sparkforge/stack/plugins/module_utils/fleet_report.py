# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet summary: each host's state, class, builds and installed wheels, as plain functions.

The summary is <report dir>/fleet-summary.json (this run) and one line per run appended to
<report dir>/fleet-history.jsonl, which later runs and people compare against.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import os

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


def write(report_dir, summary, now=None):
    """Write fleet-summary.json and append the run to fleet-history.jsonl; returns the paths."""
    os.makedirs(report_dir, mode=0o755, exist_ok=True)
    path = os.path.join(report_dir, "fleet-summary.json")
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        handle.write(json.dumps(summary, indent=4, sort_keys=True) + "\n")
    os.chmod(tmp, 0o644)
    os.rename(tmp, path)
    now = now or datetime.datetime.now(datetime.timezone.utc)
    history = os.path.join(report_dir, "fleet-history.jsonl")
    with open(history, "a") as handle:
        handle.write(json.dumps({"at": now.isoformat(), "check": False, "hosts": summary}, sort_keys=True) + "\n")
    return [path, history]
