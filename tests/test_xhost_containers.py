"""The cross-host collectives play (sparkforge.stack.xhost) on four container hosts, gloo on the CPU.

Four containers from the test bed's amd64 image (molecule/shared/build-images.sh), on the host's
network, reached through the podman connection, each running real torch (the CPU build of torch
2.13.0 for Python 3.11, installed once into ~/.cache/sparkforge and mounted read-only). The play
runs for real: rendezvous on the first host, a world of 4, all_reduce, the bandwidth of the 6 host
pairs. Then one host is stopped: it never joins, and the check ends within the join timeout with
that host's name (no hang). The NCCL path runs on the 2-GPU machine (bench/gpu/run_xhost_2gpu.sh).
"""

import json
import os
import shutil
import subprocess
import sys
import time
import uuid

import pytest
import yaml

from helpers import CONNECTION, REPO, image_present, remove_containers, run_module, start_container

TORCH = "torch==2.13.0+cpu"
TORCH_DIR = os.path.expanduser("~/.cache/sparkforge/xhost-torch-2.13.0")
BIN = os.path.dirname(sys.executable)


needs_image = pytest.mark.skipif(not image_present(), reason="podman or the test bed's amd64 image missing")


@pytest.fixture(scope="module")
def torch_dir():
    """Real torch for the containers' Python 3.11 (the CPU wheel this machine's pip finds locally)."""
    if not os.path.isdir(os.path.join(TORCH_DIR, "torch")):
        tmp = TORCH_DIR + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                               "--target", tmp, TORCH], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              universal_newlines=True)
        if proc.returncode != 0:
            pytest.skip("cannot install %s for the containers: %s" % (TORCH, proc.stdout[-500:]))
        os.rename(tmp, TORCH_DIR)
    return TORCH_DIR


@pytest.fixture(scope="module")
def group(torch_dir, tmp_path_factory):
    tag = uuid.uuid4().hex[:6]
    names = dict(("x%d" % i, "sparkforge-xhost-%s-%d" % (tag, i)) for i in range(1, 5))
    try:
        for name in names.values():
            start_container(name, volumes=["%s:/opt/xtorch:ro" % torch_dir])
        root = tmp_path_factory.mktemp("xhost")
        hosts = dict((h, {"ansible_connection": CONNECTION, "ansible_host": c,
                          "ansible_python_interpreter": "/usr/bin/python3"}) for h, c in names.items())
        inventory = root / "inventory.yml"
        inventory.write_text(yaml.safe_dump({"all": {"hosts": hosts, "vars": {
            "xhost_backend": "gloo", "xhost_python": "/usr/bin/python3", "xhost_env": {"PYTHONPATH": "/opt/xtorch"},
            "xhost_ifname": "lo", "xhost_master_addr": "127.0.0.1",
            # The loopback reports no speed in sysfs: say what the "NIC" is (1 Gb/s).
            "xhost_link_speed_gbps": 1.0, "xhost_sizes": [1 << 20, 4 << 20], "xhost_iters": 3,
            "xhost_join_timeout": 20, "xhost_op_timeout": 60}}}))
        yield {"inventory": str(inventory), "names": names, "root": root}
    finally:
        remove_containers(names.values())


def play(group, reports, port, *extra):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    cmd = [os.path.join(BIN, "ansible-playbook"), os.path.join(REPO, "playbooks", "xhost.yml"),
           "-i", group["inventory"], "-e", json.dumps({"xhost_report_dir": str(reports), "xhost_master_port": port}),
           "-f", "4"] + list(extra)
    start = time.time()
    proc = subprocess.run(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=900)
    return proc.returncode, proc.stdout, time.time() - start


@needs_image
def test_world_of_four_then_a_host_that_never_joins(group):
    reports = group["root"] / "reports"
    reports.mkdir()
    # A fleet summary from an earlier provisioning run: the check adds the slowest link to it.
    (reports / "fleet-summary.json").write_text(json.dumps({"x1": {"state": "provisioned"}}))
    rc, out, _ = play(group, reports, 29611)
    assert rc == 0, out[-4000:]
    summary = json.loads((reports / "xhost.json").read_text())
    assert summary["passed"] and summary["backend"] == "gloo" and summary["missing"] == []
    assert summary["hosts"] == ["x1", "x2", "x3", "x4"]
    pairs = summary["judged"]["pairs"]
    assert sorted((p["a"], p["b"]) for p in pairs) == [("x1", "x2"), ("x1", "x3"), ("x1", "x4"),
                                                       ("x2", "x3"), ("x2", "x4"), ("x3", "x4")]
    assert all(p["exact"] and p["gbs"] > 0 and p["link_gbps"] == 1.0 for p in pairs), pairs
    assert "Slowest pair:" in (reports / "xhost.md").read_text()
    assert "slowest pair: x" in out
    fleet = json.loads((reports / "fleet-summary.json").read_text())
    assert fleet["x1"] == {"state": "provisioned"} and fleet["cross_host"]["passed"]
    assert fleet["cross_host"]["slowest"]["gbs"] == min(p["gbs"] for p in pairs)

    # x4 goes away: Ansible finds it unreachable, the others wait for it for the join timeout only.
    subprocess.run(["podman", "stop", "-t", "0", group["names"]["x4"]], check=True, stdout=subprocess.DEVNULL)
    rc, out, seconds = play(group, reports, 29612)
    assert rc != 0, out[-4000:]
    summary = json.loads((reports / "xhost.json").read_text())
    assert summary["missing"] == ["x4"] and not summary["passed"], summary
    assert summary["per_host"]["x4"]["status"] == "unreachable"
    assert all(summary["per_host"][h]["status"] == "not checked" for h in ("x1", "x2", "x3")), summary["per_host"]
    assert "x4 never joined within 20 s" in out
    # Ended by the join timeout (20 s), not by the play's own limit for a hung collective (minutes).
    assert seconds < 150, seconds


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
