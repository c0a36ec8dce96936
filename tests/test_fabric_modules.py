"""fabric_facts and fabric_netplan run as modules (tests/helpers.run_module) on stand-in sysfs trees
and a temporary root: seconds in all, no containers. The cluster playbook itself (check mode, the run, a
no-op rerun, bad inputs refused) runs on container hosts in tests/test_xhost_containers.py."""

import importlib.util
import os
import sys

from helpers import run_module

TREES = os.path.join(os.path.dirname(__file__), "..", "collections", "ansible_collections", "sparkforge", "stack",
                     "tests", "unit", "plugins", "module_utils", "fabric_trees.py")
_spec = importlib.util.spec_from_file_location("fabric_trees", TREES)
fabric_trees = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fabric_trees)


def spark(tmp_path, name="sys", **kw):
    sysfs, proc = str(tmp_path / name), str(tmp_path / (name + "-proc"))
    fabric_trees.spark(sysfs, proc, **kw)
    return sysfs, proc


def test_fabric_facts_on_a_spark_tree(tmp_path):
    sysfs, proc = spark(tmp_path, ipv4="169.254.35.62")
    res, rc = run_module("fabric_facts", {"sysfs_root": sysfs, "proc_root": proc, "connection_address": "192.168.1.20",
                                          "addresses": {"enP7s7": ["192.168.1.20"]}}, check_mode=True)
    assert rc == 0 and not res["changed"], res
    assert res["fabric"]["cabled_ports"] == ["enp1s0f1np1"]
    assert res["fabric"]["management"] == {"enP7s7": "holds 192.168.1.20, the address Ansible connects to"}
    assert res["nccl_env"]["NCCL_IB_HCA"] == "=rocep1s0f1:1,roceP2p1s0f1:1"
    assert res["port"]["usable_gbps"] == 200.0


def test_fabric_facts_refuses_an_unknown_interface(tmp_path):
    sysfs, proc = spark(tmp_path)
    res, rc = run_module("fabric_facts", {"sysfs_root": sysfs, "proc_root": proc, "addresses": {},
                                          "fabric_interface": "enp9s0"})
    assert rc != 0 and "enp9s0 is not a function" in res["msg"], res


def netplan_args(tmp_path, sysfs, **kw):
    args = {"root": str(tmp_path / "root"), "sysfs_root": sysfs, "interface": "enp1s0f1np1",
            "twins": ["enP2p1s0f1np1"], "address": "192.168.100.11/24", "mtu": 9000,
            "keep_interfaces": ["enP7s7"], "generate_command": ["true"], "apply_command": ["true"],
            "confirm_timeout": 0}
    args.update(kw)
    return args


def test_fabric_netplan_check_mode_apply_rerun(tmp_path):
    sysfs, _ = spark(tmp_path)
    path = tmp_path / "root" / "etc" / "netplan" / "40-sparkforge-fabric.yaml"
    args = netplan_args(tmp_path, sysfs)
    preview, rc = run_module("fabric_netplan", args, check_mode=True, diff=True)
    assert rc == 0 and preview["changed"] and not path.exists(), preview
    assert "- 192.168.100.11/24" in preview["diff"]["after"]
    first, rc = run_module("fabric_netplan", args)
    assert rc == 0 and first["changed"] and not first["armed"], first
    assert path.read_text() == preview["diff"]["after"] and oct(path.stat().st_mode & 0o777) == "0o600"
    again, rc = run_module("fabric_netplan", args)
    assert rc == 0 and not again["changed"], again


def test_fabric_netplan_refuses_before_any_change(tmp_path):
    sysfs, _ = spark(tmp_path)
    path = tmp_path / "root" / "etc" / "netplan" / "40-sparkforge-fabric.yaml"
    res, rc = run_module("fabric_netplan", netplan_args(tmp_path, sysfs, interface="enP7s7", twins=[]))
    assert rc != 0 and "enP7s7 is a management interface" in res["msg"], res
    res, rc = run_module("fabric_netplan", netplan_args(tmp_path, sysfs, interface="enp7s0f0np0"))
    assert rc != 0 and "interface enp7s0f0np0 does not exist" in res["msg"], res
    # A failing apply: reverted, no file left behind.
    res, rc = run_module("fabric_netplan", netplan_args(tmp_path, sysfs, apply_command=["false"]))
    assert rc != 0 and res["reverted"] and "was reverted" in res["msg"], res
    assert not path.exists()


