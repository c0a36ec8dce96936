"""A cluster on container hosts: playbooks/cluster.yml as the guide "Linking Sparks" runs it, then the
cross-host check (gloo on the CPU) with a host that never joins.

Two containers from the test bed's amd64 image (molecule/shared/build-images.sh) on a podman bridge
network of their own (MTU 9000), reached by Ansible through the podman connection. What is real and
what stands in:

- real: the playbook, its roles and modules, run with the guide's command lines as written (and the CLI's
  `sparkforge cluster ... --check` of docs/guides/api-cli-ee.md), from a
  stand-in checkout (helpers.user_checkout) whose inventory/sparks.yml is the cluster; Debian's netplan.io, whose ``netplan generate`` (the role's
  default command) validates each host's drop-in in /etc/netplan and renders it for systemd-networkd;
  sshd on each host with a host key of its own, and the logins between the hosts that cluster_ssh set
  up (``ssh -o BatchMode=yes`` from inside a container, StrictHostKeyChecking on); the revert timer
  armed and confirmed after the apply; torch's gloo between the hosts (CPU torch 2.13.0 installed once
  into ~/.cache/sparkforge and mounted read-only).
- stand-ins: the NICs. A container cannot have a ConnectX-7. Each host reads a sysfs tree built by the
  unit tests' builder (fabric_trees: x1 and x2 are DGX Sparks, four CX-7 functions with their RoCE
  twins, port f1 cabled on both functions, the 10 GbE management port enP7s7; x2 is a GH200, mlx5_*
  InfiniBand HCAs with ipoib netdevs, one of two cabled), mounted read-only where the role's test-only
  ``cluster_fabric_sysfs_root`` / ``cluster_fabric_proc_root`` point. The one real interface of each
  container (its end of the bridge) is named as the host's fabric port (podman's
  ``interface_name=``: enp1s0f1np1, ibp16s0) and holds the inventory's fabric address (podman's ``ip=``,
  MTU 9000 from the network), so NCCL's and gloo's ``*_SOCKET_IFNAME`` name a real interface and the
  collectives run over the configured fabric address. podman puts that address there when the
  container starts, not netplan: there is no systemd-networkd in a container, so ``netplan apply`` is
  the one step left out (``cluster_fabric_apply_command: []``); the test checks that what netplan
  rendered is what the interface has. The link speed the check judges against is the stand-in's
  1 Gb/s (``xhost_link_speed_gbps``): the veth's own figure (10000 Mb/s) is the kernel's, not a link's.
- stand-ins too: what each node's health reading reads (the test bed's fake nvidia-smi, a journalctl printing an
  H200's real kernel lines, the driver's version file in the stand-in proc tree: health_stand_ins), so the play's
  sampler, its reading and the comparison into the report run, though gloo puts no load on a GPU.

The NCCL path runs on the 2-GPU machine (bench/gpu/run_xhost_2gpu.sh).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import uuid

import pytest
import yaml

import readme
from helpers import CONNECTION, GB10, GH200, fake_smi, image_present, run_module, user_checkout
from xhost_hosts import (DROPIN, PROCFS, SYSFS, cleanup, create_network, host_addresses, run, sh, snapshots,
                         stand_in_tree, start_hosts)

# host: (profile, its fabric port: the container's real interface is named after it)
HOSTS = {"x1": ("spark", "enp1s0f1np1"), "x2": ("gh200", "ibp16s0")}

needs_image = pytest.mark.skipif(not image_present(), reason="podman or the test bed's amd64 image missing")

NODE_HEALTH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "collections", "ansible_collections",
                           "sparkforge", "stack", "tests", "unit", "fixtures", "node_health")


def health_stand_ins(root, host, profile):
    """What the node health reading reads, stood in at its boundaries: the test bed's fake nvidia-smi (the GPU under
    the same load on both hosts) and a journalctl printing an H200's real kernel lines, mounted at /usr/local/sbin
    (first on the image's PATH); /proc/driver/nvidia/version in the host's stand-in proc tree. Volume specs."""
    bindir = os.path.join(str(root), host, "bin")
    os.makedirs(bindir)
    gpu = dict(GB10 if profile == "spark" else GH200, persistence_mode="Enabled",
               **{"clocks.sm": 1980, "clocks.max.sm": 1980, "power.draw": 61.3, "power.limit": None})
    os.rename(os.path.join(bindir, os.path.basename(fake_smi(bindir, host, gpu, "/usr/bin/python3", "/usr/local/sbin"))),
              os.path.join(bindir, "nvidia-smi"))
    with open(os.path.join(bindir, "journalctl"), "w") as handle:
        handle.write("#!/bin/sh\ncat /usr/local/sbin/kernel.log\n")
    os.chmod(os.path.join(bindir, "journalctl"), 0o755)
    shutil.copy(os.path.join(NODE_HEALTH, "dmesg-h200.txt"), os.path.join(bindir, "kernel.log"))
    os.makedirs(os.path.join(str(root), host, "proc", "driver", "nvidia"))
    shutil.copy(os.path.join(NODE_HEALTH, "version-open-gb10.txt"),
                os.path.join(str(root), host, "proc", "driver", "nvidia", "version"))
    return ["%s:/usr/local/sbin:ro" % bindir]


def readme_cluster_commands():
    """The guide "Linking Sparks"'s first command block (a pair of Sparks, inventory/sparks.yml), as written; the
    topologies' blocks under "Topologies" are tests/e2e/test_xhost_topologies.py's."""
    return readme.commands("linking-sparks.md")[:2]


@pytest.fixture(scope="module")
def cluster(torch_dir, tmp_path_factory):
    tag = uuid.uuid4().hex[:6]
    net = "sparkforge-xnet-%s" % tag
    names = dict((h, "sparkforge-xhost-%s-%s" % (tag, h)) for h in HOSTS)
    root = tmp_path_factory.mktemp("cluster")
    try:
        subnet = create_network(net)
        addresses = host_addresses(subnet, sorted(HOSTS))
        hosts, specs = {}, {}
        for host, (profile, port) in sorted(HOSTS.items()):
            specs[names[host]] = (["%s:interface_name=%s,ip=%s" % (net, port, addresses[host])],
                                  ["%s:/opt/xtorch:ro" % torch_dir] + stand_in_tree(root, host, profile)
                                  + health_stand_ins(root, host, profile))
            hosts[host] = {"ansible_connection": CONNECTION, "ansible_host": names[host],
                           "ansible_python_interpreter": "/usr/bin/python3",
                           "sparkforge_fabric_address": addresses[host],
                           # playbooks/xhost.yml run on its own (cluster.yml sets these from the fabric).
                           "xhost_ifname": port}
        start_hosts(specs)
        # The guide's checkout, where its commands run as written: the cluster is inventory/sparks.yml. The
        # reports and the cluster's key pair are the roles' defaults there (reports/, .sparkforge-cluster-keys/ of
        # the directory the lines run in), as the guide sets none.
        checkout = user_checkout(root)
        reports = root / "checkout" / "reports"
        reports.mkdir()
        group = {
            "cluster_fabric_subnet": str(subnet), "cluster_ssh_user": "root",
            "cluster_fabric_sysfs_root": SYSFS, "cluster_fabric_proc_root": PROCFS,
            "cluster_fabric_apply_command": [],
            "runtime_env_sm_archs": ["sm_121"], "runtime_env_venv_hook": False,
            "cluster_xhost_env": {"PYTHONPATH": "/opt/xtorch"},
            "xhost_backend": "gloo", "xhost_python": "/usr/bin/python3", "xhost_env": {"PYTHONPATH": "/opt/xtorch"},
            "xhost_master_addr": addresses["x1"],
            "xhost_link_speed_gbps": 1.0, "xhost_sizes": [1 << 20, 4 << 20], "xhost_iters": 3,
            "xhost_collective_sizes": [1 << 20], "xhost_collective_iters": 3, "xhost_warmup_iters": 1,
            # gloo's collectives on the CPU of a loaded 2-core machine run at 0.3 Gb/s or less (28% of the
            # stand-in's 1 Gb/s once, in a full run): what this test proves is that the collective runs over the
            # fabric addresses, exact, with a verdict per host; its speed against a link is the GPU runs'
            # (docs/results/xhost-4gpu-h100-2026-11-27). The floor only keeps a stalled collective failing.
            "xhost_min_busbw_fraction": 0.01,
            "xhost_join_timeout": 20, "xhost_op_timeout": 60,
            # Each node's health, on here although gloo runs on the CPU: the play's sampler, its reading and the
            # comparison run over the stand-ins (health_stand_ins).
            "xhost_node_health": True, "xhost_node_health_proc_root": PROCFS}
        inventory = os.path.join(checkout, "inventory", "sparks.yml")
        with open(inventory, "w") as handle:
            yaml.safe_dump({"all": {"children": {"sparks": {"hosts": hosts, "vars": group}}}}, handle)
        yield {"inventory": inventory, "names": names, "root": root, "reports": reports,
               "addresses": addresses, "subnet": subnet, "checkout": checkout}
    finally:
        cleanup(names.values(), [net])


@needs_image
def test_cluster_check_then_run(cluster):
    check, converge = readme_cluster_commands()
    assert check.startswith("ansible-playbook playbooks/cluster.yml ") and check.endswith(" --check"), check
    assert converge == check[:-len(" --check")], converge
    # A fleet summary from an earlier provisioning run: the cross-host check adds the slowest link to it.
    (cluster["reports"] / "fleet-summary.json").write_text(json.dumps({"x1": {"state": "provisioned"}}))

    # --check first: the CLI's line (docs/guides/api-cli-ee.md, "Python API and CLI") as written, on the same
    # cluster as the checkout's inventory/site.yml: every host ok, nothing changed. (The guide's own --check line,
    # the same for every topology, runs as written on the switch: tests/e2e/test_xhost_topologies.py.)
    # x1's owner already has a known_hosts of their own, 0600: the role adds its block and leaves the mode (issue 52).
    sh(cluster, "x1", "mkdir -p -m 700 /root/.ssh && echo 'owner.example ssh-ed25519 AAAAownerkey' > "
                      "/root/.ssh/known_hosts && chmod 600 /root/.ssh/known_hosts")
    before = snapshots(cluster)
    cli = readme.command("api-cli-ee.md", ".venv/bin/sparkforge cluster", heading="## Python API and CLI")
    assert cli.split("  #")[0].strip() == ".venv/bin/sparkforge cluster -i inventory/site.yml -g sparks --check", cli
    shutil.copy(cluster["inventory"], os.path.join(cluster["checkout"], "inventory", "site.yml"))
    rc, out = run(cli, cluster)
    assert rc == 0, out[-5000:]
    assert re.search(r"^cluster: \S+ \(rc=0,", out, re.M), out[-5000:]
    for host in HOSTS:
        assert re.search(r"^%s\s+\S+\s+\d+\s+\d+\s+0\s+\d+$" % host, out, re.M), out[-5000:]
    assert snapshots(cluster) == before, "sparkforge cluster --check changed a host"
    assert not (cluster["reports"] / "cluster-hostfile").exists()

    rc, out = run(converge, cluster)
    assert rc == 0, out[-6000:]
    addr = cluster["addresses"]
    prefix = cluster["subnet"].prefixlen
    assert (cluster["reports"] / "cluster-hostfile").read_text() == "".join(
        "%s slots=1\n" % addr[h] for h in ("x1", "x2"))
    for host, (profile, port) in HOSTS.items():
        # The drop-in, validated and rendered by Debian's netplan (no revert left pending), and the real
        # interface holding what netplan rendered.
        rc, text = sh(cluster, host, "cat %s; ls %s.sparkforge-pending 2>&1; cat /run/systemd/network/10-netplan-%s."
                                     "network; ip -4 -o addr show dev %s; cat /sys/class/net/%s/mtu"
                                     % (DROPIN, DROPIN, port, port, port))
        assert "    %s:\n" % port in text and "        - %s/%d\n" % (addr[host], prefix) in text, text
        assert "No such file" in text, text
        assert "Address=%s/%d" % (addr[host], prefix) in text, text
        # Jumbo frames on the RoCE port; an IPoIB port keeps IPoIB's MTU (the drop-in sets none).
        assert ("MTUBytes=9000" in text) == (profile == "spark"), text
        assert "inet %s/%d" % (addr[host], prefix) in text and text.strip().endswith("9000"), text
        if profile == "spark":
            assert "    enP2p1s0f1np1:\n" in text, text   # the twin: the MTU, no address
        # runtime_env wrote the fabric's variables.
        rc, env = sh(cluster, host, "cat /etc/profile.d/sparkforge.sh")
        assert "GLOO_SOCKET_IFNAME=%s" % port in env and "NCCL_IB_DISABLE=0" in env, env
        hca = "=rocep1s0f1:1,roceP2p1s0f1:1" if profile == "spark" else "=mlx5_0:1"
        assert "NCCL_IB_HCA=%s" % hca in env or "NCCL_IB_HCA='%s'" % hca in env, env
    # Passwordless SSH between the hosts, over the fabric addresses, host keys checked.
    for a, b in (("x1", "x2"), ("x2", "x1")):
        rc, text = sh(cluster, a, "ssh -o BatchMode=yes %s cat /etc/hostname" % addr[b])
        assert rc == 0, text
        rc, text = sh(cluster, a, "ssh -G %s | grep -i '^stricthostkeychecking'" % addr[b])
        assert "stricthostkeychecking true" in text.lower() or "stricthostkeychecking yes" in text.lower(), text
    # Each peer is known by its own host key.
    rc, known = sh(cluster, "x1", "cat /root/.ssh/known_hosts")
    assert "owner.example ssh-ed25519 AAAAownerkey" in known, known
    rc, mode = sh(cluster, "x1", "stat -c %a /root/.ssh/known_hosts")
    assert mode.strip() == "600", mode   # the owner's mode kept (it was forced to 0644)
    keys = set()
    for host in HOSTS:
        rc, pub = sh(cluster, host, "cut -d' ' -f2 /etc/ssh/ssh_host_ed25519_key.pub")
        assert pub.strip() in known, known
        keys.add(pub.strip())
    assert len(keys) == 2
    # The cross-host check ran over the fabric: a world of 2, all_reduce, the pair.
    summary = json.loads((cluster["reports"] / "xhost.json").read_text())
    assert summary["passed"] and summary["backend"] == "gloo" and summary["missing"] == []
    assert summary["hosts"] == ["x1", "x2"]
    pairs = summary["judged"]["pairs"]
    assert [(p["a"], p["b"]) for p in pairs] == [("x1", "x2")]
    assert all(p["exact"] and p["gbs"] > 0 and p["link_gbps"] == 1.0 for p in pairs), pairs
    assert "Slowest pair:" in (cluster["reports"] / "xhost.md").read_text()
    # The collective over both hosts, exact, and a verdict per host beside xhost.json.
    assert [(r["op"], r["exact"]) for r in summary["collectives"]] == [("all_reduce", True), ("all_gather", True)]
    for host in ("x1", "x2"):
        assert json.loads((cluster["reports"] / ("xhost-%s.json" % host)).read_text())["verdict"] == "pass"
    # Each node's health in the same report: sampled while the collective ran, its driver and kernel log read.
    health = dict((v["node"], v) for v in summary["health"])
    assert [health[h]["verdict"] for h in ("x1", "x2")] == ["pass", "pass"], health
    assert all(v["driver"] == {"flavour": "open", "version": "580.95.05"} and v["persistence"] == "Enabled"
               and v["figures"] == {"peak_sm_mhz": 1980.0, "peak_power_w": 61.3} and v["xid"] == []
               for v in health.values()), health
    assert json.loads((cluster["reports"] / "xhost-x2.json").read_text())["health"]["verdict"] == "pass"
    assert "| x1 | pass | open 580.95.05 | Enabled | 1980 | 61.3 | 0 | 0 | - |" in \
        (cluster["reports"] / "xhost.md").read_text()
    fleet = json.loads((cluster["reports"] / "fleet-summary.json").read_text())
    assert fleet["x1"] == {"state": "provisioned"} and fleet["cross_host"]["passed"]
    assert fleet["cross_host"]["slowest"]["gbs"] == min(p["gbs"] for p in pairs)



@needs_image
def test_bad_inputs_are_refused_before_any_change(cluster):
    """A port without a link, a duplicate address and the management interface named as fabric, in one
    run: the plan refuses them all, naming each host, and no host changes."""
    with open(cluster["inventory"]) as handle:
        inventory = yaml.safe_load(handle)
    hosts = inventory["all"]["children"]["sparks"]["hosts"]
    hosts["x1"]["sparkforge_fabric_interface"] = "enp1s0f0np0"
    hosts["x2"]["sparkforge_fabric_address"] = cluster["addresses"]["x1"]
    hosts["x2"]["sparkforge_fabric_interface"] = "enP9p1s0"
    with open(cluster["inventory"]) as handle:
        good = handle.read()
    before = snapshots(cluster)
    try:
        with open(cluster["inventory"], "w") as handle:
            yaml.safe_dump(inventory, handle)
        rc, out = run(readme_cluster_commands()[1], cluster)
    finally:
        with open(cluster["inventory"], "w") as handle:
            handle.write(good)
    assert rc != 0, out[-4000:]
    assert "the cluster's fabric cannot be configured, nothing changed" in out, out[-4000:]
    assert ("x1: enp1s0f0np0 has no link but enp1s0f1np1 has: move the cable from the port of enp1s0f1np1 / "
            "enP2p1s0f1np1 to the port of enp1s0f0np0") in out, out[-4000:]
    assert "x2: address %s is already x1's" % cluster["addresses"]["x1"] in out, out[-4000:]
    assert "x2: enP9p1s0 is the management interface (carries the default route)" in out, out[-4000:]
    assert snapshots(cluster) == before


@needs_image
def test_a_host_that_never_joins_is_named_within_the_join_timeout(cluster):
    """playbooks/xhost.yml on its own, x2 stopped: Ansible finds it unreachable, the others wait for it for
    the join timeout only (each host's xhost_ifname is its fabric port, from the inventory)."""
    subprocess.run(["podman", "stop", "-t", "0", cluster["names"]["x2"]], check=True, stdout=subprocess.DEVNULL)
    with open(cluster["inventory"]) as handle:
        inventory = yaml.safe_load(handle)
    inventory["all"]["children"]["sparks"]["vars"].update(xhost_master_port=29612, xhost_join_timeout=10)
    with open(cluster["inventory"], "w") as handle:
        yaml.safe_dump(inventory, handle)
    rc, out = run(readme.command("collectives-across-hosts.md", "ansible-playbook playbooks/xhost.yml"), cluster)
    assert rc != 0, out[-4000:]
    summary = json.loads((cluster["reports"] / "xhost.json").read_text())
    assert summary["missing"] == ["x2"] and not summary["passed"], summary
    assert summary["per_host"]["x2"]["status"] == "unreachable"
    assert summary["per_host"]["x1"]["status"] == "not checked", summary["per_host"]
    assert json.loads((cluster["reports"] / "xhost-x1.json").read_text())["verdict"] == "not checked"
    assert json.loads((cluster["reports"] / "xhost-x2.json").read_text())["verdict"] == "fail"
    assert "x2 never joined within 10 s" in out
    # Ended by the join timeout (10 s), not by the play's own limit for a hung collective (minutes).
    assert cluster["seconds"] < 150, cluster["seconds"]


@pytest.mark.parametrize("change,message", [
    ({"hosts": ["a"]}, "need at least 2 hosts"),
    ({"hosts": ["a", "a"]}, "hosts has duplicates"),
    ({"host": "c"}, "c is not in the host list a, b"),
    ({"sizes": [1000001]}, "positive multiples of 4 bytes"),
    ({"join_timeout": 0}, "join_timeout must be positive"),
    ({"master_addr": ""}, "mode run needs master_addr"),
    ({"mode": "summarize", "min_link_fraction": 2.0}, "min_link_fraction must be between 0 and 1"),
])
def test_bad_input_fails_clearly_before_anything_runs(change, message):
    args = {"python": sys.executable, "host": "a", "hosts": ["a", "b"], "master_addr": "127.0.0.1", "backend": "gloo"}
    args.update(change)
    result, rc = run_module("xhost_collectives", args)
    assert rc != 0 and message in result["msg"], result
