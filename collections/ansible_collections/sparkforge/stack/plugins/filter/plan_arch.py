# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter plan_arch: the one way a role reads its CUDA arch list (module_utils/plan/arch_plan.py decides it)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: plan_arch
short_description: a role's CUDA arch list, from the plan or by the plan's rules
description:
  - The plan's C(sparkforge_plan.arch) (C(list) and C(reason)) when the plan is for the torch release the role
    builds against (any plan when O(torch) is empty).
  - Otherwise the plan's own rules answer for this host (module_utils/plan/arch_plan.py, C(for_role)). For a
    release given in O(torch), the version data's validation or default for the platform class (as preflight
    plans it); with no release, the user's variable when set, else this host's GPUs in TORCH_CUDA_ARCH_LIST form
    (C(sm_121) -> C(12.1)).
  - A name that is not an architecture, or a list the release cannot build, fails the task naming the variable.
positional: gpus, override
options:
  _input:
    description: C(sparkforge_plan) (an empty mapping when preflight did not run).
    type: dict
    required: true
  gpus:
    description: The host's GPUs, as gpu_facts' C(sm_archs) (C(sm_121)) or C(compute_capabilities) (C(12.1)).
    type: list
    elements: str
    default: []
  override:
    description: The user's arch list, C(sparkforge_cuda_arch_list) (empty for none).
    type: str
    default: ''
  torch:
    description: The torch release the role builds against; empty when any plan's list is the role's.
    type: str
    default: ''
  torch_data:
    description: The version data (C(releases), C(arch_min_version), C(arch_defaults), C(traps), C(fixes)), needed
      when O(torch) is given and the plan is not for it.
    type: dict
  platform_class:
    description: This host's platform class (gpu_facts' C(platform_class)), for the release's default list.
    type: str
"""

EXAMPLES = r"""
- name: Take the arch list (the plan's, or the plan's rules for this torch on this host)
  ansible.builtin.set_fact:
    my_arch_list: >-
      {{ (sparkforge_plan | default({}, true)
          | sparkforge.stack.plan_arch(ansible_facts.sparkforge.sm_archs, sparkforge_cuda_arch_list)).list }}
"""

RETURN = r"""
_value:
  description: C(list) (TORCH_CUDA_ARCH_LIST form, C(9.0;12.1)) and C(reason) (where it came from).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkforge.stack.plugins.module_utils.build.torch_build import ArchListError
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda.arch import ArchError
from ansible_collections.sparkforge.stack.plugins.module_utils.plan.arch_plan import for_role


def plan_arch(plan, gpus=None, override="", torch="", torch_data=None, platform_class=None):
    try:
        return for_role(plan, gpus, override, torch or "", torch_data, platform_class)
    except (ArchError, ArchListError) as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {"plan_arch": plan_arch}
