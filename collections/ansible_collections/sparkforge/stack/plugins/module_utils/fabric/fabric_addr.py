# -*- coding: utf-8 -*-
"""Addressing the fabric: the cluster's plan checked before any change, the netplan drop-in each
host gets, and the files that put a job on the cluster (MPI hostfile, torchrun rendezvous).

Plain functions; the fabric_plan (controller) and fabric_netplan (host) modules are the glue.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import os
import subprocess

from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import atomic_write_text, keep_previous
from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import fabric

MODES = ("static", "link-local")


def _host_port(facts, iface):
    return fabric.port_of((facts or {}).get("ports") or [], iface)


def _cable_hint(facts, iface, port):
    """Where the cable is now and where it has to go, for a port without a link."""
    others = [p for p in facts.get("ports") or [] if p["cabled"] and p is not port and not p.get("management")]
    if others:
        return ("%s has no link but %s has: move the cable from the port of %s to the port of %s (or name %s as "
                "the fabric interface)" % (iface, others[0]["name"], " / ".join(others[0]["netdevs"]), iface,
                                           others[0]["name"]))
    return "%s has no link and no other fabric port has one: plug the cable into the port of %s" % (
        iface, " / ".join(port["netdevs"]) if port else iface)


def _port_names(port):
    return " / ".join(port["netdevs"]) or " / ".join(port["hcas"])


def unnamed_hint(facts):
    """Why a host has no fabric interface when none was named: no port has a link (and where the cable
    goes), several have one (name one), or - without the host's fabric - only that none was named."""
    if facts is None:
        return "no fabric interface named (sparkforge_fabric_interface)"
    fabric_ports = [p for p in facts.get("ports") or [] if not p.get("management")]
    cabled = [p for p in fabric_ports if p["cabled"]]
    if not cabled:
        if not fabric_ports:
            return ("no port has a link, and there is no RDMA-capable port to plug a cable into (netdevs: %s)"
                    % (", ".join(sorted(facts.get("netdevs") or {})) or "none"))
        return ("no port has a link: plug the cable into a fabric port - %s - or name the fabric interface "
                "(sparkforge_fabric_interface)" % " or ".join("the port of %s" % _port_names(p) for p in fabric_ports))
    return ("%d ports have a link (%s): name the one for the fabric (sparkforge_fabric_interface)"
            % (len(cabled), ", ".join(p["name"] for p in cabled)))


def machine_ids(facts):
    """What names one machine whatever the inventory calls it: its NICs' MACs (physical netdevs only: a bond or
    bridge takes a slave's), its RDMA devices' node_guid and the adapters' sys_image_guid. [(kind, value)]."""
    out = set()
    for nd in ((facts or {}).get("netdevs") or {}).values():
        mac = (nd.get("address") or "").lower()
        if not nd.get("virtual") and mac and mac.strip("0:") and mac != "ff:ff:ff:ff:ff:ff":
            out.add(("MAC", mac))
    for dev in ((facts or {}).get("rdma") or {}).values():
        for key in ("node_guid", "sys_image_guid"):
            if dev.get(key) and dev[key].strip("0:"):
                out.add((key, dev[key]))
    return out


def same_machine_problems(hosts):
    """Two inventory names for one machine (a MAC, node GUID or sys_image_guid both report), each pair named once:
    the machine would get two fabric addresses and two netplan drop-ins, the later overwriting the earlier."""
    ids = dict((h, machine_ids((hosts[h] or {}).get("fabric"))) for h in sorted(hosts))
    out = []
    names = sorted(ids)
    for i, first in enumerate(names):
        for second in names[i + 1:]:
            shared = sorted(ids[first] & ids[second])
            if shared:
                out.append("%s and %s are one machine (both report %s): list it once in the inventory, under one "
                           "name - as two it would get two fabric addresses and two netplan drop-ins"
                           % (first, second, ", ".join("%s %s" % kv for kv in shared[:3])
                              + (" and %d more" % (len(shared) - 3) if len(shared) > 3 else "")))
    return out


def management_addresses(spec):
    """[(address, where, network)] of one host's management side: the address Ansible connects to (ansible_host,
    when it is an IPv4 address; its network is not known, None) and every IPv4 address of its management
    interfaces (the default route's, fabric_facts'; written address/prefix, the network its netmask makes)."""
    out = []
    connection = (spec or {}).get("connection")
    try:
        out.append((ipaddress.IPv4Address(u"%s" % connection), "ansible_host", None))
    except ValueError:
        pass  # a name (DNS, an SSH alias): its address is not known here
    facts = (spec or {}).get("fabric") or {}
    for name in sorted(facts.get("management") or {}):
        for addr in (facts.get("addresses") or {}).get(name) or []:
            try:
                iface = ipaddress.ip_interface(u"%s" % addr)
            except ValueError:
                continue
            # A bare address (no prefix) says nothing of the network: only the address itself is judged.
            network = iface.network if "/" in str(addr) else None
            out.append((iface.ip, "management interface %s" % name, network))
    return out


