"""The collection as users install it: its tarball ships the playbook, runnable by its FQCN.

Builds the tarball with ansible-galaxy, installs it into an empty collections path, and runs
`ansible-playbook sparkforge.stack.spark` from a directory outside this repository, with no
ansible.cfg of this repository: a syntax check, then a `--check` run that must stop in
preflight on this machine (no NVIDIA GPU) without changing anything, as the README's command
does from the checkout.
"""

import os
import subprocess
import sys

import pytest

from helpers import COLLECTION

BIN = os.path.dirname(sys.executable)


def run(cmd, cwd, env, timeout=300):
    return subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    root = tmp_path_factory.mktemp("installed")
    dist, colls, work = root / "dist", root / "collections", root / "work"
    for path in (dist, colls, work):
        path.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    proc = run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", COLLECTION, "--output-path", str(dist)],
               cwd=str(work), env=env)
    assert proc.returncode == 0, proc.stdout
    tarballs = list(dist.glob("sparkforge-stack-*.tar.gz"))
    assert len(tarballs) == 1, proc.stdout
    proc = run([os.path.join(BIN, "ansible-galaxy"), "collection", "install", str(tarballs[0]), "-p", str(colls)],
               cwd=str(work), env=env)
    assert proc.returncode == 0, proc.stdout
    assert (colls / "ansible_collections" / "sparkforge" / "stack" / "playbooks" / "spark.yml").is_file()
    # Only the installed copy may be found: the path given, and no repository ansible.cfg
    # (the working directory is outside the repository).
    env["ANSIBLE_COLLECTIONS_PATH"] = str(colls)
    (work / "hosts.yml").write_text(
        "all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
        "      ansible_python_interpreter: \"{{ ansible_playbook_python }}\"\n")
    return {"work": str(work), "env": env, "colls": str(colls)}


def test_installed_playbook_passes_syntax_check(installed):
    proc = run([os.path.join(BIN, "ansible-playbook"), "sparkforge.stack.spark", "-i", "hosts.yml", "--syntax-check"],
               cwd=installed["work"], env=installed["env"])
    assert proc.returncode == 0, proc.stdout
    # The playbook that was checked is the installed copy, found by its FQCN.
    assert "playbook: %s/ansible_collections/sparkforge/stack/playbooks/spark.yml" % installed["colls"] in proc.stdout


@pytest.mark.skipif(os.path.exists("/usr/bin/nvidia-smi"), reason="this machine has an NVIDIA driver")
def test_installed_playbook_check_run_stops_in_preflight_from_outside_the_repo(installed):
    proc = run([os.path.join(BIN, "ansible-playbook"), "sparkforge.stack.spark", "-i", "hosts.yml", "--check"],
               cwd=installed["work"], env=installed["env"])
    out = proc.stdout
    assert proc.returncode == 2, out
    assert "nothing was changed" in out
    assert "no NVIDIA GPU found" in out
    assert "PLAY [Preflight" in out, out
    assert os.listdir(installed["work"]) == ["hosts.yml"]


def test_the_provisioning_playbook_is_plays_of_roles():
    """Each play names its hosts and its roles; the work lives in roles, not in playbook task files."""
    import yaml

    playbooks = os.path.join(COLLECTION, "playbooks")
    assert not os.path.exists(os.path.join(playbooks, "tasks"))
    with open(os.path.join(playbooks, "spark.yml")) as handle:
        plays = yaml.safe_load(handle)
    roles_dir = os.path.join(COLLECTION, "roles")
    for play in plays:
        assert play.get("hosts"), play["name"]
        assert not play.get("vars") and not play.get("pre_tasks") and not play.get("post_tasks"), play["name"]
        names = [r["role"] for r in play.get("roles", [])]
        # A play without roles imports one role's entry point, nothing else.
        for task in play.get("tasks", []):
            assert set(task) <= {"name", "ansible.builtin.import_role"}, task
            names.append(task["ansible.builtin.import_role"]["name"])
        assert names, play["name"]
        for name in names:
            short = name.split(".")[-1]
            assert name.startswith("sparkforge.stack.") and os.path.isfile(
                os.path.join(roles_dir, short, "meta", "argument_specs.yml")), name
