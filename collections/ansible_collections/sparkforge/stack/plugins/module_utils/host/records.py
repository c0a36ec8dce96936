# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The JSON records sparkforge keeps on a host, and whose a file at their path is (issue 52).

Two records: the proof of provisioning (``sparkforge_proof_file``, the fleet_install role) and the host's generation
record (``sparkforge_host_generation_file``, fleet/generations.py). Each one sparkforge writes is a JSON object
holding ``MARKER_KEY`` with its kind's ``MARKERS`` value. A file at the path is sparkforge's when it holds that
marker, or when it has exactly a shape an earlier version wrote without one (``LEGACY``: a JSON object with
exactly one of those key sets, so existing fleets keep working). Anything else - another JSON document, text, an empty file, a
symlink, a directory, a file that cannot be read - is the user's: refused before any change, never replaced.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat

MARKER_KEY = "managed_by"
MARKERS = {
    "proof": "sparkforge: the proof of provisioning (sparkforge_proof_file)",
    "generation": "sparkforge: the host's generation record (sparkforge_host_generation_file)",
}
WHAT = {"proof": "the proof of provisioning", "generation": "the host's generation record"}
# The key sets each record had before the marker, every key of a set always written: a file of exactly one of
# these sets is a record an earlier version wrote (the fleet_install role's proof: compared and profile, first
# compared alone; generations.host_transition: these nine since the record began).
LEGACY = {
    "proof": (frozenset(("compared", "profile")), frozenset(("compared",))),
    "generation": (frozenset(("lineage", "class", "generation", "state", "how", "at", "wheels", "previous",
                              "history")),),
}
# A record is small (the generation record keeps 20 changes): a bigger file is not one, and is not read whole.
MAX_BYTES = 16 * 1024 * 1024


def mark(kind, data):
    """``data`` (a dict) with the marker of ``kind``: what sparkforge writes."""
    out = dict(data)
    out[MARKER_KEY] = MARKERS[kind]
    return out


def is_ours(kind, data):
    """Whether the parsed JSON ``data`` is a record of ``kind`` sparkforge wrote: its marker, or the earlier shape."""
    if not isinstance(data, dict):
        return False
    if MARKER_KEY in data:
        return data[MARKER_KEY] == MARKERS[kind]
    if frozenset(data) not in LEGACY[kind]:
        return False
    if kind == "proof":
        return isinstance(data["compared"], dict) and isinstance(data.get("profile", {}), dict)
    return isinstance(data["wheels"], dict) and isinstance(data["state"], str)


def ownership(path, kind):
    """(state, words) for what is at ``path``: ``absent``, ``ours``, ``dir`` or ``user`` (anything else). The words
    never carry the file's text."""
    if kind not in MARKERS:
        raise ValueError("kind must be one of %s, got %r" % (", ".join(sorted(MARKERS)), kind))
    if not os.path.lexists(path):
        return "absent", "nothing at %s" % path
    if os.path.islink(path):
        return "user", "%s is a symlink sparkforge did not make (to %s)" % (path, os.readlink(path))
    if os.path.isdir(path):
        return "dir", "%s is a directory" % path
    st = os.lstat(path)
    what = "mode %04o, owner uid %d, %d bytes" % (stat.S_IMODE(st.st_mode), st.st_uid, st.st_size)
    if not stat.S_ISREG(st.st_mode):
        return "user", "%s is not a regular file (%s)" % (path, what)
    if st.st_size > MAX_BYTES:
        return "user", "%s is a file sparkforge did not write (%s)" % (path, what)
    try:
        with open(path, "rb") as handle:
            data = json.loads(handle.read().decode("utf-8"))
    except (IOError, OSError) as exc:
        return "user", "%s cannot be read (%s; %s)" % (path, exc.strerror, what)
    except ValueError:
        data = None
    if is_ours(kind, data):
        return "ours", "sparkforge's %s %s" % (WHAT[kind], path)
    return "user", "%s is a file sparkforge did not write (not %s: no %r key of sparkforge's in a JSON object; %s)" % (
        path, WHAT[kind], MARKER_KEY, what)


def refusal(variable, path, kind):
    """The message refusing what is at ``path`` (None when it is absent or sparkforge's record of ``kind``)."""
    if not path:
        return None
    state, words = ownership(os.path.normpath(path), kind)
    if state in ("absent", "ours"):
        return None
    return ("%s=%s: %s: nothing was changed; sparkforge writes %s there. Move it away, or set %s to another path"
            % (variable, path, words, WHAT[kind], variable))
