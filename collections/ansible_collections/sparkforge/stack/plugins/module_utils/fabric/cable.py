# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each cable proven from what sysfs says before any NCCL run, with the likely cause named: every function of the
port up (both HCA functions of a DGX Spark's QSFP port share its rate), each function's PCIe link trained at its
device's maximum width and speed, and - when a bandwidth was measured per direction - that bandwidth against a
floor, a shortfall matched to the causes in the manifest (sparkforge_fabric_cable). JSON verdict per cable and per
node. Pure: the port is fabric.ports()' entry."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re


def _gts(text):
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*GT/s", text or "")
    return float(m.group(1)) if m else None


def _width(text):
    try:
        return int(str(text).strip())
    except (TypeError, ValueError):
        return None


def pcie_reasons(fn, spec):
    """Sentences for one function whose PCIe link trained below its device's maximum (width or speed)."""
    pcie = fn.get("pcie") or {}
    name = fn.get("netdev") or fn.get("rdma")
    out = []
    cur_w, max_w = _width(pcie.get("current_link_width")), _width(pcie.get("max_link_width"))
    cur_s, max_s = _gts(pcie.get("current_link_speed")), _gts(pcie.get("max_link_speed"))
    if cur_w and max_w and cur_w < max_w:
        out.append("%s: PCIe x%d of x%d (%s)" % (name, cur_w, max_w, spec["causes"]["pcie"]))
    if cur_s and max_s and cur_s < max_s:
        out.append("%s: PCIe %g of %g GT/s (%s)" % (name, cur_s, max_s, spec["causes"]["pcie"]))
    return out


def measured_cause(gbps, spec):
    """The likely cause of a measured bandwidth below the floor: the first of the manifest's bands holding it."""
    for band in spec.get("bands") or []:
        if band["from_gbps"] <= gbps < band["below_gbps"]:
            return band["cause"]
    return spec["causes"]["unknown"]


def cable_verdict(port, spec, measured=None):
    """{"port", "functions", "verdict": pass|fail, "reasons", "measured"} for one cabled port. measured: {direction:
    Gb/s} from an RDMA bandwidth test per direction (ib_write_bw, or the NCCL pair test); each direction below the
    floor fails, named with its likely cause; a direction asked for but not measured (None) fails safe."""
    reasons = []
    down = [f.get("netdev") or f.get("rdma") for f in port["functions"] if not f.get("up")]
    if down:
        reasons.append("%s down: %d of %d functions carry the port (%s)" % (
            ", ".join(down), len(port["functions"]) - len(down), len(port["functions"]), spec["causes"]["function"]))
    for fn in port["functions"]:
        reasons += pcie_reasons(fn, spec)
    floor = spec["floor_gbps"]
    for direction, gbps in sorted((measured or {}).items()):
        if gbps is None:
            reasons.append("%s: no bandwidth measured (a test that did not come back fails)" % direction)
        elif gbps < floor:
            cause = measured_cause(gbps, spec)
            reasons.append("%s: %g Gb/s, below the floor of %g Gb/s (%s)" % (direction, gbps, floor, cause))
    return {"port": port["name"], "functions": [f.get("netdev") or f.get("rdma") for f in port["functions"]],
            "verdict": "fail" if reasons else "pass", "reasons": reasons, "measured": dict(measured or {}),
            "floor_gbps": floor}


def node_verdict(node, cables):
    """The node's verdict from its cables': pass when every cable passed (and it has one)."""
    failed = [c for c in cables if c["verdict"] != "pass"]
    return {"node": node, "verdict": "pass" if cables and not failed else "fail",
            "reasons": ["%s: %s" % (c["port"], "; ".join(c["reasons"])) for c in failed]
            or ([] if cables else ["no cabled port"]), "cables": cables}
