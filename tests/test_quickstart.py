"""The README's first command on a machine that is not a supported GPU host (like CI's).

It must stop in preflight before changing anything, print the plan and say what is missing.
"""

import os
import re
import subprocess
import sys

import pytest

from helpers import REPO

BIN = os.path.dirname(sys.executable)


def run_playbook(*extra):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORCE_COLOR="0")
    return subprocess.run(
        [os.path.join(BIN, "ansible-playbook"), "playbooks/spark.yml", "-i", "inventory"] + list(extra),
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
        timeout=300, check=False)


@pytest.mark.skipif(os.path.exists("/usr/bin/nvidia-smi"), reason="this machine has an NVIDIA driver")
@pytest.mark.parametrize("mode", [[], ["--check"]], ids=["run", "check"])
def test_main_command_stops_in_preflight_with_the_plan(mode):
    existed = os.path.exists("/opt/sparkforge")
    proc = run_playbook(*mode)
    out = proc.stdout
    assert proc.returncode == 2, out
    assert "nothing was changed" in out
    # The plan: every component with what it would do.
    for component in ("cuda_libs", "cusparselt", "triton", "pytorch", "verify"):
        assert re.search(r"\b%s\s+(install|build|check|configure)\b" % component, out), component
    # What is missing, with what to do.
    assert "no NVIDIA GPU found" in out
    assert "preflight_allow_x86_64" in out or os.uname().machine == "aarch64"
    recap = re.search(r"localhost\s+: ok=\d+\s+changed=(\d+)\s+unreachable=0\s+failed=1", out)
    assert recap and recap.group(1) == "0", out
    assert os.path.exists("/opt/sparkforge") == existed


def test_unknown_torch_version_is_refused_before_anything_changes():
    proc = run_playbook("-e", "sparkforge_torch_version=1.2.3", "-e", "preflight_allow_x86_64=true")
    assert proc.returncode == 2
    assert "PyTorch 1.2.3 is not in the manifest" in proc.stdout
