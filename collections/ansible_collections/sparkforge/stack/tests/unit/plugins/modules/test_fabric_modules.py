"""fabric_facts and fabric_netplan run as modules (tests/unit/utils/harness.run_module) on stand-in sysfs trees
and a temporary root: seconds in all, no containers. The cluster playbook itself (check mode, the run, a
no-op rerun, bad inputs refused) runs on container hosts in tests/e2e/test_xhost_containers.py."""

import importlib.util
import os
import sys

from ansible_collections.sparkforge.stack.tests.unit.utils.harness import COLLECTIONS, run_module

TREES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "module_utils", "fabric_trees.py")
_spec = importlib.util.spec_from_file_location("fabric_trees", TREES)
fabric_trees = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fabric_trees)


def playbook_env():
    """ansible-playbook's environment for a play of this collection, found without a checkout's ansible.cfg: the
    collection from its own folder, and the settings of the project's ansible.cfg these plays depend on."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_PYTHON_INTERPRETER="auto_silent",
               ANSIBLE_DUPLICATE_YAML_DICT_KEY="error", ANSIBLE_RETRY_FILES_ENABLED="false")
    env.pop("ANSIBLE_CONFIG", None)
    return env


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
    sysfs, _proc = spark(tmp_path)
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


def test_fabric_netplan_keeps_the_drop_in_it_replaces_or_removes(tmp_path):
    """O15 (issue 52): a changed drop-in (or state absent) keeps the version it replaces beside it."""
    sysfs, _proc = spark(tmp_path)
    path = tmp_path / "root" / "etc" / "netplan" / "40-sparkforge-fabric.yaml"
    prev = tmp_path / "root" / "etc" / "netplan" / "40-sparkforge-fabric.yaml.sparkforge-prev"
    first, rc = run_module("fabric_netplan", netplan_args(tmp_path, sysfs))
    assert rc == 0 and "kept" not in first and not prev.exists(), first
    old = path.read_text()
    res, rc = run_module("fabric_netplan", netplan_args(tmp_path, sysfs, address="192.168.100.21/24"))
    assert rc == 0 and res["kept"] == str(prev) and prev.read_text() == old, ("O15", res)
    newer = path.read_text()
    res, rc = run_module("fabric_netplan", netplan_args(tmp_path, sysfs, state="absent"))
    assert rc == 0 and not path.exists() and prev.read_text() == newer, ("O15", res)


def test_fabric_netplan_refuses_before_any_change(tmp_path):
    sysfs, _proc = spark(tmp_path)
    path = tmp_path / "root" / "etc" / "netplan" / "40-sparkforge-fabric.yaml"
    res, rc = run_module("fabric_netplan", netplan_args(tmp_path, sysfs, interface="enP7s7", twins=[]))
    assert rc != 0 and "enP7s7 is a management interface" in res["msg"], res
    res, rc = run_module("fabric_netplan", netplan_args(tmp_path, sysfs, interface="enp7s0f0np0"))
    assert rc != 0 and "interface enp7s0f0np0 does not exist" in res["msg"], res
    # A failing apply: reverted, no file left behind.
    res, rc = run_module("fabric_netplan", netplan_args(tmp_path, sysfs, apply_command=["false"]))
    assert rc != 0 and res["reverted"] and "was reverted" in res["msg"], res
    assert not path.exists()


def test_fabric_netplan_never_replaces_nor_removes_a_netplan_file_it_did_not_write(tmp_path):
    """Issue 52: cluster_fabric_netplan_path naming the host's own netplan file (cloud-init's): refused before any
    change, in check mode and for state absent too; before, it was replaced (or removed) and applied."""
    sysfs, _proc = spark(tmp_path)
    path = tmp_path / "root" / "etc" / "netplan" / "50-cloud-init.yaml"
    path.parent.mkdir(parents=True)
    text = "network:\n  version: 2\n  ethernets:\n    enP7s7:\n      dhcp4: true\n"
    path.write_text(text)
    for state, check in (("present", True), ("present", False), ("absent", False)):
        args = netplan_args(tmp_path, sysfs, path="/etc/netplan/50-cloud-init.yaml", state=state)
        res, rc = run_module("fabric_netplan", args, check_mode=check)
        assert rc != 0 and res["msg"].startswith("cluster_fabric_netplan_path=/etc/netplan/50-cloud-init.yaml: %s is a "
                                                 "file sparkforge did not write" % path), ("O13", res)
        assert "nothing was changed" in res["msg"] and path.read_text() == text
    assert sorted(os.listdir(str(path.parent))) == ["50-cloud-init.yaml"]


def test_fabric_netplan_confirm(tmp_path):
    sysfs, _proc = spark(tmp_path)
    path = tmp_path / "root" / "etc" / "netplan" / "40-sparkforge-fabric.yaml"
    res, rc = run_module("fabric_netplan", netplan_args(tmp_path, sysfs, confirm_timeout=5))
    assert rc == 0 and res["armed"], res
    done, rc = run_module("fabric_netplan", {"state": "confirmed", "root": str(tmp_path / "root")})
    assert rc == 0 and done["changed"], done
    again, rc = run_module("fabric_netplan", {"state": "confirmed", "root": str(tmp_path / "root")})
    assert rc == 0 and not again["changed"] and path.exists()


def test_fabric_plan_refuses_duplicates(tmp_path):
    facts = {}
    for name in ("a", "b"):  # two machines (one machine under two names is refused: test_fabric_identity.py)
        sysfs, proc = spark(tmp_path, "sys-" + name)
        facts[name] = run_module("fabric_facts", {"sysfs_root": sysfs, "proc_root": proc, "addresses": {}})[0]
    hosts = {"a": {"interface": "enp1s0f1np1", "address": "192.168.100.11", "fabric": facts["a"]["fabric"]},
             "b": {"interface": "enp1s0f1np1", "address": "192.168.100.12", "fabric": facts["b"]["fabric"]}}
    ok, rc = run_module("fabric_plan", {"hosts": hosts, "subnet": "192.168.100.0/24", "order": ["a", "b"]})
    assert rc == 0 and ok["hostfile"] == "192.168.100.11 slots=1\n192.168.100.12 slots=1\n", ok
    hosts["b"]["address"] = "192.168.100.11"
    bad, rc = run_module("fabric_plan", {"hosts": hosts, "subnet": "192.168.100.0/24"})
    assert rc != 0 and "b: address 192.168.100.11 is already a's" in bad["msg"], bad


def test_runtime_env_adds_the_fabric_variables_only_on_a_cluster(tmp_path):
    """runtime_env in check mode on two local hosts: one with sparkforge_fabric_env, one without."""
    import json
    import subprocess
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
    env = dict(playbook_env(), ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(inventory),
                           str(play), "--check"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, env=env, cwd=str(tmp_path), timeout=300, check=False)
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


# ---------------------------------------------------------------- the cluster_fabric role on two local hosts
# Each "host" is this machine with its own stand-in sysfs tree and root (the drop-in lands under it; netplan's
# generate and apply are `true`): the role's real run, start to end, in seconds.

def _snapshot(*dirs):
    seen = {}
    for top in dirs:
        top = str(top)
        if not os.path.exists(top):
            seen[top] = None
            continue
        seen[top] = os.lstat(top).st_mode
        for base, subdirs, files in os.walk(top):
            for name in subdirs + files:
                st = os.lstat(os.path.join(base, name))
                seen[os.path.join(base, name)] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return seen


def fabric_cluster(tmp_path, report_dir, trees=None, names=("a", "b"), subnet="192.168.100.0/24", extra=()):
    """Local hosts (a and b unless names says others; DGX Spark trees, f1 cabled unless trees says otherwise) and
    a play with the cluster_fabric role; returns (run(*args) -> (rc, output), the hosts' roots)."""
    import subprocess
    roots = {}
    lines = ["all:", "  vars:", "    cluster_fabric_subnet: %s" % subnet] + ["    %s" % e for e in extra] + [
        "    cluster_fabric_generate_command: ['true']", "    cluster_fabric_apply_command: ['true']",
        "    cluster_fabric_confirm_timeout: 0", "    cluster_fabric_report_dir: %s" % report_dir,
        "    ansible_connection: local", "    ansible_python_interpreter: %s" % sys.executable, "  hosts:"]
    for i, name in enumerate(names):
        sysfs, proc = spark(tmp_path, "sys-" + name, **((trees or {}).get(name) or {}))
        roots[name] = tmp_path / ("root-" + name)
        roots[name].mkdir()
        lines += ["    %s:" % name, "      sparkforge_fabric_address: 192.168.100.%d" % (11 + i),
                  "      cluster_fabric_sysfs_root: %s" % sysfs, "      cluster_fabric_proc_root: %s" % proc,
                  "      cluster_fabric_root: %s" % roots[name]]
    (tmp_path / "hosts.yml").write_text("\n".join(lines) + "\n")
    (tmp_path / "play.yml").write_text("- hosts: all\n  gather_facts: false\n  any_errors_fatal: true\n"
                                       "  roles:\n    - role: sparkforge.stack.cluster_fabric\n")
    env = dict(playbook_env(), ANSIBLE_NOCOLOR="1")

    def run(*args):
        proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i",
                               str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml")] + list(args),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, env=env,
                              cwd=str(tmp_path), timeout=300, check=False)
        return proc.returncode, proc.stdout
    return run, roots


