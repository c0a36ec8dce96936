"""The guide's topologies on container hosts (issue 36 item 4): a switch of eight (sixteen for the grouped search) and a
ring of three, configured by playbooks/cluster.yml with the command lines of docs/guides/linking-sparks.md as written,
then proven by the cross-host check (gloo on the CPU) over the addresses the plan gave; on the switch, one node
slowed with ``tc`` and one node with another torch, each named with its reason.

The hosts are those of tests/e2e/test_xhost_containers.py (tests/xhost_hosts.py: the test bed's amd64 image, sshd,
stand-in sysfs trees of the unit tests' builder, each real interface named after the port it stands for and holding
the planned address, real CPU torch 2.13.0 at /opt/xtorch, ``cluster_fabric_apply_command: []`` since a container
has no systemd-networkd; that module's docstring says what is real and what stands in).

- The switch: eight DGX Spark trees cabled on port 1 (``enp1s0f1np1`` and its twin), one podman network (MTU 9000)
  for the switch's one L2 domain, ``cluster_fabric_topology: switch``. ``--check`` changes no file on any host; the
  run addresses all eight, sets up SSH and runs the pairs in 7 rounds of 4 (below the manifest's screening
  threshold, 16) and the collective over 8, a ``pass`` per node. (A rerun configuring nothing is the ring's, below:
  the same roles and modules write and compare there.)
- Sixteen and the slow node (issue 44 item 4): eight more Spark trees join the same network, s3's fabric interface
  is shaped with the host's ``tc`` (a token bucket at 4 Mbit/s, from this machine in s3's network namespace: the
  container has no CAP_NET_ADMIN), and the guide's cross-host line (playbooks/xhost.yml) over all sixteen, at the
  manifest's own threshold, fails s3 alone: the grouped search (ceil(sqrt(16)) = 4 groups, the failed one
  bisected, the suspect against a healthy buddy) finds it in fewer rounds than the round-robin's 15, counted in
  the report; each group's all_reduce is held to 1% of the stand-in 1 Gb/s link. Measured under load: s3's
  collectives at 0.0-0.4% of the link at 4 Mbit/s (1 Mbit/s only lengthens the run: 46 s of waiting against 18).
- The odd torch: a stand-in for another torch release. s8 also mounts the same torch read-only at /opt/xtorch-odd
  with ``torch/version.py`` bind-mounted over by a file saying 2.12.1+cpu, and that run points s8's ``xhost_env``
  PYTHONPATH there. Parity reads ``torch.__version__`` by importing torch with the collectives' environment, so s8
  reports another version exactly as a node with another wheel would; a second real wheel is ~800 MB. That run is
  playbooks/xhost.yml with the line of docs/guides/collectives-across-hosts.md.
- The ring: three Spark trees with both ports cabled, ``cluster_fabric_topology: ring``, ``cluster_fabric_mode:
  static``; a podman network per cable and twin (six, internal, with the subnet the plan cuts from
  ``cluster_fabric_subnet``: node i's port 0 to node i+1's port 1, the port-0 end .1, the port-1 end .2), each
  container's four fabric interfaces named after its ports' twins, plus the management port enP7s7 (the default
  route; gloo bootstraps over it as the ring's NCCL does). After the run every node reaches its two neighbours on
  each cable's two subnets (an ICMP echo from its own address, the route over the named interface); ``ping`` is not
  in the image, so the echo is a Python ICMP datagram socket. With perftest's stand-in ib_write_bw
  (tests/fixtures/perftest) on PATH, each cable is measured both ways over its two subnets before the collectives,
  in six rounds, and cluster-cables.json holds each cable's figures and each node's pass. The ring's pairs and
  collectives are judged against each node's fabric port rate as the stand-in tree reports it (200 Gb/s), no link
  speed pinned: a ring's check runs over the management port, so the verdict must name the fabric's rate as its
  source (issue 54 item 2). Then one cable at 13 Gb/s
  (the stand-in's rates file on one end) and one function trained at x2 of its x4 (the stand-in sysfs tree): the run
  fails every node before any collective, each named with the likely cause (issue 44 item 3).
"""

import ipaddress
import json
import os
import random
import uuid

import pytest
import yaml

