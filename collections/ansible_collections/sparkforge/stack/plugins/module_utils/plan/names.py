# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Names given to a run that match nothing, found before any change.

Ansible passes over each of these silently or fails far from the cause: a tag no play or role uses
(``--tags preflght``), a ``--limit`` pattern that matches no host, a group variable of a play's ``hosts:``
(``-e cluster_group=spraks``) that names no group, a ``group_vars/<name>`` or ``host_vars/<name>`` file beside
the inventory or the playbook that names no group or host (never loaded), and a variable read only by a play
keyword (``serial: "{{ sparkforge_serial }}"``) set in the inventory, where play keywords do not look.
Each error names what was given and the known names, closest first.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import fnmatch
import os
import re

# Tags Ansible gives a meaning itself (the playbooks guide of ansible-core: special tags).
SPECIAL_TAGS = ("all", "always", "never", "tagged", "untagged")
# The tags molecule skips in its converge and idempotence runs (--skip-tags molecule-notest,notest and, for
# idempotence, molecule-idempotence-notest), whether or not a scenario uses them: a tool's convention, not a typo.
TOOL_TAGS = ("molecule-notest", "notest", "molecule-idempotence-notest")
# Play keywords templated when the play starts, from play and extra variables only (no inventory).
PLAY_KEYWORDS = ("hosts", "serial", "max_fail_percentage", "any_errors_fatal", "gather_facts", "strategy",
                 "order", "throttle", "run_once")
# What Ansible reads from group_vars/ and host_vars/: a directory, or a file with one of these endings.
VAR_FILE_ENDINGS = ("", ".yml", ".yaml", ".json")
_TEMPLATED = re.compile(r"{{\s*([A-Za-z_][A-Za-z0-9_]*)")


def closest(name, known, limit=12):
    """The known names, closest to ``name`` first (at most ``limit``, then how many more)."""
    ranked = sorted(set(known), key=lambda other: (-difflib.SequenceMatcher(None, name, other).ratio(), other))
    text = ", ".join(ranked[:limit])
    return text + (" (and %d more)" % (len(ranked) - limit) if len(ranked) > limit else "")


def tags_used(document):
    """Every tag a parsed play, role or task file names (``tags:`` at any depth, a list or a comma list)."""
    found = set()
    if isinstance(document, dict):
        for key, value in document.items():
            if key == "tags":
                values = value if isinstance(value, list) else str(value).split(",")
                found.update(str(tag).strip() for tag in values if str(tag).strip())
            else:
                found.update(tags_used(value))
    elif isinstance(document, list):
        for item in document:
            found.update(tags_used(item))
    return found


def play_keyword_vars(document):
    """keyword -> variable names templated in that play keyword, for each play of a parsed playbook."""
    found = {}
    for play in document if isinstance(document, list) else []:
        if not isinstance(play, dict):
            continue
        for keyword in PLAY_KEYWORDS:
            if isinstance(play.get(keyword), str):
                for name in _TEMPLATED.findall(play[keyword]):
                    found.setdefault(keyword, set()).add(name)
    return found


def unknown_tags(run_tags, skip_tags, known):
    errors = []
    known = set(known) | set(SPECIAL_TAGS) | set(TOOL_TAGS)
    for option, tags in (("--tags", run_tags), ("--skip-tags", skip_tags)):
        for tag in sorted(set(tags or ())):
            if tag not in known:
                errors.append("%s %s: no play or role of the collection has this tag, so it would %s nothing; "
                              "known tags: %s" % (option, tag, "run" if option == "--tags" else "skip",
                                                  closest(tag, set(known) - {"never", "tagged", "untagged"})))
    return errors


def split_patterns(text):
    """A host pattern as Ansible splits it: on commas, else on colons (the old separator) outside [..]."""
    text = (text or "").strip()
    if "," in text or "[" in text or not text:
        parts = text.split(",")
    else:
        parts = text.split(":")
    return [part.strip() for part in parts if part.strip()]


def pattern_matches(pattern, names):
    """Whether one pattern (without its ! or & and [n:m] subscript) matches a host or group name."""
    pattern = pattern.lstrip("!&")
    if pattern.startswith("@"):
        return True  # a file of host names (a retry file) - read by Ansible, not here
    if pattern.startswith("~"):
        regex = re.compile(pattern[1:])
        return any(regex.match(name) for name in names)
    pattern = re.sub(r"\[[-0-9:]*\]$", "", pattern)
    return any(fnmatch.fnmatchcase(name, pattern) for name in names)


def unmatched_patterns(what, text, hosts, groups):
    names = set(hosts) | set(groups)
    return ["%s: %r matches no host or group of the inventory; known groups: %s; hosts: %s"
            % (what, pattern, closest(pattern.lstrip("!&~"), groups), closest(pattern.lstrip("!&~"), hosts))
            for pattern in split_patterns(text) if not pattern_matches(pattern, names)]


def stray_var_files(directories, hosts, groups):
    """group_vars/<name> and host_vars/<name> beside an inventory or the playbook naming nothing known."""
    errors = []
    for base in sorted(set(d for d in directories if d)):
        for kind, known, what in (("group_vars", groups, "group"), ("host_vars", hosts, "host")):
            folder = os.path.join(base, kind)
            if not os.path.isdir(folder):
                continue
            for entry in sorted(os.listdir(folder)):
                if entry.startswith("."):
                    continue
                stem, ending = os.path.splitext(entry)
                if os.path.isdir(os.path.join(folder, entry)):
                    stem = entry
                elif ending not in VAR_FILE_ENDINGS:
                    continue  # Ansible does not read it (a README)
                if stem not in known:
                    path = os.path.join(folder, entry)
                    errors.append("%s: no %s of the inventory is named %r, so this file is never loaded; "
                                  "rename it to one of: %s" % (path, what, stem, closest(stem, known)))
    return errors


def play_vars_in_inventory(keyword_vars, set_in_inventory):
    """``keyword_vars``: keyword -> names templated in it; ``set_in_inventory``: name -> a host that has it."""
    errors = []
    for keyword in sorted(keyword_vars):
        for name in sorted(keyword_vars[keyword]):
            if name in set_in_inventory:
                errors.append("%s: set in the inventory (host %s), where the play keyword %s: that reads it does "
                              "not look, so it would be ignored; set it with -e %s=VALUE"
                              % (name, set_in_inventory[name], keyword, name))
    return errors
