#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: paths_usable
short_description: Refuse paths a run could not create or write, before anything changes
version_added: "0.5.0"
description:
  - For each entry of O(paths), walks the path from C(/) and fails, naming the variable, the path and the
    offending parent, when an existing component above it is not a directory (a regular file, a dangling
    symlink), when the path exists and is not of its O(paths[].kind), or when the directory the run writes
    into (the path itself, or its nearest existing ancestor under which the run creates the rest) is not
    writable by the connecting user.
  - Each path is resolved on the host (its symlinks followed) and refused when it leads to a system directory or
    into the collection's checkout (O(collection_dir)) - the rules the controller applies to the path as written
    (C(module_utils/_common/path_rules.py), one home for both).
  - With O(paths[].own), whose the path is. A venv sparkforge did not make (no completion marker in it) or a file
    it did not write (its first line not C(# managed by sparkforge)) is refused, naming what was found and the
    choices (adopt it through O(paths[].adopt_variable), or another path), unless O(paths[].adopt); an adopted
    one is listed in RV(found) with what the run will do to it.
  - Reads only, so check mode gives the answer the real run would meet (preflight runs it in both).
author:
  - sparkforge developers (@sparkforge)
options:
  paths:
    description: The paths a run will create or write.
    type: list
    elements: dict
    required: true
    suboptions:
      variable:
        description: The variable that set the path (named in the message).
        type: str
        required: true
      path:
        description: The path; empty means not used (not checked).
        type: str
        default: ""
      kind:
        description: C(dir) for a directory the run creates or writes into, C(file) for a file whose directory it creates.
        type: str
        choices: [dir, file]
        default: dir
      protect:
        description:
          - Whether the C(collection_dir) rule applies to this path. C(false) for a default the run resolves
            itself where the user chose it by where they run (the reports directory in the directory
            ansible-playbook runs in); a path a user sets is always checked.
        type: bool
        default: true
      own:
        description:
          - What at the path must be sparkforge's own - C(venv) (its completion marker in it, or an interrupted
            making's pending file beside it), C(file) (a file whose first line is C(# managed by sparkforge)) or
            C(build) (a build directory, its build lock file in it; never adopted), C(proof) or C(generation) (a
            JSON record of sparkforge's - the proof of provisioning, the host's generation record - holding its
            C(managed_by) marker or the exact keys an earlier version wrote; never adopted); empty - not checked.
            Nothing there, or an empty directory, is always fine.
        type: str
        choices: ["", venv, file, build, proof, generation]
        default: ""
      adopt:
        description: Accept a venv or file at the path that sparkforge did not make (the user said so).
        type: bool
        default: false
      adopt_variable:
        description: The variable that sets O(paths[].adopt), named in a refusal.
        type: str
        default: ""
  collection_dir:
    description:
      - The collection's directory on the controller; no path may lead inside it or the checkout it belongs to
        (except the checkout's C(reports/)). Empty - not checked.
    type: str
    default: ""
attributes:
  check_mode:
    support: full
    description: Reads only; the same verdict as the real run.
  diff_mode:
    support: none
    description: Changes nothing, so there is no diff.
"""

EXAMPLES = r"""
- name: Refuse a venv or report path that cannot be created, or is not sparkforge's
  sparkforge.stack.paths_usable:
    paths:
      - {variable: sparkforge_venv, path: /opt/sparkforge/venv, own: venv, adopt_variable: sparkforge_venv_adopt}
      - {variable: runtime_env_profile_path, path: /etc/profile.d/sparkforge.sh, kind: file, own: file,
         adopt_variable: runtime_env_profile_adopt}
"""

RETURN = r"""
problems:
  description: One message per path that cannot be used (the module fails when there is any).
  returned: always
  type: list
  elements: str
found:
  description: What was found at each adopted path and what the run will do to it.
  returned: always
  type: list
  elements: str
checked:
  description: The paths checked.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkforge.stack.plugins.module_utils._common.path_rules import protected_dirs
from ansible_collections.sparkforge.stack.plugins.module_utils.host.host_paths import paths_problems


def main():
    module = AnsibleModule(
        argument_spec=dict(
            paths=dict(type="list", elements="dict", required=True, options=dict(
                variable=dict(type="str", required=True),
                path=dict(type="str", default=""),
                kind=dict(type="str", choices=["dir", "file"], default="dir"),
                protect=dict(type="bool", default=True),
                own=dict(type="str", choices=["", "venv", "file", "build", "proof", "generation"], default=""),
                adopt=dict(type="bool", default=False),
                adopt_variable=dict(type="str", default=""),
            )),
            collection_dir=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )
    entries = module.params["paths"]
    found = []
    problems = paths_problems(entries, protected_dirs(module.params["collection_dir"]), found)
    checked = [e["path"] for e in entries if e.get("path")]
    if problems:
        module.fail_json(msg="%d path(s) cannot be used; nothing was changed: %s" % (len(problems), " | ".join(problems)),
                         problems=problems, checked=checked, found=found)
    module.exit_json(changed=False, problems=[], checked=checked, found=found)


if __name__ == "__main__":
    main()
