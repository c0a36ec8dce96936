"""Container hosts for the cross-host tests and bench (tests/e2e/test_xhost_containers.py, test_xhost_topologies.py,
bench/xhost_containers.py): one place for the CPU torch they share, the stand-in fabric trees, the hosts on podman
networks and the few readers of a playbook's output.

A host is a container from the test bed's amd64 image with sshd started (a host key of its own), the unit tests'
stand-in sysfs tree mounted read-only where ``cluster_fabric_sysfs_root`` / ``cluster_fabric_proc_root`` point, and
one real interface per podman network, named after the port it stands for (podman's ``interface_name=``) and
holding the address the plan gives it (``ip=``). Real CPU torch 2.13.0, installed once into ~/.cache/sparkforge, is
mounted read-only at /opt/xtorch.
"""

import fcntl
import importlib.util
import ipaddress
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

from helpers import REPO, remove_containers, start_container, user_shell
from testbed import exec_, fs_snapshot

TORCH = "torch==2.13.0+cpu"
TORCH_DIR = os.path.expanduser("~/.cache/sparkforge/xhost-torch-2.13.0")
SYSFS, PROCFS = "/srv/sparkforge-fabric/sys", "/srv/sparkforge-fabric/proc"
DROPIN = "/etc/netplan/40-sparkforge-fabric.yaml"
START_TASK = "sparkforge.stack.xhost_collectives : Start the cross-host check on every host"

# The unit tests' stand-in sysfs trees (one builder for every fabric test).
_TREES = os.path.join(REPO, "collections", "ansible_collections", "sparkforge", "stack", "tests", "unit", "plugins",
                      "module_utils", "fabric_trees.py")
_spec = importlib.util.spec_from_file_location("fabric_trees", _TREES)
fabric_trees = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fabric_trees)


class Unavailable(Exception):
    """What the hosts need is missing here (the CPU torch cannot be installed): the caller skips."""


def ensure_torch():
    """Real torch for the containers' Python 3.11 (the CPU wheel this machine's pip finds), installed once; a lock
    beside it, since the modules that use it may run in two lanes at once."""
    os.makedirs(os.path.dirname(TORCH_DIR), exist_ok=True)
    with open(TORCH_DIR + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _install_torch()


def _install_torch():
    if not os.path.isdir(os.path.join(TORCH_DIR, "torch")):
        tmp = TORCH_DIR + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                               "--target", tmp, TORCH], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              universal_newlines=True)
        if proc.returncode != 0:
            raise Unavailable("cannot install %s for the containers: %s" % (TORCH, proc.stdout[-500:]))
        os.rename(tmp, TORCH_DIR)
    return TORCH_DIR


def create_network(name, subnet=None, gateway=None, internal=False, mtu=9000):
    """A podman bridge network (MTU 9000, jumbo frames as on the fabric); its subnet (podman's pick unless given).
    internal: no default route through it (a fabric cable, not the way out)."""
    cmd = ["podman", "network", "create", "--opt", "mtu=%d" % mtu]
    if subnet:
        cmd += ["--subnet", str(subnet)]
    if gateway:
        cmd += ["--gateway", str(gateway)]
    if internal:
        cmd.append("--internal")
    subprocess.run(cmd + [name], check=True, stdout=subprocess.DEVNULL, timeout=120)
    inspect = subprocess.run(["podman", "network", "inspect", name], check=True, stdout=subprocess.PIPE,
                             universal_newlines=True, timeout=120)
    return ipaddress.ip_network(json.loads(inspect.stdout)[0]["subnets"][0]["subnet"])


def host_addresses(subnet, hosts):
    """{host: address}: the hosts in order from the subnet's .11 (podman keeps the low addresses for its gateway)."""
    return dict((h, str(subnet.network_address + 11 + i)) for i, h in enumerate(hosts))


