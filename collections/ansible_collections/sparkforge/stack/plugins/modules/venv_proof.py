#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: venv_proof
short_description: Compare what a venv holds with the host's plan, component by component
version_added: "0.3.0"
description:
  - Runs the venv's own python to list its installed distributions (importlib.metadata, what pip wrote) and to
    evaluate each planned ML package requirement, then compares them with the plan (sparkforge_plan) for the
    components the run installs - torch's release and local tag (its CUDA build), torchvision and torchaudio,
    each required ML package the profile installs.
  - With O(runtime_env), each runtime profile file runtime_env wrote is read and its C(export) lines compared with
    the variables the role computed from the plan (env vars, arch list, paths); with O(verdict_report), verify's
    verdict is part of the proof (a failed or missing report differs).
  - Reads only; changes nothing. A host is C(provisioned) only when RV(differences) is empty.
  - With O(since) (the record a proven run kept, RV(compared)), compares the venv with that record instead of
    the plan - what drifted since the host was provisioned (C(sparkforge status)), the runtime profile files the
    record names included (a file edited since, naming the variable).
author:
  - sparkforge developers (@sparkforge)
options:
  venv:
    description: The virtual environment (the one the roles installed into).
    type: path
    required: true
  plan:
    description: The host's plan, as preflight made it (sparkforge_plan). Required without O(since).
    type: dict
  components:
    description: The components this run installs (sparkforge_components). Required without O(since).
    type: list
    elements: str
  since:
    description:
      - A JSON file holding C(compared) of an earlier proof (distribution name to version). A missing file is no
        record - RV(recorded) false, nothing compared.
    type: path
  ml_packages:
    description:
      - The rows the ML packages role resolved in this run (its C(packages) result - name, requirement, optional,
        method, status), compared instead of the plan's list; a skipped or optional row is not compared.
    type: list
    elements: dict
  runtime_env:
    description:
      - What runtime_env wrote in this run - C(variables) (name to value, as the role computed them) and C(files)
        (the profile files it wrote, each holding them as C(export) lines).
    type: dict
    suboptions:
      variables:
        description: Variable name to value.
        type: dict
        required: true
      files:
        description: The profile files (absolute paths).
        type: list
        elements: path
        required: true
  verdict_report:
    description:
      - The JSON report verify wrote in this run (where verify is a component); an empty value or a missing file is
        no report, which differs, as a report that did not pass does.
    type: str
  cuda_major:
    description: The host's CUDA major version (what a source or wheelhouse torch is built against).
    type: int
    default: 13
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: Reads only, in either mode.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
"""

EXAMPLES = r"""
- name: Prove the host holds what its plan says
  sparkforge.stack.venv_proof:
    venv: /opt/sparkforge/venv
    plan: "{{ sparkforge_plan }}"
    components: "{{ sparkforge_components }}"
  register: proof

- name: What changed in the venv since it was proven
  sparkforge.stack.venv_proof:
    venv: /opt/sparkforge/venv
    since: /opt/sparkforge/reports/provisioned.json
  register: drift

- name: Say what differs
  ansible.builtin.debug:
    msg: "{{ proof.differences | map(attribute='words') | list }}"
"""

RETURN = r"""
proven:
  description: True when the venv holds what the plan says, for every component of the run.
  returned: success
  type: bool
state:
  description: C(provisioned) when proven, else C(partial); with O(since) C(unchanged) or C(drifted).
  returned: success
  type: str
error:
  description: What differs, per component (C(ml_packages - tokenizers not installed, plan tokenizers==0.21.0)); null when proven.
  returned: success
  type: str
differences:
  description: One entry per difference.
  returned: success
  type: list
  elements: dict
  contains:
    component: {description: The component that installs it., type: str}
    package: {description: The distribution., type: str}
    planned: {description: What the plan says (version or requirement)., type: str}
    installed: {description: The installed version (null - not installed)., type: str}
    words: {description: The difference in a sentence., type: str}
installed:
  description: Canonical distribution name to version, as the venv's python lists them.
  returned: success
  type: dict
compared:
  description: The compared distributions at their installed versions (what a proven run records for O(since)).
  returned: success
  type: dict
profile:
  description: Each runtime profile file compared, path to the variables it exports (what a proven run records).
  returned: success
  type: dict
recorded:
  description: With O(since), whether the record exists.
  returned: success
  type: bool
