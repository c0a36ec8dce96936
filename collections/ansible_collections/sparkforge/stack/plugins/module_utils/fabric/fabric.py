# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Kept whole: the ports read from sysfs and NCCL's account of them (nccl_transport, diagnose) judge the
# same links; some 40 of its lines are the docstring's hardware facts.
"""The fabric between hosts, read from sysfs alone (no ibdev2netdev, ethtool or iproute2 needed).

Netdevs come from <root>/class/net/<if>/ (operstate, speed in Mb/s, mtu, address, carrier; the
``device`` link is the PCI function, its ``driver`` link names the driver). RDMA devices come from
<root>/class/infiniband/<dev>/ (ports/<n>/state, phys_state, rate, link_layer, gids/<i>,
gid_attrs/types/<i>, gid_attrs/ndevs/<i>); the netdevs of the same PCI function are listed in
<root>/class/infiniband/<dev>/device/net/, which is the map ``ibdev2netdev`` prints.

A QSFP port of a DGX Spark's ConnectX-7 shows up as two PCIe x4 functions, one in PCI domain 0000
and one in domain 0002, at the same bus/device/function (enp1s0f1np1 at 0000:01:00.1 and
enP2p1s0f1np1 at 0002:01:00.1), each with its own RoCE device (rocep1s0f1, roceP2p1s0f1).

What groups functions into one port's "twins" is what the hardware says, not the PCI address: an RDMA
device's ``sys_image_guid`` (Documentation/ABI/stable/sysfs-class-infiniband: "System image GUID") is the
adapter's, shared by all its functions, while ``node_guid`` is per function. A DGX Spark's ibv_devinfo
shows rocep1s0f0, rocep1s0f1, roceP2p1s0f0 and roceP2p1s0f1 with one sys_image_guid (4821:0b03:0096:04cb,
fw 28.45.4028, board NVD0000000087) and four node_guids; a dual-port ConnectX-5's mlx5_0/mlx5_1 likewise
share one (linux-rdma, "Re: [question] when bonding with CX5 network card that support ROCE", 2024-05-06).
So twins are functions with the same sys_image_guid and the same PCI function number (f0 with f0, f1 with
f1). The PCI address alone cannot say it: Grace puts every root port in its own PCI domain with the card
behind it at 01:00.0 (a GB10's lspci: 0001:01:00.0 the GPU, 0005:01:00.0 a ConnectX-7, 0009:01:00.0 the
RTL8125), so a GH200's compute HCA at 0000:01:00.0 and storage HCA at 0002:01:00.0 look like a Spark's
twins by bus/device/function. Without a sys_image_guid a function is a port of its own (full PCI address).

Plain functions; the fabric_facts and fabric_netplan modules are the Ansible glue.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fcntl
import os
import re
import socket
import struct

UP_STATES = ("up",)
ACTIVE = "ACTIVE"


class FabricError(ValueError):
    pass


# ------------------------------------------------------------------------------------------ reading


def _read(path, default=None):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except (IOError, OSError):
        return default


def _int(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def _link_name(path):
    """The last component of a symlink's target (a driver or PCI address), or None."""
    try:
        return os.path.basename(os.path.realpath(path)) if os.path.islink(path) or os.path.isdir(path) else None
    except OSError:
        return None


def parse_pci(address):
    """(domain, bus, device, function) from "0002:01:00.1"; None when it is not a PCI address."""
    m = re.match(r"^([0-9a-fA-F]{4,}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$", address or "")
    if not m:
        return None
    return m.group(1).lower(), m.group(2).lower(), m.group(3).lower(), int(m.group(4))


def parse_rate(text):
    """Gb/s from an RDMA port's rate ("200 Gb/sec (4X HDR)"); None when it says none."""
    m = re.search(r"(\d+(?:\.\d+)?)\s*Gb/sec", text or "")
    return float(m.group(1)) if m else None


def pcie_gbps(speed_text, width_text):
    """Raw PCIe bandwidth of a link in Gb/s per direction: GT/s x lanes x line-code efficiency
    (8b/10b up to 5 GT/s, 128b/130b from 8 GT/s). None when sysfs does not say."""
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*GT/s", speed_text or "")
    width = _int(width_text)
    if not m or not width:
        return None
    gts = float(m.group(1))
    return round(gts * width * (0.8 if gts <= 5.0 else 128.0 / 130.0), 1)


