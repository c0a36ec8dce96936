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
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from schema_strategies import NAMES, bad_values
from ansible_collections.sparkforge.stack.plugins.module_utils._common import path_rules
from helpers import BAD_INPUTS, COLLECTION, REPO, bad_input_rows
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
    # A value of the wrong type in group vars: validate_vars is the first check (Ansible's own argument check of
    # the manifest role would have spoken first, in its own words, before the entry point was named `inputs`).
    pytest.param("group", "sparkforge_probe_timeout", "five",
                 "sparkforge_probe_timeout: expected a whole number, got 'five'", id="F42"),
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
    assert "nothing was changed" in out
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

ROWS = bad_input_rows()


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
                                         "P06", "P07", "P08", "P09", "P11", "P13", "P15", "V22", "P16", "F58", "N13",
                                         "F60", "F61", "F62", "F64", "F66", "F67"],
                 id="spark"),
    pytest.param("playbooks/rollback.yml", ["V06", "N08", "V20"], id="rollback-two"),
    pytest.param("playbooks/rollback.yml", ["V08", "V10", "V21"], id="rollback-float"),
    pytest.param("playbooks/status.yml", ["V07", "P14", "N02"], id="status"),
    pytest.param("playbooks/cluster.yml", ["V11", "V13", "V14", "N07", "V23", "V48", "V49"], id="cluster"),
    pytest.param("playbooks/xhost.yml", ["V16", "V17", "N09", "V09"], id="xhost"),
    pytest.param("playbooks/bundle.yml", ["P10", "P02", "P12"], id="bundle"),
]


@pytest.mark.parametrize("book,row_ids", RUNS)
def test_every_playbook_refuses_the_rows_before_any_change(tmp_path, book, row_ids):
    """N01..N12, V02..V23, P01..P15: each row's message, exit 2, nothing changed on the host or in the checkout.
    (A role variable whose default is the bad one is named too: fleet_rollback_to from sparkforge_rollback_to.)"""
    run_rows(tmp_path, book, row_ids)


def spark_batches():
    """Every row of the variable tables that RUNS does not carry, through spark.yml: rows packed greedily into
    runs in which each variable is set once (validate_vars reports every bad input of a run at once). A row added
    to docs/bad-inputs.md is run here by being added: nothing lists it by hand."""
    in_runs = set(r for p in RUNS for r in p.values[1])
    batches = []
    for row_id in sorted(r for r in ROWS if r not in in_runs):
        for batch in batches:
            if ROWS[row_id][0] not in (ROWS[r][0] for r in batch):
                batch.append(row_id)
                break
        else:
            batches.append([row_id])
    return batches


SPARK_BATCHES = spark_batches()


@pytest.mark.parametrize("row_ids", [pytest.param(b, id="+".join((b[0], b[-1]))) for b in SPARK_BATCHES])
def test_every_other_row_stops_spark_yml_with_its_message(tmp_path, row_ids):
    """F01..F56 and the V rows RUNS leaves, through `ansible-playbook playbooks/spark.yml -e`: exit 2, each row's
    message as the table writes it (validate_vars is the first check of the run, before Ansible's own argument
    check of any role), nothing changed on the host or in the checkout."""
    run_rows(tmp_path, "playbooks/spark.yml", row_ids)


def run_rows(tmp_path, book, row_ids):
    host = make_host(tmp_path, None, "index", torch=False, venv=False, components=TORCH_ONLY)
    values = dict((ROWS[r][0], ROWS[r][1]) for r in row_ids)
    assert len(values) == len(row_ids), "two rows of one run set the same variable"
    before, status_before = snapshot(*watched(host)), git_status()
    proc = run_book(host, book, "-e", json.dumps(values))
    out = proc.stdout
    assert proc.returncode == 2, out[-3000:]
    assert "Validating arguments against arg spec" not in out, out[-3000:]
    refused = re.search(r"(\d+) variable\(s\) refused, nothing was changed", out)
    assert refused and int(refused.group(1)) >= len(row_ids), out[-3000:]
    missing = [r for r in row_ids if ROWS[r][2] not in out]
    assert not missing, ([(r, ROWS[r][2]) for r in missing], out[-4000:])
    assert "Read the host, check it and plan the work" not in out
    assert snapshot(*watched(host)) == before
    assert git_status() == status_before


