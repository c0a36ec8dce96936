#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Gather NVIDIA GPU, CPU, memory and disk facts for sparkforge
version_added: "0.1.0"
description:
  - Runs C(nvidia-smi --query-gpu=... --format=csv,nounits) and reads C(/proc/cpuinfo) and C(/proc/meminfo).
  - Returns C(ansible_facts.sparkforge) with every GPU (index, name, compute capability such as C(12.1),
    SM name such as C(sm_121), driver version, memory in MiB or C(null) when the driver reports none,
    as on GB10's unified memory, UUID, PCI bus id), the CPU (architecture, SVE2, cores, Arm core types),
    RAM, free disk at the given paths and a platform class.
  - "C(driver_cuda) is the driver's CUDA release as the banner of a plain C(nvidia-smi) prints it
    (C(CUDA Version: 13.0)); the PTX audit holds PTX-only libraries to the PTX ISA it loads (C(null) when unread)."
  - The platform class of each GPU is the C(class) of the first row of O(platforms) (the manifest's
    C(sparkforge_gpu_platforms)) whose C(match) finds its product name (for example GB10 -> C(dgx_spark),
    GH200 -> C(gh200), H100/H200 -> C(hopper)); a GPU no row matches is C(generic). A host whose GPUs fall
    in several classes is C(mixed), a host without GPUs C(none).
  - Reads only; never changes the host.
author:
  - sparkforge developers (@sparkforge)
options:
  nvidia_smi:
    description:
      - Path or name of the C(nvidia-smi) binary. A bare name is looked up in C(PATH) and in C(/usr/bin).
    type: str
    default: nvidia-smi
  required:
    description:
      - When true, a missing C(nvidia-smi) or one that fails is an error.
      - When false, the module returns facts with C(gpus=[]) and the reason in C(gpu_error).
    type: bool
    default: true
  disk_paths:
    description:
      - Paths whose free space to report (for example the build directory). A path that does not exist
        yet is measured at its nearest existing parent.
    type: list
    elements: path
    default: []
  timeout:
    description: Seconds to wait for C(nvidia-smi) (a hung driver must not hang the play).
    type: int
    default: 30
  platforms:
    description:
      - The GPU table, the manifest's C(sparkforge_gpu_platforms) (roles/manifest/defaults/main/platforms.yml),
        the one place that maps a GPU to its class - each row a C(match) regular expression on the product
        name (case-insensitive; the first matching row wins) and a C(class).
      - A row without a class name or with a C(match) that is no regular expression fails the task, whatever
        O(required) says.
      - Not given, the controller-side action plugin reads the table from the manifest's file in the installed
        collection, so the module also runs ad hoc (C(ansible HOST -m sparkforge.stack.gpu_facts)).
    type: dict
attributes:
  check_mode:
    support: full
    description: Reads only, so check mode runs it fully.
  diff_mode:
    support: none
    description: Nothing is changed, so there is no diff.
  facts:
    support: full
    description: Returns C(ansible_facts.sparkforge).
notes:
  - Several GPUs of different compute capability are reported one by one; C(compute_capabilities) lists
    the distinct values, lowest first.
"""

EXAMPLES = r"""
- name: Gather GPU facts, failing when there is no NVIDIA driver
  sparkforge.stack.gpu_facts:
    platforms: "{{ sparkforge_gpu_platforms }}"

- name: Gather facts on a host that may have no GPU, and measure the build disk
  sparkforge.stack.gpu_facts:
    required: false
    platforms: "{{ sparkforge_gpu_platforms }}"
    disk_paths:
      - /opt/sparkforge/build

- name: Show the platform class
  ansible.builtin.debug:
    msg: "{{ ansible_facts.sparkforge.platform_class }} ({{ ansible_facts.sparkforge.sm_archs | join(',') }})"
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to ansible_facts.
  returned: always
  type: dict
  contains:
    sparkforge:
      description: The platform facts.
      type: dict
      returned: always
      sample:
        gpus:
          - index: 0
            name: NVIDIA GB10
            compute_capability: "12.1"
            sm: sm_121
            driver_version: "580.95.05"
            memory_mib: null
            uuid: GPU-5c0a3b5e-0c3f-4a55-9c1e-0f2b8d7e6a11
            pci_bus_id: "0000000F:01:00.0"
            platform_class: dgx_spark
        gpu_count: 1
        compute_capabilities: ["12.1"]
        sm_archs: ["sm_121"]
        platform_class: dgx_spark
        platform_classes: ["dgx_spark"]
        driver_version: "580.95.05"
        driver_cuda: "13.0"
        unified_memory: true
        nvidia_smi: /usr/bin/nvidia-smi
        gpu_error: null
        cpu:
          arch: aarch64
          model: 10x Cortex-A725 + 10x Cortex-X925
          cores: 20
          sve: true
          sve2: true
          arm_parts: {Cortex-A725: 10, Cortex-X925: 10}
        memory: {total_mib: 122502, available_mib: 118000}
        disk:
          /opt/sparkforge/build: {measured_at: /opt, free_mib: 801234, total_mib: 953869}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkforge.stack.plugins.module_utils.host.host_facts import sparkforge_facts


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nvidia_smi=dict(type="str", default="nvidia-smi"),
            required=dict(type="bool", default=True),
            disk_paths=dict(type="list", elements="path", default=[]),
            timeout=dict(type="int", default=30),
            platforms=dict(type="dict"),
        ),
        supports_check_mode=True,
    )
    if module.params["timeout"] < 1:
        module.fail_json(msg="timeout must be at least 1 second")
    if module.params["platforms"] is None:
        # Only reachable without the action plugin (which always passes the manifest's table).
        module.fail_json(msg="platforms is missing: run the module through its action plugin "
                             "(sparkforge.stack.gpu_facts) or pass the manifest's sparkforge_gpu_platforms")

    params = module.params
    facts = sparkforge_facts(module, params["nvidia_smi"], params["disk_paths"], params["timeout"],
                             params["required"], params["platforms"])
    module.exit_json(changed=False, ansible_facts={"sparkforge": facts})


if __name__ == "__main__":
    main()