import readme
from helpers import CONNECTION, image_present, user_checkout
from xhost_hosts import (DROPIN, PROCFS, SYSFS, START_TASK, changed_tasks, cleanup, create_network, host_addresses,
                         host_netns, recap, run, sh, snapshots, stand_in_tree, stand_in_venv,
                         start_hosts)

pytestmark = pytest.mark.skipif(not image_present(), reason="podman or the test bed's amd64 image missing")

SWITCH = ["s%d" % i for i in range(1, 9)]
# The grouped search's sixteen: the switch's eight and eight more on the same L2 network.
SIXTEEN = ["s%d" % i for i in range(1, 17)]
SWITCH_PORT = "enp1s0f1np1"
RING = ["r1", "r2", "r3"]
SLOW, ODD = "s3", "s8"
ODD_TORCH = "2.12.1+cpu"
# A Spark's ports by twin (domain 0000, then 0002): port 0's and port 1's netdevs.
PORT0 = ("enp1s0f0np0", "enP2p1s0f0np0")
PORT1 = ("enp1s0f1np1", "enP2p1s0f1np1")
IB_WRITE_BW = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "perftest",
                           "ib_write_bw")

# The pairs, the collective and their thresholds: small, so eight hosts on two cores run them in seconds.
ACCEPTANCE = {
    "xhost_backend": "gloo", "xhost_python": "/usr/bin/python3", "xhost_env": {"PYTHONPATH": "/opt/xtorch"},
    "cluster_xhost_env": {"PYTHONPATH": "/opt/xtorch"},
    "xhost_link_speed_gbps": 1.0, "xhost_sizes": [1 << 17], "xhost_iters": 2,
    "xhost_collective_sizes": [1 << 16], "xhost_collective_iters": 2, "xhost_warmup_iters": 1,
    "xhost_min_link_fraction": 0.02, "xhost_min_busbw_fraction": 0.01,
    "xhost_join_timeout": 60, "xhost_op_timeout": 120}


def common_vars():
    """The group's variables: the stand-ins' and the acceptance's; no report or key directory (the guide sets none:
    the roles' defaults, reports/ and .sparkforge-cluster-keys/ of the checkout the lines run in)."""
    group = {"cluster_ssh_user": "root", "cluster_fabric_sysfs_root": SYSFS,
             "cluster_fabric_proc_root": PROCFS, "cluster_fabric_apply_command": [],
             "runtime_env_sm_archs": ["sm_121"], "runtime_env_venv_hook": False}
    group.update(ACCEPTANCE)
    return group


def write_inventory(cluster, hosts, group):
    with open(cluster["inventory"], "w") as handle:
        yaml.safe_dump({"all": {"children": {"sparks": {"hosts": hosts, "vars": group}}}}, handle)


@pytest.fixture(scope="module")
def switch(torch_dir, tmp_path_factory):
    tag = uuid.uuid4().hex[:6]
    net = "sparkforge-xsw-%s" % tag
    names = dict((h, "sparkforge-xsw-%s-%s" % (tag, h)) for h in SIXTEEN)
    root = tmp_path_factory.mktemp("switch")
    try:
        subnet = create_network(net)
        addresses = host_addresses(subnet, SIXTEEN)
        # The odd torch: the same files, its version.py saying another release.
        with open(os.path.join(torch_dir, "torch", "version.py")) as handle:
            real = handle.read()
        assert "__version__ = '2.13.0+cpu'" in real, real
        odd = root / "odd-version.py"
        odd.write_text(real.replace("'2.13.0+cpu'", "'%s'" % ODD_TORCH))
        hosts, specs = {}, {}
        for host in SIXTEEN:
            volumes = ["%s:/opt/xtorch:ro" % torch_dir] + stand_in_tree(root, host, "spark", cabled="f1")
            if host == ODD:
                volumes += ["%s:/opt/xtorch-odd:ro" % torch_dir, "%s:/opt/xtorch-odd/torch/version.py:ro" % odd]
            specs[names[host]] = (["%s:interface_name=%s,ip=%s" % (net, SWITCH_PORT, addresses[host])], volumes)
            hosts[host] = {"ansible_connection": CONNECTION, "ansible_host": names[host],
                           "ansible_python_interpreter": "/usr/bin/python3",
                           "sparkforge_fabric_address": addresses[host], "xhost_ifname": SWITCH_PORT}
        # The first eight now; the other eight join for the sixteen-node search only (its test starts them).
        start_hosts(dict((names[h], specs[names[h]]) for h in SWITCH))
        checkout = user_checkout(root)
        # Not made here: cluster.yml makes it, as in a fresh checkout.
        reports = root / "checkout" / "reports"
        group = common_vars()
        group.update(cluster_fabric_topology="switch", cluster_fabric_subnet=str(subnet),
                     xhost_master_addr=addresses["s1"])
        everyone = hosts
        hosts = dict((h, everyone[h]) for h in SWITCH)
        cluster = {"inventory": os.path.join(checkout, "inventory", "sparks.yml"),
                   "names": dict((h, names[h]) for h in SWITCH), "root": root, "reports": reports,
                   "addresses": addresses, "subnet": subnet, "checkout": checkout, "hosts": hosts, "group": group,
                   "later": dict((h, (names[h], specs[names[h]], everyone[h])) for h in SIXTEEN[len(SWITCH):])}
        write_inventory(cluster, hosts, group)
        yield cluster
    finally:
        cleanup(names.values(), [net])


