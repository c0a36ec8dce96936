# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter torch_result: why the venv's torch is not the planned one ('' when it is)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: torch_result
short_description: why the torch a venv imports is not the planned one
description:
  - Compares C(torch.__version__) (with its local tag, e.g. C(+cu130)) and C(torch.version.cuda) with what the
    plan pins for the source (the index directory's CUDA build, a source build's bare release, a wheelhouse's
    release and CUDA major) and returns one message naming both, or an empty string when they agree.
  - A CPU build (C(+cpu), or C(torch.version.cuda) empty) on a host with a GPU is refused.
positional: venv, planned_version, source, index_url, cuda_major, gpu
options:
  _input:
    description: C([torch.__version__, torch.version.cuda]) as read from the venv.
    type: list
    elements: str
    required: true
  venv:
    description: The venv (named in the message).
    type: str
    required: true
  planned_version:
    description: The planned release.
    type: str
    required: true
  source:
    description: The torch source (index, wheelhouse, source, existing).
    type: str
    required: true
  index_url:
    description: The index the plan installs from (source index).
    type: str
    default: ''
  cuda_major:
    description: The CUDA major the stack targets.
    type: int
    default: 13
  gpu:
    description: Whether the host has a GPU.
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Check the venv's torch is the planned one
  ansible.builtin.assert:
    that: _problem | length == 0
    fail_msg: "{{ _problem }}"
  vars:
    _problem: "{{ [version, cuda] | sparkforge.stack.torch_result(venv, '2.9.1', 'index', index_url) }}"
"""

RETURN = r"""
_value:
  description: The message, empty when the torch is the planned one.
  type: str
"""

from ansible_collections.sparkforge.stack.plugins.module_utils.build.torch_result import planned_build, result_message


def torch_result(found, venv, planned_version, source, index_url="", cuda_major=13, gpu=True):
    found = list(found or []) + ["", ""]
    plan = planned_build(str(planned_version), source, index_url or "", cuda_major)
    return result_message(venv, plan, str(found[0] or "").strip(), found[1], source, bool(gpu))


class FilterModule(object):
    def filters(self):
        return {"torch_result": torch_result}