def subnet_problems(hosts, subnet):
    """The fabric subnet must hold no host's management address, nor overlap a management network by its netmask:
    each one is named with its host (the fabric's route would take the management traffic, or the same address
    would be on two networks)."""
    try:
        network = ipaddress.ip_network(u"%s" % subnet, strict=False) if subnet else None
    except ValueError:
        return []  # the plan names a malformed subnet
    if network is None:
        return []
    out = []
    apart = ("the fabric needs a subnet of its own, apart from the management network (for example "
             "192.168.100.0/24 when that is free)")
    for host in sorted(hosts):
        for ip, where, mgmt in management_addresses(hosts[host]):
            if ip.version != network.version:
                continue
            if ip in network:
                out.append("%s: cluster_fabric_subnet %s holds %s, its %s: %s" % (host, network, ip, where, apart))
            elif mgmt is not None and mgmt.overlaps(network):
                out.append("%s: cluster_fabric_subnet %s overlaps %s, the management network of its %s (%s/%d): %s"
                           % (host, network, mgmt, where, ip, mgmt.prefixlen, apart))
    return out


def plan(hosts, mode="static", subnet=None, mtu=9000):
    """Check the cluster's addressing and decide each host's part.

    hosts: {host: {"interface": netdev, "address": "10.0.0.1" (static), "mtu": int or None,
                   "fabric": fabric_facts' fabric (None: the interface is not checked against the host)}}.
    Returns {"hosts": {host: {interface, twins, address (CIDR or None), link_local, mtu, hcas}},
             "mtu": the cluster's MTU, "errors": [...], "notes": [...]} - nothing is applied with errors.
    """
    errors, notes, out = [], [], {}
    if mode not in MODES:
        return {"hosts": {}, "mtu": None, "errors": ["mode must be one of %s, not %r" % (", ".join(MODES), mode)],
                "notes": []}
    network = None
    if mode == "static":
        if not subnet:
            errors.append("static addressing needs the cluster's subnet (for example 192.168.100.0/24)")
        else:
            try:
                network = ipaddress.ip_network(u"%s" % subnet, strict=True)
            except ValueError as exc:
                errors.append("subnet %s: %s" % (subnet, exc))
    if len(hosts) < 2:
        errors.append("a cluster needs at least 2 hosts, got %s" % (", ".join(sorted(hosts)) or "none"))
    errors += same_machine_problems(hosts)
    if network is not None:
        errors += subnet_problems(hosts, subnet)
    seen = {}
    wanted = {}
    ipoib = []
    for host in sorted(hosts):
        spec = hosts[host] or {}
        iface = spec.get("interface")
        facts = spec.get("fabric")
        if not iface:
            errors.append("%s: %s" % (host, unnamed_hint(facts)))
            continue
        entry = {"interface": iface, "twins": [], "address": None, "link_local": mode == "link-local",
                 "hcas": [], "mtu": None}
        if facts is not None:
            mgmt = facts.get("management") or {}
            if iface in mgmt:
                errors.append("%s: %s is the management interface (%s); the fabric must be another one"
                              % (host, iface, mgmt[iface]))
            elif iface not in (facts.get("netdevs") or {}):
                errors.append("%s: interface %s does not exist (netdevs: %s)" % (
                    host, iface, ", ".join(sorted(facts.get("netdevs") or {})) or "none"))
            else:
                port = _host_port(facts, iface)
                if port is None:
                    notes.append("%s: %s has no RDMA device; collectives will use TCP sockets on it" % (host, iface))
                    if (facts["netdevs"][iface].get("operstate") or "") == "down":
                        errors.append("%s: %s has no link" % (host, iface))
                elif not port["cabled"]:
                    errors.append("%s: %s" % (host, _cable_hint(facts, iface, port)))
                else:
                    if port.get("link_layer") == "InfiniBand":
                        ipoib.append(host)
                    entry["twins"] = [n for n in port["netdevs"] if n != iface]
                    entry["hcas"] = [f["hca"] for f in port["functions"] if f["up"]]
                    if port["degraded"]:
                        notes.append("%s: only %s of %s's functions have a link: about %s of %s Gb/s" % (
                            host, ", ".join(port["active"]), port["name"], port["usable_gbps"], port["link_gbps"]))
        if mode == "static" and network is not None:
            addr = spec.get("address")
            if not addr:
                errors.append("%s: no fabric address (sparkforge_fabric_address) in %s" % (host, network))
            else:
                try:
                    ip = ipaddress.ip_interface(u"%s" % addr).ip
                except ValueError as exc:
                    errors.append("%s: address %s: %s" % (host, addr, exc))
                    ip = None
                if ip is not None:
                    if ip not in network:
                        errors.append("%s: %s is outside the cluster subnet %s" % (host, ip, network))
                    elif network.num_addresses > 2 and ip in (network.network_address, network.broadcast_address):
                        errors.append("%s: %s is the subnet's %s address" % (
                            host, ip, "network" if ip == network.network_address else "broadcast"))
                    if str(ip) in seen:
                        errors.append("%s: address %s is already %s's" % (host, ip, seen[str(ip)]))
                    seen.setdefault(str(ip), host)
                    entry["address"] = "%s/%d" % (ip, network.prefixlen)
        out[host] = entry
        if host in ipoib:
            # IPoIB sets its own MTU: in datagram mode (the only mode of ConnectX-4 and later in enhanced
            # IPoIB) the InfiniBand MTU less its 4-byte header, 2044 or 4092; a jumbo 9000 would not apply.
            notes.append("%s: %s is IPoIB (InfiniBand): its MTU is left to IPoIB" % (host, iface))
            continue
        wanted[host] = int(spec.get("mtu") or mtu)
    # Jumbo frames only where every peer takes them: one MTU for the whole cluster (its Ethernet hosts).
    cluster_mtu = min(wanted.values()) if wanted else None
    if wanted and len(set(wanted.values())) > 1:
        notes.append("hosts ask for different MTUs (%s): the cluster uses %s" % (
            ", ".join("%s=%d" % kv for kv in sorted(wanted.items())), cluster_mtu))
    for host, entry in out.items():
        entry["mtu"] = None if host in ipoib else cluster_mtu
    return {"hosts": out, "mtu": cluster_mtu, "errors": errors, "notes": notes}


