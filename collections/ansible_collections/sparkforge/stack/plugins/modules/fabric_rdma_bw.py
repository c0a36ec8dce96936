#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fabric_rdma_bw
short_description: Each cable's RDMA bandwidth per direction with perftest's ib_write_bw, judged before any NCCL run
version_added: "0.5.0"
description:
  - C(probe) (on each host) - where O(command) is, or null when the host has none (perftest is not installed).
  - C(plan) (on the controller) - the cables between two nodes from M(sparkforge.stack.fabric_plan)'s result (a
    ring's links, a direct pair) and each host's fabric facts, and the rounds that test them - each cable in both
    directions, no node in two tests of a round, so a cable runs with its ends' other cables idle. A cable with an
    end that has no O(command) is not measured here and is named in C(unmeasured) (the NCCL pair test then measures
    the pair); on a switch no cable joins two nodes.
  - C(run) (on the hosts of a round) - this host's part of a test, one ib_write_bw per twin function at once, each on
    its own TCP port (O(tcp_port) upward) - C(server), or C(client) against the far end's address on that cable,
    retried until O(connect_timeout) while the server starts. An RDMA write moves data from client to server.
  - C(judge) (on the controller) - every host's cabled ports judged against O(cable_checks)'s floor with the
    bandwidth measured on their cable (the twins' sum per direction); a direction that did not come back fails
    safe, a shortfall is named with the band's likely cause. Writes O(report_dir)/cluster-cables.json. After the
    cross-host check, C(judge) with O(pairs) judges the cables ib_write_bw could not measure by the NCCL pair test.
author:
  - sparkforge developers (@sparkforge)
options:
  mode:
    description: What to do (see the description).
    type: str
    choices: [probe, plan, run, judge]
    required: true
  command:
    description: The ib_write_bw to run (a name on PATH or a path).
    type: str
    default: ib_write_bw
  plan:
    description: M(sparkforge.stack.fabric_plan)'s result (topology, hosts, links); C(plan) mode.
    type: dict
  fabrics:
    description: Each host's M(sparkforge.stack.fabric_facts) C(fabric); C(plan) and C(judge) modes.
    type: dict
  probes:
    description: Each host's C(probe) result path (null where absent); C(plan) mode.
    type: dict
  tcp_port:
    description: The first TCP port the two ends of a test exchange their queue pairs over (one per twin).
    type: int
    default: 18515
  role:
    description: This host's part in a round (C(server) or C(client)); C(run) mode.
    type: str
    choices: [server, client]
  runs:
    description: One entry per twin - tcp_port, client_rdma, client_ib_port, server_rdma, server_ib_port, address.
    type: list
    elements: dict
  duration:
    description: Seconds each test runs (ib_write_bw C(-D)), 1 to 60.
    type: int
    default: 5
  connect_timeout:
    description: Seconds a client retries while its server starts.
    type: int
    default: 30
  cables:
    description: C(plan)'s C(cables); C(judge) mode.
    type: list
    elements: dict
  results:
    description: The clients' C(run) results, each with cable and direction; C(judge) mode.
    type: list
    elements: dict
  hosts:
    description: The hosts to judge; C(judge) mode.
    type: list
    elements: str
  unmeasured:
    description: C(plan)'s C(unmeasured), carried into the report.
    type: list
    elements: str
    default: []
  pair_cables:
    description: C(plan)'s C(pair_cables) - the cables ib_write_bw could not measure; C(judge) mode, with O(pairs).
    type: list
    elements: dict
    default: []
  pairs:
    description:
      - The cross-host check's judged pairs (a, b, gbs), after the NCCL pair rounds. With them C(judge) also judges
        O(pair_cables), each by its pair's best GB/s x 8 as one figure ("a <-> b (NCCL pair test)"); a cable whose
        pair did not run fails safe. Absent - O(pair_cables) are not judged.
    type: list
    elements: dict
  cable_checks:
    description: The manifest's C(sparkforge_fabric_cable) (floor_gbps, bands, causes); C(judge) mode.
    type: dict
  report_dir:
    description: Where C(judge) writes cluster-cables.json; none when absent.
    type: path
attributes:
  check_mode:
    support: partial
    description: Reads and plans in check mode.
    details: C(probe), C(plan) and C(judge) run as in a real run; C(run) sends no traffic in check mode and returns no
      results (the cluster play skips the rounds and the judgement in check mode).
  diff_mode:
    support: none
    description: Changes nothing on the host.
"""

EXAMPLES = r"""
- name: Is ib_write_bw here
  sparkforge.stack.fabric_rdma_bw:
    mode: probe
  register: rdma_probe
"""

RETURN = r"""
path:
  description: C(probe) - where the command is, null when absent.
  returned: probe
  type: str
cables:
  description: C(plan) - the cables (name, a, b, twins); C(judge) - each cable's measured Gb/s per direction and its
    tests.
  returned: plan, judge
  type: list
  elements: dict
pair_cables:
  description: C(plan) - the cables with an end that has no ib_write_bw (the NCCL pair test measures them).
  returned: plan
  type: list
  elements: dict
rounds:
  description: C(plan) - the rounds (tests, roles per host).
  returned: plan
  type: list
  elements: dict
unmeasured:
  description: C(plan), C(judge) - the cables not measured with ib_write_bw, each with why.
  returned: plan, judge
  type: list
  elements: str
results:
  description: C(run) - one per twin (tcp_port, rdma, rc, output, average_gbps, error).
  returned: run
  type: list
  elements: dict
nodes:
  description: C(judge) - each host's verdict (pass or fail), reasons and cables (port, verdict, reasons, measured).
  returned: judge
  type: dict
failed_hosts:
  description: C(judge) - the hosts with a cable below the floor, not measured, down or on a narrow PCIe link.
  returned: judge
  type: list
  elements: str
report:
  description: C(judge) - the path of cluster-cables.json, null without O(report_dir).
  returned: judge
  type: str
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import atomic_write_text
from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import rdma_bw


def plan(p):
    cable_list = rdma_bw.cables(p["plan"] or {}, p["fabrics"] or {})
    probes = p["probes"] or {}
    measured, unmeasured = [], []
    for c in cable_list:
        missing = [c[end]["host"] for end in ("a", "b") if not probes.get(c[end]["host"])]
        unaddressed = sorted(set(t[end]["host"] for t in c["twins"] for end in ("a", "b") if not t[end]["address"]))
        if missing:
            unmeasured.append("%s: no %s on %s (install perftest): the NCCL pair test measures it"
                              % (c["name"], p["command"], ", ".join(missing)))
        elif unaddressed:
            unmeasured.append("%s: no fabric address on %s for ib_write_bw to reach: the NCCL pair test measures it"
                              % (c["name"], ", ".join(unaddressed)))
        else:
            measured.append(c)
    if (p["plan"] or {}).get("topology") == "switch":
        unmeasured.append("a switch: no cable joins two nodes; each port is judged from sysfs, its bandwidth by the "
                          "NCCL pair test")
    return {"cables": measured, "rounds": rdma_bw.rounds(measured, p["tcp_port"]), "unmeasured": unmeasured,
            "pair_cables": [c for c in cable_list if c not in measured]}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            mode=dict(type="str", choices=["probe", "plan", "run", "judge"], required=True),
            command=dict(type="str", default="ib_write_bw"),
            plan=dict(type="dict"),
            fabrics=dict(type="dict"),
            probes=dict(type="dict"),
            tcp_port=dict(type="int", default=18515),
            role=dict(type="str", choices=["server", "client"]),
            runs=dict(type="list", elements="dict"),
            duration=dict(type="int", default=5),
            connect_timeout=dict(type="int", default=30),
            cables=dict(type="list", elements="dict"),
            results=dict(type="list", elements="dict"),
            hosts=dict(type="list", elements="str"),
            unmeasured=dict(type="list", elements="str", default=[]),
            pair_cables=dict(type="list", elements="dict", default=[]),
            pairs=dict(type="list", elements="dict"),
            cable_checks=dict(type="dict"),
            report_dir=dict(type="path"),
        ),
        required_if=[("mode", "plan", ("plan", "fabrics", "probes")), ("mode", "run", ("role", "runs")),
                     ("mode", "judge", ("cables", "results", "fabrics", "hosts", "cable_checks"))],
        supports_check_mode=True,
    )
    p = module.params
    if not 1 <= p["duration"] <= 60:
        module.fail_json(msg="duration %d is out of range (from 1 to 60 seconds)" % p["duration"], changed=False)
    if not 1 <= p["tcp_port"] <= 65535 - 8:
        module.fail_json(msg="tcp_port %d is out of range (from 1 to 65527)" % p["tcp_port"], changed=False)
    if p["mode"] == "probe":
        module.exit_json(changed=False, path=module.get_bin_path(p["command"]))
    if p["mode"] == "plan":
        module.exit_json(changed=False, **plan(p))
    if p["mode"] == "run":
        if module.check_mode:
            module.exit_json(changed=False, skipped=True, msg="check mode: no traffic sent", results=[])
        path = module.get_bin_path(p["command"], required=True)
        results = rdma_bw.run_role(path, p["role"], p["runs"], p["duration"], p["connect_timeout"])
        module.exit_json(changed=False, results=results)
    out = rdma_bw.judge(p["cables"], p["results"], p["fabrics"], p["cable_checks"], p["hosts"],
                        p["pair_cables"], p["pairs"])
    out["unmeasured"] = p["unmeasured"]
    report = None
    if p["report_dir"]:
        report = os.path.join(p["report_dir"], "cluster-cables.json")
        try:
            atomic_write_text(report, json.dumps(out, indent=2, sort_keys=True) + "\n")
        except (IOError, OSError) as exc:
            module.fail_json(msg="cluster-cables.json could not be written to %s: %s" % (p["report_dir"], exc),
                             changed=False)
    module.exit_json(changed=False, report=report, **out)


if __name__ == "__main__":
    main()
