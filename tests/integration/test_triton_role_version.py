"""Which torch release (and so which Triton) the triton role picks for `latest`, run for real on this
machine (connection local; the GPU comes from the test bed's fake nvidia-smi, an H100, so the
platform class is `hopper`).

Each play points the stack's venv below /dev/null, so the role stops at its first step that would
touch the host (creating the venv), right after the pick; the play's rescue prints what it picked.
- Without a plan: the newest release good for the class whose pairings are confirmed (a newer
  entry with `unconfirmed` pairings is passed over).
- With preflight's plan: the plan's version, so triton and torch agree.
"""

import os
import re

import pytest

from helpers import fake_smi, load_manifest
from test_pytorch_roles import run_play

pytestmark = pytest.mark.skipif(os.path.exists("/usr/bin/nvidia-smi"), reason="a real NVIDIA driver is here")

H100 = {"name": "NVIDIA H100 80GB HBM3", "compute_cap": "9.0", "driver_version": "580.95.05",
        "memory.total": 81559}


def _picked(tmp_path, extra):
    releases = dict(load_manifest()["sparkforge_torch_releases"])
    newest = max(releases, key=lambda v: tuple(int(x) for x in v.split(".")))
    releases["9.99.0"] = dict(releases[newest], unconfirmed=["triton"])
    tasks = [
        {"name": "Read the GPU", "sparkforge.stack.gpu_facts": {"nvidia_smi": fake_smi(str(tmp_path), "h100", H100),
                                                               "platforms": load_manifest()["sparkforge_gpu_platforms"]}},
        {"name": "Pick", "block": [
            {"name": "Triton role", "ansible.builtin.include_role": {"name": "sparkforge.stack.triton"},
             "vars": dict({"sparkforge_torch_releases": releases, "triton_source": "wheelhouse",
                           "sparkforge_venv": "/dev/null/venv"}, **extra)}],
         "rescue": [
            {"name": "Say what was picked", "ansible.builtin.debug": {
                "msg": "PICKED {{ triton_selected_torch }} {{ triton_selected_version }} at {{ ansible_failed_task.name }}"}}]},
    ]
    rc, _, text = run_play(tmp_path, tasks)
    assert rc == 0, text[-3000:]
    found = re.search(r"PICKED (\S+) (\S+) at ([^\"]+)", text)
    assert found, text[-3000:]
    assert found.group(3).startswith("Create the stack venv"), found.group(0)
    return found.group(1), found.group(2), releases, newest


def test_latest_without_a_plan_passes_over_unconfirmed_pairings(tmp_path):
    picked, triton, releases, newest = _picked(tmp_path, {"triton_torch_version": "latest"})
    assert (picked, triton) == (newest, releases[newest]["triton"])


def test_latest_takes_the_plans_version(tmp_path):
    picked, triton, releases, _ = _picked(tmp_path, {"triton_torch_version": "latest",
                                                      "sparkforge_plan": {"torch": {"version": "2.12.0"}}})
    assert (picked, triton) == ("2.12.0", releases["2.12.0"]["triton"])


def test_a_pin_gets_the_unconfirmed_entry(tmp_path):
    picked, _, _, _ = _picked(tmp_path, {"triton_torch_version": "9.99.0"})
    assert picked == "9.99.0"