def report_dir_problem(path, variable="cluster_fabric_report_dir"):
    """None when the controller can hold files in ``path`` (it is a directory, or can be made as one), else
    why not, naming the variable. Checked before any host changes: the hostfile is copied there last, after
    every host's fabric is applied."""
    if not path or not os.path.isabs(path):
        return "%s %r: not an absolute path" % (variable, path)
    path = os.path.normpath(path)
    if os.path.exists(path):
        if not os.path.isdir(path):
            return "%s %s: exists and is not a directory" % (variable, path)
        if not os.access(path, os.W_OK | os.X_OK):
            return "%s %s: the directory is not writable" % (variable, path)
        return None
    parent = path
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        return "%s %s: %s is a file, not a directory, so the directory cannot be made" % (variable, path, parent)
    if not os.access(parent, os.W_OK | os.X_OK):
        return "%s %s: cannot be made, %s is not writable" % (variable, path, parent)
    return None


# The first line of every drop-in render_netplan writes: what makes a file at the drop-in's path sparkforge's.
DROP_IN_MARK = "# Written by sparkforge (fabric_netplan)"


def foreign_drop_in(path):
    """Why the file at ``path`` is not a drop-in sparkforge wrote (its first line), or None (no file, or ours).
    Never its text."""
    if not os.path.lexists(path):
        return None
    if os.path.islink(path) or not os.path.isfile(path):
        return "%s is not a regular file sparkforge wrote" % path
    try:
        with open(path, "rb") as handle:
            first = handle.readline(4096).decode("utf-8", "replace")
    except (IOError, OSError) as exc:
        return "%s cannot be read (%s)" % (path, exc.strerror)
    if first.startswith(DROP_IN_MARK):
        return None
    return "%s is a file sparkforge did not write (its first line is not %r; %d bytes)" % (
        path, DROP_IN_MARK, os.path.getsize(path))


def render_netplan(entry, comment="Written by sparkforge (fabric_netplan): the fabric between the cluster's hosts."):
    """The netplan drop-in of one host: the fabric interface with its address (or IPv4 link-local),
    its twins with the same MTU and no address; DHCP off on all of them. A ring's host has an address on
    every linked function (entry["addresses"]: {interface: address/prefix}, a subnet per cable and twin)."""
    lines = ["# " + c for c in comment.splitlines()]
    lines += ["network:", "  version: 2", "  ethernets:"]
    per_interface = entry.get("addresses") or {}
    for name in [entry["interface"]] + list(entry.get("twins") or []):
        primary = name == entry["interface"]
        address = per_interface.get(name) or (entry.get("address") if primary else None)
        lines += ["    %s:" % name, "      dhcp4: false", "      dhcp6: false"]
        if primary and entry.get("link_local"):
            lines.append("      link-local: [ipv4]")
        else:
            lines.append("      link-local: []")
        if address:
            lines += ["      addresses:", "        - %s" % address]
        if entry.get("mtu"):
            lines.append("      mtu: %d" % int(entry["mtu"]))
    return "\n".join(lines) + "\n"


