"""plan() against the real playbooks/spark.yml on this controller.

The preflight role publishes ``sparkforge_plan`` and fails hosts it cannot
provision; an x86_64 machine without an NVIDIA GPU (the CI controller) is one,
so plan() must come back with that host failed, with readable problems, and no
traceback. Runs once playbooks/spark.yml exists in the checkout.
"""

import os

import pytest

from sparkforge import api

SPARK = os.path.join(api.project_root(), "playbooks", "spark.yml")


def _has_gpu():
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/proc/driver/nvidia/version")


@pytest.mark.skipif(not os.path.isfile(SPARK), reason="playbooks/spark.yml is not in this checkout")
@pytest.mark.skipif(_has_gpu(), reason="this controller has an NVIDIA GPU: preflight would accept it")
def test_plan_of_spark_playbook_on_a_gpu_less_controller(tmp_path):
    events = []
    result = api.plan("localhost,", extravars={"ansible_connection": "local",
                                               "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                                               "sparkforge_reports_dir": str(tmp_path / "reports")},
                      on_event=events.append)
    assert result.error is None, result.error
    assert list(result.hosts) == ["localhost"]
    host = result.hosts["localhost"]
    assert host.state == "failed" and host.ready is False
    # The structured problems of the preflight, each with its check and what to do.
    checks = [p["check"] for p in host.plan_problems]
    assert "gpu" in checks
    assert all(p["message"].strip() for p in host.plan_problems)
    # The preflight's summary failure quotes them all, so problems lists each once.
    assert host.problems == [p["message"] for p in host.plan_problems]
    assert host.failures[0].task.startswith("Stop here when the host is not ready")
    assert isinstance(host.plan, dict) and host.plan.get("steps")
    assert result.exit_code() == api.EXIT_FAILED
    tasks = [e for e in events if e.kind == "task"]
    assert any(e.role == "preflight" for e in tasks) and events[-1].kind == "stats"
