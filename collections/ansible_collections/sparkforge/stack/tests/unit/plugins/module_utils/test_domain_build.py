# -*- coding: utf-8 -*-
"""domain_wheel_build's job (module_utils/build/domain_build.py) planned on a stand-in host: the commit
and the build python it reads make the cache key, a published wheel with that key means nothing
to do, a source that is not a checkout is refused before the host is asked anything.  The build
itself is tests/unit/plugins/modules/test_reproducible.py's."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import sys

import pytest

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import sha256_file
from ansible_collections.sparkforge.stack.plugins.module_utils.build.domain_build import DomainWheelJob
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import JobError
from ansible_collections.sparkforge.stack.plugins.modules import domain_wheel_build

sys.path.insert(0, os.path.dirname(__file__))
from fake_system import FakeSystem  # noqa: E402  pylint: disable=wrong-import-position

COMMIT = "c0ffee0000000000000000000000000000000000"


@pytest.fixture
def dirs(tmp_path):
    (tmp_path / "vision" / ".git").mkdir(parents=True)
    return {"src": str(tmp_path / "vision"), "python": str(tmp_path / "venv" / "bin" / "python"),
            "wheel_dir": str(tmp_path / "wheels")}


def params(dirs, **more):
    args = dict(dirs, name="torchvision", version="0.24.1", environment={"TORCH_CUDA_ARCH_LIST": "12.1"})
    args.update(more)
    result = ArgumentSpecValidator(domain_wheel_build.ARGUMENT_SPEC).validate(args)
    assert not result.error_messages, result.error_messages
    return result.validated_parameters


def a_host(dirs, python_id="3.12.3 aarch64 cpython-312"):
    return FakeSystem(commands={("git", "rev-parse", "HEAD"): (0, COMMIT + "\n", ""),
                                dirs["python"]: (0, python_id + "\n", "")})


def test_check_mode_plans_the_build_and_why(dirs):
    host = a_host(dirs)
    res = DomainWheelJob(params(dirs), host, check_mode=True).run()
    assert res["changed"] is True and res["wheel"] is None and res["commit"] == COMMIT
    assert res["plan"] == "would build torchvision 0.24.1 (%s): no published torchvision wheel has cache key %s" % (
        COMMIT[:12], res["cache_key"][:12])
    assert [cmd[0] for cmd in host.ran] == ["git", dirs["python"]]
    assert not os.path.exists(dirs["wheel_dir"])


def test_the_key_follows_the_build_python_and_a_published_wheel_is_reused(dirs):
    key = DomainWheelJob(params(dirs), a_host(dirs), check_mode=True).plan().result["cache_key"]
    other = DomainWheelJob(params(dirs), a_host(dirs, "3.11.9 aarch64 cpython-311"), check_mode=True).plan()
    assert other.result["cache_key"] != key
    os.makedirs(dirs["wheel_dir"])
    wheel = os.path.join(dirs["wheel_dir"], "torchvision-0.24.1-cp312-cp312-linux_aarch64.whl")
    with open(wheel, "wb") as handle:
        handle.write(b"a wheel's bytes")
    with open(wheel + ".manifest.json", "w") as handle:
        json.dump({"cache_key": key, "sha256": sha256_file(wheel)}, handle)
    plan = DomainWheelJob(params(dirs), a_host(dirs)).plan()
    assert plan.changes == [] and plan.result["wheel"] == wheel
    assert plan.result["plan"] == "%s is published with this cache key: nothing to do" % os.path.basename(wheel)


def test_a_source_that_is_not_a_checkout_is_refused_first(dirs, tmp_path):
    host = a_host(dirs)
    with pytest.raises(JobError, match="src %s is not a git checkout" % tmp_path):
        DomainWheelJob(params(dirs, src=str(tmp_path)), host).run()
    assert host.ran == []
