"""The pytorch and torch_domains roles run for real on this machine (connection local).

- Without preflight's plan, `latest` stops both roles with the message that says what to do.
- A source build of the PyTorch-shaped fixture (real sm_90 CUDA objects) through the role: the poll loop's
  results carry the status dict under `build_status` (what the Python API reads, checked with
  the API's own extractor), the venv ends up with exactly the requested torch, and a rerun
  reuses the published wheel and changes nothing.
The molecule scenario `pytorch` covers the wheelhouse/index/source modes on a container host.
"""

import json
import os
import re
import subprocess
import sys

import pytest

from helpers import REPO, copy_venv, venv_template

from sparkforge.api import extract_build_status

FIXTURE = os.path.join(REPO, "tests", "fixtures", "pytorch")
NVCC = "/usr/local/cuda/bin/nvcc"


def run_play(tmp_path, tasks, extra_vars=None, timeout=600):
    """Run a one-play playbook on localhost with the JSON callback; return (rc, parsed output, text)."""
    play = [{"name": "roles under test", "hosts": "localhost", "connection": "local", "gather_facts": False,
             "vars": {"ansible_python_interpreter": sys.executable}, "tasks": tasks}]
    path = tmp_path / "play.yml"
    path.write_text(json.dumps(play))
    env = dict(os.environ)
    env.update({
        "ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg"),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
        "ANSIBLE_ASYNC_DIR": str(tmp_path / "async"),
    })
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", str(path)]
    if extra_vars:
        cmd += ["-e", json.dumps(extra_vars)]
    proc = subprocess.run(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=timeout, check=False)
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        data = {}
    return proc.returncode, data, proc.stdout + proc.stderr


def task_results(data, name_part):
    """The localhost results of every task whose name contains name_part, in order."""
    found = []
    for play in data.get("plays", []):
        for task in play.get("tasks", []):
            if name_part in task["task"]["name"]:
                result = task["hosts"].get("localhost")
                if result is not None:
                    found.append(result)
    return found


def failed_messages(data):
    return [r.get("msg", "") for play in data.get("plays", []) for t in play.get("tasks", [])
            for r in t["hosts"].values() if r.get("failed")]


@pytest.mark.parametrize("role,hint", [
    ("sparkforge.stack.pytorch", "set pytorch_version"),
    ("sparkforge.stack.torch_domains", "set torch_domains_version"),
])
def test_latest_without_a_plan_fails_clearly(tmp_path, role, hint):
    tasks = [{"name": "include the role", "ansible.builtin.include_role": {"name": role},
              "vars": {"pytorch_venv": str(tmp_path / "venv"), "torch_domains_venv": str(tmp_path / "venv")}}]
    rc, data, text = run_play(tmp_path, tasks)
    assert rc != 0, text
    messages = failed_messages(data)
    assert any("run sparkforge.stack.preflight first" in m and hint in m for m in messages), messages
    # Nothing was created: the check comes before any change.
    assert not (tmp_path / "venv").exists()


@pytest.fixture(scope="module")
def build_venv(tmp_path_factory):
    """A venv with setuptools and wheel (what the source build needs), made once; each test works on its own copy
    (helpers.copy_venv): the role adopts and changes that copy."""
    def make(where):
        subprocess.check_call([sys.executable, "-m", "venv", where])
        subprocess.check_call([os.path.join(where, "bin", "python"), "-m", "pip", "install", "-q",
                               "--disable-pip-version-check", "setuptools", "wheel"])
    return venv_template(str(tmp_path_factory.mktemp("templates")), "build", make)


@pytest.fixture(scope="module")
def fixture_repo(tmp_path_factory):
    dest = str(tmp_path_factory.mktemp("fixture") / "pytorch")
    subprocess.check_call([sys.executable, os.path.join(FIXTURE, "make_repo.py"), dest], stdout=subprocess.DEVNULL)
    return dest


