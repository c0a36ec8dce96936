# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The variable names the collection knows: the options its roles' argument_specs declare (with what their
defaults allow), the names its roles and plays set themselves, the project's prefixes, and the unknown
names a user set (a misspelling, with the closest known name).

Beside validate.py, which checks each known variable's value against its rule: this file decides which
names exist, that one what each may hold.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import re

from ansible_collections.sparkforge.stack.plugins.module_utils.plan.validate import PREFIXES, RULES, show


def prefixes(role_names):
    """The project's variable prefixes: sparkforge_, cluster_, xhost_ and every role's name."""
    return sorted(set(PREFIXES) | set("%s_" % name for name in role_names))


# Names the collection no longer reads -> what to set instead.  Set, each is refused naming it: ignored, the
# run would compile for a list the user did not ask for.  The arch list is one input (issue 55).
REMOVED = {
    "pytorch_cuda_arch_list": "sparkforge_cuda_arch_list",
    "torch_domains_cuda_arch_list": "sparkforge_cuda_arch_list",
    "ml_packages_cuda_arch_list": "sparkforge_cuda_arch_list",
    "runtime_env_cuda_arch_list": "sparkforge_cuda_arch_list (its 'none': runtime_env_export_arch_list: false)",
}


def unknown_names(given, known, prefixes_=PREFIXES):
    """``given``: name -> value of the variables set with a project prefix; ``known``: every name the
    collection declares or sets itself; ``prefixes_``: the project's prefixes (None: every name given has one).
    One error per name nobody reads, with the closest known name."""
    errors = []
    declared = sorted(set(known))
    for name in sorted(given):
        if name in REMOVED and name not in known:
            errors.append({"variable": name, "value": show(given[name]), "message": (
                "%s: no longer read (set to %s): the CUDA arch list is one input for every build; set %s "
                "instead (empty: the plan's list for the host)" % (name, show(given[name]), REMOVED[name]))})
            continue
        if name in known or prefixes_ is not None and not name.startswith(tuple(prefixes_)):
            continue
        # Compared after the first word they share (sparkforge_, pytorch_), which would make any two alike.
        head, _sep, rest = name.partition("_")
        alike = dict((other[len(head) + 1:], other) for other in declared if other.startswith(head + "_"))
        close = difflib.get_close_matches(rest, sorted(alike), n=1, cutoff=0.75)
        hint = "did you mean %s?" % alike[close[0]] if close else "no argument spec lists it (docs/bad-inputs.md)"
        errors.append({"variable": name, "value": show(given[name]),
                       "message": "%s: unknown variable (set to %s): %s" % (name, show(given[name]), hint)})
    return errors


# Task keywords whose value names a variable the roles set themselves (register: x, loop_var: x), and
# those whose keys do (set_fact: {x: ..}, vars: {x: ..}).
SETS_NAME = ("register", "loop_var")
SETS_KEYS = ("set_fact", "ansible.builtin.set_fact", "ansible.legacy.set_fact", "vars")


def names_set(document, top_level=False):
    """Every variable name a parsed YAML document of the collection defines: the top-level keys of a
    defaults/vars file (``top_level``), and in task and play files what register, loop_var, set_fact and
    vars name, at any depth (blocks, plays, include_role)."""
    found = set()
    if top_level and isinstance(document, dict):
        found.update(str(k) for k in document)
    stack = [document]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key in SETS_NAME and isinstance(value, str):
                    found.add(value)
                elif key in SETS_KEYS and isinstance(value, dict):
                    found.update(str(k) for k in value if k != "cacheable")
                if isinstance(value, (dict, list)):
                    stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)
    return found


def specs_from_argument_specs(documents):
    """Merge the options of every entry point of the given argument_specs documents (parsed YAML)."""
    out = {}
    for doc in documents:
        for entry in ((doc or {}).get("argument_specs") or {}).values():
            for name, spec in (entry.get("options") or {}).items():
                out.setdefault(name, spec)
    return out


def mark_defaults(specs, defaults):
    """``specs`` with ``empty`` (the role's default is "", [] or {}: empty has the meaning the role documents)
    and ``null`` (the default is null) added from ``defaults``, the roles' defaults merged (name -> value)."""
    out = {}
    for name, spec in specs.items():
        spec = dict(spec)
        if name in defaults:
            default = defaults[name]
            if default is None:
                spec["null"] = True
            elif isinstance(default, (str, list, dict)) and not default:
                spec["empty"] = True
            elif isinstance(default, str) and "{{" in default and default_may_be_empty(default, defaults):
                spec["empty"] = True
        out[name] = spec
    return out


# A template default that renders empty when what it reads is unset ("{{ x | default('') }}").
EMPTY_FALLBACK = re.compile(r"default\(\s*(''|\"\"|\[\]|\{\})\s*(,\s*(true|True))?\s*\)", re.ASCII)
FORWARD = re.compile(r"^\{\{\s*([A-Za-z0-9_]+)\s*\}\}$", re.ASCII)


def default_may_be_empty(default, defaults):
    """A role default that is a template: empty is one of its documented values when it falls back to empty, or
    when it forwards a variable (``{{ sparkforge_x }}``) whose own default or rule allows empty."""
    if EMPTY_FALLBACK.search(default):
        return True
    match = FORWARD.match(default.strip())
    if not match:
        return False
    target = match.group(1)
    if RULES.get(target, {}).get("empty"):
        return True
    value = defaults.get(target)
    return isinstance(value, (str, list, dict)) and not value
