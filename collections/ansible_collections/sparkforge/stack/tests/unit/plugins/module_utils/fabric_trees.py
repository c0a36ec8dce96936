# -*- coding: utf-8 -*-
"""Stand-in sysfs trees for the fabric tests, laid out as the kernel lays them out: the class
entries are links into /sys/devices/<pci root>/<function>/{net,infiniband}/, a function's ``driver``
is a link into /sys/bus/pci/drivers/, and an RDMA device's ``device/net/`` is the function's own net
directory (what ibdev2netdev reads).

DGX Spark: a ConnectX-7 in Socket Direct mode behind two PCIe Gen5 x4 links, so four functions -
0000:01:00.0/.1 and 0002:01:00.0/.1 - with netdevs enp1s0f0np0, enp1s0f1np1, enP2p1s0f0np0,
enP2p1s0f1np1 and RoCE devices rocep1s0f0, rocep1s0f1, roceP2p1s0f0, roceP2p1s0f1; f0 of both
domains is one QSFP port, f1 of both the other. Plus the 10 GbE RJ45 management port (enP7s7; its
driver name here is illustrative). GH200: mlx5 InfiniBand HCAs, one function each, with ipoib netdevs.

Every RDMA device has the adapter's ``sys_image_guid`` and its own ``node_guid``, as mlx5 prints them: a
Spark's four functions share one sys_image_guid (one ConnectX-7), each GH200 HCA has its own.
gh200_grace() lays a GH200 out as Grace does: every root port its own PCI domain, each card at 01:00.0.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import zlib


def _w(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text + "\n")


def _ln(target, link):
    os.makedirs(os.path.dirname(link), exist_ok=True)
    os.symlink(os.path.relpath(target, os.path.dirname(link)), link)


def machine_unit(root):
    """A number of its own for each tree (from its path): one machine's MACs and GUIDs carry it, so two trees are two
    machines, as the cluster's plan requires (issue 52: one machine under two names is refused)."""
    return zlib.crc32(os.path.abspath(str(root)).encode())


def unit_mac(mac, root):
    """The MAC with its first three octets the tree's own (the rest, which tells the functions apart, kept)."""
    unit = machine_unit(root) & 0xffffff
    octets = mac.split(":")
    return ":".join(["%02x" % (unit >> 16), "%02x" % ((unit >> 8) & 0xff), "%02x" % (unit & 0xff)] + octets[3:])


def unit_guid(guid, root):
    """The GUID with its first two groups the tree's own (the adapter and function groups kept)."""
    unit = machine_unit(root)
    return ":".join(["%04x" % (unit >> 16), "%04x" % (unit & 0xffff)] + guid.split(":")[2:])


