# -*- coding: utf-8 -*-
"""The run's environment is its own (module_utils/_common/run_env.py): the host's PYTHON*/PIP_* variables never
reach the venv's python and pip, in either form (a process's environment, a task's ``environment:``), and the
plan names what was left out.  A real python in a real venv: a PYTHONPATH naming a directory that holds a
``torch`` is seen without the scrubbing and not with it."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess
import sys
import venv

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.sparkforge.stack.plugins.module_utils._common import run_env
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import LocalSystem
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import pip_env
from ansible_collections.sparkforge.stack.plugins.module_utils.plan.stack_plan_job import StackPlanJob

sys.path.insert(0, os.path.dirname(__file__))
from fake_system import FakeSystem  # noqa: E402  pylint: disable=wrong-import-position
from test_stack_plan_job import Mirror, params  # noqa: E402  pylint: disable=wrong-import-position

SEES_TORCH = "import importlib.util as u; print(u.find_spec('torch') is not None)"


@pytest.fixture(scope="module")
def stray(tmp_path_factory):
    """(a venv's python, a directory holding a package ``torch``) as the user's PYTHONPATH would name it."""
    root = tmp_path_factory.mktemp("stray")
    venv.create(str(root / "venv"), with_pip=False)
    (root / "elsewhere" / "torch").mkdir(parents=True)
    (root / "elsewhere" / "torch" / "__init__.py").write_text("__version__ = '9.9.9'\n")
    return str(root / "venv" / "bin" / "python"), str(root / "elsewhere")


def sees_torch(python, env):
    out = subprocess.run([python, "-c", SEES_TORCH], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True, check=True).stdout
    return out.strip() == "True"


@pytest.mark.parametrize("row_id", [pytest.param("E01", id="E01")])
def test_a_pythonpath_holding_torch_is_seen_without_the_scrubbing_and_not_with_it(stray, row_id):
    python, elsewhere = stray
    host = dict(os.environ, PYTHONPATH=elsewhere, PIP_FIND_LINKS="/somewhere")
    assert sees_torch(python, host), "the stand-in torch must be visible to the unscrubbed venv python"
    env, dropped = run_env.child_environ(host)
    assert not sees_torch(python, env)
    assert "PYTHONPATH" in dropped and "PIP_FIND_LINKS" in dropped
    # A task's environment: Ansible adds it to the host's (it cannot remove a variable).
    assert not sees_torch(python, dict(host, **pip_env.task_environment({})))
    # The module's form: its own process environment scrubbed, then inherited.
    scrubbed = dict(host)
    assert "PYTHONPATH" in run_env.scrub(scrubbed)
    assert not sees_torch(python, scrubbed)


@pytest.mark.parametrize("row_id", [pytest.param("E01", id="E01")])
def test_local_system_runs_the_venv_python_without_the_hosts_pythonpath(stray, monkeypatch, row_id):
    python, elsewhere = stray
    monkeypatch.setenv("PYTHONPATH", elsewhere)
    system = LocalSystem()
    rc, out, _err = system.run([python, "-c", SEES_TORCH])
    assert (rc, out.strip()) == (0, "False")
    assert "PYTHONPATH" in system.environment_dropped
    # A caller's own setting is the plan's, not the host's: it is kept.
    rc, out, _err = system.run([python, "-c", SEES_TORCH], env={"PYTHONPATH": elsewhere})
    assert (rc, out.strip()) == (0, "True")


@pytest.mark.parametrize("row_id", [pytest.param("E03", id="E03")])
def test_a_task_blanks_a_pythonhome_that_would_stop_python_starting(stray, row_id):
    python, _elsewhere = stray
    host = dict(os.environ, PYTHONHOME="/nonexistent-python-home")
    broken = subprocess.run([python, "-c", "pass"], env=host, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            check=False)
    assert broken.returncode != 0
    fixed = subprocess.run([python, "-c", "import sys; print(sys.flags.no_user_site)"], env=dict(
        host, **pip_env.task_environment({})), stdout=subprocess.PIPE, universal_newlines=True, check=False)
    assert (fixed.returncode, fixed.stdout.strip()) == (0, "1")


NAMES = st.sampled_from(["PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONNOUSERSITE", "PYTHONSTARTUP",
                         "PYTHONWARNINGS", "PYTHONOPTIMIZE", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS",
                         "PIP_PROXY", "PIP_USER", "PIP_CONFIG_FILE", "PIP_NO_INDEX", "HOME", "PATH", "https_proxy",
                         "CUDA_HOME", "LD_LIBRARY_PATH", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PIPX_HOME"])
VALUES = st.sampled_from(["", "1", "/x", os.devnull, "a b"])


@pytest.mark.parametrize("row_id", [pytest.param("E04", id="E04")])
@settings(max_examples=200, deadline=None)
@given(host=st.dictionaries(NAMES, VALUES), extra=st.dictionaries(NAMES, VALUES, max_size=3))
def test_no_host_python_or_pip_variable_survives_and_the_rest_does(host, extra, row_id):
    env, dropped = run_env.child_environ(host, extra)
    for key, value in env.items():
        if run_env.is_host_variable(key):
            # Only sparkforge's own settings, or the caller's (the plan's).
            assert key in extra or run_env.OWN.get(key) == value, key
    for key, value in host.items():
        if not run_env.is_host_variable(key) and key not in extra:
            assert env[key] == value
    # What changes imports or installs is gone; what only says how python writes and prints stays.
    assert not any(k in env for k in host if k in ("PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE") and k not in extra)
    assert all(env[k] == host[k] for k in ("PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED") if k in host
               and k not in extra)
    assert all(env[k] == v for k, v in extra.items())
    # Every variable of the host that was set and is not already sparkforge's own is named.
    assert dropped == sorted(k for k, v in host.items()
                             if run_env.is_host_variable(k) and v and run_env.OWN.get(k) != v)
    # The process form removes the same variables and names the same ones.
    copy = dict(host)
    assert run_env.scrub(copy) == dropped
    assert dict((k, v) for k, v in copy.items()) == run_env.child_environ(host)[0]
    # The task form leaves every variable that changes what python imports empty, whatever the plan's pip says.
    task = pip_env.task_environment(dict((k, v) for k, v in extra.items() if k.startswith("PIP_")))
    assert all(task[name] == "" for name in run_env.TASK_BLANKS)
    assert task["PYTHONNOUSERSITE"] == "1"


@pytest.mark.parametrize("row_id", [pytest.param("E02", id="E02")])
def test_the_plan_names_the_dropped_variables_and_what_to_set_instead(row_id):
    system = FakeSystem()
    system.environment_dropped = ["PIP_INDEX_URL", "PYTHONPATH"]
    result = StackPlanJob(params(probe_sources=False), system, opener=Mirror()).run()
    assert result["environment_dropped"] == ["PIP_INDEX_URL", "PYTHONPATH"]
    line = [t for t in result["plan_text"] if t.startswith("environment:")]
    assert line and "PYTHONPATH" in line[0] and "PIP_INDEX_URL: set pytorch_index_url" in line[0]
    assert StackPlanJob(params(probe_sources=False), FakeSystem(), opener=Mirror()).run()["environment_dropped"] == []


COLLECTION = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


def _tasks(items):
    for task in items or []:
        if not isinstance(task, dict):
            continue
        yield task
        for key in ("block", "rescue", "always"):
            yield from _tasks(task.get(key))


def test_every_task_that_runs_the_venvs_python_gets_the_runs_own_environment():
    """A command task with the venv's python (a read, a pip install, a build) carries pip_task_env: without it the
    host's PYTHONPATH reaches it (the pytorch role's first read then found a torch that was not the venv's)."""
    import yaml
    found, bare = 0, []
    roles = os.path.join(COLLECTION, "roles")
    for role in sorted(os.listdir(roles)):
        tasks_dir = os.path.join(roles, role, "tasks")
        for name in sorted(os.listdir(tasks_dir)) if os.path.isdir(tasks_dir) else []:
            with open(os.path.join(tasks_dir, name)) as handle:
                for task in _tasks(yaml.safe_load(handle)):
                    command = task.get("ansible.builtin.command")
                    if command is not None and "/bin/python" in str(command):
                        found += 1
                        if "pip_task_env" not in str(task.get("environment", "")):
                            bare.append("%s/%s: %s" % (role, name, task.get("name")))
    assert found >= 10 and bare == []


def test_every_module_that_runs_a_python_makes_the_environment_its_own():
    """A module with a python or venv option either runs through AnsibleSystem (which scrubs) or scrubs itself."""
    import ast
    import yaml
    modules = os.path.join(COLLECTION, "plugins", "modules")
    missing = []
    for name in sorted(os.listdir(modules)):
        with open(os.path.join(modules, name)) as handle:
            source = handle.read()
        docs = [n.value.value for n in ast.parse(source).body if isinstance(n, ast.Assign)
                and getattr(n.targets[0], "id", "") == "DOCUMENTATION" and isinstance(n.value, ast.Constant)]
        options = (yaml.safe_load(docs[0]) or {}).get("options") or {} if docs else {}
        if {"python", "venv"} & set(options) and "AnsibleSystem(module" not in source \
                and "run_env.scrub()" not in source:
            missing.append(name)
    assert missing == []


def test_the_plans_own_pip_settings_in_a_plays_environment_pass_the_hosts_do_not():
    """The offline bundle puts its pip index and configuration into the build and install plays' environment
    (sparkforge_bundle_env) and lists them in SPARKFORGE_PLAN_ENV: a module keeps those, and still drops every
    other PIP_* and the PYTHON* leaks of the host (the bundle's offline torch build found no pip index when
    they were dropped too)."""
    host = {"PIP_INDEX_URL": "file:///b/wheels/simple", "PIP_CONFIG_FILE": "/dev/null", "PIP_FIND_LINKS": "/home/u",
            "PYTHONPATH": "/home/u/torch", "PATH": "/bin", run_env.PLAN_ENV: "PIP_INDEX_URL,PIP_CONFIG_FILE"}
    env, gone = run_env.child_environ(host)
    assert env["PIP_INDEX_URL"] == "file:///b/wheels/simple" and env["PIP_CONFIG_FILE"] == "/dev/null"
    assert "PIP_FIND_LINKS" not in env and "PYTHONPATH" not in env and env["PYTHONNOUSERSITE"] == "1"
    assert gone == ["PIP_FIND_LINKS", "PYTHONPATH"]
    module = dict(host)
    assert run_env.scrub(module) == gone
    assert module == env
    # Without the list, the same variables are the host's and go.
    bare = dict(host)
    del bare[run_env.PLAN_ENV]
    assert "PIP_INDEX_URL" not in run_env.child_environ(bare)[0]
