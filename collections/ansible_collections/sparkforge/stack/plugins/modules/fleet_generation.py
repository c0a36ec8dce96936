#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fleet_generation
short_description: Numbered generations of a class lineage's wheels in the controller's wheelhouse
version_added: "0.3.0"
description:
  - Runs on the controller. Keeps C(<wheelhouse>/generations/<lineage>.json), a lineage's generations oldest first.
    A lineage is what stays of a platform class when its build inputs change (CPU, GPUs, OS, Python, CUDA major;
    M(sparkforge.stack.fleet_plan) gives it), so a torch upgrade is the next generation of the same lineage.
  - A generation is the wheel set a builder published (name, file, wheelhouse directory, sha256, cache key and
    build record of each wheel), the class whose directory holds them, when and from which inputs it was built,
    and the verify result on its builder.
  - O(state=published) records a builder's wheel set. It is the newest generation again when its set of
    (name, sha256) equals the newest one's; otherwise it gets the next number (numbers are never reused). Every
    wheel is checked in the wheelhouse first (present, same sha256), so a generation is never recorded with missing
    or corrupt files. Then generations beyond O(keep) are pruned, with the wheel directories only they used.
  - O(state=verified) records the verify result of a generation on its builder.
  - O(state=read) returns one generation (O(generation), else the newest) and, with O(check_wheels), refuses it
    when a wheel is missing or has other bytes, or when it was pruned, before anything uses it.
author:
  - sparkforge developers (@sparkforge)
options:
  wheelhouse:
    description: The controller's wheelhouse (C(sparkforge_fleet_wheelhouse)).
    type: path
    required: true
  lineage:
    description: The class lineage (C(sparkforge_fleet_lineage)).
    type: str
    required: true
  class_id:
    description: With O(state=published), the class whose wheelhouse directory holds the wheels (C(sparkforge_fleet_class)).
    type: str
  state:
    description: What to do (see the description).
    type: str
    choices: [published, verified, read]
    default: read
  wheels:
    description: With O(state=published), the class's wheels as M(sparkforge.stack.fleet_wheels) describes them.
    type: list
    elements: dict
  builder:
    description: With O(state=published), the builder's inventory name; with O(state=verified), the host verified on.
    type: str
  inputs:
    description: With O(state=published), what the generation was built from (torch version, arch list, class inputs).
    type: dict
    default: {}
  keep:
    description: How many generations the wheelhouse keeps per class (the newest); older ones are pruned.
    type: int
    default: 5
  generation:
    description: The generation to read or mark (O(state=read) without it reads the newest).
    type: int
  verify_state:
    description: With O(state=verified), the result.
    type: str
    choices: [passed, failed]
  detail:
    description: With O(state=verified), the failures or a summary.
    type: str
    default: ""
  check_wheels:
    description: With O(state=read), check every wheel of the generation in the wheelhouse (present, same sha256).
    type: bool
    default: false
attributes:
  check_mode:
    description: O(state=published) says which number the set would get and what would be pruned; nothing is written.
    support: full
  diff_mode:
    description: Not supported.
    support: none
"""

EXAMPLES = r"""
- name: Record the class's wheels as a generation
  sparkforge.stack.fleet_generation:
    wheelhouse: "{{ sparkforge_fleet_wheelhouse }}"
    lineage: "{{ sparkforge_fleet_lineage }}"
    class_id: "{{ sparkforge_fleet_class }}"
    state: published
    wheels: "{{ fleet_build_wheels.wheels }}"
    builder: "{{ inventory_hostname }}"
    inputs: {torch: "2.15.0", arch_list: "12.1"}
    keep: 5
  delegate_to: localhost

- name: The generation to roll back to, refused when pruned or corrupt
  sparkforge.stack.fleet_generation:
    wheelhouse: "{{ sparkforge_fleet_wheelhouse }}"
    lineage: dgx_spark-aarch64-sm121-py312-5e6f7a8b
    generation: 3
    check_wheels: true
  delegate_to: localhost
"""

RETURN = r"""
generation:
  description: The generation recorded (C(published)), marked (C(verified)) or read (C(read)).
  returned: success
  type: int
new:
  description: Whether C(published) made a new generation.
  returned: when O(state=published)
  type: bool
previous:
  description: The generation before it (C(null) for the first).
  returned: when O(state=published)
  type: int
pruned:
  description: The generations pruned in this run.
  returned: when O(state=published)
  type: list
  elements: int
removed_dirs:
  description: The wheelhouse directories removed with them.
  returned: when O(state=published)
  type: list
  elements: str
generations:
  description: The generations the lineage has now, oldest first.
  returned: success
  type: list
  elements: int
record:
  description: The generation itself (number, class, created, builder, inputs, wheels, verify).
  returned: when O(state=read)
  type: dict
"""


from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import generations as gen
from ansible_collections.sparkforge.stack.plugins.module_utils._common.clock import utc_now

ARGUMENT_SPEC = dict(
    wheelhouse=dict(type="path", required=True),
    lineage=dict(type="str", required=True),
    class_id=dict(type="str"),
    state=dict(type="str", choices=["published", "verified", "read"], default="read"),
    wheels=dict(type="list", elements="dict"),
    builder=dict(type="str"),
    inputs=dict(type="dict", default={}),
    keep=dict(type="int", default=5),
    generation=dict(type="int"),
    verify_state=dict(type="str", choices=["passed", "failed"]),
    detail=dict(type="str", default=""),
    check_wheels=dict(type="bool", default=False),
)
REQUIRED_IF = [["state", "published", ["wheels", "builder", "class_id"]],
               ["state", "verified", ["generation", "verify_state", "builder"]]]


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, required_if=REQUIRED_IF, supports_check_mode=True)
    p = module.params
    wheelhouse, lineage = p["wheelhouse"], p["lineage"]
    now = utc_now()
    try:
        if p["state"] == "published":
            result = gen.publish(wheelhouse, lineage, p["class_id"], p["wheels"], p["builder"], p["inputs"], p["keep"],
                                 now, check_mode=module.check_mode)
            module.exit_json(changed=result["new"] or bool(result["pruned"]), **result)
        data = gen.load(wheelhouse, lineage)
        numbers = [g["number"] for g in data["generations"]]
        if p["state"] == "verified":
            if module.check_mode:
                gen.find(data, p["generation"])
                module.exit_json(changed=False, generation=p["generation"], generations=numbers)
            changed = gen.record_verify(wheelhouse, lineage, p["generation"], p["verify_state"], p["builder"],
                                        p["detail"], now)
            module.exit_json(changed=changed, generation=p["generation"], generations=numbers)
        if not data["generations"]:
            module.fail_json(msg="%s has no generations in %s yet" % (lineage, gen.lineage_file(wheelhouse, lineage)))
        number = p["generation"] if p["generation"] is not None else numbers[-1]
        record = gen.find(data, number)
        if p["check_wheels"]:
            problems = gen.check_wheels(gen.generation_dir(wheelhouse, record), record["wheels"],
                                        write_cache=not module.check_mode)
            if problems:
                module.fail_json(msg="generation %d of %s cannot be installed, its wheels are not as built: %s"
                                 % (number, lineage, "; ".join("%s %s" % item for item in problems)),
                                 generation=number)
        module.exit_json(changed=False, generation=number, record=record, generations=numbers)
    except gen.GenerationError as exc:
        module.fail_json(msg=str(exc))


if __name__ == "__main__":
    main()
