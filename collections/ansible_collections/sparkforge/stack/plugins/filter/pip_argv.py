# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter pip_argv: a pip command line isolated from the host's pip configuration."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pip_argv
short_description: a pip argument list that reads no pip configuration of the host
description:
  - Returns C([python, -m, pip, subcommand, --isolated, <options>, <extra words>, <args>]), an argument list
    for M(ansible.builtin.command)'s C(argv) (no shell splitting, so a path with a space stays one argument).
  - C(--isolated) makes pip ignore the host's C(PIP_*) environment variables and user configuration; run the
    task with R(pip_task_env,ansible_collections.sparkforge.stack.pip_task_env_filter) as its environment so
    that no configuration file is read either.
  - The plan's own pip settings (C(PIP_INDEX_URL), C(PIP_CERT)... in O(plan_env)) become the matching
    command-line options; O(extra_args) are shell words (the roles' C(*_pip_extra_args)).
positional: subcommand, args, plan_env, extra_args, variable
options:
  _input:
    description: The Python whose pip runs (the venv's C(bin/python)).
    type: str
    required: true
  subcommand:
    description: pip's subcommand (C(install), C(wheel)...).
    type: str
    required: true
  args:
    description: The subcommand's arguments.
    type: list
    elements: str
    default: []
  plan_env:
    description: The plan's pip environment (C(PIP_*) entries become options; the others are ignored here).
    type: dict
    default: {}
  extra_args:
    description: More pip arguments, as shell words.
    type: str
    default: ''
  variable:
    description: The variable O(plan_env) came from (named in an error).
    type: str
    default: the pip environment
"""

EXAMPLES = r"""
- name: Install torch, the host's pip configuration ignored
  ansible.builtin.command:
    argv: "{{ (venv ~ '/bin/python') | sparkforge.stack.pip_argv('install', ['torch==2.9.1']) }}"
  environment: "{{ {} | sparkforge.stack.pip_task_env }}"
"""

RETURN = r"""
_value:
  description: The argument list.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkforge.stack.plugins.module_utils.packages.pip_env import PipEnvError, isolated_argv


def pip_argv(python, subcommand, args=None, plan_env=None, extra_args="", variable="the pip environment"):
    try:
        return isolated_argv(str(python), subcommand, [str(a) for a in (args or [])], plan_env or {},
                             extra_args or "", variable)
    except (PipEnvError, ValueError) as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {"pip_argv": pip_argv}