@pytest.mark.skipif(not os.path.exists(NVCC), reason="needs CUDA's nvcc in /usr/local/cuda")
def test_source_build_through_the_role_reports_build_status_and_reruns_as_noop(tmp_path, fixture_repo, build_venv):
    """A real CUDA build of the fixture (sm_90, FIXTURE_PAUSE makes it last several polls)."""
    venv = tmp_path / "venv"
    copy_venv(build_venv, str(venv))
    role_vars = {
        "pytorch_version": "2.12.0", "pytorch_source": "source", "pytorch_venv": str(venv),
        # The test made the venv (no sparkforge marker): given to the role, adopted (issue 52).
        "sparkforge_venv_adopt": True,
        "pytorch_repo": fixture_repo, "pytorch_build_dir": str(tmp_path / "build"),
        "pytorch_wheel_dir": str(tmp_path / "wheels"),
        "pytorch_features": {"cudnn": False, "nccl": False, "cusparselt": False},
        "pytorch_build_deps": "check", "pytorch_jobs": 1, "pytorch_build_poll": 1, "pytorch_build_poll_max": 2,
        "sparkforge_cuda_arch_list": "9.0", "pytorch_extra_env": {"FIXTURE_PAUSE": "2"},
    }
    tasks = [{"name": "include the role", "ansible.builtin.include_role": {"name": "sparkforge.stack.pytorch"},
              "vars": role_vars}]

    rc, data, text = run_play(tmp_path, tasks)
    assert rc == 0, text[-3000:]
    polls = task_results(data, "Show the build status")
    assert polls, "no poll ran"
    statuses = [extract_build_status(r) for r in polls]
    assert all(len(s) == 1 for s in statuses), statuses
    last = statuses[-1][0]
    assert last["state"] == "done" and last["build"] == "pytorch 2.12.0", last
    assert last["log"] == str(tmp_path / "build" / "build.log")
    assert "torch build: phase" in last["progress"]
    # Several polls, one of them inside the compile with ninja-style [done/total] progress.
    assert len(polls) >= 3, [s[0]["progress"] for s in statuses]
    assert any(s[0]["phase"] == "build" and s[0]["total"] for s in statuses), [s[0]["progress"] for s in statuses]
    assert any(re.search(r"\[\d+/\d+\] [\d.]+%", s[0]["progress"]) for s in statuses), statuses
    # The wait doubles from pytorch_build_poll up to pytorch_build_poll_max: 1 s, then 2 s, 2 s, ...
    waits = [int(r["ansible_facts"]["pytorch_poll_wait"]) for r in task_results(data, "Grow the wait")
             if "ansible_facts" in r]
    assert waits and waits[0] == 2 and set(waits) == {2}, waits
    out = subprocess.check_output([str(venv / "bin" / "python"), "-c",
                                   "import json, torch; print(json.dumps(torch.build_info()))"])
    info = json.loads(out)
    assert info["version"] == "2.12.0" and info["env"]["TORCH_CUDA_ARCH_LIST"] == "9.0"

    rc, data, text = run_play(tmp_path, tasks)
    assert rc == 0, text[-3000:]
    changed = [t["task"]["name"] for play in data["plays"] for t in play["tasks"]
               if t["hosts"].get("localhost", {}).get("changed")]
    assert changed == [], changed
    assert data["stats"]["localhost"]["changed"] == 0


def test_failed_source_build_prints_its_last_status_then_fails_with_the_modules_message(tmp_path, fixture_repo,
                                                                                         build_venv):
    venv = tmp_path / "venv"
    copy_venv(build_venv, str(venv))
    role_vars = {
        "pytorch_version": "2.12.0", "pytorch_source": "source", "pytorch_venv": str(venv),
        # The test made the venv (no sparkforge marker): given to the role, adopted (issue 52).
        "sparkforge_venv_adopt": True,
        "pytorch_repo": fixture_repo, "pytorch_build_dir": str(tmp_path / "build"),
        "pytorch_wheel_dir": str(tmp_path / "wheels"), "pytorch_features": {"cuda": False},
        "pytorch_build_deps": "check", "pytorch_jobs": 1, "pytorch_build_poll": 1, "pytorch_build_poll_max": 2,
        "sparkforge_cuda_arch_list": "9.0",
        # The fixture then builds a wheel of another version: the module refuses to publish it.
        "pytorch_extra_env": {"PYTORCH_BUILD_VERSION": "2.12.1"},
    }
    tasks = [{"name": "include the role", "ansible.builtin.include_role": {"name": "sparkforge.stack.pytorch"},
              "vars": role_vars}]
    rc, data, text = run_play(tmp_path, tasks)
    assert rc != 0, text[-3000:]
    failed = task_results(data, "Poll the build job")[-1]
    assert failed.get("failed") and "does not carry version 2.12.0" in failed["msg"], failed
    last = extract_build_status(task_results(data, "Show the build status")[-1])[0]
    assert last["state"] == "failed", last
    assert not os.path.exists(tmp_path / "wheels") or not os.listdir(tmp_path / "wheels")


