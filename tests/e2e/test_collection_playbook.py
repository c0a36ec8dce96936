"""The collection as users install it: its tarball ships the playbook, runnable by its FQCN.

Runs the guide's (docs/guides/installing-the-collection.md) commands as written, read from it: the
build in a stand-in checkout (this repository's collection tree and ansible.cfg), then `cd ~/site`,
the install into ~/.ansible/collections and `ansible-playbook sparkforge.stack.spark`, with HOME a
throwaway directory. The installed copy passes a syntax check, and the `--check` run must stop in
preflight on this machine (no NVIDIA GPU) without changing anything.
"""

import os
import shutil
import subprocess
import sys

import pytest

import readme
from helpers import COLLECTION, REPO

BIN = os.path.dirname(sys.executable)


def run(cmd, cwd, env, timeout=300):
    return subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=timeout, check=False)


def readme_commands():
    """The command block of the guide "Installing the collection", line by line, as written."""
    return readme.commands("installing-the-collection.md")


def stand_in_checkout(home):
    """~/sparkforge as the guide's checkout: this repository's collection tree, ansible.cfg and
    inventory (links and a copy), so the commands meet the checkout's own ansible.cfg."""
    checkout = home / "sparkforge"
    checkout.mkdir()
    for name in ("collections", "inventory", "library"):
        os.symlink(os.path.join(REPO, name), str(checkout / name))
    shutil.copy(os.path.join(REPO, "ansible.cfg"), str(checkout / "ansible.cfg"))
    return checkout


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The guide's commands as written: ~ is a throwaway home holding the checkout and the site."""
    home = tmp_path_factory.mktemp("home")
    checkout = stand_in_checkout(home)
    site = home / "site"
    site.mkdir()
    (site / "inventory.yml").write_text(
        "all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
        "      ansible_python_interpreter: \"{{ ansible_playbook_python }}\"\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(HOME=str(home), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               PATH=BIN + os.pathsep + os.environ.get("PATH", ""))
    lines = readme_commands()
    assert lines[0].startswith("ansible-galaxy collection build") and lines[1] == "cd ~/site", lines
    assert lines[-1].startswith("ansible-playbook sparkforge.stack.spark"), lines
    # All but the last, from the checkout (where the guide's first line runs), stopping at a failure.
    proc = run(["bash", "-e", "-c", "\n".join(lines[:-1])], cwd=str(checkout), env=env)
    assert proc.returncode == 0, proc.stdout
    assert "was installed successfully" in proc.stdout, proc.stdout
    colls = home / ".ansible" / "collections"
    assert (colls / "ansible_collections" / "sparkforge" / "stack" / "playbooks" / "spark.yml").is_file()
    return {"home": home, "checkout": str(checkout), "site": str(site), "env": env, "colls": str(colls),
            "last": lines[-1], "tarball": str(checkout / "sparkforge-stack-0.1.0.tar.gz")}


def test_installed_playbook_passes_syntax_check(installed):
    proc = run(["bash", "-c", installed["last"].replace("--check", "--syntax-check")], cwd=installed["site"],
               env=installed["env"])
    assert proc.returncode == 0, proc.stdout
    # The playbook that was checked is the installed copy, found by its FQCN.
    assert "playbook: %s/ansible_collections/sparkforge/stack/playbooks/spark.yml" % installed["colls"] in proc.stdout


@pytest.mark.skipif(os.path.exists("/usr/bin/nvidia-smi"), reason="this machine has an NVIDIA driver")
def test_installed_playbook_check_run_stops_in_preflight_from_the_site_directory(installed):
    proc = run(["bash", "-c", installed["last"]], cwd=installed["site"], env=installed["env"])
    out = proc.stdout
    assert proc.returncode == 2, out
    assert "nothing was changed" in out
    assert "no NVIDIA GPU found" in out
    assert "PLAY [Preflight" in out, out
    assert os.listdir(installed["site"]) == ["inventory.yml"]


def test_inside_the_checkout_galaxy_counts_the_in_tree_copy_as_installed(installed):
    """What the guide says of the checkout: "Nothing to do" there, and --force installs anyway."""
    cmd = "ansible-galaxy collection install %s -p ~/.ansible/collections" % installed["tarball"]
    proc = run(["bash", "-c", cmd], cwd=installed["checkout"], env=installed["env"])
    assert proc.returncode == 0 and "Nothing to do" in proc.stdout, proc.stdout
    proc = run(["bash", "-c", cmd + " --force"], cwd=installed["checkout"], env=installed["env"])
    assert proc.returncode == 0 and "was installed successfully" in proc.stdout, proc.stdout


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
