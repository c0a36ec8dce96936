#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: node_health
short_description: Each GPU node's health beside the cross-host acceptance - kernel errors, driver, clocks and power
version_added: "0.5.0"
description:
  - With I(mode=read), on each node (started with C(async) and C(poll=0) as the collective starts) - samples
    C(nvidia-smi --query-gpu) (SM clock, power drawn, persistence mode, driver version) every I(interval) seconds
    until the collective's async job, I(watch_file), has ended (at most I(max_seconds)), then reads the driver's
    flavour (open or proprietary kernel modules) and version from C(PROC/driver/nvidia/version) and the kernel log
    since boot (C(journalctl -k -b), else C(dmesg)) for NVRM Xid lines and PCIe AER bus errors.
  - With I(mode=compare), on the controller - compares every node with its peers (M(sparkforge.stack.xhost_collectives)
    has written the acceptance's report) and names each node that differs with the reason - an Xid or AER error since
    boot, a proprietary driver where the GPU needs the open modules, another driver flavour or version, persistence
    off where most peers have it on, a peak SM clock or power under load far below the peers' median, a node whose
    reading did not come back. The verdicts go into C(xhost.json), C(xhost-NODE.json) and C(xhost.md).
  - With I(mode=check) - the thresholds (I(spec)) against their ranges, before anything runs.
  - Reads only on the nodes; supports check mode (C(compare) then writes nothing).
author:
  - sparkforge developers (@sparkforge)
options:
  mode:
    description: C(read) on each node, C(compare) once on the controller, C(check) before the collective.
    type: str
    choices: [read, compare, check]
    default: read
  spec:
    description:
      - The thresholds, the manifest's C(sparkforge_node_health) - min_clock_fraction, min_power_fraction,
        xid_ignored, aer_severities, open_modules_required, sample_interval.
    type: dict
    required: true
  proc_root:
    description: For C(read) - where procfs is mounted (C(driver/nvidia/version)). Tests point it at a stand-in tree.
    type: path
    default: /proc
  gpu:
    description: For C(read) - the GPU the collective uses (nvidia-smi's C(-i) - an index, bus id or UUID); all GPUs
      when omitted.
    type: str
  watch_file:
    description: For C(read) - the collective's async results file (its start's C(results_file)); sampling ends when
      that job has finished. Without it one sample is taken.
    type: path
  max_seconds:
    description: For C(read) - the longest the sampling runs, whatever I(watch_file) says.
    type: int
    default: 3600
  hosts:
    description: For C(compare) - every node of the play, in order.
    type: list
    elements: str
  results:
    description: For C(compare) - each node's C(read) result, keyed by node (a node without one fails safe).
    type: dict
  report_dir:
    description: For C(compare) - where the acceptance wrote C(xhost.json); the health verdicts are added there.
    type: path
"""

EXAMPLES = r"""
- name: Sample each node while the collective runs
  sparkforge.stack.node_health:
    mode: read
    spec: "{{ sparkforge_node_health }}"
    watch_file: "{{ xhost_job.results_file }}"
  async: 3600
  poll: 0
  register: health_job

- name: Compare the nodes
  sparkforge.stack.node_health:
    mode: compare
    spec: "{{ sparkforge_node_health }}"
    hosts: "{{ ansible_play_hosts_all }}"
    results: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'health_read'))) }}"
    report_dir: reports
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
driver:
  description: For C(read) - the driver's flavour (open, proprietary, null when unread) and version.
  returned: mode read
  type: dict
gpus:
  description: For C(read) - per GPU its peak SM clock (MHz) and power drawn (W) over the samples, the sample count,
    its maximum SM clock, power limit, persistence mode and driver version.
  returned: mode read
  type: list
  elements: dict
xid:
  description: For C(read) - the NVRM Xid lines of the kernel log since boot (device, code, line).
  returned: mode read
  type: list
  elements: dict
aer:
  description: For C(read) - the PCIe AER bus errors of the kernel log since boot (device, severity, type, line).
  returned: mode read
  type: list
  elements: dict
kernel_log:
  description: For C(read) - the command the kernel log was read with.
  returned: mode read
  type: str
nodes:
  description: For C(compare) - the health verdict per node (node, verdict pass or fail, reasons, driver,
    persistence, figures, xid, aer).
  returned: mode compare
  type: list
  elements: dict
failed_hosts:
  description: For C(compare) - the nodes whose health failed.
  returned: mode compare
  type: list
  elements: str
report_files:
  description: For C(compare) - the report files the verdicts were added to.
  returned: mode compare
  type: list
  elements: str
"""

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import acceptance, node_health
from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import atomic_write_text


def job_finished(path):
    """Whether the async job behind path has ended: async_wrapper writes {"started": ...} while it runs and the
    module's result when it ends (ansible.builtin.async_status reads it the same way); unreadable: still running."""
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (IOError, OSError, ValueError):
        return False
    return "started" not in data or data.get("finished") in (True, 1)


