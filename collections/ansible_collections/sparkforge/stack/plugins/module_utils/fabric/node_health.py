# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each node's health beside the acceptance (issue 44, item 5): what the node says about itself - GPU Xid and PCIe
AER errors in the kernel log since boot, the driver's flavour (open or proprietary kernel modules) and version,
persistence mode, and the SM clock and power drawn while the collective ran - and each node compared with its
peers. Pure functions over text; the reference for every format is docs/results/node-facts-h200/ (captured on an
H200) and the sources cited beside each pattern. Thresholds are data: sparkforge_node_health (manifest fabric.yml)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# /proc/driver/nvidia/version's first line. The open modules print "NVIDIA UNIX Open Kernel Module for x86_64
# 580.159.04 ..." (docs/results/node-facts-h200), the proprietary ones "NVIDIA UNIX x86_64 Kernel Module
# 535.104.05 ..." (the same file, as NVIDIA's driver README "Open Linux Kernel Modules" names the two flavours).
DRIVER = re.compile(r"NVRM version: NVIDIA UNIX (?P<open>Open )?(?:Kernel Module for \S+|\S+ Kernel Module)"
                    r"\s+(?P<version>\d+(?:\.\d+)+)")

# The driver's Xid line: "NVRM: Xid (PCI:0000:01:00): 79, ..." and, from older drivers, "NVRM: Xid (0000:01:00):
# 13, ..." (kernel logs quoted in NVIDIA's forums and docs.nvidia.com/deploy/xid-errors; the code after the colon).
XID = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<device>[0-9A-Fa-f:.]+)\): (?P<code>\d+),")

# The kernel's AER report (drivers/pci/pcie/aer.c, aer_print_error): "<driver> <BDF>: PCIe Bus Error:
# severity=%s, type=%s, (%s)"; severity "Corrected" / "Uncorrected (Non-Fatal)" / "Uncorrected (Fatal)", spelled
# "Correctable" / "Uncorrectable (...)" in newer kernels; newer kernels print "%s Bus Error" with PCIe or CXL.
AER = re.compile(r"(?:(?P<device>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]): )?(?:PCIe|CXL) Bus Error: "
                 r"severity=(?P<severity>[^,]+), type=(?P<type>[^,]+)")

# The nvidia-smi --query-gpu fields read, in this order; the header prints some under another name
# (clocks.sm as "clocks.current.sm [MHz]", docs/results/node-facts-h200) and values carry their unit.
QUERY = ("index", "name", "pci.bus_id", "persistence_mode", "driver_version", "clocks.sm", "clocks.max.sm",
         "power.draw", "power.limit")
ALIASES = {"clocks.current.sm": "clocks.sm", "clocks.current.memory": "clocks.mem",
           "clocks.max.sm": "clocks.max.sm"}
NUMERIC = ("clocks.sm", "clocks.max.sm", "clocks.mem", "power.draw", "power.limit")
# What a node's peers are compared on: (figure, sample field, unit, threshold key in sparkforge_node_health).
FIGURES = (("peak_sm_mhz", "clocks.sm", "MHz", "min_clock_fraction"),
           ("peak_power_w", "power.draw", "W", "min_power_fraction"))

THRESHOLDS = {
    "min_clock_fraction": "a fraction of the peers' median peak SM clock",
    "min_power_fraction": "a fraction of the peers' median peak power draw",
}


def driver(text):
    """{"flavour": "open" | "proprietary" | None, "version"} from /proc/driver/nvidia/version's text."""
    m = DRIVER.search(text or "")
    if not m:
        return {"flavour": None, "version": None}
    return {"flavour": "open" if m.group("open") else "proprietary", "version": m.group("version")}


def kernel_errors(text):
    """{"xid": [{device, code, line}], "aer": [{device, severity, type, line}]} from the kernel log's lines."""
    out = {"xid": [], "aer": []}
    for line in (text or "").splitlines():
        m = XID.search(line)
        if m:
            out["xid"].append({"device": m.group("device"), "code": int(m.group("code")), "line": line.strip()})
            continue
        m = AER.search(line)
        if m:
            out["aer"].append({"device": m.group("device"), "severity": m.group("severity").strip(),
                               "type": m.group("type").strip(), "line": line.strip()})
    return out


