# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter arch_without_plan: the plan's arch block for a role run without preflight's plan."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: arch_without_plan
short_description: each consumer's CUDA arch list when no plan was made
description:
  - The same as the plan's C(sparkforge_plan.arch) (C(list) and C(reason)), for a role run where preflight did not
    run (cluster.yml's runtime_env, a role
    on its own). The user's variable when set (checked by the one arch parser, module_utils/cuda/arch.py),
    else this host's GPUs in TORCH_CUDA_ARCH_LIST form (C(sm_121) -> C(12.1)).
  - A name that is not an architecture fails the task, naming the variable.
positional: override
options:
  _input:
    description: The host's GPUs, as gpu_facts' C(sm_archs) (C(sm_121)) or C(compute_capabilities) (C(12.1)).
    type: list
    elements: str
    required: true
  override:
    description: The user's arch list, C(sparkforge_cuda_arch_list) (empty for none).
    type: str
    default: ''
"""

EXAMPLES = r"""
- name: Take the runtime's arch list
  ansible.builtin.set_fact:
    my_arch_list: >-
      {{ (sparkforge_plan.arch if (sparkforge_plan | default({})).arch is defined
          else ansible_facts.sparkforge.sm_archs | sparkforge.stack.arch_without_plan(sparkforge_cuda_arch_list)
         ).list }}
"""

RETURN = r"""
_value:
  description: C(list) (TORCH_CUDA_ARCH_LIST form, C(9.0;12.1)) and C(reason) (where it came from).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkforge.stack.plugins.module_utils.cuda.arch import ArchError
from ansible_collections.sparkforge.stack.plugins.module_utils.plan.arch_plan import without_plan


def arch_without_plan(gpus, override=""):
    try:
        return without_plan(gpus, override)
    except ArchError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {"arch_without_plan": arch_without_plan}