def add_function(root, pci, driver, netdev=None, rdma=None, up=False, speed=200000, mtu=1500, mac="3c:6d:66:00:00:01",
                 link_layer="Ethernet", rate="200 Gb/sec (2X NDR)", gids=None, pcie=("32.0 GT/s PCIe", "4"),
                 sys_image_guid=None, node_guid=None, max_pcie=None):
    """One PCI function with an optional netdev and RDMA device (with its GUIDs when given); the MAC and GUIDs
    given are made the tree's own (unit_mac, unit_guid)."""
    mac = unit_mac(mac, root)
    sys_image_guid = unit_guid(sys_image_guid, root) if sys_image_guid else None
    node_guid = unit_guid(node_guid, root) if node_guid else None
    domain = pci.split(":")[0]
    fdir = os.path.join(root, "devices", "pci%s:00" % domain, "%s:00:00.0" % domain, pci)
    os.makedirs(fdir, exist_ok=True)
    drv = os.path.join(root, "bus", "pci", "drivers", driver)
    os.makedirs(drv, exist_ok=True)
    _ln(drv, os.path.join(fdir, "driver"))
    if pcie:
        _w(os.path.join(fdir, "current_link_speed"), pcie[0])
        _w(os.path.join(fdir, "current_link_width"), pcie[1])
        # What the device can do; a link trained below it (max_pcie given) is a firmware/BIOS fault.
        _w(os.path.join(fdir, "max_link_speed"), (max_pcie or pcie)[0])
        _w(os.path.join(fdir, "max_link_width"), (max_pcie or pcie)[1])
    if netdev:
        ndir = os.path.join(fdir, "net", netdev)
        _w(os.path.join(ndir, "operstate"), "up" if up else "down")
        _w(os.path.join(ndir, "carrier"), "1" if up else "0")
        _w(os.path.join(ndir, "speed"), str(speed if up else -1))
        _w(os.path.join(ndir, "mtu"), str(mtu))
        _w(os.path.join(ndir, "address"), mac)
        _ln(fdir, os.path.join(ndir, "device"))
        _ln(ndir, os.path.join(root, "class", "net", netdev))
    if rdma:
        idir = os.path.join(fdir, "infiniband", rdma)
        pdir = os.path.join(idir, "ports", "1")
        _w(os.path.join(pdir, "state"), "4: ACTIVE" if up else "1: DOWN")
        _w(os.path.join(pdir, "phys_state"), "5: LinkUp" if up else "3: Disabled")
        _w(os.path.join(pdir, "rate"), rate if up else "10 Gb/sec (4X SDR)")
        _w(os.path.join(pdir, "link_layer"), link_layer)
        for i, (gid, kind) in enumerate(gids or []):
            _w(os.path.join(pdir, "gids", str(i)), gid)
            _w(os.path.join(pdir, "gid_attrs", "types", str(i)), kind)
            if netdev:
                _w(os.path.join(pdir, "gid_attrs", "ndevs", str(i)), netdev)
        if sys_image_guid:
            _w(os.path.join(idir, "sys_image_guid"), sys_image_guid)
        if node_guid:
            _w(os.path.join(idir, "node_guid"), node_guid)
        _ln(fdir, os.path.join(idir, "device"))
        _ln(idir, os.path.join(root, "class", "infiniband", rdma))


def roce_gids(mac_suffix, ipv4=None):
    """A RoCE port's GID table: the IPv6 link-local GID as RoCE v1 and v2, then the IPv4-mapped
    GID as v1 and v2 when the netdev has an IPv4 address (the usual mlx5 order)."""
    ll = "fe80:0000:0000:0000:3e6d:66ff:fe00:%04x" % mac_suffix
    out = [(ll, "IB/RoCE v1"), (ll, "RoCE v2")]
    if ipv4:
        mapped = "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x" % tuple(int(p) for p in ipv4.split("."))
        out += [(mapped, "IB/RoCE v1"), (mapped, "RoCE v2")]
    return out


def add_management(root, name="enP7s7", speed=10000, up=True):
    add_function(root, "0007:01:00.0", "r8127", netdev=name, up=up, speed=speed, mac="4c:bb:47:00:00:01", pcie=None)


def write_route(proc_root, default_if="enP7s7", others=()):
    lines = ["Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT"]
    if default_if:
        lines.append("%s\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0" % default_if)
    for name in others:
        lines.append("%s\t0000FEA9\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0" % name)
    _w(os.path.join(proc_root, "net", "route"), "\n".join(lines))


def spark(root, proc_root=None, cabled="f1", both_functions=True, ipv4=None, mtu=1500, speed=200000, slow=()):
    """A DGX Spark: ports f0 and f1, each twin in domains 0000 and 0002; `cabled` ("f0", "f1", "both" or
    None) has a link on both functions (or only domain 0000's with both_functions=False). Each linked function
    reports `speed` Mb/s; the ports named in `slow` ("f0", "f1") report 100000 (a link below its rated 200G)."""
    for fn in (0, 1):
        for domain, prefix, rprefix in (("0000", "enp1s0", "rocep1s0"), ("0002", "enP2p1s0", "roceP2p1s0")):
            up = cabled in ("f%d" % fn, "both") and (both_functions or domain == "0000")
            netdev = "%sf%dnp%d" % (prefix, fn, fn)
            add_function(root, "%s:01:00.%d" % (domain, fn), "mlx5_core", netdev=netdev,
                         rdma="%sf%d" % (rprefix, fn), up=up, mtu=mtu,
                         speed=100000 if "f%d" % fn in slow else speed,
                         mac="3c:6d:66:00:%02x:%02x" % (int(domain), fn),
                         gids=roce_gids(int(domain) * 16 + fn, ipv4 if up else None),
                         sys_image_guid="3c6d:6603:0000:0001",
                         node_guid="3c6d:6603:0000:%04x" % (2 + int(domain) + fn))
    add_management(root)
    if proc_root:
        write_route(proc_root)
    return root


