"""Bad values stop `ansible-playbook playbooks/spark.yml` in preflight, naming the variable, with nothing
changed: a handful of rows of docs/bad-inputs.md end to end (the unit test checks every row), given
the ways a user gives them (-e, group vars, host vars), on this machine with a temporary prefix.
And a list given as a string with -e (`-e sparkforge_components=pytorch`) is split, not refused."""

import json
import os
import re
import subprocess

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from ansible_collections.sparkforge.stack.tests.unit.plugins.module_utils.schema_strategies import NAMES, bad_values
from helpers import REPO
from test_check_mode_local import BIN, TORCH_ONLY, make_host, playbook, snapshot, watched

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
    pytest.param("extra", "sparkforge_venv", "relvenv",
                 "sparkforge_venv: 'relvenv' is not an absolute path", id="F01"),
    pytest.param("extra", "sparkforge_components", "pytorch,tensorflow",
                 "sparkforge_components: unknown 'tensorflow'", id="F11"),
    # A value of the wrong type for a role's argument_specs is refused one step earlier, by Ansible's own
    # check of the manifest role's arguments (the first task of the run): it names the variable and value.
    pytest.param("group", "sparkforge_probe_timeout", "five",
                 "argument 'sparkforge_probe_timeout' is of type str and we were unable to convert to int: "
                 "\"'five'\"", id="F42"),
    pytest.param("host", "pytorch_jobs", 0,
                 "pytorch_jobs: 0 (int) is out of range (at least 1)", id="F44"),
    pytest.param("group", "sparkforge_torch_index_url", "download.pytorch.org/whl/cu130",
                 "sparkforge_torch_index_url: 'download.pytorch.org/whl/cu130' is not an http://, https:// or "
                 "file:// URL", id="F35"),
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


# ---------------------------------------------------------------- the rows of classes N, V and P, end to end

DOC = os.path.join(REPO, "docs", "bad-inputs.md")
COLLECTION = os.path.join(REPO, "collections", "ansible_collections", "sparkforge", "stack")


def doc_rows():
    """id -> (variable, value, message) of the variable tables, <checkout>/<collection> filled in."""
    rows = {}
    with open(DOC) as handle:
        for line in handle:
            match = re.match(r"^\| ([A-Z]\d\d) \| `([^`]+)` \| `(.+)` \| (.+) \|$", line.rstrip("\n"))
            if match:
                row_id, name, value, message = match.groups()
                for mark, path in (("<checkout>", REPO), ("<collection>", COLLECTION)):
                    value, message = value.replace(mark, path), message.replace(mark, path)
                rows[row_id] = (name, json.loads(value), message)
    return rows


ROWS = doc_rows()


def git_status():
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO,
                          stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout


def run_book(host, book, *extra):
    """ansible-playbook <book> against the host's inventory, results as JSON (messages unwrapped)."""
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith("PIP_"))
    env.update(ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_CALLBACK_RESULT_FORMAT="json", ANSIBLE_LOCAL_TEMP=str(host["root"] / "ansible-tmp"))
    return subprocess.run([os.path.join(BIN, "ansible-playbook"), book, "-i", host["inventory"]] + list(extra),
                          cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300, check=False)


# Rows refused by the same check (validate_vars, the first task), carried together by one run of one playbook.
# Ansible's own argument check of the manifest and preflight roles comes first in spark.yml and bundle.yml,
# so the rows there are values that check lets through (V01 is refused by it, with its own message).
RUNS = [
    pytest.param("playbooks/spark.yml", ["N01", "N03", "N04", "N05", "N06", "N10", "N11", "N12", "V02", "V03",
                                         "V04", "V05", "V12", "V15", "V18", "V19", "P01", "P03", "P04", "P05",
                                         "P06", "P07", "P08", "P09", "P11", "P13", "P15", "V22", "P16", "F57", "F58",
                                         "F59", "F60", "F61", "F62", "F64", "F66", "F67"],
                 id="spark"),
    pytest.param("playbooks/rollback.yml", ["V06", "N08", "V20"], id="rollback-two"),
    pytest.param("playbooks/rollback.yml", ["V08", "V10", "V21"], id="rollback-float"),
    pytest.param("playbooks/status.yml", ["V07", "P14", "N02"], id="status"),
    pytest.param("playbooks/cluster.yml", ["V11", "V13", "V14", "N07", "V23"], id="cluster"),
    pytest.param("playbooks/xhost.yml", ["V16", "V17", "N09", "V09"], id="xhost"),
    pytest.param("playbooks/bundle.yml", ["P10", "P02", "P12"], id="bundle"),
]