def test_the_runs_carry_every_row_of_the_variable_tables():
    carried = [r for p in RUNS for r in p.values[1]] + [r for b in SPARK_BATCHES for r in b]
    assert sorted(carried) == sorted(ROWS), sorted(set(ROWS) ^ set(carried))


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
    """The options Ansible's own argument check of the manifest and preflight roles would see first in spark.yml
    (none: their entry point is `inputs`, so validate_vars is the first check)."""
    names = set()
    for role in ("manifest", "preflight"):
        with open(os.path.join(COLLECTION, "roles", role, "meta", "argument_specs.yml")) as handle:
            # Ansible prepends its check for a role's `main` entry point only (theirs are named `inputs`).
            entry = (yaml.safe_load(handle)["argument_specs"] or {}).get("main") or {}
            names.update(entry.get("options") or {})
    return names


ANSIBLE_CHECKED = ansible_checked()
# The manifest's release tables, which its own tasks read (and assert on) before preflight runs.
with open(os.path.join(COLLECTION, "roles", "manifest", "tasks", "main.yml")) as _handle:
    MANIFEST_READ = set(re.findall(r"\bsparkforge_[a-z_]+", _handle.read()))
# The group variables of the playbooks' `hosts:` (cluster_group, xhost_group): the names check (names.yml) sees a
# value of theirs before validate_vars does, and refuses one that names no group with its own message.
HOSTS_READ = set()
for _book in os.listdir(COLLECTION_PLAYBOOKS):
    with open(os.path.join(COLLECTION_PLAYBOOKS, _book)) as _handle:
        HOSTS_READ.update(re.findall(r"^\s*hosts:.*?\{\{\s*([a-z_]+)", _handle.read(), re.M))
