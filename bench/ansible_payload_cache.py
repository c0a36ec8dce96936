#!/usr/bin/env python3
"""CPU of one ansible-playbook run the test suite makes, with and without its shared AnsiballZ cache
(tests/plugins/callback/ansiballz_shared.py: payloads built once for the suite, with hash-checked bytecode).
The run: `spark.yml --check --diff` against this machine as a provisioned stand-in host (the inventory of
tests/integration/test_check_mode_local.py, torch `existing`, every component but verify), the most common kind
of run in the suite. CPU is user + system of ansible-playbook and everything under it (its workers, the modules),
which is what two test lanes sharing two cores compete for; runs alternate so a busy machine weighs on both.
Run from the repository root with the test venv:

    .venv/bin/python bench/ansible_payload_cache.py [--runs 3]
"""

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(REPO, "tests"), REPO]
os.chdir(REPO)

from tests.integration import test_check_mode_local as local  # noqa: E402


def run(host, cached, shared):
    env = {"ANSIBLE_CALLBACK_PLUGINS": os.path.join(REPO, "tests", "plugins", "callback"),
           "ANSIBLE_CALLBACKS_ENABLED": "ansiballz_shared" if cached else None,
           "SPARKFORGE_TEST_ANSIBALLZ_CACHE": shared}
    before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.time()
    proc, recap = local.playbook(host, "--check", "--diff", env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert proc.returncode == 0 and recap and recap["failed"] == 0, proc.stdout[-3000:]
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, time.time() - t0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-ansiballz-"))
    template = root / "template"
    subprocess.run([sys.executable, "-m", "venv", str(template)], check=True)
    (root / "host").mkdir()
    host = local.make_host(root / "host", template, "existing", components=local.ALL_BUT_VERIFY)
    shared = str(root / "shared")
    run(host, True, shared)  # fills the shared cache, as the suite's first run does
    rows = {True: [], False: []}
    for _ in range(args.runs):
        for cached in (False, True):
            rows[cached].append(run(host, cached, shared))
    for cached in (False, True):
        cpu = [c for c, _ in rows[cached]]
        wall = [w for _, w in rows[cached]]
        print("%-28s CPU %5.1f s (runs: %s), wall %5.1f s" % (
            "shared cache with bytecode" if cached else "per run (Ansible's default)", sum(cpu) / len(cpu),
            ", ".join("%.1f" % c for c in cpu), sum(wall) / len(wall)))


if __name__ == "__main__":
    main()
