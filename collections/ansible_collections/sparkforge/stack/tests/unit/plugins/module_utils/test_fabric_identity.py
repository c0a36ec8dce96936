# -*- coding: utf-8 -*-
"""The cluster's addresses make sense (issue 52, item 7; module_utils.fabric.fabric_addr): one machine listed under
two inventory names (the same MACs, node GUIDs, sys_image_guid in its fabric facts) is refused naming both, and a
fabric subnet that holds a host's management address (ansible_host, or an address of an interface fabric_facts
names management) is refused naming the host and the address. Stand-in fact sets from fabric_trees (each tree is
a machine of its own: its MACs and GUIDs carry the tree's number). The role's run: tests/unit/plugins/modules/
test_fabric_modules.py (X15, X16 through ansible-playbook)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import ipaddress
import os
import sys

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import fabric, fabric_addr, topology

sys.path.insert(0, os.path.dirname(__file__))
import fabric_trees  # noqa: E402  pylint: disable=wrong-import-position

SUBNET = "192.168.100.0/24"


def facts_of(tmp_path, name, **kw):
    sysfs, proc = str(tmp_path / name), str(tmp_path / (name + "-proc"))
    fabric_trees.spark(sysfs, proc, **kw)
    return fabric.gather(sysfs, proc)


def host(facts, address, connection=None):
    return {"interface": "enp1s0f1np1", "address": address, "fabric": facts, "connection": connection}


def test_one_machine_under_two_names_is_refused_naming_both(tmp_path, manifest):
    one = facts_of(tmp_path, "one")
    hosts = {"spark-1": host(one, "192.168.100.11"), "spark-1b": host(copy.deepcopy(one), "192.168.100.12"),
             "spark-2": host(facts_of(tmp_path, "two"), "192.168.100.13")}
    errors = fabric_addr.plan(hosts, "static", SUBNET)["errors"]
    assert len(errors) == 1, errors
    assert errors[0].startswith("spark-1 and spark-1b are one machine (both report MAC ")
    assert errors[0].endswith(": list it once in the inventory, under one name - as two it would get two fabric "
                              "addresses and two netplan drop-ins")
    # Through the topology planner too: a switch (fabric_addr.plan), a ring, and a cluster whose topology is auto.
    for requested in ("switch", "ring", "auto"):
        res = topology.plan_cluster(hosts, sorted(hosts), requested, manifest["sparkforge_fabric_topologies"],
                                    "static", "10.20.0.0/20")
        assert [e for e in res["errors"] if "are one machine" in e] == [errors[0]], (requested, res["errors"])


@pytest.mark.parametrize("keep", ["MAC", "node_guid", "sys_image_guid"])
def test_any_one_identity_shared_is_one_machine(tmp_path, keep):
    """A copy of one machine's facts whose other identities are changed: the one kept still names it."""
    one = facts_of(tmp_path, "one")
    other = copy.deepcopy(one)
    if keep != "MAC":
        for nd in other["netdevs"].values():
            nd["address"] = "02:00:00:00:00:%02x" % (len(nd["name"]) % 256)
    for dev in other["rdma"].values():
        for key in ("node_guid", "sys_image_guid"):
            if key != keep:
                dev[key] = "0200:0000:0000:%04x" % len(dev["name"])
    found = fabric_addr.same_machine_problems({"a": {"fabric": one}, "b": {"fabric": other}})
    assert len(found) == 1 and "(both report %s " % keep in found[0], found


def test_two_machines_and_hosts_without_facts_pass(tmp_path):
    hosts = {"a": {"fabric": facts_of(tmp_path, "a")}, "b": {"fabric": facts_of(tmp_path, "b")}, "c": {"fabric": None}}
    assert fabric_addr.same_machine_problems(hosts) == []
    # A bond or bridge takes a slave's MAC: virtual netdevs do not name a machine.
    virtual = {"netdevs": {"bond0": {"name": "bond0", "address": "3c:6d:66:00:00:01", "virtual": True}}, "rdma": {}}
    assert fabric_addr.same_machine_problems({"a": {"fabric": virtual}, "b": {"fabric": virtual}}) == []


def test_a_subnet_holding_a_management_address_is_refused(tmp_path):
    one, two = facts_of(tmp_path, "one"), facts_of(tmp_path, "two")
    two["addresses"] = {"enP7s7": ["192.168.100.5"], "enp1s0f1np1": ["192.168.100.12"]}
    hosts = {"spark-1": host(one, "192.168.100.11", connection="192.168.100.7"),
             "spark-2": host(two, "192.168.100.12", connection="spark-2.lab")}
    errors = fabric_addr.plan(hosts, "static", SUBNET)["errors"]
    assert errors == [
        "spark-1: cluster_fabric_subnet 192.168.100.0/24 holds 192.168.100.7, its ansible_host: the fabric needs a "
        "subnet of its own, apart from the management network (for example 192.168.100.0/24 when that is free)",
        "spark-2: cluster_fabric_subnet 192.168.100.0/24 holds 192.168.100.5, its management interface enP7s7: the "
        "fabric needs a subnet of its own, apart from the management network (for example 192.168.100.0/24 when "
        "that is free)"], errors
    # The fabric's own address on the fabric interface is not management; another subnet is fine.
    hosts["spark-1"]["connection"] = "10.1.0.7"
    two["addresses"] = {"enP7s7": ["10.1.0.8"], "enp1s0f1np1": ["192.168.100.12"]}
    assert fabric_addr.plan(hosts, "static", SUBNET)["errors"] == []
    # Link-local addressing has no subnet to judge.
    hosts["spark-1"]["connection"] = "169.254.3.3"
    assert fabric_addr.subnet_problems(hosts, None) == []


