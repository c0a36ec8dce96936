# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lookup run_names: the names given to this run (tags, limit, groups, variable files) that match nothing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: run_names
short_description: the names given to a run that match nothing, one message each
description:
  - Reads, on the controller, the C(tags) of every play and role of the collection (the roles directory given and
    the C(playbooks/) beside it) and the variables its plays template in play keywords (C(hosts), C(serial),
    C(max_fail_percentage)...).
  - Returns one list of messages (empty when all is well) for a tag given with C(--tags) or C(--skip-tags) that
    no play or role uses; a C(--limit) pattern that matches no host or group; a play keyword's variable given
    with C(-e) (C(cluster_group)) as a host pattern that matches nothing; a C(group_vars/) or C(host_vars/) file
    beside an inventory or the playbook that names no group or host; a play keyword's variable set in the
    inventory (play keywords read play and extra variables only).
  - Each message names what was given and the known names, closest first (C(module_utils/plan/names.py)).
options:
  _terms:
    description: The roles directory of the collection (one path).
    type: list
    elements: path
    required: true
  var_dirs:
    description: The directories whose C(group_vars/) and C(host_vars/) Ansible reads (inventories, playbook).
    type: list
    elements: path
    default: []
"""

EXAMPLES = r"""
- name: Stop on a name that matches nothing
  ansible.builtin.fail:
    msg: "{{ query('sparkforge.stack.run_names', role_path | dirname) | join('; ') }}"
  when: query('sparkforge.stack.run_names', role_path | dirname) | length > 0
"""

RETURN = r"""
_list:
  description: One message per name that matches nothing.
  type: list
  elements: str
"""

import glob
import os

import yaml

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase
from ansible.utils.vars import load_extra_vars

from ansible_collections.sparkforge.stack.plugins.module_utils.plan import names

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _load(path):
    with open(path) as handle:
        return yaml.load(handle, Loader=_LOADER)  # nosec - a safe loader


def collection_names(roles_dir):
    """(the tags the collection's plays and roles use, keyword -> variables its plays template in keywords)."""
    tags, keyword_vars = set(), {}
    for path in sorted(glob.glob(os.path.join(roles_dir, "*", "*", "**", "*.yml"), recursive=True)):
        tags.update(names.tags_used(_load(path)))
    for path in sorted(glob.glob(os.path.join(os.path.dirname(roles_dir), "playbooks", "*.yml"))):
        document = _load(path)
        tags.update(names.tags_used(document))
        for keyword, found in names.play_keyword_vars(document).items():
            keyword_vars.setdefault(keyword, set()).update(found)
    return tags, keyword_vars


def playbook_tags(playbook_dir):
    """The tags the YAML files directly in the running playbook's directory use (unreadable ones are skipped:
    Ansible itself reports a playbook it cannot read)."""
    tags = set()
    for path in sorted(glob.glob(os.path.join(playbook_dir, "*.yml")) + glob.glob(os.path.join(playbook_dir, "*.yaml"))):
        try:
            tags.update(names.tags_used(_load(path)))
        except (OSError, yaml.YAMLError):
            continue
    return tags


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        if len(terms) != 1 or not os.path.isdir(terms[0]):
            raise AnsibleLookupError("run_names takes the collection's roles directory, got %r" % (terms,))
        self.set_options(var_options=variables, direct=kwargs)
        variables = variables or {}
        tags, keyword_vars = collection_names(terms[0])
        # The user's own playbooks beside the one running (a site's, a molecule scenario's) may tag their own tasks.
        if variables.get("playbook_dir"):
            tags.update(playbook_tags(variables["playbook_dir"]))
        groups = variables.get("groups") or {}
        hosts = sorted(set(host for members in groups.values() for host in members))
        group_names = sorted(groups)
        extra = load_extra_vars(self._loader)
        hostvars = variables.get("hostvars") or {}
        in_inventory = {}
        for host in hosts:
            for name in sorted(set().union(*keyword_vars.values()) if keyword_vars else ()):
                if name not in extra and name not in in_inventory and name in hostvars[host]:
                    in_inventory[name] = host
        errors = names.unknown_tags(variables.get("ansible_run_tags"), variables.get("ansible_skip_tags"), tags)
        if variables.get("ansible_limit"):
            errors += names.unmatched_patterns("--limit", variables["ansible_limit"], hosts, group_names)
        for name in sorted(keyword_vars.get("hosts", ())):
            if isinstance(extra.get(name), str):
                errors += names.unmatched_patterns("-e %s" % name, extra[name], hosts, group_names)
        errors += names.stray_var_files(self.get_option("var_dirs"), hosts, group_names)
        errors += names.play_vars_in_inventory(keyword_vars, in_inventory)
        return errors
