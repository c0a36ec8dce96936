# -*- coding: utf-8 -*-
"""Issue 42, item 1: "provisioned" is a proof.  One stand-in host (fake GPU, torch `existing` in its venv,
pip reading no index), two runs: a required ML package that cannot be installed fails the host and the
run, its state and error naming the package; a real run limited to `--tags preflight` installs nothing
and ends `checked`, not provisioned (nor a provisioned line in fleet-history.jsonl).  The comparison
itself is unit-tested in tests/unit/plugins/module_utils/test_venv_proof.py (a real venv)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import yaml

from tests.integration.test_check_mode_local import make_host, playbook, template_venv  # noqa: F401


def summary_and_last_line(host):
    reports = host["root"] / "fleet-reports"
    with open(reports / "fleet-summary.json") as handle:
        summary = json.load(handle)
    hosts = summary["hosts"] if "hosts" in summary else summary
    with open(reports / "fleet-history.jsonl") as handle:
        last = json.loads(handle.read().splitlines()[-1])
    return hosts["localhost"], last


def test_a_failed_required_package_fails_the_run_and_tags_preflight_ends_checked(tmp_path, template_venv):  # noqa: F811
    host = make_host(tmp_path, template_venv, "existing", components=["pytorch", "ml_packages"])
    inventory = yaml.safe_load(open(host["inventory"]))
    # tokenizers is not in the venv and pip reads no index: it fails (ml_packages_fail_on_error: true, the default).
    inventory["all"]["vars"]["ml_packages_packages"] = ["einops", "tokenizers"]
    with open(host["inventory"], "w") as handle:
        yaml.safe_dump(inventory, handle)

    proc, _ = playbook(host)
    assert proc.returncode != 0, proc.stdout[-4000:]
    entry, _ = summary_and_last_line(host)
    assert entry["state"] != "provisioned", entry
    assert "tokenizers" in (entry["error"] or ""), entry
    assert "was not provisioned" in proc.stdout

    proc, _ = playbook(host, "--tags", "preflight")
    assert proc.returncode == 0, proc.stdout[-4000:]
    entry, last = summary_and_last_line(host)
    assert entry["state"] == "checked", entry
    assert "provisioned" not in json.dumps(last), last
