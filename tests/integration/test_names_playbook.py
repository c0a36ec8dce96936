"""Names given to a run that match nothing, and YAML written twice, stop ansible-playbook before any change
(docs/bad-inputs.md, class G): one run carries every bad name at once; the CLI's numbers have ranges."""

import os
import re
import subprocess
import sys

import pytest
import yaml

from helpers import REPO
from test_check_mode_local import BIN, TORCH_ONLY, make_host, snapshot, watched
from test_validate_playbook import git_status, run_book


@pytest.fixture(scope="module")
def template_venv(tmp_path_factory):
    """No venv is needed: preflight stops first."""
    return None


def test_names_that_match_nothing_are_refused_in_one_run_before_any_change(tmp_path):
    """G01 tag, G02 --limit, G03 -e cluster_group, G04 group_vars file, G05 host_vars file, G06 play keyword
    variable in the inventory: each named with the known names (closest first), exit 2, nothing changed."""
    host = make_host(tmp_path, None, "index", torch=False, venv=False, components=TORCH_ONLY)
    with open(host["inventory"]) as handle:
        data = yaml.safe_load(handle)
    data["all"]["children"] = {"dgx_spark": {"hosts": {"localhost": None}}}
    data["all"]["vars"]["sparkforge_serial"] = 2
    with open(host["inventory"], "w") as handle:
        yaml.safe_dump(data, handle)
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "dgx-spark.yml").write_text("pytorch_jobs: 4\n")
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "lcalhost.yml").write_text("pytorch_jobs: 4\n")
    before, status_before = snapshot(*watched(host)), git_status()
    proc = run_book(host, "playbooks/spark.yml", "--check", "--tags", "preflght", "--limit", "localhost,lcalhost",
                    "-e", "cluster_group=spraks")
    out = proc.stdout
    assert proc.returncode == 2, out[-3000:]
    rows = {
        "G01": "--tags preflght: no play or role of the collection has this tag, so it would run nothing; "
               "known tags: preflight, ",
        "G02": "--limit: 'lcalhost' matches no host or group of the inventory; known groups: ",
        "G03": "-e cluster_group: 'spraks' matches no host or group of the inventory; known groups: ",
        "G04": "%s: no group of the inventory is named 'dgx-spark', so this file is never loaded; rename it to "
               "one of: dgx_spark, " % (tmp_path / "group_vars" / "dgx-spark.yml"),
        "G05": "%s: no host of the inventory is named 'lcalhost', so this file is never loaded; rename it to one "
               "of: localhost" % (tmp_path / "host_vars" / "lcalhost.yml"),
        "G06": "sparkforge_serial: set in the inventory (host localhost), where the play keyword serial: that "
               "reads it does not look, so it would be ignored; set it with -e sparkforge_serial=VALUE",
    }
    assert "6 name(s) given to the run match nothing, nothing was changed" in out, out[-3000:]
    for row_id, message in rows.items():
        assert message in out, (row_id, out[-3000:])
    assert "Read the host, check it and plan the work" not in out
    assert snapshot(*watched(host)) == before
    assert git_status() == status_before


@pytest.mark.parametrize("book,variable", [
    pytest.param("playbooks/cluster.yml", "cluster_group", id="cluster"),
    pytest.param("playbooks/xhost.yml", "xhost_group", id="xhost"),
])
def test_a_group_typo_stops_every_playbook_that_changes_a_host(tmp_path, book, variable):
    """G03 through cluster.yml and xhost.yml, whose plays run on the group given: a group matching no host used to
    leave every play empty and the run end "successful". The names check runs first, on the controller."""
    host = make_host(tmp_path, None, "index", torch=False, venv=False, components=TORCH_ONLY)
    before, status_before = snapshot(*watched(host)), git_status()
    proc = run_book(host, book, "-e", "%s=spraks" % variable)
    out = proc.stdout
    assert proc.returncode == 2, out[-3000:]
    assert "-e %s: 'spraks' matches no host or group of the inventory; known groups: " % variable in out, out[-3000:]
    assert "1 name(s) given to the run match nothing, nothing was changed" in out, out[-3000:]
    assert "Check the variables set for this host" not in out, "a play of the group ran"
    assert snapshot(*watched(host)) == before
    assert git_status() == status_before


