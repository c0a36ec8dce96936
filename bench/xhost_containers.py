#!/usr/bin/env python3
"""The cross-host acceptance's time against the number of hosts, on container hosts (issue 36 item 4).

Starts eight container hosts once (tests/xhost_hosts.py, as tests/e2e/test_xhost_topologies.py does: the test bed's
amd64 image, one podman network as the switch, stand-in Spark trees cabled on port 1, real CPU torch 2.13.0 over
gloo on the fabric addresses), then for N = 2, 4, 8 (the first N hosts; the others stay idle):

- fixed:  xhost's script on every host with no pair round and no collective (torch's import, the rendezvous on the
          first host, the 1024-float all_reduce check): what every run pays whatever N;
- pairs:  the same script with the pair rounds of N hosts (xhost.pair_rounds: N-1 rounds of N/2 pairs), the config
          the module builds, run on every host at once through ``podman exec``; pairs - fixed is the rounds' own time;
- whole:  ``ansible-playbook playbooks/xhost.yml -i inventory -e xhost_group=sparks`` (the guide's line) end to end:
          versions and parity, the memory bound, the pair rounds, the collective over all N, the verdicts.

Prints a table and the ratio time(8)/time(2) for each against the issue's 2.5; --write writes that table to
docs/results/xhost-containers-<date>.md, replacing the file (the reasons and the projection for 64 hosts there are
written by hand: use --json to keep a run beside them). Run from the repository root with the test
environment (``source .venv/bin/activate; export ANSIBLE_CONFIG=$PWD/ansible.cfg``):

    python bench/xhost_containers.py --write

``--local`` measures the same three figures with N inventory hosts on this machine instead of containers
(``ansible_connection: local``, the ranks' processes on 127.0.0.1, gloo over ``lo``, one thread each): on the
2-core test machine every container host shares its 2 cores, which the ratio then measures; on a machine with a
core or more per host (the GPU test machine has 16) each host's own work runs at once, as on a cluster. Its
Python must import torch (``--torch-path`` adds a directory to its PYTHONPATH); ``--json FILE`` keeps the rows:

    python bench/xhost_containers.py --local --json /tmp/scaling.json
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(REPO, "tests"), os.path.join(REPO, "collections")]
os.environ.setdefault("ANSIBLE_CONNECTION_PLUGINS", os.path.join(REPO, "tests", "plugins", "connection"))
os.environ.setdefault("ANSIBLE_CONFIG", os.path.join(REPO, "ansible.cfg"))

import yaml  # noqa: E402

from helpers import CONNECTION, image_present, user_checkout, user_shell  # noqa: E402
from xhost_hosts import (cleanup, create_network, ensure_torch, host_addresses, stand_in_tree,  # noqa: E402
                         start_hosts)
from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import xhost  # noqa: E402

PORT = "enp1s0f1np1"
COMMAND = "ansible-playbook playbooks/xhost.yml -i inventory -e xhost_group=sparks"
# A pair buffer of 4 MiB, 5 timed round trips: large enough that a round's time stands out of the run's noise.
SIZES, ITERS = [4 << 20], 5
# Each measurement this many times; the median is reported (the machine is shared).
REPEATS = 3
COLLECTIVE = {"xhost_collective_sizes": [1 << 20], "xhost_collective_iters": 3, "xhost_warmup_iters": 1}


def median(values):
    return sorted(values)[len(values) // 2]


def script_on_hosts(names, addresses, hosts, rounds, port, collective=False, local=None):
    """xhost's script on the given hosts at once, as the module runs it (its config; gloo over the fabric port, or
    over lo for ``local`` hosts: {"python": ..., "env": ...}): (seconds until the last host ended, rank 0's result)."""
    results = {}

    def one(rank, host):
        config = {"rank": rank, "hosts": hosts, "master_addr": addresses[hosts[0]], "master_port": port,
                  "backend": "gloo", "sizes": SIZES, "iters": ITERS, "join_timeout": 120, "op_timeout": 300,
                  "rounds": rounds, "collective_sizes": COLLECTIVE["xhost_collective_sizes"] if collective else [],
                  "collective_iters": 3, "warmup_iters": 1}
        # The same environment the module gives the script (xhost_env, then GLOO_SOCKET_IFNAME from xhost_ifname).
        if local:
            command, env = [local["python"], "-c", xhost.script_source(), json.dumps(config)], \
                dict(os.environ, GLOO_SOCKET_IFNAME="lo", **local["env"])
        else:
            command, env = ["podman", "exec", "-e", "PYTHONPATH=/opt/xtorch", "-e", "GLOO_SOCKET_IFNAME=" + PORT,
                            names[host], "python3", "-c", xhost.script_source(), json.dumps(config)], None
        proc = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=900)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        results[rank] = json.loads(lines[-1]) if lines else {"status": "error", "reason": proc.stderr[-800:]}

    start = time.time()
    threads = [threading.Thread(target=one, args=(r, h)) for r, h in enumerate(hosts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.time() - start
    bad = dict((r, v) for r, v in results.items() if v.get("status") != "ok")
    if bad:
        raise RuntimeError("the script failed: %s" % bad)
    return seconds, results[0]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="2,4,8", help="host counts (default 2,4,8)")
    parser.add_argument("--write", action="store_true", help="write docs/results/xhost-containers-<date>.md")
    parser.add_argument("--local", action="store_true", help="inventory hosts on this machine, not containers")
    parser.add_argument("--torch-path", default="", help="--local: a directory the ranks' Python imports torch from")
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.nodes.split(",")]
    if args.local:
        rows = measure_local(counts, args.torch_path)
    else:
        rows = measure_containers(counts)
    by = dict((r["nodes"], r) for r in rows)
    top = max(by)
    if 2 in by:
        for key in ("pairs", "whole"):
            ratio = by[top][key] / by[2][key]
            print("time(%d)/time(2), %s: %.2f (the issue's bound: 2.5) %s" % (
                top, key, ratio, "within" if ratio <= 2.5 else "ABOVE"))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"kind": "local" if args.local else "containers", "cores": os.cpu_count(),
                       "load": open("/proc/loadavg").read().split()[:3], "rows": rows}, handle, indent=1)
    if args.write and not args.local:
        write(rows)
    return 0


