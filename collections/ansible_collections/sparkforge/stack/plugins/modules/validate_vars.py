#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: validate_vars
short_description: Check every user-set sparkforge variable before anything changes
version_added: "0.1.0"
description:
  - Checks the values of the variables the roles declare in their C(meta/argument_specs.yml) (inventory,
    group_vars, C(-e)) against their types, choices and the rules of C(module_utils/plan/validate.py) - absolute
    paths, http(s)/file URLs, git remotes, versions, numbers in range, known components.
  - A list may be given as a list or as a comma-separated string (what C(-e name=a,b) gives); it is split.
    A number or boolean given as a string (what C(-e name=8) gives) is converted; RV(values) holds the typed values.
  - A path where something is created is absolute, has no C(.) or C(..), is not a system directory
    (C(path_rules.SYSTEM_DIRS)) and is not inside the collection or its checkout (but the checkout's C(reports/)).
  - A variable in O(unknown) (set with a project prefix, but neither declared nor set by any role) is refused
    with the closest declared name.
  - A value set to null (C(name:) with nothing after it in YAML) or empty where the variable's role does not
    give empty a meaning is refused; non-ASCII digits (full-width C(２)) anywhere in a value are refused.
  - Across variables (C(module_utils/plan/validate_pairs.py)), one input spelt twice (C(pytorch_version) beside
    C(sparkforge_torch_version)) with different values is refused naming both; values that state one fact (the
    CUDA major of C(sparkforge_cuda_major) and of the torch index's C(cuNNN)) must agree; the ML layer's profile,
    pins and extra matrix entries are checked against the manifest's matrix (O(context)).
  - Fails naming every bad variable and what it got; otherwise returns the values normalised.
  - The C(preflight) role runs it on the controller first, so a bad value stops the run with nothing changed.
  - Reads only its arguments; changes nothing.
author:
  - sparkforge developers (@sparkforge)
options:
  variables:
    description:
      - Variable name to value; C(__unset__) (not set) is skipped, and so is a null that is not in O(given)
        (a role default that is null).
    type: dict
    required: true
  given:
    description:
      - The names the user set (inventory, group and host vars, C(-e)); a null among them is refused. Omitted,
        every name of O(variables) counts as set.
    type: list
    elements: str
  context:
    description:
      - The manifest's C(sparkforge_ml_packages) and C(sparkforge_ml_profiles), against which the ML layer's
        inputs are checked. Empty - not checked.
    type: dict
    default: {}
  specs:
    description: Variable name to its argument spec (C(type), C(elements), C(choices)), as the roles' argument_specs give them.
    type: dict
    default: {}
  unknown:
    description:
      - Variable name to value of the variables set with a project prefix that nothing declares or sets
        (lookup C(sparkforge.stack.known_names)); each is refused, with the closest name of O(specs).
    type: dict
    default: {}
  collection_dir:
    description:
      - The collection's directory; no path may point inside it, or inside the checkout it belongs to (except
        the checkout's C(reports/)). Empty - not checked.
    type: str
    default: ""
attributes:
  check_mode:
    description: Runs the same in check mode (it only reads its arguments).
    support: full
  diff_mode:
    description: Returns no diff.
    support: none
"""

EXAMPLES = r"""
- name: Check the user's variables
  sparkforge.stack.validate_vars:
    variables:
      sparkforge_venv: "{{ sparkforge_venv }}"
      sparkforge_components: "{{ sparkforge_components }}"
    specs:
      sparkforge_venv: {type: path}
      sparkforge_components: {type: list, elements: str}
  delegate_to: localhost
"""

RETURN = r"""
values:
  description: The variables checked, normalised (lists split, booleans and numbers converted).
  returned: always
  type: dict
one_source:
  description:
    - Input (C(sparkforge_*) name) to its value, for each input a role spelling set alone
      (C(pytorch_version) without C(sparkforge_torch_version)); preflight publishes it, so the plan and every role
      read that value.
  returned: always
  type: dict
errors:
  description: One per bad variable - C(variable), C(value) (what it got) and C(message).
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkforge.stack.plugins.module_utils.plan.validate_pairs import cross_check
from ansible_collections.sparkforge.stack.plugins.module_utils.plan.validate import (
    EXTRA_SPECS,
    UNSET,
    check,
    protected_dirs,
)
from ansible_collections.sparkforge.stack.plugins.module_utils.plan.var_names import unknown_names


def main():
    module = AnsibleModule(
        argument_spec=dict(
            variables=dict(type="dict", required=True),
            specs=dict(type="dict", default={}),
            unknown=dict(type="dict", default={}),
            collection_dir=dict(type="str", default=""),
            given=dict(type="list", elements="str"),
            context=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    given = module.params["given"]
    values, errors = check(module.params["variables"], module.params["specs"],
                           protected_dirs(module.params["collection_dir"]), given=given)
    if given is None:
        given = [name for name, value in module.params["variables"].items() if value != UNSET]
    # Across variables, on the values that passed (a bad one is named once, above).
    refused = set(e["variable"] for e in errors)
    more, one_source = cross_check(dict((k, v) for k, v in values.items() if k not in refused),
                                   [name for name in given if name not in refused], module.params["context"])
    errors += more
    declared = set(module.params["specs"]) | set(EXTRA_SPECS)
    # The task hands over only the prefixed names nothing declares or sets (the prefixes were applied there).
    errors += unknown_names(module.params["unknown"], declared, prefixes_=None)
    if errors:
        module.fail_json(msg="%d variable(s) refused, nothing was changed: %s"
                         % (len(errors), " | ".join(e["message"] for e in errors)), errors=errors, values=values,
                         one_source=one_source)
    module.exit_json(changed=False, values=values, errors=[], one_source=one_source)


if __name__ == "__main__":
    main()
