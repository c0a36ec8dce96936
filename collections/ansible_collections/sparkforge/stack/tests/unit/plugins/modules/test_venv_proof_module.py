"""venv_proof beyond the venv (issue 42): verify's report and the runtime profile files, read from disk by the
module itself (run for real on this machine; no venv: nothing of the venv is compared for components [])."""

import json

from ansible_collections.sparkforge.stack.tests.unit.utils.harness import run_module

from ansible_collections.sparkforge.stack.plugins.module_utils.host import env_file

ENV = {"TORCH_CUDA_ARCH_LIST": "9.0", "CUDA_MODULE_LOADING": "LAZY"}


def proof(tmp_path, **extra):
    args = dict({"venv": str(tmp_path / "venv"), "plan": {}, "components": []}, **extra)
    result, rc = run_module("venv_proof", args)
    assert rc == 0 and not result["changed"], result
    return result


def test_verify_report_on_disk_passed_failed_not_json_or_missing(tmp_path):
    report = tmp_path / "verify.json"
    report.write_text(json.dumps({"passed": True, "failures": []}))
    assert proof(tmp_path, verdict_report=str(report))["state"] == "provisioned"
    report.write_text(json.dumps({"passed": False, "failures": ["matmul: wrong result"]}))
    assert proof(tmp_path, verdict_report=str(report))["error"] == "verify: failed (matmul: wrong result)"
    report.write_text('{"passed": tr')
    assert proof(tmp_path, verdict_report=str(report))["error"].startswith(
        "verify: failed (%s is not a JSON report" % report)
    for missing in ("", str(tmp_path / "none.json")):
        result = proof(tmp_path, verdict_report=missing)
        assert (result["state"], result["error"]) == (
            "partial", "verify: no report, though verify is a component of the run"), result


def test_profile_files_proven_recorded_then_an_edit_is_drift(tmp_path):
    profile = tmp_path / "sparkforge.sh"
    profile.write_text(env_file.render(ENV, comment="Ansible managed"))
    first = proof(tmp_path, runtime_env={"variables": ENV, "files": [str(profile)]})
    assert first["state"] == "provisioned" and first["profile"] == {str(profile): ENV}, first
    record = tmp_path / "provisioned.json"
    record.write_text(json.dumps({"compared": first["compared"], "profile": first["profile"]}))
    unchanged, rc = run_module("venv_proof", {"venv": str(tmp_path / "venv"), "since": str(record)})
    assert rc == 0 and unchanged["state"] == "unchanged", unchanged
    profile.write_text(env_file.render(dict(ENV, TORCH_CUDA_ARCH_LIST="8.0")))
    drifted, rc = run_module("venv_proof", {"venv": str(tmp_path / "venv"), "since": str(record)})
    assert rc == 0 and drifted["state"] == "drifted", drifted
    assert drifted["error"] == "%s edited since the last provisioning: TORCH_CUDA_ARCH_LIST=8.0, last proof 9.0" \
        % profile
    partial = proof(tmp_path, runtime_env={"variables": ENV, "files": [str(profile), str(tmp_path / "gone.sh")]})
    # One entry per file, in path order.
    assert partial["error"] == ("runtime_env: %s is missing; runtime_env: %s: TORCH_CUDA_ARCH_LIST=8.0, plan 9.0"
                                % (tmp_path / "gone.sh", profile)), partial
