# -*- coding: utf-8 -*-
"""stack_plan's job (module_utils/plan/stack_plan_job.py) on a stand-in host: the compiler it asks the
host for decides whether the host can build from source, every source URL goes to the probe the
caller passes, and bad input is refused before the host is asked anything.  The module against a
local mirror is tests/unit/plugins/modules/test_sources_preflight.py's."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import os
import sys

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import JobError
from ansible_collections.sparkforge.stack.plugins.module_utils.plan.stack_plan_job import ARCHS_READ, StackPlanJob
from ansible_collections.sparkforge.stack.tests.unit.utils.harness import shared_manifest

sys.path.insert(0, os.path.dirname(__file__))
from fake_system import FakeSystem  # noqa: E402  pylint: disable=wrong-import-position

SPARK = {"gpus": [{"index": 0, "name": "NVIDIA GB10", "compute_capability": "12.1", "sm": "sm_121",
                   "driver_version": "580.95.05", "memory_mib": 97871, "uuid": "GPU-x", "platform_class": "dgx_spark"}],
         "compute_capabilities": ["12.1"], "sm_archs": ["sm_121"], "platform_class": "dgx_spark",
         "cpu": {"arch": "aarch64", "cores": 20, "sve2": True},
         "memory": {"total_mib": 128000, "available_mib": 120000},
         "disk": {"/opt/sparkforge/build": {"measured_at": "/opt", "free_mib": 900000, "total_mib": 1900000}},
         "gpu_error": None}
HOST = {"name": "spark-1", "distribution": "Ubuntu", "distribution_version": "24.04", "python_version": "3.12.3",
        "architecture": "aarch64"}
CHECKS = {"allow_x86_64": True, "supported_distributions": [{"distribution": "Ubuntu", "versions": ["24.04"]}],
          "min_python": "3.10", "require_gpu": True, "min_driver_blackwell": "580", "min_ram_gib": 1,
          "min_ram_gib_source_build": 1, "min_disk_gib": 1, "min_disk_gib_source_build": 1,
          "build_dir": "/opt/sparkforge/build"}
MIRROR = "https://mirror.example"


def manifest():
    # A copy: the job under test is given it, as a module is given its arguments.
    return copy.deepcopy(shared_manifest())


def params(**more):
    args = {"facts": SPARK, "gather": None, "host": HOST, "platform_maps": {}, "checks": CHECKS,
            "settings": {"components": ["pytorch"], "torch_version": "latest", "torch_source": "source",
                         "cuda_arch_list": "", "ml_profile": "minimal", "dev_libraries": "auto"},
            "manifest": manifest(), "sources": {"pytorch_repo": MIRROR + "/pytorch.git", "build_index_url":
                                                MIRROR + "/simple"},
            "probe_sources": True, "probe_timeout": 5, "bundle": None}
    args.update(more)
    return args


class Mirror:
    """The probe's boundary: every URL answers (None: reachable), and each asked is recorded."""

    def __init__(self):
        self.asked = []

    def __call__(self, url, timeout):
        self.asked.append(url)
        return None


def a_host(compiler_line):
    """A host whose c++ is GCC: its --version as GCC prints it (the copyright line included)."""
    out = compiler_line + "\nCopyright (C) 2023 Free Software Foundation, Inc.\n"
    return FakeSystem(commands={("/usr/bin/c++", "--version"): (0, out, "")}, tools={"c++": "/usr/bin/c++"})


def test_a_source_build_with_a_current_compiler_is_ready_and_every_source_is_probed():
    host, mirror = a_host("c++ (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0"), Mirror()
    job = StackPlanJob(params(), host, opener=mirror)
    plan = job.plan()
    assert plan.changes == [] and plan.result["changed"] is False
    res = StackPlanJob(params(), a_host("c++ (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0"), opener=mirror).run()
    assert res["plan"]["source_build"] is True and res["can_build"] is True and res["build_problems"] == []
    assert host.ran == [["/usr/bin/c++", "--version"]]
    assert any(url.startswith(MIRROR + "/pytorch.git") for url in mirror.asked)
    assert [s["status"] for s in res["plan"]["sources"]] and all(
        s["status"] not in ("unreachable", "refused") for s in res["plan"]["sources"])


def test_an_old_compiler_means_the_host_cannot_build():
    res = StackPlanJob(params(), a_host("c++ (Ubuntu 7.5.0-3ubuntu1~18.04) 7.5.0"), opener=Mirror()).run()
    assert res["can_build"] is False
    assert [p["check"] for p in res["build_problems"]] == ["compiler"]
    assert "this host's c++ is GCC 7.5.0: install a newer one" in res["build_problems"][0]["message"]
    assert res["plan_text"][-1].startswith("cannot build from source here (only a builder of its platform class must)")


def test_bad_input_is_refused_before_the_host_is_asked():
    host, mirror = a_host("c++ 13.3.0"), Mirror()
    with pytest.raises(JobError, match="bundle needs host_dir, manifest"):
        StackPlanJob(params(bundle={"dir": "/b"}), host, opener=mirror).run()
    with pytest.raises(JobError, match="stack_plan is missing min_ram_gib$"):
        StackPlanJob(params(checks=dict((k, v) for k, v in CHECKS.items() if k != "min_ram_gib")), host,
                     opener=mirror).run()
    with pytest.raises(JobError, match="facts must be the ansible_facts.sparkforge dict"):
        StackPlanJob(params(facts={}), host, opener=mirror).run()
    assert host.ran == [] and mirror.asked == []


def test_torch_existing_the_plan_reads_the_venvs_torch_arch_list_once(tmp_path):
    """issue 45: with torch source existing the plan (not a role) reads torch.cuda.get_arch_list() on the host,
    and the plan's one list is that one, with the reason naming the venv."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    first = StackPlanJob(params(), a_host("c++ 13.3.0"), opener=Mirror()).run()["plan"]
    version, planned = first["torch"], first["arch"]
    meta = venv / "lib" / "python3.12" / "site-packages" / ("torch-%s.dist-info" % version["version"])
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: %s\n\n" % version["version"])
    python = str(venv / "bin" / "python")
    host = FakeSystem(commands={python: (0, '["sm_90", "sm_121"]\n', "")})
    settings = dict(params()["settings"], torch_source="existing", venv=str(venv))
    res = StackPlanJob(params(settings=settings), host, opener=Mirror()).run()
    assert [cmd for cmd in host.ran if cmd[0] == python] == [[python, "-c", ARCHS_READ]]
    assert res["ready"] is True, res["problems"]
    assert res["plan"]["arch"]["list"] == "9.0;12.1"
    assert "torch.cuda.get_arch_list() in %s: sm_90, sm_121" % venv in res["plan"]["arch"]["reason"]
    # A venv whose torch does not import gives no list: the plan keeps its own and says why.
    host = FakeSystem(commands={python: (1, "", "ModuleNotFoundError: No module named 'torch'")})
    res = StackPlanJob(params(settings=settings), host, opener=Mirror()).run()
    assert res["plan"]["arch"]["list"] == planned["list"]
    assert res["plan"]["arch"]["reason"] == "%s; the venv's torch's own arch list could not be read (%s -c " \
        "'%s' exited 1: ModuleNotFoundError: No module named 'torch')" % (planned["reason"], python, ARCHS_READ)
