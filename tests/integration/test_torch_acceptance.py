"""PyTorch's own tests after a source build: sparkforge.stack.torch_acceptance.

The PyTorch-shaped fixture's source tree has a test/run_test.py with the real runner's options
(-i, -x, -k, --continue-through-error) and suites that run through the real unittest and pytest,
so the module parses their real output. FIXTURE_ACCEPTANCE picks what the suites do: all pass,
some fail, an error, a suite killed by SIGSEGV, a suite that outlives the time limit, a suite that
cannot import. The "installed wheel" the suites import is the fixture's torch package, put on
PYTHONPATH (what pip would install from the fixture wheel, without its CUDA objects).
The role-level test (test_pytorch_roles.py) runs it after a real source build of the fixture.
"""

import json
import os
import shutil
import sys

import pytest

from helpers import REPO, load_manifest, run_module

sys.path.insert(0, os.path.join(REPO, "collections"))
from ansible_collections.sparkforge.stack.plugins.module_utils.verify import torch_acceptance as ta  # noqa: E402

SRC = os.path.join(REPO, "tests", "fixtures", "pytorch", "src")
ALL = ["test_cuda", "test_linalg", "test_nn", "test_sparse_semi_structured", "test_transformers"]


@pytest.fixture
def tree(tmp_path):
    """A copy of the fixture source tree, the installed torch it imports, and a build manifest."""
    src = tmp_path / "src"
    shutil.copytree(SRC, src, ignore=shutil.ignore_patterns("build", "__pycache__", "*.egg-info"))
    site = tmp_path / "site"
    shutil.copytree(os.path.join(SRC, "torch"), site / "torch")
    (site / "torch" / "version.py").write_text('__version__ = "2.12.0"\n')
    manifest = tmp_path / "torch-2.12.0-cp311-cp311-linux_x86_64.whl.manifest.json"
    manifest.write_text(json.dumps({"sha256": "ab" * 32, "torch_version": "2.12.0"}))
    return {"src": str(src), "site": str(site), "manifest": str(manifest), "tmp": tmp_path}


def data(**releases):
    d = dict(load_manifest()["sparkforge_torch_acceptance"])
    d["suites"] = ALL
    if releases:
        d["releases"] = releases
    return d


def args(tree, modes="", **more):
    a = {"source_dir": tree["src"], "python": sys.executable, "version": "2.12.0", "platform_class": "hopper",
         "data": data(), "manifest": tree["manifest"], "log_dir": str(tree["tmp"] / "logs"),
         "env": {"PYTHONPATH": tree["site"], "FIXTURE_ACCEPTANCE": modes}, "timeout": 60}
    a.update(more)
    return a


def suite(result, name):
    return next(s for s in result["suites"] if s["name"] == name)


def test_all_pass_is_recorded_in_the_manifest_and_a_rerun_reuses_it(tree):
    result, rc = run_module("torch_acceptance", args(tree))
    assert rc == 0, result
    assert result["changed"] and not result["reused"]
    assert [s["state"] for s in result["suites"]] == ["passed"] * 5, result["suites"]
    # unittest: 6 + 5 tests (one skipped, one expected failure); pytest: 3 suites of 5 (one skipped each).
    assert result["counts"] == {"passed": 5 + 4 + 4 * 3, "failed": 0, "errors": 0, "skipped": 1 + 3,
                                "xfailed": 1, "xpassed": 0}, result["counts"]
    assert result["verdict"]["within_budget"] and result["verdict"]["counted_failures"] == 0
    with open(tree["manifest"]) as handle:
        recorded = json.load(handle)["acceptance"]
    assert recorded["verdict"]["within_budget"] and recorded["counts"] == result["counts"]
    assert os.path.isfile(result["log"]) and "Ran 6 tests" in open(result["log"]).read()

    again, rc = run_module("torch_acceptance", args(tree))
    assert rc == 0 and not again["changed"] and again["reused"], again
    assert again["counts"] == result["counts"]


