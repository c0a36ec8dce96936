# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ML layer's own inputs checked before any host changes: the profile, the pins and the extra matrix
entries, with the checks ml_packages.py applies when it resolves a host's plan (its methods, conditions,
install_first, gpu_build and profile lookup), run here over every rule rather than the one that matches.

Each function returns a list of (variable, reason) pairs; preflight's validate_vars names them."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.sparkforge.stack.plugins.module_utils.packages import ml_packages as ml

# A pin: a bare PEP 440 release (pip's name==pin) or specifiers joined by commas (name>=1,<2).
_RELEASE = r"[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?(\+[a-z0-9]+(\.[a-z0-9]+)*)?"
PIN = re.compile(r"^%s$" % _RELEASE, re.ASCII | re.IGNORECASE)
SPECIFIER = re.compile(r"^(==|!=|<=|>=|~=|<|>|===)\s*%s(\.\*)?$" % _RELEASE, re.ASCII | re.IGNORECASE)


def pin_problem(pin):
    """Why ``pin`` is not a version or specifier (None when it is one)."""
    if isinstance(pin, float):
        return "the number %s: YAML read an unquoted version as a number (4.40 becomes 4.4); write it quoted, as a string" % pin
    if isinstance(pin, bool) or not isinstance(pin, (str, int)):
        return "%r is not a version: give a string like '4.40.0' or '>=4.40,<5'" % (pin,)
    text = str(pin).strip()
    if not text:
        return "is empty: give a version like '4.40.0' or '>=4.40,<5', or remove the pin"
    if text != str(pin):
        # '4.40.0 ' is a pasted value; a pin is compared as text with what the report records.
        return "%r has spaces around it: give %r" % (pin, text)
    clauses = [c.strip() for c in text.split(",")]
    if len(clauses) == 1 and PIN.match(text) or all(SPECIFIER.match(c) for c in clauses):
        return None
    return "%r is not a version like '4.40.0' nor specifiers like '>=4.40,<5'" % text


def entry_problems(name, entry):
    """What ml_packages.select_rule and resolve would refuse in one matrix entry, over every rule."""
    if not isinstance(entry, dict):
        return ["entry %s is %r, not a mapping with 'methods'" % (name, entry)]
    rules = entry.get("methods")
    if not isinstance(rules, list) or not rules:
        return ["matrix entry '%s' has no methods (a list of {method: wheel|index|source|skip, when: ...})" % name]
    out = []
    for rule in rules:
        if not isinstance(rule, dict):
            out.append("matrix entry '%s' has a rule %r that is not a mapping" % (name, rule))
            continue
        try:
            # select_rule's checks of a rule, applied to this one: method, fallback, then its conditions.
            ml.select_rule(name, {"methods": [dict(rule, when=None)]}, {})
            ml.rule_matches(rule.get("when"), {})
            if rule["method"] == "index" and not rule.get("index_url"):
                raise ml.MatrixError("matrix entry '%s' uses method index without index_url" % name)
        except ml.MatrixError as exc:
            out.append(str(exc))
    try:
        ml._gpu_build(name, entry.get("gpu_build"))
    except ml.MatrixError as exc:
        out.append(str(exc))
    return out


def input_problems(matrix, profiles, pins, extra, profile, packages=None):
    """(variable, reason) for ml_packages_extra_matrix, ml_packages_pins and the profile, against the
    manifest's ``matrix`` and ``profiles`` (sparkforge_ml_packages, sparkforge_ml_profiles)."""
    out = []
    extra = extra or {}
    if not isinstance(extra, dict):
        return [("ml_packages_extra_matrix", "expected a mapping of package name to entry, got %r" % (extra,))]
    for name in sorted(extra, key=str):
        out += [("ml_packages_extra_matrix", why) for why in entry_problems(name, extra[name])]
    merged = dict(matrix or {})
    merged.update(dict((k, v) for k, v in extra.items() if isinstance(v, dict)))
    if not out:
        try:
            ml._with_prerequisites(merged, list(extra))
        except ml.MatrixError as exc:
            out.append(("ml_packages_extra_matrix", str(exc)))
    for name in sorted(pins or {}, key=str):
        if ml._lookup(merged, str(name)) is None:
            out.append(("ml_packages_pins", "pin for %r: not a package of the matrix (known: %s)"
                        % (name, ", ".join(sorted(merged)))))
        why = pin_problem(pins[name])
        if why:
            out.append(("ml_packages_pins", "pin for %r: %s" % (name, why)))
    if profile or packages:
        try:
            ml.select_names(merged, profiles, profile or None, packages)
        except ml.MatrixError as exc:
            out.append(("ml_packages_profile" if "profile" in str(exc) else "ml_packages_packages", str(exc)))
    return out
