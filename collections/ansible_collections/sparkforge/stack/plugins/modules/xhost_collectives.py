#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Kept whole: one module with four modes over one option set; most of its length is DOCUMENTATION and RETURN, the
# logic lives in module_utils/fabric (xhost.py, acceptance.py).

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: xhost_collectives
short_description: Collectives across the hosts of a group with torch.distributed, and their verdict
version_added: "0.3.0"
description:
  - With I(mode=run), on every host of a group at the same time (start it with C(async) and C(poll=0)) -
    one torch.distributed process per host, rendezvous in a TCPStore on the first host of I(hosts). Each
    host announces itself; the first host waits up to I(join_timeout) seconds and, when hosts are missing,
    tells the others their names and the check ends (no hang in C(init_process_group)). Then an all_reduce
    checked for the exact sum, and a send/recv ping-pong between every pair of hosts for the bandwidth of each
    pair, in rounds of disjoint pairs - all pairs of a round at once, N-1 rounds for N hosts (N for odd N).
    Then the collective over all hosts - all_reduce and all_gather of each of I(collective_sizes) bytes per
    host, I(warmup_iters) warm-up runs and I(collective_iters) timed ones, each result checked exact.
  - Before anything runs (C(run) and C(facts), check mode too) - the buffers one host would hold (the largest pair
    buffer, or the all_gather's input and output, I(hosts) times the input) against I(max_memory_fraction) of
    the host's C(MemAvailable); above it the host is refused, naming it, the bytes and the cap. Every threshold and
    size is checked against its range first, naming the role variable and its value.
    NCCL runs on the GPU over the configured interface or HCA (C(NCCL_SOCKET_IFNAME), C(NCCL_IB_HCA)); gloo on
    the CPU (C(GLOO_SOCKET_IFNAME)).
  - Each host also reads the speed of the link the collectives use, from sysfs (C(/sys/class/net/IF/speed),
    or C(/sys/class/infiniband/HCA/ports/N/rate)).
  - With I(mode=summarize), on the controller, combines the hosts' results - who never joined, each pair's
    best bandwidth against the slower NIC of the pair, the slowest pair, the hosts whose every pair is below
    the threshold, the collective's algbw and busbw (as nccl-tests defines them - all_reduce algbw x 2(n-1)/n,
    all_gather algbw x (n-1)/n of the total gathered bytes) against the slowest host's link, each host's port
    speed - into a verdict per host (pass, fail or not checked, with its reasons), and writes C(xhost.json) (the
    group's verdict), C(xhost-NODE.json) per host and C(xhost.md) into I(report_dir).
  - Reads only; it changes nothing on the hosts. The report is not counted as a change.
author:
  - sparkforge developers (@sparkforge)
options:
  mode:
    description:
      - C(run) on every host, C(summarize) once on the controller.
      - C(facts) on every host before the run - the parity items (NVIDIA driver from C(/sys/module/nvidia/version),
        torch, its CUDA and NCCL as I(python) reports them with I(env), the kernel release, and I(user)'s name and
        UID) - and C(parity) once on the controller, which compares them (I(results)) and fails, naming each
        node, item and both values, when they differ. Both read only, in check mode too.
    type: str
    choices: [run, summarize, facts, parity]
    default: run
  user:
    description: For C(facts) - the cluster user whose name and UID are compared; default the user the module runs as.
    type: str
  sysfs_root:
    description: For C(facts) - where sysfs is read (tests only).
    type: path
    default: /sys
  python:
    description: The stack venv's interpreter (with torch). Required for C(run).
    type: path
  host:
    description: This host's name in I(hosts) (its rank is its position there). Required for C(run).
    type: str
  hosts:
    description: Every host of the check, in rank order; the first one holds the rendezvous.
    type: list
    elements: str
    required: true
  master_addr:
    description: Address of the first host the others reach it at. Required for C(run).
    type: str
  master_port:
    description: TCP port of the rendezvous store on the first host.
    type: int
    default: 29531
  backend:
    description: C(nccl) (GPUs) or C(gloo) (CPU; what the container tests use).
    type: str
    choices: [nccl, gloo]
    default: nccl
  ifname:
    description: The network interface the collectives use (sets C(NCCL_SOCKET_IFNAME)/C(GLOO_SOCKET_IFNAME));
      its speed is read from sysfs.
    type: str
  hca:
    description: InfiniBand/RoCE HCA and port (C(mlx5_0:1)) for NCCL (C(NCCL_IB_HCA)); its rate is read from sysfs.
    type: str
  link_speed_gbps:
    description: The link speed in Gb/s, for links whose speed sysfs does not report (virtual NICs).
    type: float
  sizes:
    description: Message sizes in bytes for the pair bandwidth.
    type: list
    elements: int
    default: [67108864, 268435456]
  iters:
    description: Round trips per pair and size.
    type: int
    default: 10
  join_timeout:
    description: Seconds the first host waits for all hosts to join; a host that does not is named.
    type: int
    default: 120
  op_timeout:
    description: Seconds one collective may take before torch.distributed gives up.
    type: int
    default: 300
  per_function_gbps:
    description: The fabric port's speed per PCI function (M(sparkforge.stack.fabric_facts)); with O(functions) and
      O(management_gbps) it lets the summary say why a slow pair is slow (one function, management-port speed).
    type: float
  functions:
    description: How many PCI functions the fabric port has (2 on a DGX Spark's QSFP port).
    type: int
  management_gbps:
    description: The management interface's speed in Gb/s.
    type: float
  fabric_link_gbps:
    description: The fabric port's rated speed in Gb/s (M(sparkforge.stack.fabric_facts) C(port.link_gbps), the rate
      both functions of a port share). Every pair and collective is judged against it, not against O(ifname)'s
      speed, which in a ring is the management port's. O(link_speed_gbps) still wins when set.
    type: float
  topology:
    description: The cluster's topology (M(sparkforge.stack.fabric_plan)). C(ring) - the pairs are the cabled
      neighbours only, in rounds where no node has both cables busy, with the hosts in ring order; otherwise
      every pair.
    type: str
  screen_min_nodes:
    description:
      - From this many hosts on a switched cluster (I(topology) not C(ring)), the grouped search replaces the pair
        rounds - ceil(sqrt(N)) groups screened at once with an all_reduce each (the largest of I(collective_sizes),
        judged against I(min_busbw_fraction) of the group's slowest link), each failed group bisected, each suspect
        confirmed against a healthy buddy; the rounds used are counted in the summary's C(screen). At least 6 (below,
        a first-round group would hold one node). The role passes C(sparkforge_xhost_acceptance.screen_min_nodes).
    type: int
    default: 16
  expect_rdma:
    description: The fabric port has RDMA functions up, so NCCL must use RoCE/InfiniBand; with O(backend=nccl) a
      node whose NCCL lines (C(NCCL_DEBUG=INFO)) say it went over sockets fails, whatever the other nodes did.
    type: bool
    default: false
  env:
    description: Extra environment for this host's process (for example C(CUDA_VISIBLE_DEVICES)). With
      C(NCCL_DEBUG=INFO) NCCL's own lines say whether it used NET/IB or NET/Socket, and the summary reads them.
    type: dict
    default: {}
  results:
    description: For C(summarize) - each host's C(run) result, keyed by host (a host without one did not run). For
      C(parity) - each host's C(facts) result, keyed by host.
    type: dict
  min_link_fraction:
    description: For C(summarize) - a pair below this fraction of its slower NIC's speed is slow; so is a pair whose
      hosts' link rates are both unknown (nothing to judge it against, so it is not passed).
    type: float
    default: 0.5
  min_gbs:
    description: For C(summarize) - a pair below this many GB/s is slow, whatever the link speed.
    type: float
  min_busbw_fraction:
    description:
      - For C(summarize) - the collective is slow when its busbw is below this fraction of the slowest host's link
        (Gb/s / 8). The role passes C(sparkforge_xhost_acceptance.min_busbw_fraction).
      - For C(run) - the threshold of each screening group's all_reduce (I(screen_min_nodes)).
    type: float
    default: 0.5
  rated_link_gbps:
    description: For C(summarize) - the speed every host's link is rated at (Gb/s); a host below it fails. Without
      it, a host whose link is slower than most hosts' fails.
    type: float
  collective_sizes:
    description: Bytes per host of the all_reduce and the all_gather over all hosts (multiples of 4).
    type: list
    elements: int
    default: [268435456]
  collective_iters:
    description: Timed runs of each collective and size.
    type: int
    default: 20
  warmup_iters:
    description: Untimed runs of each collective and size before the timed ones.
    type: int
    default: 5
  max_message_bytes:
    description: The largest of I(sizes) and I(collective_sizes) accepted; a larger one is refused.
    type: int
    default: 1073741824
  max_memory_fraction:
    description: For C(run) and C(facts) - the buffers may take at most this fraction of the host's C(MemAvailable)
      (more than 0, at most 0.9).
    type: float
    default: 0.25
  meminfo:
    description: For C(run) and C(facts) - where MemAvailable is read (tests only).
    type: path
    default: /proc/meminfo
  report_dir:
    description: For C(summarize) - where C(xhost.json) and C(xhost.md) go.
    type: path
  fleet_summary:
    description:
      - For C(summarize) - the fleet summary (C(fleet-summary.json) of M(sparkforge.stack.fleet_plan)'s playbook).
        When it exists, it gains C(cross_host) - every pair against its link (a, b, GB/s, link Gb/s, % of link,
        slow, why with NCCL's diagnosis), the slowest pair, the hosts that failed with each one's diagnosis, the
        hosts that never joined, and when the check ran - and C(fleet-summary.md) is written beside it.
    type: path
notes:
  - The module's defaults of the acceptance (thresholds, collective sizes and runs, memory fraction) are the
    manifest's C(sparkforge_xhost_acceptance); the role passes that data.
  - Tested with the gloo backend across container hosts, and with NCCL on a 2-GPU machine (two ranks, one
    GPU each).
"""

EXAMPLES = r"""
- name: Start the check on every host of the group
  sparkforge.stack.xhost_collectives:
    python: /opt/sparkforge/venv/bin/python
    host: "{{ inventory_hostname }}"
    hosts: "{{ ansible_play_hosts_all }}"
    master_addr: "{{ hostvars[ansible_play_hosts_all[0]].ansible_host }}"
    ifname: enp1s0f0np0
  async: 900
  poll: 0
  register: xhost_job

- name: Judge the group
  sparkforge.stack.xhost_collectives:
    mode: summarize
    hosts: "{{ ansible_play_hosts_all }}"
    results: "{{ dict(ansible_play_hosts_all | map('extract', hostvars, 'xhost_result') | ...) }}"
    report_dir: reports
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
status:
  description: For C(run) - C(ok), C(not_joined) (some hosts never joined; see C(missing)), C(error) or C(timeout).
  returned: mode run
  type: str
pairs:
  description: For C(run) on the first host - a, b, bytes, gbs, seconds, exact per pair and size.
  returned: mode run, first host
  type: list
  elements: dict
link_gbps:
  description: This host's link speed in Gb/s (null when unknown).
  returned: mode run
  type: float
nccl_net:
  description: For C(run) - NCCL's lines naming the network it loaded and used (with C(NCCL_DEBUG=INFO)).
  returned: mode run
  type: list
  elements: str
summary:
  description: For C(summarize) - hosts, per_host (status, reason, link, nccl_net - the NCCL lines it read,
    diagnosis of a slow host), missing, failed_hosts, judged (pairs with each slow pair's diagnosis, slowest), passed;
    screen when the grouped search ran (rounds, round_robin_rounds, groups - each round's group, busbw, pct_of_link,
    passed, why - bad, healthy).
  returned: mode summarize
  type: dict
screening:
  description: For C(run) on the first host when the grouped search ran (I(screen_min_nodes)) - mode, rounds,
    round_robin_rounds, groups (round, group, busbw, link_gbps, pct_of_link, passed, why), bad (node to why), healthy;
    null otherwise.
  returned: mode run
  type: dict
collectives:
  description: For C(run) on the first host - per operation and size, each host's seconds per run and exactness.
  returned: mode run, first host
  type: list
  elements: dict
nodes:
  description: For C(summarize) and C(parity) - the verdict per host - node, verdict (pass, fail, not checked), reasons.
  returned: mode summarize, parity
  type: list
  elements: dict
verdict:
  description: For C(summarize) and C(parity) - the group's verdict (verdict, failed, not_checked, reasons).
  returned: mode summarize, parity
  type: dict
memory:
  description: For C(run) and C(facts) - need (bytes of buffers), cap (bytes), available (MemAvailable bytes).
  returned: mode run, facts
  type: dict
failed_hosts:
  description: For C(summarize) - the hosts to fail, by name.
  returned: mode summarize
  type: list
  elements: str
missing:
  description: For C(summarize) - the hosts that never joined or did not run.
  returned: mode summarize
  type: list
  elements: str
passed:
  description: For C(summarize) - every host joined, every pair was measured and none failed.
  returned: mode summarize
  type: bool
slowest:
  description: For C(summarize) - the slowest pair (a, b, bytes, gbs, link_gbps, pct_of_link, slow, why, diagnosis).
  returned: mode summarize
  type: dict
cross_host:
  description:
    - For C(summarize) - what the fleet summary gains under C(cross_host) - at, hosts, backend, min_fraction,
      min_gbs, pairs (a, b, bytes, gbs, link_gbps, pct_of_link, exact, slow, why, diagnosis - NCCL's and the
      fabric's explanation of a slow pair), slowest, failed_hosts, diagnosis (host to its sentences), missing,
      passed, report.
  returned: mode summarize
  type: dict
versions:
  description: For C(facts) - this host's driver, cuda, nccl, torch, kernel, user, uid (null where not read) and notes.
  returned: mode facts
  type: dict
differences:
  description: For C(parity) - one sentence per difference, naming the node, the item and both values.
  returned: mode parity
  type: list
  elements: str
report_files:
  description: For C(summarize) - the files written (json, markdown, nodes - host to its C(xhost-NODE.json);
    fleet_summary and fleet_summary_markdown when the fleet summary existed).
  returned: mode summarize
  type: dict
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import fleet_report
from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import acceptance, xhost
from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import atomic_write_text, makedirs
from ansible_collections.sparkforge.stack.plugins.module_utils._common.clock import utc_now
from ansible_collections.sparkforge.stack.plugins.module_utils._common import run_env


def memory(module, p, node):
    """The buffers against the cap, before anything runs: refused (not capped) above it."""
    try:
        available = acceptance.mem_available(p["meminfo"])
    except acceptance.AcceptanceError as exc:
        module.fail_json(msg="%s: %s: the memory bound cannot be checked, nothing was run" % (node, exc), host=node)
    need = acceptance.buffer_bytes(p["sizes"], p["collective_sizes"], len(p["hosts"]))
    figures = dict(need=need, cap=int(p["max_memory_fraction"] * available), available=available)
    refused = acceptance.check_memory(node, p["sizes"], p["collective_sizes"], len(p["hosts"]), available,
                                      p["max_memory_fraction"])
    if refused:
        module.fail_json(msg=refused, memory=figures, host=node)
    return figures


def run(module, p):
    for key in ("python", "host", "master_addr"):
        if not p[key]:
            module.fail_json(msg="mode run needs %s" % key)
    try:
        rank = xhost.rank_of(p["host"], p["hosts"])
    except xhost.XhostError as exc:
        module.fail_json(msg=str(exc))
    for key in ("iters", "join_timeout", "op_timeout"):
        if p[key] <= 0:
            module.fail_json(msg="%s must be positive" % key)
    speed, source = xhost.check_rate(p["link_speed_gbps"], p["fabric_link_gbps"], p["ifname"], p["hca"])
    env = dict((str(k), str(v)) for k, v in p["env"].items())
    if p["ifname"]:
        env.setdefault("NCCL_SOCKET_IFNAME", p["ifname"])
        env.setdefault("GLOO_SOCKET_IFNAME", p["ifname"])
    if p["hca"]:
        env.setdefault("NCCL_IB_HCA", p["hca"])
    figures = memory(module, p, p["host"])
    base = dict(changed=False, rank=rank, link_gbps=speed, link_source=source, memory=figures,
                per_function_gbps=p["per_function_gbps"], functions=p["functions"],
                management_gbps=p["management_gbps"], expect_rdma=p["expect_rdma"], backend=p["backend"])
    if module.check_mode:
        module.exit_json(status="skipped", reason="check mode: no collectives run", **base)
    config = {"rank": rank, "hosts": p["hosts"], "master_addr": p["master_addr"], "master_port": p["master_port"],
              "backend": p["backend"], "sizes": p["sizes"], "iters": p["iters"],
              "join_timeout": p["join_timeout"], "op_timeout": p["op_timeout"],
              "rounds": xhost.rounds_for(len(p["hosts"]), p["topology"]), "collective_sizes": p["collective_sizes"],
              "collective_iters": p["collective_iters"], "warmup_iters": p["warmup_iters"], "link_gbps": speed}
    screened = xhost.screens(len(p["hosts"]), p["topology"], p["screen_min_nodes"])
    if screened:
        # Beyond the threshold on a switch: the grouped search names the bad node instead of N-1 pair rounds.
        config["rounds"] = []
        config["screen"] = xhost.screen_spec(p["screen_min_nodes"], p["collective_sizes"], p["collective_iters"],
                                             p["warmup_iters"], p["min_busbw_fraction"])
    # Joining, the verdict, every round, then each collective and size: bounded so a wedged collective cannot hang
    # the play.
    runs = 2 + len(config["rounds"]) * len(p["sizes"]) + 2 * len(p["collective_sizes"])
    if screened:
        runs += xhost.screen_round_bound(len(p["hosts"]))
    limit = 2 * p["join_timeout"] + 60 + p["op_timeout"] * runs
    result, stderr = xhost.run_script(p["python"], config, limit, env=env)
    result.update(base)
    result["stderr_tail"] = stderr
    module.exit_json(**result)


def facts(module, p):
    if not p["python"]:
        module.fail_json(msg="mode facts needs python")
    env = dict((str(k), str(v)) for k, v in p["env"].items())
    node = p["host"] or "this host"
    figures = memory(module, p, node)
    versions = xhost.host_facts(p["python"], p["user"], p["sysfs_root"], env=env)
    if p["user"] and versions["uid"] is None:
        module.fail_json(msg="xhost_user %s: %s" % (p["user"], "; ".join(versions["notes"])), versions=versions,
                         host=node)
    module.exit_json(changed=False, versions=versions, memory=figures)


def parity(module, p):
    results = p["results"] or {}
    versions = dict((h, (results.get(h) or {}).get("versions")) for h in p["hosts"])
    # Check mode on hosts whose stack is not installed yet: what their python could not read is left out.
    differences = xhost.parity(versions, p["hosts"], skip_unread=module.check_mode)
    if differences:
        # The verdict per node: the odd ones fail with their items, the others are not checked.
        summary = {"hosts": p["hosts"], "per_host": {}, "judged": None}
        nodes = acceptance.node_verdicts(summary, differences)
        verdict = acceptance.group_verdict(nodes)
        files = write_verdicts(module, p, dict(summary, nodes=nodes, verdict=verdict, passed=False,
                                               differences=differences), nodes)
        module.fail_json(msg="the hosts differ, no collective was run: %s" % "; ".join(differences),
                         differences=differences, versions=versions, nodes=nodes, verdict=verdict,
                         failed_hosts=verdict["failed"], report_files=files)
    module.exit_json(changed=False, differences=[], versions=versions)


def write_verdicts(module, p, summary, nodes):
    """xhost.json (the group's verdict and all it was judged on), xhost.md and xhost-NODE.json per node."""
    files = {}
    if not p["report_dir"] or module.check_mode:
        return files
    try:
        names = dict((v["node"], acceptance.node_file(v["node"])) for v in nodes)
    except acceptance.AcceptanceError as exc:
        module.fail_json(msg="hosts: %s" % exc)
    makedirs(p["report_dir"])
    files["json"] = os.path.join(p["report_dir"], "xhost.json")
    atomic_write_text(files["json"], json.dumps(summary, indent=1, sort_keys=True) + "\n")
    files["markdown"] = os.path.join(p["report_dir"], "xhost.md")
    atomic_write_text(files["markdown"], xhost.render_markdown(summary))
    files["nodes"] = {}
    for v in nodes:
        path = os.path.join(p["report_dir"], names[v["node"]])
        atomic_write_text(path, json.dumps(v, indent=1, sort_keys=True) + "\n")
        files["nodes"][v["node"]] = path
    return files


def summarize(module, p):
    results = p["results"] or {}
    speeds = dict((h, (results.get(h) or {}).get("link_gbps")) for h in p["hosts"])
    summary = xhost.summarize(results, p["hosts"], speeds, p["min_link_fraction"], p["min_gbs"],
                              p["min_busbw_fraction"], p["rated_link_gbps"])
    files = write_verdicts(module, p, summary, summary["nodes"])
    slowest = (summary["judged"] or {}).get("slowest")
    cross = xhost.cross_host(summary, at=utc_now(),
                             report=files.get("markdown"))
    if p["fleet_summary"] and os.path.isfile(p["fleet_summary"]) and not module.check_mode:
        try:
            with open(p["fleet_summary"]) as handle:
                fleet = json.load(handle)
        except (IOError, OSError, ValueError) as exc:
            module.fail_json(msg="cannot read the fleet summary %s: %s" % (p["fleet_summary"], exc))
        fleet["cross_host"] = cross
        atomic_write_text(p["fleet_summary"], json.dumps(fleet, indent=2, sort_keys=True) + "\n")
        files["fleet_summary"] = p["fleet_summary"]
        files["fleet_summary_markdown"] = os.path.splitext(p["fleet_summary"])[0] + ".md"
        atomic_write_text(files["fleet_summary_markdown"], fleet_report.render_markdown(fleet))
    module.exit_json(changed=False, summary=summary, failed_hosts=summary["failed_hosts"],
                     nodes=summary["nodes"], verdict=summary["verdict"],
                     missing=summary["missing"], passed=summary["passed"], slowest=slowest, cross_host=cross,
                     report_files=files)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            mode=dict(type="str", choices=["run", "summarize", "facts", "parity"], default="run"),
            user=dict(type="str"),
            sysfs_root=dict(type="path", default="/sys"),
            python=dict(type="path"),
            host=dict(type="str"),
            hosts=dict(type="list", elements="str", required=True),
            master_addr=dict(type="str"),
            master_port=dict(type="int", default=29531),
            backend=dict(type="str", choices=["nccl", "gloo"], default="nccl"),
            ifname=dict(type="str"),
            hca=dict(type="str"),
            link_speed_gbps=dict(type="float"),
            sizes=dict(type="list", elements="int", default=[67108864, 268435456]),
            iters=dict(type="int", default=10),
            join_timeout=dict(type="int", default=120),
            op_timeout=dict(type="int", default=300),
            per_function_gbps=dict(type="float"),
            functions=dict(type="int"),
            management_gbps=dict(type="float"),
            fabric_link_gbps=dict(type="float"),
            expect_rdma=dict(type="bool", default=False),
            screen_min_nodes=dict(type="int", default=16),
            topology=dict(type="str"),
            env=dict(type="dict", default={}),
            results=dict(type="dict"),
            min_link_fraction=dict(type="float", default=0.5),
            min_gbs=dict(type="float"),
            min_busbw_fraction=dict(type="float", default=0.5),
            rated_link_gbps=dict(type="float"),
            collective_sizes=dict(type="list", elements="int", default=[268435456]),
            collective_iters=dict(type="int", default=20),
            warmup_iters=dict(type="int", default=5),
            max_message_bytes=dict(type="int", default=1073741824),
            max_memory_fraction=dict(type="float", default=0.25),
            meminfo=dict(type="path", default="/proc/meminfo"),
            report_dir=dict(type="path"),
            fleet_summary=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    # The venv's python runs in the run's own environment: no PYTHON*/PIP_* of the host (_common/run_env.py).
    run_env.scrub()
    p = module.params
    if len(p["hosts"]) < 2:
        module.fail_json(msg="collectives across hosts need at least 2 hosts, got %s" % (p["hosts"] or "none"))
    if len(set(p["hosts"])) != len(p["hosts"]):
        module.fail_json(msg="hosts has duplicates: %s" % p["hosts"])
    # Every threshold and size against its range, in every mode and before anything runs or is written.
    errors = acceptance.check_acceptance(p)
    if errors:
        module.fail_json(msg="; ".join(errors) + ": nothing was run", host=p["host"])
    if p["mode"] == "run":
        run(module, p)
    elif p["mode"] == "facts":
        facts(module, p)
    elif p["mode"] == "parity":
        parity(module, p)
    summarize(module, p)


if __name__ == "__main__":
    main()
