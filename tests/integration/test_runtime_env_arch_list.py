"""runtime_env exports TORCH_CUDA_ARCH_LIST, so the user's own extension builds get the host's kernels.

The role runs for real on this machine (local connection) with its profile script in a temporary
directory: it exports the plan's list (sparkforge_plan.arch) when there is a plan, whatever else is set
(the plan decided, issue 45); without one (cluster.yml) the same rules answer (the plan_arch filter:
sparkforge_cuda_arch_list, else the host's GPUs, sm_archs); runtime_env_export_arch_list=false exports nothing, and a
bad value fails before the script is written.
"""

import os
import subprocess
import sys

import pytest

from helpers import REPO

PLAY = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - ansible.builtin.include_role:
        name: sparkforge.stack.runtime_env
      vars:
        runtime_env_profile_path: "{{ out }}/sparkforge.sh"
        runtime_env_venv_hook: false
        runtime_env_sm_archs: [sm_121]
"""


def _run(tmp_path, *extra):
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"))
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", str(play),
           "-e", "ansible_python_interpreter=" + sys.executable, "-e", "out=" + str(tmp_path)]
    for item in extra:
        cmd += ["-e", item]
    proc = subprocess.run(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300)
    script = tmp_path / "sparkforge.sh"
    return proc.returncode, proc.stdout, script.read_text() if script.exists() else None


@pytest.mark.parametrize("extra, line", [
    ((), "export TORCH_CUDA_ARCH_LIST=12.1\n"),
    # The plan's list, not the host's GPU (sm_121 -> 12.1): the plan decided.
    (('{"sparkforge_plan": {"arch": {"list": "12.0", "reason": "default for platform class dgx_spark"}}}',),
     "export TORCH_CUDA_ARCH_LIST=12.0\n"),
    (("sparkforge_cuda_arch_list=9.0;12.0+PTX",), "export TORCH_CUDA_ARCH_LIST='9.0;12.0+PTX'\n"),
    (("runtime_env_export_arch_list=false",), None),
])
def test_profile_exports_the_arch_list(tmp_path, extra, line):
    rc, out, script = _run(tmp_path, *extra)
    assert rc == 0, out
    if line is None:
        assert "TORCH_CUDA_ARCH_LIST" not in script
    else:
        assert line in script


def test_bad_arch_list_fails_before_the_script_is_written(tmp_path):
    rc, out, script = _run(tmp_path, "sparkforge_cuda_arch_list=sm90")
    assert rc == 2 and script is None
    assert "sparkforge_cuda_arch_list='sm90': 'sm90' is not an architecture like 9.0" in out