def test_the_cli_cluster_group_typo_is_refused_naming_the_known_groups(tmp_path):
    """G03 through `sparkforge cluster -g spraks`: the CLI's run of cluster.yml fails, naming the group."""
    host = make_host(tmp_path, None, "index", torch=False, venv=False, components=TORCH_ONLY)
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith("PIP_"))
    env.update(PYTHONPATH=os.path.join(REPO, "src"), ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"))
    before = snapshot(*watched(host))
    proc = subprocess.run([sys.executable, "-m", "sparkforge.cli", "--project-dir", REPO, "cluster", "--plain", "-i",
                           host["inventory"], "-g", "spraks"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=300, check=False)
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert "-e cluster_group: 'spraks' matches no host or group of the inventory; known groups: " in proc.stdout, \
        proc.stdout[-3000:]
    assert snapshot(*watched(host)) == before


def anchored_inventory(host, override):
    """The stand-in host's inventory written with a YAML anchor: the group's variables are &common, and localhost
    merges them (<<: *common) and then writes ``override`` (keys of the anchor given again: YAML's override)."""
    with open(host["inventory"]) as handle:
        data = yaml.safe_load(handle)["all"]

    def indent(text, n):
        return "".join(" " * n + line + "\n" for line in text.splitlines())

    text = ("all:\n  vars: &common\n" + indent(yaml.safe_dump(data["vars"]), 4) + "  hosts:\n    localhost:\n"
            "      <<: *common\n" + indent(yaml.safe_dump(dict(data["hosts"]["localhost"], **override)), 6))
    with open(host["inventory"], "w") as handle:
        handle.write(text)
    return text


@pytest.mark.bad_input_rows("G10")
def test_a_merge_key_with_an_override_is_valid_yaml_and_the_run_goes_on(tmp_path):
    """G10 (issue 52, item 8): `<<: *anchor` and then one of the anchor's keys again is YAML's override, not a key
    written twice. Before, ansible.cfg's duplicate_dict_key = error took it for one and refused the inventory; now
    the check-mode run of spark.yml goes on to its end (exit 0), the override's value in force (the anchor's alone
    is refused)."""
    # The anchor's pytorch_jobs: 0 would be refused (1 to 1024): the run passes only with the override in force.
    host = make_host(tmp_path, None, "index", torch=False, venv=False, components=TORCH_ONLY, more={"pytorch_jobs": 0})
    text = anchored_inventory(host, {"pytorch_jobs": 3})
    assert "<<: *common" in text and "pytorch_jobs: 0" in text and "pytorch_jobs: 3" in text
    before, status_before = snapshot(*watched(host)), git_status()
    proc = run_book(host, "playbooks/spark.yml", "--check")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "is written twice in one mapping" not in proc.stdout, proc.stdout[-3000:]
    assert "duplicate mapping key" not in proc.stdout.lower(), proc.stdout[-3000:]
    assert snapshot(*watched(host)) == before and git_status() == status_before


@pytest.mark.bad_input_rows("G07", "G11", "G12")
def test_a_key_written_twice_in_inventory_group_vars_or_an_extra_vars_file_stops_the_run_naming_it(tmp_path):
    """G07 inventory, G11 group_vars beside it, G12 -e @file: a key a mapping writes itself twice (one value silently
    lost) is refused by preflight's first task, each named with its file, line and key, in one run: exit 2, nothing
    changed. The inventory also holds a merge with an override (G10), which is not named."""
    host = make_host(tmp_path, None, "index", torch=False, venv=False, components=TORCH_ONLY)
    anchored_inventory(host, {"sparkforge_torch_source": "index"})
    with open(host["inventory"], "a") as handle:
        handle.write("      pytorch_jobs: 4\n      pytorch_jobs: 8\n")
    line = len(open(host["inventory"]).read().splitlines())
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "all.yml").write_text("---\npytorch_jobs: 4\nml_packages_pins:\n  einops: 0.8.2\n"
                                                     "  einops: 0.8.1\n")
    extra = tmp_path / "extra.yml"
    extra.write_text("pytorch_jobs: 2\npytorch_jobs: 2\n")
    before, status_before = snapshot(*watched(host)), git_status()
    proc = run_book(host, "playbooks/spark.yml", "--check", "-e", "@%s" % extra)
    out = " ".join(proc.stdout.split())
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert "3 key(s) written twice in one YAML mapping, nothing was changed" in out, proc.stdout[-3000:]
    for row_id, found in (("G07", "%s:%d: key 'pytorch_jobs' is written twice in one mapping (first at line %d)"
                           % (host["inventory"], line, line - 1)),
                          ("G11", "%s:5: key 'einops' is written twice in one mapping (first at line 4)"
                           % (tmp_path / "group_vars" / "all.yml")),
                          ("G12", "%s (-e @%s):2: key 'pytorch_jobs' is written twice in one mapping (first at line 1)"
                           % (extra, extra))):
        assert found in out, (row_id, found, proc.stdout[-3000:])
    assert "YAML keeps only the last and the first is silently lost" in out
    assert "Read the host, check it and plan the work" not in out
    assert snapshot(*watched(host)) == before and git_status() == status_before


@pytest.mark.parametrize("argv,message", [
    pytest.param(["plan", "--timeout", "-1"], "argument --timeout: -1 is out of range (from 1 to 604800)", id="G08"),
    pytest.param(["plan", "--timeout", "\uff19"], "argument --timeout: '\uff19' has a non-ASCII character: type the "
                 "digits 0-9", id="G09"),
])
def test_every_number_of_the_cli_has_a_range(argv, message):
    """G08 (V31: versions --timeout): refused by the parser (exit 4), naming the option and its range."""
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "src"))
    proc = subprocess.run([sys.executable, "-m", "sparkforge.cli"] + argv, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=60, check=False)
    assert proc.returncode == 4, proc.stdout
    assert message in proc.stdout


