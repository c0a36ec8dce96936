# -*- coding: utf-8 -*-
"""The cluster's topologies (module_utils.fabric.topology) on stand-in sysfs trees: two nodes direct, a ring of
three and four, a switch of eight; each recognised from the links, with its addressing and NCCL variables from the
manifest's data; and the refusals before any change, each naming the node and what to do."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

import pytest
import yaml

from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import fabric, fabric_addr, nccl_lib, topology
from ansible_collections.sparkforge.stack.plugins.module_utils.plan import validate, var_names

sys.path.insert(0, os.path.dirname(__file__))
import fabric_trees  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.sparkforge.stack.tests.unit.utils.harness import COLLECTION  # noqa: E402  pylint: disable=wrong-import-position


@pytest.fixture(scope="module")
def data(manifest):
    return manifest["sparkforge_fabric_topologies"]


def cluster(tmp_path, n, **per_host):
    """n Sparks named spark-1..n; per_host: {"spark-2": {tree keywords}}; default keywords in per_host["all"]."""
    out, base = {}, dict(per_host.get("all") or {})
    for i in range(1, n + 1):
        name = "spark-%d" % i
        kw = dict(base, **(per_host.get(name) or {}))
        sysfs, proc = str(tmp_path / name), str(tmp_path / (name + "-proc"))
        fabric_trees.spark(sysfs, proc, **kw)
        out[name] = fabric.gather(sysfs, proc)
    return out


def names(n):
    return ["spark-%d" % i for i in range(1, n + 1)]


def test_the_manifest_holds_every_topology(data):
    assert set(topology.TOPOLOGIES) <= set(data)
    assert data["ring"]["env"] == {"NCCL_IB_SUBNET_AWARE_ROUTING": "1", "NCCL_NET_PLUGIN": "none"}
    assert data["direct"]["env"] == {} and data["switch"]["env"] == {}


# ------------------------------------------------------------------------------------------ direct

def test_two_nodes_are_direct_whatever_is_linked(tmp_path, data):
    hosts = cluster(tmp_path, 2, **{"spark-2": {"cabled": "f0"}})
    assert topology.resolve("auto", names(2), hosts, data) == ("direct", [])
    assert topology.check("direct", names(2), hosts, data) == []
    env, _notes, errors = topology.nccl_env("direct", names(2), hosts, data, "spark-1")
    # Today's variables, nothing added: the port's own (fabric.nccl_env).
    assert errors == [] and env == fabric.nccl_env(topology.fabric_ports(hosts["spark-1"])[0])[0]


# ------------------------------------------------------------------------------------------ ring

@pytest.mark.parametrize("n", [3, 4])
def test_a_ring_is_recognised_and_addressed_a_subnet_per_cable_and_twin(tmp_path, data, n):
    hosts = cluster(tmp_path, n, all={"cabled": "both"})
    order = names(n)
    assert topology.resolve("auto", order, hosts, data) == ("ring", [])
    assert topology.check("ring", order, hosts, data) == []
    addresses, links, errors = topology.ring_plan(order, hosts, "192.168.104.0/21", data)
    assert errors == [] and len(links) == 2 * n
    # Node 1's port 0 (both twins) to node 2's port 1, .1 at the port-0 end, .2 at the port-1 end.
    assert links[0] == {"subnet": "192.168.104.0/24",
                        "a": {"host": "spark-1", "interface": "enp1s0f0np0", "address": "192.168.104.1/24"},
                        "b": {"host": "spark-2", "interface": "enp1s0f1np1", "address": "192.168.104.2/24"}}
    assert links[1]["a"]["interface"] == "enP2p1s0f0np0" and links[1]["subnet"] == "192.168.105.0/24"
    # The last node's port 0 closes the ring on the first node's port 1.
    assert links[-1]["a"]["host"] == "spark-%d" % n and links[-1]["b"] == {
        "host": "spark-1", "interface": "enP2p1s0f1np1", "address": "192.168.%d.2/24" % (104 + 2 * n - 1)}
    # Every node: four addresses, four subnets, no subnet twice in the cluster.
    for host in order:
        assert sorted(addresses[host]) == ["enP2p1s0f0np0", "enP2p1s0f1np1", "enp1s0f0np0", "enp1s0f1np1"]
    subnets = [link["subnet"] for link in links]
    assert len(set(subnets)) == len(subnets)


def test_a_ring_of_three_gets_subnet_aware_routing_and_the_management_bootstrap(tmp_path, data):
    hosts = cluster(tmp_path, 3, all={"cabled": "both", "ipv4": "192.168.100.1"})
    env, _notes, errors = topology.nccl_env("ring", names(3), hosts, data, "spark-1", nccl_version="2.30.7")
    assert errors == []
    assert env == {"NCCL_IB_HCA": "=rocep1s0f0:1,roceP2p1s0f0:1,rocep1s0f1:1,roceP2p1s0f1:1", "NCCL_IB_DISABLE": "0",
                   "NCCL_IB_GID_INDEX": "3", "NCCL_SOCKET_IFNAME": "=enP7s7", "GLOO_SOCKET_IFNAME": "enP7s7",
                   "NCCL_IB_SUBNET_AWARE_ROUTING": "1", "NCCL_NET_PLUGIN": "none"}


def venv_with_nccl(tmp_path, version, markers=()):
    """A stand-in venv whose torch carries NCCL statically (libtorch_cuda.so holding NCCL's version string and,
    for the patched build, its markers), read as fabric_facts reads it."""
    lib = tmp_path / "venv" / "lib" / "python3.12" / "site-packages" / "torch" / "lib"
    lib.mkdir(parents=True)
    body = b"\0" * 100 + ("NCCL version %s+cuda13.0" % version).encode() + b"\0"
    body += b"".join(m.encode() + b"\0" for m in markers)
    (lib / "libtorch_cuda.so").write_bytes(body)
    return nccl_lib.read(str(tmp_path / "venv"), ["SWITCHLESS: skipping ncclTransportTreeConnect",
                                                  "SWITCHLESS: skipping ncclTransportPatConnect"],
                         system=str(tmp_path / "none"))


@pytest.mark.parametrize("row", [pytest.param("X12", id="X12")])
def test_a_ring_of_four_is_refused_on_stock_nccl_and_takes_the_patched_build(tmp_path, data, row):
    hosts = cluster(tmp_path, 4, all={"cabled": "both"})
    stock = venv_with_nccl(tmp_path / "stock", "2.30.7")
    assert stock["version"] == "2.30.7" and not stock["switchless"]
    for h in hosts.values():
        h["nccl"] = stock
    _env, _notes, errors = topology.nccl_env("ring", names(4), hosts, data, "spark-3")
    assert row and errors == [
        "spark-3: a ring of 4 nodes needs the switchless NCCL (alexellis/switchless-nccl, SparkRing's patches) - "
        "stock NCCL connects Tree and PAT between nodes the ring has not cabled - and NCCL 2.30.7 at %s is the stock "
        "build (no SWITCHLESS: skipping ncclTransportTreeConnect / SWITCHLESS: skipping ncclTransportPatConnect in "
        "it): put the nodes behind a switch (cluster_fabric_topology switch), or install that NCCL into the venv's "
        "torch on every node (the plan then sets NCCL_ALGO=Ring, NCCL_IB_MERGE_NICS=0, NCCL_SKIP_TREE_CONNECT=1)"
        % stock["path"]]
    # Unread is refused too: a ring of four cannot be proven without the library.
    for h in hosts.values():
        h["nccl"] = nccl_lib.read(str(tmp_path / "absent"))
    assert any("its NCCL was not read" in e for e in topology.nccl_env("ring", names(4), hosts, data, "spark-3")[2])
    patched = venv_with_nccl(tmp_path / "patched", "2.30.7", ["SWITCHLESS: skipping ncclTransportTreeConnect",
                                                              "SWITCHLESS: skipping ncclTransportPatConnect"])
    for h in hosts.values():
        h["nccl"] = patched
    env, _notes, errors = topology.nccl_env("ring", names(4), hosts, data, "spark-3")
    assert errors == [] and env["NCCL_ALGO"] == "Ring" and env["NCCL_SKIP_TREE_CONNECT"] == "1"
    assert env["NCCL_IB_MERGE_NICS"] == "0" and env["NCCL_IB_SUBNET_AWARE_ROUTING"] == "1"
    # A ring of three on stock NCCL takes none of the patched build's variables.
    three = cluster(tmp_path / "three", 3, all={"cabled": "both"})
    for h in three.values():
        h["nccl"] = stock
    env, _notes, errors = topology.nccl_env("ring", names(3), three, data, "spark-1")
    assert errors == [] and "NCCL_SKIP_TREE_CONNECT" not in env and "NCCL_ALGO" not in env


@pytest.mark.parametrize("row", [pytest.param("X13", id="X13")])
def test_a_ring_refuses_the_older_nccl_its_venv_loads_unasked(tmp_path, data, row):
    """The NCCL minimum is checked against the library the venv's torch loads, not only a version the user gives."""
    hosts = cluster(tmp_path, 3, all={"cabled": "both"})
    old = venv_with_nccl(tmp_path, "2.27.5")
    for h in hosts.values():
        h["nccl"] = old
    _env, _notes, errors = topology.nccl_env("ring", names(3), hosts, data, "spark-2")
    assert row and errors == [
        "spark-2: NCCL 2.27.5 (%s) is older than the ring needs (2.30.7 or later, for NCCL_IB_SUBNET_AWARE_ROUTING, "
        "NCCL_NET_PLUGIN): build NCCL 2.30.7 or later into the venv's torch" % old["path"]]