@pytest.mark.parametrize("book,row_ids", RUNS)
def test_every_playbook_refuses_the_rows_before_any_change(tmp_path, book, row_ids):
    """N01..N12, V02..V23, P01..P15: each row's message, exit 2, nothing changed on the host or in the checkout."""
    host = make_host(tmp_path, None, "index", torch=False, venv=False, components=TORCH_ONLY)
    values = dict((ROWS[r][0], ROWS[r][1]) for r in row_ids)
    assert len(values) == len(row_ids), "two rows of one run set the same variable"
    before, status_before = snapshot(*watched(host)), git_status()
    proc = run_book(host, book, "-e", json.dumps(values))
    out = proc.stdout
    assert proc.returncode == 2, out[-3000:]
    # A role variable whose default is the bad one is named too (fleet_rollback_to from sparkforge_rollback_to).
    refused = re.search(r"(\d+) variable\(s\) refused, nothing was changed", out)
    assert refused and int(refused.group(1)) >= len(row_ids), out[-3000:]
    for row_id in row_ids:
        assert ROWS[row_id][2] in out, (row_id, out[-3000:])
    assert "Read the host, check it and plan the work" not in out
    assert snapshot(*watched(host)) == before
    assert git_status() == status_before


@pytest.mark.parametrize("row_id", [pytest.param("V01", id="V01")])
def test_ansibles_own_check_refuses_a_fraction_for_a_whole_number_first(tmp_path, row_id):
    """V01: -e preflight_min_ram_gib=1.5 - Ansible's argument check of the preflight role names it first."""
    host = make_host(tmp_path, None, "index", torch=False, venv=False, components=TORCH_ONLY)
    before = snapshot(*watched(host))
    proc = run_book(host, "playbooks/spark.yml", "-e", "preflight_min_ram_gib=1.5")
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert "preflight_min_ram_gib" in proc.stdout and "1.5" in proc.stdout
    assert snapshot(*watched(host)) == before
    # The rule itself (what validate_vars says where Ansible's check does not run first):
    assert ROWS[row_id][2] == "preflight_min_ram_gib: expected a whole number, got '1.5'"


def test_numbers_given_as_key_value_reach_the_planner_typed(tmp_path):
    """-e preflight_min_ram_gib=1 (a string) used to stop the planner with "'<' not supported between
    instances of 'float' and 'str'"; the checked, typed values are what it gets."""
    host = make_host(tmp_path, None, "index", torch=False, venv=False, components=TORCH_ONLY)
    proc, recap = playbook(host, "--check", "--tags", "preflight", "-e", "preflight_min_ram_gib=1",
                           "-e", "preflight_min_disk_gib_source_build=1", "-e", "pytorch_jobs=8",
                           "-e", "sparkforge_probe_timeout=7", "-e", "sparkforge_cuda_major=13",
                           "-e", "preflight_allow_x86_64=yes", "-e", "preflight_min_ram_gib_source_build=2")
    out = proc.stdout
    assert "not supported between" not in out, out[-3000:]
    assert proc.returncode == 0, out[-3000:]


@pytest.mark.parametrize("name,text", [pytest.param("bad.yml", "all:\n  hosts:\n    a: [\n", id="N21")])
def test_an_inventory_that_does_not_parse_stops_ansible_playbook_naming_it(tmp_path, name, text):
    """N21: the repository's ansible.cfg makes an unparsable inventory an error (exit 1, ansible-core's
    code for it), naming the file, instead of a warning and a run against implicit localhost."""
    bad = tmp_path / name
    bad.write_text(text)
    status_before = git_status()
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "playbooks/spark.yml", "-i", str(bad),
                           "--check"], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=120, check=False)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "Completely failed to parse inventory source %s" % bad in proc.stdout
    assert "PLAY [" not in proc.stdout
    assert git_status() == status_before


# ---------------------------------------------------------------- bad values of every class, as properties

def ansible_checked():
    """The options Ansible's own argument check of the manifest and preflight roles sees first in spark.yml."""
    names = set()
    for role in ("manifest", "preflight"):
        with open(os.path.join(COLLECTION, "roles", role, "meta", "argument_specs.yml")) as handle:
            for entry in (yaml.safe_load(handle)["argument_specs"] or {}).values():
                names.update((entry.get("options") or {}))
    return names


ANSIBLE_CHECKED = ansible_checked()
# The manifest's release tables, which its own tasks read (and assert on) before preflight runs.
with open(os.path.join(COLLECTION, "roles", "manifest", "tasks", "main.yml")) as _handle:
    MANIFEST_READ = set(re.findall(r"\bsparkforge_[a-z_]+", _handle.read()))
# Every declared variable that has a bad value validate_vars is the first to see.
PLAYBOOK_NAMES = [n for n in NAMES if n not in MANIFEST_READ
                  and bad_values(n, passes_ansible=n in ANSIBLE_CHECKED) is not None]