def remove_networks(names):
    for name in names:
        subprocess.run(["podman", "network", "rm", "-f", name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=120)


def start_host(name, networks, volumes):
    """One container host: its networks (podman --network specs), volumes, a host key of its own (the image carries
    none) and sshd."""
    start_container(name, network=networks, volumes=volumes)
    started = exec_(name, "ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key && "
                          "mkdir -p /run/sshd && /usr/sbin/sshd")
    if started.returncode != 0:
        raise RuntimeError("%s: sshd did not start: %s" % (name, started.stdout[-1000:]))


def start_hosts(specs):
    """Start several hosts at once ({name: (networks, volumes)}): podman and sshd start in parallel, the first error
    is raised after every start has ended (the caller removes what started)."""
    errors = []

    def one(name, networks, volumes):
        try:
            start_host(name, networks, volumes)
        except Exception as exc:     # noqa: BLE001 - reported below, with the host's name
            errors.append("%s: %s" % (name, exc))

    threads = [threading.Thread(target=one, args=(n,) + tuple(s)) for n, s in sorted(specs.items())]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError("; ".join(sorted(errors)))


def stand_in_tree(root, host, profile="spark", cabled="f1"):
    """The stand-in sysfs and proc trees of one host under root/host: a DGX Spark cabled on ``cabled`` ("f1", "f0",
    "both") or a GH200 with two HCAs, the second down. Returns the two volume specs that mount them."""
    sysfs, proc = os.path.join(str(root), host, "sys"), os.path.join(str(root), host, "proc")
    if profile == "spark":
        fabric_trees.spark(sysfs, proc, cabled=cabled)
    else:
        fabric_trees.gh200(sysfs, proc, hcas=2, down=(1,))
    return ["%s:%s:ro" % (sysfs, SYSFS), "%s:%s:ro" % (proc, PROCFS)]


def stand_in_venv(root, host, nccl="2.30.7"):
    """The stack venv a provisioned node has, as far as the cluster plan reads it: the nvidia-nccl wheel's library
    holding the version string NCCL writes into itself ("NCCL version 2.30.7+cuda13.0"; fabric_facts reads it, a
    ring refuses an NCCL it cannot read). Returns the volume spec that mounts it where sparkforge_venv points."""
    lib = os.path.join(str(root), host, "venv", "lib", "python3.11", "site-packages", "nvidia", "nccl", "lib")
    os.makedirs(lib, exist_ok=True)
    with open(os.path.join(lib, "libnccl.so.2"), "wb") as handle:
        handle.write(b"\x7fELF" + b"\0" * 60 + ("NCCL version %s+cuda13.0" % nccl).encode() + b"\0")
    return ["%s:/opt/sparkforge/venv:ro" % os.path.join(str(root), host, "venv")]


def cleanup(names, networks):
    """Remove the hosts, then their networks (also after a failure: called from a finally)."""
    remove_containers(names)
    remove_networks(networks)


def run(line, cluster):
    """One guide command line as written, in the stand-in checkout: (exit code, output). Each run's output and
    seconds stay in the cluster's temporary directory, for a person."""
    start = time.time()
    proc = user_shell(cluster["checkout"], line)
    cluster["seconds"] = time.time() - start
    cluster["runs"] = cluster.get("runs", 0) + 1
    with open(os.path.join(str(cluster["root"]), "run-%02d.log" % cluster["runs"]), "w") as handle:
        handle.write("%s\n%.1f s\n%s" % (line, cluster["seconds"], proc.stdout))
    return proc.returncode, proc.stdout


def snapshots(cluster):
    """Every host's filesystem snapshot, taken at once."""
    out = {}

    def one(host, name):
        out[host] = fs_snapshot(name)

    threads = [threading.Thread(target=one, args=hc) for hc in cluster["names"].items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def recap(out):
    """{host: {"changed": n, "failed": n, ...}} from the PLAY RECAP. The controller's own line (the names check's
    first play, read only) is left out when it changed nothing and nothing failed there."""
    found = {}
    for host, fields in re.findall(r"^(\S+)\s+:\s+(ok=.*)$", out, re.M):
        found[host] = dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", fields))
    if found.get("localhost", {}).get("changed") == 0 and found["localhost"].get("failed") == 0:
        del found["localhost"]
    return found


def changed_tasks(out):
    """The names of the tasks that reported changed on some host."""
    found, task = set(), None
    for line in out.splitlines():
        head = re.match(r"^TASK \[(.*)\]", line)
        if head:
            task = head.group(1)
        elif line.startswith("changed:"):
            found.add(task)
    return found


def sh(cluster, host, script):
    proc = exec_(cluster["names"][host], script)
    return proc.returncode, proc.stdout


def container_pid(name):
    proc = subprocess.run(["podman", "inspect", "-f", "{{.State.Pid}}", name], check=True, stdout=subprocess.PIPE,
                          universal_newlines=True, timeout=60)
    return proc.stdout.strip()


def host_netns(name, *argv):
    """A command in the host's network namespace, run from this machine (tc is the host's, not the container's:
    the container has no CAP_NET_ADMIN)."""
    return subprocess.run(["nsenter", "-t", container_pid(name), "-n"] + list(argv), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=60, check=False)