@pytest.mark.parametrize("row", [pytest.param("X14", id="X14")])
def test_a_ring_whose_nccl_was_not_read_is_refused_naming_what_was_not_read(tmp_path, data, row):
    """A missing measurement fails safe (issue 54, item 4): no library the venv's torch could load holds an NCCL
    version string, so the ring's NCCL minimum cannot be proven, and the plan refuses naming what it could not
    read; the version the user names (cluster_fabric_nccl_version) is checked instead when set."""
    hosts = cluster(tmp_path, 3, all={"cabled": "both"})
    venv = tmp_path / "venv" / "lib" / "python3.12" / "site-packages" / "torch" / "lib"
    venv.mkdir(parents=True)
    (venv / "libtorch_cuda.so").write_bytes(b"\0" * 64)  # a torch whose library holds no NCCL version string
    unread = nccl_lib.read(str(tmp_path / "venv"), system=str(tmp_path / "none"))
    for h in hosts.values():
        h["nccl"] = unread
    _env, _notes, errors = topology.nccl_env("ring", names(3), hosts, data, "spark-2")
    assert row and errors == [
        "spark-2: the ring needs NCCL 2.30.7 or later (for NCCL_IB_SUBNET_AWARE_ROUTING, NCCL_NET_PLUGIN), and the "
        "NCCL the venv's torch loads was not read (no library torch could load holds an NCCL version string (%s: no "
        "NCCL version string)): install the stack first (spark.yml; cluster_fabric_nccl_venv names the venv), or set "
        "cluster_fabric_nccl_version to the NCCL every node runs" % (venv / "libtorch_cuda.so")]
    no_venv = nccl_lib.read(str(tmp_path / "absent"))
    for h in hosts.values():
        h["nccl"] = no_venv
    assert "was not read (no venv at %r to read torch's NCCL from)" % str(tmp_path / "absent") in \
        topology.nccl_env("ring", names(3), hosts, data, "spark-2")[2][0]
    assert topology.nccl_env("ring", names(3), hosts, data, "spark-2", nccl_version="2.30.7")[2] == []
    # A switch has no NCCL minimum: nothing to refuse there.
    assert topology.nccl_errors("switch", data["switch"], "s1", 3, no_venv) == []