def sample(module, smi, gpu):
    cmd = [smi, "--query-gpu=%s" % ",".join(node_health.QUERY), "--format=csv"] + (["-i", gpu] if gpu else [])
    rc, out, err = module.run_command(cmd)
    if rc != 0:
        module.fail_json(msg="%s failed (exit %d): %s" % (" ".join(cmd), rc, (err or out).strip()), error=err or out)
    return node_health.gpus(out)


def kernel_log(module):
    """The kernel log since boot: journalctl -k -b, else dmesg (a host without a journal prints nothing there, as
    docs/results/node-facts-h200 shows). Unreadable by both: the task fails, naming why (no silent pass)."""
    tried = []
    for cmd in (["journalctl", "-k", "-b", "--no-pager"], ["dmesg"]):
        path = module.get_bin_path(cmd[0])
        if not path:
            tried.append("%s: not installed" % cmd[0])
            continue
        rc, out, err = module.run_command([path] + cmd[1:])
        if rc == 0 and out.strip() and not out.strip().startswith("-- No entries --"):
            return " ".join(cmd), out
        tried.append("%s: exit %d%s" % (" ".join(cmd), rc, ", " + err.strip() if err.strip() else ", no lines"))
    module.fail_json(msg="the kernel log since boot could not be read (%s): let the check's user read it (group adm "
                         "or systemd-journal, or kernel.dmesg_restrict=0)" % "; ".join(tried), error="; ".join(tried))


def read(module, p):
    spec = p["spec"]
    smi = module.get_bin_path("nvidia-smi", required=True)
    samples = [sample(module, smi, p["gpu"])]
    if p["watch_file"] and not module.check_mode:
        deadline = time.time() + p["max_seconds"]
        while not job_finished(p["watch_file"]) and time.time() < deadline:
            time.sleep(spec["sample_interval"])
            samples.append(sample(module, smi, p["gpu"]))
    version_file = os.path.join(p["proc_root"], "driver", "nvidia", "version")
    try:
        with open(version_file) as handle:
            drv = node_health.driver(handle.read())
    except (IOError, OSError) as exc:
        module.fail_json(msg="cannot read %s: %s (is the NVIDIA driver loaded?)" % (version_file, exc))
    source, log = kernel_log(module)
    errors = node_health.kernel_errors(log)
    module.exit_json(changed=False, driver=drv, driver_source=version_file, gpus=node_health.peaks(samples),
                     samples=len(samples), xid=errors["xid"], aer=errors["aer"], kernel_log=source)


def compare(module, p):
    if not p["hosts"]:
        module.fail_json(msg="mode compare needs hosts")
    nodes = node_health.compare(p["results"] or {}, p["hosts"], p["spec"])
    failed = [v["node"] for v in nodes if v["verdict"] == "fail"]
    files = []
    summary_path = os.path.join(p["report_dir"], "xhost.json") if p["report_dir"] else None
    if summary_path and os.path.isfile(summary_path) and not module.check_mode:
        try:
            with open(summary_path) as handle:
                summary = json.load(handle)
        except (IOError, OSError, ValueError) as exc:
            module.fail_json(msg="cannot read the acceptance's report %s: %s" % (summary_path, exc))
        summary = node_health.merge(summary, nodes)
        atomic_write_text(summary_path, json.dumps(summary, indent=1, sort_keys=True) + "\n")
        files.append(summary_path)
        for v in summary["nodes"]:
            try:
                path = os.path.join(p["report_dir"], acceptance.node_file(v["node"]))
            except acceptance.AcceptanceError as exc:
                module.fail_json(msg="hosts: %s" % exc)
            if os.path.isfile(path):
                atomic_write_text(path, json.dumps(v, indent=1, sort_keys=True) + "\n")
                files.append(path)
        md = os.path.join(p["report_dir"], "xhost.md")
        if os.path.isfile(md):
            with open(md) as handle:
                text = handle.read()
            atomic_write_text(md, text.split("\n## Node health\n")[0].rstrip("\n") + "\n"
                              + node_health.render_markdown(nodes))
            files.append(md)
    module.exit_json(changed=False, nodes=nodes, failed_hosts=failed, report_files=files)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            mode=dict(type="str", choices=["read", "compare", "check"], default="read"),
            spec=dict(type="dict", required=True),
            proc_root=dict(type="path", default="/proc"),
            gpu=dict(type="str"),
            watch_file=dict(type="path"),
            max_seconds=dict(type="int", default=3600),
            hosts=dict(type="list", elements="str"),
            results=dict(type="dict"),
            report_dir=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    # Every threshold against its range in every mode, before anything is read or written.
    errors = node_health.check_thresholds(p["spec"])
    if errors:
        module.fail_json(msg="; ".join(errors) + ": nothing was run", errors=errors)
    if p["mode"] == "read":
        read(module, p)
    elif p["mode"] == "compare":
        compare(module, p)
    module.exit_json(changed=False, msg="the node health thresholds are in range")


if __name__ == "__main__":
    main()
