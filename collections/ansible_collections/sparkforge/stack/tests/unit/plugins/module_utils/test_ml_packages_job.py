# -*- coding: utf-8 -*-
"""ml_packages' job (module_utils/packages/ml_packages_job.py) on a stand-in host whose venv pip answers
from a small index (FakePip): check mode probes and installs nothing, a real run installs what the
probe found, bad input is refused before pip runs.  Real pip against a fixture index is
tests/unit/plugins/modules/test_ml_packages_module.py's."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import sys

import pytest

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import JobError
from ansible_collections.sparkforge.stack.plugins.module_utils.packages.ml_packages_job import MlPackagesJob
from ansible_collections.sparkforge.stack.plugins.modules import ml_packages

sys.path.insert(0, os.path.dirname(__file__))
from fake_system import FakeSystem  # noqa: E402  pylint: disable=wrong-import-position


class FakePip:
    """``python -m pip`` of a venv, answering as pip 24 does for the calls the job makes: --version,
    inspect --local, install (with --dry-run --report: the report file; without: the install).
    ``index``: {name: version} of the wheels it can find; the venv starts with ``installed``."""

    def __init__(self, index, installed):
        self.index = dict(index)
        self.installed = dict(installed)

    def __call__(self, cmd):
        args = cmd[3:]  # after python -m pip
        if args == ["--version"]:
            return 0, "pip 24.0 from /venv/lib/python3.12/site-packages/pip (python 3.12)\n", ""
        if args[:2] == ["inspect", "--local"]:
            return 0, json.dumps({"version": "1", "installed": [
                {"metadata": {"name": n, "version": v}, "metadata_location": "/venv/%s.dist-info" % n}
                for n, v in sorted(self.installed.items())]}), ""
        if args[0] == "install":
            wanted = args[-1].split("==")[0]
            if wanted not in self.index:
                return 1, "", ("ERROR: Could not find a version that satisfies the requirement %s (from versions: "
                               "none)\nERROR: No matching distribution found for %s\n" % (args[-1], args[-1]))
            if "--dry-run" in args:
                report = args[args.index("--report") + 1]
                items = [] if self.installed.get(wanted) == self.index[wanted] else [
                    {"metadata": {"name": wanted, "version": self.index[wanted]},
                     "download_info": {"url": "https://pypi.example/%s-%s-py3-none-any.whl"
                                       % (wanted, self.index[wanted])}}]
                with open(report, "w") as handle:
                    json.dump({"version": "1", "install": items}, handle)
                return 0, "Would install %s\n" % " ".join(i["metadata"]["name"] for i in items), ""
            self.installed[wanted] = self.index[wanted]
            return 0, "Successfully installed %s-%s\n" % (wanted, self.index[wanted]), ""
        return 2, "", "ERROR: unknown command \"%s\"\n" % args[0]


MATRIX = {"einops": {"methods": [{"method": "wheel"}]}}
TORCH = {"torch": "2.9.1+sparkforge"}


@pytest.fixture
def venv(tmp_path):
    path = tmp_path / "venv"
    (path / "bin").mkdir(parents=True)
    (path / "bin" / "python").write_text("")
    (path / "bin" / "python").chmod(0o755)
    return str(path)


def params(venv, **more):
    args = dict(venv=venv, matrix=MATRIX, pins={"einops": "0.8.1"}, packages=["einops"], arch="aarch64",
                platform_class="dgx_spark", index_url="https://pypi.example/simple")
    args.update(more)
    result = ArgumentSpecValidator(ml_packages.ARGUMENT_SPEC).validate(args)
    assert not result.error_messages, result.error_messages
    return result.validated_parameters


def a_host(venv, pip):
    return FakeSystem(commands={os.path.join(venv, "bin", "python"): pip})


def test_check_mode_probes_and_installs_nothing(venv):
    pip = FakePip({"einops": "0.8.1"}, TORCH)
    job = MlPackagesJob(params(venv), a_host(venv, pip), check_mode=True)
    plan = job.plan()
    assert plan.changes == ["install einops: einops==0.8.1"]
    res = MlPackagesJob(params(venv), a_host(venv, pip), check_mode=True).run(diff=True)
    assert res["changed"] is True and res["packages"][0]["status"] == "would_install"
    assert res["diff"] == {"before": "einops -\n", "after": "einops 0.8.1\n"}
    assert pip.installed == TORCH


def test_a_real_run_installs_what_the_probe_found_then_has_nothing_to_do(venv):
    pip = FakePip({"einops": "0.8.1"}, TORCH)
    host = a_host(venv, pip)
    res = MlPackagesJob(params(venv), host).run()
    assert res["changed"] is True and res["packages"][0]["status"] == "installed"
    assert res["packages"][0]["version"] == "0.8.1" and res["protected_unchanged"] is True
    assert pip.installed == dict(TORCH, einops="0.8.1")
    again = MlPackagesJob(params(venv), a_host(venv, pip)).run()
    assert again["changed"] is False and again["packages"][0]["status"] == "present"


def test_a_required_package_pip_cannot_find_fails_with_the_whole_result(venv):
    pip = FakePip({}, TORCH)
    with pytest.raises(JobError) as info:
        MlPackagesJob(params(venv), a_host(venv, pip)).run()
    assert info.value.msg.startswith("required package(s) failed: einops")
    row = info.value.result["packages"][0]
    assert row["status"] == "failed" and row["reason"].startswith("no installable distribution for this host: ")
    assert pip.installed == TORCH


def test_bad_input_is_refused_before_pip_runs(venv, tmp_path):
    host = a_host(venv, FakePip({}, TORCH))
    with pytest.raises(JobError, match="cannot resolve the ML package matrix: "):
        MlPackagesJob(params(venv, packages=["unheard-of"]), host).run()
    with pytest.raises(JobError, match="is not a virtual environment \\(no bin/python\\); create it first"):
        MlPackagesJob(params(str(tmp_path / "none")), host).run()
    assert host.ran == []


def test_check_mode_without_the_venv_lists_what_the_real_run_installs(tmp_path):
    host = FakeSystem()
    res = MlPackagesJob(params(str(tmp_path / "none")), host, check_mode=True).run(diff=True)
    assert res["changed"] is True and res["packages"][0]["status"] == "would_install"
    assert res["packages"][0]["reason"] == "the venv does not exist yet (check mode)" and "diff" not in res
    assert host.ran == []


def test_an_old_pip_is_refused_with_its_answer(venv):
    host = FakeSystem(commands={(os.path.join(venv, "bin", "python"), "-m", "pip", "--version"):
                                (0, "pip 22.0.2 from /usr/lib/python3/dist-packages/pip (python 3.10)\n", "")})
    with pytest.raises(JobError, match="the venv's pip is missing or older than 23 \\(pip 22.0.2 from "):
        MlPackagesJob(params(venv), host).run()
    assert len(host.ran) == 1


def test_a_gpu_source_build_runs_pip_with_the_plans_nvcc_first_on_path(venv):
    """A setup.py that looks for nvcc on PATH finds the toolkit the plan chose (CUDA_HOME), not the one the
    host's PATH holds first: pip runs with $CUDA_HOME/bin first (heavy_build.toolkit_env)."""
    gpu_build = {"arch_env": [{"name": "TORCH_CUDA_ARCH_LIST", "form": "torch"}], "jobs_env": "MAX_JOBS",
                 "threads_env": "NVCC_THREADS", "nvcc_threads": 4,
                 "job_memory_gib": 9, "checked": ["flash-attn setup.py"]}
    matrix = {"flash-attn": {"methods": [{"method": "source"}], "source": {"build_isolation": False},
                             "gpu_build": gpu_build}}
    pip = FakePip({"flash-attn": "2.8.3"}, TORCH)
    host = a_host(venv, pip)
    cuda_home = "/usr/local/cuda-13.0"
    args = params(venv, matrix=matrix, pins={"flash-attn": "2.8.3"}, packages=["flash-attn"], audit_targets=["12.1"],
                  cuda_arch_list="12.1", build_cpus=8, build_memory_gib=64,
                  env={"CUDA_HOME": cuda_home, "PATH": "/usr/local/cuda-11.8/bin:/usr/bin:/bin"})
    res = MlPackagesJob(args, host, check_mode=True).run()
    assert res["packages"][0]["status"] == "would_install", res["packages"][0]
    probes = [env for cmd, env in zip(host.ran, host.envs) if cmd[3:4] == ["install"]]
    assert probes and all(env["PATH"].split(os.pathsep)[0] == cuda_home + "/bin" for env in probes), probes
