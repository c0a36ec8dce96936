# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parity before speed: every node must run the same stack. A node with another torch, NCCL or driver (or the
cluster user under another UID) makes NCCL hang or fail in ways that name no node; compared here first, a difference
names the node, the item and both values."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess

from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import scripts
from ansible_collections.sparkforge.stack.plugins.module_utils.fabric.scripts import probe as probe_script


class ParityError(Exception):
    pass


PARITY_ITEMS = ("driver", "cuda", "nccl", "torch", "kernel", "user", "uid")
# Read by the stack's python, so they are what a collective would load.
PYTHON_ITEMS = ("cuda", "nccl", "torch")


def driver_version(sysfs="/sys"):
    """The loaded NVIDIA kernel module's version (/sys/module/nvidia/version, e.g. 580.95.05), or None."""
    try:
        with open(os.path.join(sysfs, "module", "nvidia", "version")) as handle:
            return handle.read().strip() or None
    except (IOError, OSError):
        return None


def user_facts(name=None):
    """(user name, uid): of ``name`` when given (the cluster user), else of the user this runs as.
    Raises ParityError when the named user does not exist here."""
    import pwd
    try:
        entry = pwd.getpwnam(name) if name else pwd.getpwuid(os.getuid())
    except KeyError:
        raise ParityError("user %s does not exist on this host" % name)
    return entry.pw_name, entry.pw_uid


def host_facts(python, user=None, sysfs="/sys", timeout=180, probe=True, env=None):
    """This host's parity items: driver (sysfs), kernel (uname), user and uid (passwd), and torch, its CUDA and
    NCCL as the stack's python reports them with the collectives' environment ``env`` (probe=False, or no such
    python: None, with why in "notes")."""
    facts = dict((k, None) for k in PARITY_ITEMS)
    facts["notes"] = []
    facts["driver"] = driver_version(sysfs)
    facts["kernel"] = os.uname()[2]
    try:
        facts["user"], facts["uid"] = user_facts(user)
    except ParityError as exc:
        facts["notes"].append(str(exc))
    if not probe:
        facts["notes"].append("torch, CUDA and NCCL not read")
        return facts
    if not python or not os.path.exists(python):
        facts["notes"].append("no python at %s: torch, CUDA and NCCL not read" % python)
        return facts
    try:
        child = dict(os.environ)
        child.update(env or {})
        proc = subprocess.run([python, "-c", scripts.source_of(probe_script)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout, check=False, env=child)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        got = json.loads(lines[-1]) if lines else {"error": "no answer from %s (exit %s): %s" % (
            python, proc.returncode, proc.stderr.strip()[-300:])}
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        got = {"error": "%s: %s" % (python, exc)}
    for k in PYTHON_ITEMS:
        facts[k] = got.get(k)
    if got.get("error"):
        facts["notes"].append(got["error"])
    return facts


def _shown(value):
    return "none" if value is None else str(value)


def parity(facts, hosts, skip_unread=False):
    """Every difference between the hosts' parity items (facts: {host: host_facts()}), as sentences naming the
    node, the item and both values: "x3: torch 2.9.1+cpu, where x1 has 2.10.0+cpu". The reference value of an
    item is the one most hosts have (the first host's on a tie), so the odd node is the one named. A host
    without facts (unreachable) is left to the run, which names it as never joined. skip_unread: leave out
    python items a host could not read (check mode on a host whose stack is not installed yet)."""
    out = []
    present = [h for h in hosts if facts.get(h)]
    for item in PARITY_ITEMS:
        values = dict((h, facts[h].get(item)) for h in present)
        if skip_unread and item in PYTHON_ITEMS:
            values = dict((h, v) for h, v in values.items() if v is not None)
        if len(set(_shown(v) for v in values.values())) <= 1:
            continue
        counts = {}
        for h in present:
            if h in values:
                counts[_shown(values[h])] = counts.get(_shown(values[h]), 0) + 1
        top = max(counts.values())
        reference = next(_shown(values[h]) for h in present if h in values and counts[_shown(values[h])] == top)
        holder = next(h for h in present if h in values and _shown(values[h]) == reference)
        for h in present:
            if h in values and _shown(values[h]) != reference:
                out.append("%s: %s %s, where %s has %s" % (h, item, _shown(values[h]), holder, reference))
    return out