record:
  description:
    - What a proven run keeps in C(sparkforge_proof_file) - RV(compared) and RV(profile) with sparkforge's
      C(managed_by) marker (C(module_utils/host/records.py); a file there without it is not written over).
  returned: without O(since)
  type: dict
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import proof
from ansible_collections.sparkforge.stack.plugins.module_utils._common import run_env
from ansible_collections.sparkforge.stack.plugins.module_utils.host import records

ARGUMENT_SPEC = dict(
    venv=dict(type="path", required=True),
    plan=dict(type="dict"),
    components=dict(type="list", elements="str"),
    since=dict(type="path"),
    cuda_major=dict(type="int", default=13),
    ml_packages=dict(type="list", elements="dict"),
    runtime_env=dict(type="dict", options=dict(variables=dict(type="dict", required=True),
                                               files=dict(type="list", elements="path", required=True))),
    verdict_report=dict(type="str"),
)


def read_text(module, path):
    """The file's text, None when it is missing."""
    if not os.path.exists(path):
        return None
    try:
        with open(path) as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        module.fail_json(msg="%s cannot be read for the proof: %s" % (path, exc))


def read_report(module, path):
    """verify's report, parsed; None when there is none; a report that is not JSON is one that did not pass."""
    text = read_text(module, path) if path else None
    if text is None:
        return None
    try:
        report = json.loads(text)
    except ValueError as exc:
        return {"passed": False, "failures": ["%s is not a JSON report (%s)" % (path, exc)]}
    return report if isinstance(report, dict) else {"passed": False, "failures": ["%s holds no report" % path]}


def probe(module, venv, reqs):
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        return {"dists": {}, "satisfied": {}}
    # -I: the venv's own site-packages only (no PYTHONPATH, no user site).
    rc, out, err = module.run_command([python, "-I", "-c", proof.PROBE, json.dumps(reqs)])
    if rc != 0:
        module.fail_json(msg="%s could not list its distributions (rc %s): %s" % (python, rc, (err or out)[-2000:]))
    try:
        return proof.parse_probe(out)
    except ValueError as exc:
        module.fail_json(msg="%s: %s" % (python, exc))


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True,
                           required_one_of=[("plan", "since")], required_together=[("plan", "components")],
                           mutually_exclusive=[("plan", "since")])
    # The venv's python runs in the run's own environment: no PYTHON*/PIP_* of the host (_common/run_env.py).
    run_env.scrub()
    params = module.params
    if params["since"]:
        recorded, profiles = None, {}
        if os.path.exists(params["since"]):
            try:
                with open(params["since"]) as handle:
                    record = json.load(handle)
                recorded, profiles = record["compared"], record.get("profile") or {}
            except (ValueError, KeyError, TypeError, AttributeError, OSError) as exc:
                module.fail_json(msg="%s is not a proof record (%s): remove it, or provision the host again"
                                 % (params["since"], exc))
        found = probe(module, params["venv"], [])
        diffs = proof.drift(recorded or {}, found["dists"])
        diffs += proof.profile_drift(profiles, dict((path, read_text(module, path)) for path in profiles))
        module.exit_json(changed=False, proven=not diffs, state="drifted" if diffs else "unchanged",
                         error="; ".join(d["words"] for d in diffs) or None, differences=diffs,
                         installed=found["dists"], compared=recorded or {}, profile=profiles,
                         recorded=recorded is not None)
    want = proof.expected(params["plan"], params["components"], params["cuda_major"], params["ml_packages"])
    found = probe(module, params["venv"], proof.requirements(want))
    diffs = proof.differences(want, found)
    files, profiles = {}, {}
    if params["runtime_env"]:
        files = dict((path, read_text(module, path)) for path in params["runtime_env"]["files"])
        diffs += proof.profile_differences(params["runtime_env"]["variables"], files)
        profiles = dict((path, proof.parse_profile(text)) for path, text in files.items() if text is not None)
    if params["verdict_report"] is not None:
        diffs += proof.verify_differences(read_report(module, params["verdict_report"]))
    state, error = proof.state_of(diffs)
    compared = proof.compared(want, found)
    module.exit_json(changed=False, proven=not diffs, state=state, error=error, differences=diffs,
                     installed=found["dists"], compared=compared, profile=profiles, recorded=False,
                     record=records.mark("proof", {"compared": compared, "profile": profiles}))


if __name__ == "__main__":
    main()