def measure(counts, hosts_all, names, addresses, checkout, root, inventory_for, group_extra, local=None):
    """The three figures for each N in counts, on the first N of hosts_all: the rows."""
    rows = []
    port = 29700
    for n in counts:
        hosts = hosts_all[:n]
        rounds = xhost.pair_rounds(n)
        port += 3
        fixed, pairs, wholes = [], [], []
        for k in range(REPEATS):
            port += 10
            fixed.append(script_on_hosts(names, addresses, hosts, [], port, local=local)[0])
            seconds, first = script_on_hosts(names, addresses, hosts, rounds, port + 1, local=local)
            assert len(first["pairs"]) == n * (n - 1) // 2 * len(SIZES), first
            pairs.append(seconds)
        fixed, pairs = median(fixed), median(pairs)
        reports = os.path.join(root, "reports-%d" % n)
        os.makedirs(reports)
        group = {"xhost_backend": "gloo", "xhost_link_speed_gbps": 1.0, "xhost_sizes": SIZES,
                 "xhost_iters": ITERS, "xhost_min_link_fraction": 0.02, "xhost_min_busbw_fraction": 0.01,
                 "xhost_join_timeout": 120, "xhost_op_timeout": 300, "xhost_master_addr": addresses[hosts_all[0]],
                 "xhost_report_dir": reports}
        group.update(COLLECTIVE)
        group.update(group_extra)
        for k in range(REPEATS):
            group["xhost_master_port"] = port + 5 + k
            with open(os.path.join(checkout, "inventory", "hosts.yml"), "w") as handle:
                yaml.safe_dump({"all": {"children": {"sparks": {"hosts": dict((h, inventory_for(h)) for h in hosts),
                                                                 "vars": group}}}}, handle)
            start = time.time()
            proc = user_shell(checkout, COMMAND)
            wholes.append(time.time() - start)
            with open(os.path.join(root, "run-%d-%d.log" % (n, k)), "w") as handle:
                handle.write(proc.stdout)
            with open(os.path.join(reports, "xhost.json")) as handle:
                summary = json.load(handle)
            if proc.returncode != 0 or not summary["passed"]:
                raise RuntimeError("the acceptance of %d hosts failed (log %s/run-%d-%d.log): %s"
                                   % (n, root, n, k, summary.get("verdict")))
        whole = median(wholes)
        row = {"wholes": wholes, "nodes": n, "rounds": len(rounds), "pairs_per_round": n // 2, "fixed": fixed,
               "pairs": pairs, "rounds_only": pairs - fixed, "per_round": (pairs - fixed) / len(rounds),
               "whole": whole, "slowest_gbs": summary["judged"]["slowest"]["gbs"]}
        rows.append(row)
        print("N=%(nodes)d: %(rounds)d rounds of %(pairs_per_round)d; script fixed %(fixed).1f s, with the "
              "pair rounds %(pairs).1f s (rounds %(rounds_only).1f s, %(per_round).2f s a round); "
              "playbooks/xhost.yml %(whole).1f s" % row, flush=True)
    return rows


