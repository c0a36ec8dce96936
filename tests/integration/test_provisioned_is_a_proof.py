# -*- coding: utf-8 -*-
"""Issue 42, item 1: "provisioned" is a proof.  One stand-in host (fake GPU, torch `existing` in its venv,
pip reading no index), two runs: a required ML package that cannot be installed fails the host and the
run, its state and error naming the package; a real run limited to `--tags preflight` installs nothing
and ends `checked`, not provisioned (nor a provisioned line in fleet-history.jsonl).  Then a proven host
whose torch is replaced and whose runtime profile is edited is reported drifted by `sparkforge status`, naming
both versions, the file and the variable.  The comparison
itself is unit-tested in tests/unit/plugins/module_utils/test_venv_proof.py (a real venv)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import subprocess
import sys

import yaml

from helpers import REPO
from tests.integration.test_check_mode_local import TORCH_ARCHS, add_dist, make_host, playbook, site_packages
from tests.integration.test_check_mode_local import template_venv  # noqa: F401


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


def test_a_proven_host_whose_torch_changed_since_is_reported_drifted(tmp_path, template_venv):  # noqa: F811
    """Provisioned (the venv and the runtime profile files proven against the plan, the proof kept on the host),
    then a `pip install` over torch and an edit of the profile's arch list: `sparkforge status` names torch with
    both versions, the file and the variable, and exits non-zero."""
    host = make_host(tmp_path, template_venv, "existing", components=["pytorch", "runtime_env"])
    # The record in a directory no role makes (as the prefix on a host given torch `existing` with runtime_env
    # and verify only, on the GPU test machine): the proof makes it.
    record_file = host["root"] / "records" / "provisioned.json"
    inventory = yaml.safe_load(open(host["inventory"]))
    inventory["all"]["vars"]["sparkforge_proof_file"] = str(record_file)
    with open(host["inventory"], "w") as handle:
        yaml.safe_dump(inventory, handle)
    proc, _ = playbook(host)
    assert proc.returncode == 0, proc.stdout[-4000:]
    entry, last = summary_and_last_line(host)
    assert entry["state"] == "provisioned" and entry["error"] is None, entry
    profile = host["root"] / "profile.d" / "sparkforge.sh"
    hook = host["prefix"] / "venv" / "bin" / "sparkforge-env.sh"
    with open(record_file) as handle:
        record = json.load(handle)
    assert record["compared"] == {"torch": "2.11.0"}
    # Each file runtime_env wrote, with the variables it exports (the plan's arch list among them: for torch
    # `existing`, the installed torch's own list, sm_90 and sm_100 as the fixture torch reports them).
    assert sorted(record["profile"]) == sorted([str(profile), str(hook)]), record
    planned = ";".join("%s.%s" % (a[3:-1], a[-1]) for a in TORCH_ARCHS)
    assert planned == "9.0;10.0"
    assert record["profile"][str(profile)]["TORCH_CUDA_ARCH_LIST"] == planned, record

    site = site_packages(str(host["prefix"] / "venv"))
    shutil.rmtree(os.path.join(site, "torch-2.11.0.dist-info"))
    add_dist(site, "torch", "2.10.0")
    text = profile.read_text()
    assert text.count(planned) == 1, text
    profile.write_text(text.replace(planned, "8.0"))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PYTHONPATH=os.path.join(REPO, "src"), ANSIBLE_LOCAL_TEMP=str(host["root"] / "ansible-tmp"))
    status = subprocess.run([sys.executable, "-m", "sparkforge.cli", "status", "-i", host["inventory"]], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                            timeout=300, check=False)
    assert status.returncode != 0, status.stdout[-4000:]
    assert "drifted: torch 2.11.0 at the last provisioning, now 2.10.0" in status.stdout, status.stdout[-4000:]
    assert "%s edited since the last provisioning: TORCH_CUDA_ARCH_LIST=8.0, last proof %s" % (profile, planned) \
        in status.stdout, status.stdout[-4000:]
