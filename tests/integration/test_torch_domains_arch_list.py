"""torch_domains' arch list for source builds, taken from the installed torch when no plan names one:
its `sm_XY` archs become TORCH_CUDA_ARCH_LIST entries (`sm_90` -> `9.0`, `sm_121` -> `12.1`). The task's own
expression is rendered by ansible-playbook (inside a folded scalar a doubled backslash reached the regex as
two characters, so nothing was converted)."""

import os
import subprocess

import yaml

from helpers import COLLECTION, REPO

TASKS = os.path.join(COLLECTION, "roles", "torch_domains", "tasks", "main.yml")


def test_the_installed_torchs_archs_become_an_arch_list(tmp_path):
    with open(TASKS) as handle:
        task = [t for t in yaml.safe_load(handle) if t.get("name") == "Choose the arch list for source builds"][0]
    play = [{"hosts": "localhost", "gather_facts": False,
             "vars": {"torch_domains_cuda_arch_list": "", "torch_domains_torch_version": "2.11.0",
                      "sparkforge_plan": {"torch": {"version": "2.10.0", "cuda_arch_list": "8.0"}},
                      "torch_domains_torch": {"stdout": '{"archs": ["sm_90", "sm_121", "sm_100"]}'}},
             "tasks": [{"ansible.builtin.set_fact": task["ansible.builtin.set_fact"]},
                       {"ansible.builtin.debug": {"msg": "ARCHS={{ torch_domains_arch_list }}"}}]}]
    path = tmp_path / "play.yml"
    path.write_text(yaml.safe_dump(play))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"))
    proc = subprocess.run(["ansible-playbook", "-i", "localhost,", "-c", "local", str(path)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "ARCHS=9.0;12.1;10.0" in proc.stdout, proc.stdout[-3000:]
