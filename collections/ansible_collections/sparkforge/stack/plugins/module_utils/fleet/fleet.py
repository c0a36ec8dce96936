# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Platform classes of a fleet and the builder of each, as plain functions.

Hosts that would build byte-identical wheels form one *platform class*: same CPU
architecture, same set of GPU compute capabilities, same OS release, same Python
(major.minor), same CUDA major, and the same planned build inputs (torch version,
TORCH_CUDA_ARCH_LIST, Triton version and LLVM commit).  Each class builds its
wheels once, on its *builder*: a host of the ``builders`` group that is in the
class, else the first host of the class (inventory order) that meets the source
build thresholds.  A class without a possible builder is an error with the reason.

The class id is readable and changes whenever any of the inputs change, so
changing one class's arch list gives that class (and only it) a new id and a new
place in the wheelhouse.  The *lineage* id covers the platform fields only (CPU
architecture, GPUs, OS, Python, CUDA major): it stays when a torch upgrade makes a
new class, and a class's generations (module_utils/fleet/generations.py) follow it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import re

# The fields that make up a class, in the order they are shown.
KEY_FIELDS = ("arch", "capabilities", "os", "python", "cuda_major", "torch_source", "torch_version",
              "cuda_arch_list", "triton_version", "llvm_commit")


class FleetError(Exception):
    pass


def _major_minor(version):
    parts = str(version or "").split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else str(version or "")


def class_key(host):
    """The class key of one host: a dict of KEY_FIELDS from its facts and plan.

    ``host`` holds ``arch`` (CPU arch), ``capabilities`` (list of "12.1"-style strings),
    ``distribution`` and ``distribution_version``, ``python_version``, ``cuda_major`` and
    ``plan`` (preflight's sparkforge_plan: torch.version, arch.list,
    triton.version, triton.llvm_commit).
    """
    missing = [k for k in ("arch", "capabilities", "distribution", "distribution_version", "python_version",
                           "cuda_major", "plan") if k not in host]
    if missing:
        raise FleetError("host facts lack %s" % ", ".join(missing))
    plan = host["plan"] or {}
    torch = plan.get("torch") or {}
    triton = plan.get("triton") or {}
    return {
        "arch": str(host["arch"]),
        "capabilities": sorted(set(str(c) for c in host["capabilities"]), key=_cap_sort),
        "os": "%s %s" % (host["distribution"], host["distribution_version"]),
        "python": _major_minor(host["python_version"]),
        "cuda_major": str(host["cuda_major"]),
        "torch_source": str(torch.get("source") or ""),
        "torch_version": str(torch.get("version") or ""),
        "cuda_arch_list": str((plan.get("arch") or {}).get("list") or ""),
        "triton_version": str(triton.get("version") or ""),
        "llvm_commit": str(triton.get("llvm_commit") or ""),
    }


def _cap_sort(cap):
    return tuple(int(p) if p.isdigit() else 0 for p in cap.split("."))


def _slug(text):
    return re.sub(r"[^a-z0-9_]+", "", text.lower())