def hostfile(addresses, slots=1):
    """An Open MPI hostfile: one "ADDRESS slots=N" line per host, in order."""
    return "".join("%s slots=%d\n" % (a, slots) for a in addresses)


def torchrun_example(addresses, env, port=29500, nproc=1):
    """A torchrun line per host for the cluster (c10d rendezvous on the first host's fabric address)."""
    exports = "".join("%s=%s " % kv for kv in sorted(env.items()))
    line = ("%storchrun --nnodes=%d --nproc-per-node=%d --node-rank=%%d --rdzv-backend=c10d "
            "--rdzv-endpoint=%s:%d --rdzv-id=sparkforge train.py" % (exports, len(addresses), nproc, addresses[0], port))
    return [line % i for i in range(len(addresses))]


# ------------------------------------------------------------------------------ applying, with revert

PENDING_SUFFIX = ".sparkforge-pending"


def read_text(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def restore(path, before):
    """Put the drop-in back as it was: its old text, or no file."""
    if before is None:
        if os.path.exists(path):
            os.unlink(path)
    else:
        atomic_write_text(path, before, 0o600)


def apply_with_revert(path, text, run, generate_cmd, apply_cmd, checks):
    """Write the drop-in, validate it (generate), apply it, run the checks; any failure puts the old
    drop-in back and applies that. run(argv) -> (rc, out, err); checks() -> list of problems.

    Returns {"changed", "before", "reverted", "problems", "step", "kept"} (kept: <path>.sparkforge-prev, the
    version replaced, or ""); the file is as it was unless the
    result says changed and no problems.
    """
    before = read_text(path)
    result = {"changed": before != text, "before": before, "reverted": False, "problems": [], "step": None,
              "kept": ""}
    if not result["changed"]:
        return result
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    if before is not None:
        # As every rewrite of a host's file: the version replaced stays beside it (issue 52).
        result["kept"] = keep_previous(path)
    atomic_write_text(path, text, 0o600)
    for step, argv in (("generate", generate_cmd), ("apply", apply_cmd)):
        if not argv:
            continue
        rc, out, err = run(argv)
        if rc != 0:
            result["problems"].append("%s failed (rc %s): %s" % (" ".join(argv), rc, (err or out or "").strip()[-500:]))
            result["step"] = step
            break
    if not result["problems"]:
        result["problems"] = list(checks())
        result["step"] = "check" if result["problems"] else None
    if result["problems"]:
        restore(path, before)
        if result["step"] != "generate" and apply_cmd:
            rc, out, err = run(apply_cmd)
            if rc != 0:
                result["problems"].append("re-applying the old configuration failed too (rc %s): %s"
                                          % (rc, (err or out or "").strip()[-300:]))
        result["reverted"] = True
        result["changed"] = False
    return result


REVERTER = r'''
import os, subprocess, sys, time
path, pending, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
apply_cmd = sys.argv[4:]
time.sleep(timeout)
if os.path.exists(pending):
    with open(pending) as handle:
        before = handle.read()
    if before.startswith("ABSENT\n"):
        if os.path.exists(path):
            os.unlink(path)
    else:
        tmp = path + ".sparkforge-tmp"
        with open(tmp, "w") as handle:
            handle.write(before[len("PRESENT\n"):])
        os.chmod(tmp, 0o600)
        os.rename(tmp, path)
    os.unlink(pending)
    if apply_cmd:
        subprocess.call(apply_cmd)
'''


def arm_revert(path, before, timeout, apply_cmd, python):
    """Like `netplan try`: unless confirm() runs within timeout seconds (from a new connection),
    a detached process puts the old drop-in back and applies it. Returns the pending marker's path."""
    pending = path + PENDING_SUFFIX
    atomic_write_text(pending, ("ABSENT\n" if before is None else "PRESENT\n" + before), 0o600)
    subprocess.Popen([python, "-c", REVERTER, path, pending, str(timeout)] + list(apply_cmd or []),
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True, close_fds=True)
    return pending


def confirm(path):
    """Keep the applied drop-in: remove the pending marker. True when there was one to remove."""
    pending = path + PENDING_SUFFIX
    if os.path.exists(pending):
        os.unlink(pending)
        return True
    return False
