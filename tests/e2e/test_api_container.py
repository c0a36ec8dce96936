"""sparkforge.api against a real container host of the molecule test bed.

The test starts its own container from the shared amd64 image (the `hopper-amd64`
stand-in: Debian 12, fake nvidia-smi reporting an H100), with the test bed's
settings (molecule/shared/inventory), prepares it with molecule/shared/prepare.yml
through provision(), then runs plan() with the real playbooks/spark.yml over the
podman connection. Skipped where podman or the image (molecule/shared/build-images.sh)
is missing.
"""

import os
import uuid

import pytest
import yaml

from helpers import CONNECTION, image_present, remove_containers, start_container
from sparkforge import api

ROOT = api.project_root()
SHARED = os.path.join(ROOT, "molecule", "shared")


pytestmark = [
    pytest.mark.skipif(not image_present(), reason="podman or the test bed's amd64 image missing (molecule/shared/build-images.sh)"),
    pytest.mark.skipif(not os.path.isfile(os.path.join(ROOT, "playbooks", "spark.yml")),
                       reason="playbooks/spark.yml is not in this checkout"),
]


def _load(path):
    with open(path) as handle:
        return yaml.safe_load(handle) or {}


@pytest.fixture(scope="module")
def container_inventory(tmp_path_factory):
    name = "sparkforge-api-test-%s" % uuid.uuid4().hex[:8]
    start_container(name)
    try:
        host_vars = dict(_load(os.path.join(SHARED, "inventory", "group_vars", "all.yml")))
        host_vars.update(_load(os.path.join(SHARED, "inventory", "host_vars", "hopper-amd64.yml")))
        host_vars.update({"ansible_connection": CONNECTION, "ansible_host": name})
        path = tmp_path_factory.mktemp("api-container") / "inventory.yml"
        path.write_text(yaml.safe_dump({"all": {"hosts": {"api-hopper": host_vars}}}))
        yield str(path)
    finally:
        remove_containers([name])


def test_prepare_then_plan_on_a_container_host(container_inventory, tmp_path):
    prepared = api.provision(container_inventory, playbook=os.path.join(SHARED, "prepare.yml"))
    assert prepared.summary() == {"api-hopper": "changed"}, prepared.to_dict()
    assert prepared.hosts["api-hopper"].changed == 3 and prepared.exit_code() == 0

    events = []
    # The container reaches neither NVIDIA's servers nor GitHub: with the sources probe the host would
    # (rightly) not be ready. This test is about the API's plumbing; collections/ansible_collections/sparkforge/stack/tests/unit/plugins/modules/test_sources_preflight.py
    # covers the probe.
    result = api.plan(container_inventory, extravars={"sparkforge_reports_dir": str(tmp_path),
                                                      "sparkforge_probe_sources": False},
                      on_event=events.append)
    assert result.error is None, result.error
    host = result.hosts["api-hopper"]
    assert host.state == "ok", host.to_dict()
    assert host.ready is True and host.plan_problems == [] and host.problems == []
    assert host.changed == 0 and result.exit_code() == 0
    assert host.plan["compute_capabilities"] == ["9.0"]
    assert host.plan["steps"]
    tasks = [e.task for e in events if e.kind == "task" and e.role == "preflight"]
    assert "Read the host, check it and plan the work" in tasks
    oks = [e for e in events if e.kind == "host" and e.host == "api-hopper"]
    assert oks and all(e.state in ("ok", "skipped") for e in oks)
