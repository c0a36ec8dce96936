#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fleet_host_generation
short_description: Read or mark the generation a host runs, on the host itself
version_added: "0.3.0"
description:
  - Each host keeps C(<prefix>/generation.json), the lineage, class and generation its stack venv holds, the
    state (C(installing), C(installed), C(verified), C(rolled_back), C(failed)), how it got there, the generation
    before it (the rollback target) and a short history. M(sparkforge.stack.fleet_wheel_install) writes it around
    an install; this module reads it, with the venv's wheel record, and marks the result of the checks after.
  - O(state=read) changes nothing and returns the record and the sha256 of every wheel the venv holds.
  - O(state=verified), O(state=rolled_back) or O(state=failed) mark the record's current generation; a mark that is
    already there changes nothing. Marking a generation other than the one the record holds is an error.
  - A file at O(record) that is not sparkforge's record (no C(managed_by) marker of sparkforge's nor the exact keys
    an earlier version wrote; a symlink, a directory) is never written - a mark fails naming
    C(sparkforge_host_generation_file) and what to do, a read returns no record and says so in RV(foreign).
author:
  - sparkforge developers (@sparkforge)
options:
  record:
    description: The host's record, C(<sparkforge_prefix>/generation.json).
    type: path
    required: true
  venv:
    description: The stack venv (its C(sparkforge-wheels.json) says which wheels it holds).
    type: path
  state:
    description: Read, or the mark to set.
    type: str
    choices: [read, verified, rolled_back, failed]
    default: read
  generation:
    description: With a mark, the generation the host must hold (a guard against marking another).
    type: int
  how:
    description: With a mark, replaces the record's C(how) (for example the reason of a rollback).
    type: str
attributes:
  check_mode:
    description: Says whether the mark would change the record; writes nothing.
    support: full
  diff_mode:
    description: The record's state before and after.
    support: full
"""

EXAMPLES = r"""
- name: The checks passed on the new generation
  sparkforge.stack.fleet_host_generation:
    record: /opt/sparkforge/generation.json
    state: verified
    generation: 4

- name: What this host runs
  sparkforge.stack.fleet_host_generation:
    record: /opt/sparkforge/generation.json
    venv: /opt/sparkforge/venv
  register: host_generation
"""

RETURN = r"""
record:
  description: The host's record after this run (empty when it has none).
  returned: always
  type: dict
view:
  description: The record's generation, state, C(partial) (an interrupted install), how, previous generation and class.
  returned: always
  type: dict
installed:
  description: Wheel name to sha256 of what the venv holds (its C(sparkforge-wheels.json)), when O(venv) is given.
  returned: always
  type: dict
foreign:
  description: With O(state=read), why the file at O(record) is not sparkforge's record (null when it is, or absent).
  returned: state read
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import fleet_wheels as fw
from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import generations as gen
from ansible_collections.sparkforge.stack.plugins.module_utils._common.clock import utc_now
from ansible_collections.sparkforge.stack.plugins.module_utils._common import run_env


def main():
    module = AnsibleModule(
        argument_spec=dict(
            record=dict(type="path", required=True),
            venv=dict(type="path"),
            state=dict(type="str", choices=["read", "verified", "rolled_back", "failed"], default="read"),
            generation=dict(type="int"),
            how=dict(type="str"),
        ),
        required_if=[["state", "verified", ["generation"]], ["state", "rolled_back", ["generation"]],
                     ["state", "failed", ["generation"]]],
        supports_check_mode=True,
    )
    # The venv's python runs in the run's own environment: no PYTHON*/PIP_* of the host (_common/run_env.py).
    run_env.scrub()
    p = module.params
    # A file at the record's path that is not sparkforge's record: never marked (written over); a read says so.
    foreign = gen.host_refusal(p["record"])
    if foreign and p["state"] != "read":
        module.fail_json(msg=foreign)
    record = {} if foreign else gen.read_host(p["record"])
    installed = fw.read_record(os.path.join(p["venv"], fw.RECORD_NAME)) if p["venv"] else {}
    if p["state"] == "read":
        module.exit_json(changed=False, record=record, view=gen.host_view(record), installed=installed,
                         foreign=foreign)
    if not record:
        module.fail_json(msg="%s holds no generation record: nothing to mark %s" % (p["record"], p["state"]))
    if record.get("generation") != p["generation"]:
        module.fail_json(msg="%s holds generation %s, not %s: not marked %s" % (
            p["record"], record.get("generation"), p["generation"], p["state"]), record=record)
    how = p["how"] if p["how"] is not None else record.get("how")
    if record.get("state") == p["state"] and record.get("how") == how:
        module.exit_json(changed=False, record=record, view=gen.host_view(record), installed=installed)
    now = utc_now()
    after = gen.host_transition(record, {"lineage": record.get("lineage"), "class": record.get("class"),
                                         "number": p["generation"]}, p["state"], how, now)
    diff = dict(before="%s %s\n" % (record.get("generation"), record.get("state")),
                after="%s %s\n" % (p["generation"], p["state"]))
    if not module.check_mode:
        gen.write_host(p["record"], after)
    module.exit_json(changed=True, record=after, view=gen.host_view(after), installed=installed, diff=diff)


if __name__ == "__main__":
    main()