def class_id(key, platform_class=""):
    """A readable, stable id: <platform class>-<arch>-<sms>-py<ver>-<8 hex of the whole key>."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()
    sms = "_".join("sm%s" % c.replace(".", "") for c in key["capabilities"]) or "nogpu"
    parts = [_slug(platform_class) or "generic", _slug(key["arch"]), sms, "py%s" % key["python"].replace(".", "")]
    return "-".join(p for p in parts if p) + "-" + digest[:8]


# What stays the same when a class's build inputs change (torch version, arch list, Triton): the
# hosts themselves. A class's generations follow this lineage across upgrades.
PLATFORM_FIELDS = ("arch", "capabilities", "os", "python", "cuda_major")


def lineage_id(key, platform_class=""):
    """The id of a class's lineage: its class id's readable part and 8 hex of the platform fields only."""
    platform = dict((k, key[k]) for k in PLATFORM_FIELDS)
    readable = class_id(key, platform_class).rsplit("-", 1)[0]
    digest = hashlib.sha256(json.dumps(platform, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()
    return "%s-%s" % (readable, digest[:8])


def plan_fleet(hosts, order, builders=(), source_build=True):
    """Group hosts into classes and pick each class's builder.

    ``hosts``: name -> dict with the class_key() inputs plus ``platform_class`` (gpu_facts'),
    ``can_build`` (bool) and ``build_problems`` (list of {check, message}).
    ``order``: host names in inventory order (decides "the first host of the class").
    ``builders``: names of the ``builders`` group.  ``source_build``: whether the fleet builds
    at all; a class needs a builder only when it is on and a host's plan has ``source_build``.

    Returns {"classes": {id: {...}}, "hosts": {name: {...}}, "errors": [str], "lines": [str]}.
    """
    unknown = [name for name in hosts if name not in order]
    if unknown:
        raise FleetError("hosts missing from the order: %s" % ", ".join(sorted(unknown)))
    builders = list(builders or ())
    classes = {}
    for name in order:
        if name not in hosts:
            continue
        host = hosts[name]
        key = class_key(host)
        cid = class_id(key, host.get("platform_class", ""))
        entry = classes.setdefault(cid, {"id": cid, "platform_class": host.get("platform_class", ""),
                                         "lineage": lineage_id(key, host.get("platform_class", "")),
                                         "key": key, "hosts": [], "builder": None, "builder_why": "",
                                         "error": None})
        entry["hosts"].append(name)

    errors = []
    for cid, entry in classes.items():
        if not source_build or not any((hosts[h]["plan"] or {}).get("source_build") for h in entry["hosts"]):
            entry["builder_why"] = "nothing is built (torch source is not `source`)"
            continue
        in_group = [h for h in entry["hosts"] if h in builders]
        able = [h for h in entry["hosts"] if hosts[h].get("can_build")]
        chosen = [h for h in in_group if hosts[h].get("can_build")]
        if chosen:
            entry["builder"] = chosen[0]
            entry["builder_why"] = "in the builders group"
        elif able:
            entry["builder"] = able[0]
            entry["builder_why"] = ("first host of the class that can build"
                                    + ("; builders-group host(s) %s cannot build" % ", ".join(in_group)
                                       if in_group else "; no host of the builders group is in this class"))
        else:
            reasons = []
            for h in entry["hosts"]:
                found = hosts[h].get("build_problems") or []
                reasons.append("%s: %s" % (h, "; ".join(p.get("message", str(p)) for p in found)
                                           or "cannot build"))
            entry["error"] = ("platform class %s (%s) has no host that can build its wheels: %s. Add a host "
                              "of this class that meets the source-build thresholds (preflight_min_ram_gib_"
                              "source_build, preflight_min_disk_gib_source_build) to the inventory or the "
                              "builders group, or install torch from an index/wheelhouse"
                              % (cid, describe_key(entry["key"]), " | ".join(reasons)))
            errors.append(entry["error"])

    result_hosts = {}
    for cid, entry in classes.items():
        for h in entry["hosts"]:
            result_hosts[h] = {"class": cid, "lineage": entry["lineage"], "builder_host": entry["builder"],
                               "builder": entry["builder"] == h, "error": entry["error"]}
    return {"classes": classes, "hosts": result_hosts, "errors": errors, "lines": render(classes)}


def describe_key(key):
    return "%s, GPUs %s, %s, Python %s, CUDA %s, torch %s arch %s, Triton %s" % (
        key["arch"], "/".join(key["capabilities"]) or "none", key["os"], key["python"], key["cuda_major"],
        key["torch_version"] or "-", key["cuda_arch_list"] or "-", key["triton_version"] or "-")


def render(classes):
    """Lines a person reads: one block per class with its hosts and builder."""
    lines = ["%d platform class(es)" % len(classes)]
    for cid in sorted(classes):
        entry = classes[cid]
        lines.append("%s: %s" % (cid, describe_key(entry["key"])))
        lines.append("  hosts   %s" % ", ".join(entry["hosts"]))
        if entry["error"]:
            lines.append("  builder NONE: %s" % entry["error"])
        else:
            lines.append("  builder %s (%s)" % (entry["builder"] or "-", entry["builder_why"]))
    return lines