def gh200(root, proc_root=None, hcas=2, down=()):
    """A GH200 node: mlx5_0.. as InfiniBand HCAs (NDR 400) with ipoib netdevs ibp*, one function each,
    and an Ethernet management port."""
    for i in range(hcas):
        up = i not in down
        add_function(root, "0000:%02x:00.0" % (0x10 + i), "mlx5_core", netdev="ibp%ds0" % (0x10 + i),
                     rdma="mlx5_%d" % i, up=up, speed=400000, mtu=2044, mac="00:00:10:29:fe:80:00:%02x" % i,
                     link_layer="InfiniBand", rate="400 Gb/sec (4X NDR)",
                     gids=[("fe80:0000:0000:0000:a088:c203:0000:%04x" % i, "IB/RoCE v1")],
                     pcie=("32.0 GT/s PCIe", "16"), sys_image_guid="a088:c203:00%02x:0000" % i,
                     node_guid="a088:c203:00%02x:0000" % i)
    add_function(root, "0009:01:00.0", "igb", netdev="enP9p1s0", up=True, speed=1000, mac="4c:bb:47:00:00:09",
                 pcie=None)
    if proc_root:
        write_route(proc_root, "enP9p1s0")
    return root


def gh200_grace(root, proc_root=None, storage=True, storage_up=True, roce_management=False):
    """A GH200 as Grace lays out PCIe: every root port its own domain, each card at 01:00.0. The compute
    HCA mlx5_0 (InfiniBand NDR 400, ipoib ibp1s0) sits at 0000:01:00.0. With storage, a second, separate
    HCA mlx5_1 (its own sys_image_guid; ibP2p1s0) sits at 0002:01:00.0 - the same bus/device/function in
    another domain, like a Spark's twin. With roce_management, the host is managed over an RDMA-capable
    Ethernet port at 0002:01:00.0 instead (enP2p1s0f0np0 / mlx5_1, RoCE, the default route); otherwise over
    an igb port at 0009:01:00.0."""
    add_function(root, "0000:01:00.0", "mlx5_core", netdev="ibp1s0", rdma="mlx5_0", up=True, speed=400000,
                 mtu=2044, mac="00:00:10:29:fe:80:00:00", link_layer="InfiniBand", rate="400 Gb/sec (4X NDR)",
                 gids=[("fe80:0000:0000:0000:a088:c203:0010:0000", "IB/RoCE v1")], pcie=("32.0 GT/s PCIe", "16"),
                 sys_image_guid="a088:c203:0010:0000", node_guid="a088:c203:0010:0000")
    if roce_management:
        add_function(root, "0002:01:00.0", "mlx5_core", netdev="enP2p1s0f0np0", rdma="mlx5_1", up=True,
                     speed=100000, mtu=1500, mac="b8:3f:d2:00:00:02", rate="100 Gb/sec (2X HDR)",
                     gids=roce_gids(0x20, "10.0.0.31"), pcie=("16.0 GT/s PCIe", "16"),
                     sys_image_guid="b83f:d203:0000:0002", node_guid="b83f:d203:0000:0002")
        if proc_root:
            write_route(proc_root, "enP2p1s0f0np0")
        return root
    if storage:
        add_function(root, "0002:01:00.0", "mlx5_core", netdev="ibP2p1s0", rdma="mlx5_1", up=storage_up,
                     speed=400000, mtu=2044, mac="00:00:10:29:fe:80:00:02", link_layer="InfiniBand",
                     rate="400 Gb/sec (4X NDR)", gids=[("fe80:0000:0000:0000:a088:c203:0020:0000", "IB/RoCE v1")],
                     pcie=("32.0 GT/s PCIe", "16"), sys_image_guid="a088:c203:0020:0000",
                     node_guid="a088:c203:0020:0000")
    add_function(root, "0009:01:00.0", "igb", netdev="enP9p1s0", up=True, speed=1000, mac="4c:bb:47:00:00:09",
                 pcie=None)
    if proc_root:
        write_route(proc_root, "enP9p1s0")
    return root
