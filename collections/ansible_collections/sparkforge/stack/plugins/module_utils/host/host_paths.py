# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether the paths a run will write can be written, found before anything changes.

What only a real run would discover otherwise (a venv under a regular file, a report directory whose
parent is a file, a directory the user cannot write): each path is walked from ``/``; every existing
component but the last must be a directory, the path itself (when it exists) must be of its kind, and
the directory the run writes into (the path, or its nearest existing ancestor that the run creates the
rest under) must be writable.  Read only: the same answer in check mode as in the real run.

A path the run would replace or write into is also checked for whose it is (``own``): a venv sparkforge did
not make (host/venv.py), a file it did not write (host/env_file.py) or a JSON record that is not its own
(host/records.py: the proof, the generation record) is refused, naming what was found and
the choices, unless adopted; an adopted one is noted (``found``) with what the run will do to it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.sparkforge.stack.plugins.module_utils._common.path_rules import resolved_place_problem
from ansible_collections.sparkforge.stack.plugins.module_utils.host import env_file, records, venv

KINDS = ("dir", "file")
# What a path holds that the run must own (or be told to adopt): "" (nothing checked), a venv, a file it writes,
# a build directory, or one of its JSON records (host/records.py: the proof, the generation record; never adopted).
OWNS = ("", "venv", "file", "build") + tuple(sorted(records.MARKERS))
# A build directory is the run's when its build's lock file is in it: every build takes it first and keeps it
# (build_common.BuildLock: the torch build's .lock, Triton's .build.lock), earlier versions' builds too.
BUILD_SIGNS = (".lock", ".build.lock")


def build_dir_problem(variable, path):
    """The refusal of the directory at ``path`` where a build would clone, clean and remove what it makes (its
    src/ and dist directories), when sparkforge did not make it: None when it is absent, empty or a build's."""
    if not os.path.isdir(path):
        return None
    entries = sorted(os.listdir(path))
    if not entries or any(sign in entries for sign in BUILD_SIGNS):
        return None
    return ("%s=%s is a directory sparkforge did not make (no build lock file %s in it; it holds %s): nothing was "
            "changed; a build clones, cleans and removes what it makes there, so set %s to a new or empty "
            "directory, or move this one away" % (
                variable, path, " or ".join(BUILD_SIGNS), ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else ""),
                variable))


def _what(path):
    if os.path.islink(path) and not os.path.exists(path):
        return "a dangling symlink"
    if os.path.isfile(path):
        return "a regular file"
    if os.path.isdir(path):
        return "a directory"
    return "not a directory"


# File systems of the kernel's own state: a directory there takes no venv or report (mkdir in /proc fails as
# root, though its mode bits and access() say writable).
VIRTUAL_FS = ("proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "debugfs", "tracefs", "securityfs",
              "configfs", "pstore", "bpf", "efivarfs", "fusectl", "hugetlbfs", "mqueue", "binfmt_misc", "autofs")


