"""Every default that derives from where and as whom the user runs (lookup sparkforge.stack.run_context): the
report and key directories follow the directory ansible-playbook (or the CLI) runs in, never the playbook's
(an installed collection's playbooks/); USER and HOME unset (cron, a container, a systemd unit, env -i) give the
uid's own. The guides' cluster.yml and xhost.yml lines run as written from a stand-in checkout, with an inventory
that sets only what a user's does; scripts/spark and the CLI with the environment of a cron job."""

import json
import os
import pwd
import subprocess
import sys

import pytest
import yaml

import readme
from helpers import REPO, setup_keeps, user_checkout

BIN = os.path.dirname(sys.executable)
COLLECTION = os.path.join(REPO, "collections", "ansible_collections", "sparkforge", "stack")
# The defaults read, from their roles' files as written, and what they resolve to under the run directory.
DEFAULTS = {
    "cluster_fabric": {"cluster_fabric_report_dir": "reports"},
    "cluster_ssh": {"cluster_ssh_key_dir": ".sparkforge-cluster-keys"},
    "fleet_report": {"fleet_report_dir": "reports"},
    "fleet_status": {"fleet_status_report_dir": "reports"},
    "verify": {"verify_controller_dir": "reports"},
    "xhost_collectives": {"xhost_report_dir": "reports"},
}
ME = pwd.getpwuid(os.getuid())


def cron_env(**more):
    """The environment of a cron job (or `env -i`): PATH, and HOME only when asked; no USER, no PWD, no LANG."""
    env = {"PATH": BIN + os.pathsep + "/usr/bin:/bin"}
    env.update(more)
    return env


def show_defaults_playbook(where):
    """A playbook in ``where`` (not the directory it runs from) that reads the roles' defaults files and writes
    what they resolve to into the file -e out names."""
    files = [os.path.join(COLLECTION, "roles", role, "defaults", "main.yml") for role in DEFAULTS]
    files.append(os.path.join(COLLECTION, "roles", "manifest", "defaults", "main", "stack.yml"))
    names = [name for values in DEFAULTS.values() for name in values] + ["cluster_ssh_user",
                                                                        "sparkforge_fleet_wheelhouse"]
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "Read the defaults", "ansible.builtin.include_vars": {"file": "{{ item }}"}, "loop": files},
        {"name": "Write what they resolve to", "ansible.builtin.copy": {
            "dest": "{{ out }}", "content": "{{ dict(%s | zip(query('ansible.builtin.vars', *%s))) | to_json }}"
            % (json.dumps(names), json.dumps(names))}}]}]
    os.makedirs(where, exist_ok=True)
    path = os.path.join(where, "show.yml")
    with open(path, "w") as handle:
        yaml.safe_dump(play, handle)
    return path


def expected(run_dir, user=ME.pw_name, home=ME.pw_dir):
    values = dict((name, os.path.join(run_dir, rel)) for names in DEFAULTS.values() for name, rel in names.items())
    values.update(cluster_ssh_user=user, sparkforge_fleet_wheelhouse=home + "/.cache/sparkforge/wheelhouse")
    return values


def local_inventory(path):
    with open(path, "w") as handle:
        yaml.safe_dump({"all": {"hosts": {"localhost": {"ansible_connection": "local",
                                                        "ansible_python_interpreter": sys.executable}}}}, handle)
    return path


@pytest.mark.bad_input_rows("L06")
@pytest.mark.parametrize("environ", ["cron", "user"])
def test_the_defaults_resolve_in_the_directory_ansible_playbook_runs_in(tmp_path, environ):
    """ansible-playbook run from work/ with a playbook in elsewhere/: every default directory is under work/ (the
    pipe lookup of `pwd` gave elsewhere/, the playbook's); under cron's environment (no USER, HOME, PWD) the
    cluster's user and the wheelhouse are the uid's own (the user was '' and refused as a variable never set)."""
    work, out = tmp_path / "work", tmp_path / "values.json"
    work.mkdir()
    playbook = show_defaults_playbook(str(tmp_path / "elsewhere"))
    env = cron_env(ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg")) if environ == "cron" else \
        dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), USER="someone", HOME="/home/someone")
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), playbook, "-i",
                           local_inventory(str(tmp_path / "inventory.yml")), "-e", "out=%s" % out],
                          cwd=str(work), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    want = expected(str(work)) if environ == "cron" else expected(str(work), "someone", "/home/someone")
    assert json.loads(out.read_text()) == want