@settings(max_examples=300, derandomize=True, deadline=None)
@given(net=st.integers(0, 2 ** 32 - 1), prefix=st.integers(8, 30), mgmt=st.integers(0, 2 ** 32 - 1),
       near=st.booleans())
def test_property_a_management_address_is_refused_exactly_when_the_subnet_holds_it(net, prefix, mgmt, near):
    """Any subnet, any management address (half drawn inside the subnet's /prefix): refused iff address & mask ==
    network (the arithmetic, not ipaddress's `in`), the host and address named."""
    mask = (2 ** 32 - 1) ^ (2 ** (32 - prefix) - 1)
    network = ipaddress.IPv4Network((net & mask, prefix))
    if near:
        mgmt = (net & mask) | (mgmt & ~mask & (2 ** 32 - 1))
    address = ipaddress.IPv4Address(mgmt)
    found = fabric_addr.subnet_problems({"h": {"connection": str(address), "fabric": None}}, str(network))
    inside = (mgmt & mask) == (net & mask)
    assert bool(found) == inside, (network, address, found)
    if found:
        assert found == ["h: cluster_fabric_subnet %s holds %s, its ansible_host: the fabric needs a subnet of its "
                         "own, apart from the management network (for example 192.168.100.0/24 when that is free)"
                         % (network, address)]


@settings(max_examples=300, derandomize=True, deadline=None)
@given(net=st.integers(0, 2 ** 32 - 1), prefix=st.integers(8, 30), mgmt=st.integers(0, 2 ** 32 - 1),
       mgmt_prefix=st.integers(1, 32), near=st.booleans())
def test_property_a_management_network_overlapping_the_subnet_by_its_netmask_is_refused(
        net, prefix, mgmt, mgmt_prefix, near):
    """X17 (issue 52): a management interface's address/prefix whose network overlaps the fabric subnet is refused
    naming both networks, though the address itself lies outside the subnet (10.0.0.5/8 against 10.1.0.0/24);
    refused iff the two networks share an address (the arithmetic: the shorter prefix's mask equal)."""
    mask = (2 ** 32 - 1) ^ (2 ** (32 - prefix) - 1)
    if near:  # half drawn on the subnet's side of the management netmask
        by_mgmt = (2 ** 32 - 1) ^ (2 ** (32 - mgmt_prefix) - 1)
        mgmt = (net & by_mgmt) | (mgmt & ~by_mgmt & (2 ** 32 - 1))
    network = ipaddress.IPv4Network((net & mask, prefix))
    address = ipaddress.IPv4Address(mgmt)
    spec = {"connection": "spark-1.lab", "fabric": {"management": {"enP7s7": "carries the default route"},
                                                    "addresses": {"enP7s7": ["%s/%d" % (address, mgmt_prefix)]}}}
    found = fabric_addr.subnet_problems({"h": spec}, str(network))
    short = min(prefix, mgmt_prefix)
    common = (2 ** 32 - 1) ^ (2 ** (32 - short) - 1)
    overlaps = (mgmt & common) == (net & common)
    assert bool(found) == overlaps, (network, address, mgmt_prefix, found)
    if found and (mgmt & mask) != (net & mask):
        mgmt_net = ipaddress.IPv4Network((mgmt & ((2 ** 32 - 1) ^ (2 ** (32 - mgmt_prefix) - 1)), mgmt_prefix))
        assert found == ["h: cluster_fabric_subnet %s overlaps %s, the management network of its management "
                         "interface enP7s7 (%s/%d): the fabric needs a subnet of its own, apart from the management "
                         "network (for example 192.168.100.0/24 when that is free)"
                         % (network, mgmt_net, address, mgmt_prefix)], found
    # A bare address says nothing of its network: only the address is judged (X16).
    spec["fabric"]["addresses"]["enP7s7"] = [str(address)]
    assert bool(fabric_addr.subnet_problems({"h": spec}, str(network))) == ((mgmt & mask) == (net & mask))


def test_a_subnet_inside_the_management_network_is_refused_through_the_plan(tmp_path):
    """X17: the management interface 10.0.0.5/8 (fabric_facts reads address/prefix) against the fabric subnet
    10.1.0.0/24: the address is outside the subnet, the network is not; the connection address still finds its
    interface."""
    one, two = facts_of(tmp_path, "one"), facts_of(tmp_path, "two")
    two["addresses"] = {"enP7s7": ["10.0.0.5/8"], "enp1s0f1np1": ["10.1.0.12/24"]}
    hosts = {"spark-1": host(one, "10.1.0.11", connection="spark-1.lab"),
             "spark-2": host(two, "10.1.0.12", connection="spark-2.lab")}
    errors = fabric_addr.plan(hosts, "static", "10.1.0.0/24")["errors"]
    assert [e for e in errors if "spark-2: cluster_fabric_subnet 10.1.0.0/24 overlaps 10.0.0.0/8, the management "
            "network of its management interface enP7s7 (10.0.0.5/8)" in e], ("X17", errors)
    assert fabric.management_interfaces({"enP7s7": {}}, [], "10.0.0.5", two["addresses"]) == {
        "enP7s7": "holds 10.0.0.5, the address Ansible connects to"}
