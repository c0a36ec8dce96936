#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fabric_facts
short_description: Read the host's fabric NICs from sysfs - ports, twin functions, links, the management interface
version_added: "0.5.0"
description:
  - Reads every netdev under C(/sys/class/net) (driver, PCI address, operstate, carrier, speed, MTU, PCIe link)
    and every RDMA device under C(/sys/class/infiniband) (ports with state, physical state, rate, link layer and
    GID table), and the netdev of each RDMA device from C(/sys/class/infiniband/DEV/device/net/) - the map
    C(ibdev2netdev) prints, without that tool or any other on the host.
  - Groups the RDMA-capable PCI functions into ports. Functions whose RDMA devices share the adapter's
    C(sys_image_guid) and the PCI function number are one port's twins - a DGX Spark's ConnectX-7 shows each QSFP
    port as two PCIe x4 functions, for example C(enp1s0f1np1) (0000:01:00.1, C(rocep1s0f1)) and C(enP2p1s0f1np1)
    (0002:01:00.1, C(roceP2p1s0f1)). Separate adapters at the same bus/device/function in other PCI domains (a
    GH200's HCAs on Grace) are separate ports. A port
    is cabled when a function has a link; degraded when only some of its functions do. The usable speed is
    the port's rate shared among its functions, each bounded by its PCIe link, times the functions with a link.
  - Names the management interfaces - the default route's (C(/proc/net/route)), the one holding
    O(connection_address), and O(protect) - so later steps never touch them.
  - For the chosen port (O(fabric_interface), else the only cabled port) it returns the NCCL and gloo variables
    that keep collectives on it.
  - Reads only.
author:
  - sparkforge developers (@sparkforge)
options:
  sysfs_root:
    description: Where sysfs is mounted. Tests point it at a stand-in tree.
    type: path
    default: /sys
  proc_root:
    description: Where procfs is mounted (for C(net/route)). Tests point it at a stand-in tree.
    type: path
    default: /proc
  connection_address:
    description: The address Ansible connects to (C(ansible_host)); the interface holding it is management.
    type: str
  protect:
    description: More interfaces never to use as fabric.
    type: list
    elements: str
    default: []
  addresses:
    description:
      - IPv4 addresses per interface (interface to list of addresses, each C(address/prefix) or a bare address).
        When omitted, each netdev's address and netmask are read from the kernel (C(SIOCGIFADDR),
        C(SIOCGIFNETMASK)), as C(address/prefix). Tests pass it with a stand-in tree.
    type: dict
  fabric_interface:
    description:
      - A netdev or RDMA device of the port to compute the NCCL variables for; default the only cabled port.
      - A name that is neither fails the task; a netdev without RDMA (the management port) returns no port and is
        left to M(sparkforge.stack.fabric_plan) to judge.
    type: str
  nccl_venv:
    description:
      - The venv whose torch runs the collectives. The NCCL it loads (statically in C(libtorch_cuda.so), beside it,
        the nvidia-nccl wheel's, or the system's) is read from the library's own C(NCCL version) string, with no GPU,
        and returned as C(fabric.nccl) (version, path, switchless) for M(sparkforge.stack.fabric_plan) to check.
      - Empty or absent path - C(fabric.nccl.version) is null with why.
    type: path
  cable_checks:
    description:
      - The cable proof's data (the manifest's C(sparkforge_fabric_cable) - floor_gbps, bands, causes). With it the
        result has C(cables), each cabled port's verdict from sysfs (every function up, each function's PCIe link at
        its device's maximum width and speed), and the node's verdict, each failure with its likely cause.
    type: dict
  nccl_markers:
    description: The strings that prove the patched switchless NCCL build (the manifest's ring C(patched_nccl.markers)).
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: full
    description: Reads only; the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing.
"""

EXAMPLES = r"""
- name: Read the fabric
  sparkforge.stack.fabric_facts:
    connection_address: "{{ ansible_host | default(inventory_hostname) }}"
  register: fabric

- name: Show what ibdev2netdev would print
  ansible.builtin.debug:
    var: fabric.fabric.ibdev2netdev
"""

RETURN = r"""
fabric:
  description: netdevs, rdma, ibdev2netdev (lines), ports (name, functions, netdevs, hcas, cabled, active, degraded,
    link_gbps, per_function_gbps, usable_gbps, link_layer, management), cabled_ports, management (interface to why),
    management_speed_gbps, addresses.
  returned: always
  type: dict
port:
  description: The chosen port (see O(fabric_interface)), or null when there is none.
  returned: always
  type: dict
cables:
  description: With O(cable_checks) - the node's verdict (pass or fail, reasons) and each cabled port's (port,
    functions, verdict, reasons, floor_gbps); null without it.
  returned: always
  type: dict
nccl_env:
  description: NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME, NCCL_IB_HCA (every active twin), NCCL_IB_DISABLE and, on RoCE
    when one index fits every active twin, NCCL_IB_GID_INDEX. Empty without a chosen port.
  returned: always
  type: dict
notes:
  description: Why the GID index was or was not set, and a degraded port's missing functions.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import cable, fabric, nccl_lib


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sysfs_root=dict(type="path", default="/sys"),
            proc_root=dict(type="path", default="/proc"),
            connection_address=dict(type="str"),
            protect=dict(type="list", elements="str", default=[]),
            addresses=dict(type="dict"),
            fabric_interface=dict(type="str"),
            nccl_venv=dict(type="path"),
            nccl_markers=dict(type="list", elements="str", default=[]),
            cable_checks=dict(type="dict"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    addresses = p["addresses"]
    if addresses is None:
        addresses = {}
        for name in fabric.read_netdevs(p["sysfs_root"]):
            ip = fabric.ipv4_interface_of(name)
            if ip:
                addresses[name] = [ip]
    facts = fabric.gather(p["sysfs_root"], p["proc_root"], p["connection_address"], addresses, p["protect"])
    facts["addresses"] = addresses
    if p["nccl_venv"] is not None:
        facts["nccl"] = nccl_lib.read(p["nccl_venv"], p["nccl_markers"])
    port, env, notes = None, {}, []
    if p["fabric_interface"]:
        port = fabric.port_of(facts["ports"], p["fabric_interface"])
        # A netdev without RDMA (the management port, a plain NIC) is for fabric_plan to judge with the
        # whole cluster in view; only a name that is no interface at all stops this host here.
        if port is None and p["fabric_interface"] not in facts["netdevs"]:
            module.fail_json(msg="%s is not a function of any RDMA-capable port here (ports: %s)" % (
                p["fabric_interface"], ", ".join(x["name"] for x in facts["ports"]) or "none"), fabric=facts)
    elif len(facts["cabled_ports"]) == 1:
        port = fabric.port_of(facts["ports"], facts["cabled_ports"][0])
    if port is not None and port["cabled"]:
        iface = p["fabric_interface"] if p["fabric_interface"] in port["netdevs"] else None
        env, notes = fabric.nccl_env(port, iface)
    cables = None
    if p["cable_checks"]:
        cables = cable.node_verdict(p["connection_address"] or "this host", [
            cable.cable_verdict(x, p["cable_checks"]) for x in facts["ports"] if x["cabled"]])
    module.exit_json(changed=False, fabric=facts, port=port, nccl_env=env, notes=notes, cables=cables)


if __name__ == "__main__":
    main()
