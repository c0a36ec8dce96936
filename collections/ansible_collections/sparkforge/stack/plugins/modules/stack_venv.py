#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: stack_venv
short_description: Make the stack venv completely or not at all, repair one left incomplete, never take the user's
version_added: "0.5.0"
description:
  - Makes the Python venv at O(path) with C(O(python) -m venv) and writes a completion marker in it last.
  - A venv counts as made only when the marker exists and its python imports pip. A venv of sparkforge's that a
    killed run left incomplete (no pip, no python; the marker missing and its pending file beside it) is removed
    and made again.
  - A venv sparkforge did not make (no marker in it, no pending file beside it - C(uv venv),
    C(python -m venv --without-pip), or any venv with pip) is never removed nor marked. The module fails before
    any change, naming it, what it holds and the two choices (adopt it with O(adopt), or another path). Adopted,
    it keeps every package; pip is bootstrapped with its own C(python -m ensurepip) when it has none, and the
    marker records the adoption (a later run repairs it the same way, never by removing it).
  - A directory at O(path) that is not a venv (no C(pyvenv.cfg)) is never removed nor adopted; the module fails,
    naming it. An empty directory is made into the venv in place.
author:
  - sparkforge developers (@sparkforge)
options:
  path:
    description: The venv's directory (absolute).
    type: path
    required: true
  python:
    description: The interpreter that makes the venv (a name on the host's PATH or a path).
    type: str
    default: python3
  adopt:
    description:
      - Use a venv at O(path) that sparkforge did not make, keeping its packages (the role variable
        C(sparkforge_venv_adopt)).
    type: bool
    default: false
  variable:
    description: The variable that set O(path), named in a refusal.
    type: str
    default: sparkforge_venv
  adopt_variable:
    description: The variable that sets O(adopt), named in a refusal.
    type: str
    default: sparkforge_venv_adopt
attributes:
  check_mode:
    support: full
    description: Reports what would be made, adopted or remade (RV(msg)), or fails where the real run would, and
      changes nothing.
  diff_mode:
    support: none
    description: Not supported.
"""

EXAMPLES = r"""
- name: Make the stack venv (or repair one an interrupted run left)
  sparkforge.stack.stack_venv:
    path: /opt/sparkforge/venv
    python: python3

- name: Use the venv the user made with uv (no pip in it), keeping its packages
  sparkforge.stack.stack_venv:
    path: /home/me/.venvs/ml
    adopt: true
"""

RETURN = r"""
path:
  description: The venv.
  returned: always
  type: str
action:
  description: What was (in check mode, would be) done; one of C(none), C(create), C(adopt), C(remake).
  returned: always
  type: str
reason:
  description: Why, for C(adopt) and C(remake) (C(no pip), C(no bin/python)...); empty otherwise.
  returned: always
  type: str
found:
  description: What was found at O(path) (e.g. C(/x is a venv sparkforge did not make (...; without pip; ...))).
  returned: changed or failed
  type: str
msg:
  description: "The change in words, e.g. C(would remake the incomplete venv at /opt/sparkforge/venv: no pip)."
  returned: changed
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import AnsibleSystem, JobError
from ansible_collections.sparkforge.stack.plugins.module_utils.host.venv import VenvJob


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            python=dict(type="str", default="python3"),
            adopt=dict(type="bool", default=False),
            variable=dict(type="str", default="sparkforge_venv"),
            adopt_variable=dict(type="str", default="sparkforge_venv_adopt"),
        ),
        supports_check_mode=True,
    )
    try:
        result = VenvJob(module.params, AnsibleSystem(module), module.check_mode).run()
    except JobError as exc:
        module.fail_json(**exc.fail_args())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