def test_acceptance_after_the_source_build_records_its_result_and_fails_over_budget(tmp_path, fixture_repo,
                                                                                      build_venv):
    """pytorch_acceptance: the fixture's own suites (test/run_test.py of the built tree) against the
    installed fixture wheel; all pass, then a run whose suites fail stops the role (a fleet builder then
    publishes nothing: the Build play's rescue skips the publish)."""
    venv = tmp_path / "venv"
    copy_venv(build_venv, str(venv))
    role_vars = {
        "pytorch_version": "2.12.0", "pytorch_source": "source", "pytorch_venv": str(venv),
        # The test made the venv (no sparkforge marker): given to the role, adopted (issue 52).
        "sparkforge_venv_adopt": True,
        "pytorch_repo": fixture_repo, "pytorch_build_dir": str(tmp_path / "build"),
        "pytorch_wheel_dir": str(tmp_path / "wheels"), "pytorch_features": {"cuda": False},
        "pytorch_build_deps": "check", "pytorch_jobs": 1, "pytorch_build_poll": 1, "pytorch_build_poll_max": 2,
        "sparkforge_cuda_arch_list": "9.0", "pytorch_acceptance": True, "pytorch_acceptance_packages": ["pytest"],
        "pytorch_acceptance_suites": ["test_cuda", {"name": "test_transformers", "k": "sdpa"}],
    }
    tasks = [{"name": "include the role", "ansible.builtin.include_role": {"name": "sparkforge.stack.pytorch"},
              "vars": role_vars}]
    facts = {"ansible_facts": {"sparkforge": {"platform_class": "hopper", "compute_capabilities": ["9.0"]}}}
    rc, data, text = run_play(tmp_path, [{"name": "GPU facts", "ansible.builtin.set_fact": facts["ansible_facts"]}]
                              + tasks)
    assert rc == 0, text[-3000:]
    result = task_results(data, "Acceptance tests of the built wheel")[-1]
    assert result["changed"] and result["verdict"]["within_budget"], result
    # test_cuda: 5 passed + 1 skipped; test_transformers -k sdpa: 2 selected, both pass.
    assert result["counts"]["passed"] == 7 and result["counts"]["skipped"] == 1, result["counts"]
    manifests = [f for f in os.listdir(tmp_path / "wheels") if f.endswith(".manifest.json")]
    with open(tmp_path / "wheels" / manifests[0]) as handle:
        assert json.load(handle)["acceptance"]["verdict"]["within_budget"] is True

    role_vars["pytorch_acceptance_env"] = {"FIXTURE_ACCEPTANCE": "test_transformers=fail"}
    rc, data, text = run_play(tmp_path, [{"name": "GPU facts", "ansible.builtin.set_fact": facts["ansible_facts"]}]
                              + tasks)
    assert rc != 0, text[-3000:]
    failed = task_results(data, "Acceptance tests of the built wheel")[-1]
    assert failed["failed"] and "over budget" in failed["msg"], failed
    assert "test_transformers.py::TestTransformers::test_sdpa_math_backend" in failed["msg"]
    with open(tmp_path / "wheels" / manifests[0]) as handle:
        assert json.load(handle)["acceptance"]["verdict"]["within_budget"] is False


def test_source_build_in_check_mode_reports_the_build_and_install_and_writes_nothing(tmp_path, fixture_repo):
    """--check on a venv without torch: the build module says what it would build, the install of the
    wheel is reported as a change, and no build dir, wheel dir or torch appears."""
    venv = tmp_path / "venv"
    subprocess.check_call([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    role_vars = {
        "pytorch_version": "2.12.0", "pytorch_source": "source", "pytorch_venv": str(venv),
        # The test made the venv (no sparkforge marker): given to the role, adopted (issue 52).
        "sparkforge_venv_adopt": True,
        "pytorch_repo": fixture_repo, "pytorch_build_dir": str(tmp_path / "build"),
        "pytorch_wheel_dir": str(tmp_path / "wheels"), "pytorch_features": {"cuda": False},
        "pytorch_build_deps": "check", "pytorch_jobs": 1, "pytorch_build_poll": 1, "pytorch_build_poll_max": 2,
        "sparkforge_cuda_arch_list": "9.0",
    }
    facts = {"sparkforge": {"platform_class": "hopper", "compute_capabilities": ["9.0"]}}
    tasks = [{"name": "GPU facts", "ansible.builtin.set_fact": {"ansible_facts": facts}},
             {"name": "include the role", "ansible.builtin.include_role": {"name": "sparkforge.stack.pytorch"},
              "vars": role_vars}]
    before = sorted(os.listdir(tmp_path))
    play = [{"name": "roles under test", "hosts": "localhost", "connection": "local", "gather_facts": False,
             "vars": {"ansible_python_interpreter": sys.executable}, "tasks": tasks}]
    (tmp_path / "play.yml").write_text(json.dumps(play))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
                           str(tmp_path / "play.yml"), "--check"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    data = json.loads(proc.stdout)
    assert task_results(data, "Install the built wheel")[-1]["changed"]
    assert not task_results(data, "Check the venv's torch is exactly the planned one")[-1:] or \
        task_results(data, "Check the venv's torch is exactly the planned one")[-1].get("skipped")
    assert sorted(os.listdir(tmp_path)) == sorted(before + ["play.yml"])
    assert not any(name.startswith("torch") for name in os.listdir(subprocess.check_output(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        universal_newlines=True).strip()))
