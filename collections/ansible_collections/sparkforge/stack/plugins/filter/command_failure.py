# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter command_failure: a failed command result as one message carrying the tool's last lines."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: command_failure
short_description: a failed command's result as one message with the tool's last output lines
description:
  - Returns one line, the start O(what), then C(exit <rc>) and the last lines of stderr (stdout when
    stderr is empty) of a registered command result; a result whose C(msg) says more than
    C(non-zero return code) keeps its C(msg).
  - The roles fail with it, and the fleet summary records it, so pip's, apt's, git's, cmake's or nvcc's
    reason is in the failure message and not only in the task output above it.
positional: what
options:
  _input:
    description: A registered command (or module) result.
    type: dict
    required: true
  what:
    description: What was being done (the start of the message).
    type: str
    default: ''
"""

EXAMPLES = r"""
- name: Fail with pip's reason
  ansible.builtin.fail:
    msg: "{{ pip_result | sparkforge.stack.command_failure('pip install torch') }}"
  when: pip_result.rc != 0
"""

RETURN = r"""
_value:
  description: The message.
  type: str
"""

from ansible_collections.sparkforge.stack.plugins.module_utils._common.failures import command_failure


class FilterModule(object):
    def filters(self):
        return {"command_failure": command_failure}
