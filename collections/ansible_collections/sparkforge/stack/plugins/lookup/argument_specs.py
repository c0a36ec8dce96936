# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lookup argument_specs: every role's options (type, elements, choices), read from a roles directory."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: argument_specs
short_description: the options every role of a roles directory declares in its meta/argument_specs.yml
description:
  - Reads C(<roles dir>/*/meta/argument_specs.yml) on the controller and returns one mapping of option
    name to C(type), C(elements) and C(choices); where two roles declare the same option, the first role in
    name order wins. An option whose role default (C(defaults/main.yml)) is empty gets C(empty=true), one whose
    default is null C(null=true); those values mean what the role documents.
  - Preflight checks every variable a user sets against it before anything changes (module
    M(sparkforge.stack.validate_vars)). Only ansible-core is needed (the controller may have nothing else).
options:
  _terms:
    description: The roles directory (one path).
    type: list
    elements: path
    required: true
"""

EXAMPLES = r"""
- name: Every option the collection's roles take
  ansible.builtin.debug:
    msg: "{{ query('sparkforge.stack.argument_specs', role_path | dirname) | first }}"
"""

RETURN = r"""
_list:
  description: One mapping, option name to its C(type), C(elements) and C(choices).
  type: list
  elements: dict
"""

import glob
import os

import yaml

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.sparkforge.stack.plugins.module_utils.plan.var_names import mark_defaults

# libyaml's loader where PyYAML has it (as known_names and run_names): preflight's check of the variables reads
# every role's specs and defaults four times a host, 0.15 s each with the pure-Python loader, 0.02 s with it.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _load(handle):
    return yaml.load(handle, Loader=_LOADER)  # nosec - a safe loader


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        if len(terms) != 1:
            raise AnsibleLookupError("argument_specs takes one roles directory, got %d" % len(terms))
        roles_dir = terms[0]
        files = sorted(glob.glob(os.path.join(roles_dir, "*", "meta", "argument_specs.yml")))
        if not files:
            raise AnsibleLookupError("no role under %s has meta/argument_specs.yml" % roles_dir)
        out = {}
        for path in files:
            with open(path) as handle:
                doc = _load(handle) or {}
            for entry in (doc.get("argument_specs") or {}).values():
                for name, spec in ((entry or {}).get("options") or {}).items():
                    if name not in out:
                        out[name] = {"type": spec.get("type", "str"), "elements": spec.get("elements"),
                                     "choices": spec.get("choices")}
                        if spec.get("options"):
                            # The fields of each entry of a list of mappings (validate checks them at depth).
                            out[name]["options"] = dict(
                                (key, {"type": sub.get("type", "str"), "elements": sub.get("elements"),
                                       "required": bool(sub.get("required")), "choices": sub.get("choices")})
                                for key, sub in spec["options"].items())
        # Where a role's own default is empty or null, that value is one it documents (var_names.mark_defaults).
        defaults = {}
        for path in sorted(glob.glob(os.path.join(roles_dir, "*", "defaults", "main.yml"))
                           + glob.glob(os.path.join(roles_dir, "*", "defaults", "main", "*.yml"))):
            with open(path) as handle:
                for name, value in (_load(handle) or {}).items():
                    defaults.setdefault(name, value)
        return [mark_defaults(out, defaults)]
