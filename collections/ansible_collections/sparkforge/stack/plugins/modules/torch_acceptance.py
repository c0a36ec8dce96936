#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: torch_acceptance
short_description: Run a curated subset of PyTorch's own tests against a built wheel and judge it
version_added: "0.3.0"
description:
  - After M(sparkforge.stack.pytorch_wheel_build) publishes a wheel and it is installed, runs PyTorch's
    own test suites from the build's source tree through C(test/run_test.py) (one run per suite, from
    C(SOURCE/test), so the installed wheel is what is imported), with a time limit per suite.
  - Parses what the runners print (pytest's summary and C(-rfE) lines, unittest's C(Ran N tests) and
    C(FAILED (failures=..)) lines and failure headers, and run_test.py's C(<suite> failed! Received
    signal) line) into passed, failed, errored and skipped counts, suites ended by a signal or the time
    limit, and the names of the failed tests.
  - Judges the result against a failure budget and exclusions that are data in the stack's manifest
    (C(sparkforge_torch_acceptance)), keyed by torch version and platform class; like EasyBuild's
    C(max_failed_tests) and C(excluded_tests). Excluded suites are not run; failures of excluded tests are
    listed but not counted; a suite that dies counts as one failure.
  - Records the run and the verdict in the wheel's build manifest (C(manifest)). A later run with the
    same wheel (sha256), suites, time limit and I(env) reuses the recorded counts and only judges again, so a
    no-op rerun of the playbook does not rerun hours of tests.
  - Over budget the module fails (unless I(fail_over_budget=false)), so a fleet builder does not publish
    the wheel to the fleet's wheelhouse.
author:
  - sparkforge developers (@sparkforge)
options:
  source_dir:
    description: The PyTorch source tree the wheel was built from (holds C(test/run_test.py)).
    type: path
    required: true
  python:
    description: Interpreter of the venv the wheel is installed in (needs pytest, as PyTorch's tests do).
    type: path
    required: true
  version:
    description: The torch version built; selects the budget and exclusions in I(data).
    type: str
    required: true
  platform_class:
    description: The host's platform class (see M(sparkforge.stack.gpu_facts)); selects exclusions.
    type: str
    required: true
  data:
    description:
      - The manifest's C(sparkforge_torch_acceptance) - C(suites) (names, or dicts with C(name) and a
        pytest C(k) expression), C(timeout) (seconds per suite), and C(releases) keyed by version, minor
        series or C(default), each with C(max_failed) and C(exclude) per platform class or C(all)
        (C(suites) not to run, C(tests) patterns whose failures are not counted).
    type: dict
    required: true
  suites:
    description: Suites to run instead of I(data)'s.
    type: list
    elements: raw
  max_failed:
    description: Failure budget instead of I(data)'s for this version.
    type: int
  timeout:
    description: Seconds one suite may run instead of I(data)'s C(timeout).
    type: int
  manifest:
    description:
      - The wheel's build manifest (C(<wheel>.manifest.json) from M(sparkforge.stack.pytorch_wheel_build)).
        Its C(sha256) keys the recorded run; the result is written into it under C(acceptance).
    type: path
  log_dir:
    description: Where the full output goes (C(acceptance-<time>.log)). Default C(<source_dir>/../acceptance).
    type: path
  env:
    description: Extra environment for the test runs (for example C(CUDA_VISIBLE_DEVICES)).
    type: dict
    default: {}
  force:
    description: Run the suites even when the manifest records a run for the same wheel and suites.
    type: bool
    default: false
  fail_over_budget:
    description: Fail when the counted failures exceed the budget.
    type: bool
    default: true
notes:
  - Needs a GPU for the CUDA suites; without one PyTorch's tests skip them, which the counts show.
  - Check mode says what would run and changes nothing.
"""

EXAMPLES = r"""
- name: Acceptance tests of the built wheel
  sparkforge.stack.torch_acceptance:
    source_dir: /var/cache/sparkforge/build/pytorch/src
    python: /opt/sparkforge/venv/bin/python
    version: "2.9.1"
    platform_class: spark
    data: "{{ sparkforge_torch_acceptance }}"
    manifest: "{{ pytorch_build.manifest }}"

- name: A quick subset with a budget of 3
  sparkforge.stack.torch_acceptance:
    source_dir: /var/cache/sparkforge/build/pytorch/src
    python: /opt/sparkforge/venv/bin/python
    version: "2.9.1"
    platform_class: hopper
    data: "{{ sparkforge_torch_acceptance }}"
    suites:
      - test_cuda
      - name: test_transformers
        k: sdpa
    max_failed: 3
"""

RETURN = r"""
counts:
  description: Tests passed, failed, errored, skipped, xfailed and xpassed over all suites.
  returned: success
  type: dict
suites:
  description: One record per suite run - name, k, state (passed, failed, signal, timeout, crashed), counts,
    failed_tests, error_tests, signal, seconds, returncode.
  returned: success
  type: list
  elements: dict
verdict:
  description: counted_failures, max_failed, within_budget, failures (counted), broken_suites, excused.
  returned: success
  type: dict
policy:
  description: The budget and exclusions that applied (and which C(releases) entry they came from).
  returned: success
  type: dict
reused:
  description: Whether the counts came from the run recorded in the manifest.
  returned: success
  type: bool
log:
  description: The log of the run (or of the recorded run).
  returned: success
  type: str
summary:
  description: One line for people.
  returned: success
  type: str
