# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lookup yaml_keys: every key written twice in one YAML mapping of what this run was given."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: yaml_keys
short_description: the keys written twice in one YAML mapping of the run's inventory, variable files and -e files
description:
  - Reads, on the controller, the inventory sources of the run, every C(group_vars/) and C(host_vars/) file beside
    them and beside the playbook (O(var_dirs)), the files given with C(-e @file) and inline C(-e) YAML, and the
    playbooks given on the command line.
  - Returns one message per key written twice in one mapping, naming the file, the line and the key
    (C(module_utils/plan/yaml_keys.py)). A key that overrides one a YAML merge key (C(<<:)) brings is not a
    duplicate, unlike ansible-core's C(duplicate_dict_key) check, which counts it.
options:
  var_dirs:
    description: The directories whose C(group_vars/) and C(host_vars/) Ansible reads (inventories, playbook).
    type: list
    elements: path
    default: []
  sources:
    description: The inventory sources (C(ansible_inventory_sources)).
    type: list
    elements: path
    default: []
"""

EXAMPLES = r"""
- name: Stop on a key written twice
  ansible.builtin.fail:
    msg: "{{ _found | join(' | ') }}"
  vars:
    _found: "{{ query('sparkforge.stack.yaml_keys', sources=ansible_inventory_sources, var_dirs=[playbook_dir]) }}"
  when: _found | length > 0
"""

RETURN = r"""
_list:
  description: One message per duplicate key - C(FILE:LINE), the key, and the line that wrote it first.
  type: list
  elements: str
"""

import os

from ansible import constants as C, context
from ansible.plugins.lookup import LookupBase
from ansible_collections.sparkforge.stack.plugins.module_utils.plan.yaml_keys import run_duplicates


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        # What ansible-playbook was given on its command line: -e items and the playbooks.
        args = context.CLIARGS or {}
        # Files an inventory directory holds that Ansible does not read (ansible.cfg: ignore_patterns = examples).
        ignore = [str(p) for p in C.config.get_config_value("INVENTORY_IGNORE_PATTERNS") or []]
        return run_duplicates(self.get_option("sources"), self.get_option("var_dirs"),
                              args.get("extra_vars") or (), args.get("args") or (), os.getcwd(), ignore)
