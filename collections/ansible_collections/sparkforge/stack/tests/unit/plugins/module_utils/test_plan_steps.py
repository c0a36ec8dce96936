# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plan's hub in named steps (issue 55 item 2): StackPlanJob.STEPS and preflight.PLAN_STEPS are the one
place the order lives, each step is a small method (function) with its message beside its check, and a new
preflight check is one method and one line."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import inspect
import os
import re
import sys

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils.plan import preflight
from ansible_collections.sparkforge.stack.plugins.module_utils.plan.stack_plan_job import StackPlanJob

sys.path.insert(0, os.path.dirname(__file__))
from test_stack_plan_job import SPARK, Mirror, a_host, manifest, params  # noqa: E402  pylint: disable=wrong-import-position

# A step longer than this is more than one check: split it.
STEP_LINES = 40
CALL = re.compile(r"\bstep_(\w+)\(")


def lines_of(func):
    return len(inspect.getsourcelines(func)[0])


def test_every_step_of_the_job_is_a_small_method_its_list_names_once():
    names = StackPlanJob.STEPS
    assert len(set(names)) == len(names), names
    methods = sorted(n[len("step_"):] for n in dir(StackPlanJob) if n.startswith("step_"))
    assert methods == sorted(names), "a step_ method not in STEPS never runs; a name in STEPS needs its method"
    long = ["step_%s: %d lines" % (n, lines_of(getattr(StackPlanJob, "step_" + n))) for n in names
            if lines_of(getattr(StackPlanJob, "step_" + n)) > STEP_LINES]
    assert not long, long
    assert lines_of(StackPlanJob.plan) <= STEP_LINES


def test_the_jobs_list_is_the_only_place_its_order_lives():
    # No step is called by name (plan() runs them from STEPS): a call would be a second order.
    source = inspect.getsource(sys.modules[StackPlanJob.__module__])
    assert not CALL.findall(re.sub(r"def step_\w+\(", "", source))
    assert "self.STEPS" in inspect.getsource(StackPlanJob.plan)


def test_every_step_of_build_plan_is_a_small_function_its_list_names_once():
    steps = preflight.PLAN_STEPS
    names = [f.__name__ for f in steps]
    assert len(set(names)) == len(names), names
    defined = sorted(n for n, f in vars(preflight).items() if n.startswith("step_") and inspect.isfunction(f))
    assert defined == sorted(names), "a step_ function not in PLAN_STEPS never runs"
    long = ["%s: %d lines" % (f.__name__, lines_of(f)) for f in steps if lines_of(f) > STEP_LINES]
    assert not long, long
    assert lines_of(preflight.build_plan) <= STEP_LINES
    assert not CALL.findall(re.sub(r"def step_\w+\(", "", inspect.getsource(preflight)))


class SwapJob(StackPlanJob):
    """A new preflight check, as the guide writes one: one method, and its name added to STEPS."""

    STEPS = StackPlanJob.STEPS + ("swap",)

    def step_swap(self, run):
        if run.params["facts"]["memory"]["total_mib"] < 200000:
            return [{"check": "swap", "message": "less than 200000 MiB of RAM: add swap"}]
        return []


def test_a_new_check_is_one_method_and_one_line_and_its_problem_is_the_plans():
    before = StackPlanJob(params(), a_host("c++ 13.3.0"), opener=Mirror()).run()
    res = SwapJob(params(), a_host("c++ 13.3.0"), opener=Mirror()).run()
    assert before["ready"] is True and res["ready"] is False
    assert res["problems"] == before["problems"] + [{"check": "swap", "message": "less than 200000 MiB of RAM: add swap"}]
    assert "  - [swap] less than 200000 MiB of RAM: add swap" in res["plan_text"]
    assert res["plan"] == before["plan"]


def test_a_new_step_of_build_plan_is_one_function_and_one_line():
    def step_no_verify(so_far):
        if "verify" in so_far["enabled"]:
            return "this site runs no GPU checks: leave verify out of sparkforge_components"
        return None
    config = {"torch_source": "index"}
    assert preflight.build_plan(SPARK, config, manifest())["actions"]["verify"] == "check"
    with pytest.raises(preflight.PlanError, match="this site runs no GPU checks"):
        preflight.build_plan(SPARK, config, manifest(), steps=preflight.PLAN_STEPS + (step_no_verify,))