def _entries(base):
    """The names in a sysfs class directory, sorted; none when it does not exist."""
    try:
        return sorted(os.listdir(base))
    except OSError:
        return []


def read_netdevs(root="/sys"):
    """{name: facts} for every netdev under <root>/class/net."""
    base = os.path.join(root, "class", "net")
    out = {}
    for name in _entries(base):
        path = os.path.join(base, name)
        device = os.path.join(path, "device")
        has_device = os.path.exists(device)
        pci = _link_name(device) if has_device else None
        speed = _int(_read(os.path.join(path, "speed")))
        carrier = _read(os.path.join(path, "carrier"))
        facts = {
            "name": name,
            "operstate": _read(os.path.join(path, "operstate"), "unknown"),
            "carrier": carrier == "1" if carrier is not None else None,
            # The kernel reports -1 (or nothing) when the link is down or the driver has no speed.
            "speed_mbps": speed if speed is not None and speed > 0 else None,
            "mtu": _int(_read(os.path.join(path, "mtu"))),
            "address": _read(os.path.join(path, "address")),
            "driver": _link_name(os.path.join(device, "driver")) if has_device else None,
            "pci": pci if parse_pci(pci) else None,
            "virtual": not has_device,
        }
        if facts["pci"]:
            facts["pcie_gbps"] = pcie_gbps(_read(os.path.join(device, "current_link_speed")),
                                           _read(os.path.join(device, "current_link_width")))
            # The link as trained against what the device can do (PCI sysfs ABI: current_/max_link_speed, _width).
            facts["pcie"] = dict((k, _read(os.path.join(device, k))) for k in (
                "current_link_speed", "current_link_width", "max_link_speed", "max_link_width"))
        out[name] = facts
    return out


def _port_state(text):
    """"4: ACTIVE" -> "ACTIVE"."""
    return (text or "").split(":", 1)[-1].strip() or None


def read_gids(port_dir):
    """Non-zero GIDs of a port: [{index, gid, type, ndev}]; types and ndevs from gid_attrs."""
    out = []
    gids = os.path.join(port_dir, "gids")
    try:
        indexes = sorted((int(i) for i in os.listdir(gids) if i.isdigit()))
    except OSError:
        return out
    for i in indexes:
        gid = _read(os.path.join(gids, str(i)))
        if not gid or set(gid.replace(":", "")) <= {"0"}:
            continue
        out.append({"index": i, "gid": gid,
                    "type": _read(os.path.join(port_dir, "gid_attrs", "types", str(i))),
                    "ndev": _read(os.path.join(port_dir, "gid_attrs", "ndevs", str(i)))})
    return out


def _guid(text):
    """A GUID as sysfs prints it ("4821:0b03:0096:04cb"), lower case; None when absent or all zero
    (soft RoCE devices print zeros: they say nothing about the hardware)."""
    text = (text or "").strip().lower()
    if not text or set(text.replace(":", "")) <= {"0"}:
        return None
    return text


def twin_key(dev, pci):
    """What makes functions one port's twins: the adapter's sys_image_guid and the PCI function number;
    without a GUID, the full PCI address (domain included), so the function stands alone."""
    parsed = parse_pci(pci)
    guid = (dev or {}).get("sys_image_guid")
    if guid and parsed:
        return ("guid", guid, parsed[3])
    if parsed:
        return ("pci", pci.lower())
    return ("rdma", (dev or {}).get("name"))


def read_rdma(root="/sys"):
    """{name: facts} for every RDMA device under <root>/class/infiniband, with its ports and netdevs."""
    base = os.path.join(root, "class", "infiniband")
    out = {}
    for name in _entries(base):
        path = os.path.join(base, name)
        device = os.path.join(path, "device")
        try:
            netdevs = sorted(os.listdir(os.path.join(device, "net")))
        except OSError:
            netdevs = []
        ports = {}
        try:
            port_names = sorted(os.listdir(os.path.join(path, "ports")), key=lambda p: _int(p) or 0)
        except OSError:
            port_names = []
        for port in port_names:
            pdir = os.path.join(path, "ports", port)
            ports[port] = {
                "state": _port_state(_read(os.path.join(pdir, "state"))),
                "phys_state": _port_state(_read(os.path.join(pdir, "phys_state"))),
                "rate": _read(os.path.join(pdir, "rate")),
                "rate_gbps": parse_rate(_read(os.path.join(pdir, "rate"))),
                "link_layer": _read(os.path.join(pdir, "link_layer")),
                "gids": read_gids(pdir),
            }
        pci = _link_name(device)
        out[name] = {"name": name, "pci": pci if parse_pci(pci) else None,
                     "driver": _link_name(os.path.join(device, "driver")), "netdevs": netdevs, "ports": ports,
                     "sys_image_guid": _guid(_read(os.path.join(path, "sys_image_guid"))),
                     "node_guid": _guid(_read(os.path.join(path, "node_guid")))}
    return out