def test_fabric_netplan_confirm(tmp_path):
    sysfs, _ = spark(tmp_path)
    path = tmp_path / "root" / "etc" / "netplan" / "40-sparkforge-fabric.yaml"
    res, rc = run_module("fabric_netplan", netplan_args(tmp_path, sysfs, confirm_timeout=5))
    assert rc == 0 and res["armed"], res
    done, rc = run_module("fabric_netplan", {"state": "confirmed", "root": str(tmp_path / "root")})
    assert rc == 0 and done["changed"], done
    again, rc = run_module("fabric_netplan", {"state": "confirmed", "root": str(tmp_path / "root")})
    assert rc == 0 and not again["changed"] and path.exists()


def test_fabric_plan_refuses_duplicates(tmp_path):
    sysfs, proc = spark(tmp_path)
    facts, _ = run_module("fabric_facts", {"sysfs_root": sysfs, "proc_root": proc, "addresses": {}})
    hosts = {"a": {"interface": "enp1s0f1np1", "address": "192.168.100.11", "fabric": facts["fabric"]},
             "b": {"interface": "enp1s0f1np1", "address": "192.168.100.12", "fabric": facts["fabric"]}}
    ok, rc = run_module("fabric_plan", {"hosts": hosts, "subnet": "192.168.100.0/24", "order": ["a", "b"]})
    assert rc == 0 and ok["hostfile"] == "192.168.100.11 slots=1\n192.168.100.12 slots=1\n", ok
    hosts["b"]["address"] = "192.168.100.11"
    bad, rc = run_module("fabric_plan", {"hosts": hosts, "subnet": "192.168.100.0/24"})
    assert rc != 0 and "b: address 192.168.100.11 is already a's" in bad["msg"], bad


def test_runtime_env_adds_the_fabric_variables_only_on_a_cluster(tmp_path):
    """runtime_env in check mode on two local hosts: one with sparkforge_fabric_env, one without."""
    import json
    import subprocess
    from helpers import REPO
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "all:\n  hosts:\n"
        "    fabric-host:\n      ansible_connection: local\n"
        "      sparkforge_fabric_env: {NCCL_SOCKET_IFNAME: '=enp1s0f1np1', NCCL_IB_HCA: '=rocep1s0f1:1,roceP2p1s0f1:1',"
        " NCCL_IB_DISABLE: '0'}\n"
        "    plain-host:\n      ansible_connection: local\n")
    play = tmp_path / "play.yml"
    play.write_text(
        "- hosts: all\n  gather_facts: false\n  roles:\n    - role: sparkforge.stack.runtime_env\n"
        "      vars:\n        runtime_env_sm_archs: [sm_90]\n        runtime_env_venv_hook: false\n"
        "        runtime_env_profile_path: %s/{{ inventory_hostname }}.sh\n" % tmp_path)
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
               ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(inventory),
                           str(play), "--check"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, env=env, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    facts = {}
    for play_out in out["plays"]:
        for task in play_out["tasks"]:
            for host, res in task["hosts"].items():
                if "sparkforge_runtime_env_vars" in res.get("ansible_facts", {}):
                    facts[host] = res["ansible_facts"]["sparkforge_runtime_env_vars"]
    assert facts["fabric-host"]["NCCL_IB_HCA"] == "=rocep1s0f1:1,roceP2p1s0f1:1"
    assert facts["fabric-host"]["NCCL_IB_DISABLE"] == "0"
    assert not [k for k in facts["plain-host"] if k.startswith(("NCCL_", "GLOO_"))]
    assert facts["plain-host"]["CUDA_MODULE_LOADING"] == facts["fabric-host"]["CUDA_MODULE_LOADING"]


def test_cli_cluster_command(tmp_path):
    import io
    from sparkforge import cli
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["cluster", "--help"], stdout=out, stderr=err) == 0
    rc = cli.main(["cluster", "--check", "-q", "-i", str(tmp_path / "missing.yml")], stdout=out, stderr=err)
    assert rc == 4, out.getvalue() + err.getvalue()
