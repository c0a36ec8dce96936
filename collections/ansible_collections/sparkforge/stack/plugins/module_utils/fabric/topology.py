# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster's topology: two nodes direct, a ring (three or four, both ports, a subnet per cable and twin) or a
switch (any number, one subnet, the same port on every node). Declared (cluster_fabric_topology) or recognised from
which ports have links; checked before any change; each topology's numbers come from the manifest
(roles/manifest/defaults/main/fabric.yml, sparkforge_fabric_topologies), not from here.

A Spark's port 0 is the QSFP cage next to the Ethernet jack and shows up as PCI function 0 (enp1s0f0np0 and its
twin enP2p1s0f0np0), port 1 as function 1. sysfs says which ports have a link, not which neighbour is on the other
end: a ring "closes" here when every node has both ports linked; that the cables follow NVIDIA's pattern (port 0 to
the next node's port 1) is proven only when the addresses answer.

Plain functions; the fabric_plan module is the glue.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress

from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import fabric, fabric_addr

TOPOLOGIES = ("direct", "ring", "switch")
CHOICES = ("auto",) + TOPOLOGIES


def fabric_ports(facts):
    """A host's ports with a link, management ports left out, in port order (function 0 first)."""
    out = [p for p in (facts or {}).get("ports") or [] if p["cabled"] and not p.get("management")]
    return sorted(out, key=lambda p: (port_number(p) if port_number(p) is not None else 99, p["name"]))


def port_number(port):
    """The QSFP port a port is (its PCI function number: 0 next to the Ethernet jack, 1 further away)."""
    parsed = fabric.parse_pci((port["functions"][0] or {}).get("pci")) if port.get("functions") else None
    return parsed[3] if parsed else None


def port_label(port):
    number = port_number(port)
    names = " / ".join(port["netdevs"]) or " / ".join(port["hcas"])
    if number is None:
        return names
    return "port %s (%s)" % (number, names)


def _data(data, topology):
    entry = (data or {}).get(topology)
    if not isinstance(entry, dict):
        raise fabric.FabricError("the manifest has no topology %r (sparkforge_fabric_topologies: %s)" % (
            topology, ", ".join(sorted(k for k in (data or {}) if k in TOPOLOGIES)) or "none"))
    return entry


def recognise(hosts):
    """The topology the links say, from {host: fabric facts}: (topology or None, errors). Two nodes are direct
    whatever they have linked; more nodes with one linked port each are a switch, with both each a ring."""
    if len(hosts) == 2:
        return "direct", []
    # InfiniBand has no switchless ring: HCAs on IB (a GH200's compute and storage rails) are a switched fabric.
    if any(p.get("link_layer") == "InfiniBand" for f in hosts.values() for p in fabric_ports(f)):
        return "switch", []
    counts = dict((h, len(fabric_ports(f))) for h, f in hosts.items())
    if counts and all(c == 2 for c in counts.values()):
        return "ring", []
    if counts and all(c == 1 for c in counts.values()):
        return "switch", []
    by_count = {}
    for host, count in sorted(counts.items()):
        by_count.setdefault(count, []).append(host)
    said = "; ".join("%s: %d port%s linked" % (", ".join(hs), c, "" if c == 1 else "s")
                     for c, hs in sorted(by_count.items()))
    return None, ["the links do not say one topology (%s): a ring needs both ports linked on every node, a switch "
                  "one port on every node; fix the cabling or declare cluster_fabric_topology" % said]