def guide_lines(lines, inventory):
    """The section's check and real run, as written: the same line, the first with --check."""
    check = [line for line in lines if line.endswith(" --check")]
    real = [line for line in lines if line.startswith("ansible-playbook") and not line.endswith(" --check")]
    assert len(check) == 1 and real == [check[0][:-len(" --check")]], lines
    assert real[0].startswith("ansible-playbook playbooks/cluster.yml -i inventory/%s.yml " % inventory), real
    return check[0], real[0]


def verdicts(cluster, hosts):
    return dict((h, json.loads((cluster["reports"] / ("xhost-%s.json" % h)).read_text())) for h in hosts)


def test_a_switch_of_eight_check_then_run(switch):
    check, real = guide_lines(readme.commands("linking-sparks.md", heading="### A switch, any number of nodes"),
                              "sparks")
    # The guide's lines for two nodes are these very lines (test_xhost_containers runs the CLI's check and the
    # real line on its pair): the --check line is run as written here.
    assert [check, real] == readme.commands("linking-sparks.md")[:2], readme.commands("linking-sparks.md")
    before = snapshots(switch)
    rc, out = run(check, switch)
    assert rc == 0, out[-5000:]
    assert snapshots(switch) == before, "check mode changed a host"
    # A fresh checkout has no reports/ (ignored by git): check mode makes none, the run makes it (issue 36 item 0).
    assert not switch["reports"].exists()

    rc, out = run(real, switch)
    assert rc == 0, out[-6000:]
    addr, prefix = switch["addresses"], switch["subnet"].prefixlen
    assert (switch["reports"] / "cluster-hostfile").read_text() == "".join("%s slots=1\n" % addr[h] for h in SWITCH)
    for host in SWITCH:
        rc, text = sh(switch, host, "cat %s /etc/profile.d/sparkforge.sh; ip -4 -o addr show dev %s; "
                                    "cat /sys/class/net/%s/mtu" % (DROPIN, SWITCH_PORT, SWITCH_PORT))
        assert "    %s:\n" % SWITCH_PORT in text and "        - %s/%d\n" % (addr[host], prefix) in text, text
        assert "    enP2p1s0f1np1:\n" in text and "mtu: 9000" in text, text
        assert "GLOO_SOCKET_IFNAME=%s" % SWITCH_PORT in text, text
        assert "inet %s/%d" % (addr[host], prefix) in text and text.strip().endswith("9000"), text
    # SSH over the fabric addresses: the first node to every other one, and the last one back.
    logins = "; ".join("ssh -o BatchMode=yes %s echo reached %s || echo FAILED %s" % (addr[h], h, h)
                       for h in SWITCH[1:])
    rc, text = sh(switch, "s1", logins)
    assert rc == 0 and text.split() == " ".join("reached %s" % h for h in SWITCH[1:]).split(), text
    rc, text = sh(switch, "s8", "ssh -o BatchMode=yes %s echo reached s1" % addr["s1"])
    assert rc == 0 and text.strip() == "reached s1", text
    # The pairs in rounds (28 pairs, 7 rounds of 4), the collective over eight, a pass per node.
    summary = json.loads((switch["reports"] / "xhost.json").read_text())
    assert summary["passed"] and summary["backend"] == "gloo" and summary["hosts"] == SWITCH, summary.get("verdict")
    pairs = summary["judged"]["pairs"]
    assert sorted((p["a"], p["b"]) for p in pairs) == [(a, b) for i, a in enumerate(SWITCH) for b in SWITCH[i + 1:]]
    assert all(p["exact"] and p["gbs"] > 0 and p["link_gbps"] == 1.0 for p in pairs), pairs
    assert [(r["op"], r["nodes"], r["exact"]) for r in summary["collectives"]] == [
        ("all_reduce", 8, True), ("all_gather", 8, True)], summary["collectives"]
    assert all(v["verdict"] == "pass" for v in verdicts(switch, SWITCH).values())