@pytest.mark.parametrize("row", [pytest.param("X05", id="X05")])
def test_a_ring_whose_links_do_not_close_is_refused(tmp_path, data, row):
    hosts = cluster(tmp_path, 3, all={"cabled": "both"}, **{"spark-2": {"cabled": "f1"}})
    # Recognised: the links say no one topology, and which nodes have what.
    assert topology.resolve("auto", names(3), hosts, data) == (None, [
        "the links do not say one topology (spark-2: 1 port linked; spark-1, spark-3: 2 ports linked): a ring needs "
        "both ports linked on every node, a switch one port on every node; fix the cabling or declare "
        "cluster_fabric_topology"])
    assert row and topology.check("ring", names(3), hosts, data) == [
        "spark-2: only port 1 (enp1s0f1np1 / enP2p1s0f1np1) has a link, the ring does not close: a ring needs both "
        "ports cabled, port 0 to the next node's port 1 and port 1 to the previous node's port 0"]


@pytest.mark.parametrize("row", [pytest.param("X06", id="X06")])
def test_a_ring_of_the_wrong_size_is_refused(tmp_path, data, row):
    hosts = cluster(tmp_path, 5, all={"cabled": "both"})
    assert row and topology.check("ring", names(5), hosts, data) == [
        "a ring takes 3 to 4 nodes, the cluster has 5 (spark-1, spark-2, spark-3, spark-4, spark-5)"]


