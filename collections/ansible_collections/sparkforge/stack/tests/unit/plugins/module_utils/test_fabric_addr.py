# -*- coding: utf-8 -*-
"""The cluster's addressing (module_utils.fabric.fabric_addr): refusals before any change, the netplan
drop-in, apply with revert on a temporary root, the MPI hostfile."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import fabric, fabric_addr

sys.path.insert(0, os.path.dirname(__file__))
import fabric_trees  # noqa: E402  pylint: disable=wrong-import-position


def facts_of(tmp_path, name, **kw):
    sysfs, proc = str(tmp_path / name), str(tmp_path / (name + "-proc"))
    fabric_trees.spark(sysfs, proc, **kw)
    return fabric.gather(sysfs, proc)


@pytest.fixture
def two(tmp_path):
    return {"spark-1": {"interface": "enp1s0f1np1", "address": "192.168.100.11", "fabric": facts_of(tmp_path, "a")},
            "spark-2": {"interface": "enp1s0f1np1", "address": "192.168.100.12", "fabric": facts_of(tmp_path, "b")}}


def test_plan_two_sparks(two):
    res = fabric_addr.plan(two, "static", "192.168.100.0/24")
    assert res["errors"] == [] and res["mtu"] == 9000
    one = res["hosts"]["spark-1"]
    assert one == {"interface": "enp1s0f1np1", "twins": ["enP2p1s0f1np1"], "address": "192.168.100.11/24",
                   "link_local": False, "hcas": ["rocep1s0f1:1", "roceP2p1s0f1:1"], "mtu": 9000}


def test_duplicate_and_outside_addresses(two):
    two["spark-2"]["address"] = "192.168.100.11"
    res = fabric_addr.plan(two, "static", "192.168.100.0/24")
    assert res["errors"] == ["spark-2: address 192.168.100.11 is already spark-1's"]
    two["spark-2"]["address"] = "10.0.0.2"
    assert fabric_addr.plan(two, "static", "192.168.100.0/24")["errors"] == \
        ["spark-2: 10.0.0.2 is outside the cluster subnet 192.168.100.0/24"]
    two["spark-2"]["address"] = "192.168.100.255"
    assert "broadcast" in fabric_addr.plan(two, "static", "192.168.100.0/24")["errors"][0]
    assert "needs the cluster's subnet" in fabric_addr.plan(two, "static", None)["errors"][0]


def test_missing_and_management_interfaces(two):
    two["spark-1"]["interface"] = "enp9s0f0np0"
    two["spark-2"]["interface"] = "enP7s7"
    errors = fabric_addr.plan(two, "static", "192.168.100.0/24")["errors"]
    assert errors[0].startswith("spark-1: interface enp9s0f0np0 does not exist")
    assert errors[1] == "spark-2: enP7s7 is the management interface (carries the default route); " \
                        "the fabric must be another one"


def test_port_without_link_says_where_the_cable_goes(two):
    two["spark-2"]["interface"] = "enp1s0f0np0"
    errors = fabric_addr.plan(two, "static", "192.168.100.0/24")["errors"]
    assert errors == ["spark-2: enp1s0f0np0 has no link but enp1s0f1np1 has: move the cable from the port of "
                      "enp1s0f1np1 / enP2p1s0f1np1 to the port of enp1s0f0np0 (or name enp1s0f1np1 as the fabric "
                      "interface)"]


def test_no_cable_anywhere(tmp_path, two):
    two["spark-2"]["fabric"] = facts_of(tmp_path, "c", cabled=None)
    errors = fabric_addr.plan(two, "link-local")["errors"]
    assert errors == ["spark-2: enp1s0f1np1 has no link and no other fabric port has one: plug the cable into the "
                      "port of enp1s0f1np1 / enP2p1s0f1np1"]


def test_mtu_only_where_every_peer_agrees(two):
    two["spark-2"]["mtu"] = 1500
    res = fabric_addr.plan(two, "link-local")
    assert res["mtu"] == 1500 and res["hosts"]["spark-1"]["mtu"] == 1500
    assert "different MTUs" in res["notes"][0]
    assert res["hosts"]["spark-1"]["address"] is None and res["hosts"]["spark-1"]["link_local"]


def test_ipoib_keeps_its_own_mtu(tmp_path):
    """GH200s over InfiniBand: IPoIB in datagram mode takes the IB MTU less 4 bytes (2044 or 4092), so the
    drop-in sets no MTU there, and says why."""
    hosts = {}
    for name, addr in (("gh200-1", "10.10.0.1"), ("gh200-2", "10.10.0.2")):
        sysfs, proc = str(tmp_path / name), str(tmp_path / (name + "-proc"))
        fabric_trees.gh200(sysfs, proc, hcas=2, down=(1,))
        hosts[name] = {"interface": "ibp16s0", "address": addr, "fabric": fabric.gather(sysfs, proc)}
    res = fabric_addr.plan(hosts, "static", "10.10.0.0/24")
    assert res["errors"] == [] and res["mtu"] is None
    assert [h["mtu"] for h in res["hosts"].values()] == [None, None]
    assert res["notes"] == ["gh200-1: ibp16s0 is IPoIB (InfiniBand): its MTU is left to IPoIB",
                            "gh200-2: ibp16s0 is IPoIB (InfiniBand): its MTU is left to IPoIB"]
    assert "mtu:" not in fabric_addr.render_netplan(res["hosts"]["gh200-1"])


def test_render_netplan(two):
    entry = fabric_addr.plan(two, "static", "192.168.100.0/24")["hosts"]["spark-1"]
    text = fabric_addr.render_netplan(entry)
    assert text.splitlines()[1:] == [
        "network:", "  version: 2", "  ethernets:",
        "    enp1s0f1np1:", "      dhcp4: false", "      dhcp6: false", "      link-local: []",
        "      addresses:", "        - 192.168.100.11/24", "      mtu: 9000",
        "    enP2p1s0f1np1:", "      dhcp4: false", "      dhcp6: false", "      link-local: []", "      mtu: 9000"]
    yaml = pytest.importorskip("yaml")
    assert yaml.safe_load(text)["network"]["ethernets"]["enp1s0f1np1"]["addresses"] == ["192.168.100.11/24"]
    entry.update(address=None, link_local=True)
    assert "link-local: [ipv4]" in fabric_addr.render_netplan(entry)


class Runner:
    def __init__(self, fail=()):
        self.calls, self.fail = [], fail

    def __call__(self, argv):
        self.calls.append(argv[0])
        return (1, "", "%s: bad" % argv[0]) if argv[0] in self.fail else (0, "", "")


def test_apply_and_revert_on_a_temp_root(tmp_path):
    path = str(tmp_path / "etc" / "netplan" / "40-sparkforge-fabric.yaml")
    run = Runner()
    res = fabric_addr.apply_with_revert(path, "new\n", run, ["generate"], ["apply"], lambda: [])
    assert res["changed"] and not res["reverted"] and open(path).read() == "new\n"
    assert oct(os.stat(path).st_mode & 0o777) == "0o600" and run.calls == ["generate", "apply"]
    assert not fabric_addr.apply_with_revert(path, "new\n", run, ["generate"], ["apply"], lambda: [])["changed"]
    # A failed check after the apply: the old file back, applied again.
    run = Runner()
    res = fabric_addr.apply_with_revert(path, "newer\n", run, ["generate"], ["apply"], lambda: ["enP7s7 is down"])
    assert res["reverted"] and not res["changed"] and res["problems"] == ["enP7s7 is down"]
    assert open(path).read() == "new\n" and run.calls == ["generate", "apply", "apply"]
    # generate refuses: nothing was applied, the file is as it was.
    run = Runner(fail=("generate",))
    res = fabric_addr.apply_with_revert(path, "bad\n", run, ["generate"], ["apply"], lambda: [])
    assert res["reverted"] and res["step"] == "generate" and run.calls == ["generate"]
    assert open(path).read() == "new\n"
    # A first drop-in that fails its check leaves no file behind.
    fresh = str(tmp_path / "other.yaml")
    fabric_addr.apply_with_revert(fresh, "x\n", Runner(), [], ["apply"], lambda: ["no"])
    assert not os.path.exists(fresh)


_drop_ins = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40).map(
    lambda t: fabric_addr.DROP_IN_MARK + "\n" + t)


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(texts=st.lists(_drop_ins, min_size=1, max_size=5), fails=st.lists(st.booleans(), min_size=5, max_size=5))
def test_every_rewrite_of_the_drop_in_keeps_the_version_it_replaced(tmp_path_factory, texts, fails):
    """O15 (issue 52): as every rewrite of a host's file, the drop-in a change replaces is kept as
    <path>.sparkforge-prev (its text and mode), whether the change then holds or is reverted."""
    path = str(tmp_path_factory.mktemp("netplan") / "40-sparkforge-fabric.yaml")
    prev = path + ".sparkforge-prev"
    current = None
    for text, fail in zip(texts, fails):
        res = fabric_addr.apply_with_revert(path, text, Runner(), [], ["apply"], lambda f=fail: ["down"] if f else [])
        if current is not None and text != current:
            assert res["kept"] == prev and open(prev).read() == current, ("O15", res)
            assert oct(os.stat(prev).st_mode & 0o777) == "0o600"
        else:
            assert not res["kept"]
        if not fail:
            current = text
        assert (open(path).read() if os.path.exists(path) else None) == current


def test_unconfirmed_change_reverts_itself(tmp_path):
    path = str(tmp_path / "40.yaml")
    with open(path, "w") as handle:
        handle.write("old\n")
    with open(path, "w") as handle:
        handle.write("new\n")
    marker = tmp_path / "applied"
    fabric_addr.arm_revert(path, "old\n", 0.3, ["touch", str(marker)], sys.executable)
    kept = str(tmp_path / "41.yaml")
    with open(kept, "w") as handle:
        handle.write("new\n")
    fabric_addr.arm_revert(kept, None, 0.3, [], sys.executable)
    assert fabric_addr.confirm(kept) and not fabric_addr.confirm(kept)
    deadline = time.time() + 10
    while time.time() < deadline and not marker.exists():
        time.sleep(0.1)
    assert open(path).read() == "old\n" and marker.exists()
    assert open(kept).read() == "new\n"


def test_hostfile_and_torchrun():
    assert fabric_addr.hostfile(["192.168.100.11", "192.168.100.12"]) == \
        "192.168.100.11 slots=1\n192.168.100.12 slots=1\n"
    lines = fabric_addr.torchrun_example(["192.168.100.11", "192.168.100.12"], {})
    assert "--node-rank=1" in lines[1] and "--rdzv-endpoint=192.168.100.11:29500" in lines[1]


def test_no_link_on_any_port_says_where_the_cable_goes(tmp_path, two):
    """Issue 36: a Spark with no link and no interface named was told "no fabric interface named"."""
    two["spark-2"].update(interface="", fabric=facts_of(tmp_path, "c", cabled=None))
    errors = fabric_addr.plan(two, "static", "192.168.100.0/24")["errors"]
    assert errors == ["spark-2: no port has a link: plug the cable into a fabric port - the port of enp1s0f0np0 / "
                      "enP2p1s0f0np0 or the port of enp1s0f1np1 / enP2p1s0f1np1 - or name the fabric interface "
                      "(sparkforge_fabric_interface)"]


def test_two_linked_ports_and_none_named(tmp_path, two):
    two["spark-1"].update(interface="", fabric=facts_of(tmp_path, "c", cabled="both"))
    errors = fabric_addr.plan(two, "static", "192.168.100.0/24")["errors"]
    assert errors == ["spark-1: 2 ports have a link (enp1s0f0np0, enp1s0f1np1): name the one for the fabric "
                      "(sparkforge_fabric_interface)"]


def test_grace_hosts_plan_one_hca_each(tmp_path):
    """GH200s with a compute and a storage HCA (Grace layout): the compute port has no twin."""
    hosts = {}
    for name, addr in (("gh-1", "10.10.0.1"), ("gh-2", "10.10.0.2")):
        sysfs, proc = str(tmp_path / name), str(tmp_path / (name + "-proc"))
        fabric_trees.gh200_grace(sysfs, proc)
        hosts[name] = {"interface": "ibp1s0", "address": addr, "fabric": fabric.gather(sysfs, proc)}
    res = fabric_addr.plan(hosts, "static", "10.10.0.0/24")
    assert res["errors"] == []
    assert [(h["twins"], h["hcas"]) for h in res["hosts"].values()] == [([], ["mlx5_0:1"])] * 2


def test_report_dir_problem(tmp_path):
    assert fabric_addr.report_dir_problem(str(tmp_path / "reports")) is None
    assert fabric_addr.report_dir_problem(str(tmp_path / "a" / "b" / "reports")) is None
    assert fabric_addr.report_dir_problem(str(tmp_path)) is None
    (tmp_path / "plain").write_text("x")
    assert fabric_addr.report_dir_problem(str(tmp_path / "plain" / "reports")) == \
        "cluster_fabric_report_dir %s/plain/reports: %s/plain is a file, not a directory, so the directory " \
        "cannot be made" % (tmp_path, tmp_path)
    assert fabric_addr.report_dir_problem(str(tmp_path / "plain")) == \
        "cluster_fabric_report_dir %s/plain: exists and is not a directory" % tmp_path
    assert "not an absolute path" in fabric_addr.report_dir_problem("reports")
    assert not (tmp_path / "reports").exists() and not (tmp_path / "a").exists()


@pytest.mark.parametrize("row,tree,report,message", [
    pytest.param("X01", "f1", "plain/reports", "cluster_fabric_report_dir {t}/plain/reports: {t}/plain is a file, "
                 "not a directory, so the directory cannot be made", id="X01"),
    pytest.param("X02", "f1", "plain", "cluster_fabric_report_dir {t}/plain: exists and is not a directory", id="X02"),
    pytest.param("X03", None, "reports", "spark-2: no port has a link: plug the cable into a fabric port - the port "
                 "of enp1s0f0np0 / enP2p1s0f0np0 or the port of enp1s0f1np1 / enP2p1s0f1np1 - or name the fabric "
                 "interface (sparkforge_fabric_interface)", id="X03"),
    pytest.param("X04", "both", "reports", "spark-2: 2 ports have a link (enp1s0f0np0, enp1s0f1np1): name the one "
                 "for the fabric (sparkforge_fabric_interface)", id="X04"),
])
def test_fabric_rows(tmp_path, two, row, tree, report, message):
    """docs/bad-inputs.md, Fabric: each refusal's exact message, and nothing made on the controller (the
    end-to-end runs in tests/unit/plugins/modules/test_fabric_modules.py assert the exit code and the hosts' files)."""
    (tmp_path / "plain").write_text("x")
    two["spark-2"].update(interface="", fabric=facts_of(tmp_path, "t", cabled=tree))
    if tree == "f1":
        two["spark-2"]["interface"] = "enp1s0f1np1"
    before = sorted(os.listdir(str(tmp_path)))
    errors = fabric_addr.plan(two, "static", "192.168.100.0/24")["errors"]
    problem = fabric_addr.report_dir_problem(str(tmp_path / report))
    assert (errors + [problem] if problem else errors) == [message.format(t=tmp_path)], row
    assert sorted(os.listdir(str(tmp_path))) == before