def check(topology, order, hosts, data):
    """Every reason the cabling cannot carry ``topology``, naming the node and what to do; [] when it can.
    order: the hosts in ring/rank order; hosts: {host: fabric facts}."""
    spec = _data(data, topology)
    errors = []
    n, lo, hi = len(order), spec["nodes"].get("min"), spec["nodes"].get("max")
    if (lo and n < lo) or (hi and n > hi):
        errors.append("a %s takes %s nodes, the cluster has %d (%s)" % (
            topology, ("%d" % lo if lo == hi else "%d to %d" % (lo, hi)) if hi else "at least %d" % lo, n,
            ", ".join(order)))
    linked = dict((h, fabric_ports(hosts.get(h))) for h in order)
    if topology == "ring":
        for host in order:
            ports = linked[host]
            if len(ports) < 2:
                has = ", ".join(port_label(p) for p in ports) or "no port"
                errors.append("%s: only %s has a link, the ring does not close: a ring needs both ports cabled, port 0 "
                              "to the next node's port 1 and port 1 to the previous node's port 0" % (host, has))
    if spec.get("same_port"):
        numbers = {}
        for host in order:
            # A Spark's QSFP ports (RoCE); InfiniBand rails are the HCAs' own and several may be linked.
            ports = [p for p in linked[host] if p.get("link_layer") != "InfiniBand"]
            if len(ports) > 1:
                errors.append("%s: %s have links; through a switch each node has one cable, on the same port as the "
                              "others: unplug one" % (host, " and ".join(port_label(p) for p in ports)))
            elif ports:
                numbers.setdefault(port_number(ports[0]), []).append(host)
        if len(numbers) > 1:
            # The port most nodes use is the cluster's; the others are named (a tie names all but the first port).
            ranked = sorted(numbers.items(), key=lambda kv: (-len(kv[1]), kv[0] if kv[0] is not None else 99))
            cluster_port = ranked[0][0]
            for number, odd in ranked[1:]:
                for host in odd:
                    errors.append("%s: cabled to port %s, the other nodes to port %s: move its cable to port %s (every "
                                  "node on a switch uses the same port)" % (host, number, cluster_port, cluster_port))
    rated = (data or {}).get("rated_gbps") or {}
    for host in order:
        for port in linked[host]:
            want = rated.get(port.get("link_layer"))
            if want and port.get("link_gbps") and port["link_gbps"] < want:
                # NVIDIA: a switch port may not auto-negotiate 200G; it is then set by hand, auto-negotiation off.
                hint = (", and set the switch port to %gG with auto-negotiation off (for example %gG-baseCR4)"
                        % (want, want)) if topology == "switch" else ""
                errors.append("%s: %s links at %g Gb/s, below its rated %g Gb/s: use a QSFP112 cable rated for %g "
                              "Gb/s%s" % (host, port_label(port), port["link_gbps"], want, want, hint))
    return errors


def ring_plan(order, hosts, pool, data):
    """The ring's addressing: node i's port 0 to node i+1's port 1, the last back to the first; each cable's twins
    (domain 0000, 0002) get a subnet of their own, cut from ``pool`` in blocks of link_prefix, .1 at the port-0 end
    and .2 at the port-1 end. Returns ({host: {interface: address/prefix}}, links, errors)."""
    spec = _data(data, "ring")
    try:
        network = ipaddress.ip_network(u"%s" % pool, strict=True)
    except ValueError as exc:
        return {}, [], ["cluster_fabric_subnet %r: %s" % (pool, exc)]
    prefix = int(spec.get("link_prefix") or 24)
    per_link = int(spec.get("subnets_per_link") or 1)
    wanted = len(order) * per_link
    if prefix < network.prefixlen or 2 ** (prefix - network.prefixlen) < wanted:
        return {}, [], ["cluster_fabric_subnet %s holds %d /%d subnets, a ring of %d needs %d (a subnet per cable and "
                        "twin): give a /%d or larger" % (network, 2 ** max(prefix - network.prefixlen, 0), prefix,
                                                         len(order), wanted, prefix - (wanted - 1).bit_length())]
    subnets = list(network.subnets(new_prefix=prefix))[:wanted]
    out = dict((h, {}) for h in order)
    links = []
    for i, host in enumerate(order):
        peer = order[(i + 1) % len(order)]
        mine = [p for p in fabric_ports(hosts.get(host)) if port_number(p) == 0]
        theirs = [p for p in fabric_ports(hosts.get(peer)) if port_number(p) == 1]
        if not mine or not theirs:
            continue    # check() has named it
        a_names, b_names = mine[0]["netdevs"], theirs[0]["netdevs"]
        for k in range(min(per_link, len(a_names), len(b_names))):
            net = subnets[i * per_link + k]
            first = net.network_address
            a, b = "%s/%d" % (first + 1, prefix), "%s/%d" % (first + 2, prefix)
            out[host][a_names[k]] = a
            out[peer][b_names[k]] = b
            links.append({"subnet": str(net), "a": {"host": host, "interface": a_names[k], "address": a},
                          "b": {"host": peer, "interface": b_names[k], "address": b}})
    return out, links, []


def _version(text):
    out = []
    for part in str(text or "").split("-", maxsplit=1)[0].split("."):
        if not part.isdigit():
            break
        out.append(int(part))
    return tuple(out)


