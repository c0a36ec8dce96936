"""The build modules' orchestration, driven directly (no module process, no Ansible run).

triton_llvm_build, pytorch_wheel_build and cusparselt_repo keep only the Ansible glue; their
work is module_utils/build/triton_job.py, torch_job.py and cusparselt_job.py.  These tests call those
with params validated against each module's own ARGUMENT_SPEC, on the same fixtures as the
module tests: the LLVM/Triton and PyTorch fixture repositories (real git, cmake, ninja, pip
wheel) and the stand-in NVIDIA server with real signed .debs.  The cuSPARSELt runs here are
check mode or fail before acting, on this machine, and the test checks that the host's apt and
keyring state is the same afterwards; installing is the container tests' job
(test_cuda_cusparselt_repo.py).
"""

import hashlib
import importlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys

import pytest

from helpers import COLLECTIONS, REPO, run_module


def _sibling(name):
    """A test module next to this one, by path: the collection's unit tests reuse some of these names."""
    spec = importlib.util.spec_from_file_location("sparkforge_tests_" + name,
                                                  os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                               name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The fixture repositories, venvs and version data of the module tests, shared.
_torch_tests = _sibling("test_pytorch_build")
_triton_tests = _sibling("test_triton_llvm_build")
build_python, fixture_repo, torch_data = _torch_tests.build_python, _torch_tests.fixture_repo, _torch_tests.torch_data
FIXTURE_PTXAS, python, repos = _triton_tests.FIXTURE_PTXAS, _triton_tests.python, _triton_tests.repos

sys.path.insert(0, COLLECTIONS)
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator  # noqa: E402
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda.cusparselt_job import CusparseltJob  # noqa: E402
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import JobError, LocalSystem  # noqa: E402
from ansible_collections.sparkforge.stack.plugins.module_utils.build.build_common import BuildLock  # noqa: E402
from ansible_collections.sparkforge.stack.plugins.module_utils.build.torch_job import TorchWheelJob  # noqa: E402
from ansible_collections.sparkforge.stack.plugins.module_utils.build.triton_job import TritonLlvmJob  # noqa: E402

sys.path.insert(0, os.path.join(REPO, "tests", "fixtures", "nvidia_repo"))
import build_repo  # noqa: E402
import podman_host  # noqa: E402

MODULES = "ansible_collections.sparkforge.stack.plugins.modules."


def params(module, **args):
    """``args`` with the module's defaults, validated the way AnsibleModule validates them."""
    mod = importlib.import_module(MODULES + module)
    validator = ArgumentSpecValidator(mod.ARGUMENT_SPEC, mutually_exclusive=getattr(mod, "MUTUALLY_EXCLUSIVE", None))
    result = validator.validate(args)
    assert not result.error_messages, result.error_messages
    return result.validated_parameters


# ------------------------------------------------------------------ Triton and LLVM


@pytest.fixture
def triton_args(repos, python, tmp_path):  # noqa: F811
    return dict(triton_repo=repos["triton_repo"], triton_ref="v3.6.0", llvm_repo="file://" + repos["llvm_repo"],
                work_dir=str(tmp_path / "work"), wheel_dir=str(tmp_path / "wheels"), python=python,
                ptxas_path=FIXTURE_PTXAS, jobs="2")


def test_triton_job_plans_builds_publishes_then_reuses(triton_args, repos):  # noqa: F811
    plan = TritonLlvmJob(params("triton_llvm_build", **triton_args), LocalSystem(), check_mode=True).run(diff=True)
    assert plan["changed"] is True and plan["wheel"] is None
    assert plan["plan"]["llvm"]["build"] is True and plan["plan"]["llvm"]["why"].startswith("no LLVM stamp")
    assert plan["plan"]["triton"]["why"] == "no published wheel has cache key %s" % plan["cache_key"][:16]
    assert plan["llvm_commit"] == repos["llvm_commit"]
    assert plan["diff"]["after"] == "triton wheel: %s\n" % plan["cache_key"]
    assert not os.path.exists(triton_args["work_dir"]) and not os.path.exists(triton_args["wheel_dir"])

    built = TritonLlvmJob(params("triton_llvm_build", **triton_args), LocalSystem()).run()
    assert built["changed"] is True and built["built"] == ["llvm", "triton"]
    assert built["cache_key"] == plan["cache_key"]
    with open(built["wheel"], "rb") as handle:
        assert hashlib.sha256(handle.read()).hexdigest() == built["wheel_sha256"]
    with open(built["status_file"]) as handle:
        assert json.load(handle)["state"] == "done"
    assert os.path.isfile(built["log"])

    again = TritonLlvmJob(params("triton_llvm_build", **triton_args), LocalSystem()).run()
    assert again["changed"] is False and again["built"] == []
    assert (again["wheel"], again["wheel_sha256"]) == (built["wheel"], built["wheel_sha256"])
    assert again["plan"]["llvm"]["why"] == "not needed: the Triton wheel is up to date"


def test_triton_job_refuses_a_second_run_while_one_holds_the_lock(triton_args):
    os.makedirs(triton_args["work_dir"])
    with BuildLock(os.path.join(triton_args["work_dir"], ".build.lock")):
        with pytest.raises(JobError) as info:
            TritonLlvmJob(params("triton_llvm_build", **triton_args), LocalSystem()).run()
    assert info.value.result["phase"] == "lock" and "another build holds the lock" in info.value.msg
    assert not os.path.exists(triton_args["wheel_dir"])


def test_triton_job_bad_input_fails_in_the_plan_and_writes_nothing(triton_args, repos):  # noqa: F811
    wrong = "0" * 40
    with pytest.raises(JobError) as info:
        TritonLlvmJob(params("triton_llvm_build", **dict(triton_args, llvm_commit=wrong)), LocalSystem()).run()
    assert info.value.result["phase"] == "plan"
    assert "pins LLVM %s in cmake/llvm-hash.txt, but llvm_commit is %s" % (repos["llvm_commit"], wrong) in info.value.msg
    with pytest.raises(JobError, match="ref v9.9.9 not found"):
        TritonLlvmJob(params("triton_llvm_build", **dict(triton_args, triton_ref="v9.9.9")),
                      LocalSystem()).run()
    assert os.listdir(triton_args["work_dir"]) == [".build.lock"]
    assert not os.path.exists(triton_args["wheel_dir"])


def test_triton_job_failed_phase_names_the_log_and_its_tail(triton_args, monkeypatch):
    monkeypatch.setenv("FIXTURE_LLVM_FAIL", "1")  # the fixture LLVM's build stops on purpose
    with pytest.raises(JobError) as info:
        TritonLlvmJob(params("triton_llvm_build", **triton_args), LocalSystem()).run()
    result = info.value.result
    assert result["phase"] == "llvm-build" and result["rc"] != 0
    assert "FIXTURE_LLVM_FAIL" in result["log_tail"] and info.value.msg.startswith("phase 'llvm-build' failed")
    assert os.path.isfile(result["log"]) and not os.path.exists(triton_args["wheel_dir"] + "/" + "triton")
    with open(result["status_file"]) as handle:
        assert json.load(handle)["state"] == "failed"


# ------------------------------------------------------------------ PyTorch


def torch_args(tmp_path, build_python, fixture_repo, **more):  # noqa: F811
    args = dict(torch_data=torch_data(), repo=fixture_repo, build_dir=str(tmp_path / "build"),
                wheel_dir=str(tmp_path / "wheels"), python=build_python, platform_class="dgx_spark",
                compute_capabilities=["12.1"], machine="aarch64", jobs=2, ccache=False, version="2.9.1",
                features={"cuda": False}, build_deps="check")
    args.update(more)
    return params("pytorch_wheel_build", **args)


def test_torch_job_plans_builds_publishes_then_reuses(tmp_path, build_python, fixture_repo):  # noqa: F811
    args = torch_args(tmp_path, build_python, fixture_repo)
    plan = TorchWheelJob(args, LocalSystem(), check_mode=True).run()
    assert plan["changed"] is True and plan["wheel"] is None
    assert plan["plan"].startswith("would build torch 2.9.1 (") and "no published wheel has cache key" in plan["plan"]
    assert plan["warnings"] == []
    assert not os.path.exists(args["build_dir"]) and not os.path.exists(args["wheel_dir"])

    built = TorchWheelJob(args, LocalSystem()).run()
    assert built["changed"] is True and built["cache_key"] == plan["cache_key"]
    with open(built["manifest"]) as handle:
        manifest = json.load(handle)
    assert manifest["sha256"] == built["sha256"] and manifest["cache_key"] == built["cache_key"]
    assert manifest["commit"] == plan["commit"] and manifest["torch_version"] == "2.9.1"
    with open(built["wheel"], "rb") as handle:
        assert hashlib.sha256(handle.read()).hexdigest() == built["sha256"]

    again = TorchWheelJob(args, LocalSystem()).run()
    assert again["changed"] is False and again["wheel"] == built["wheel"]
    assert again["plan"].startswith("a wheel with the same cache key is published")


def test_torch_job_reports_unconfirmed_pairings_as_warnings(tmp_path, build_python, fixture_repo):  # noqa: F811
    data = torch_data()
    release = dict(data["releases"]["2.9.1"], unconfirmed=["torchaudio"])
    data["releases"] = dict(data["releases"], **{"2.9.1": release})
    plan = TorchWheelJob(torch_args(tmp_path, build_python, fixture_repo, torch_data=data), LocalSystem(),
                         check_mode=True).run()
    assert plan["warnings"] == ["torch 2.9.1: the version data's torchaudio pairing (%s) is not confirmed against "
                                "the release" % release["torchaudio"]]


def test_torch_job_bad_input_is_refused_before_anything_is_written(tmp_path, build_python, fixture_repo):  # noqa: F811
    data = torch_data()
    del data["fixes"]
    with pytest.raises(JobError, match="torch_data has no 'fixes'"):
        TorchWheelJob(torch_args(tmp_path, build_python, fixture_repo, torch_data=data), LocalSystem()).run()
    with pytest.raises(JobError, match="patch file .*missing.patch does not exist"):
        TorchWheelJob(torch_args(tmp_path, build_python, fixture_repo,
                                 patches=[str(tmp_path / "missing.patch")]), LocalSystem()).run()
    with pytest.raises(JobError, match="ref v0.0.1 not found"):
        TorchWheelJob(torch_args(tmp_path, build_python, fixture_repo, ref="v0.0.1"), LocalSystem()).run()
    assert not os.path.exists(str(tmp_path / "build")) and not os.path.exists(str(tmp_path / "wheels"))


# ------------------------------------------------------------------ cuSPARSELt


# What a cuSPARSELt install would touch on this machine: it must be the same after each test.
TOUCHED = ["/etc/apt/sources.list.d", "/usr/share/keyrings", "/etc/ld.so.conf.d", "/var"]


def snapshot():
    seen = {}
    for top in TOUCHED:
        names = os.listdir(top) if os.path.isdir(top) else []
        seen[top] = sorted(n for n in names if top != "/var" or n.startswith("cusparselt"))
    out = subprocess.run(["dpkg-query", "-W", "-f", "${Package}\n"], stdout=subprocess.PIPE,
                         universal_newlines=True, check=False).stdout
    seen["packages"] = sorted(n for n in out.split() if "cusparselt" in n)
    return seen


@pytest.fixture(scope="module")
def nvidia_server(tmp_path_factory):
    if not shutil.which("dpkg-deb"):
        pytest.skip("needs dpkg-deb (a Debian-family machine)")
    cache = build_repo.build()
    with open(os.path.join(cache, "manifest.json")) as handle:
        manifest = json.load(handle)
    server = podman_host.Server(os.path.join(cache, "tree"), str(tmp_path_factory.mktemp("srv") / "requests.log"))
    server.manifest = manifest
    server.base_url = server.base + "/compute/cusparselt/{version}/local_installers/"
    yield server
    server.stop()


def cusparselt_args(server, **more):
    args = dict(version="0.8.1", distro="ubuntu2404", arch="amd64", base_url=server.base_url, lock_timeout=5,
                checksum="sha256:" + server.manifest["cusparselt"]["0.8.1"]["debs"]["amd64"]["sha256"])
    args.update(more)
    return params("cusparselt_repo", **args)


def test_cusparselt_job_check_mode_lists_every_action_and_changes_nothing(nvidia_server):
    before = snapshot()
    system = LocalSystem()
    res = CusparseltJob(cusparselt_args(nvidia_server), system, True).run(diff=True)
    assert snapshot() == before
    assert res["changed"] is True and res["downloaded"] is True and system.warnings == []
    actions = res["actions"]
    assert actions[0] == "install cusparselt-local-repo-ubuntu2404-0.8.1 0.8.1-1 (not installed)"
    assert any(a.startswith("copy keyring cusparselt-local-") for a in actions)
    assert "apt-get update for file:///var/cusparselt-local-repo-ubuntu2404-0.8.1 only" in actions
    assert "install libcusparselt0-cuda-13=0.8.1.1-1, libcusparselt0-dev-cuda-13=0.8.1.1-1" in actions
    assert "package libcusparselt0-cuda-13 0.8.1.1-1" in res["diff"]["after"]
    assert res["cuda_major"] == 13 and res["url"].endswith("cusparselt-local-repo-ubuntu2404-0.8.1_0.8.1-1_amd64.deb")


def test_cusparselt_job_without_checksum_warns(nvidia_server):
    system = LocalSystem()
    args = cusparselt_args(nvidia_server)
    args["checksum"] = None
    res = CusparseltJob(args, system, True).run()
    assert res["changed"] is True
    assert system.warnings == ["no checksum given for %s: the download is only checked for its package name and "
                               "version" % res["url"]]


def test_cusparselt_job_bad_input_fails_before_acting(nvidia_server, tmp_path):
    before = snapshot()
    cache = str(tmp_path / "debs")
    wrong = "sha256:" + "0" * 64
    # Not check mode: a wrong checksum must stop the run before dpkg, with no file left behind.
    with pytest.raises(JobError) as info:
        CusparseltJob(cusparselt_args(nvidia_server, checksum=wrong, download_dir=cache), LocalSystem(), False).run()
    assert info.value.msg.startswith("checksum mismatch for ") and "nothing was installed" in info.value.msg
    assert info.value.result["expected_checksum"] == wrong and os.listdir(cache) == []
    with pytest.raises(JobError, match="HTTP 404 Not Found"):
        CusparseltJob(cusparselt_args(nvidia_server, version="0.0.9", checksum=None), LocalSystem(), True).run()
    with pytest.raises(JobError, match="packages is empty"):
        CusparseltJob(cusparselt_args(nvidia_server, packages=[]), LocalSystem(), False).run()
    with pytest.raises(JobError) as info:
        CusparseltJob(cusparselt_args(nvidia_server, distro="plan9"), LocalSystem(), False).run()
    assert info.value.result["distro"] == "plan9"
    assert snapshot() == before


def test_the_module_runs_the_job_through_ansible_run_command_and_fetch_url(nvidia_server):
    """The glue: AnsibleSystem (run_command, fetch_url) gives the job the same answers as LocalSystem."""
    before = snapshot()
    args = dict(version="0.8.1", distro="ubuntu2404", arch="amd64", base_url=nvidia_server.base_url, lock_timeout=5,
                checksum="sha256:" + nvidia_server.manifest["cusparselt"]["0.8.1"]["debs"]["amd64"]["sha256"])
    res, rc = run_module("cusparselt_repo", args, check_mode=True, diff=True)
    assert rc == 0 and not res.get("failed"), res
    direct = CusparseltJob(cusparselt_args(nvidia_server), LocalSystem(), True).run(diff=True)
    assert res["actions"] == direct["actions"] and res["diff"] == direct["diff"] and res["changed"] is True
    missing, rc = run_module("cusparselt_repo", dict(args, version="0.0.9", checksum=None), check_mode=True)
    assert rc != 0 and "HTTP 404 Not Found" in missing["msg"]
    assert snapshot() == before