@pytest.mark.parametrize("row", [pytest.param("X07", id="X07")])
def test_a_ring_pool_too_small_is_refused(tmp_path, data, row):
    hosts = cluster(tmp_path, 3, all={"cabled": "both"})
    assert row and topology.ring_plan(names(3), hosts, "192.168.100.0/23", data)[2] == [
        "cluster_fabric_subnet 192.168.100.0/23 holds 2 /24 subnets, a ring of 3 needs 6 (a subnet per cable and "
        "twin): give a /21 or larger"]


# ------------------------------------------------------------------------------------------ switch

def test_a_switch_of_eight_is_one_subnet_on_the_same_port(tmp_path, data):
    hosts = cluster(tmp_path, 8)
    order = names(8)
    assert topology.resolve("auto", order, hosts, data) == ("switch", [])
    assert topology.check("switch", order, hosts, data) == []
    # One subnet: today's plan, each node its address in cluster_fabric_subnet.
    spec = dict((h, {"interface": "enp1s0f1np1", "address": "192.168.100.%d" % (10 + i), "fabric": hosts[h]})
                for i, h in enumerate(order, 1))
    res = fabric_addr.plan(spec, "static", "192.168.100.0/24", data["switch"]["mtu"])
    assert res["errors"] == [] and res["hosts"]["spark-8"]["address"] == "192.168.100.18/24"
    env, _notes, errors = topology.nccl_env("switch", order, hosts, data, "spark-8")
    assert errors == [] and "NCCL_IB_SUBNET_AWARE_ROUTING" not in env and env["NCCL_SOCKET_IFNAME"] == "=enp1s0f1np1"


@pytest.mark.parametrize("row", [pytest.param("X08", id="X08")])
def test_a_switch_node_on_another_port_is_refused(tmp_path, data, row):
    hosts = cluster(tmp_path, 4, **{"spark-3": {"cabled": "f0"}})
    assert row and topology.check("switch", names(4), hosts, data) == [
        "spark-3: cabled to port 0, the other nodes to port 1: move its cable to port 1 (every node on a switch "
        "uses the same port)"]


def test_a_switch_node_with_two_cables_is_refused(tmp_path, data):
    hosts = cluster(tmp_path, 3, **{"spark-1": {"cabled": "both"}})
    assert topology.check("switch", names(3), hosts, data) == [
        "spark-1: port 0 (enp1s0f0np0 / enP2p1s0f0np0) and port 1 (enp1s0f1np1 / enP2p1s0f1np1) have links; through a "
        "switch each node has one cable, on the same port as the others: unplug one"]


