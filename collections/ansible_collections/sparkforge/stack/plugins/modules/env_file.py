#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: env_file
short_description: Write a shell file of environment variables (export lines) in one call
version_added: "0.4.0"
description:
  - Writes O(path) as comment lines followed by one C(export NAME=value) line per variable, values
    shell-quoted, creating its directory when missing. The file is replaced atomically and only when its
    text differs.
  - What C(ansible.builtin.file) plus C(ansible.builtin.template) do for such a file, in one remote call
    instead of three on a rerun (directory, stat, attributes); a fleet's rolling batches pay that per host.
author:
  - sparkforge developers (@sparkforge)
options:
  path:
    description: The file to write (absolute).
    type: path
    required: true
  variables:
    description: Variable names to values, written in this order. Names must be shell variable names.
    type: dict
    required: true
  comment:
    description: Lines written first, each as a C(#) comment (say who writes the file and why).
    type: str
    default: ""
  mode:
    description: The file's mode; its directory, when created, gets C(0755).
    type: raw
    default: "0644"
attributes:
  check_mode:
    support: full
    description: Reports what would change (with the diff) and writes nothing.
  diff_mode:
    support: full
    description: The file's text before and after.
"""

EXAMPLES = r"""
- name: Write Triton's runtime variables
  sparkforge.stack.env_file:
    path: /opt/sparkforge/env.d/triton.sh
    comment: "Written by sparkforge: CUDA 13's ptxas knows sm_121a."
    variables:
      TRITON_PTXAS_PATH: /usr/local/cuda/bin/ptxas
"""

RETURN = r"""
path:
  description: The file.
  returned: always
  type: str
created_dir:
  description: Whether the file's directory was (or, in check mode, would be) created.
  returned: always
  type: bool
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import atomic_write_text
from ansible_collections.sparkforge.stack.plugins.module_utils.host.env_file import EnvFileError, render


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            variables=dict(type="dict", required=True),
            comment=dict(type="str", default=""),
            mode=dict(type="raw", default="0644"),
        ),
        supports_check_mode=True,
    )
    path = module.params["path"]
    if not os.path.isabs(path):
        module.fail_json(msg="path must be absolute, got %r" % path)
    if os.path.isdir(path):
        module.fail_json(msg="%s is a directory" % path)
    try:
        text = render(module.params["variables"], module.params["comment"])
    except EnvFileError as exc:
        module.fail_json(msg="%s: nothing written" % exc, path=path)
    try:
        with open(path) as handle:
            before = handle.read()
    except (IOError, OSError):
        before = None
    directory = os.path.dirname(path)
    created_dir = not os.path.isdir(directory)
    changed = before != text
    result = dict(path=path, created_dir=created_dir, changed=changed,
                  diff=dict(before=before or "", after=text, before_header=path, after_header=path))
    if changed and not module.check_mode:
        # The directory too, when missing; readers never see half a file.  Written 0600: O(mode) may be
        # symbolic, so set_mode_if_different below gives the file its mode, never wider than asked meanwhile.
        atomic_write_text(path, text, 0o600)
    if not module.check_mode or not changed:
        # The mode is part of the state: set it even when the text was already right.
        result["changed"] = module.set_mode_if_different(path, module.params["mode"], result["changed"]) \
            if os.path.exists(path) else result["changed"]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
