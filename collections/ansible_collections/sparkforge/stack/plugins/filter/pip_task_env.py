# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter pip_task_env: the environment of a task that runs the venv's python or pip (_common/run_env.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pip_task_env
short_description: the environment of a task that runs the venv's python or pip, the host's left out
description:
  - Returns the plan's non-pip variables of the input (proxies, build settings) with C(PIP_CONFIG_FILE) set to
    C(/dev/null) (pip then loads no configuration file) unless the plan names a file of its own.
  - The host's C(PYTHONPATH), C(PYTHONHOME), C(PYTHONUSERBASE) and the other C(PYTHON*) variables that change what
    python imports or how it runs are set to the empty string (CPython reads that as unset; a task can add variables,
    not remove them) and C(PYTHONNOUSERSITE=1) keeps the user's site-packages out.
  - The plan's other C(PIP_*) entries are left out; R(pip_argv,ansible_collections.sparkforge.stack.pip_argv_filter)
    gives them as command-line options.
options:
  _input:
    description: The plan's environment for pip (may be empty).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Install, the host's pip configuration ignored
  ansible.builtin.command:
    argv: "{{ python | sparkforge.stack.pip_argv('install', ['einops'], triton_pip_env) }}"
  environment: "{{ triton_pip_env | sparkforge.stack.pip_task_env }}"
"""

RETURN = r"""
_value:
  description: The environment.
  type: dict
"""

from ansible_collections.sparkforge.stack.plugins.module_utils.packages.pip_env import task_environment


def pip_task_env(plan_env):
    return task_environment(plan_env or {})


class FilterModule(object):
    def filters(self):
        return {"pip_task_env": pip_task_env}
