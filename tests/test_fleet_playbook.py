"""playbooks/spark.yml on a fleet of local hosts: build once per class, install everywhere.

Three inventory hosts on this machine (local connection, each with its own sparkforge_prefix and
a fake nvidia-smi of its own: two DGX Spark GB10s and one GH200), components [triton], the
fixture LLVM/Triton repositories (tests/fixtures/triton).  Asserts, through the playbook's own
summary and history (reports/fleet-*.json) and the hosts' files:
  - two platform classes; each builds Triton exactly once, on its builder;
  - every host of a class holds a byte-identical wheel, installed in its venv;
  - a rerun changes nothing and builds nothing;
  - a changed arch list of one class changes only that class;
  - a host with a broken venv fails alone: the others end provisioned.
The container version of this (arm64 + amd64 hosts) is molecule/fleet.
"""

import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from helpers import REPO, fake_smi

BIN = os.path.dirname(sys.executable)
FIXTURES = os.path.join(REPO, "tests", "fixtures", "triton")
GPUS = {
    "s1": {"name": "NVIDIA GB10", "compute_cap": "12.1", "driver_version": "580.95.05", "memory.total": None},
    "s2": {"name": "NVIDIA GB10", "compute_cap": "12.1", "driver_version": "580.95.05", "memory.total": None},
    "g1": {"name": "NVIDIA GH200 480GB", "compute_cap": "9.0", "driver_version": "580.95.05", "memory.total": 97871},
}

pytestmark = pytest.mark.skipif(os.path.exists("/usr/bin/nvidia-smi"), reason="a real NVIDIA driver is here")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    root = tmp_path_factory.mktemp("fleet")
    subprocess.run([sys.executable, os.path.join(FIXTURES, "make_repos.py"), str(root / "repos")], check=True,
                   stdout=subprocess.DEVNULL)
    with open(root / "repos" / "fixture.json") as handle:
        fixture = json.load(handle)
    hosts = {}
    for host in GPUS:
        hosts[host] = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                       "sparkforge_prefix": str(root / host),
                       "preflight_nvidia_smi": fake_smi(str(root), host, GPUS[host])}
    group = {
        "sparkforge_components": ["triton"],
        "sparkforge_torch_version": "2.10.0",
        "sparkforge_fleet_wheelhouse": str(root / "wheelhouse"),
        "sparkforge_fleet_report_dir": str(root / "reports"),
        "preflight_allow_x86_64": True,
        "preflight_supported_distributions": [{"distribution": "Debian", "versions": ["12"]},
                                              {"distribution": "Ubuntu", "versions": ["22.04", "24.04"]}],
        "preflight_min_ram_gib": 1, "preflight_min_ram_gib_source_build": 1,
        "preflight_min_disk_gib": 1, "preflight_min_disk_gib_source_build": 1,
        "triton_repo": fixture["triton_repo"],
        "triton_llvm_repo": "file://" + fixture["llvm_repo"],
        "triton_llvm_commit": fixture["llvm_commit"],
        "triton_ptxas_path": os.path.join(FIXTURES, "cuda", "bin", "ptxas"),
        "triton_jobs": "2",
        "triton_poll_interval_s": 1,
        # Present on the test machine; never update apt's lists from a test.
        "triton_build_packages": ["git"],
        "triton_apt_cache_valid_time": 10 ** 9,
        "triton_venv_build_requirements": ["setuptools", "wheel"],
    }
    inventory = root / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": hosts, "vars": group}}))
    return {"root": root, "inventory": str(inventory)}


def run(fleet, *extra):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORCE_COLOR="0")
    # The batch size is a play keyword: Ansible reads it from extra vars, never from the inventory.
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "playbooks/spark.yml", "-i", fleet["inventory"],
                           "-e", "sparkforge_serial=1"] + list(extra), cwd=REPO, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=900, check=False)
    recap = {m.group(1): {"changed": int(m.group(2)), "failed": int(m.group(3))} for m in re.finditer(
        r"^(\S+)\s+: ok=\d+\s+changed=(\d+)\s+unreachable=\d+\s+failed=(\d+)", proc.stdout, re.M)}
    with open(fleet["root"] / "reports" / "fleet-history.jsonl") as handle:
        last = json.loads(handle.read().splitlines()[-1])["hosts"]
    return proc, recap, last


