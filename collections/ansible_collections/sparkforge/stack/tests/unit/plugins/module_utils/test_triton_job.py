# -*- coding: utf-8 -*-
"""triton_llvm_build's job (module_utils/build/triton_job.py) planned on a stand-in host
(fake_system.FakeSystem): what it would build and why (LLVM only when its stamp does not match,
nothing when the wheel with the key is published), and the refusals before anything is built.
The builds themselves are tests/unit/plugins/modules/test_build_jobs.py's, on the fixture LLVM and Triton repos."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import sys

import pytest

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible_collections.sparkforge.stack.plugins.module_utils.build import triton_build as tb
from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import sha256_file
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import JobError
from ansible_collections.sparkforge.stack.plugins.module_utils.build.triton_job import TritonLlvmJob
from ansible_collections.sparkforge.stack.plugins.modules import triton_llvm_build

sys.path.insert(0, os.path.dirname(__file__))
from fake_system import FakeSystem  # noqa: E402  pylint: disable=wrong-import-position

TRITON_COMMIT = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
LLVM_COMMIT = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"


@pytest.fixture
def host(tmp_path):
    """A Triton 3.6.0 source tree pinning LLVM_COMMIT, a build python, a ptxas; the stand-in answers
    git, the compiler, the python and ptxas the way a host with CUDA 13 does."""
    src = tmp_path / "triton"
    (src / "python" / "triton").mkdir(parents=True)
    (src / "python" / "triton" / "__init__.py").write_text("__version__ = '3.6.0'\n")
    (src / "cmake").mkdir()
    (src / "cmake" / "llvm-hash.txt").write_text(LLVM_COMMIT + "\n")
    ptxas = tmp_path / "ptxas"
    ptxas.write_text("")
    ptxas.chmod(0o755)
    python = tmp_path / "python3"
    python.write_text("")
    system = FakeSystem(commands={
        ("git", "rev-parse", "HEAD"): (0, TRITON_COMMIT + "\n", ""),
        ("git", "diff", "HEAD"): (0, "", ""),
        ("c++", "--version"): (0, "c++ (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0\n", ""),
        str(python): (0, "3.12.3 cpython-312 aarch64\n", ""),
        (str(ptxas), "--version"): (0, "ptxas: NVIDIA (R) Ptx optimizing assembler\nCuda compilation tools, "
                                       "release 13.0, V13.0.88\n", ""),
    })
    system.dirs = {"triton_src": str(src), "ptxas_path": str(ptxas), "python": str(python),
                   "work_dir": str(tmp_path / "work"), "wheel_dir": str(tmp_path / "wheels")}
    return system


def params(system, **more):
    args = dict(system.dirs, llvm_repo="https://github.com/llvm/llvm-project.git", jobs="2")
    args.update(more)
    result = ArgumentSpecValidator(triton_llvm_build.ARGUMENT_SPEC,
                                   mutually_exclusive=triton_llvm_build.MUTUALLY_EXCLUSIVE).validate(args)
    assert not result.error_messages, result.error_messages
    return result.validated_parameters


def test_a_fresh_host_plans_llvm_and_triton_from_the_probes_only(host):
    res = TritonLlvmJob(params(host), host, check_mode=True).run(diff=True)
    assert res["changed"] is True and res["built"] == [] and res["wheel"] is None
    plan = res["plan"]
    assert plan["triton"]["version"] == "3.6.0" and plan["llvm"]["commit"] == LLVM_COMMIT
    assert plan["ptxas"] == "Cuda compilation tools, release 13.0, V13.0.88"
    assert plan["llvm"]["build"] is True and plan["llvm"]["why"].startswith("no LLVM stamp in ")
    assert res["diff"] == {"before": "triton wheel: (no wheel with this key)\n",
                           "after": "triton wheel: %s\n" % res["cache_key"]}
    # Probes only; check mode takes no lock and writes nothing.
    assert not any(cmd[0] in ("cmake", "ninja") or "pip" in cmd for cmd in host.ran)
    assert not os.path.exists(host.dirs["work_dir"]) and not os.path.exists(host.dirs["wheel_dir"])


def test_the_plan_lists_each_build_with_its_reason(host):
    plan = TritonLlvmJob(params(host), host).plan()
    prefix = tb.default_llvm_prefix(host.dirs["work_dir"], LLVM_COMMIT)
    assert plan.changes == ["build llvm: no LLVM stamp in %s" % prefix,
                            "build triton: no published wheel has cache key %s" % plan.result["cache_key"][:16]]


def test_an_llvm_stamp_with_the_key_leaves_llvm_alone(host):
    first = TritonLlvmJob(params(host), host).plan()
    prefix = first.result["llvm_prefix"]
    os.makedirs(prefix)
    with open(os.path.join(prefix, tb.LLVM_STAMP), "w") as handle:
        json.dump({"cache_key": first.result["llvm_cache_key"]}, handle)
    plan = TritonLlvmJob(params(host), host).plan()
    assert plan.changes == ["build triton: no published wheel has cache key %s" % plan.result["cache_key"][:16]]
    assert plan.result["plan"]["llvm"]["why"] == "LLVM %s is already built in %s" % (LLVM_COMMIT[:12], prefix)


def test_a_published_wheel_with_the_key_means_nothing_to_do(host):
    key = TritonLlvmJob(params(host), host).plan().result["cache_key"]
    os.makedirs(host.dirs["wheel_dir"])
    wheel = os.path.join(host.dirs["wheel_dir"], "triton-3.6.0-cp312-cp312-linux_aarch64.whl")
    with open(wheel, "wb") as handle:
        handle.write(b"a wheel's bytes")
    with open(tb.record_path(host.dirs["wheel_dir"], os.path.basename(wheel)), "w") as handle:
        json.dump({"cache_key": key, "wheel": os.path.basename(wheel), "sha256": sha256_file(wheel)}, handle)
    res = TritonLlvmJob(params(host), host).run()
    assert res["changed"] is False and res["wheel"] == wheel and res["built"] == []
    assert res["plan"]["triton"]["why"] == "%s is up to date (same cache key)" % os.path.basename(wheel)


def test_a_wrong_llvm_pin_is_refused_in_the_plan(host):
    with pytest.raises(JobError) as info:
        TritonLlvmJob(params(host, llvm_commit="c" * 40), host).run()
    assert info.value.result["phase"] == "plan"
    assert "pins LLVM %s in cmake/llvm-hash.txt, but llvm_commit is %s" % (LLVM_COMMIT, "c" * 40) in info.value.msg
    assert os.listdir(host.dirs["work_dir"]) == [".build.lock"] and not os.path.exists(host.dirs["wheel_dir"])


def test_ccache_asked_for_on_a_host_without_it_is_refused(host):
    with pytest.raises(JobError, match="ccache: true but there is no ccache in PATH"):
        TritonLlvmJob(params(host, ccache=True), host, check_mode=True).run()
    assert host.ran == []


def test_a_failing_git_carries_its_output(host):
    host.commands[("git", "rev-parse", "HEAD")] = (128, "", "fatal: not a git repository (or any of the parent "
                                                            "directories): .git\n")
    with pytest.raises(JobError) as info:
        TritonLlvmJob(params(host), host, check_mode=True).run()
    assert info.value.tail == "fatal: not a git repository (or any of the parent directories): .git"
    assert info.value.result["phase"] == "plan" and info.value.msg.startswith("git rev-parse HEAD failed in ")


def test_a_work_dir_of_the_users_is_refused_before_its_lock_file_is_made(host):
    """Issue 52: the build cleans its checkouts under work_dir/src and removes work_dir/dist/triton-<key>; a work_dir
    holding something and no build's lock file (.build.lock) is refused before the lock file is made in it."""
    work = host.dirs["work_dir"]
    os.makedirs(os.path.join(work, "dist"))
    for check in (True, False):
        with pytest.raises(JobError) as refused:
            TritonLlvmJob(params(host), host, check_mode=check).run()
        assert refused.value.msg.startswith("work_dir (triton_work_dir)=%s is a directory sparkforge did not make"
                                            % work) and "nothing was changed" in refused.value.msg, "O11"
    assert os.listdir(work) == ["dist"], "the refused run made its lock file in the user's directory"
