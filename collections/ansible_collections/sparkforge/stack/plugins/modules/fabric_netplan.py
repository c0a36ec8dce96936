#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fabric_netplan
short_description: Write and apply the fabric's netplan drop-in so that a mistake cannot cut the host off
version_added: "0.5.0"
description:
  - With I(state=present), renders the host's netplan drop-in - the fabric interface with its static address or
    IPv4 link-local, its twin functions with the same MTU and no address, DHCP off - and, when it differs from the
    file on the host, writes it (mode 0600), validates it (C(netplan generate)), applies it (C(netplan apply)) and
    checks that the management interfaces are still up and that the address Ansible connects to is still on the
    host. Any failure puts the old drop-in back and applies that; the task fails saying what was reverted.
  - Like C(netplan try), with O(confirm_timeout) above 0 a detached process puts the old drop-in back and applies
    it after that many seconds unless the change is confirmed - I(state=confirmed), run from a new connection after
    the apply (the playbook runs M(ansible.builtin.wait_for_connection) in between). A change that breaks the
    connection therefore undoes itself.
  - Refuses before any change when the fabric interface or a twin does not exist, or is one of O(keep_interfaces).
  - Refuses before any change, with both states, a file at O(path) that sparkforge did not write (its first line is
    not the one the drop-in starts with, C(# Written by sparkforge (fabric_netplan)) - another netplan file of the
    host's). Such a file is never replaced nor removed.
  - A drop-in of sparkforge's that a change replaces or removes is kept beside it as C(<path>.sparkforge-prev).
  - I(state=absent) removes the drop-in and applies, with the same checks and revert.
author:
  - sparkforge developers (@sparkforge)
options:
  state:
    description: C(present) writes and applies, C(confirmed) keeps an applied change, C(absent) removes the drop-in.
    type: str
    choices: [present, confirmed, absent]
    default: present
  path:
    description: The drop-in, under O(root).
    type: path
    default: /etc/netplan/40-sparkforge-fabric.yaml
  root:
    description: Prefix for O(path) (tests use a temporary directory).
    type: path
    default: /
  interface:
    description: The fabric interface (required for C(present)).
    type: str
  twins:
    description: The interface's twin functions of the same port; they get the MTU and no address.
    type: list
    elements: str
    default: []
  address:
    description: The interface's address with its prefix (C(192.168.100.11/24)); omit for IPv4 link-local.
    type: str
  addresses:
    description:
      - An address with its prefix for each of O(interface) and O(twins) that gets one (a ring's host has one on every
        linked function, a subnet per cable and twin); overrides O(address) for the interfaces it names.
    type: dict
    default: {}
  mtu:
    description: The MTU of the interface and its twins (9000 where every peer agrees); omit to leave it alone.
    type: int
  keep_interfaces:
    description: Interfaces that must never be named here and must still be up after the apply (management).
    type: list
    elements: str
    default: []
  keep_address:
    description: The address Ansible connects to; it must still be on one of O(keep_interfaces) after the apply.
    type: str
  sysfs_root:
    description: Where sysfs is (tests point it at a stand-in tree).
    type: path
    default: /sys
  generate_command:
    description: Validates the written configuration; empty to skip.
    type: list
    elements: str
    default: [netplan, generate]
  apply_command:
    description: Applies the configuration; empty to skip (tests).
    type: list
    elements: str
    default: [netplan, apply]
  confirm_timeout:
    description: Seconds until an unconfirmed change reverts itself; 0 for no timer.
    type: int
    default: 120
attributes:
  check_mode:
    support: full
    description: Reports the change with the drop-in's diff; writes and applies nothing.
  diff_mode:
    support: full
    description: The drop-in before and after.
"""

EXAMPLES = r"""
- name: Apply the fabric's addressing (reverts itself unless confirmed)
  sparkforge.stack.fabric_netplan:
    interface: enp1s0f1np1
    twins: [enP2p1s0f1np1]
    address: 192.168.100.11/24
    mtu: 9000
    keep_interfaces: [enP7s7]
    keep_address: "{{ ansible_host }}"
  register: netplan

- name: Reconnect over the management network
  ansible.builtin.wait_for_connection:
    timeout: 60
  when: netplan.armed

- name: Keep the change
  sparkforge.stack.fabric_netplan:
    state: confirmed
  when: netplan.armed
"""

RETURN = r"""
path:
  description: The drop-in on the host.
  returned: always
  type: str
content:
  description: The rendered drop-in (state present).
  returned: state present
  type: str
armed:
  description: Whether a revert timer is waiting for I(state=confirmed).
  returned: always
  type: bool
reverted:
  description: Whether a failed apply or check put the old drop-in back.
  returned: always
  type: bool
problems:
  description: What failed (command output, the checks).
  returned: always
  type: list
  elements: str
kept:
  description: Where the drop-in the change replaced (or removed) is kept, C(<path>.sparkforge-prev).
  returned: when a drop-in was replaced or removed
  type: str
"""

import os
import sys

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import fabric, fabric_addr


def checks(p):
    """After the apply: the management interfaces are still up and still hold the connection address."""
    def run():
        problems = []
        netdevs = fabric.read_netdevs(p["sysfs_root"])
        holding = []
        for name in p["keep_interfaces"]:
            state = (netdevs.get(name) or {}).get("operstate")
            if state not in ("up", "unknown"):
                problems.append("management interface %s is %s after the apply" % (name, state or "gone"))
            if p["keep_address"] and fabric.ipv4_of(name) == p["keep_address"]:
                holding.append(name)
        if p["keep_address"] and p["keep_interfaces"] and not holding:
            problems.append("%s, the address Ansible connects to, is no longer on %s" % (
                p["keep_address"], ", ".join(p["keep_interfaces"])))
        return problems
    return run


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["present", "confirmed", "absent"], default="present"),
            path=dict(type="path", default="/etc/netplan/40-sparkforge-fabric.yaml"),
            root=dict(type="path", default="/"),
            interface=dict(type="str"),
            twins=dict(type="list", elements="str", default=[]),
            address=dict(type="str"),
            addresses=dict(type="dict", default={}),
            mtu=dict(type="int"),
            keep_interfaces=dict(type="list", elements="str", default=[]),
            keep_address=dict(type="str"),
            sysfs_root=dict(type="path", default="/sys"),
            generate_command=dict(type="list", elements="str", default=["netplan", "generate"]),
            apply_command=dict(type="list", elements="str", default=["netplan", "apply"]),
            confirm_timeout=dict(type="int", default=120),
        ),
        required_if=[("state", "present", ["interface"])],
        supports_check_mode=True,
    )
    p = module.params
    path = os.path.join(p["root"], p["path"].lstrip("/"))
    base = dict(path=path, armed=False, reverted=False, problems=[])

    if p["state"] == "confirmed":
        had = os.path.exists(path + fabric_addr.PENDING_SUFFIX)
        if had and not module.check_mode:
            fabric_addr.confirm(path)
        module.exit_json(changed=had, **base)

    foreign = fabric_addr.foreign_drop_in(path)
    if foreign and p["state"] != "confirmed":
        module.fail_json(msg="cluster_fabric_netplan_path=%s: %s: nothing was changed; move it away or set "
                         "cluster_fabric_netplan_path to another path" % (p["path"], foreign), **base)

    if p["state"] == "present":
        names = [p["interface"]] + p["twins"]
        netdevs = fabric.read_netdevs(p["sysfs_root"])
        bad = [n for n in names if n in p["keep_interfaces"]]
        if bad:
            module.fail_json(msg="%s is a management interface (keep_interfaces): not touched, nothing changed"
                             % ", ".join(bad), **base)
        missing = [n for n in names if n not in netdevs]
        if missing:
            module.fail_json(msg="interface %s does not exist on this host (netdevs: %s): nothing changed" % (
                ", ".join(missing), ", ".join(sorted(netdevs)) or "none"), **base)
        stray = sorted(n for n in p["addresses"] if n not in names)
        if stray:
            module.fail_json(msg="addresses names %s, not the interface or one of its twins (%s): nothing changed"
                             % (", ".join(stray), ", ".join(names)), **base)
        entry = {"interface": p["interface"], "twins": p["twins"], "address": p["address"],
                 "addresses": p["addresses"], "link_local": not (p["address"] or p["addresses"]), "mtu": p["mtu"]}
        text = fabric_addr.render_netplan(entry)
        base["content"] = text
    else:
        text = None

    before = fabric_addr.read_text(path)
    changed = before != text
    diff = dict(before=before or "", after=text or "", before_header=path, after_header=path)
    if module.check_mode or not changed:
        module.exit_json(changed=changed, diff=diff, **base)

    def run(argv):
        return module.run_command(argv)

    if text is None:
        # The drop-in removed is kept beside it, as a rewrite keeps the version it replaces.
        base["kept"] = fabric_addr.keep_previous(path)
        os.unlink(path)
        result = {"changed": True, "problems": [], "reverted": False}
        if p["apply_command"]:
            rc, out, err = run(p["apply_command"])
            problems = ["%s failed (rc %s): %s" % (" ".join(p["apply_command"]), rc, (err or out).strip()[-500:])] \
                if rc else checks(p)()
            if problems:
                fabric_addr.restore(path, before)
                run(p["apply_command"])
                result = {"changed": False, "problems": problems, "reverted": True}
    else:
        result = fabric_addr.apply_with_revert(path, text, run, p["generate_command"], p["apply_command"], checks(p))
    base.update(reverted=result["reverted"], problems=result["problems"])
    if result.get("kept"):
        base["kept"] = result["kept"]
    if result["problems"]:
        module.fail_json(msg="the fabric's netplan change failed and was reverted: %s" % "; ".join(result["problems"]),
                         diff=diff, **base)
    if p["confirm_timeout"] > 0:
        fabric_addr.arm_revert(path, before, p["confirm_timeout"], p["apply_command"], sys.executable)
        base["armed"] = True
    module.exit_json(changed=True, diff=diff, **base)


if __name__ == "__main__":
    main()
