#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fabric_plan
short_description: Check a cluster's fabric addressing against every host's fabric, before any change
version_added: "0.5.0"
description:
  - On the controller, once for the cluster. Takes each host's fabric interface, address and MTU from the inventory
    and its fabric as M(sparkforge.stack.fabric_facts) read it, and refuses - naming the host - duplicate addresses,
    addresses outside the cluster subnet, a cluster subnet holding a host's management address (C(connection), or an
    address of an interface C(fabric_facts) names management), one machine listed under two inventory names (a MAC,
    C(node_guid) or C(sys_image_guid) both report), an interface that does not exist, the management interface
    named as fabric, a fabric port without a link (saying which port the cable has to move to), a host with no port
    linked, and a O(report_dir) that cannot be a directory.
  - Decides each host's part (address, twins, MTU - 9000 only where every host agrees) for
    M(sparkforge.stack.fabric_netplan), and the MPI hostfile and C(torchrun) lines for the cluster.
  - Reads only; nothing is changed anywhere.
author:
  - sparkforge developers (@sparkforge)
options:
  hosts:
    description:
      - Host name to C(interface), C(address) (static mode), C(mtu), C(fabric) (the C(fabric) return of
        M(sparkforge.stack.fabric_facts)) and C(connection) (the address Ansible connects to, C(ansible_host)), in
        rank order.
    type: dict
    required: true
  order:
    description: The hosts in rank order (the first holds the rendezvous); default the sorted names.
    type: list
    elements: str
  mode:
    description: C(static) addresses from O(subnet), or IPv4 C(link-local) ones.
    type: str
    choices: [static, link-local]
    default: static
  subnet:
    description: The cluster subnet for C(static) (C(192.168.100.0/24)).
    type: str
  mtu:
    description:
      - The MTU a host gets unless it asks for another; the cluster uses the smallest asked for. Omitted with
        O(topologies), the topology's MTU; otherwise 9000.
    type: int
  topology:
    description:
      - C(direct) (two nodes, one cable), C(ring) (three or four nodes, both ports, a subnet per cable and twin),
        C(switch) (any number of nodes, one subnet, the same port on every node), or C(auto) to recognise it from
        which ports have links. Checked against every host's links before any change with O(topologies) - a ring
        that does not close, a switch node cabled to another port, a link below its rated speed are refused,
        naming the host and what to do.
    type: str
    choices: [auto, direct, ring, switch]
    default: direct
  topologies:
    description:
      - The topologies' data (the manifest's C(sparkforge_fabric_topologies)) - node counts, addressing, MTU,
        NCCL variables, rated link speeds. Without it the plan is the two-node one, no topology checked.
    type: dict
  nccl_version:
    description: The hosts' NCCL version, refused when older than the topology needs (a ring's C(min_nccl)).
    type: str
  slots:
    description: MPI slots (GPUs) per host in the hostfile.
    type: int
    default: 1
  report_dir:
    description:
      - Where the hostfile and C(torchrun) lines will be written on the controller. Refused now, before any host
        changes, when it is not a directory and cannot be made one (a regular file on its path, no write access);
        a directory that does not exist yet is fine (the role makes it).
    type: path
attributes:
  check_mode:
    support: full
    description: Reads only; the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing.
"""

EXAMPLES = r"""
- name: Check the cluster's addressing
  sparkforge.stack.fabric_plan:
    hosts: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, '_fabric_host'))) }}"
    subnet: 192.168.100.0/24
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
hosts:
  description: Per host - interface, twins, address (CIDR, null for link-local), link_local, mtu, hcas.
  returned: always
  type: dict
mtu:
  description: The cluster's MTU.
  returned: always
  type: int
notes:
  description: What is not an error but matters (degraded ports, MTU disagreements, NICs without RDMA).
  returned: always
  type: list
  elements: str
errors:
  description: Every problem, by host (the task fails when there is one).
  returned: always
  type: list
  elements: str
topology:
  description: The topology planned (declared or recognised); null without O(topologies) or when none could be said.
  returned: always
  type: str
links:
  description: A ring's cables, one per twin - subnet, and each end's host, interface and address.
  returned: always
  type: list
  elements: dict
env:
  description:
    - Per host, the NCCL variables the topology puts over the port's own (a ring's whole set; the manifest's additions
      for direct and switch).
  returned: always
  type: dict
hostfile:
  description: An Open MPI hostfile over the fabric addresses (static mode).
  returned: always
  type: str
torchrun:
  description: One torchrun line per host, rendezvous on the first host's fabric address (static mode).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import fabric, fabric_addr, topology


def main():
    module = AnsibleModule(
        argument_spec=dict(
            hosts=dict(type="dict", required=True),
            order=dict(type="list", elements="str"),
            mode=dict(type="str", choices=["static", "link-local"], default="static"),
            subnet=dict(type="str"),
            mtu=dict(type="int"),
            topology=dict(type="str", choices=list(topology.CHOICES), default="direct"),
            topologies=dict(type="dict"),
            nccl_version=dict(type="str"),
            slots=dict(type="int", default=1),
            report_dir=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    ranks = p["order"] or sorted(p["hosts"])
    if p["topologies"] is None:
        result = fabric_addr.plan(p["hosts"], p["mode"], p["subnet"], p["mtu"] or 9000)
        result.update(topology=None, links=[], env={})
    else:
        try:
            result = topology.plan_cluster(p["hosts"], ranks, p["topology"], p["topologies"], p["mode"], p["subnet"],
                                           p["mtu"], p["nccl_version"])
        except fabric.FabricError as exc:
            module.fail_json(msg="the cluster's fabric cannot be configured, nothing changed: %s" % exc, changed=False)
    order = [h for h in ranks if h in result["hosts"]]
    addresses = [result["hosts"][h]["address"].split("/")[0] for h in order if result["hosts"][h]["address"]]
    complete = len(addresses) == len(order) and order
    result["hostfile"] = fabric_addr.hostfile(addresses, p["slots"]) if complete else ""
    result["torchrun"] = fabric_addr.torchrun_example(addresses, {}, nproc=p["slots"]) if complete else []
    if p["report_dir"] is not None:
        problem = fabric_addr.report_dir_problem(p["report_dir"])
        if problem:
            result["errors"].append(problem)
    if result["errors"]:
        module.fail_json(msg="the cluster's fabric cannot be configured, nothing changed: %s"
                         % "; ".join(result["errors"]), changed=False, **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
