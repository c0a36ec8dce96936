# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A key written twice in one YAML mapping of what the user gives a run (inventory, group_vars, host_vars,
``-e @file``, the playbook), found on the controller before any host is read, naming the file, line and key.

Why not ansible-core's own check (``duplicate_dict_key = error``): it compares the keys after YAML merge keys
are flattened into the mapping, so ``<<: *anchor`` followed by one of the anchor's keys (an override, which YAML
defines) is taken for a duplicate and the valid file refused (ansible-core 2.19,
``_internal/_yaml/_constructor.py``). Here a key the mapping writes itself twice is a duplicate; a key that
overrides one a ``<<`` merge brings is not. The checkout's ansible.cfg sets ``duplicate_dict_key = ignore``
so that this check is the one that decides.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

try:
    # On the controller (a lookup plugin runs this), where ansible-core brings PyYAML.
    import yaml
    from yaml.constructor import ConstructorError, SafeConstructor
    from yaml.nodes import MappingNode, ScalarNode, SequenceNode
except ImportError:  # pragma: no cover - a host without PyYAML never runs this
    yaml = None
    ConstructorError = SafeConstructor = MappingNode = ScalarNode = SequenceNode = None

MERGE_TAG = u"tag:yaml.org,2002:merge"
# What Ansible reads from group_vars/ and host_vars/ (a directory is read whole) and as a YAML inventory.
VAR_FILE_ENDINGS = ("", ".yml", ".yaml", ".json")
INVENTORY_ENDINGS = (".yml", ".yaml", ".json")


def _key(node):
    """A scalar key as YAML reads it (1 and 0x1 are one int); other keys (a mapping as a key) by their text."""
    if isinstance(node, ScalarNode):
        try:
            value = SafeConstructor().construct_object(node)
            hash(value)
            return (type(value).__name__, value)
        except (ConstructorError, TypeError, ValueError):
            return (node.tag, node.value)  # a tag only Ansible knows (!vault, !unsafe): its text
    return (node.tag, repr(node))


def _shown(node):
    return node.value if isinstance(node, ScalarNode) else "<%s>" % node.tag.rsplit(":", 1)[-1]


def node_duplicates(root):
    """[(line, key, first line)] of every key written twice in one mapping under ``root`` (lines from 1); a merge
    key (``<<``) and the keys it brings are not counted: a key written after them overrides them, as YAML says."""
    out, seen, stack = [], set(), [root]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue  # an alias is the anchored node itself: visited once
        seen.add(id(node))
        if isinstance(node, MappingNode):
            first = {}
            for key_node, value_node in node.value:
                stack.append(value_node)
                if key_node.tag == MERGE_TAG:
                    continue
                stack.append(key_node)
                key = _key(key_node)
                if key in first:
                    out.append((key_node.start_mark.line + 1, _shown(key_node), first[key]))
                else:
                    first[key] = key_node.start_mark.line + 1
        elif isinstance(node, SequenceNode):
            stack.extend(node.value)
    return sorted(out)


def text_duplicates(text, name):
    """Messages for the duplicate keys of one YAML text (every document of it) called ``name``; [] for a text that
    is not YAML (an INI inventory, a vault-encrypted file: Ansible reads those its own way and reports its own
    errors)."""
    if text.lstrip().startswith("$ANSIBLE_VAULT"):
        return []
    try:
        # libyaml's composer where PyYAML has it (its nodes carry the same marks), as the collection's lookups read.
        documents = list(yaml.compose_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    except yaml.YAMLError:
        return []
    out = []
    for document in documents:
        for line, key, first in node_duplicates(document):
            out.append("%s:%d: key '%s' is written twice in one mapping (first at line %d): YAML keeps only the last "
                       "and the first is silently lost; remove one (a key after a '<<:' merge, which overrides the "
                       "merged one, is fine)" % (name, line, key, first))
    return out


def file_duplicates(path):
    """text_duplicates of the file at ``path``; [] when it cannot be read as text (Ansible names that itself)."""
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8")
    except (IOError, OSError, UnicodeDecodeError):
        return []
    return text_duplicates(text, path)


def _walk(directory, endings, ignore=()):
    """The files under ``directory`` (recursively, hidden ones and names matching an ``ignore`` regex skipped, as
    Ansible skips them in an inventory directory) with one of ``endings``."""
    def skip(name):
        return name.startswith(".") or any(re.search(p, name) for p in ignore)

    out = []
    for base, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not skip(d))
        out += [os.path.join(base, f) for f in sorted(files) if not skip(f) and os.path.splitext(f)[1] in endings]
    return out


def var_files(directories):
    """Every file Ansible may read as group_vars or host_vars beside ``directories`` (inventories, the playbook)."""
    out = []
    for directory in directories:
        for kind in ("group_vars", "host_vars"):
            place = os.path.join(directory, kind)
            if os.path.isdir(place):
                out += _walk(place, VAR_FILE_ENDINGS)
    return out


def inventory_files(sources, ignore=()):
    """The YAML files of the inventory sources (a file, or a directory's YAML files but those Ansible's
    inventory_ignore_patterns ``ignore`` skips; a host list is no file)."""
    out = []
    for source in sources:
        if os.path.isdir(source):
            out += [p for p in _walk(source, INVENTORY_ENDINGS, ignore)
                    if os.sep + "group_vars" + os.sep not in p and os.sep + "host_vars" + os.sep not in p]
        elif os.path.isfile(source):
            out.append(source)
    return out


def extra_vars_texts(extra_vars, cwd):
    """[(name, path or None, text or None)] of what -e gave: '@file' (read from ``cwd`` when relative) and inline
    YAML/JSON ('{...}'); key=value pairs hold no mapping to check."""
    out = []
    for item in extra_vars or ():
        item = str(item)
        if item.startswith("@"):
            path = os.path.join(cwd, item[1:]) if not os.path.isabs(item[1:]) else item[1:]
            out.append(("-e %s" % item, path, None))
        elif item.lstrip().startswith(("{", "[")):
            out.append(("-e '%s'" % (item if len(item) <= 60 else item[:57] + "..."), None, item))
    return out


def run_duplicates(inventory_sources, var_dirs, extra_vars, playbooks, cwd, ignore=()):
    """Every duplicate key in what the run was given, each file once, in the order Ansible reads them (``ignore``:
    the inventory_ignore_patterns)."""
    paths = inventory_files(inventory_sources, ignore) + var_files(var_dirs)
    out, done = [], set()
    for path in paths + [p for p in (os.path.join(cwd, b) for b in playbooks or ()) if os.path.isfile(p)]:
        real = os.path.realpath(path)
        if real not in done:
            done.add(real)
            out += file_duplicates(path)
    for name, path, text in extra_vars_texts(extra_vars, cwd):
        if path is not None:
            found = file_duplicates(path)
            out += [m.replace(path, "%s (%s)" % (path, name), 1) for m in found]
        else:
            out += text_duplicates(text, name)
    return out
