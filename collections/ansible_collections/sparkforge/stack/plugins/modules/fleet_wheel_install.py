#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fleet_wheel_install
short_description: Install a platform class's wheels into the stack venv, byte for byte
version_added: "0.2.0"
description:
  - Runs on every host of a building class, after the class's wheels were copied to O(wheel_dir).
  - Checks every copy against the sha256 its builder published and fails, naming the file, when one is missing
    or differs; nothing is installed then. With O(copies=report) it returns those files in RV(to_copy) instead,
    so a play copies only what a host lacks (a no-op rerun is this one call).
  - A copy whose size and mtime match the last check reuses the sha256 recorded then (C(.sparkforge-sha256.json)
    in O(wheel_dir)); O(rehash) reads every copy again.
  - Installs, with C(pip install --no-index --find-links --force-reinstall --no-deps), only the wheels whose
    bytes the venv does not hold yet. The record O(venv)/sparkforge-wheels.json says which it holds; it is
    written only after pip succeeded, so a host killed halfway installs again on the next run.
  - Before anything is installed (check mode too), each wheel the venv lacks gets the checks the local wheelhouse
    gets in preflight (C(module_utils/packages/wheel_check.py)) - its Python and platform tags against the venv's
    Python and this host's CPU, a manylinux tag's glibc against the host's, and its METADATA name, version and
    local tag against its file name - and the task fails naming each wheel and why.
  - Refuses, before any change, a file at O(host_record) that is not sparkforge's generation record.
  - Creates the venv when it does not exist.
author:
  - sparkforge developers (@sparkforge)
options:
  venv:
    description: The stack venv.
    type: path
    required: true
  wheel_dir:
    description: The directory the class's wheels were copied to.
    type: path
    required: true
  wheels:
    description: The class's wheel list as its builder published it (M(sparkforge.stack.fleet_wheels)'s C(wheels)); each needs C(name), C(file) and C(sha256).
    type: list
    elements: dict
    required: true
  pip_extra_args:
    description: Extra arguments for pip install (shell words).
    type: str
    default: ""
  python:
    description: The interpreter that creates the venv when it does not exist.
    type: str
    default: python3
  copies:
    description:
      - What a missing or different copy means. V(fail) fails naming it; V(report) installs nothing and returns
        the files to copy in RV(to_copy).
    type: str
    choices: [fail, report]
    default: fail
  rehash:
    description: Read every copy's bytes again, even those whose size and mtime match the last check.
    type: bool
    default: false
  host_record:
    description:
      - The host's generation record (C(<prefix>/generation.json)). When given, it is returned as RV(host_generation),
        and with O(generation) it is written around the install. State C(installing) before pip runs and
        C(installed) after, so a host killed halfway is found partial (RV(partial)) by the next run, which repairs it.
    type: path
  venv_state:
    description:
      - Distribution names whose installed versions to return in RV(venv_state), read after any install, with
        what C(import torch) gives when torch is among them and installed. The fleet install hands this to the
        C(triton), C(pytorch) and C(torch_domains) roles so that they do not each read the venv again.
    type: list
    elements: str
    default: []
  generation:
    description:
      - The generation these wheels are, as C(lineage), C(class) (whose wheelhouse directory holds them) and
        C(number), and C(reason) (C(upgrade) by default, or for example C(rollback)) which goes into the record's
        C(how) with the generation the host comes from. Needs O(host_record).
    type: dict
attributes:
  check_mode:
    support: full
    description: Checks the copies and reports which wheels would be installed; installs nothing.
  diff_mode:
    support: full
    description: The record before and after.
"""

EXAMPLES = r"""
- name: Install the class's wheels
  sparkforge.stack.fleet_wheel_install:
    venv: /opt/sparkforge/venv
    wheel_dir: /var/cache/sparkforge/wheels/fleet/dgx_spark-aarch64-sm121-py312-1a2b3c4d
    wheels: "{{ hostvars[sparkforge_fleet_builder_host].sparkforge_fleet_manifest }}"
"""

RETURN = r"""
to_copy:
  description: The wheel files missing from O(wheel_dir) or different from the builder's (empty when all are right).
  returned: success
  type: list
  elements: str
installed:
  description: Wheel name to sha256, what the venv holds now (with copies to make, what it held before this run).
  returned: success
  type: dict
wheel_sha256:
  description: Wheel file name to sha256 (collected by the Python API into HostResult.wheels).
  returned: success, except with O(copies=report) when RV(to_copy) is not empty
  type: dict
reinstalled:
  description: The wheel names installed in this run.
  returned: success
  type: list
  elements: str
host_generation:
  description: The host's generation record as it was before this run (empty when it has none).
  returned: when O(host_record) is given
  type: dict
partial:
  description: Whether the record says an install was interrupted (state C(installing)).
  returned: when O(host_record) is given
  type: bool
how:
  description: How the host gets to O(generation) in this run (written into the record's C(how)).
  returned: when O(generation) is given
  type: str
upgrading:
  description: Whether this run moves the host to O(generation) (it held another, or an install of it was interrupted or failed).
  returned: when O(generation) is given
  type: bool
venv_state:
  description:
    - With O(venv_state) - C(packages) (name to installed version, empty when absent), C(torch) (C(version) and
      C(archs) that C(import torch) gives, null when it is absent or does not import) and C(torch_error).
  returned: when O(venv_state) is given
  type: dict
  sample: {packages: {triton: 3.6.0, torch: 2.11.0}, torch: {version: 2.11.0+cu130, archs: [sm_90]}, torch_error: null}
rollback_to:
  description: The generation the host goes back to if moving to O(generation) fails (C(null) when it has none).
  returned: when O(generation) is given
  type: int
rollback_lineage:
  description: The lineage of RV(rollback_to) (the host's before this run).
  returned: when O(generation) is given
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkforge.stack.plugins.module_utils.fleet.fleet_install_job import FleetWheelInstallJob
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import AnsibleSystem, JobError


def main():
    module = AnsibleModule(
        argument_spec=dict(
            venv=dict(type="path", required=True),
            wheel_dir=dict(type="path", required=True),
            wheels=dict(type="list", elements="dict", required=True),
            pip_extra_args=dict(type="str", default=""),
            python=dict(type="str", default="python3"),
            copies=dict(type="str", choices=["fail", "report"], default="fail"),
            rehash=dict(type="bool", default=False),
            host_record=dict(type="path"),
            generation=dict(type="dict"),
            venv_state=dict(type="list", elements="str", default=[]),
        ),
        required_by={"generation": ["host_record"]},
        supports_check_mode=True,
    )
    job = FleetWheelInstallJob(module.params, AnsibleSystem(module), module.check_mode)
    try:
        result = job.run()
    except JobError as exc:
        module.fail_json(**exc.fail_args())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
