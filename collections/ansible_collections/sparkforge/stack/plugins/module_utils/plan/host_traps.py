# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host traps as data (issue 53, item 3): known-bad kernels, driver flavours and host settings, checked in
preflight before anything changes.

Each trap is a row of the manifest's ``sparkforge_host_traps`` (roles/manifest/defaults/main/host.yml) with its
source, what to do, ``severity`` (refuse: a problem that stops the host; warn: said in the plan) and
``confirmed`` (false where the fact rests on a report public sources did not confirm).  The facts are read
from files as the kernel and the driver write them, under a root (``/`` on a host, a stand-in tree in tests):

* ``kernel_release``: /proc/sys/kernel/osrelease against the row's ``match`` (a regular expression);
* ``meminfo_zero``: the row's ``field`` of /proc/meminfo ("CmaTotal:        0 kB") is 0;
* ``driver_flavour``: /proc/driver/nvidia/version says which kernel modules are loaded ("NVIDIA UNIX Open Kernel
  Module for aarch64 ..." or "NVIDIA UNIX x86_64 Kernel Module ..."); a GPU whose name has a word of the row's
  ``gpus`` needs the open ones;
* ``systemd_unit``: none of the row's ``units`` is enabled (a link in a ``*.wants`` directory under
  /etc/systemd/system, as ``systemctl enable`` makes it).

A row's ``when`` says where it applies: ``always``, ``rdma`` (the host has RDMA devices in /sys/class/infiniband,
or ``uses`` names rdma) or ``containers`` (NVIDIA's container toolkit is installed: /usr/bin/nvidia-ctk, or
``uses`` names containers).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import node_health

CHECKS = ("kernel_release", "meminfo_zero", "driver_flavour", "systemd_unit")
SEVERITIES = ("refuse", "warn")
WHEN = ("always", "rdma", "containers")
REQUIRED = ("id", "check", "severity", "source", "what_to_do")


class TrapError(Exception):
    pass


def validate(traps, variable="sparkforge_host_traps"):
    """The rows checked: each names its check, severity, when, source and what to do (TrapError names the row)."""
    if not isinstance(traps, list):
        raise TrapError("%s: give a list of traps (the manifest's host.yml)" % variable)
    seen = set()
    for index, row in enumerate(traps):
        where = "%s[%d]" % (variable, index)
        if not isinstance(row, dict):
            raise TrapError("%s: %r is not a mapping" % (where, row))
        missing = [k for k in REQUIRED if not row.get(k)]
        if missing:
            raise TrapError("%s (%s): missing %s" % (where, row.get("id"), ", ".join(missing)))
        if row["id"] in seen:
            raise TrapError("%s: id %s is used twice" % (where, row["id"]))
        seen.add(row["id"])
        for key, allowed, value in (("check", CHECKS, row["check"]), ("severity", SEVERITIES, row["severity"]),
                                    ("when", WHEN, row.get("when", "always"))):
            if value not in allowed:
                raise TrapError("%s (%s): %s %r is not one of %s" % (where, row["id"], key, value, ", ".join(allowed)))
        need = {"kernel_release": "match", "meminfo_zero": "field", "driver_flavour": "gpus",
                "systemd_unit": "units"}[row["check"]]
        if not row.get(need):
            raise TrapError("%s (%s): check %s needs %s" % (where, row["id"], row["check"], need))
        if row["check"] == "kernel_release":
            try:
                re.compile(row["match"])
            except re.error as exc:
                raise TrapError("%s (%s): match %r is not a regular expression: %s"
                                % (where, row["id"], row["match"], exc))
    return traps


def _read(root, path):
    try:
        with open(os.path.join(root, path.lstrip("/"))) as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def read_host(root="/"):
    """What the traps look at, from the files under ``root``; None where a file is absent."""
    infiniband = os.path.join(root, "sys/class/infiniband")
    release = _read(root, "/proc/sys/kernel/osrelease")
    return {
        "root": root,
        "kernel_release": release.strip() if release else None,
        "meminfo": _read(root, "/proc/meminfo"),
        "driver_version_text": _read(root, "/proc/driver/nvidia/version"),
        "rdma_devices": sorted(os.listdir(infiniband)) if os.path.isdir(infiniband) else [],
        "container_toolkit": os.path.exists(os.path.join(root, "usr/bin/nvidia-ctk")),
    }


