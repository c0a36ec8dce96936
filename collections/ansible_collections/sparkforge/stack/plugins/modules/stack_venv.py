#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: stack_venv
short_description: Make the stack venv completely or not at all, and repair one left incomplete
version_added: "0.5.0"
description:
  - Makes the Python venv at O(path) with C(O(python) -m venv) and writes a completion marker in it last.
  - A venv counts as made only when the marker exists and its python imports pip. A venv a killed run left
    incomplete (no pip, no python) is removed and made again; a complete venv without the marker (made by an
    earlier version) is marked, not remade.
  - A directory at O(path) that is not a venv (no C(pyvenv.cfg)) is never removed; the module fails, naming it.
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
attributes:
  check_mode:
    support: full
    description: Reports what would be made, marked or remade (RV(msg)) and changes nothing.
  diff_mode:
    support: none
    description: Not supported.
"""

EXAMPLES = r"""
- name: Make the stack venv (or repair one an interrupted run left)
  sparkforge.stack.stack_venv:
    path: /opt/sparkforge/venv
    python: python3
"""

RETURN = r"""
path:
  description: The venv.
  returned: always
  type: str
action:
  description: What was (in check mode, would be) done; one of C(none), C(create), C(mark), C(remake).
  returned: always
  type: str
reason:
  description: Why, for C(mark) and C(remake) (C(no pip), C(no bin/python)...); empty otherwise.
  returned: always
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