def test_gh200s_on_infiniband_are_a_switch_whatever_rails_are_linked(tmp_path, data):
    hosts = {}
    for i in range(1, 4):
        sysfs, proc = str(tmp_path / ("gh-%d" % i)), str(tmp_path / ("gh-%d-proc" % i))
        fabric_trees.gh200(sysfs, proc, hcas=2)
        hosts["gh-%d" % i] = fabric.gather(sysfs, proc)
    order = ["gh-1", "gh-2", "gh-3"]
    assert topology.resolve("auto", order, hosts, data) == ("switch", [])
    assert topology.check("switch", order, hosts, data) == []


# ------------------------------------------------------------------------------------------ speed

@pytest.mark.parametrize("row, kind, n, slow_host, tree", [
    pytest.param("X09", "switch", 4, "spark-4", {"slow": ("f1",)}, id="X09"),
    pytest.param("X10", "ring", 3, "spark-2", {"cabled": "both", "slow": ("f0",)}, id="X10"),
])
def test_a_link_below_its_rated_speed_is_refused(tmp_path, data, row, kind, n, slow_host, tree):
    base = {"cabled": "both"} if kind == "ring" else {}
    hosts = cluster(tmp_path, n, all=base, **{slow_host: dict(base, **tree)})
    errors = topology.check(kind, names(n), hosts, data)
    port = "port 1 (enp1s0f1np1 / enP2p1s0f1np1)" if kind == "switch" else "port 0 (enp1s0f0np0 / enP2p1s0f0np0)"
    hint = ", and set the switch port to 200G with auto-negotiation off (for example 200G-baseCR4)" \
        if kind == "switch" else ""
    assert row and errors == ["%s: %s links at 100 Gb/s, below its rated 200 Gb/s: use a QSFP112 cable rated for "
                              "200 Gb/s%s" % (slow_host, port, hint)]


def test_a_direct_link_below_its_rated_speed_is_refused(tmp_path, data):
    hosts = cluster(tmp_path, 2, **{"spark-1": {"speed": 100000}})
    assert topology.check("direct", names(2), hosts, data) == [
        "spark-1: port 1 (enp1s0f1np1 / enP2p1s0f1np1) links at 100 Gb/s, below its rated 200 Gb/s: use a QSFP112 "
        "cable rated for 200 Gb/s"]


# ------------------------------------------------------------------------------------------ declared

@pytest.mark.parametrize("row", [pytest.param("X11", id="X11")])
def test_an_unknown_topology_is_refused(tmp_path, data, row):
    message = "cluster_fabric_topology: 'mesh' is not one of auto, direct, ring, switch"
    assert row and topology.resolve("mesh", names(2), {}, data) == (None, [message])
    # The preflight's validator says the same from the role's argument_specs, before any task.
    with open(os.path.join(COLLECTION, "roles", "cluster_fabric", "meta", "argument_specs.yml")) as handle:
        specs = var_names.specs_from_argument_specs([yaml.safe_load(handle)])
    assert message in str(validate.check({"cluster_fabric_topology": "mesh"}, specs))


def test_auto_without_the_hosts_fabric_asks_for_a_declaration(data):
    assert topology.resolve("auto", names(3), {"spark-1": None, "spark-2": None, "spark-3": None}, data)[1] == [
        "cluster_fabric_topology is auto but the fabric of spark-1, spark-2, spark-3 was not read: declare the "
        "topology"]


def test_a_declared_topology_is_checked_against_the_links(tmp_path, data):
    # Declared a switch, cabled as a ring: every node is named (two cables each).
    hosts = cluster(tmp_path, 3, all={"cabled": "both"})
    assert topology.resolve("switch", names(3), hosts, data) == ("switch", [])
    assert [e.split(":")[0] for e in topology.check("switch", names(3), hosts, data)] == names(3)


# ------------------------------------------------------------------------------------------ the whole plan

def spec_of(hosts, addresses=None):
    return dict((h, {"interface": "", "address": (addresses or {}).get(h, ""), "fabric": f}) for h, f in hosts.items())


