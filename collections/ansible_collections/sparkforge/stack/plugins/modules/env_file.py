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
  - The first line is always C(# managed by sparkforge ...), the line that makes a file sparkforge's own. An
    existing file at O(path) without it (the user's dotfile, a symlink) is never replaced, chowned or chmodded.
    The module fails before any change, in check mode too, naming it (its mode, owner and size, never its text)
    and the choices - adopt it (O(adopt)) or another path.
  - Each rewrite keeps the version it replaces as C(<path>.sparkforge-prev) (the file itself, its text, mode and
    owner as they were); an adopted file's previous version is kept the same way. The diff never shows the text
    of a file that was not sparkforge's.
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
  adopt:
    description: Rewrite a file at O(path) that sparkforge did not make, keeping it as C(<path>.sparkforge-prev).
    type: bool
    default: false
  variable:
    description: The variable that set O(path), named in a refusal.
    type: str
    default: path
  adopt_variable:
    description: The variable that sets O(adopt), named in a refusal; empty - the refusal offers no adoption.
    type: str
    default: ""
attributes:
  check_mode:
    support: full
    description: Reports what would change (with the diff) and writes nothing; refuses what the real run refuses.
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
kept:
  description: Where the version the rewrite replaced was (in check mode, would be) kept; empty when none.
  returned: always
  type: str
found:
  description: What was at O(path) before (C(nothing at ...), C(sparkforge's file ...), or the user's file).
  returned: always
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkforge.stack.plugins.module_utils.host.env_file import (
    EnvFileError,
    plan_write,
    render,
    write,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            variables=dict(type="dict", required=True),
            comment=dict(type="str", default=""),
            mode=dict(type="raw", default="0644"),
            adopt=dict(type="bool", default=False),
            variable=dict(type="str", default="path"),
            adopt_variable=dict(type="str", default=""),
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
        plan = plan_write(path, text, module.params["adopt"], module.params["variable"],
                          module.params["adopt_variable"])
    except EnvFileError as exc:
        module.fail_json(msg=str(exc) if str(exc).startswith(module.params["variable"] + "=")
                         else "%s: nothing written" % exc, path=path)
    changed = plan["changed"]
    result = dict(path=path, created_dir=not os.path.isdir(os.path.dirname(path)), changed=changed,
                  kept=plan["kept"], found=plan["found"],
                  diff=dict(before=plan["before"], after=text, before_header=path, after_header=path))
    if changed and not module.check_mode:
        write(path, text, plan)
    if not module.check_mode or not changed:
        # The mode is part of the state: set it even when the text was already right (the file is ours here).
        result["changed"] = module.set_mode_if_different(path, module.params["mode"], result["changed"]) \
            if os.path.exists(path) else result["changed"]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
