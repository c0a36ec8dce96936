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

import datetime
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkforge.stack.plugins.module_utils import fleet_wheels as fw
from ansible_collections.sparkforge.stack.plugins.module_utils import generations as gen
from ansible_collections.sparkforge.stack.plugins.module_utils.pip_env import CONFIG_OFF


GOOD = ("verified", "rolled_back")  # states a host passed the gate in


def rollback_target(record, target):
    """(generation, lineage) a failed move to ``target`` goes back to: the one the host ran before, which is
    the record's previous one when the record is already on ``target`` (its gate not passed) or an install
    was interrupted; (None, None) when there is none."""
    on_target = (record.get("lineage"), record.get("generation")) == (target["lineage"], target["number"])
    entry = record if not on_target and record.get("state") in GOOD + ("installed",) else record.get("previous")
    entry = entry or {}
    return entry.get("generation"), entry.get("lineage")


def how_to(record, target, reason):
    """The record's ``how`` for reaching ``target`` ({class, number}) from ``record``."""
    if not record:
        return "first install (generation %d)" % target["number"]
    if record.get("state") == "installing":
        return "repair: the install of generation %s was interrupted" % record.get("generation")
    if record.get("lineage") != target["lineage"]:
        return "%s from generation %s of %s" % (reason, record.get("generation"), record.get("lineage"))
    if record.get("generation") == target["number"]:
        return record.get("how") or reason
    return "%s from generation %s" % (reason, record.get("generation"))


def _exit(module, result):
    names = module.params["venv_state"]
    if names:
        result["venv_state"] = fw.read_venv_state(module.run_command,
                                                  os.path.join(module.params["venv"], "bin", "python"), names)
    module.exit_json(**result)


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
    p = module.params
    target = p["generation"]
    if target is not None:
        try:
            target = dict(target, number=int(str(target.get("number"))))
        except ValueError:
            target = dict(target, number=None)
        if not target.get("lineage") or not target.get("class") or target["number"] is None or target["number"] < 1:
            module.fail_json(msg="generation needs lineage, class and number (a whole number from 1), got %r"
                             % (p["generation"],))
    host_before = gen.read_host(p["host_record"]) if p["host_record"] else None
    extra = {}
    if host_before is not None:
        extra = dict(host_generation=host_before, partial=host_before.get("state") == "installing")
    if target is not None:
        extra["how"] = how_to(host_before, target, target.get("reason") or "upgrade")
        # Moving: another generation, or this one not yet through the gate.
        extra["upgrading"] = (host_before.get("generation"), host_before.get("lineage")) != (
            target["number"], target["lineage"]) or host_before.get("state") not in GOOD
        extra["rollback_to"], extra["rollback_lineage"] = rollback_target(host_before, target) \
            if extra["upgrading"] else (None, None)
    incomplete = [w for w in p["wheels"] if not all(w.get(k) for k in ("name", "file", "sha256"))]
    if incomplete:
        module.fail_json(msg="wheel entries need name, file and sha256: %s" % incomplete)
    hashes = fw.HashCache(p["wheel_dir"], rehash=p["rehash"], write=not module.check_mode)
    bad = fw.check_copies(p["wheel_dir"], p["wheels"], hashes)
    hashes.save()
    record_path = os.path.join(p["venv"], fw.RECORD_NAME)
    before = fw.read_record(record_path)
    if bad and p["copies"] == "report":
        # No wheel_sha256 here: the host does not hold these wheels yet (the API reads it as installed).
        _exit(module, dict(changed=False, to_copy=[b[0] for b in bad], installed=before, reinstalled=[], **extra))
    if bad:
        module.fail_json(msg="the class's wheels on this host are not the builder's, nothing installed: %s"
                         % "; ".join("%s %s" % item for item in bad), mismatches=[b[0] for b in bad])
    todo = fw.to_install(p["wheels"], before)
    after = dict((w["name"], w["sha256"]) for w in p["wheels"])
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    # The host record changes when the host holds another generation, or the last install was interrupted.
    record_moves = target is not None and (
        host_before.get("generation") != target["number"] or host_before.get("state") in ("installing", "failed")
        or host_before.get("lineage") != target["lineage"])
    result = dict(changed=bool(todo) or before != after or record_moves, to_copy=[], installed=after,
                  reinstalled=[w["name"] for w in todo],
                  wheel_sha256=dict((w["file"], w["sha256"]) for w in p["wheels"]),
                  diff=dict(before=before, after=after, before_header=record_path, after_header=record_path), **extra)
    if module.check_mode or not result["changed"]:
        _exit(module, result)
    if record_moves:
        gen.write_host(p["host_record"], gen.host_transition(host_before, target, "installing", extra["how"], now,
                                                             after))
    python = os.path.join(p["venv"], "bin", "python")
    if not os.path.exists(python):
        rc, out, err = module.run_command([p["python"], "-m", "venv", p["venv"]])
        if rc != 0:
            module.fail_json(msg="could not create the venv %s: %s" % (p["venv"], (err or out).strip()))
    if todo:
        rc, out, err = module.run_command(fw.install_argv(python, p["wheel_dir"], todo, p["pip_extra_args"]),
                                          environ_update=dict(CONFIG_OFF))
        if rc != 0:
            tail = "\n".join((err or out).strip().splitlines()[-15:])
            module.fail_json(msg="pip could not install %s (exit %d):\n%s"
                             % (", ".join(w["file"] for w in todo), rc, tail), stdout=out, stderr=err)
    fw.write_record(record_path, after)
    if record_moves:
        written = gen.read_host(p["host_record"])
        gen.write_host(p["host_record"], gen.host_transition(written, target, "installed", extra["how"], now, after))
    _exit(module, result)


if __name__ == "__main__":
    main()
