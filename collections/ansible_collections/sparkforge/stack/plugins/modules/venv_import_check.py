#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: venv_import_check
short_description: Check that a venv imports each built package at the version its wheel carries
version_added: "0.3.0"
description:
  - The part of verification that needs no GPU. For each package, imports it in the venv's Python (in the
    given order, each in its own C(try), one process) and compares its C(__version__) (local part after C(+)
    ignored) with the version the wheel's file name carries.
  - Catches what a sha256 cannot, a wheel that installs but does not load on this host (a library it
    links against is missing, an undefined symbol, an ABI mismatch with the torch it was built against).
  - Reads only.
author:
  - sparkforge developers (@sparkforge)
options:
  python:
    description: The venv's Python.
    type: path
    required: true
  wheels:
    description:
      - The packages, as the fleet's wheel lists describe them (C(name) and C(file) each, C(module) where the
        import name differs); entries of C(kind) C(dependency) are skipped (they are checked by what imports them).
    type: list
    elements: dict
    required: true
  modules:
    description: Import name of a distribution whose module is named otherwise (distribution name to module).
    type: dict
    default: {}
  timeout:
    description: Seconds the imports may take together.
    type: int
    default: 300
attributes:
  check_mode:
    description: Runs the same (it only reads).
    support: full
  diff_mode:
    description: Not supported.
    support: none
"""

EXAMPLES = r"""
- name: Check the class's packages import on this host
  sparkforge.stack.venv_import_check:
    python: /opt/sparkforge/venv/bin/python
    wheels: "{{ hostvars[sparkforge_fleet_builder_host].sparkforge_fleet_manifest }}"
"""

RETURN = r"""
packages:
  description: One entry per package, with C(name), C(module), C(expected), C(version) (what it reports, null when it
    did not import), C(ok) and C(error).
  returned: always
  type: list
  elements: dict
failures:
  description: One line per package that did not import or reports another version.
  returned: always
  type: list
  elements: str
"""

import json

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkforge.stack.plugins.module_utils._common import run_env

# One process imports them in order (torch before what builds on it); each failure is kept apart.
SCRIPT = r"""
import importlib, json, sys, traceback
out = []
for name in json.loads(sys.argv[1]):
    try:
        mod = importlib.import_module(name)
        out.append({"module": name, "version": str(getattr(mod, "__version__", None)), "error": None})
    except BaseException as exc:
        line = traceback.format_exception_only(type(exc), exc)[-1].strip()
        out.append({"module": name, "version": None, "error": line})
print(json.dumps(out))
"""


def expected_version(filename):
    parts = str(filename).split("-")
    return parts[1] if len(parts) > 2 else None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path", required=True),
            wheels=dict(type="list", elements="dict", required=True),
            modules=dict(type="dict", default={}),
            timeout=dict(type="int", default=300),
        ),
        supports_check_mode=True,
    )
    # The venv's python runs in the run's own environment: no PYTHON*/PIP_* of the host (_common/run_env.py).
    run_env.scrub()
    p = module.params
    packages = []
    for item in p["wheels"]:
        if item.get("kind") == "dependency":
            continue
        if not item.get("name") or not item.get("file"):
            module.fail_json(msg="each wheel needs name and file, got %r" % (item,))
        packages.append({"name": item["name"], "module": p["modules"].get(item["name"], item.get("module") or item["name"]),
                         "expected": expected_version(item["file"])})
    if not packages:
        module.exit_json(changed=False, packages=[], failures=[])
    cmd = [p["python"], "-c", SCRIPT, json.dumps([pkg["module"] for pkg in packages])]
    rc, out, err = module.run_command(["timeout", str(p["timeout"])] + cmd)
    try:
        seen = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        module.fail_json(msg="%s could not run the import check (exit %d): %s" % (
            p["python"], rc, (err or out).strip()[-1500:]), packages=packages, failures=[])
    failures = []
    for pkg, got in zip(packages, seen):
        pkg.update(version=got["version"], error=got["error"])
        base = (got["version"] or "").split("+")[0]
        if got["error"]:
            pkg["ok"] = False
            failures.append("%s does not import: %s" % (pkg["name"], got["error"]))
        elif pkg["expected"] and base != pkg["expected"]:
            pkg["ok"] = False
            failures.append("%s reports version %s, its wheel is %s" % (pkg["name"], got["version"], pkg["expected"]))
        else:
            pkg["ok"] = True
    if failures:
        module.fail_json(msg="; ".join(failures), packages=packages, failures=failures)
    module.exit_json(changed=False, packages=packages, failures=[])


if __name__ == "__main__":
    main()