def nccl_env(topology, order, hosts, data, host, nccl_version=None):
    """The NCCL/gloo variables of one host for ``topology``: the ports' own (fabric.nccl_env) for direct and switch;
    for a ring every linked function in NCCL_IB_HCA and the bootstrap on the management port; plus the manifest's
    variables for the topology (and its node count). (env, notes, errors): an NCCL older than the topology's
    min_nccl is an error."""
    spec = _data(data, topology)
    facts = hosts.get(host) or {}
    ports = fabric_ports(facts)
    errors, notes = [], []
    if not ports:
        return {}, notes, ["%s: no port has a link: nothing to point NCCL at" % host]
    if topology == "ring":
        hcas = [f["hca"] for p in ports for f in p["functions"] if f["up"]]
        env = {"NCCL_IB_HCA": "=" + ",".join(hcas), "NCCL_IB_DISABLE": "0"}
        indexes = set()
        for port in ports:
            index, why = fabric.roce_gid_index(port)
            notes.append(why)
            indexes.add(index)
        if len(indexes) == 1 and None not in indexes:
            env["NCCL_IB_GID_INDEX"] = str(indexes.pop())
    else:
        env, more = fabric.nccl_env(ports[0])
        notes += more
    if spec.get("socket") == "management":
        mgmt = sorted((facts.get("management") or {}).keys())
        if not mgmt:
            errors.append("%s: a %s bootstraps NCCL over the management port, and this host has none known "
                          "(name it in cluster_fabric_protect)" % (host, topology))
        else:
            env["NCCL_SOCKET_IFNAME"] = "=" + mgmt[0]
            env["GLOO_SOCKET_IFNAME"] = mgmt[0]
    env.update(dict((k, str(v)) for k, v in (spec.get("env") or {}).items()))
    env.update(patched_env(spec, len(order)))
    installed = facts.get("nccl") or {}
    if installed.get("version"):
        notes.append("NCCL %s from %s" % (installed["version"], installed["path"]))
    elif installed.get("why"):
        notes.append("NCCL not read: %s" % installed["why"])
    errors += nccl_errors(topology, spec, host, len(order), installed, nccl_version)
    return env, notes, errors


def patched_env(spec, nodes):
    """The patched NCCL's variables for a ring above the stock NCCL's size, {} otherwise."""
    stock = spec.get("stock_max_nodes")
    if stock is None or nodes <= stock:
        return {}
    return dict((k, str(v)) for k, v in ((spec.get("patched_nccl") or {}).get("env") or {}).items())


def nccl_errors(topology, spec, host, nodes, installed, nccl_version=None):
    """The NCCL a topology needs against the one the host's venv loads (installed: nccl_lib.read) or, when the user
    names it, cluster_fabric_nccl_version: older than min_nccl is refused, and so is an NCCL that was not read (a
    missing measurement fails safe: the minimum cannot be proven); a ring larger than stock NCCL takes is refused
    unless the library carries the patched build's markers (unread: refused, it cannot be proven)."""
    errors = []
    want = spec.get("min_nccl")
    if nccl_version and not _version(nccl_version):
        return ["cluster_fabric_nccl_version %r is not a version like 2.30.7" % nccl_version]
    have, whose = (nccl_version, "cluster_fabric_nccl_version") if nccl_version else (
        installed.get("version"), installed.get("path"))
    needs = ", ".join(sorted(spec.get("env") or {})) or "its variables"
    if want and not have:
        errors.append("%s: the %s needs NCCL %s or later (for %s), and the NCCL the venv's torch loads was not read "
                      "(%s): install the stack first (spark.yml; cluster_fabric_nccl_venv names the venv), or set "
                      "cluster_fabric_nccl_version to the NCCL every node runs"
                      % (host, topology, want, needs, installed.get("why") or "no venv was read"))
    elif want and _version(have) < _version(want):
        errors.append("%s: NCCL %s (%s) is older than the %s needs (%s or later, for %s): build NCCL %s or later "
                      "into the venv's torch" % (host, have, whose, topology, want, needs, want))
    stock = spec.get("stock_max_nodes")
    patched = spec.get("patched_nccl") or {}
    if stock is not None and nodes > stock and not installed.get("switchless"):
        found = ("NCCL %s at %s is the stock build (no %s in it)" % (installed["version"], installed["path"],
                                                                     " / ".join(patched.get("markers") or []))
                 if installed.get("version") else "its NCCL was not read (%s)" % (installed.get("why") or "no venv"))
        errors.append("%s: a %s of %d nodes needs %s - stock NCCL connects Tree and PAT between nodes the %s has not "
                      "cabled - and %s: put the nodes behind a switch (cluster_fabric_topology switch), or install "
                      "that NCCL into the venv's torch on every node (the plan then sets %s)"
                      % (host, topology, nodes, patched.get("name") or "a patched NCCL", topology, found,
                         ", ".join("%s=%s" % kv for kv in sorted((patched.get("env") or {}).items()))))
    return errors


