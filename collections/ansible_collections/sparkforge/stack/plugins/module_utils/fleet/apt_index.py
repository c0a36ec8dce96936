# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A Debian repository's index, read as apt reads it: version order (deb-version(7)), the stanzas of a
Packages file, and the closure apt would install for a list of packages from that index.

The offline bundle (bundle.py) uses them to choose the .debs it copies; they know nothing of bundles.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import re


class AptIndexError(Exception):
    """A wanted package or version that the index does not have."""


# ---------------------------------------------------------------------------- Debian versions

def _order(char):
    if char == "~":
        return -1
    if char.isdigit():
        return 0
    if char.isalpha():
        return ord(char)
    return ord(char) + 256


def _compare_part(a, b):
    """dpkg's comparison of an upstream version or revision (deb-version(7))."""
    while a or b:
        la = re.match(r"[^0-9]*", a).group(0)
        lb = re.match(r"[^0-9]*", b).group(0)
        for i in range(max(len(la), len(lb))):
            ca = _order(la[i]) if i < len(la) else 0
            cb = _order(lb[i]) if i < len(lb) else 0
            if ca != cb:
                return -1 if ca < cb else 1
        a, b = a[len(la):], b[len(lb):]
        da = re.match(r"[0-9]*", a).group(0)
        db = re.match(r"[0-9]*", b).group(0)
        if int(da or 0) != int(db or 0):
            return -1 if int(da or 0) < int(db or 0) else 1
        a, b = a[len(da):], b[len(db):]
    return 0


def deb_version_cmp(a, b):
    def split(v):
        epoch, rest = v.split(":", 1) if ":" in v else ("0", v)
        upstream, revision = rest.rsplit("-", 1) if "-" in rest else (rest, "0")
        return int(epoch or 0), upstream, revision
    ea, ua, ra = split(a)
    eb, ub, rb = split(b)
    if ea != eb:
        return -1 if ea < eb else 1
    return _compare_part(ua, ub) or _compare_part(ra, rb)


_RELATIONS = {"=": lambda c: c == 0, ">=": lambda c: c >= 0, "<=": lambda c: c <= 0,
              ">>": lambda c: c > 0, "<<": lambda c: c < 0, ">": lambda c: c >= 0, "<": lambda c: c <= 0}


# ---------------------------------------------------------------------------- apt

def parse_packages(text):
    """The stanzas of a Packages file as dicts (continuation lines joined)."""
    out = []
    for block in re.split(r"\n\s*\n", text.strip()):
        fields = {}
        last = None
        for line in block.splitlines():
            if line[:1] in (" ", "\t") and last:
                fields[last] += "\n" + line.strip()
            elif ":" in line:
                last, value = line.split(":", 1)
                fields[last] = value.strip()
        if fields.get("Package"):
            out.append(fields)
    return out


def parse_depends(value):
    """[[(name, op, version)], ...]: each inner list is a group of alternatives."""
    groups = []
    for group in (value or "").split(","):
        alts = []
        for alt in group.split("|"):
            m = re.match(r"\s*([a-z0-9][a-z0-9+.-]*)(?::\w+)?\s*(?:\(\s*([<>=]+)\s*([^)\s]+)\s*\))?", alt)
            if m:
                alts.append((m.group(1), m.group(2), m.group(3)))
        if alts:
            groups.append(alts)
    return groups


def apt_closure(stanzas, wanted, deb_arch):
    """The stanzas apt would install for ``wanted`` (["name" or "name=version-glob"]) from this index.

    Each package resolves to its highest version that matches the request (a glob, as apt takes it)
    and every relation on it; dependencies outside this index are the distribution's and are left to
    its mirror. Raises AptIndexError when a wanted package or version is not in the index."""
    by_name = {}
    for st in stanzas:
        if st.get("Architecture") in (deb_arch, "all"):
            by_name.setdefault(st["Package"], []).append(st)
    chosen = {}
    pending = []
    for item in wanted:
        name, glob = item.split("=", 1) if "=" in item else (item, "")
        pending.append((name, [("glob", glob)] if glob else [], "requested"))
    while pending:
        name, rules, why = pending.pop(0)
        candidates = by_name.get(name)
        if not candidates:
            if why == "requested":
                raise AptIndexError("%s is not in the repository's Packages index" % name)
            continue  # the distribution's package
        if name in chosen:
            continue
        ok = [st for st in candidates if all(_matches(st["Version"], rule) for rule in rules)]
        if not ok:
            raise AptIndexError("no version of %s in the repository matches %s (%s; it has %s)" % (
                name, " ".join("%s %s" % r for r in rules), why, ", ".join(st["Version"] for st in candidates)))
        best = ok[0]
        for st in ok[1:]:
            if deb_version_cmp(st["Version"], best["Version"]) > 0:
                best = st
        chosen[name] = best
        for field in ("Pre-Depends", "Depends"):
            for alts in parse_depends(best.get(field)):
                # The first alternative the index has, as apt prefers it.
                for dep, op, version in alts:
                    if dep in by_name:
                        pending.append((dep, [(op, version)] if op else [], "%s of %s" % (field, name)))
                        break
    return [chosen[k] for k in sorted(chosen)]


def _matches(version, rule):
    op, value = rule
    if op == "glob":
        return fnmatch.fnmatchcase(version, value)
    return _RELATIONS[op](deb_version_cmp(version, value))
