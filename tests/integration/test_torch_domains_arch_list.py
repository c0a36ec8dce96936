"""torch_domains' arch list for source builds is the plan's (sparkforge_plan.arch): the role reads it and
decides nothing (issue 45; the plan's own rules are test_preflight.py's). The role's own two tasks are rendered by
ansible-playbook, once, for three cases: the plan's torch, a torch the plan did not plan with
sparkforge_cuda_arch_list, and one without it (refused, naming what to set)."""

import os
import subprocess

import pytest
import yaml

from helpers import COLLECTION, REPO

TASKS = os.path.join(COLLECTION, "roles", "torch_domains", "tasks", "main.yml")
NAMES = ("Take the arch list for source builds from the plan", "Check there is an arch list for the source builds")
PLAN = {"torch": {"version": "2.11.0"}, "arch": {"list": "9.0;12.1", "reason": "default"}}


@pytest.mark.parametrize("row_id", [pytest.param("R18", id="R18")])
def test_the_role_takes_the_plans_list_or_refuses(tmp_path, row_id):
    with open(TASKS) as handle:
        tasks = dict((t["name"], t) for t in yaml.safe_load(handle) if t.get("name") in NAMES)
    take = {"ansible.builtin.set_fact": tasks[NAMES[0]]["ansible.builtin.set_fact"], "when": tasks[NAMES[0]]["when"]}
    check = {"ansible.builtin.assert": tasks[NAMES[1]]["ansible.builtin.assert"], "when": tasks[NAMES[1]]["when"]}
    cases = [("PLANNED", {"torch_domains_torch_version": "2.11.0", "sparkforge_cuda_arch_list": ""}),
             ("GIVEN", {"torch_domains_torch_version": "2.10.0", "sparkforge_cuda_arch_list": "8.0"}),
             ("NONE", {"torch_domains_torch_version": "2.10.0", "sparkforge_cuda_arch_list": ""})]
    steps = []
    for label, case in cases:
        steps += [dict(take, vars=case),
                  dict(check, vars=case, ignore_errors=True, register="checked"),
                  {"ansible.builtin.debug": {"msg": label + "={{ torch_domains_arch_list }}|{{ checked.msg | default('') }}"}}]
    play = [{"hosts": "localhost", "gather_facts": False,
             "vars": {"torch_domains_source": "source", "sparkforge_plan": PLAN}, "tasks": steps}]
    path = tmp_path / "play.yml"
    path.write_text(yaml.safe_dump(play))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"))
    proc = subprocess.run(["ansible-playbook", "-i", "localhost,", "-c", "local", str(path)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    # The callback folds long messages: compare with the blanks collapsed.
    out = " ".join(proc.stdout.split())
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    assert "PLANNED=9.0;12.1|" in out and "GIVEN=8.0|" in out, out[-3000:]
    assert "NONE=|no arch list for the torchvision/torchaudio source builds: the plan (sparkforge_plan.arch) " \
           "is for torch 2.11.0, the venv pairs with 2.10.0: run sparkforge.stack.preflight for this torch, or set " \
           "sparkforge_cuda_arch_list; nothing was built" in out, out[-3000:]