# Five examples, no shrinking (each example is a playbook run of a few seconds; a failure prints its draws).
@settings(max_examples=5, derandomize=True, deadline=None, database=None, phases=(Phase.explicit, Phase.generate),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_property_bad_values_of_declared_variables_stop_the_playbook_naming_each(tmp_path_factory, data):
    """Item 6a of issue 42: a dozen declared variables at once, each with a bad value drawn from its type (null,
    empty, a non-ASCII digit, out of range, a relative or system path, a float for a version), given with -e:
    exit 2, every one named, nothing changed on the host or in the checkout. One run per example: validate_vars
    reports every error at once."""
    names = data.draw(st.lists(st.sampled_from(PLAYBOOK_NAMES), min_size=8, max_size=14, unique=True), label="names")
    values = dict((name, data.draw(bad_values(name, passes_ansible=name in ANSIBLE_CHECKED), label=name))
                  for name in names)
    host = make_host(tmp_path_factory.mktemp("bad"), None, "index", torch=False, venv=False, components=TORCH_ONLY)
    before, status_before = snapshot(*watched(host)), git_status()
    proc = run_book(host, "playbooks/spark.yml", "-e", json.dumps(values))
    out = proc.stdout
    assert proc.returncode == 2, (values, out[-3000:])
    refused = re.search(r"\d+ variable\(s\) refused, nothing was changed: (.*)", out)
    assert refused, (values, out[-3000:])
    for name in names:
        assert "%s: " % name in refused.group(1), (name, values[name], out[-3000:])
    assert "Read the host, check it and plan the work" not in out
    assert snapshot(*watched(host)) == before
    assert git_status() == status_before


def test_host_paths_by_meaning_a_symlink_to_usr_and_a_wheel_file_for_a_wheelhouse(tmp_path):
    """H13 and W12 through the playbook, in check mode: the venv is a symlink to /usr (the controller's check of
    the text passes; the host resolves it), and the wheelhouse is a wheel file. Refused before any change."""
    host = make_host(tmp_path, None, "index", torch=False, venv=False, components=TORCH_ONLY)
    link = tmp_path / "venv-link"
    link.symlink_to("/usr")
    wheel = tmp_path / "torch-2.11.0-cp312-cp312-linux_x86_64.whl"
    wheel.write_bytes(b"PK\x03\x04 truncated")
    before, status_before = snapshot(*watched(host)), git_status()
    proc = run_book(host, "playbooks/spark.yml", "--check", "-e", json.dumps({"sparkforge_venv": str(link)}))
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert "sparkforge_venv=%s: resolves to /usr (a symlink), which is a system directory" % link in proc.stdout
    proc = run_book(host, "playbooks/spark.yml", "--check", "-e",
                    json.dumps({"sparkforge_torch_source": "wheelhouse", "pytorch_wheelhouse": str(wheel)}))
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert "the wheelhouse %s (pytorch_wheelhouse) is a file, not a directory" % wheel in proc.stdout
    assert snapshot(*watched(host)) == before
    assert git_status() == status_before


def test_the_rows_across_variables_stop_the_playbook_in_one_run(tmp_path):
    """V24-V29, V40, V41 (the second table of section V) through spark.yml, all in one run: two spellings of the
    torch version, a CUDA major against the default cu130 index, three bad pins, a misspelt profile, two bad extra
    matrix entries. Exit 2, each row's message, nothing changed."""
    host = make_host(tmp_path, None, "index", torch=False, venv=False, components=TORCH_ONLY)
    # The stand-in host's inventory points the torch index at a local file:// index (no cuNNN): back to the default.
    with open(host["inventory"]) as handle:
        data = yaml.safe_load(handle)
    for name in ("pytorch_index_url", "torch_domains_index_url", "ml_packages_profile"):
        data["all"]["vars"].pop(name, None)
    with open(host["inventory"], "w") as handle:
        yaml.safe_dump(data, handle)
    values = {"sparkforge_torch_version": "2.11.0", "pytorch_version": "2.10.0", "sparkforge_cuda_major": 12,
              "ml_packages_pins": {"transformers": 4.40, "transformerz": "4.40.0", "einops": "latest"},
              "ml_packages_profile": "trainig",
              "ml_packages_extra_matrix": {"mypkg": {"methods": [{"method": "pipx"}]},
                                           "mypkg2": {"methods": [{"method": "wheel", "when": {"os": "x"}}]}}}
    before, status_before = snapshot(*watched(host)), git_status()
    proc = run_book(host, "playbooks/spark.yml", "-e", json.dumps(values))
    out = proc.stdout
    assert proc.returncode == 2, out[-3000:]
    expected = dict((r, row_message(r)) for r in ("V24", "V25", "V26", "V27", "V28", "V29", "V40", "V41"))
    for row_id, message in expected.items():
        assert message in out, (row_id, message, out[-3000:])
    assert "Read the host, check it and plan the work" not in out
    assert snapshot(*watched(host)) == before
    assert git_status() == status_before


def row_message(row_id):
    """The message column of a row of the tables without a variable column of their own form."""
    with open(DOC) as handle:
        for line in handle:
            if line.startswith("| %s |" % row_id):
                return line.rstrip("\n")[:-2].split(" | ")[-1]
    raise AssertionError(row_id)