def builds(summary):
    return {r["class"]: r["builds"] for r in summary.values() if r["builder"]}


def test_fleet_build_once_install_everywhere(fleet):
    proc, recap, summary = run(fleet)
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert all(r["state"] == "provisioned" for r in summary.values()), summary
    classes = {h: r["class"] for h, r in summary.items()}
    assert classes["s1"] == classes["s2"] != classes["g1"]
    # One builder per class: the first host of each; each built Triton exactly once.
    assert sorted(h for h, r in summary.items() if r["builder"]) == ["g1", "s1"]
    assert builds(summary) == {classes["s1"]: ["triton"], classes["g1"]: ["triton"]}
    # Byte-identical wheels within a class, different across classes (built separately).
    assert summary["s1"]["wheels"] == summary["s2"]["wheels"] and summary["s1"]["wheels"]["triton"]
    for host in ("s1", "s2", "g1"):
        venv = fleet["root"] / host / "venv"
        with open(venv / "sparkforge-wheels.json") as handle:
            assert json.load(handle) == summary[host]["wheels"]
        out = subprocess.check_output([str(venv / "bin" / "python"), "-c", "import triton; print(triton.__version__)"])
        assert out.decode().strip().startswith("3.6.0")
    # Only builders built: the other host has no build tree.
    assert not (fleet["root"] / "s2" / "build" / "triton").exists()
    wheelhouse = fleet["root"] / "wheelhouse"
    # One directory per class's wheels; the classes' generations beside them.
    assert sorted(os.listdir(wheelhouse)) == sorted({classes["s1"], classes["g1"], "generations"})
    assert "platform class" in proc.stdout and "builder s1" in proc.stdout

    # A rerun on the unchanged fleet: nothing built, nothing changed.
    proc, recap, summary2 = run(fleet)
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert all(c["changed"] == 0 for c in recap.values()), recap
    assert builds(summary2) == {classes["s1"]: [], classes["g1"]: []}
    assert {h: r["wheels"] for h, r in summary2.items()} == {h: r["wheels"] for h, r in summary.items()}

    # A changed arch list of the GH200's class: only that class changes.
    _set_host_var(fleet, "g1", "sparkforge_cuda_arch_list", "9.0+PTX")
    proc, recap, summary3 = run(fleet)
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert summary3["s1"]["class"] == classes["s1"] and summary3["s2"]["class"] == classes["s2"]
    assert summary3["g1"]["class"] != classes["g1"]
    assert recap["s1"]["changed"] == 0 and recap["s2"]["changed"] == 0

    # One broken host: the others are provisioned, the broken one is reported failed.
    python = fleet["root"] / "s2" / "venv" / "bin" / "python"
    os.rename(python, str(python) + ".moved")
    with open(python, "w") as handle:
        handle.write("#!/bin/sh\necho broken venv >&2\nexit 1\n")
    os.chmod(python, 0o755)
    try:
        proc, recap, summary4 = run(fleet)
    finally:
        os.remove(python)
        os.rename(str(python) + ".moved", python)
    assert proc.returncode == 2, proc.stdout[-6000:]
    assert summary4["s2"]["state"] == "failed" and summary4["s2"]["error"]
    assert summary4["s1"]["state"] == summary4["g1"]["state"] == "provisioned"
    assert recap["s2"]["failed"] == 1 and recap["s1"]["failed"] == recap["g1"]["failed"] == 0


def _set_host_var(fleet, host, name, value):
    with open(fleet["inventory"]) as handle:
        data = yaml.safe_load(handle)
    data["all"]["hosts"][host][name] = value
    with open(fleet["inventory"], "w") as handle:
        yaml.safe_dump(data, handle)