def test_scripts_spark_from_a_site_directory_reads_the_site_inventory_and_vars(tmp_path):
    """`<checkout>/scripts/spark --check -i inventory.yml -e @site.yml` from a site directory: -i and -e @file are
    the caller's files (the checkout's own inventory/hosts.yml, this machine, is not read), the checkout's
    ansible.cfg and collection are used, nothing changes. And `ansible-playbook <checkout>/playbooks/spark.yml`
    from that directory, with no ansible.cfg, finds the collection (playbooks/collections) and reaches
    preflight's checks."""
    from helpers import setup_keeps, user_checkout, user_env
    reason = setup_keeps(sys.prefix)
    if reason:
        pytest.fail(reason)  # scripts/setup would build the tests' own venv again through the checkout's .venv
    host = make_host(tmp_path, None, "index", torch=False, venv=False, components=TORCH_ONLY)
    checkout = user_checkout(tmp_path)
    for name in ("scripts", "pyproject.toml"):
        os.symlink(os.path.join(REPO, name), os.path.join(checkout, name))
    with open(os.path.join(checkout, "inventory", "hosts.yml"), "w") as handle:
        yaml.safe_dump({"all": {"hosts": {"the_checkouts_own_host": {"ansible_connection": "local"}}}}, handle)
    site = tmp_path / "site"
    site.mkdir()
    os.rename(host["inventory"], str(site / "inventory.yml"))
    (site / "site.yml").write_text("sparkforge_components: [pytorch]\n")
    env = dict((k, v) for k, v in user_env(checkout).items() if not k.startswith("PIP_"))
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"))
    before = snapshot(*watched(host))
    line = "%s/scripts/spark --check --tags preflight -i inventory.yml -e @site.yml" % checkout
    proc = subprocess.run(["bash", "-c", line], cwd=str(site), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=300, check=False)
    out = proc.stdout
    assert proc.returncode == 0, out[-4000:]
    assert "the_checkouts_own_host" not in out
    assert re.search(r"localhost\s+: ok=\d+\s+changed=0\s+unreachable=0\s+failed=0", out), out[-4000:]
    assert re.search(r"\bpytorch\s+install\b", out), out[-4000:]
    assert snapshot(*watched(host)) == before
    env.pop("ANSIBLE_CONFIG", None)
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), os.path.join(checkout, "playbooks", "spark.yml"),
                           "-i", "inventory.yml", "--check", "--tags", "preflght"], cwd=str(site), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=120,
                          check=False)
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert "--tags preflght: no play or role of the collection has this tag" in proc.stdout, proc.stdout[-3000:]


def test_every_yaml_file_of_the_repository_has_no_key_twice():
    """With duplicate_dict_key = error, a task file with a key written twice (a key repeated after a `<<:` merge
    counts) would stop every run that reaches it: each YAML file Ansible may read loads with Ansible's loader."""
    env = dict(os.environ, ANSIBLE_DUPLICATE_YAML_DICT_KEY="error", ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"))
    script = ("import subprocess, sys\n"
              "from ansible.parsing.dataloader import DataLoader\n"
              "files = subprocess.run(['git', 'ls-files', '*.yml', '*.yaml'], capture_output=True, text=True,\n"
              "                       check=True).stdout.split()\n"
              "bad = []\n"
              "for name in files:\n"
              "    try:\n"
              "        DataLoader().load_from_file(name)\n"
              "    except Exception as error:\n"
              "        if 'duplicate' in str(error).lower():\n"
              "            bad.append('%s: %s' % (name, str(error).splitlines()[0]))\n"
              "print('%d files' % len(files))\n"
              "print('\\n'.join(bad))\n"
              "sys.exit(1 if bad else 0)\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert int(proc.stdout.split()[0]) > 100, proc.stdout[-3000:]