def test_cluster_fabric_refusals_change_nothing(tmp_path):
    """Rows X01 and X03 of docs/bad-inputs.md in one run each of --check and the real run: a report directory
    under a regular file, and a host with no link on any port; then X02 and X04 in one real run: the report
    directory is a regular file, and a host with two linked ports and none named. Exit code 2, every row's
    message, no file changed on either host or on the controller."""
    plain = tmp_path / "plain"
    plain.write_text("not a directory\n")
    rows = {"X01": "cluster_fabric_report_dir %s/reports: %s is a file, not a directory" % (plain, plain),
            "X03": "b: no port has a link: plug the cable into a fabric port - the port of enp1s0f0np0",
            "X02": "cluster_fabric_report_dir %s: exists and is not a directory" % plain,
            "X04": "a: 2 ports have a link (enp1s0f0np0, enp1s0f1np1): name the one for the fabric"}
    run, _roots = fabric_cluster(tmp_path, plain / "reports", trees={"b": {"cabled": None}})
    before = _snapshot(tmp_path)
    for args in (("--check",), ()):
        rc, out = run(*args)
        assert rc == 2, out[-4000:]
        flat = " ".join(out.split())
        for row in ("X01", "X03"):
            assert rows[row] in flat, (row, out[-4000:])
        assert _snapshot(tmp_path) == before
    other = tmp_path / "other"
    other.mkdir()
    run, _roots = fabric_cluster(other, plain, trees={"a": {"cabled": "both"}})
    before = _snapshot(tmp_path)
    rc, out = run()
    assert rc == 2, out[-4000:]
    flat = " ".join(out.split())
    for row in ("X02", "X04"):
        assert rows[row] in flat, (row, out[-4000:])
    assert _snapshot(tmp_path) == before


