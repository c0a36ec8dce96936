#!/usr/bin/env python3
"""No-op rerun time of playbooks/spark.yml on a fleet of N hosts, as a ratio to N=1.

For each N (default 1, 4, 8): N local-connection hosts (each its own sparkforge_prefix and fake
nvidia-smi; GB10 and GH200 alternating, so two platform classes from N=2), components [triton]
built from the fixture repositories (tests/fixtures/triton).  Converges once (builds once per
class), then times a rerun (changed=0 asserted) and prints the rerun time, its ratio to N=1
and the build count per class of the first run (from reports/fleet-history.jsonl).

These are local hosts, not containers: the figure is the playbook's per-host overhead on the
controller (forks, fact collection, the fleet planning), without container/qemu cost.
Usage:  .venv/bin/python bench/fleet_noop.py [--sizes 1 4 8]
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
sys.path.insert(0, os.path.join(REPO, "tests"))
from helpers import GB10, GH200, fake_smi  # noqa: E402  (the tests' fake nvidia-smi for local hosts)

BIN = os.path.dirname(sys.executable)
FIXTURES = os.path.join(REPO, "tests", "fixtures", "triton")
# Alternating, so two platform classes from N=2.
GPUS = [GB10, GH200]


def fleet(root, n):
    subprocess.run([sys.executable, os.path.join(FIXTURES, "make_repos.py"), os.path.join(root, "repos")],
                   check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(root, "repos", "fixture.json")) as handle:
        fixture = json.load(handle)
    hosts = {}
    for i in range(n):
        name = "h%02d" % i
        hosts[name] = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                       "sparkforge_prefix": os.path.join(root, name),
                       "preflight_nvidia_smi": fake_smi(root, name, GPUS[i % 2])}
    group = {
        "sparkforge_components": ["triton"], "sparkforge_torch_version": "2.10.0",
        "sparkforge_fleet_wheelhouse": os.path.join(root, "wheelhouse"),
        "sparkforge_fleet_report_dir": os.path.join(root, "reports"),
        "preflight_allow_x86_64": True,
        "preflight_supported_distributions": [{"distribution": "Debian", "versions": ["12"]}],
        "preflight_min_ram_gib": 1, "preflight_min_ram_gib_source_build": 1,
        "preflight_min_disk_gib": 1, "preflight_min_disk_gib_source_build": 1,
        "triton_repo": fixture["triton_repo"], "triton_llvm_repo": "file://" + fixture["llvm_repo"],
        "triton_llvm_commit": fixture["llvm_commit"],
        "triton_ptxas_path": os.path.join(FIXTURES, "cuda", "bin", "ptxas"), "triton_jobs": "2",
        "triton_poll_interval_s": 1, "triton_build_packages": ["git"], "triton_apt_cache_valid_time": 10 ** 9,
        "triton_venv_build_requirements": ["setuptools", "wheel"],
    }
    path = os.path.join(root, "inventory.yml")
    with open(path, "w") as handle:
        yaml.safe_dump({"all": {"hosts": hosts, "vars": group}}, handle)
    return path


def playbook(inventory):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    start = time.monotonic()
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "playbooks/spark.yml", "-i", inventory], cwd=REPO,
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          check=False)
    elapsed = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit("spark.yml failed (rc %d):\n%s" % (proc.returncode, proc.stdout[-4000:]))
    changed = sum(int(c) for c in re.findall(r"changed=(\d+)", proc.stdout.split("PLAY RECAP")[-1]))
    return elapsed, changed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 8])
    args = parser.parse_args()
    base = None
    print("%4s %10s %10s %7s  %s" % ("N", "first s", "no-op s", "ratio", "builds per class (first run)"))
    for n in args.sizes:
        with tempfile.TemporaryDirectory(prefix="fleet-bench-") as root:
            inventory = fleet(root, n)
            first, _ = playbook(inventory)
            rerun, changed = playbook(inventory)
            if changed:
                sys.exit("the rerun at N=%d changed %d things" % (n, changed))
            with open(os.path.join(root, "reports", "fleet-history.jsonl")) as handle:
                runs = [json.loads(line)["hosts"] for line in handle]
            builds = {r["class"].split("-")[0]: len(r["builds"]) for r in runs[0].values() if r["builder"]}
            rebuilt = sum(len(r["builds"]) for r in runs[1].values())
            base = base or rerun
            print("%4d %10.1f %10.1f %7.2f  %s; rerun builds %d" % (n, first, rerun, rerun / base, builds, rebuilt))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
