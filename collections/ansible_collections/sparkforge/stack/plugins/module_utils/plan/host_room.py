# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Room and rights on the host for what the plan does: the free space of each file system a planned place
grows on (build directory, venv, wheelhouse, reports), and whether the user the tasks run as may do what needs
root. Preflight's problems() and stack_plan call these; each returns preflight's problem dicts."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.sparkforge.stack.plugins.module_utils.plan.validate import COMPONENTS


def _problem(check, message):
    return {"check": check, "message": message}


def disk_problems(measured, places):
    """The free space of each file system against what the plan puts there.

    ``measured``: {path: host_facts.disk_free's answer (free_mib, measured_at, device, unwritable)};
    ``places``: [{variable, path, need_gib}], each place that grows (build directory, venv, wheelhouse,
    reports).  Places on one file system (one st_dev) share its free space, so their needs are summed: a venv
    on a small file system of its own is measured there, not where the build directory is."""
    found, groups, order = [], {}, []
    for place in places:
        disk = measured.get(place.get("path")) if place.get("path") else None
        if disk is None:
            continue
        if disk.get("unwritable"):
            found.append(_problem("disk", "%s %s: %s: nothing can be made there; give sparkforge_prefix (or %s) "
                                          "a path on a writable disk" % (place["variable"], place["path"],
                                                                         disk["unwritable"], place["variable"])))
            continue
        key = disk.get("device", disk.get("measured_at"))
        if key not in groups:
            groups[key] = (disk, [])
            order.append(key)
        groups[key][1].append(place)
    for key in order:
        disk, members = groups[key]
        free = disk["free_mib"] / 1024.0
        need = sum(float(p.get("need_gib") or 0) for p in members)
        if free >= need:
            continue
        if len(members) == 1:
            place = members[0]
            found.append(_problem("disk", "%.1f GiB free at %s (measured at %s), the planned work needs %s GiB "
                                          "there: free space or point %s elsewhere" % (
                                              free, place["path"], disk["measured_at"], _gib(need),
                                              place["variable"])))
        else:
            each = ", ".join("%s %s (%s GiB)" % (p["variable"], p["path"], _gib(p.get("need_gib") or 0))
                             for p in members)
            found.append(_problem("disk", "%.1f GiB free on the file system of %s (measured at %s), the planned "
                                          "work puts %s GiB there: %s: free space there or point one of them at "
                                          "another file system" % (free, members[0]["path"], disk["measured_at"],
                                                                   _gib(need), each)))
    return found


def _gib(value):
    value = float(value)
    return "%d" % value if value == int(value) else "%.1f" % value


# The components whose work lives in the venv, and those that write reports.
VENV_COMPONENTS = ("triton", "pytorch", "torch_domains", "ml_packages")


def growing_places(plan, places, needs, building=False):
    """The places of ``places`` ([{variable, path, place}]) that the plan makes grow, with the manifest's
    need (``needs``: sparkforge_disk_needs_gib, GiB per place) as ``need_gib``: the venv where a component
    installs or builds into it, the wheelhouse where the host builds wheels (``building``: the verdict of a
    builder), reports where ML packages or verify write them.  The build directory is preflight's own
    threshold (min_disk_gib...)."""
    actions = (plan or {}).get("actions") or {}
    acting = set(c for c, a in actions.items() if a not in ("skip", "existing"))
    grows = {"venv": bool(acting & set(VENV_COMPONENTS)),
             "wheel_dir": bool(building and (plan or {}).get("source_build")),
             "report_dir": bool(acting & set(["ml_packages", "verify"]))}
    return [dict(p, need_gib=(needs or {}).get(p["place"], 0)) for p in places or []
            if p.get("path") and grows.get(p.get("place"))]


def root_problems(actions, user, needs, sudo):
    """Who runs it: the components the plan installs that need root (``needs``: sparkforge_root_needs,
    component -> what it does as root), against the user the host's tasks run as (``user``: {uid, name} as
    the module saw it: root when become works).  ``sudo``: () -> (works, why not), asked only when the user
    is not root, to say what to do.  Empty when the user is root, nothing needs it, or the user is unknown."""
    if not user or user.get("uid") in (0, None):
        return []
    wanted = [c for c in COMPONENTS if c in (needs or {}) and (actions or {}).get(c) not in (None, "skip")]
    if not wanted:
        return []
    name = user.get("name") or "uid %s" % user["uid"]
    works, why = sudo()
    if works:
        how = ("%s can sudo without a password (`sudo -n true` works here): set ansible_become: true (inventory "
               "or group_vars, or -b on the command line), or connect as root" % name)
    else:
        how = ("%s cannot sudo without a password here (`sudo -n true`: %s): give %s sudo rights, or set "
               "ansible_become: true and pass the password (--ask-become-pass), or connect as root "
               "(ansible_user: root)" % (name, why, name))
    return [_problem("root", "the plan needs root on this host for %s, but its tasks run as %s (uid %s), "
                             "not root (become is off, or becomes another user): %s; or leave %s out of "
                             "sparkforge_components"
                             % (", ".join("%s (%s)" % (c, needs[c]) for c in wanted), name, user["uid"], how,
                                " and ".join(wanted)))]
