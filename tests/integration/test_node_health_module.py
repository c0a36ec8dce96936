"""node_health runs as a module (tests/helpers.run_module) on stand-ins at the boundaries it reads: the test bed's
fake nvidia-smi (real CSV format, a GPU profile per node), /proc/driver/nvidia/version as a file under proc_root,
and journalctl / dmesg as scripts printing kernel log text in their formats (fixtures/node_health). The sampling
follows a real async results file's two states as async_wrapper writes them; compare adds the verdicts to an
acceptance report written by the acceptance's own functions. Seconds in all, no containers."""

import json
import os
import stat

from helpers import GB10, fake_smi, load_manifest, run_module

from ansible_collections.sparkforge.stack.tests.unit.utils.harness import FIXTURES

FIX = os.path.join(FIXTURES, "node_health")


def spec(**kw):
    out = dict(load_manifest()["sparkforge_node_health"])
    out.update(kw)
    return out


def script(path, body):
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def node(tmp_path, host, journal="cat %s\n" % os.path.join(FIX, "journal-errors.txt"), dmesg="exit 1\n",
         version="version-open-gb10.txt", **gpu):
    """A stand-in node: its bin directory (nvidia-smi, journalctl, dmesg) and proc root."""
    bindir = tmp_path / host / "bin"
    bindir.mkdir(parents=True)
    profile = dict(GB10, persistence_mode="Enabled", **{"clocks.sm": 2405, "clocks.max.sm": 3003, "power.draw": 61.3,
                                                        "power.limit": None})
    profile.update(gpu)
    os.rename(fake_smi(str(bindir), host, profile), str(bindir / "nvidia-smi"))
    script(bindir / "journalctl", journal)
    script(bindir / "dmesg", dmesg)
    proc = tmp_path / host / "proc" / "driver" / "nvidia"
    proc.mkdir(parents=True)
    with open(os.path.join(FIX, version)) as handle:
        (proc / "version").write_text(handle.read())
    return {"PATH": "%s:/usr/bin:/bin" % bindir}, str(tmp_path / host / "proc")


def test_read_samples_until_the_collective_ends_then_reads_driver_and_kernel_log(tmp_path):
    env, proc = node(tmp_path, "spark-1")
    # The collective's async job still running (async_wrapper's first write): sampling goes on until max_seconds.
    job = tmp_path / "j123.456"
    job.write_text(json.dumps({"started": True, "finished": False, "ansible_job_id": "j123.456"}))
    res, rc = run_module("node_health", {"mode": "read", "spec": spec(sample_interval=0.2), "proc_root": proc,
                                         "watch_file": str(job), "max_seconds": 1}, env=env)
    assert rc == 0 and not res["changed"], res
    assert res["samples"] >= 3, res
    assert res["driver"] == {"flavour": "open", "version": "580.95.05"}
    (gpu,) = res["gpus"]
    assert gpu["name"] == "NVIDIA GB10" and gpu["peak_sm_mhz"] == 2405.0 and gpu["peak_power_w"] == 61.3
    assert gpu["power_limit_w"] is None and gpu["persistence"] == "Enabled" and gpu["samples"] == res["samples"]
    assert res["kernel_log"] == "journalctl -k -b --no-pager"
    assert [x["code"] for x in res["xid"]] == [79, 13] and len(res["aer"]) == 2
    # The job ended (its result replaced the file): one sample, at once.
    job.write_text(json.dumps({"changed": False, "status": "ok"}))
    res, rc = run_module("node_health", {"mode": "read", "spec": spec(), "proc_root": proc, "watch_file": str(job),
                                         "max_seconds": 600}, env=env)
    assert rc == 0 and res["samples"] == 1, res


def test_read_falls_back_to_dmesg_and_fails_naming_both_when_neither_reads(tmp_path):
    env, proc = node(tmp_path, "h200", journal="echo '-- No entries --'\n",
                     dmesg="cat %s\n" % os.path.join(FIX, "dmesg-h200.txt"), version="version-open-h200.txt")
    res, rc = run_module("node_health", {"mode": "read", "spec": spec(), "proc_root": proc}, env=env)
    assert rc == 0 and res["kernel_log"] == "dmesg" and res["xid"] == [] and res["aer"] == [], res
    denied = "echo 'No journal files were opened due to insufficient permissions.' >&2; exit 1\n"
    env, proc = node(tmp_path, "locked", journal=denied,
                     dmesg="echo 'dmesg: read kernel buffer failed: Operation not permitted' >&2; exit 1\n")
    res, rc = run_module("node_health", {"mode": "read", "spec": spec(), "proc_root": proc}, env=env)
    assert rc != 0 and "the kernel log since boot could not be read" in res["msg"], res
    assert "dmesg: exit 1, dmesg: read kernel buffer failed: Operation not permitted" in res["msg"], res


def test_bad_thresholds_are_refused_before_anything_is_read(tmp_path):
    res, rc = run_module("node_health", {"mode": "check", "spec": spec(min_power_fraction=5)}, check_mode=True)
    assert rc != 0 and res["msg"].startswith("xhost_node_health_spec.min_power_fraction: 5 is out of range"), res
    res, rc = run_module("node_health", {"mode": "check", "spec": spec()}, check_mode=True)
    assert rc == 0 and not res["changed"], res


def test_compare_adds_each_node_to_the_acceptance_report(tmp_path):
    from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import acceptance
    hosts = ["spark-1", "spark-2", "spark-3"]
    results = {}
    for i, h in enumerate(hosts):
        env, proc = node(tmp_path, h, journal="cat %s\n" % os.path.join(FIX, "dmesg-h200.txt"),
                         **({"power.draw": 19.0} if h == "spark-3" else {}))
        results[h], rc = run_module("node_health", {"mode": "read", "spec": spec(), "proc_root": proc}, env=env)
        assert rc == 0, results[h]
    summary = {"hosts": hosts, "per_host": {}, "judged": {"pairs": []}, "failed_hosts": []}
    nodes = acceptance.node_verdicts(summary)
    summary.update(nodes=nodes, verdict=acceptance.group_verdict(nodes), passed=True)
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "xhost.json").write_text(json.dumps(summary))
    for v in nodes:
        (reports / acceptance.node_file(v["node"])).write_text(json.dumps(v))
    (reports / "xhost.md").write_text("# Cross-host check\n")
    args = {"mode": "compare", "spec": spec(), "hosts": hosts, "results": results, "report_dir": str(reports)}
    before = dict((p.name, p.read_text()) for p in reports.iterdir())
    res, rc = run_module("node_health", args, check_mode=True)
    assert rc == 0 and res["failed_hosts"] == ["spark-3"], res
    assert dict((p.name, p.read_text()) for p in reports.iterdir()) == before, "check mode wrote the report"
    res, rc = run_module("node_health", args)
    assert rc == 0 and res["failed_hosts"] == ["spark-3"] and len(res["report_files"]) == 5, res
    merged = json.loads((reports / "xhost.json").read_text())
    assert merged["passed"] is False and merged["verdict"]["failed"] == ["spark-3"]
    assert [h["verdict"] for h in merged["health"]] == ["pass", "pass", "fail"]
    mine = json.loads((reports / "xhost-spark-3.json").read_text())
    assert mine["verdict"] == "fail" and "health: its peak power.draw during the collective was 19 W" in \
        mine["reasons"][0], mine
    assert "## Node health" in (reports / "xhost.md").read_text()
    # Run again (the play rerun on the same report): one health section, not two.
    run_module("node_health", args)
    assert (reports / "xhost.md").read_text().count("## Node health") == 1