def test_the_node_with_another_torch_is_named_before_any_collective(switch):
    hosts = json.loads(json.dumps(switch["hosts"]))
    hosts[ODD]["xhost_env"] = {"PYTHONPATH": "/opt/xtorch-odd"}
    try:
        write_inventory(switch, hosts, switch["group"])
        rc, out = run(readme.command("collectives-across-hosts.md", "ansible-playbook playbooks/xhost.yml"), switch)
    finally:
        write_inventory(switch, switch["hosts"], switch["group"])
    assert rc != 0, out[-5000:]
    why = "parity: torch %s, where s1 has 2.13.0+cpu" % ODD_TORCH
    assert "%s: fail (%s)" % (ODD, why) in out, out[-5000:]
    assert START_TASK not in out, "a collective started though a node differs"
    found = verdicts(switch, SWITCH)
    assert found[ODD] == {"node": ODD, "verdict": "fail", "reasons": [why]}, found[ODD]
    for host in SWITCH:
        if host != ODD:
            assert found[host]["verdict"] == "not checked", found[host]
            assert "%s: not checked (a node differs: %s)" % (host, ODD) in out, out[-5000:]


def test_sixteen_on_the_switch_the_grouped_search_names_the_slowed_node(switch):
    """Issue 44 item 4 at the manifest's own threshold (16, not lowered): eight more hosts join the switch's L2
    network, s3's fabric interface is shaped with the host's ``tc`` (a token bucket at 4 Mbit/s: its collectives' busbw
    at most about 0.5% of the stand-in 1 Gb/s link, where 1% fails; slower only lengthens the run), and the guide's
    cross-host line over all sixteen fails s3 alone, found by the grouped search (ceil(sqrt(16)) = 4 groups, the
    failed one bisected, the suspect against a healthy buddy) in fewer rounds than the round-robin's 15, the
    rounds counted in xhost.json and xhost.md. No pair is run. The eight newcomers were never through
    cluster.yml: the check needs only their addresses (podman's, on the interface named after the port) and
    torch."""
    later = switch["later"]
    start_hosts(dict((name, spec) for name, spec, _ in later.values()))
    everyone = dict(switch["hosts"], **dict((h, entry) for h, (_, _, entry) in later.items()))
    names = dict(switch["names"], **dict((h, name) for h, (name, _, _) in later.items()))
    assert sorted(everyone) == sorted(SIXTEEN) and len(set(names.values())) == len(SIXTEEN)
    shaped = host_netns(names[SLOW], "tc", "qdisc", "add", "dev", SWITCH_PORT, "root", "tbf", "rate", "4mbit",
                        "burst", "10kb", "latency", "1s")
    assert shaped.returncode == 0, shaped.stdout
    try:
        write_inventory(switch, everyone, switch["group"])
        rc, out = run(readme.command("collectives-across-hosts.md", "ansible-playbook playbooks/xhost.yml"), switch)
    finally:
        write_inventory(switch, switch["hosts"], switch["group"])
        removed = host_netns(names[SLOW], "tc", "qdisc", "del", "dev", SWITCH_PORT, "root")
        cleanup([name for name, _, _ in later.values()], [])
    assert removed.returncode == 0, removed.stdout
    assert rc != 0, out[-5000:]
    assert dict((h, r["failed"]) for h, r in recap(out).items() if h != "localhost") == \
        dict((h, int(h == SLOW)) for h in SIXTEEN), recap(out)

    summary = json.loads((switch["reports"] / "xhost.json").read_text())
    screen = summary.get("screen") or {}
    assert sorted(summary["hosts"]) == sorted(SIXTEEN) and summary["verdict"]["failed"] == [SLOW], \
        (summary["verdict"], screen)
    assert screen["mode"] == "groups" and list(screen["bad"]) == [SLOW], screen
    assert screen["round_robin_rounds"] == 15 and screen["rounds"] < 15, screen
    assert summary["judged"]["pairs"] == [], summary["judged"]
    assert "Grouped search (screening): %d rounds for 16 nodes, where the round-robin pairs take 15; bad: %s." % (
        screen["rounds"], SLOW) in (switch["reports"] / "xhost.md").read_text()
    found = verdicts(switch, SIXTEEN)
    assert found[SLOW]["verdict"] == "fail", found[SLOW]
    assert found[SLOW]["reasons"][0].startswith("screening: failed against healthy buddy s"), found[SLOW]
    assert "of the 1 Gb/s link, below 1%" in found[SLOW]["reasons"][0], found[SLOW]
    for host in SIXTEEN:
        if host != SLOW:
            assert found[host] == {"node": host, "verdict": "pass", "reasons": []}, found[host]
    assert "%s: slow link (" % SLOW in out or "%s: failed (" % SLOW in out, out[-5000:]


