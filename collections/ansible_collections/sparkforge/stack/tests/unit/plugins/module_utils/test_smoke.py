# -*- coding: utf-8 -*-
"""smoke: each GPU package's smoke test, as data of the matrix, run by the venv's Python.

No GPU here: torch is a stand-in at that boundary (a package named torch whose ``cuda.is_available()``
answers as a CPU host's torch does, or as a GPU host's for the failure path); the runner itself, the
JSON it prints and the messages are the real ones.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import os
import sys

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import LocalSystem
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import ml_packages as mp
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import smoke
from ansible_collections.sparkforge.stack.tests.unit.utils.harness import shared_manifest


SPEC = {"import": "json", "op": "one op", "code": "got = want = None\n", "rtol": 1e-5, "atol": 1e-6}


def _torch(tmp_path, gpu):
    root = tmp_path / ("gpu" if gpu else "cpu")
    (root / "torch").mkdir(parents=True, exist_ok=True)
    (root / "torch" / "__init__.py").write_text(
        "__version__ = '2.11.0+stand-in'\nclass cuda:\n    @staticmethod\n    def is_available():\n        return %s\n"
        % gpu)
    return {"PYTHONPATH": str(root)}


def test_every_smoke_test_of_the_matrix_is_valid_and_covers_the_gpu_builds():
    matrix = copy.deepcopy(shared_manifest()["sparkforge_ml_packages"])
    tested = dict((name, smoke.validate(name, entry["smoke"])) for name, entry in matrix.items() if entry.get("smoke"))
    assert {"deepspeed", "causal-conv1d", "xformers", "flash-attn", "bitsandbytes"} <= set(tested)
    # Every GPU entry (a source build with gpu_build, a prebuilt GPU wheel) proves it runs once installed.
    gpu = set(name for name, entry in matrix.items() if entry.get("gpu_build") or entry.get("gpu_wheel"))
    assert gpu and gpu <= set(tested), sorted(gpu - set(tested))
    assert "torch.optim.AdamW" in tested["deepspeed"]["code"] and "FusedAdam" in tested["deepspeed"]["op"]


@pytest.mark.parametrize("bad, message", [
    ("run it", "x: smoke must be a mapping"),
    (dict(SPEC, code=""), "x: smoke needs import, op, code, rtol, atol; missing: code"),
    (dict(SPEC, extra=1), "unknown: extra"),
    (dict(SPEC, atol="1e-6"), "x: smoke.atol must be a number >= 0, got '1e-6'"),
    (dict(SPEC, code="got = (\n"), "x: smoke.code is not Python"),
])
def test_bad_smoke_entries_are_refused_by_the_matrix(bad, message):
    matrix = {"x": {"methods": [{"method": "wheel"}], "smoke": bad}}
    with pytest.raises(mp.MatrixError, match=message.replace("(", r"\(").replace(")", r"\)")):
        mp.resolve(matrix, {}, {}, {"arch": "x86_64", "platform_class": "generic", "cuda_major": 13}, packages=["x"])


def test_skipped_with_the_reason_where_torch_sees_no_gpu(tmp_path):
    result = smoke.run(LocalSystem(), sys.executable, "deepspeed", dict(SPEC, op="FusedAdam"), _torch(tmp_path, False))
    assert result["status"] == "skipped"
    assert smoke.message(result) == (
        "smoke test of deepspeed (FusedAdam) skipped: torch 2.11.0+stand-in in the venv sees no CUDA device "
        "(torch.cuda.is_available() is False): no GPU to run FusedAdam on")


def test_a_failure_names_the_package_the_op_and_the_error(tmp_path):
    spec = dict(SPEC, op="FusedAdam", **{"import": "sparkforge_no_such_module"})
    result = smoke.run(LocalSystem(), sys.executable, "deepspeed", spec, _torch(tmp_path, True))
    assert result["status"] == "failed"
    assert smoke.message(result) == (
        "smoke test of deepspeed (FusedAdam) failed: import sparkforge_no_such_module: ModuleNotFoundError: "
        "No module named 'sparkforge_no_such_module'")
    # The op itself raising (here: the stand-in has no tensors) is a failure naming the error.
    result = smoke.run(LocalSystem(), sys.executable, "deepspeed", dict(SPEC, code="got = torch.randn(3)\n"),
                       _torch(tmp_path, True))
    assert result["status"] == "failed" and result["error"].startswith("AttributeError: ")
    broken = smoke.run(LocalSystem(), os.path.join(str(tmp_path), "no-python"), "deepspeed", SPEC)
    assert broken["status"] == "failed" and "the smoke test's Python exited 127" in broken["error"]


def test_verify_runs_the_smoke_test_of_each_installed_package_only(tmp_path):
    from ansible_collections.sparkforge.stack.plugins.module_utils.verify.torch_verify_job import ARGUMENT_SPEC, VerifyJob

    site = tmp_path / "site-packages"
    (site / "torch" / "lib").mkdir(parents=True)
    (site / "deepspeed-0.19.8.dist-info").mkdir()
    params = dict((name, spec.get("default")) for name, spec in ARGUMENT_SPEC.items())
    params.update(python=sys.executable, smoke_matrix=copy.deepcopy(shared_manifest()["sparkforge_ml_packages"]))
    results = VerifyJob(params, None).smoke_tests({"torch_lib_dir": str(site / "torch" / "lib")},
                                                  _torch(tmp_path, False))
    # causal-conv1d has a smoke test too, but is not installed: only deepspeed's runs, skipped without a GPU.
    assert [(r["package"], r["status"]) for r in results] == [("deepspeed", "skipped")]
    assert "sees no CUDA device" in results[0]["reason"]
