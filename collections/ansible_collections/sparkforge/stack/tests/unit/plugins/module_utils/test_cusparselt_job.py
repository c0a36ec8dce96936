# -*- coding: utf-8 -*-
"""cusparselt_repo's job (module_utils/cuda/cusparselt_job.py) driven through a stand-in host
(fake_system.FakeSystem): what it plans, what it refuses before touching anything, and the
error carrying the failing tool's output."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

import pytest

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda.cusparselt_job import CusparseltJob
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import JobError
from ansible_collections.sparkforge.stack.plugins.modules import cusparselt_repo

sys.path.insert(0, os.path.dirname(__file__))
from fake_system import FakeSystem  # noqa: E402  pylint: disable=wrong-import-position

MIRROR = "https://mirror.example/cusparselt/{version}/"
URL = "https://mirror.example/cusparselt/0.8.1/cusparselt-local-repo-ubuntu2404-0.8.1_0.8.1-1_amd64.deb"
# dpkg-query on a host without the packages: exit 1, the names on stderr.
NOTHING_INSTALLED = (1, "", "dpkg-query: no packages found matching libcusparselt0-cuda-13\n")


def params(**args):
    """The module's options with its defaults, validated as AnsibleModule validates them."""
    base = dict(version="0.8.1", distro="ubuntu2404", arch="amd64", base_url=MIRROR, cuda_major=13)
    base.update(args)
    result = ArgumentSpecValidator(cusparselt_repo.ARGUMENT_SPEC).validate(base)
    assert not result.error_messages, result.error_messages
    return result.validated_parameters


def test_bad_distro_is_refused_before_any_command():
    host = FakeSystem()
    with pytest.raises(JobError) as info:
        CusparseltJob(params(distro="plan9"), host, check_mode=False).plan()
    assert "unsupported distro 'plan9'" in info.value.msg and info.value.result["distro"] == "plan9"
    assert host.ran == [] and host.fetched == []


def test_empty_package_list_is_refused_before_any_command():
    host = FakeSystem()
    with pytest.raises(JobError, match="packages is empty"):
        CusparseltJob(params(packages=[]), host).run()
    assert host.ran == []


def test_a_missing_version_fails_in_the_plan_and_installs_nothing():
    host = FakeSystem(commands={"dpkg-query": NOTHING_INSTALLED}, urls={URL: 404})
    with pytest.raises(JobError) as info:
        CusparseltJob(params(), host, check_mode=False).run()
    assert info.value.msg.startswith("could not download the cuSPARSELt local repo package from %s: HTTP 404 "
                                     "Not Found" % URL)
    assert info.value.result["status"] == 404 and info.value.result["url"] == URL
    assert info.value.result["actions"] == ["install cusparselt-local-repo-ubuntu2404-0.8.1 0.8.1-1 (not installed)"]
    assert host.fetched == [URL]
    assert [cmd[0] for cmd in host.ran] == ["dpkg-query"]  # no dpkg -i, no apt-get, no ldconfig


def test_an_unreachable_mirror_fails_the_check_mode_run_too():
    host = FakeSystem(commands={"dpkg-query": NOTHING_INSTALLED})
    with pytest.raises(JobError, match="server unreachable"):
        CusparseltJob(params(), host, check_mode=True).run()
    assert [cmd[0] for cmd in host.ran] == ["dpkg-query"]


def test_absent_on_a_host_without_the_release_plans_no_change():
    host = FakeSystem(commands={"dpkg-query": NOTHING_INSTALLED})
    job = CusparseltJob(params(state="absent"), host, check_mode=False)
    plan = job.plan()
    assert plan.changes == [] and not plan.changed
    res = CusparseltJob(params(state="absent"), host, check_mode=False).run(diff=True)
    assert res["changed"] is False and res["actions"] == [] and "diff" not in res
    assert res["packages"] == [] and res["cuda_major"] == 13 and res["cuda_major_source"] == "option"
    assert host.commands_run("ldconfig") == [] and host.commands_run("apt-get") == []


def test_the_cuda_major_comes_from_nvcc(tmp_path):
    nvcc = tmp_path / "nvcc"
    nvcc.write_text("")  # the job asks the host to run it; the stand-in answers
    host = FakeSystem(commands={
        "dpkg-query": NOTHING_INSTALLED,
        (str(nvcc), "--version"): (0, "Cuda compilation tools, release 12.8, V12.8.93\n", ""),
    })
    res = CusparseltJob(params(state="absent", cuda_major=None, nvcc=str(nvcc)), host).run()
    assert res["cuda_major"] == 12 and res["cuda_major_source"] == "nvcc"


def test_a_failing_tool_raises_the_one_error_with_its_output_tail():
    err = "".join("line %d\n" % n for n in range(500)) + "/sbin/ldconfig: /etc/ld.so.conf.d/x.conf:1: bad line\n"
    host = FakeSystem(commands={"ldconfig": (1, "", err)})
    job = CusparseltJob(params(), host)
    with pytest.raises(JobError) as info:
        job.cmd(["ldconfig"], "ldconfig")
    tail = info.value.tail
    assert tail.endswith("x.conf:1: bad line") and len(tail) == 2000
    assert info.value.msg == "ldconfig failed (exit 1): " + tail
    args = info.value.fail_args()
    assert args["msg"] == info.value.msg and args["output_tail"] == tail and args["cmd"] == ["ldconfig"]