def ring_plan(pool):
    """{host: {interface: address}} and the cables' subnets, as the guide describes the ring: node i's port 0 to
    node i+1's port 1, a /24 per cable and twin in order, the port-0 end .1 and the port-1 end .2."""
    subnets = list(ipaddress.ip_network(pool).subnets(new_prefix=24))
    plan, cables = dict((h, {}) for h in RING), []
    for i, host in enumerate(RING):
        peer = RING[(i + 1) % len(RING)]
        for k in range(2):
            net = subnets[2 * i + k]
            plan[host][PORT0[k]] = str(net.network_address + 1)
            plan[peer][PORT1[k]] = str(net.network_address + 2)
            cables.append((net, (host, PORT0[k]), (peer, PORT1[k])))
    return plan, cables


@pytest.fixture(scope="module")
def ring(torch_dir, tmp_path_factory):
    tag = uuid.uuid4().hex[:6]
    mgmt = "sparkforge-xrm-%s" % tag
    nets = [mgmt]
    names = dict((h, "sparkforge-xring-%s-%s" % (tag, h)) for h in RING)
    root = tmp_path_factory.mktemp("ring")
    pool = "10.%d.%d.0/21" % (random.randint(200, 250), 8 * random.randint(0, 31))
    plan, cables = ring_plan(pool)
    try:
        subnet = create_network(mgmt)
        management = host_addresses(subnet, RING)
        networks = dict((h, ["%s:interface_name=enP7s7,ip=%s" % (mgmt, management[h])]) for h in RING)
        for net, (a, a_if), (b, b_if) in cables:
            name = "sparkforge-xrc-%s-%s" % (tag, str(net.network_address).replace(".", "-"))
            nets.append(name)
            # A cable: no way out through it (internal), its gateway out of the ends' way (.1 and .2 are theirs).
            create_network(name, subnet=net, gateway=net.network_address + 254, internal=True)
            networks[a].append("%s:interface_name=%s,ip=%s" % (name, a_if, plan[a][a_if]))
            networks[b].append("%s:interface_name=%s,ip=%s" % (name, b_if, plan[b][b_if]))
        # perftest's stand-in on PATH: each cable's bandwidth test runs over the cable's own subnets.
        # A ring checks the NCCL each node's venv loads (refused unread): the provisioned venv's library stands in.
        specs = dict((names[h], (networks[h], ["%s:/opt/xtorch:ro" % torch_dir, "%s:/usr/local/bin/ib_write_bw:ro"
                                               % IB_WRITE_BW] + stand_in_tree(root, h, "spark", cabled="both")
                                 + stand_in_venv(root, h)))
                     for h in RING)
        start_hosts(specs)
        # The management names resolve as a site's DNS would (podman's CNI here has no DNS plugin): gloo's
        # rendezvous is the first host's inventory address, as with real Sparks.
        names_file = "".join("%s %s\n" % (management[h], names[h]) for h in RING)
        for h in RING:
            rc, text = sh({"names": names}, h, "printf '%s' >> /etc/hosts" % names_file)
            assert rc == 0, text
        checkout = user_checkout(root)
        reports = root / "checkout" / "reports"
        reports.mkdir()
        group = common_vars()
        group.update(cluster_fabric_topology="ring", cluster_fabric_mode="static", cluster_fabric_subnet=pool,
                     cluster_fabric_rdma_bw_duration=1)
        # A ring is judged against its fabric port's rate, which the stand-in sysfs tree reports as a real
        # ConnectX-7 port does (200 Gb/s), not a pinned link_speed_gbps (issue 54 item 2): the check's own
        # interface is the management port there. gloo on two shared cores reaches a few Mb/s of that, so the
        # fractions (the acceptance's own variables) are set that low; the verdict still names the rate's source.
        del group["xhost_link_speed_gbps"]
        group.update(xhost_min_link_fraction=0.00005, xhost_min_busbw_fraction=0.00002)
        hosts = dict((h, {"ansible_connection": CONNECTION, "ansible_host": names[h],
                          "ansible_python_interpreter": "/usr/bin/python3"}) for h in RING)
        cluster = {"inventory": os.path.join(checkout, "inventory", "ring.yml"), "names": names, "root": root,
                   "reports": reports, "plan": plan, "cables": cables, "checkout": checkout}
        write_inventory(cluster, hosts, group)
        yield cluster
    finally:
        cleanup(names.values(), nets)