def resolve(requested, order, hosts, data):
    """The topology to use: the declared one, or (auto) the one the links say. (topology or None, errors)."""
    if requested not in CHOICES:
        return None, ["cluster_fabric_topology: %r is not one of %s" % (requested, ", ".join(CHOICES))]
    if requested != "auto":
        return requested, []
    if any(hosts.get(h) is None for h in order):
        return None, ["cluster_fabric_topology is auto but the fabric of %s was not read: declare the topology"
                      % ", ".join(h for h in order if hosts.get(h) is None)]
    return recognise(dict((h, hosts[h]) for h in order))


def env_additions(topology, order, hosts, data, host, nccl_version=None):
    """What the topology puts over the port's own variables (fabric_facts' nccl_env, read after the apply): for a
    ring the whole env (every linked function, the management bootstrap, the manifest's variables); for direct
    and switch only the manifest's variables. (env, notes, errors)."""
    env, notes, errors = nccl_env(topology, order, hosts, data, host, nccl_version)
    if topology == "ring":
        return env, notes, errors
    spec = _data(data, topology)
    keys = set(spec.get("env") or {}) | set(patched_env(spec, len(order)))
    return dict((k, v) for k, v in env.items() if k in keys), notes, errors


def plan_cluster(hosts, order, requested, data, mode="static", subnet=None, mtu=None, nccl_version=None):
    """fabric_addr.plan with a topology: resolved (declared or recognised), checked against the links, then
    addressed - direct and switch one subnet (fabric_addr.plan, unchanged), a ring a subnet per cable and twin - with
    the topology's MTU (unless mtu is given) and NCCL variables. Returns fabric_addr.plan's result plus topology,
    links and env ({host: variables over the port's own}); errors first name the topology's problems."""
    facts = dict((h, (hosts.get(h) or {}).get("fabric")) for h in order)
    chosen, errors = resolve(requested, order, facts, data)
    # One machine under two names, a subnet holding a management address: fabric_addr.plan names them for direct
    # and switch; here for a ring and for a cluster whose topology cannot be said (two names may be why).
    addressing = fabric_addr.same_machine_problems(hosts) + fabric_addr.subnet_problems(
        hosts, subnet if mode == "static" else None)
    if chosen is None:
        errors = addressing + errors
        # A node with no link at all is told where the cable goes, as in a two-node cluster.
        errors += ["%s: %s" % (h, fabric_addr.unnamed_hint(facts[h])) for h in order
                   if facts.get(h) is not None and not fabric_ports(facts[h])]
        return {"hosts": {}, "mtu": None, "errors": errors, "notes": [], "topology": None, "links": [], "env": {}}
    spec = _data(data, chosen)
    if all(facts.get(h) is not None for h in order):
        errors += check(chosen, order, facts, data)
    mtu = int(mtu or spec.get("mtu") or 9000)
    links = []
    if chosen == "ring":
        errors = addressing + errors
        if mode != "static":
            errors.append("a ring is addressed a subnet per cable (cluster_fabric_mode static), not %s" % mode)
        result = {"hosts": {}, "mtu": mtu, "errors": [], "notes": []}
        if mode == "static" and not errors:
            addresses, links, more = ring_plan(order, facts, subnet, data)
            errors += more
            for host in order:
                ports = fabric_ports(facts[host])
                netdevs = [n for p in ports for n in p["netdevs"]]
                if not netdevs:
                    continue
                hcas = [f["hca"] for p in ports for f in p["functions"] if f["up"]]
                result["hosts"][host] = {"interface": netdevs[0], "twins": netdevs[1:], "address": None,
                                         "addresses": addresses.get(host, {}), "link_local": False, "mtu": mtu,
                                         "hcas": hcas}
    else:
        result = fabric_addr.plan(hosts, mode, subnet, mtu)
    result["errors"] = errors + result["errors"]
    result.update(topology=chosen, links=links, env={})
    if not result["errors"] and all(facts.get(h) is not None for h in order):
        for host in order:
            env, notes, more = env_additions(chosen, order, facts, data, host, nccl_version)
            result["env"][host] = env
            result["errors"] += more
            result["notes"] += ["%s: %s" % (host, n) for n in notes if chosen == "ring"]
    return result