def _value(field, text):
    text = text.strip()
    if not text or text.startswith("[") or text in ("N/A", "Not Supported"):
        return None
    if field in NUMERIC:
        try:
            return float(text.split()[0])
        except (ValueError, IndexError):
            return None
    return text


def gpus(csv_text):
    """One dict per GPU row of `nvidia-smi --query-gpu=... --format=csv` (header kept, units or not): keys are the
    queried field names (the header's aliases mapped back), numbers as floats, [N/A] / [Not Supported] as None."""
    lines = [l for l in (csv_text or "").splitlines() if l.strip()]
    if not lines:
        return []
    names = []
    for col in lines[0].split(","):
        name = re.sub(r"\s*\[[^\]]*\]\s*$", "", col.strip())
        names.append(ALIASES.get(name, name))
    rows = []
    for line in lines[1:]:
        cells = line.split(",")
        if len(cells) != len(names):
            continue
        rows.append(dict((n, _value(n, c)) for n, c in zip(names, cells)))
    return rows


def peaks(samples):
    """Per GPU (by pci.bus_id, else index): the highest SM clock and power drawn over the samples, and how many
    samples held each. samples: a list of gpus() lists, one per sampling."""
    out = {}
    for rows in samples or []:
        for row in rows:
            key = row.get("pci.bus_id") or str(row.get("index"))
            entry = out.setdefault(key, {"gpu": key, "name": row.get("name"), "samples": 0, "peak_sm_mhz": None,
                                         "peak_power_w": None, "max_sm_mhz": row.get("clocks.max.sm"),
                                         "power_limit_w": row.get("power.limit"),
                                         "persistence": row.get("persistence_mode"),
                                         "driver_version": row.get("driver_version")})
            entry["samples"] += 1
            for figure, field, _unit, _key in FIGURES:
                v = row.get(field)
                if v is not None and (entry[figure] is None or v > entry[figure]):
                    entry[figure] = v
    return [out[k] for k in sorted(out)]


def check_thresholds(spec, var="xhost_node_health_spec"):
    """Sentences naming each bad value of the spec (var.key: value, what it must be); [] when all are good."""
    errors = []
    if not isinstance(spec, dict):
        return ["%s: %r is not a mapping: it needs %s" % (var, spec, ", ".join(sorted(THRESHOLDS)))]
    for key, what in sorted(THRESHOLDS.items()):
        v = spec.get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 1:
            errors.append("%s.%s: %r is out of range: it must be above 0 and at most 1 (%s)" % (var, key, v, what))
    for key in ("xid_ignored", "aer_severities", "open_modules_required"):
        v = spec.get(key)
        if not isinstance(v, list):
            errors.append("%s.%s: %r is not a list" % (var, key, v))
    v = spec.get("sample_interval")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.1 <= v <= 60:
        errors.append("%s.sample_interval: %r is out of range: it must be between 0.1 and 60 seconds (one nvidia-smi "
                      "call per sample)" % (var, v))
    bad = [x for x in spec.get("xid_ignored") or [] if isinstance(x, bool) or not isinstance(x, int)]
    if isinstance(spec.get("xid_ignored"), list) and bad:
        errors.append("%s.xid_ignored: %r holds %s, not Xid codes (whole numbers)"
                      % (var, spec["xid_ignored"], ", ".join(repr(x) for x in bad)))
    return errors


def _median(values):
    values = sorted(values)
    n = len(values)
    if not n:
        return None
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2.0


def _odd_ones(values):
    """The nodes whose value is not the one most nodes hold (every node when no value is held by most), and that
    value; {} when all agree. values: {node: value}, None left out."""
    known = dict((h, v) for h, v in values.items() if v is not None)
    counts = {}
    for v in known.values():
        counts[v] = counts.get(v, 0) + 1
    if len(counts) < 2:
        return {}, None
    top = max(counts.values())
    common = [v for v, c in counts.items() if c == top]
    usual = common[0] if len(common) == 1 else None
    return dict((h, v) for h, v in known.items() if v != usual), usual