"""

import copy
import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkforge.stack.plugins.module_utils.verify import torch_acceptance as ta
from ansible_collections.sparkforge.stack.plugins.module_utils._common.clock import utc_file_stamp, utc_now
from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import atomic_write_text, makedirs
from ansible_collections.sparkforge.stack.plugins.module_utils._common import run_env


def fail(module, msg, **extra):
    module.fail_json(msg=msg, changed=False, **extra)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            source_dir=dict(type="path", required=True),
            python=dict(type="path", required=True),
            version=dict(type="str", required=True),
            platform_class=dict(type="str", required=True),
            data=dict(type="dict", required=True),
            suites=dict(type="list", elements="raw"),
            max_failed=dict(type="int"),
            timeout=dict(type="int"),
            manifest=dict(type="path"),
            log_dir=dict(type="path"),
            env=dict(type="dict", default={}),
            force=dict(type="bool", default=False),
            fail_over_budget=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    # The venv's python runs in the run's own environment: no PYTHON*/PIP_* of the host (_common/run_env.py).
    run_env.scrub()
    p = module.params

    # Everything is checked before anything runs or is written.
    runner = os.path.join(p["source_dir"], "test", "run_test.py")
    if not os.path.isfile(runner):
        fail(module, "%s does not exist: source_dir must be the PyTorch source tree the wheel was built from"
             % runner)
    if not (os.path.isfile(p["python"]) and os.access(p["python"], os.X_OK)):
        fail(module, "python %s is not an executable interpreter" % p["python"])
    try:
        policy = ta.policy_for(p["data"], p["version"], p["platform_class"])
    except ValueError as exc:
        fail(module, str(exc))
    if p["max_failed"] is not None:
        if p["max_failed"] < 0:
            fail(module, "max_failed must be 0 or more, not %d" % p["max_failed"])
        policy["max_failed"] = p["max_failed"]
        policy["entry"] = "max_failed option"
    suites, errors = ta.normalise_suites(p["suites"] if p["suites"] is not None else p["data"].get("suites"))
    if errors:
        fail(module, "; ".join(errors))
    timeout = p["timeout"] if p["timeout"] is not None else int(p["data"].get("timeout", 3600))
    if timeout <= 0:
        fail(module, "timeout must be positive, not %d" % timeout)
    to_run = [s for s in suites if s["name"] not in policy["excluded_suites"]]
    if not to_run:
        fail(module, "every suite is excluded for torch %s on %s (%s)"
             % (p["version"], p["platform_class"], ", ".join(policy["excluded_suites"])))

    manifest_data, wheel_sha = None, None
    if p["manifest"]:
        try:
            with open(p["manifest"]) as handle:
                manifest_data = json.load(handle)
        except (IOError, OSError, ValueError) as exc:
            fail(module, "cannot read the build manifest %s: %s" % (p["manifest"], exc))
        wheel_sha = manifest_data.get("sha256")
        if not wheel_sha:
            fail(module, "the build manifest %s has no sha256: is it pytorch_wheel_build's?" % p["manifest"])

    extra_env = dict((str(k), str(v)) for k, v in p["env"].items())
    key = ta.run_key(wheel_sha, to_run, policy["excluded_suites"], timeout, extra_env)
    recorded = (manifest_data or {}).get("acceptance") or {}
    reuse = bool(manifest_data) and not p["force"] and recorded.get("key") == key
    result = dict(changed=False, policy=policy, reused=reuse)

    if reuse:
        records, log_path = recorded["suites"], recorded.get("log")
    elif module.check_mode:
        why = "force" if p["force"] else ("the manifest records no run for this wheel and these suites"
                                          if manifest_data else "no manifest to record a run in")
        module.exit_json(changed=True, policy=policy, reused=False, suites=[], counts=ta.empty_counts(),
                         summary="would run %s (%s)" % (", ".join(s["name"] for s in to_run), why))
    else:
        log_dir = p["log_dir"] or os.path.join(os.path.dirname(os.path.abspath(p["source_dir"])), "acceptance")
        makedirs(log_dir)
        log_path = os.path.join(log_dir, "acceptance-%s.log" % utc_file_stamp())
        env = dict(os.environ)
        env.update(extra_env)
        records = []
        with open(log_path, "w") as log_handle:
            for suite in to_run:
                records.append(ta.run_suite(p["source_dir"], p["python"], suite, timeout, env, log_handle))
        result["changed"] = True

    counts = ta.total_counts(records)
    verdict = ta.judge(records, policy)
    summary = ta.summary_line(counts, verdict)
    block = {"key": key, "suites": records, "counts": counts, "verdict": verdict, "policy": policy,
             "log": log_path, "version": p["version"], "platform_class": p["platform_class"],
             "at": recorded.get("at") if reuse else utc_now()}
    if manifest_data is not None and recorded != block and not module.check_mode:
        updated = copy.deepcopy(manifest_data)
        updated["acceptance"] = block
        atomic_write_text(p["manifest"], json.dumps(updated, indent=1, sort_keys=True) + "\n")
        result["changed"] = True
        if module._diff:
            result["diff"] = {"before": {"acceptance": recorded.get("verdict")},
                              "after": {"acceptance": verdict}}
    result.update(counts=counts, suites=records, verdict=verdict, log=log_path, summary=summary)
    if not verdict["within_budget"] and p["fail_over_budget"]:
        shown = verdict["broken_suites"] + verdict["failures"]
        module.fail_json(msg="acceptance tests of torch %s over budget: %s. Counted: %s%s. Log: %s" % (
            p["version"], summary, "; ".join(shown[:15]), " (and %d more)" % (len(shown) - 15)
            if len(shown) > 15 else "", log_path), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