ECHO = r'''
import socket, struct, sys
src, dst = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
s.settimeout(5)
s.bind((src, 0))
s.sendto(struct.pack("!BBHHH", 8, 0, 0, 0, 1) + b"sparkforge", (dst, 0))
data, peer = s.recvfrom(2048)
print("echo reply from %s" % peer[0] if data[0] == 0 and peer[0] == dst else "no reply: %r %r" % (peer, data[:1]))
'''


def test_a_ring_of_three_check_then_run_then_the_cabling_then_a_rerun(ring):
    check, real = guide_lines(readme.commands("linking-sparks.md", heading="### A ring of three or four"), "ring")
    before = snapshots(ring)
    rc, out = run(check, ring)
    assert rc == 0, out[-5000:]
    assert snapshots(ring) == before, "check mode changed a host"

    rc, out = run(real, ring)
    assert rc == 0, out[-6000:]
    for host in RING:
        rc, text = sh(ring, host, "cat %s /etc/profile.d/sparkforge.sh" % DROPIN)
        for interface, address in ring["plan"][host].items():
            assert "    %s:\n" % interface in text and "        - %s/24\n" % address in text, text
        assert "NCCL_SOCKET_IFNAME==enP7s7" in text or "NCCL_SOCKET_IFNAME='=enP7s7'" in text, text
        assert "GLOO_SOCKET_IFNAME=enP7s7" in text and "NCCL_IB_SUBNET_AWARE_ROUTING=1" in text, text
        # All four functions of the two ports, and the manifest's plugin setting for a ring.
        hca = "=rocep1s0f0:1,roceP2p1s0f0:1,rocep1s0f1:1,roceP2p1s0f1:1"
        assert "NCCL_IB_HCA=%s" % hca in text or "NCCL_IB_HCA='%s'" % hca in text, text
        assert "NCCL_NET_PLUGIN=none" in text, text
    # The cabling: each end of each cable reaches the other end, from its own address over its named interface.
    for net, (a, a_if), (b, b_if) in ring["cables"]:
        for (me, my_if), (peer, peer_if) in (((a, a_if), (b, b_if)), ((b, b_if), (a, a_if))):
            src, dst = ring["plan"][me][my_if], ring["plan"][peer][peer_if]
            rc, text = sh(ring, me, "ip route get %s from %s; python3 -c '%s' %s %s" % (dst, src, ECHO, src, dst))
            assert rc == 0 and " dev %s " % my_if in text and "echo reply from %s" % dst in text, (net, me, text)
    # Each cable measured both ways before the collectives, both twins at once over its two subnets (the stand-in's
    # 97.6 Gb/s each), and every node's cables judged against the floor.
    cables = json.loads((ring["reports"] / "cluster-cables.json").read_text())
    assert [(c["name"], sorted(c["measured"].values())) for c in cables["cables"]] == [
        ("%s:%s - %s:%s" % (a, PORT0[0], b, PORT1[0]), [195.2, 195.2]) for a, b in (("r1", "r2"), ("r2", "r3"),
                                                                                   ("r3", "r1"))], cables
    assert cables["unmeasured"] == [] and cables["failed_hosts"] == [], cables
    assert [len(cables["nodes"][h]["cables"]) for h in RING] == [2, 2, 2], cables["nodes"]
    summary = json.loads((ring["reports"] / "xhost.json").read_text())
    assert summary["passed"] and summary["hosts"] == RING, summary.get("verdict")
    assert sorted((p["a"], p["b"]) for p in summary["judged"]["pairs"]) == [("r1", "r2"), ("r1", "r3"), ("r2", "r3")]
    # Every node judged against its fabric port's rated speed, not the management port's (a veth: 10 Gb/s).
    rates = dict((h, (r["link_gbps"], r["link_source"])) for h, r in summary["per_host"].items())
    assert rates == dict((h, (200, "the fabric port's rated speed (fabric_facts port.link_gbps)")) for h in RING), rates
    assert [(r["op"], r["nodes"], r["exact"]) for r in summary["collectives"]] == [
        ("all_reduce", 3, True), ("all_gather", 3, True)]

    after = snapshots(ring)
    rc, out = run(real, ring)
    assert rc == 0, out[-5000:]
    assert sorted(recap(out)) == RING and all(r["failed"] == 0 for r in recap(out).values()), recap(out)
    assert changed_tasks(out) == {START_TASK}, changed_tasks(out)
    assert snapshots(ring) == after, "the rerun changed a host"

    # Issue 44 item 3 on the ring's hosts: a cable at 13 Gb/s and a function trained at half its PCIe width, each
    # named with its likely cause before any collective runs. r2's port-0 functions measure 6.5 Gb/s each (the
    # perftest stand-in's rates file on r2), so the direction r2 -> r3 carries 13 and fails both its ends; r1's port-1
    # twin trained at x2 of its x4 (r1's stand-in sysfs tree, mounted read-only there, edited here).
    rc, text = sh(ring, "r2", "echo '%s' > /etc/sparkforge-perftest-rates.json"
                  % json.dumps({"rocep1s0f0": 6.5, "roceP2p1s0f0": 6.5}))
    assert rc == 0, text
    width = os.path.join(str(ring["root"]), "r1", "sys", "devices", "pci0002:00", "0002:00:00.0", "0002:01:00.1",
                         "current_link_width")
    with open(width, "w") as handle:
        handle.write("2\n")
    rc, out = run(real, ring)
    assert rc != 0, out[-5000:]
    cables = json.loads((ring["reports"] / "cluster-cables.json").read_text())
    assert sorted(cables["failed_hosts"]) == RING, cables
    reasons = dict((h, "; ".join(cables["nodes"][h]["reasons"])) for h in RING)
    slow = "r2 -> r3: 13 Gb/s, below the floor of 184 Gb/s (degraded ConnectX-7 initialisation: reboot that node)"
    narrow = ("enP2p1s0f1np1: PCIe x2 of x4 (the PCIe link trained below the device's maximum: update the "
              "firmware/BIOS)")
    assert slow in reasons["r2"] and slow in reasons["r3"] and slow not in reasons["r1"], reasons
    # A PCIe link is its node's own: the cable's far end (r3) is not failed for it.
    assert narrow in reasons["r1"] and narrow not in reasons["r2"] + reasons["r3"], reasons
    for host in RING:
        assert "%s: fail (" % host in out, out[-5000:]
    # No task after the cables' verdict: no collective ran.
    assert "TASK [" not in out.split("Fail the nodes whose cables fail")[-1], out[-5000:]