def default_route_interfaces(proc_root="/proc"):
    """Interfaces that carry an IPv4 default route, from <proc>/net/route (destination 00000000)."""
    text = _read(os.path.join(proc_root, "net", "route"), "")
    out = []
    for line in text.splitlines()[1:]:
        cols = line.split()
        if len(cols) >= 8 and cols[1] == "00000000" and _int(cols[7]) is not None and int(cols[7], 16) == 0 \
                and cols[0] not in out:
            out.append(cols[0])
    return out


SIOCGIFADDR = 0x8915
SIOCGIFNETMASK = 0x891b


def ipv4_interface_of(name):
    """The interface's IPv4 address with its netmask's prefix ("10.1.0.8/16"), from the kernel; None when it has
    no address. The prefix says which network the address is on (the fabric subnet must stay apart from it)."""
    ip = ipv4_of(name)
    if not ip:
        return None
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        packed = fcntl.ioctl(sock.fileno(), SIOCGIFNETMASK, struct.pack("256s", name[:15].encode()))
        mask = struct.unpack("!I", packed[20:24])[0]
    except (IOError, OSError):
        return ip
    finally:
        sock.close()
    return "%s/%d" % (ip, bin(mask).count("1"))


def ipv4_of(name):
    """The interface's IPv4 address from the kernel (SIOCGIFADDR), or None."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        packed = fcntl.ioctl(sock.fileno(), SIOCGIFADDR, struct.pack("256s", name[:15].encode()))
        return socket.inet_ntoa(packed[20:24])
    except (IOError, OSError):
        return None
    finally:
        sock.close()


# ------------------------------------------------------------------------------------------ deciding


def ibdev2netdev(rdma, netdevs):
    """The lines ``ibdev2netdev`` prints: "rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)"."""
    lines = []
    for name in sorted(rdma):
        dev = rdma[name]
        for port in sorted(dev["ports"], key=lambda p: _int(p) or 0):
            for nd in dev["netdevs"] or ["<no netdev>"]:
                state = (netdevs.get(nd) or {}).get("operstate")
                lines.append("%s port %s ==> %s (%s)" % (name, port, nd, "Up" if state == "up" else "Down"))
    return lines


def _function_up(nd, rdma_dev):
    """A function has a link when its netdev is up with carrier, or its RDMA port is ACTIVE."""
    if nd and nd.get("operstate") in UP_STATES and nd.get("carrier") is not False:
        return True
    return any(p.get("state") == ACTIVE for p in (rdma_dev or {}).get("ports", {}).values())


def ports(netdevs, rdma):
    """Group the RDMA-capable functions into ports: twins share the adapter (sys_image_guid) and the PCI
    function number (twin_key).

    Returns a list of {name, functions: [{netdev, rdma, hca, pci, up, speed_gbps, link_layer}], cabled,
    active, degraded, link_gbps, per_function_gbps, usable_gbps, link_layer} sorted by the first netdev.
    """
    by_netdev = {}
    for name, dev in rdma.items():
        for nd in dev["netdevs"]:
            by_netdev[nd] = name
    functions = []
    seen_rdma = set()
    for name, nd in sorted(netdevs.items()):
        dev_name = by_netdev.get(name)
        if not dev_name:
            continue
        seen_rdma.add(dev_name)
        functions.append((name, dev_name))
    for dev_name, dev in sorted(rdma.items()):
        if dev_name not in seen_rdma:
            functions.append((None, dev_name))     # an IB HCA without a netdev (ipoib not loaded)
    groups = {}
    for nd_name, dev_name in functions:
        dev = rdma[dev_name]
        nd = netdevs.get(nd_name) if nd_name else None
        pci = (nd or {}).get("pci") or dev.get("pci")
        parsed = parse_pci(pci)
        key = twin_key(dev, pci)
        port_no = sorted(dev["ports"], key=lambda p: _int(p) or 0)
        port_no = port_no[0] if port_no else "1"
        rdma_port = dev["ports"].get(port_no, {})
        speed = (nd or {}).get("speed_mbps")
        fn = {"netdev": nd_name, "rdma": dev_name, "hca": "%s:%s" % (dev_name, port_no), "pci": pci,
              "domain": parsed[0] if parsed else None, "up": _function_up(nd, dev),
              "operstate": (nd or {}).get("operstate"), "port_state": rdma_port.get("state"),
              "link_layer": rdma_port.get("link_layer"),
              "speed_gbps": speed / 1000.0 if speed else rdma_port.get("rate_gbps") if rdma_port.get("state") == ACTIVE
              else None, "pcie_gbps": (nd or {}).get("pcie_gbps"), "pcie": (nd or {}).get("pcie"),
              "mtu": (nd or {}).get("mtu"),
              "gids": rdma_port.get("gids") or []}
        groups.setdefault(key, []).append(fn)
    out = []
    for fns in groups.values():
        fns.sort(key=lambda f: (f["domain"] or "", f["netdev"] or f["rdma"]))
        active = [f for f in fns if f["up"]]
        link = max([f["speed_gbps"] for f in fns if f["speed_gbps"]] or [0]) or None
        per_function = None
        if link:
            # The port's rate is shared by its functions; each is also bound by its own PCIe link.
            per_function = link / len(fns)
            caps = [f["pcie_gbps"] for f in fns if f["pcie_gbps"]]
            if caps:
                per_function = min([per_function] + caps)
        usable = round(per_function * len(active), 1) if per_function and active else None
        layers = sorted(set(f["link_layer"] for f in fns if f["link_layer"]))
        out.append({"name": fns[0]["netdev"] or fns[0]["rdma"], "functions": fns,
                    "netdevs": [f["netdev"] for f in fns if f["netdev"]], "hcas": [f["hca"] for f in fns],
                    "cabled": bool(active), "active": [f["netdev"] or f["rdma"] for f in active],
                    "degraded": bool(active) and len(active) < len(fns), "link_gbps": link,
                    "per_function_gbps": round(per_function, 1) if per_function else None,
                    "usable_gbps": usable,
                    "link_layer": ("RoCE" if layers == ["Ethernet"] else "InfiniBand" if layers == ["InfiniBand"]
                                   else "/".join(layers) or None)})
    out.sort(key=lambda p: p["name"])
    return out


def management_interfaces(netdevs, default_routes, connection_address=None, addresses=None, protect=()):
    """The interfaces never to touch: the default route's, the one holding the address Ansible
    connects to (addresses: {if: [ip, ...]}), and any named in protect. {if: why}."""
    out = {}
    for name in default_routes:
        out.setdefault(name, "carries the default route")
    if connection_address:
        for name, addrs in sorted((addresses or {}).items()):
            # An address may carry its prefix (fabric_facts reads address/prefix): the address part is compared.
            if connection_address in [str(a).split("/", maxsplit=1)[0] for a in addrs or []]:
                out[name] = "holds %s, the address Ansible connects to" % connection_address
    for name in protect or ():
        out.setdefault(name, "named in protect")
    return dict((k, v) for k, v in out.items() if k in netdevs or k in (protect or ()))


def port_of(ports_list, name):
    """The port a netdev or RDMA device (or hca "dev:port") belongs to, or None."""
    for port in ports_list:
        for fn in port["functions"]:
            if name in (fn["netdev"], fn["rdma"], fn["hca"]):
                return port
    return None


def roce_gid_index(port, family="ipv4"):
    """The GID index NCCL should use on every active function of a RoCE port: the RoCE v2 GID that
    carries an IPv4 address (::ffff:a.b.c.d), when all active functions have it at the same index.
    (index or None, why)."""
    if port["link_layer"] != "RoCE":
        return None, "not RoCE (%s): no GID index needed" % port["link_layer"]
    found = {}
    for fn in port["functions"]:
        if not fn["up"]:
            continue
        for gid in fn["gids"]:
            text = gid["gid"].lower()
            v4 = text.startswith("0000:0000:0000:0000:0000:ffff:") or text.startswith("::ffff:")
            if (gid.get("type") or "").strip().lower() == "roce v2" and (v4 if family == "ipv4" else not v4):
                found.setdefault(fn["rdma"], gid["index"])
                break
    active = [fn["rdma"] for fn in port["functions"] if fn["up"]]
    missing = [a for a in active if a not in found]
    if missing:
        return None, "no RoCE v2 IPv4 GID on %s (no IPv4 address yet): NCCL picks the index" % ", ".join(missing)
    indexes = sorted(set(found.values()))
    if len(indexes) != 1:
        return None, "the RoCE v2 IPv4 GID sits at different indexes (%s): NCCL picks per device" % (
            ", ".join("%s=%d" % kv for kv in sorted(found.items())))
    return indexes[0], "RoCE v2 IPv4 GID at index %d on %s" % (indexes[0], ", ".join(active))


def nccl_env(port, interface=None):
    """The variables that keep NCCL and gloo on this port: the socket interface, every active twin
    in NCCL_IB_HCA (exact names, "=" prefix), IB on, and the RoCE GID index when it is one index.
    (env dict, notes list)."""
    if not port or not port["cabled"]:
        raise FabricError("no cabled port: nothing to point NCCL at")
    iface = interface or next((f["netdev"] for f in port["functions"] if f["up"] and f["netdev"]), None)
    env, notes = {}, []
    if iface:
        env["NCCL_SOCKET_IFNAME"] = "=" + iface
        env["GLOO_SOCKET_IFNAME"] = iface
    hcas = [f["hca"] for f in port["functions"] if f["up"]]
    env["NCCL_IB_HCA"] = "=" + ",".join(hcas)
    env["NCCL_IB_DISABLE"] = "0"
    index, why = roce_gid_index(port)
    if index is not None:
        env["NCCL_IB_GID_INDEX"] = str(index)
    notes.append(why)
    if port["degraded"]:
        down = [f["netdev"] or f["rdma"] for f in port["functions"] if not f["up"]]
        notes.append("only %s of the port's %d functions have a link (%s down): about %s Gb/s instead of %s"
                     % (len(hcas), len(port["functions"]), ", ".join(down), port["usable_gbps"], port["link_gbps"]))
    return env, notes


def gather(root="/sys", proc_root="/proc", connection_address=None, addresses=None, protect=()):
    """Everything fabric_facts returns, from the trees under root and proc_root."""
    netdevs = read_netdevs(root)
    rdma = read_rdma(root)
    plist = ports(netdevs, rdma)
    mgmt = management_interfaces(netdevs, default_route_interfaces(proc_root), connection_address, addresses, protect)
    for port in plist:
        port["management"] = sorted(set(port["netdevs"]) & set(mgmt))
    cabled = [p for p in plist if p["cabled"] and not p["management"]]
    return {"netdevs": netdevs, "rdma": rdma, "ibdev2netdev": ibdev2netdev(rdma, netdevs), "ports": plist,
            "cabled_ports": [p["name"] for p in cabled], "management": mgmt,
            "management_speed_gbps": max([netdevs[m]["speed_mbps"] / 1000.0 for m in mgmt
                                          if netdevs.get(m, {}).get("speed_mbps")] or [0]) or None}


# ------------------------------------------------------------------------------------------ diagnosis

# NCCL_DEBUG=INFO lines, as NCCL prints them (net.cc, p2p.cc, shm.cc, net_ib/net_socket):
#   "NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB enp1s0f0np0:10.0.0.1<0>", "NET/IB : No device found.",
#   "NET/Socket : Using [0]eth0:10.0.0.1<0>", "Using network Socket", "Assigned NET plugin IB to comm",
#   "Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0", "Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0/GDRDMA",
#   "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read", "Channel 00 : 0[0] -> 1[1] via SHM/direct/direct".
_NET_LINE = re.compile(r"NCCL INFO (NET/(?:IB|Socket) ?: .*|Using network \S+|Assigned NET plugin \S+ to comm"
                       r"|NET/IB : No device found\.?)")
_CHANNEL_LINE = re.compile(r"NCCL INFO (Channel \d+(?:/\d+)? : \d+\[[0-9a-fA-F]+\] -> \d+\[[0-9a-fA-F]+\]"
                           r"(?: \[(?:send|receive)\])? via (.+?))\s*$")
_DEV = re.compile(r"\[\d+\]([^\s\[;]+)")


def channel_transport(via):
    """The transport of one "via ..." text: NET/IB, NET/Socket (or NET/<plugin>), P2P, SHM, or its first word."""
    parts = via.split("/")
    if parts[0] == "NET" and len(parts) > 1:
        return "NET/" + parts[1]
    return parts[0].split()[0] if parts[0].strip() else via


def nccl_net_lines(text):
    """NCCL's own lines (NCCL_DEBUG=INFO) that say which network it loaded and which transport each channel
    used. Repeated lines are kept once, and of the per-channel lines one per transport ("via ..." text)."""
    out, seen_via = [], set()
    for line in (text or "").splitlines():
        m = _CHANNEL_LINE.search(line)
        if m:
            if m.group(2) not in seen_via:
                seen_via.add(m.group(2))
                out.append(m.group(1).strip())
            continue
        m = _NET_LINE.search(line)
        if m and m.group(1).strip() not in out:
            out.append(m.group(1).strip())
    return out


def nccl_transport(lines):
    """{"transport": "IB" | "Socket" | "P2P" | "SHM" | None, "devices": [...IB/RoCE devices...], "sockets": [...],
    "channels": [...transports the channels went through...]} from nccl_net_lines(). The channels' "via" say what
    the pair really used (a network transport before P2P/SHM, which stay within one machine); without them,
    "Using network X" when NCCL printed it, else what the NET/ lines offered."""
    used, ib, sock, channels = None, [], [], []
    for line in lines:
        m = re.search(r" via (.+)$", line) if line.startswith("Channel ") else None
        if m:
            kind = channel_transport(m.group(1))
            if kind not in channels:
                channels.append(kind)
        elif line.startswith("Using network "):
            used = line.split()[-1]
        elif line.startswith("Assigned NET plugin ") and used is None:
            used = line.split()[3]
        elif line.startswith("NET/IB") and "Using" in line:
            # "[0]mlx5_0:1/RoCE": the device and port, without the link layer.
            for dev in _DEV.findall(line.split(";")[0]):
                if dev.split("/")[0] not in ib:
                    ib.append(dev.split("/")[0])
        elif line.startswith("NET/Socket") and "Using" in line:
            for dev in _DEV.findall(line):
                if dev.split(":")[0] not in sock:
                    sock.append(dev.split(":")[0])
    nets = [c[4:] for c in channels if c.startswith("NET/")]
    if nets:
        used = "Socket" if "Socket" in nets else nets[0]
    elif channels:
        used = "P2P" if "P2P" in channels else channels[0]
    elif used is None:
        used = "IB" if ib else "Socket" if sock else None
    return {"transport": used, "devices": ib, "sockets": sock, "channels": channels}


def diagnose(gbs, lines=None, link_gbps=None, per_function_gbps=None, functions=None, management_gbps=None):
    """Why a host pair is slow, from NCCL's own lines and the measured bandwidth (GB/s) against the
    port (Gb/s): sockets instead of RoCE/InfiniBand, one function of a twin port, management-port speed.
    Returns a list of sentences (empty when nothing explains it)."""
    out = []
    measured = gbs * 8.0
    net = nccl_transport(lines or [])
    if net["transport"] == "Socket":
        out.append("NCCL used sockets, not RoCE/InfiniBand (NET/Socket on %s): check NCCL_IB_HCA and "
                   "NCCL_IB_DISABLE" % (", ".join(net["sockets"]) or "?"))
    elif net["transport"] in ("P2P", "SHM"):
        out.append("NCCL connected the ranks through %s, within one machine: no network link was measured"
                   % "/".join(net["channels"]))
    elif net["transport"] == "IB" and functions and len(net["devices"]) < functions:
        out.append("NCCL used %s only - %d of the port's %d functions, about %s Gb/s: NCCL_IB_HCA must name every "
                   "twin" % (", ".join(net["devices"]) or "one device", len(net["devices"]), functions,
                             "%g" % per_function_gbps if per_function_gbps else "?"))
    # A rate names a path only near it: far below every rate (a slowed port, a bad cable), it explains nothing.
    if management_gbps and management_gbps * 0.5 <= measured <= management_gbps * 1.1:
        out.append("%.1f Gb/s is management-port speed (%g Gb/s): the traffic may have gone over the management "
                   "network; check NCCL_SOCKET_IFNAME" % (measured, management_gbps))
    elif per_function_gbps and link_gbps and per_function_gbps < link_gbps \
            and per_function_gbps * 0.5 <= measured <= per_function_gbps * 1.05:
        out.append("%.1f Gb/s is at most one function's speed (%g of the port's %g Gb/s)" % (
            measured, per_function_gbps, link_gbps))
    return out
