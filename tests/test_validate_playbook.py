"""Bad values stop `ansible-playbook playbooks/spark.yml` in preflight, naming the variable, with nothing
changed: a handful of rows of docs/bad-inputs.md end to end (the unit test checks every row), given
the ways a user gives them (-e, group vars, host vars), on this machine with a temporary prefix.
And a list given as a string with -e (`-e sparkforge_components=pytorch`) is split, not refused."""

import os
import re

import pytest
import yaml

from helpers import REPO
from test_check_mode_local import TORCH_ONLY, make_host, playbook, snapshot, watched

COLLECTION_PLAYBOOKS = os.path.join(REPO, "collections", "ansible_collections", "sparkforge", "stack", "playbooks")


@pytest.fixture(scope="module")
def template_venv(tmp_path_factory):
    """No venv is needed: preflight stops first (an empty directory stands in for the template)."""
    return None


def set_vars(host, where, values):
    with open(host["inventory"]) as handle:
        data = yaml.safe_load(handle)
    target = data["all"]["vars"] if where == "group" else data["all"]["hosts"]["localhost"]
    target.update(values)
    with open(host["inventory"], "w") as handle:
        yaml.safe_dump(data, handle)


@pytest.mark.parametrize("where,name,value,message", [
    ("extra", "sparkforge_venv", "relvenv",
     "sparkforge_venv: 'relvenv' is not an absolute path"),
    ("extra", "sparkforge_components", "pytorch,tensorflow",
     "sparkforge_components: unknown 'tensorflow'"),
    # A value of the wrong type for a role's argument_specs is refused one step earlier, by Ansible's own
    # check of the manifest role's arguments (the first task of the run): it names the variable and value.
    ("group", "sparkforge_probe_timeout", "five",
     "argument 'sparkforge_probe_timeout' is of type str and we were unable to convert to int: \"'five'\""),
    ("host", "pytorch_jobs", 0,
     "pytorch_jobs: 0 (int) is out of range (at least 1)"),
    ("group", "sparkforge_torch_index_url", "download.pytorch.org/whl/cu130",
     "sparkforge_torch_index_url: 'download.pytorch.org/whl/cu130' is not an http://, https:// or file:// URL"),
])
def test_a_bad_value_stops_the_run_in_preflight_naming_it(tmp_path, where, name, value, message):
    host = make_host(tmp_path, None, "index", torch=False, venv=False, components=TORCH_ONLY)
    extra = []
    if where == "extra":
        extra = ["-e", "%s=%s" % (name, value)]
    else:
        set_vars(host, where, {name: value})
    before = snapshot(*watched(host))
    playbooks_before = sorted(os.listdir(COLLECTION_PLAYBOOKS)) + sorted(os.listdir(os.path.join(REPO, "playbooks")))
    proc, recap = playbook(host, *extra)
    out = proc.stdout
    assert proc.returncode == 2, out[-3000:]
    assert message in out, out[-3000:]
    assert "nothing was changed" in out or "Validation of arguments failed" in out
    # It is the first check of preflight: the host was not even read.
    assert "Read the host, check it and plan the work" not in out
    assert recap["changed"] == 0
    assert snapshot(*watched(host)) == before
    assert sorted(os.listdir(COLLECTION_PLAYBOOKS)) + sorted(os.listdir(os.path.join(REPO, "playbooks"))) \
        == playbooks_before


def test_a_list_given_as_a_string_with_e_is_split(tmp_path):
    host = make_host(tmp_path, None, "index", torch=False, venv=False, components=TORCH_ONLY)
    proc, recap = playbook(host, "--check", "--tags", "preflight", "-e", "sparkforge_components=pytorch")
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:]
    assert "unknown component" not in out
    # The plan lists the one component asked for.
    assert re.search(r"\bpytorch\s+install\b", out), out[-3000:]
    assert not re.search(r"\btorch_domains\s+(install|build)\b", out), out[-3000:]