def test_failures_over_the_budget_fail_with_their_names_and_within_it_pass(tree):
    before = open(tree["manifest"]).read()
    result, rc = run_module("torch_acceptance", args(tree, "test_nn=fail,test_cuda=error"))
    assert rc != 0 and result["failed"], result
    assert "over budget" in result["msg"] and "test_nn.py::TestNn::test_sdpa_math_backend" in result["msg"]
    assert suite(result, "test_nn")["failed_tests"] == ["test_nn.py::TestNn::test_sdpa_math_backend",
                                                        "test_nn.py::TestNn::test_conv_other"]
    assert suite(result, "test_nn")["counts"]["failed"] == 2
    assert suite(result, "test_cuda")["error_tests"] == ["TestCuda.test_events"]
    assert suite(result, "test_cuda")["state"] == "failed"
    assert result["verdict"]["counted_failures"] == 3 and result["verdict"]["max_failed"] == 0
    # The verdict is in the manifest too (what the fleet publish and the verify report read).
    after = json.load(open(tree["manifest"]))
    assert after["acceptance"]["verdict"]["within_budget"] is False and before != json.dumps(after)

    # The same run judged with a budget of 3 (no rerun: the recorded counts are judged again).
    ok, rc = run_module("torch_acceptance", args(tree, "test_nn=fail,test_cuda=error", max_failed=3))
    assert rc == 0 and ok["reused"] and ok["verdict"]["within_budget"], ok


def test_a_pytest_setup_error_is_an_error_not_a_failure(tree):
    result, rc = run_module("torch_acceptance", args(tree, "test_sparse_semi_structured=error",
                                                     suites=["test_sparse_semi_structured"], max_failed=1))
    assert rc == 0, result
    s = result["suites"][0]
    assert s["counts"]["errors"] == 1 and s["counts"]["failed"] == 0 and s["counts"]["passed"] == 3, s
    assert s["error_tests"] == ["test_sparse_semi_structured.py::TestSparse_semi_structured::test_sdpa_flash"]


def test_a_suite_killed_by_a_signal_and_one_past_the_time_limit_count_as_failures(tree):
    result, rc = run_module("torch_acceptance", args(tree, "test_transformers=signal,test_linalg=timeout",
                                                     suites=["test_linalg", "test_transformers", "test_nn"],
                                                     timeout=8))
    assert rc != 0, result
    died = suite(result, "test_transformers")
    assert died["state"] == "signal" and died["signal"] == "SIGSEGV", died
    slow = suite(result, "test_linalg")
    assert slow["state"] == "timeout" and slow["timed_out"] and slow["seconds"] < 30, slow
    assert suite(result, "test_nn")["state"] == "passed"
    broken = result["verdict"]["broken_suites"]
    assert any("test_transformers (suite ended by SIGSEGV)" == b for b in broken), broken
    assert any(b.startswith("test_linalg (suite timed out") for b in broken), broken
    assert "test_transformers (suite ended by SIGSEGV)" in result["msg"]


def test_a_suite_that_cannot_import_is_a_crash(tree):
    result, rc = run_module("torch_acceptance", args(tree, "test_cuda=crash", suites=["test_cuda"]))
    assert rc != 0
    assert result["suites"][0]["state"] == "crashed", result["suites"]
    assert "before any test runner reported" in result["msg"]


def test_exclusions_per_class_from_the_data(tree):
    releases = {"default": {"max_failed": 0},
                "2.12": {"max_failed": 0, "exclude": {
                    "all": {"tests": ["test_nn.py::TestNn::test_conv_*"]},
                    "spark": {"suites": ["test_transformers"], "tests": ["test_nn.py::*sdpa*"]}}}}
    a = args(tree, "test_nn=fail,test_transformers=signal", data=data(**releases), platform_class="spark")
    result, rc = run_module("torch_acceptance", a)
    assert rc == 0, result
    assert result["policy"]["entry"] == "2.12" and result["policy"]["excluded_suites"] == ["test_transformers"]
    assert "test_transformers" not in [s["name"] for s in result["suites"]]
    assert sorted(result["verdict"]["excused"]) == ["test_nn.py::TestNn::test_conv_other",
                                                    "test_nn.py::TestNn::test_sdpa_math_backend"]
    # On another class only the `all` exclusions apply: the SIGSEGV suite runs and counts.
    result, rc = run_module("torch_acceptance", dict(a, platform_class="hopper"))
    assert rc != 0 and result["verdict"]["counted_failures"] == 2, result["verdict"]


