# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lookup known_names: the project's variable prefixes and every variable name the collection knows."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: known_names
short_description: the variable prefixes of the project and every variable name its roles declare or set
description:
  - Reads, on the controller, every role of a roles directory and the collection's C(playbooks/) beside it.
    Returns one mapping with C(prefixes) (C(sparkforge_), C(cluster_), C(xhost_) and each role's name followed
    by C(_)) and C(names) (what the roles' C(meta/argument_specs.yml) list, the controller settings of
    C(validate.EXTRA_SPECS), the roles' defaults and vars, and what the roles and playbooks set themselves with
    C(register), C(set_fact), C(vars) and C(loop_var)).
  - Preflight refuses a variable set with one of these prefixes whose name is not among them (a misspelling),
    with the closest declared name (module M(sparkforge.stack.validate_vars)).
options:
  _terms:
    description: The roles directory (one path).
    type: list
    elements: path
    required: true
"""

EXAMPLES = r"""
- name: The names a misspelt variable is compared with
  ansible.builtin.debug:
    msg: "{{ (query('sparkforge.stack.known_names', role_path | dirname) | first).prefixes }}"
"""

RETURN = r"""
_list:
  description: One mapping with C(prefixes) (list) and C(names) (list).
  type: list
  elements: dict
"""

import glob
import os

import yaml

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.sparkforge.stack.plugins.module_utils.plan import validate, var_names


# libyaml's loader where PyYAML has it: every host's preflight reads the roles (about ten times faster).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _load(path):
    with open(path) as handle:
        return yaml.load(handle, Loader=_LOADER)  # nosec - a safe loader


def known_names(roles_dir):
    roles = sorted(name for name in os.listdir(roles_dir) if os.path.isdir(os.path.join(roles_dir, name)))
    names = set(validate.EXTRA_SPECS) | set(validate.INTERNAL_NAMES)
    specs = [_load(path) for path in sorted(glob.glob(os.path.join(roles_dir, "*", "meta", "argument_specs.yml")))]
    names.update(var_names.specs_from_argument_specs(specs))
    for role in roles:
        base = os.path.join(roles_dir, role)
        for sub in ("defaults", "vars"):
            for path in sorted(glob.glob(os.path.join(base, sub, "**", "*.yml"), recursive=True)):
                names.update(var_names.names_set(_load(path), top_level=True))
        for sub in ("tasks", "handlers", "meta"):
            for path in sorted(glob.glob(os.path.join(base, sub, "**", "*.yml"), recursive=True)):
                names.update(var_names.names_set(_load(path)))
    playbooks = os.path.join(os.path.dirname(roles_dir), "playbooks")
    for path in sorted(glob.glob(os.path.join(playbooks, "*.yml"))):
        names.update(var_names.names_set(_load(path)))
    return {"prefixes": var_names.prefixes(roles), "names": sorted(names)}


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        if len(terms) != 1:
            raise AnsibleLookupError("known_names takes one roles directory, got %d" % len(terms))
        if not os.path.isdir(terms[0]):
            raise AnsibleLookupError("known_names: no roles directory %s" % terms[0])
        return [known_names(terms[0])]