def meminfo_kib(text, field):
    """The value of ``field`` in /proc/meminfo's text, in KiB ('CmaTotal:  0 kB' -> 0), or None when absent."""
    match = re.search(r"^%s:\s+(\d+)(?:\s+kB)?\s*$" % re.escape(field), text or "", re.M)
    return int(match.group(1)) if match else None


def unit_enabled(root, unit):
    """Whether ``unit`` is enabled: a link named for it in a *.wants directory under /etc/systemd/system."""
    base = os.path.join(root, "etc/systemd/system")
    if not os.path.isdir(base):
        return False
    for entry in sorted(os.listdir(base)):
        if entry.endswith(".wants") and os.path.lexists(os.path.join(base, entry, unit)):
            return True
    return False


def applies(row, host, uses):
    when = row.get("when", "always")
    if when == "rdma":
        return bool(host["rdma_devices"]) or "rdma" in uses
    if when == "containers":
        return host["container_toolkit"] or "containers" in uses
    return True


def _hit(row, host, gpu_names):
    """What the host shows for ``row`` (a sentence) when the trap is there, else None."""
    check = row["check"]
    if check == "kernel_release":
        release = host["kernel_release"]
        if release and re.search(row["match"], release):
            return "kernel %s (/proc/sys/kernel/osrelease)" % release
    elif check == "meminfo_zero":
        value = meminfo_kib(host["meminfo"], row["field"])
        if value == 0:
            return "/proc/meminfo has %s: 0 kB%s" % (
                row["field"], " (kernel %s)" % host["kernel_release"] if host["kernel_release"] else "")
    elif check == "driver_flavour":
        words = set(w.upper() for w in row["gpus"])
        need = sorted(set(n for n in gpu_names if words & set(re.split(r"[^A-Za-z0-9]+", n.upper()))))
        flavour = node_health.driver(host["driver_version_text"])["flavour"]
        if need and flavour == "proprietary":
            return ("the proprietary kernel modules are loaded (/proc/driver/nvidia/version) and %s needs the open "
                    "ones" % ", ".join(need))
    elif check == "systemd_unit":
        if not any(unit_enabled(host["root"], u) for u in row["units"]):
            return "%s not enabled (no link in /etc/systemd/system/*.wants/)" % " / ".join(row["units"])
    return None


def check(traps, gpu_names, root="/", uses=(), ignore=()):
    """(problems, warnings, rows) for this host: a refuse row found is a problem (unless its id is in ``ignore``,
    then a warning), a warn row found a warning; each names the trap, what the host shows, what to do, its source and
    whether the fact is confirmed.  ``rows`` has every trap with its status (found / clear / not applicable)."""
    validate(traps)
    host = read_host(root)
    problems, warnings, rows = [], [], []
    for row in traps:
        status = "n/a"
        if applies(row, host, uses):
            hit = _hit(row, host, gpu_names)
            status = "found" if hit else "clear"
            if hit:
                text = "%s: %s: %s. What to do: %s (source: %s%s)" % (
                    row["id"], row.get("title") or row["id"], hit, row["what_to_do"], row["source"],
                    "; not confirmed by a public source" if row.get("confirmed") is False else "")
                if row["severity"] == "refuse" and row["id"] not in ignore:
                    problems.append({"check": "host_traps", "message": text})
                else:
                    warnings.append(text)
        rows.append({"id": row["id"], "severity": row["severity"], "status": status,
                     "confirmed": row.get("confirmed", True)})
    return problems, warnings, {"rows": rows, "kernel_release": host["kernel_release"],
                                "rdma_devices": host["rdma_devices"], "container_toolkit": host["container_toolkit"]}