def _unescape(field):
    """A /proc/mounts field: space, tab, newline and backslash are written as octal escapes (\\040)."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mount_of(path, mounts="/proc/mounts"):
    """(mount point, file system type) of the mount holding ``path`` (the longest mount point above it);
    None when the mount table cannot be read."""
    try:
        with open(mounts) as handle:
            lines = handle.read().splitlines()
    except (IOError, OSError):
        return None
    best = None
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = _unescape(fields[1])
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best[0])):
            best = (point, fields[2])
    return best


def filesystem_problem(target, mounts="/proc/mounts"):
    """Why nothing can be written under the existing directory ``target`` whatever the user's rights: it is
    on a read-only mount, or on a kernel file system (proc, sysfs, ...). None when neither."""
    real = os.path.realpath(target)
    try:
        if os.statvfs(real).f_flag & os.ST_RDONLY:
            return "%s is on a read-only file system" % real
    except OSError:
        return None
    mount = mount_of(real, mounts)
    if mount and mount[1] in VIRTUAL_FS:
        return "%s is on the kernel's %s file system (mounted at %s), where no directory can be made" % (
            real, mount[1], mount[0])
    return None


def path_problem(variable, path, kind="dir", protected=()):
    """One message naming the variable, the path and the offending parent, or None when the run can
    create or write ``path`` (``kind`` dir: a directory; file: a file whose directory is created).
    The path resolved here (its symlinks followed) must not be a system directory nor inside ``protected``
    (path_rules: the controller checked the path as written; a symlink is only known here)."""
    if kind not in KINDS:
        raise ValueError("kind must be one of %s, got %r" % (", ".join(KINDS), kind))
    if not path:
        return None
    if not os.path.isabs(path):
        return "%s=%s is not an absolute path" % (variable, path)
    path = os.path.normpath(path)
    where = path if kind == "dir" else os.path.dirname(path)
    why = resolved_place_problem(where, protected)
    if why:
        return "%s=%s: %s%s" % (variable, path, "" if where == path else "its directory %s " % where, why)
    parts = [p for p in path.split(os.sep) if p]
    nearest = os.sep
    for i in range(1, len(parts)):
        parent = os.sep + os.sep.join(parts[:i])
        if not os.path.lexists(parent):
            break
        if not os.path.isdir(parent):
            return ("%s=%s: its parent %s is %s, not a directory: nothing can be created under it"
                    % (variable, path, parent, _what(parent)))
        nearest = parent
    if os.path.lexists(path):
        if kind == "dir" and not os.path.isdir(path):
            return "%s=%s is %s, not a directory" % (variable, path, _what(path))
        if kind == "file" and os.path.isdir(path):
            return "%s=%s is a directory, not a file" % (variable, path)
        target = path if kind == "dir" else os.path.dirname(path)
        why = filesystem_problem(target)
        if why:
            return "%s=%s: %s: give a path on a writable disk" % (variable, path, why)
        if not os.access(target, os.W_OK | os.X_OK):
            return "%s=%s: %s is not writable by this user" % (variable, path, target)
        return None
    why = filesystem_problem(nearest)
    if why:
        return "%s=%s: its parent %s: give a path on a writable disk" % (variable, path, why)
    if not os.access(nearest, os.W_OK | os.X_OK):
        return ("%s=%s: its parent %s is not writable by this user: the %s cannot be created there"
                % (variable, path, nearest, "directory" if kind == "dir" else "file's directory"))
    return None


def ownership_problem(variable, path, own, adopt=False, adopt_variable=""):
    """(message or None, note or None) for the venv or file at ``path`` that the run would write (``own``): the
    refusal of one sparkforge did not make and was not told to adopt, or, adopted, what it found and will do."""
    if own not in OWNS:
        raise ValueError("own must be one of %s, got %r" % (", ".join(repr(o) for o in OWNS), own))
    if not own or not path:
        return None, None
    path = os.path.normpath(path)
    if own == "build":
        return build_dir_problem(variable, path), None
    if own in records.MARKERS:
        return records.refusal(variable, path, own), None
    if own == "venv":
        state, words = venv.ownership(path)
        message = venv.refusal(variable, path, adopt, adopt_variable or venv.ADOPT_VARIABLE)
        if message is None and state == "user-venv":
            return None, ("%s=%s: %s: adopted (%s): its packages are kept, pip bootstrapped with its own "
                          "python -m ensurepip if it has none" % (variable, path, words, adopt_variable))
        return message, None
    state, words = env_file.ownership(path)
    if state != "user":
        return None, None
    if not adopt:
        return env_file.refusal(variable, path, adopt_variable), None
    return None, "%s=%s: %s: adopted (%s): kept as %s%s, then rewritten" % (
        variable, path, words, adopt_variable, path, env_file.PREV_SUFFIX)


def paths_problems(entries, protected=(), notes=None):
    """[message] for entries [{variable, path, kind, protect, own, adopt, adopt_variable}] (empty paths are not
    used, so not checked; an entry with protect false is not held to ``protected``). ``notes``, a list, gets
    what was found at the adopted paths."""
    out = []
    for entry in entries:
        path = entry.get("path") or ""
        message = path_problem(entry["variable"], path, entry.get("kind") or "dir",
                               protected if entry.get("protect", True) else ())
        if not message:
            message, note = ownership_problem(entry["variable"], path, entry.get("own") or "",
                                              bool(entry.get("adopt")), entry.get("adopt_variable") or "")
            if note and notes is not None:
                notes.append(note)
        if message:
            out.append(message)
    return out