def test_cluster_fabric_refuses_one_machine_twice_and_a_subnet_holding_a_management_address(tmp_path):
    """Rows X15 and X16 (issue 52): host c's fabric facts are host a's (one machine, two inventory names), and host b's
    ansible_host is inside cluster_fabric_subnet. --check and the real run: exit 2, both named, nothing changed."""
    run, _roots = fabric_cluster(tmp_path, tmp_path / "reports", names=("a", "b", "c"))
    inventory = tmp_path / "hosts.yml"
    text = inventory.read_text().replace("sys-c", "sys-a")
    text = text.replace("    b:\n", "    b:\n      ansible_host: 192.168.100.7\n")
    inventory.write_text(text)
    rows = {"X15": "a and c are one machine (both report MAC ",
            "X16": "b: cluster_fabric_subnet 192.168.100.0/24 holds 192.168.100.7, its ansible_host: the fabric needs "
                   "a subnet of its own"}
    before = _snapshot(tmp_path)
    for args in (("--check",), ()):
        rc, out = run(*args)
        assert rc == 2, out[-4000:]
        flat = " ".join(out.split())
        for row in ("X15", "X16"):
            assert rows[row] in flat, (row, out[-4000:])
        assert _snapshot(tmp_path) == before


def test_cluster_fabric_topology_refusals_change_nothing(tmp_path):
    """Rows X08 and X09 of docs/bad-inputs.md in one run each of --check and the real run (a switch of three: one node
    cabled to port 0, one linked at 100 Gb/s), then X05 (a ring whose links do not close) and X06 (a ring of five):
    exit code 2, every row's message, no file changed on any host or on the controller."""
    rows = {"X08": "s2: cabled to port 0, the other nodes to port 1: move its cable to port 1",
            "X09": "s3: port 1 (enp1s0f1np1 / enP2p1s0f1np1) links at 100 Gb/s, below its rated 200 Gb/s",
            "X05": "r2: only port 1 (enp1s0f1np1 / enP2p1s0f1np1) has a link, the ring does not close",
            "X06": "a ring takes 3 to 4 nodes, the cluster has 5"}
    run, _roots = fabric_cluster(tmp_path, tmp_path / "reports", names=("s1", "s2", "s3"),
                                 trees={"s2": {"cabled": "f0"}, "s3": {"slow": ("f1",)}})
    before = _snapshot(tmp_path)
    for args in (("--check",), ()):
        rc, out = run(*args)
        assert rc == 2, out[-4000:]
        flat = " ".join(out.split())
        for row in ("X08", "X09"):
            assert rows[row] in flat, (row, out[-4000:])
        assert _snapshot(tmp_path) == before
    other = tmp_path / "ring"
    other.mkdir()
    ring = ("r1", "r2", "r3", "r4", "r5")
    run, _roots = fabric_cluster(other, other / "reports", names=ring, subnet="10.20.0.0/20",
                                 extra=["cluster_fabric_topology: ring"],
                                 trees=dict((n, {"cabled": "f1" if n == "r2" else "both"}) for n in ring))
    before = _snapshot(tmp_path)
    rc, out = run()
    assert rc == 2, out[-4000:]
    flat = " ".join(out.split())
    for row in ("X05", "X06"):
        assert rows[row] in flat, (row, out[-4000:])
    assert _snapshot(tmp_path) == before


def test_fabric_plan_refuses_topology_data_without_the_topology():
    """A manifest override that drops a topology is refused by name, not a traceback."""
    hosts = {"a": {"interface": "enp1s0f1np1", "address": "192.168.100.11"},
             "b": {"interface": "enp1s0f1np1", "address": "192.168.100.12"}}
    res, rc = run_module("fabric_plan", {"hosts": hosts, "subnet": "192.168.100.0/24", "topology": "ring",
                                         "topologies": {"direct": {"nodes": {"min": 2, "max": 2}}}})
    assert rc != 0 and res["msg"] == ("the cluster's fabric cannot be configured, nothing changed: the manifest has no "
                                      "topology 'ring' (sparkforge_fabric_topologies: direct)"), res
    assert res["changed"] is False
