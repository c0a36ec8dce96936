#!/usr/bin/env python3
"""No-op rerun cost of playbooks/spark.yml against a baseline of plain stat tasks.

On one provisioned container host (the test bed's amd64 image with the fake nvidia-smi of an
H100; components limited to what converges there without the NVIDIA repo stand-in or source
fixtures: preflight, fleet planning, runtime_env, summary), in one run:
  1. converge playbooks/spark.yml once (provisioning);
  2. time a rerun of it (a no-op: changed=0 is asserted), counting the tasks that ran (ok);
  3. time a playbook of the same number of ansible.builtin.stat tasks;
and print the ratio rerun / baseline.  A ratio near 1 means the playbook's own overhead on a
rerun (probes, module start-up) costs no more than the simplest possible task per step.

Usage:  .venv/bin/python bench/noop_rerun.py [--runs 3] [--image localhost/sparkforge-bookworm:amd64]
Needs the test bed (scripts/setup test; molecule/shared/build-images.sh amd64).
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.dirname(sys.executable)
HOST = "sparkforge-bench-noop"
RECAP = re.compile(r"%s\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)\s+skipped=(\d+)" % HOST)


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, **kw)


def playbook(path, inventory, extra=()):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    start = time.monotonic()
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), path, "-i", inventory] + list(extra),
                          cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)
    elapsed = time.monotonic() - start
    match = RECAP.search(proc.stdout)
    if proc.returncode != 0 or not match:
        sys.exit("%s failed (rc %d):\n%s" % (path, proc.returncode, proc.stdout[-4000:]))
    ok, changed, _unreach, _failed, skipped = (int(x) for x in match.groups())
    # The summary play runs on localhost: count its tasks too, they are part of the rerun.
    local = re.search(r"localhost\s+: ok=(\d+)\s+changed=\d+\s+unreachable=\d+\s+failed=\d+\s+skipped=(\d+)", proc.stdout)
    if local:
        ok += int(local.group(1))
        skipped += int(local.group(2))
    return elapsed, ok, changed, skipped


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--image", default="localhost/sparkforge-bookworm:amd64")
    args = parser.parse_args()

    subprocess.run(["podman", "rm", "-f", HOST], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    sh(["podman", "run", "-d", "--name", HOST, "--runtime", "runc", "--ulimit", "nofile=1024:1024",
        "--ulimit", "nproc=1000:1000", args.image, "sleep", "infinity"])
    try:
        with tempfile.TemporaryDirectory() as tmp:
            gpus = {"gpus": [{"name": "NVIDIA H100 80GB HBM3", "compute_cap": "9.0", "driver_version": "580.159.04",
                              "memory.total": 81559, "uuid": "GPU-bench", "pci.bus_id": "00000000:00:06.0"}]}
            profile = os.path.join(tmp, "fake-gpus.json")
            with open(profile, "w") as handle:
                json.dump(gpus, handle)
            sh(["podman", "exec", HOST, "mkdir", "-p", "/etc/sparkforge"])
            sh(["podman", "cp", profile, HOST + ":/etc/sparkforge/fake-gpus.json"])
            sh(["podman", "cp", os.path.join(REPO, "molecule/shared/files/fake-nvidia-smi"), HOST + ":/usr/bin/nvidia-smi"])
            sh(["podman", "exec", HOST, "chmod", "0755", "/usr/bin/nvidia-smi"])
            inventory = os.path.join(tmp, "hosts.yml")
            with open(inventory, "w") as handle:
                handle.write(
                    "all:\n  hosts:\n    %s:\n      ansible_connection: containers.podman.podman\n"
                    "      ansible_python_interpreter: /usr/bin/python3\n      preflight_allow_x86_64: true\n"
                    "      preflight_min_ram_gib: 1\n      preflight_min_ram_gib_source_build: 1\n"
                    "      preflight_min_disk_gib: 1\n      preflight_min_disk_gib_source_build: 1\n"
                    "      preflight_supported_distributions: [{distribution: Debian, versions: ['12']}]\n"
                    "      sparkforge_components: [runtime_env]\n" % HOST)
            playbook("playbooks/spark.yml", inventory)   # provision
            reruns = []
            for _ in range(args.runs):
                elapsed, ok, changed, skipped = playbook("playbooks/spark.yml", inventory)
                if changed:
                    sys.exit("the rerun changed %d things: not a no-op" % changed)
                reruns.append(elapsed)
            # Skipped tasks (components not enabled) cost next to nothing: the baseline gets one stat
            # task per task that ran.
            tasks = ok
            baseline_pb = os.path.join(tmp, "stat.yml")
            with open(baseline_pb, "w") as handle:
                handle.write("- name: Baseline\n  hosts: all\n  gather_facts: false\n  tasks:\n")
                for i in range(tasks):
                    handle.write("    - name: Stat %d\n      ansible.builtin.stat:\n        path: /etc/hostname\n" % i)
            baselines = [playbook(baseline_pb, inventory)[0] for _ in range(args.runs)]
    finally:
        subprocess.run(["podman", "rm", "-f", HOST], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)

    rerun, base = statistics.median(reruns), statistics.median(baselines)
    print("tasks that ran per rerun:      %d (plus %d skipped)" % (tasks, skipped))
    print("no-op rerun of spark.yml:      %.2f s (median of %d: %s)" % (rerun, len(reruns), ", ".join("%.2f" % r for r in reruns)))
    print("same number of stat tasks:     %.2f s (median of %d: %s)" % (base, len(baselines), ", ".join("%.2f" % b for b in baselines)))
    print("ratio rerun / stat baseline:   %.2f" % (rerun / base))


if __name__ == "__main__":
    main()