def test_check_mode_says_what_would_run_and_writes_nothing(tree):
    before = open(tree["manifest"]).read()
    result, rc = run_module("torch_acceptance", args(tree), check_mode=True)
    assert rc == 0 and result["changed"] and result["summary"].startswith("would run test_cuda"), result
    assert open(tree["manifest"]).read() == before
    assert not os.path.exists(tree["tmp"] / "logs")


@pytest.mark.parametrize("change,message", [
    ({"source_dir": "/nonexistent"}, "source_dir must be the PyTorch source tree"),
    ({"data": {"suites": ALL, "releases": {"2.9": {"max_failed": 1}}}}, "no entry for torch 2.12.0"),
    ({"suites": ["test_cuda; rm -rf /"]}, "is not a run_test.py test name"),
    ({"suites": []}, "no suites to run"),
    ({"max_failed": -1}, "max_failed must be 0 or more"),
    ({"python": "/nonexistent/python"}, "is not an executable interpreter"),
])
def test_bad_input_fails_clearly_and_changes_nothing(tree, change, message):
    before = open(tree["manifest"]).read()
    result, rc = run_module("torch_acceptance", dict(args(tree), **change))
    assert rc != 0 and message in result["msg"], result
    assert open(tree["manifest"]).read() == before
    assert not os.path.exists(tree["tmp"] / "logs")


def test_parser_on_the_runners_own_lines():
    text = "\n".join([
        "FAIL: test_x (__main__.TestFoo)",
        "ERROR: test_y (__main__.TestFoo.test_y)",
        "Ran 10 tests in 1.234s",
        "FAILED (failures=1, errors=1, skipped=2, expected failures=1)",
        "FAILED test_nn.py::TestNN::test_a - AssertionError: x",
        "===== 1 failed, 7 passed, 2 skipped, 3 warnings in 12.50s (0:00:12) =====",
        "test_jit failed! Received signal: SIGSEGV",
        "test_decomp 1/1 failed!",
    ])
    parsed = ta.parse_output(text)
    assert parsed["counts"] == {"passed": 12, "failed": 2, "errors": 1, "skipped": 4, "xfailed": 1, "xpassed": 0}
    assert parsed["failed_tests"] == ["TestFoo.test_x", "test_nn.py::TestNN::test_a"]
    assert parsed["error_tests"] == ["TestFoo.test_y"]
    assert parsed["suites"] == [{"suite": "test_jit", "signal": "SIGSEGV"}, {"suite": "test_decomp", "signal": None}]
    assert parsed["summaries"] == 2


def test_the_manifest_data_is_well_formed():
    d = load_manifest()["sparkforge_torch_acceptance"]
    suites, errors = ta.normalise_suites(d["suites"])
    assert not errors and {s["name"] for s in suites} >= {"test_cuda", "test_transformers", "test_sparse_semi_structured"}
    for version in load_manifest()["sparkforge_torch_releases"]:
        policy = ta.policy_for(d, version, "spark")
        assert policy["max_failed"] >= 0


def test_the_verify_report_shows_the_result_and_over_budget_fails_the_host(tree):
    from ansible_collections.sparkforge.stack.plugins.module_utils.verify import torch_checks
    result, rc = run_module("torch_acceptance", args(tree, "test_nn=fail", suites=["test_nn", "test_cuda"]))
    assert rc != 0
    raw = {"status": "ok", "device": {"name": "NVIDIA H100 80GB HBM3", "capability": "9.0", "sm_count": 132,
                                      "memory_bytes": 80 * 2 ** 30},
           "arch_list": ["sm_90"], "checks": [{"name": "matmul", "status": "pass"}], "benchmarks": [],
           "versions": {"torch": "2.12.0"}}
    report = torch_checks.evaluate(raw, {}, host="h1", acceptance=result)
    assert not report["passed"] and "acceptance" in report["failed_checks"]
    assert "PyTorch's own tests after the build: 2 failures counted, budget 0" in report["failures"]
    text = torch_checks.render_markdown(report)
    assert "## PyTorch's own tests after the build (acceptance)" in text
    assert "| test_nn | - | failed | 2 | 2 | 0 | 1 |" in text
    assert "- test_nn.py::TestNn::test_conv_other" in text
    assert torch_checks.evaluate(raw, {}, host="h1")["acceptance"] is None
