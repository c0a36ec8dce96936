"""The guide's preflight check ("Adding a preflight check" in docs/guides/plays-modules-and-roles.md), run as
its text gives it: one method, its name added to StackPlanJob.STEPS, and its problem is the plan's (issue 55
item 2).  The shape of the steps themselves is the collection's tests/unit/plugins/module_utils/test_plan_steps.py."""

import copy
import re

import readme
from helpers import shared_manifest

from ansible_collections.sparkforge.stack.plugins.module_utils.plan.stack_plan_job import StackPlanJob

GUIDE = "plays-modules-and-roles.md"
FACTS = {"gpus": [{"index": 0, "name": "NVIDIA GB10", "compute_capability": "12.1", "sm": "sm_121",
                   "driver_version": "580.95.05", "memory_mib": 97871, "uuid": "GPU-x", "platform_class": "dgx_spark"}],
         "compute_capabilities": ["12.1"], "sm_archs": ["sm_121"], "platform_class": "dgx_spark",
         "cpu": {"arch": "aarch64", "cores": 20}, "memory": {"total_mib": 128000, "available_mib": 120000},
         "disk": {"/opt/sparkforge/build": {"measured_at": "/opt", "free_mib": 900000, "total_mib": 1900000}},
         "gpu_error": None, "user": {"name": "root", "uid": 0}}
CHECKS = {"allow_x86_64": True, "supported_distributions": [{"distribution": "Ubuntu", "versions": ["24.04"]}],
          "min_python": "3.10", "require_gpu": True, "min_driver_blackwell": "580", "min_ram_gib": 1,
          "min_ram_gib_source_build": 1, "min_disk_gib": 1, "min_disk_gib_source_build": 1,
          "build_dir": "/opt/sparkforge/build"}


class NoTools:
    """The host boundary: no c++, no sudo, and no command is run (torch from an index compiles nothing)."""

    def which(self, name, opt_dirs=None):
        return None

    def run(self, cmd, **kwargs):
        raise AssertionError("the plan ran %s" % cmd)


def guide_step():
    """The guide's step_free_memory, from the guide's ```python block under its heading."""
    start, end = readme.span(GUIDE, "## Adding a preflight check")
    blocks = re.findall(r"^```python\n(.*?)^```$", readme.text(GUIDE)[start:end], re.S | re.M)
    assert len(blocks) == 1, blocks
    names = {}
    exec(compile(blocks[0], GUIDE, "exec"), names)  # pylint: disable=exec-used
    return names["step_free_memory"]


def plan(job, available_mib):
    facts = copy.deepcopy(FACTS)
    facts["memory"]["available_mib"] = available_mib
    params = {"facts": facts, "gather": None, "platform_maps": {}, "checks": CHECKS, "bundle": None,
              "host": {"name": "spark-1", "distribution": "Ubuntu", "distribution_version": "24.04",
                       "python_version": "3.12.3", "architecture": "aarch64"},
              "settings": {"components": ["pytorch"], "torch_version": "latest", "torch_source": "index"},
              "manifest": copy.deepcopy(shared_manifest()), "sources": {}, "probe_sources": False,
              "probe_timeout": 5}
    return job(params, NoTools()).run()


def test_the_guides_check_is_one_method_and_one_line_and_its_problem_is_the_plans():
    # The guide's two parts: the method, and its name in STEPS (after the plan's own host checks).
    steps = StackPlanJob.STEPS
    at = steps.index("host") + 1
    free_memory_job = type("FreeMemoryJob", (StackPlanJob,), {
        "STEPS": steps[:at] + ("free_memory",) + steps[at:], "step_free_memory": guide_step()})
    before = plan(StackPlanJob, 20000)
    assert before["ready"] is True, before["problems"]
    assert plan(free_memory_job, 120000) == before
    res = plan(free_memory_job, 20000)
    message = "20000 of 128000 MiB of RAM free: stop what holds the rest, then run again"
    assert res["ready"] is False and res["problems"] == [{"check": "free_memory", "message": message}]
    assert "  - [free_memory] %s" % message in res["plan_text"]
    assert res["plan"] == before["plan"]