def test_plan_cluster_two_nodes_is_todays_plan(tmp_path, data):
    hosts = cluster(tmp_path, 2)
    spec = dict((h, {"interface": "enp1s0f1np1", "address": "192.168.100.1%d" % i, "fabric": hosts[h]})
                for i, h in enumerate(names(2), 1))
    res = topology.plan_cluster(spec, names(2), "auto", data, "static", "192.168.100.0/24")
    today = fabric_addr.plan(spec, "static", "192.168.100.0/24", 9000)
    assert res["topology"] == "direct" and res["links"] == [] and res["env"] == {"spark-1": {}, "spark-2": {}}
    assert dict((k, res[k]) for k in today) == today


def test_plan_cluster_ring_of_three_renders_four_addresses_a_host(tmp_path, data):
    hosts = cluster(tmp_path, 3, all={"cabled": "both"})
    installed = venv_with_nccl(tmp_path / "venv", "2.30.7")
    for h in hosts.values():
        h["nccl"] = installed
    res = topology.plan_cluster(spec_of(hosts), names(3), "auto", data, "static", "10.20.0.0/21")
    assert res["errors"] == [] and res["topology"] == "ring" and len(res["links"]) == 6
    part = res["hosts"]["spark-2"]
    assert part["interface"] == "enp1s0f0np0" and part["mtu"] == 9000
    assert part["addresses"] == {"enp1s0f0np0": "10.20.2.1/24", "enP2p1s0f0np0": "10.20.3.1/24",
                                 "enp1s0f1np1": "10.20.0.2/24", "enP2p1s0f1np1": "10.20.1.2/24"}
    text = fabric_addr.render_netplan(part)
    for name, address in part["addresses"].items():
        stanza = "    %s:\n      dhcp4: false\n      dhcp6: false\n      link-local: []\n      addresses:\n"
        assert stanza % name + "        - %s\n" % address in text
    assert res["env"]["spark-2"]["NCCL_IB_SUBNET_AWARE_ROUTING"] == "1"


def test_plan_cluster_refuses_a_ring_before_addressing_it(tmp_path, data):
    hosts = cluster(tmp_path, 3, all={"cabled": "both"}, **{"spark-3": {"cabled": "f0"}})
    res = topology.plan_cluster(spec_of(hosts), names(3), "ring", data, "static", "10.20.0.0/21")
    assert res["hosts"] == {} and res["links"] == [] and res["env"] == {}
    assert res["errors"] == ["spark-3: only port 0 (enp1s0f0np0 / enP2p1s0f0np0) has a link, the ring does not close: "
                             "a ring needs both ports cabled, port 0 to the next node's port 1 and port 1 to the "
                             "previous node's port 0"]
    assert topology.plan_cluster(spec_of(cluster(tmp_path / "b", 3, all={"cabled": "both"})), names(3), "ring", data,
                                 "link-local")["errors"] == [
        "a ring is addressed a subnet per cable (cluster_fabric_mode static), not link-local"]


def test_plan_cluster_names_the_node_without_a_link(tmp_path, data):
    hosts = cluster(tmp_path, 3, **{"spark-3": {"cabled": None}})
    errors = topology.plan_cluster(spec_of(hosts), names(3), "auto", data, "static", "192.168.100.0/24")["errors"]
    assert errors[0].startswith("the links do not say one topology (spark-3: 0 ports linked; spark-1, spark-2: 1 port")
    assert errors[1] == ("spark-3: no port has a link: plug the cable into a fabric port - the port of enp1s0f0np0 / "
                         "enP2p1s0f0np0 or the port of enp1s0f1np1 / enP2p1s0f1np1 - or name the fabric interface "
                         "(sparkforge_fabric_interface)")


def test_render_netplan_without_addresses_is_unchanged():
    entry = {"interface": "enp1s0f1np1", "twins": ["enP2p1s0f1np1"], "address": "192.168.100.11/24",
             "link_local": False, "mtu": 9000}
    assert fabric_addr.render_netplan(dict(entry, addresses={})) == fabric_addr.render_netplan(entry)
