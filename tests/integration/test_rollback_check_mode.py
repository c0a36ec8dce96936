"""A generation of a class's wheels installed in check mode (what `rollback.yml --check` and a fleet
install do on a host that lacks the copies): the plan, not a failure. The copy task does not copy in
check mode, so the second call of fleet_wheel_install (copies: fail) found the copies missing and failed
"the class's wheels on this host are not the builder's" for a valid target (the side finding of issue 33,
with hand-made generation records)."""

import hashlib
import json
import os
import subprocess
import sys

import yaml

from helpers import REPO

sys.path.insert(0, os.path.join(REPO, "collections"))
from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import generations  # noqa: E402
from test_check_mode_local import snapshot

BIN = os.path.dirname(sys.executable)


def test_a_generation_the_host_lacks_is_planned_in_check_mode(tmp_path):
    wheelhouse, prefix = tmp_path / "fleet-wheelhouse", tmp_path / "prefix"
    built = wheelhouse / "cls" / "demo-key"
    built.mkdir(parents=True)
    prefix.mkdir()
    wheel = built / "demo-1.0-py3-none-any.whl"
    wheel.write_bytes(b"not installed in check mode")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    # The host's own record, made by hand: generation 3 verified, after 2 (the rollback target).
    record = generations.host_transition({}, {"lineage": "lin", "class": "cls", "number": 2}, "verified",
                                         "upgrade", "2026-11-26T00:00:00Z", {"demo": digest})
    record = generations.host_transition(record, {"lineage": "lin", "class": "cls", "number": 3}, "verified",
                                         "upgrade", "2026-11-26T01:00:00Z", {"demo": "0" * 64})
    generations.write_host(str(prefix / "generation.json"), record)
    book = tmp_path / "install.yml"
    book.write_text(yaml.safe_dump([{
        "name": "Install a generation", "hosts": "localhost", "gather_facts": False,
        "tasks": [{"name": "Class wheels", "ansible.builtin.include_role": {
            "name": "sparkforge.stack.fleet_install", "tasks_from": "class_wheels.yml"},
            "vars": {"fleet_install_wheel_list": [{"name": "demo", "file": wheel.name, "sha256": digest,
                                                   "dir": "demo-key"}],
                     "fleet_install_target": {"lineage": "lin", "class": "cls", "number": 2,
                                              "reason": "rollback on request"}}},
                  {"name": "Show", "ansible.builtin.debug": {"msg": "changed={{ fleet_install_changed }}"}},
                  # What rollback.yml's apply runs next: the gate, which must not check the bytes a real
                  # run would have installed against what the venv holds now.
                  {"name": "Gate", "ansible.builtin.include_role": {
                      "name": "sparkforge.stack.fleet_install", "tasks_from": "gate.yml"},
                   "vars": {"fleet_install_wheel_list": [{"name": "demo", "file": wheel.name, "sha256": digest,
                                                          "dir": "demo-key"}],
                            "fleet_install_target_number": 2, "fleet_install_mark": "rolled_back",
                            "fleet_install_mark_how": "rolled back on request from generation 3"}}]}]))
    extra = {"ansible_python_interpreter": sys.executable, "sparkforge_prefix": str(prefix), "sparkforge_venv": str(prefix / "venv"),
             "sparkforge_wheel_dir": str(prefix / "wheels"), "sparkforge_fleet_wheelhouse": str(wheelhouse)}
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"))
    before = snapshot(prefix, wheelhouse)
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), str(book), "-i", "localhost,", "-c", "local",
                           "--check", "-e", json.dumps(extra)], cwd=REPO, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=300, check=False)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:]
    assert "are not the builder's" not in out
    # The plan says the host changes (the copy and the install are what a real run does).
    assert "changed=True" in out, out[-3000:]
    assert generations.read_host(str(prefix / "generation.json")) == record
    assert snapshot(prefix, wheelhouse) == before
