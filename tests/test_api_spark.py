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
                                               "sparkforge_reports_dir": str(tmp_path / "reports")},
                      on_event=events.append)
    assert result.error is None, result.error
    assert list(result.hosts) == ["localhost"]
    host = result.hosts["localhost"]
    assert host.state == "failed"
    assert host.problems and all(p.strip() for p in host.problems)
    assert result.exit_code() == api.EXIT_FAILED
    assert any(e.kind == "task" for e in events) and events[-1].kind == "stats"