# Every declared variable that has a bad value validate_vars is the first to see.
PLAYBOOK_NAMES = [n for n in NAMES if n not in MANIFEST_READ and n not in HOSTS_READ
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


# What a path is on the host, drawn: the controller reads only the text, so these pass its check and the host's
# (paths_usable, after the plan) must refuse them by what they are. Each case: (how to make it, what the message
# says); names may hold a space or a quote (H09: such a path works where it is a good one).
SYSTEM_TARGETS = sorted(t for t in path_rules.SYSTEM_DIRS if os.path.realpath(t) in path_rules.SYSTEM_DIRS)


def make_bad_venv(root, case, name, target):
    """Create the drawn kind of bad venv path under ``root``; return (the path, the message fragment)."""
    place = root / name
    if case == "symlink to a system directory":
        place.symlink_to(target)
        return place, "resolves to %s (a symlink), which is a system directory" % os.path.realpath(target)
    if case == "symlink into the checkout":
        place.symlink_to(REPO)
        return place / "venv", "(a symlink), which is inside %s" % REPO
    if case == "a regular file":
        place.write_text("not a venv")
        return place, "%s is a regular file, not a directory" % place
    if case == "under a regular file":
        place.write_text("not a directory")
        return place / "a" / "venv", "its parent %s is a regular file, not a directory" % place
    place.symlink_to(root / "gone")
    return place / "venv", "its parent %s is a dangling symlink, not a directory" % place


# Each case once (explicit examples, so a few draws cannot miss one) and one drawn example; one check-mode run
# each (a few seconds), no shrinking: a failure prints its draws.
@pytest.mark.bad_input_rows("H03", "H05", "H13", "H14")
@example(variable="sparkforge_venv", case="symlink to a system directory", name="venv", target="/usr")
@example(variable="pytorch_venv", case="symlink into the checkout", name="my venv", target="/")
@example(variable="sparkforge_venv", case="a regular file", name="it's venv", target="/")
@example(variable="pytorch_venv", case="under a regular file", name='a "q" venv', target="/")
@example(variable="sparkforge_venv", case="under a dangling symlink", name="my venv", target="/")
@settings(max_examples=1, derandomize=True, deadline=None, database=None, phases=(Phase.explicit, Phase.generate),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(variable=st.sampled_from(["sparkforge_venv", "pytorch_venv"]),
       case=st.sampled_from(["symlink to a system directory", "symlink into the checkout", "a regular file",
                             "under a regular file", "under a dangling symlink"]),
       name=st.sampled_from(["venv", "my venv", "it's venv", 'a "q" venv']),
       target=st.sampled_from(SYSTEM_TARGETS))
def test_property_a_venv_path_bad_by_what_it_is_on_the_host_stops_the_playbook(tmp_path_factory, variable, case,
                                                                                 name, target):
    """Item 6a of issue 42, the paths' meaning: a symlink to a system directory or into the checkout, a file where
    a directory is meant, a parent that is a file or a dangling link, under names with a space or a quote. Through
    spark.yml in check mode: exit 2, the variable named with the path, nothing changed on the host or in the
    checkout."""
    root = tmp_path_factory.mktemp("badpath")
    host = make_host(root, None, "index", torch=False, venv=False, components=TORCH_ONLY)
    scratch = root / "scratch"
    scratch.mkdir()
    path, fragment = make_bad_venv(scratch, case, name, target)
    before, status_before = snapshot(*(watched(host) + [scratch])), git_status()
    proc = run_book(host, "playbooks/spark.yml", "--check", "-e", json.dumps({variable: str(path)}))
    out = proc.stdout
    assert proc.returncode == 2, (variable, case, str(path), out[-3000:])
    assert "%s=%s" % (variable, path) in out and fragment in out, (variable, case, str(path), fragment, out[-3000:])
    assert snapshot(*(watched(host) + [scratch])) == before
    assert git_status() == status_before


@pytest.mark.bad_input_rows("W12")
def test_a_wheel_file_for_a_wheelhouse_stops_the_playbook(tmp_path):
    """W12 through the playbook, in check mode: the wheelhouse is a wheel file. Refused before any change. (H13,
    the venv a symlink to /usr, is an example of the property test above.)"""
    host = make_host(tmp_path, None, "index", torch=False, venv=False, components=TORCH_ONLY)
    wheel = tmp_path / "torch-2.11.0-cp312-cp312-linux_x86_64.whl"
    wheel.write_bytes(b"PK\x03\x04 truncated")
    before, status_before = snapshot(*watched(host)), git_status()
    proc = run_book(host, "playbooks/spark.yml", "--check", "-e",
                    json.dumps({"sparkforge_torch_source": "wheelhouse", "pytorch_wheelhouse": str(wheel)}))
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert "the wheelhouse %s (pytorch_wheelhouse) is a file, not a directory" % wheel in proc.stdout
    assert snapshot(*watched(host)) == before
    assert git_status() == status_before


@pytest.mark.bad_input_rows("H17")
def test_a_prefix_that_is_a_symlink_to_etc_stops_check_mode(tmp_path):
    """H17 (issue 52): sparkforge_prefix a symlink to /etc. Every path below it is below a system directory, which
    alone is allowed; the prefix itself is resolved on the host and refused, in check mode as in the real run."""
    host = make_host(tmp_path, None, "index", torch=False, venv=False, components=TORCH_ONLY)
    link = tmp_path / "prefix-link"
    link.symlink_to("/etc")
    before, status_before = snapshot(*watched(host)), git_status()
    proc = run_book(host, "playbooks/spark.yml", "--check", "-e", json.dumps({"sparkforge_prefix": str(link)}))
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert row_message("H17").replace("<tmp>/prefix", str(link)) in proc.stdout, proc.stdout[-3000:]
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
    with open(BAD_INPUTS) as handle:
        for line in handle:
            if line.startswith("| %s |" % row_id):
                return line.rstrip("\n")[:-2].split(" | ")[-1]
    raise AssertionError(row_id)
