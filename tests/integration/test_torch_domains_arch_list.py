"""torch_domains' arch list for source builds is read the one way every role reads it (the plan_arch filter over
module_utils/plan/arch_plan.py, issue 55): the plan's list when the plan is for the torch the libraries pair with;
for another torch, the plan's own rules for that release on this host (the version data's default for the platform
class, or sparkforge_cuda_arch_list validated for that release), refused before anything is built when the release
cannot build it. The role's own task is rendered by ansible-playbook with the manifest's version data, once per case;
the host's GPU facts are a GB10's (12.1, dgx_spark)."""

import os
import subprocess

import pytest
import yaml

from helpers import COLLECTION, REPO, load_manifest

TASKS = os.path.join(COLLECTION, "roles", "torch_domains", "tasks", "main.yml")
NAME = "Take the arch list for source builds from the plan"
PLAN = {"torch": {"version": "2.11.0"}, "arch": {"list": "9.0;12.1", "reason": "default"}}
FACTS = {"compute_capabilities": ["12.1"], "sm_archs": ["sm_121"], "platform_class": "dgx_spark"}


def _render(tmp_path, cases):
    with open(TASKS) as handle:
        task = [t for t in yaml.safe_load(handle) if t.get("name") == NAME][0]
    take = {"ansible.builtin.set_fact": task["ansible.builtin.set_fact"], "vars": task["vars"], "when": task["when"]}
    steps = [{"ansible.builtin.set_fact": {"sparkforge": FACTS, "cacheable": True}}]
    for label, case in cases:
        steps += [dict(take, vars=dict(task["vars"], **case), ignore_errors=True, register="took"),
                  {"ansible.builtin.debug": {"msg": label + "={{ torch_domains_arch_list | default('') if took is "
                                                    "succeeded else '' }}|{{ took.msg | default('') }}"}},
                  {"ansible.builtin.set_fact": {"torch_domains_arch_list": ""}}]
    manifest = load_manifest()
    data = dict((k, manifest[k]) for k in ("sparkforge_torch_releases", "sparkforge_torch_arch_min_version",
                                            "sparkforge_torch_arch_defaults", "sparkforge_torch_traps",
                                            "sparkforge_torch_fixes"))
    play = [{"hosts": "localhost", "gather_facts": False,
             "vars": dict(data, torch_domains_source="source", sparkforge_plan=PLAN), "tasks": steps}]
    path = tmp_path / "play.yml"
    path.write_text(yaml.safe_dump(play))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"))
    proc = subprocess.run(["ansible-playbook", "-i", "localhost,", "-c", "local", str(path)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # The callback folds long messages: compare with the blanks collapsed.
    return " ".join(proc.stdout.split()), manifest


@pytest.mark.parametrize("row_id", [pytest.param("R18", id="R18")])
def test_the_role_takes_the_plans_list_or_the_plans_rules(tmp_path, row_id):
    out, manifest = _render(tmp_path, [
        ("PLANNED", {"torch_domains_torch_version": "2.11.0", "sparkforge_cuda_arch_list": ""}),
        ("GIVEN", {"torch_domains_torch_version": "2.10.0", "sparkforge_cuda_arch_list": "12.1, 9.0"}),
        ("DERIVED", {"torch_domains_torch_version": "2.10.0", "sparkforge_cuda_arch_list": ""}),
        ("UNCOVERED", {"torch_domains_torch_version": "2.10.0", "sparkforge_cuda_arch_list": "9.0"}),
        ("UNKNOWN", {"torch_domains_torch_version": "2.99.0", "sparkforge_cuda_arch_list": ""}),
    ])
    assert "PLANNED=9.0;12.1|" in out, out[-3000:]
    # Another torch: the list is validated for that release and written in its canonical order.
    assert "GIVEN=9.0;12.1|" in out, out[-3000:]
    # Another torch, no list: the release's default for a GB10 (the version data's, with the release's trap
    # swapping 12.1 for its safe arch where 2.10.0 has one), as preflight would plan it, not the plan's 9.0;12.1.
    default = manifest["sparkforge_torch_arch_defaults"]["dgx_spark"]
    traps = manifest["sparkforge_torch_traps"]
    trap = [traps[n] for n in manifest["sparkforge_torch_releases"]["2.10.0"].get("traps") or []
            if default in traps[n]["archs"]]
    derived = trap[0]["safe_arch"] if trap else default
    assert "DERIVED=%s|" % derived in out, out[-3000:]
    # R18: a list the release cannot use on this host fails before anything is built, naming the variable.
    assert "UNCOVERED=|" in out and "sparkforge_cuda_arch_list ''9.0'' has no code for this host''s GPU capability " \
                                     "12.1" in out, out[-3000:]
    assert "UNKNOWN=|" in out and "plan_arch' failed: torch 2.99.0 is not in the version data" in out, out[-3000:]