def measure_local(counts, torch_path):
    """N inventory hosts on this machine (h1 .. hN), one thread each."""
    import getpass
    hosts_all = ["h%d" % i for i in range(1, max(counts) + 1)]
    root = tempfile.mkdtemp(prefix="xhost-bench-local-")
    env = {"OMP_NUM_THREADS": "1"}
    if torch_path:
        env["PYTHONPATH"] = os.pathsep.join([torch_path] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    local = {"python": sys.executable, "env": env}
    addresses = dict((h, "127.0.0.1") for h in hosts_all)
    checkout = user_checkout(root)
    extra = {"xhost_python": sys.executable, "xhost_env": env, "xhost_user": getpass.getuser(), "xhost_ifname": "lo"}
    return measure(counts, hosts_all, None, addresses, checkout, root,
                   lambda h: {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
                   extra, local=local)


def measure_containers(counts):
    if not image_present():
        sys.exit("podman or the test bed's amd64 image localhost/sparkforge-bookworm:amd64 is missing")
    torch_dir = ensure_torch()
    top = max(counts)
    tag = uuid.uuid4().hex[:6]
    net = "sparkforge-xbench-%s" % tag
    hosts_all = ["s%d" % i for i in range(1, top + 1)]
    names = dict((h, "sparkforge-xbench-%s-%s" % (tag, h)) for h in hosts_all)
    root = tempfile.mkdtemp(prefix="xhost-bench-")
    try:
        subnet = create_network(net)
        addresses = host_addresses(subnet, hosts_all)
        started = time.time()
        start_hosts(dict((names[h], (["%s:interface_name=%s,ip=%s" % (net, PORT, addresses[h])],
                                     ["%s:/opt/xtorch:ro" % torch_dir] + stand_in_tree(root, h, "spark")))
                         for h in hosts_all))
        print("%d hosts started in %.1f s" % (top, time.time() - started), flush=True)
        checkout = user_checkout(root)
        return measure(counts, hosts_all, names, addresses, checkout, root,
                       lambda h: {"ansible_connection": CONNECTION, "ansible_host": names[h],
                                  "ansible_python_interpreter": "/usr/bin/python3", "xhost_ifname": PORT},
                       {"xhost_python": "/usr/bin/python3", "xhost_env": {"PYTHONPATH": "/opt/xtorch"},
                        "xhost_user": "root"})
    finally:
        cleanup(names.values(), [net])


def write(rows):
    by = dict((r["nodes"], r) for r in rows)
    load = open("/proc/loadavg").read().split()[:3]
    day = datetime.date.today().isoformat()
    path = os.path.join(REPO, "docs", "results", "xhost-containers-%s.md" % day)
    lines = ["# The cross-host acceptance on 2, 4 and 8 container hosts (%s)" % day, "",
             "Command (repository root, the test environment; 8 container hosts started once, the first N used):", "",
             "```", "python bench/xhost_containers.py --write", "```", "",
             "Machine: x86_64, %d cores, shared with other sessions (load average at the end: %s). gloo on the "
             "CPU over one podman network (MTU 9000), a pair buffer of %d bytes, %d round trips after one untimed; "
             "the collective %d bytes per node. Each figure is the median of %d runs." % (
                 os.cpu_count(), " ".join(load), SIZES[0], ITERS, COLLECTIVE["xhost_collective_sizes"][0], REPEATS),
             "",
             "| hosts | rounds x pairs | script, no pairs (s) | script with the pair rounds (s) | the rounds (s) | "
             "a round (s) | playbooks/xhost.yml end to end (s) |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %(nodes)d | %(rounds)d x %(pairs_per_round)d | %(fixed).1f | %(pairs).1f | %(rounds_only).1f "
                     "| %(per_round).2f | %(whole).1f |" % r)
    lines.append("")
    top = max(by)
    if 2 in by:
        for key, what in (("pairs", "the pair test (the script with the rounds)"), ("whole", "the whole acceptance")):
            ratio = by[top][key] / by[2][key]
            lines.append("- time(%d)/time(2) of %s: **%.2f** (the issue's bound 2.5: %s)." % (
                top, what, ratio, "within" if ratio <= 2.5 else "above"))
    open(path, "w").write("\n".join(lines) + "\n")
    print("wrote %s" % path)


if __name__ == "__main__":
    sys.exit(main())
