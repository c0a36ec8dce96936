#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fleet_status
short_description: Compare what each host says it runs with the controller's generations
version_added: "0.3.0"
description:
  - Runs on the controller with what every host said of itself (M(sparkforge.stack.fleet_host_generation) with
    O(sparkforge.stack.fleet_host_generation#module:state=read)) its generation record and the sha256 of the
    wheels its venv holds.
  - Gives each host a verdict against its lineage's generations in the wheelhouse - C(current) (the newest
    generation, every wheel as recorded), C(behind) (an older generation), C(diverged) (a wheel the venv holds
    is not the generation's), C(partial) (an install was interrupted), C(on pruned generation N),
    C(drifted) (a distribution the last proof recorded is at another version now, or gone - each named with both;
    a runtime profile file it recorded edited or gone - named with the variable),
    C(never upgraded) (no record), or C(unreachable).
  - Writes C(fleet-status.json) into O(report_dir) when given. Reading it is not a change.
author:
  - sparkforge developers (@sparkforge)
options:
  wheelhouse:
    description: The controller's wheelhouse (C(sparkforge_fleet_wheelhouse)).
    type: path
    required: true
  hosts:
    description: Host name to C(record), C(installed) and C(drift) (the differences of
      M(sparkforge.stack.venv_proof) with O(sparkforge.stack.venv_proof#module:since)) as the host read them;
      a host with C(unreachable) true
      (or no entry values) is listed as unreachable.
    type: dict
    required: true
  report_dir:
    description: Where C(fleet-status.json) goes; nothing is written without it.
    type: path
attributes:
  check_mode:
    description: Compares the same; writes no file.
    support: full
  diff_mode:
    description: Not supported.
    support: none
"""

EXAMPLES = r"""
- name: Compare the hosts with the wheelhouse's generations
  sparkforge.stack.fleet_status:
    wheelhouse: "{{ sparkforge_fleet_wheelhouse }}"
    hosts: "{{ dict(ansible_play_hosts_all | zip(ansible_play_hosts_all | map('extract', hostvars, 'fleet_status_host'))) }}"
    report_dir: reports
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
rows:
  description: One entry per host (C(host), C(class), C(generation), C(state), C(partial), C(how), C(previous),
    C(newest), C(verdict), C(differ), C(installed), C(drift) when it drifted).
  returned: always
  type: list
  elements: dict
lines:
  description: One line per host, for a person.
  returned: always
  type: list
  elements: str
path:
  description: The file written (C(null) without O(report_dir) or in check mode).
  returned: always
  type: str
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import generations as gen
from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import atomic_write_text


def main():
    module = AnsibleModule(
        argument_spec=dict(
            wheelhouse=dict(type="path", required=True),
            hosts=dict(type="dict", required=True),
            report_dir=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    rows = []
    lineages = {}
    for host in sorted(p["hosts"]):
        said = p["hosts"][host] or {}
        if said.get("unreachable") or "record" not in said:
            rows.append({"host": host, "verdict": "unreachable", "generation": None, "class": None})
            continue
        record = said.get("record") or {}
        lineage = record.get("lineage")
        data = None
        if lineage:
            if lineage not in lineages:
                try:
                    lineages[lineage] = gen.load(p["wheelhouse"], lineage)
                except gen.GenerationError as exc:
                    module.fail_json(msg=str(exc))
            data = lineages[lineage]
        row = gen.compare(host, record, said.get("installed") or {}, data)
        # What changed in the venv since its last proof (venv_proof with since): drifted, naming each package. A
        # host whose generation record says an install is under way or broke off (partial) is reported as that:
        # its venv differs from the last proof because the install was not finished, not because it drifted; a host
        # rolled back to its previous generation likewise (its verdict says so).
        if said.get("drift") and not row.get("partial") and row.get("state") != "rolled_back":
            row["drift"] = said["drift"]
            row["verdict"] = "drifted: %s" % "; ".join(d["words"] for d in said["drift"])
        rows.append(row)
    lines = []
    for row in rows:
        where = "generation %s of %s" % (row.get("generation"), row.get("class")) if row.get("generation") else "-"
        lines.append("%-20s %-40s %s" % (row["host"], where, row["verdict"]))
    path = None
    if p["report_dir"] and not module.check_mode:
        path = os.path.join(p["report_dir"], "fleet-status.json")
        atomic_write_text(path, json.dumps({"hosts": rows}, indent=1, sort_keys=True) + "\n")
    module.exit_json(changed=False, rows=rows, lines=lines, path=path)


if __name__ == "__main__":
    main()
