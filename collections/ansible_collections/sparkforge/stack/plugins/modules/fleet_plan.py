#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fleet_plan
short_description: Group a fleet's hosts into platform classes and pick the builder of each
version_added: "0.1.0"
description:
  - Takes each host's platform facts and preflight plan and groups the hosts into platform classes that need
    byte-identical wheels (CPU arch, GPU compute capability set, OS release, Python major.minor, CUDA major,
    torch version, TORCH_CUDA_ARCH_LIST, Triton version and LLVM commit).
  - Picks one builder per class, a host of the C(builders) group in the class that can build, else the first
    host of the class (in the given order) that meets the source-build thresholds (the C(can_build) verdict of
    M(sparkforge.stack.stack_plan)).
  - A class without a possible builder is reported in C(errors) with the reason; the module itself does not
    fail, so the playbook can fail exactly the hosts of that class.
  - Reads only its arguments and changes nothing; run it once, on the controller.
author:
  - sparkforge developers (@sparkforge)
options:
  hosts:
    description:
      - Host name to a dict with C(arch) (CPU arch), C(capabilities) (list of compute capabilities such as
        C(12.1)), C(distribution), C(distribution_version), C(python_version), C(cuda_major), C(plan) (the
        C(sparkforge_plan) fact of preflight), C(platform_class) (of M(sparkforge.stack.gpu_facts)),
        C(can_build) (bool) and C(build_problems) (list of dicts with C(check) and C(message)).
    type: dict
    required: true
  order:
    description: The host names in inventory order; decides which host is "the first host of the class".
    type: list
    elements: str
    required: true
  builders:
    description: The hosts of the C(builders) group (any order); those in a class build for it first.
    type: list
    elements: str
    default: []
  source_build:
    description:
      - Whether the fleet builds wheels at all (torch source C(source)). When false no builder is picked and no
        class can fail for the lack of one.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: Reads only, so check mode runs it fully.
  diff_mode:
    support: none
    description: Nothing is changed, so there is no diff.
"""

EXAMPLES = r"""
- name: Plan the fleet's classes and builders
  sparkforge.stack.fleet_plan:
    hosts: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'fleet_input'))) }}"
    order: "{{ ansible_play_hosts_all }}"
    builders: "{{ groups['builders'] | default([]) }}"
    source_build: "{{ sparkforge_torch_source == 'source' }}"
  run_once: true
  delegate_to: localhost
  register: fleet
"""

RETURN = r"""
classes:
  description: Class id to the class, with its key, hosts, builder and why, and the error when it has no builder.
  returned: always
  type: dict
  sample:
    dgx_spark-aarch64-sm121-py312-1a2b3c4d:
      id: dgx_spark-aarch64-sm121-py312-1a2b3c4d
      platform_class: dgx_spark
      key: {arch: aarch64, capabilities: ["12.1"], os: Ubuntu 24.04, python: "3.12", cuda_major: "13",
            torch_version: "2.11.0", cuda_arch_list: "12.0", triton_version: "3.6.0", llvm_commit: f6ded0be}
      hosts: [spark-01, spark-02]
      builder: spark-01
      builder_why: first host of the class that can build; no host of the builders group is in this class
      error: null
hosts:
  description: Host name to its class id, its class's lineage (the platform part of the class, which a torch
    upgrade keeps; generations follow it), its class's builder, whether it is the builder, and its class's error.
  returned: always
  type: dict
  sample:
    spark-02: {class: dgx_spark-aarch64-sm121-py312-1a2b3c4d, lineage: dgx_spark-aarch64-sm121-py312-5e6f7a8b,
               builder_host: spark-01, builder: false, error: null}
errors:
  description: One message per class that has no possible builder (what is missing and what to do).
  returned: always
  type: list
  elements: str
lines:
  description: The classes, their hosts and builders as lines a person reads.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkforge.stack.plugins.module_utils.fleet.fleet import FleetError, plan_fleet


def main():
    module = AnsibleModule(
        argument_spec=dict(
            hosts=dict(type="dict", required=True),
            order=dict(type="list", elements="str", required=True),
            builders=dict(type="list", elements="str", default=[]),
            source_build=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        result = plan_fleet(params["hosts"], params["order"], params["builders"], params["source_build"])
    except FleetError as exc:
        module.fail_json(msg="cannot plan the fleet: %s (pass each host's facts and sparkforge_plan)" % exc)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
