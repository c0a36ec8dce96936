#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fleet_summary
short_description: Write the fleet summary of a provisioning run
version_added: "0.2.0"
description:
  - Runs once, on the controller, at the end of the provisioning playbook. Takes each host's state, class, what
    its builder built and the wheels it installed, writes O(report_dir)/fleet-summary.json and appends the run
    to O(report_dir)/fleet-history.jsonl.
  - A host the run never saw (not in preflight's plan) is left out; one without a state failed, and without an
    error of its own it stopped in preflight or could not be reached.
author:
  - sparkforge developers (@sparkforge)
options:
  hosts:
    description:
      - Host name to its facts - C(seen) (bool, preflight or fleet planning reached it), C(state), C(error),
        C(class), C(builder) (bool), C(builds) (list) and C(wheels) (name to sha256).
    type: dict
    required: true
  report_dir:
    description: Where the summary and the history go.
    type: path
    required: true
attributes:
  check_mode:
    support: full
    description: Computes the summary and writes nothing.
  diff_mode:
    support: none
    description: The report is written whole each run.
notes:
  - The report describes the run; it reports C(changed) when it wrote a file, and a playbook can treat that as
    no change to the fleet.
"""

EXAMPLES = r"""
- name: Write the fleet summary
  sparkforge.stack.fleet_summary:
    hosts:
      spark-01: {seen: true, state: provisioned, class: dgx_spark-aarch64-sm121-py312-1a2b3c4d, builder: true,
                 builds: [torch], wheels: {torch: 0123abcd}}
    report_dir: reports
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
summary:
  description: Host name to state, error, class, builder, builds and wheels.
  returned: always
  type: dict
lines:
  description: The summary as lines a person reads.
  returned: always
  type: list
  elements: str
paths:
  description: The files written (none in check mode).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import fleet_report


def main():
    module = AnsibleModule(
        argument_spec=dict(
            hosts=dict(type="dict", required=True),
            report_dir=dict(type="path", required=True),
        ),
        supports_check_mode=True,
    )
    summary = fleet_report.summarize(module.params["hosts"])
    paths = []
    if not module.check_mode:
        try:
            paths = fleet_report.write(module.params["report_dir"], summary)
        except (IOError, OSError) as exc:
            module.fail_json(msg="could not write the fleet summary to %s: %s" % (module.params["report_dir"], exc))
    module.exit_json(changed=bool(paths), summary=summary, lines=fleet_report.render(summary), paths=paths)


if __name__ == "__main__":
    main()
