"""torch_verify run as Ansible runs it, on this machine (no GPU, no torch): the CPU paths."""

import json
import os
import sys

from ansible_collections.sparkforge.stack.tests.unit.utils.harness import COLLECTIONS, run_module


def _stand_in_torch(tmp_path):
    """A stand-in for a CUDA torch build on a machine whose GPU is unreachable (the boundary we lack here)."""
    pkg = tmp_path / "stand_in" / "torch"
    (pkg / "backends").mkdir(parents=True)
    (pkg / "__init__.py").write_text("__version__ = '2.11.0+cu130'\nfrom . import backends, version, cuda\n")
    (pkg / "version.py").write_text("cuda = '13.0'\n")
    (pkg / "cuda.py").write_text("def is_available():\n    return False\ndef device_count():\n    return 0\n")
    (pkg / "backends" / "__init__.py").write_text("")
    return str(tmp_path / "stand_in")


def test_no_torch_fails_after_writing_the_report(tmp_path, manifest):
    out = tmp_path / "reports"
    args = {"python": sys.executable, "report_dir": str(out), "host_label": "cpu-box",
            "platforms": manifest["sparkforge_gpu_platforms"]}
    result, rc = run_module("torch_verify", args, env={"PYTHONPATH": COLLECTIONS})
    assert rc != 0 and result["failed"]
    assert result["status"] == "no_torch" and "torch cannot be imported" in result["msg"]
    assert sorted(os.listdir(str(out))) == ["verify.json", "verify.md", "verify.png"]
    assert json.load(open(str(out / "verify.json")))["status"] == "no_torch"


def test_no_gpu_result_without_failing(tmp_path):
    args = {"python": sys.executable, "report_dir": str(tmp_path / "r"), "fail_on_failure": False}
    # The stand-in torch reaches the check through the module's env (the plan's), never through the host's
    # PYTHONPATH (_common/run_env.py: a host's PYTHONPATH holding a torch must not pass for the venv's).
    stand_in = _stand_in_torch(tmp_path)
    from_host, rc = run_module("torch_verify", args, env={"PYTHONPATH": os.pathsep.join([COLLECTIONS, stand_in])})
    assert from_host["status"] == "no_torch", from_host
    args["env"] = {"PYTHONPATH": stand_in}
    result, rc = run_module("torch_verify", args, env={"PYTHONPATH": COLLECTIONS})
    assert rc == 0, result
    assert result["status"] == "no_gpu" and result["passed"] is False and result["changed"] is True
    assert "sees no GPU" in result["failures"][0]
    assert result["versions"]["torch"] == "2.11.0+cu130"
    assert result["png_renderer"] in ("builtin", "matplotlib")
    md = open(result["report_files"]["markdown"]).read()
    assert "No verification ran" in md


def test_check_mode_writes_nothing_and_names_the_report_it_would_write(tmp_path):
    out = tmp_path / "r"
    env = {"PYTHONPATH": os.pathsep.join([COLLECTIONS, _stand_in_torch(tmp_path)])}
    result, rc = run_module("torch_verify", {"python": sys.executable, "report_dir": str(out), "fail_on_failure": False},
                            check_mode=True, env=env)
    # A real run writes a new report every time: check mode predicts that change, and writes nothing.
    assert rc == 0 and result["changed"] is True and not out.exists()
    assert result["report_files"] == {"json": str(out / "verify.json"), "markdown": str(out / "verify.md"),
                                      "png": str(out / "verify.png")}
    result, rc = run_module("torch_verify", {"python": sys.executable, "fail_on_failure": False},
                            check_mode=True, env=env)
    assert rc == 0 and result["changed"] is False and result["report_files"] == {}


def test_bad_arguments(tmp_path):
    result, rc = run_module("torch_verify", {"python": str(tmp_path / "nope" / "python")})
    assert rc != 0 and "does not exist" in result["msg"]
    result, rc = run_module("torch_verify", {"python": sys.executable, "checks": ["gemm", "bogus"]})
    assert rc != 0 and "bogus" in result["msg"]
    result, rc = run_module("torch_verify", {"python": sys.executable, "bench_scale": 0})
    assert rc != 0 and "bench_scale" in result["msg"]
