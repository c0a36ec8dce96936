#!/usr/bin/env python3
"""No-op rerun time of the molecule `fleet` scenario's run at N container hosts, as a ratio to N=1.

For each N (default 1, 4, 16): N amd64 podman containers started like the test bed's hosts
(molecule/fleet/files/start-host.sh, image localhost/sparkforge-bookworm:amd64), fake GPUs
alternating an H100 (9.0) and an RTX PRO 6000 Blackwell (12.0), so two platform classes from
N=2.  The playbook is the scenario's own converge (molecule/fleet/converge.yml: fixtures, then
playbooks/spark.yml with components triton, pytorch and torch_domains built from the fixture
sources), with the scenario's variables (molecule/fleet/inventory/hosts.yml).  It converges once (one
build per class and artifact), then times two no-op reruns (changed=0 is checked in both):
- the fleet playbook alone (playbooks/spark.yml with the scenario's inventory and its
  `sparkforge_serial: 2`): what a user's no-op rerun costs; the ratio to N=1 is of this one;
- the scenario's whole converge again, the test bed's own preparation of its hosts included (fake
  nvidia-smi, fixture unpacking): what the figures before 2026-11-25 measured.
It prints both, the ratio and the build count per class of the first run and of the reruns (from
the playbook's fleet history).  At N=1 it also times a playbook of as many ansible.builtin.stat
tasks on that host as the fleet rerun ran tasks (host and controller), and prints rerun / stat.

amd64 only: emulated arm64 hosts would measure qemu, not the playbook.  The containers share
this machine's cores, so the figure is the controller-plus-hosts cost of a no-op fleet run.
Usage:  .venv/bin/python bench/fleet_containers.py [--sizes 1 4 16] [--logs DIR]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCENARIO = os.path.join(REPO, "molecule", "fleet")
SHARED = os.path.join(REPO, "molecule", "shared", "inventory")
IMAGE = "localhost/sparkforge-bookworm:amd64"
BIN = os.path.dirname(sys.executable)
GPUS = [
    {"name": "NVIDIA H100 80GB HBM3", "compute_cap": "9.0", "driver_version": "580.95.05", "memory.total": 81559},
    {"name": "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "compute_cap": "12.0",
     "driver_version": "580.95.05", "memory.total": 97887},
]


def _load(path):
    with open(path) as handle:
        return yaml.safe_load(handle) or {}


def start_hosts(n, peer):
    names = ["bench-%02d" % i for i in range(n)]
    for name in names:
        subprocess.run([os.path.join(SCENARIO, "files", "start-host.sh"), name, "amd64", IMAGE, peer], check=True,
                       stdout=subprocess.DEVNULL)
    return names


def inventory(root, names):
    hosts = {}
    for i, name in enumerate(names):
        gpu = dict(GPUS[i % 2], uuid="GPU-bench-%02d" % i, **{"pci.bus_id": "00000000:01:00.0"})
        hosts[name] = {"ansible_connection": "podman", "ansible_podman_executable": "podman", "fake_gpus": [gpu],
                       "preflight_allow_x86_64": True}
    group = dict(_load(os.path.join(SHARED, "group_vars", "all.yml")))
    group.update(_load(os.path.join(SCENARIO, "inventory", "hosts.yml"))["all"]["vars"])
    path = os.path.join(root, "inventory.yml")
    with open(path, "w") as handle:
        yaml.safe_dump({"all": {"hosts": hosts, "vars": group}}, handle)
    return path


def playbook(root, inv, log=None, path=os.path.join(SCENARIO, "converge.yml"), extra=()):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               MOLECULE_EPHEMERAL_DIRECTORY=root, ANSIBLE_FORKS="20")
    if log:
        # Per-task times, to see where a rerun spends them.
        env["ANSIBLE_CALLBACKS_ENABLED"] = "ansible.posix.profile_tasks"
    start = time.monotonic()
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), path, "-i", inv] + list(extra),
                          cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)
    elapsed = time.monotonic() - start
    if log:
        with open(log, "w") as handle:
            handle.write(proc.stdout)
    if proc.returncode != 0:
        sys.exit("the fleet run failed (rc %d):\n%s" % (proc.returncode, proc.stdout[-4000:]))
    recap = proc.stdout.split("PLAY RECAP")[-1]
    counts = {m.group(1): (int(m.group(2)), int(m.group(3)))
              for m in re.finditer(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)", recap, re.M)}
    return elapsed, counts


def stat_baseline(root, inv, tasks):
    """Seconds of a playbook of `tasks` ansible.builtin.stat tasks on the inventory's one host."""
    path = os.path.join(root, "stat.yml")
    with open(path, "w") as handle:
        handle.write("- name: Baseline\n  hosts: all\n  gather_facts: false\n  tasks:\n")
        for i in range(tasks):
            handle.write("    - name: Stat %d\n      ansible.builtin.stat:\n        path: /etc/hostname\n" % i)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    start = time.monotonic()
    subprocess.run([os.path.join(BIN, "ansible-playbook"), path, "-i", inv], cwd=REPO, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    return time.monotonic() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--peer", default="bench-peer",
                        help="name of a container the bench hosts are labelled with (started if missing)")
    parser.add_argument("--logs", help="directory to keep each rerun's output in, with per-task times")
    args = parser.parse_args()
    if subprocess.run(["podman", "container", "exists", args.peer], check=False).returncode != 0:
        subprocess.run(["podman", "run", "-d", "--name", args.peer, "--runtime", "runc",
                        "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1000:1000", IMAGE, "sleep", "infinity"],
                       check=True, stdout=subprocess.DEVNULL)
    base = None
    print("%4s %10s %10s %7s %14s  %s" % ("N", "first s", "no-op s", "ratio", "no-op+prep s",
                                         "builds per class: first run; reruns"))
    for n in args.sizes:
        names = start_hosts(n, args.peer)
        try:
            with tempfile.TemporaryDirectory(prefix="fleet-containers-") as root:
                inv = inventory(root, names)
                first, _ = playbook(root, inv)
                log = os.path.join(args.logs, "rerun-%d.log" % n) if args.logs else None
                # The scenario's converge imports spark.yml with sparkforge_serial: 2 (a play keyword).
                rerun, counts = playbook(root, inv, log, os.path.join(REPO, "playbooks", "spark.yml"),
                                         ["-e", "sparkforge_serial=2"])
                log = os.path.join(args.logs, "rerun-prep-%d.log" % n) if args.logs else None
                with_prep, counts_prep = playbook(root, inv, log)
                for what in (counts, counts_prep):
                    changed = {host: c for host, (_ok, c) in what.items()}
                    if any(changed.values()):
                        sys.exit("a rerun at N=%d changed something: %s" % (n, changed))
                with open(os.path.join(root, "fleet-scenario", "reports", "fleet-history.jsonl")) as handle:
                    runs = [json.loads(line)["hosts"] for line in handle]
                builds = [{r["class"].split("-")[0]: len(r["builds"]) for r in run.values() if r["builder"]}
                          for run in runs[-3:]]
                base = base or rerun
                print("%4d %10.1f %10.1f %7.2f %14.1f  %s; %s, %s" % (n, first, rerun, rerun / base, with_prep,
                                                                     builds[0], builds[1], builds[2]))
                if n == 1:
                    # One stat task per task that ran (the controller's too), on the one host.
                    tasks = sum(ok for ok, _c in counts.values())
                    stat = stat_baseline(root, inv, tasks)
                    print("     N=1: %d tasks ran; the same number of stat tasks takes %.1f s; rerun / stat = %.2f"
                          % (tasks, stat, rerun / stat))
                sys.stdout.flush()
        finally:
            subprocess.run(["podman", "rm", "-f", "-t", "0"] + names, check=False, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    subprocess.run(["podman", "rm", "-f", "-t", "0", args.peer], check=False, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