@pytest.mark.bad_input_rows("L05")
def test_the_cli_passes_the_directory_it_runs_in(tmp_path):
    """The CLI runs ansible-playbook through ansible-runner, in the playbook's directory: the defaults still
    resolve in the directory the CLI was started from (SPARKFORGE_RUN_DIR), under cron's environment (and
    LC_ALL=C) too; the reports in the project's reports/, the CLI's own default."""
    work, out = tmp_path / "work", tmp_path / "values.json"
    work.mkdir()
    playbook = show_defaults_playbook(str(tmp_path / "elsewhere"))
    proc = subprocess.run([os.path.join(BIN, "sparkforge"), "provision", "--plain", "--playbook", playbook, "-i",
                           local_inventory(str(tmp_path / "inventory.yml")), "-e", "out=%s" % out],
                          cwd=str(work), env=cron_env(LC_ALL="C"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    # LC_ALL=C: one line saying what the run uses (it printed "ERROR: ERROR: Ansible requires the locale ...").
    assert "sparkforge: LC_ALL=C is not a UTF-8 locale, which ansible-core needs: the run uses LC_ALL=C.UTF-8" \
        in proc.stdout and "ERROR" not in proc.stdout, proc.stdout[-3000:]
    want = expected(str(work))
    # The reports go where the CLI says (its sparkforge_reports_dir: the project's reports/, where `sparkforge
    # report` reads them); the cluster's key where the same line of ansible-playbook would keep it.
    for name in want:
        if want[name] == os.path.join(str(work), "reports"):
            want[name] = os.path.join(REPO, "reports")
    assert json.loads(out.read_text()) == want
    assert want["cluster_ssh_key_dir"] == os.path.join(str(work), ".sparkforge-cluster-keys")


def guide_checkout(tmp_path):
    """A stand-in checkout whose inventory/sparks.yml is two hosts that are this machine: only what a user's
    inventory of the guides sets (the hosts, the group), no report or key directory, no user."""
    checkout = user_checkout(tmp_path)
    hosts = dict((h, {"ansible_connection": "local", "ansible_python_interpreter": sys.executable})
                 for h in ("spark-1", "spark-2"))
    with open(os.path.join(checkout, "inventory", "sparks.yml"), "w") as handle:
        yaml.safe_dump({"all": {"children": {"sparks": {"hosts": hosts, "vars": {
            "cluster_fabric_subnet": "192.168.100.0/24"}}}}}, handle)
    return checkout


def guide_line(checkout, line, env):
    return subprocess.run(["bash", "-c", line], cwd=checkout, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=600, check=False)


@pytest.mark.bad_input_rows("L07")
def test_the_guides_xhost_and_cluster_lines_on_the_roles_defaults(tmp_path):
    """The guides' lines as written (with --check), from the checkout's root, the roles' own defaults and cron's
    environment: xhost.yml's check passes (its report directory was the collection's playbooks/reports,
    refused); cluster.yml gets past the variables to the fabric, which this machine has none of."""
    checkout = guide_checkout(tmp_path)
    env = cron_env(HOME=str(tmp_path))
    xhost = readme.command("collectives-across-hosts.md", "ansible-playbook playbooks/xhost.yml")
    assert xhost == "ansible-playbook playbooks/xhost.yml -i inventory -e xhost_group=sparks", xhost
    proc = guide_line(checkout, xhost + " --check", env)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "is inside" not in proc.stdout
    check = readme.commands("linking-sparks.md")[0]
    assert check == "ansible-playbook playbooks/cluster.yml -i inventory/sparks.yml -e cluster_group=sparks --check"
    proc = guide_line(checkout, check, env)
    out = " ".join(proc.stdout.split())
    assert proc.returncode == 2, proc.stdout[-4000:]
    assert "variable(s) refused" not in out and "is inside" not in out, proc.stdout[-4000:]
    assert "the cluster's fabric cannot be configured, nothing changed" in out, proc.stdout[-4000:]
    assert not os.path.exists(os.path.join(checkout, "reports"))  # check mode made nothing


@pytest.mark.bad_input_rows("L08")
def test_scripts_spark_under_cron_with_the_users_ansible_config_keeps_the_checkouts_protections(tmp_path):
    """scripts/spark with cron's environment, LC_ALL=C and an exported ANSIBLE_CONFIG of the user's that turns
    the protections off: the checkout's ansible.cfg is used, said on stderr, and an inventory with a key written
    twice is refused naming it by preflight's first task (it ran on the last value, exit 0)."""
    reason = setup_keeps(sys.prefix)
    if reason:
        pytest.fail(reason)
    checkout = user_checkout(tmp_path)
    for name in ("scripts", "pyproject.toml"):
        os.symlink(os.path.join(REPO, name), os.path.join(checkout, name))
    users = tmp_path / "user.cfg"
    users.write_text("[defaults]\nduplicate_dict_key = ignore\n[inventory]\nunparsed_is_failed = False\n"
                     "any_unparsed_is_failed = False\n")
    (tmp_path / "site.yml").write_text("all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
                                       "      sparkforge_venv: /opt/a\n      sparkforge_venv: /opt/b\n")
    env = cron_env(HOME=str(tmp_path), LC_ALL="C", ANSIBLE_CONFIG=str(users),
                   ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED="False")
    proc = guide_line(checkout, "scripts/spark --check -i %s" % (tmp_path / "site.yml"), env)
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert "ANSIBLE_CONFIG=%s from the environment is not used" % users in proc.stdout, proc.stdout[-3000:]
    assert "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED=False from the environment is overridden with True" in proc.stdout
    assert "LC_ALL=C is not a UTF-8 locale" in proc.stdout
    assert "ERROR: ERROR" not in proc.stdout and "requires the locale encoding" not in proc.stdout
    out = " ".join(proc.stdout.split())
    assert "key 'sparkforge_venv' is written twice in one mapping" in out, proc.stdout[-3000:]
    assert "written twice in one YAML mapping, nothing was changed" in out, proc.stdout[-3000:]


@pytest.mark.bad_input_rows("L09")
def test_an_extra_var_string_with_a_space_is_refused_by_ansible_playbook_too(tmp_path):
    """ansible-playbook itself splits `-e "sparkforge_venv=/opt/my venv"` at the space, keeps /opt/my and puts
    "venv" in _raw_params, exit 0: preflight's first task refuses it, naming the word, nothing changed."""
    checkout = guide_checkout(tmp_path)
    line = readme.command("collectives-across-hosts.md", "ansible-playbook playbooks/xhost.yml")
    proc = guide_line(checkout, line + " --check -e 'sparkforge_venv=/opt/my venv'", cron_env(HOME=str(tmp_path)))
    assert proc.returncode == 2, proc.stdout[-3000:]
    out = " ".join(proc.stdout.split())
    assert '-e: "venv" is no key=value: Ansible splits an -e key=value string at spaces' in out, proc.stdout[-3000:]
