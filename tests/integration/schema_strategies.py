# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hypothesis strategies of bad values for every declared variable, drawn from its type and rule: shared by
the unit property over validate.check (test_validate_pairs.py) and the one through the playbook
(tests/integration/test_validate_playbook.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from hypothesis import strategies as st

from ansible_collections.sparkforge.stack.plugins.module_utils.plan import validate

from test_validate import SPECS

NAMES = sorted(n for n in set(SPECS) | set(validate.EXTRA_SPECS))
MERGED = dict(validate.EXTRA_SPECS, **SPECS)
WIDE_DIGITS = st.sampled_from(u"０１２３４５６７８９٠١٢٣४५६")


def bad_values(name, passes_ansible=False):
    """Values every declared variable refuses, drawn from its type.  ``passes_ansible``: only values Ansible's own
    argument check of a role converts without complaint (null, empty, non-ASCII digits, out of range, relative
    paths), so that validate_vars is what names them."""
    spec, rule = MERGED[name], dict(validate.implied_rule(name), **validate.RULES.get(name, {}))
    vtype = spec.get("type", "str")
    kind = rule.get("kind") or ("path" if vtype == "path" else None)
    options = []
    # A non-ASCII digit anywhere (Python's int() reads "1２" as 12; Ansible's bool check refuses it first).
    if vtype == "dict":
        options.append(st.builds(lambda d: {"key": "1%s" % d}, WIDE_DIGITS))
    elif not (vtype == "bool" and passes_ansible):
        options.append(st.builds(lambda d: "1%s" % d, WIDE_DIGITS))
    # Ansible's argument check refuses a null bool or number itself (naming it); validate_vars names the rest.
    if not spec.get("null") and not (passes_ansible and vtype in ("bool", "int", "float", "list", "dict")):
        options.append(st.none())
    if vtype in ("str", "path", "list") and not validate.empty_allowed(vtype, spec, rule):
        options.append(st.sampled_from(["", "  "]))
    if vtype == "list" and not validate.empty_allowed(vtype, spec, rule):
        options.append(st.just([]))
    if vtype in ("int", "float"):
        if not passes_ansible:
            options.append(st.sampled_from(["many", True]))
        options.append(st.integers(min_value=1, max_value=10 ** 6).map(lambda d: rule["max"] + d))
        options.append(st.integers(min_value=1, max_value=10 ** 6).map(lambda d: rule["min"] - d))
    if vtype == "bool" and not passes_ansible:
        options.append(st.sampled_from(["maybe", 2, [True]]))
    if vtype == "dict" and not passes_ansible:
        options.append(st.sampled_from(["a=b", ["x"], 3]))
    if vtype == "float":
        options.append(st.just(float("nan")))
    if vtype == "list" and spec.get("elements", "str") == "str" and not (passes_ansible and spec.get("choices")):
        options.append(st.sampled_from([["x", ""], ["", "x"], [" "]]))
    if kind == "path" and name not in validate.READ_PATHS:
        options.append(st.sampled_from(["relative/dir", "./v", "/usr", "/opt/../usr", "/opt/./x", "/opt/x\n",
                                        "/opt/a\tb"]))
    if kind == "env_map" and vtype == "dict":
        options.append(st.sampled_from([{"PIP_TIMEOUT": None}, {"1BAD": "x"}, {"A B": "x"}, {"X": ["a"]}]))
    if kind == "arch_list":
        options.append(st.sampled_from(["9.0;9.0", "9.0  12.1", ";9.0", "9.0;", "sm_90", "90"]))
    if kind in ("version", "release"):
        options.append(st.floats(min_value=0.1, max_value=99.9, allow_nan=False))
    if passes_ansible and spec.get("choices"):
        # Ansible's check refuses anything outside the choices itself (a null too), naming the variable.
        options = []
    return st.one_of(options) if options else None
