"""The README's Quickstart, `scripts/spark` as written, from the repository root, on a machine that is not a
supported GPU host (like CI's).

It must stop in preflight before changing anything, print the plan and say what is missing. The same line
with `--check` on this machine with a fake GPU: tests/integration/test_check_mode_local.py.
"""

import os
import re
import subprocess
import sys

import pytest

import readme
from helpers import REPO, setup_keeps, user_env

BIN = os.path.dirname(sys.executable)


def quickstart_line():
    """The Quickstart's first line, as written (its comment included: bash ignores it)."""
    line = readme.command("README.md", "scripts/spark", heading="## Quickstart")
    assert line.split("#")[0].strip() == "scripts/spark", line
    return line


def quickstart(*extra):
    """The Quickstart line from the repository root, ``extra`` passed on to ansible-playbook as the README
    says (placed before its comment); stdout and stderr together."""
    reason = setup_keeps(os.path.join(REPO, ".venv"))
    if reason:
        pytest.fail(reason)
    line = quickstart_line()
    if extra:
        command, comment = line.split("#", 1)
        line = "%s %s  #%s" % (command.strip(), " ".join(extra), comment)
    proc = subprocess.run(["bash", "-c", line], cwd=REPO, env=user_env(REPO), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=300, check=False)
    # scripts/setup found the venv made already: nothing was installed.
    assert "== creating .venv" not in proc.stdout, proc.stdout[-3000:]
    return proc


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
    proc = quickstart(*mode)
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


def test_an_inventory_given_to_scripts_spark_replaces_this_machines():
    """The Quickstart's `-i inventory/examples/fleet` for a fleet: the fleet's hosts, not this machine with
    them (--list-hosts: the plays' hosts, nothing run)."""
    assert "`-i inventory/examples/fleet` for a fleet" in " ".join(readme.section("README.md", "## Quickstart").split())
    proc = quickstart("-i", "inventory/examples/fleet", "--list-hosts")
    assert proc.returncode == 0, proc.stdout[-3000:]
    preflight = re.search(r"play #1 \(all\).*?hosts \((\d+)\):\n(.*?)\n\n", proc.stdout, re.S)
    assert preflight, proc.stdout[-3000:]
    assert sorted(preflight.group(2).split()) == ["gh200-01", "gh200-02", "spark-01", "spark-02"], preflight.group(0)
    assert preflight.group(1) == "4"


def test_unknown_torch_version_is_refused_before_anything_changes():
    proc = run_playbook("-e", "sparkforge_torch_version=1.2.3", "-e", "preflight_allow_x86_64=true")
    assert proc.returncode == 2
    assert "PyTorch 1.2.3 is not in the manifest" in proc.stdout