def node_figures(reading):
    """The node's figures under load: the lowest peak over its GPUs (its slowest GPU sets the collective's pace)."""
    rows = reading.get("gpus") or []
    out = {}
    for figure, _field, _unit, _key in FIGURES:
        vals = [g[figure] for g in rows if g.get(figure) is not None]
        out[figure] = min(vals) if vals else None
    return out


def _requires_open(names, models):
    tokens = set(t for n in names for t in (n or "").split())
    return sorted(m for m in models if m in tokens)


def compare(readings, hosts, spec):
    """The health verdict per node, [{node, verdict: pass|fail, reasons, driver, persistence, figures, xid, aer}]:
    a node fails on an Xid (not in xid_ignored) or AER error (severity in aer_severities) since boot, a proprietary
    driver where its GPU needs the open modules, a driver flavour or version other than its peers', persistence off
    where most peers have it on, a peak SM clock or power under load below the fraction of its peers' median, and a
    reading that did not come back or holds no sample (fails safe)."""
    out = dict((h, {"node": h, "reasons": []}) for h in hosts)
    read = {}
    for h in hosts:
        r = readings.get(h) or {}
        # async_status' result: a reading ends with its driver; anything else (failed, still running, the node
        # unreachable) fails safe.
        if "driver" not in r or r.get("failed"):
            why = r.get("msg") or ("the reading did not end" if r.get("finished") is False else "no result")
            out[h]["reasons"].append("health not read: %s" % why)
            continue
        read[h] = r
    flavours, versions, persist, figures = {}, {}, {}, {}
    for h, r in sorted(read.items()):
        reasons = out[h]["reasons"]
        drv = r.get("driver") or {}
        rows = r.get("gpus") or []
        flavours[h] = drv.get("flavour")
        from_smi = [g["driver_version"] for g in rows if g.get("driver_version")]
        versions[h] = drv.get("version") or (from_smi[0] if from_smi else None)
        modes = set(g.get("persistence") for g in rows if g.get("persistence"))
        persist[h] = "Enabled" if modes == {"Enabled"} else ("Disabled" if "Disabled" in modes else None)
        figures[h] = node_figures(r)
        out[h].update(driver=dict(drv, version=versions[h]), persistence=persist[h], figures=figures[h],
                      xid=r.get("xid") or [], aer=r.get("aer") or [])
        if not rows or not any(g.get("samples") for g in rows):
            reasons.append("no nvidia-smi sample was taken while the collective ran: its clocks and power are "
                           "unproven")
        if drv.get("flavour") is None:
            reasons.append("the driver flavour is unread (%s)" % (r.get("driver_source") or
                                                                  "/proc/driver/nvidia/version"))
        need = _requires_open([g.get("name") for g in rows], spec.get("open_modules_required") or [])
        if need and drv.get("flavour") == "proprietary":
            reasons.append("the proprietary kernel modules are loaded, but %s is supported only by the open kernel "
                           "modules: install the driver's open flavour (nvidia-open)" % ", ".join(need))
        xids = {}
        for e in r.get("xid") or []:
            if e["code"] not in (spec.get("xid_ignored") or []):
                xids.setdefault((e["code"], e["device"]), []).append(e)
        for (code, dev), lines in sorted(xids.items()):
            reasons.append("Xid %d on %s %d time(s) since boot (%s): see docs.nvidia.com/deploy/xid-errors"
                           % (code, dev, len(lines), lines[-1]["line"]))
        aers = {}
        for e in r.get("aer") or []:
            if e["severity"] in (spec.get("aer_severities") or []):
                aers.setdefault((e["severity"], e["type"], e["device"]), []).append(e)
        for (sev, kind, dev), lines in sorted(aers.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
            reasons.append("PCIe AER %s %s error on %s %d time(s) since boot (%s)"
                           % (sev, kind, dev or "?", len(lines), lines[-1]["line"]))
    for what, values in (("driver flavour", flavours), ("driver version", versions)):
        odd, usual = _odd_ones(values)
        for h, v in sorted(odd.items()):
            peers = ", ".join("%s on %s" % (values[p], p) for p in sorted(values) if p != h and values[p] != v)
            out[h]["reasons"].append("its %s %s differs from its peers' (%s)%s" % (
                what, v, peers, "" if usual else ": no value is held by most nodes"))
    on = [h for h, v in persist.items() if v == "Enabled"]
    for h, v in sorted(persist.items()):
        peers = [p for p in persist if p != h and persist[p] is not None]
        if v == "Disabled" and peers and sum(1 for p in peers if p in on) * 2 > len(peers):
            out[h]["reasons"].append("persistence mode is off where %d of its %d peers have it on: enable it "
                                     "(nvidia-persistenced)" % (sum(1 for p in peers if p in on), len(peers)))
    for figure, field, unit, key in FIGURES:
        have = dict((h, f[figure]) for h, f in figures.items() if f[figure] is not None)
        if not have:
            continue
        for h in sorted(figures):
            others = [v for p, v in have.items() if p != h]
            if not others:
                continue
            if h not in have:
                out[h]["reasons"].append("%s was not reported while its peers' was: unproven" % field)
                continue
            median = _median(others)
            if median and have[h] < spec[key] * median:
                out[h]["reasons"].append(
                    "its peak %s during the collective was %g %s, %.0f%% of its peers' median %g %s (below %.0f%%, "
                    "%s): a unit held at low clocks or power" % (field, have[h], unit, 100.0 * have[h] / median,
                                                                 median, unit, 100 * spec[key], key))
    result = []
    for h in hosts:
        entry = out[h]
        entry["verdict"] = "fail" if entry["reasons"] else "pass"
        result.append(entry)
    return result


def merge(summary, health):
    """The acceptance's summary (xhost.json's content) with each node's health in it: `health` per node, a node
    whose health failed failed with "health: ..." reasons, and the group's verdict recomputed the way
    acceptance.group_verdict does (pass only when every node passed)."""
    by_node = dict((v["node"], v) for v in health)
    summary = dict(summary)
    summary["health"] = health
    nodes = []
    for v in summary.get("nodes") or []:
        v = dict(v)
        h = by_node.get(v["node"])
        # A summary merged before (a rerun over the same report) keeps only the acceptance's own reasons.
        v["reasons"] = [r for r in v.get("reasons") or [] if not r.startswith("health: ")]
        if not v["reasons"] and v.get("verdict") == "fail" and v.get("health"):
            v["verdict"] = "pass"
        if h and h["verdict"] == "fail":
            v["reasons"] = v["reasons"] + ["health: %s" % r for r in h["reasons"]]
            v["verdict"] = "fail"
        v["health"] = h
        nodes.append(v)
    summary["nodes"] = nodes
    failed = [v["node"] for v in nodes if v["verdict"] == "fail"]
    unchecked = [v["node"] for v in nodes if v["verdict"] == "not checked"]
    summary["verdict"] = {"verdict": "pass" if nodes and not failed and not unchecked else "fail", "failed": failed,
                          "not_checked": unchecked,
                          "reasons": ["%s: %s" % (v["node"], "; ".join(v["reasons"])) for v in nodes
                                      if v["verdict"] == "fail"]}
    summary["passed"] = summary["verdict"]["verdict"] == "pass"
    before = [h for h in summary.get("failed_hosts") or [] if h not in summary.get("health_failed", [])]
    summary["health_failed"] = [v["node"] for v in health if v["verdict"] == "fail" and v["node"] not in before]
    summary["failed_hosts"] = before + summary["health_failed"]
    return summary


def render_markdown(health):
    """The health section appended to xhost.md: one row per node."""
    lines = ["", "## Node health", "",
             "| node | verdict | driver | persistence | peak SM MHz | peak W | Xid | AER | why |",
             "|---|---|---|---|---|---|---|---|---|"]
    for v in health:
        drv = v.get("driver") or {}
        fig = v.get("figures") or {}
        lines.append("| %s | %s | %s %s | %s | %s | %s | %d | %d | %s |" % (
            v["node"], v["verdict"], drv.get("flavour") or "?", drv.get("version") or "?",
            v.get("persistence") or "?", _shown(fig.get("peak_sm_mhz")), _shown(fig.get("peak_power_w")),
            len(v.get("xid") or []), len(v.get("aer") or []),
            "; ".join(v["reasons"]).replace("|", "/") or "-"))
    return "\n".join(lines) + "\n"


def _shown(value):
    return "?" if value is None else "%g" % value
