# -*- coding: utf-8 -*-
"""Each node's health (module_utils.fabric.node_health) over the real text an H200 printed
(docs/results/node-facts-h200) and stand-ins in the same formats (fixtures/node_health/README.md): the driver's
flavour and version, Xid and AER lines since boot, nvidia-smi's CSV with its units; then the class of faults a node
can have, each put on one node of healthy groups of 2 to 6, found on that node alone with its reason; the verdicts
merged into the acceptance's report; and every threshold refused out of its range."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import os

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import acceptance, node_health

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "..", "..", "fixtures", "node_health")


def text(name):
    with open(os.path.join(FIX, name)) as handle:
        return handle.read()


@pytest.fixture(scope="module")
def spec(manifest):
    return manifest["sparkforge_node_health"]


def test_the_driver_flavour_and_version_from_the_version_file():
    assert node_health.driver(text("version-open-h200.txt")) == {"flavour": "open", "version": "580.159.04"}
    assert node_health.driver(text("version-open-gb10.txt")) == {"flavour": "open", "version": "580.95.05"}
    assert node_health.driver(text("version-proprietary.txt")) == {"flavour": "proprietary", "version": "570.86.15"}
    assert node_health.driver("") == {"flavour": None, "version": None}


def test_xid_and_aer_lines_since_boot():
    assert node_health.kernel_errors(text("dmesg-h200.txt")) == {"xid": [], "aer": []}
    found = node_health.kernel_errors(text("journal-errors.txt"))
    assert [(e["code"], e["device"]) for e in found["xid"]] == [(79, "000f:01:00"), (13, "0000:01:00")]
    assert [(e["severity"], e["type"], e["device"]) for e in found["aer"]] == [
        ("Corrected", "Physical Layer", "0000:01:00.0"),
        ("Uncorrectable (Non-Fatal)", "Transaction Layer", "0002:00:00.0")]


def test_nvidia_smi_csv_with_units_and_aliased_headers():
    (row,) = node_health.gpus(text("smi-h200-units.csv"))
    assert row["clocks.sm"] == 345.0 and row["clocks.max.sm"] == 1980.0 and row["clocks.mem"] == 3201.0
    assert row["power.draw"] == 79.0 and row["power.limit"] == 700.0
    assert row["persistence_mode"] == "Enabled" and row["driver_version"] == "580.159.04"
    # GB10 prints [N/A] where it has no figure (NVIDIA/k8s-device-plugin#1482: "4W /  N/A"); nounits drops the unit.
    (gb10,) = node_health.gpus("index, name, power.draw [W], power.limit [W]\n0, NVIDIA GB10, 4.12, [N/A]\n")
    assert gb10["power.draw"] == 4.12 and gb10["power.limit"] is None
    assert node_health.gpus("") == []


def reading(sm=1980.0, power=650.0, persistence="Enabled", flavour="open", version="580.159.04",
            name="NVIDIA H200", xid=(), aer=()):
    """A node's read result as the module returns it, from the H200's real CSV row with the figures under load."""
    (row,) = node_health.gpus(text("smi-h200-units.csv"))
    row.update({"clocks.sm": sm, "power.draw": power, "persistence_mode": persistence, "name": name,
                "driver_version": version})
    idle = dict(row, **{"clocks.sm": 345.0, "power.draw": 79.0})
    return {"driver": {"flavour": flavour, "version": version}, "gpus": node_health.peaks([[idle], [row]]),
            "xid": list(xid), "aer": list(aer), "changed": False}


ERRORS = node_health.kernel_errors(text("journal-errors.txt"))
# fault: (changes to the node's reading, a fragment its reason must hold)
FAULTS = {
    "xid": ({"xid": ERRORS["xid"][:1]}, "Xid 79 on 000f:01:00 1 time(s) since boot"),
    "aer": ({"aer": ERRORS["aer"][1:]}, "PCIe AER Uncorrectable (Non-Fatal) Transaction Layer error on 0002:00:00.0"),
    "low clocks": ({"sm": 900.0}, "its peak clocks.sm during the collective was 900 MHz"),
    "low power": ({"power": 120.0}, "its peak power.draw during the collective was 120 W"),
    "persistence off": ({"persistence": "Disabled"}, "persistence mode is off where"),
    "other version": ({"version": "575.57.08"}, "its driver version 575.57.08 differs from its peers'"),
    "other flavour": ({"flavour": "proprietary"}, "its driver flavour proprietary differs from its peers'"),
    "no reading": (None, "health not read: no result"),
}


@pytest.mark.parametrize("n", [2, 3, 4, 6])
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_one_faulty_node_is_named_with_its_reason_and_only_it(spec, fault, n):
    hosts = ["node%d" % i for i in range(n)]
    # Healthy units differ a little under the same load (boost, power): none of that is a fault.
    readings = dict((h, reading(sm=1980.0 - 15 * i, power=650.0 - 20 * i)) for i, h in enumerate(hosts))
    bad = hosts[n // 2]
    change, why = FAULTS[fault]
    readings[bad] = None if change is None else reading(**dict({"sm": 1970.0, "power": 640.0}, **change))
    verdicts = dict((v["node"], v) for v in node_health.compare(readings, hosts, spec))
    assert any(why in r for r in verdicts[bad]["reasons"]), verdicts[bad]
    failed = sorted(h for h, v in verdicts.items() if v["verdict"] == "fail")
    if fault in ("other version", "other flavour") and n == 2:
        # Two nodes, two values: neither is the odd one, so both are named.
        assert failed == hosts and all("no value is held by most nodes" in verdicts[h]["reasons"][0] for h in hosts)
    else:
        assert failed == [bad], verdicts


def test_a_healthy_group_passes_and_an_ignored_xid_does_not_fail(spec):
    hosts = ["a", "b", "c"]
    readings = dict((h, reading()) for h in hosts)
    assert [v["verdict"] for v in node_health.compare(readings, hosts, spec)] == ["pass"] * 3
    readings["b"] = reading(xid=ERRORS["xid"][1:])
    assert node_health.compare(readings, hosts, spec)[1]["verdict"] == "fail"
    assert node_health.compare(readings, hosts, dict(spec, xid_ignored=[13]))[1]["verdict"] == "pass"


def test_the_proprietary_modules_on_a_gb10_fail_even_when_every_node_has_them(spec):
    hosts = ["spark-1", "spark-2"]
    readings = dict((h, reading(name="NVIDIA GB10", flavour="proprietary", power=60.0, sm=2400.0)) for h in hosts)
    for v in node_health.compare(readings, hosts, spec):
        assert v["verdict"] == "fail" and "GB10 is supported only by the open kernel modules" in v["reasons"][0], v
    # An H200 may run either flavour: the same group on H200s passes.
    readings = dict((h, reading(flavour="proprietary")) for h in hosts)
    assert [v["verdict"] for v in node_health.compare(readings, hosts, spec)] == ["pass", "pass"]


def test_no_sample_and_a_figure_peers_have_fail_safe(spec):
    hosts = ["a", "b", "c", "d"]
    readings = dict((h, reading()) for h in hosts)
    readings["a"] = dict(readings["a"], gpus=[])
    readings["c"] = copy.deepcopy(readings["c"])
    readings["c"]["gpus"][0]["peak_power_w"] = None
    readings["b"] = {"failed": True, "msg": "nvidia-smi failed (exit 9): NVIDIA-SMI has failed", "finished": True}
    v = dict((x["node"], x) for x in node_health.compare(readings, hosts, spec))
    assert "no nvidia-smi sample was taken while the collective ran" in v["a"]["reasons"][0]
    assert v["b"]["reasons"] == ["health not read: nvidia-smi failed (exit 9): NVIDIA-SMI has failed"]
    assert v["c"]["reasons"] == ["power.draw was not reported while its peers' was: unproven"]
    assert v["d"]["verdict"] == "pass"


def test_health_joins_the_acceptance_report_and_its_verdict(spec):
    hosts = ["a", "b", "c"]
    summary = {"hosts": hosts, "per_host": {}, "judged": {"pairs": []}, "failed_hosts": []}
    nodes = acceptance.node_verdicts(summary)
    summary.update(nodes=nodes, verdict=acceptance.group_verdict(nodes), passed=True)
    readings = dict((h, reading()) for h in hosts)
    readings["c"] = reading(power=100.0)
    merged = node_health.merge(summary, node_health.compare(readings, hosts, spec))
    assert merged["passed"] is False and merged["failed_hosts"] == ["c"]
    assert merged["verdict"]["failed"] == ["c"] and merged["verdict"]["reasons"][0].startswith("c: health: its peak")
    assert [n["verdict"] for n in merged["nodes"]] == ["pass", "pass", "fail"]
    assert merged["nodes"][0]["health"]["figures"] == {"peak_sm_mhz": 1980.0, "peak_power_w": 650.0}
    table = node_health.render_markdown(merged["health"])
    assert "| c | fail | open 580.159.04 | Enabled | 1980 | 100 | 0 | 0 | its peak power.draw" in table


# (key, value, the message's start); the docs/bad-inputs.md rows by their ids.
BAD = [pytest.param("min_clock_fraction", 1.5, "xhost_node_health_spec.min_clock_fraction: 1.5 is out of range: it "
                    "must be above 0 and at most 1 (a fraction of the peers' median peak SM clock)", id="A13"),
       pytest.param("sample_interval", 0, "xhost_node_health_spec.sample_interval: 0 is out of range: it must be "
                    "between 0.1 and 60 seconds (one nvidia-smi call per sample)", id="A14"),
       pytest.param("xid_ignored", [13, "x"], "xhost_node_health_spec.xid_ignored: [13, 'x'] holds 'x', not Xid "
                    "codes (whole numbers)", id="A15")]
BAD += [pytest.param(k, v, "xhost_node_health_spec.%s: %r" % (k, v), id="%s=%r" % (k, v)) for k, vs in sorted({
    "min_clock_fraction": [0, -0.2, "0.8", True, None], "min_power_fraction": [0, 2, None],
    "sample_interval": [0.01, 120, "1", None], "xid_ignored": ["13"], "aer_severities": ["Corrected", None],
    "open_modules_required": ["GB10", None]}.items()) for v in vs]


@pytest.mark.parametrize("key,value,message", BAD)
def test_each_threshold_out_of_its_range_is_refused_by_name(spec, key, value, message):
    assert node_health.check_thresholds(spec) == []
    errors = node_health.check_thresholds(dict(spec, **{key: value}))
    assert len(errors) == 1 and errors[0].startswith(message), errors
