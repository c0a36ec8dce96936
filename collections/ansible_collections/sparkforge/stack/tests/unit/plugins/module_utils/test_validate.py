# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""validate.check: every row of docs/bad-inputs.md is refused with exactly its message; good values
(the manifest's defaults, lists given as comma-separated strings, booleans as words) pass, normalised."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import json
import os
import re

import pytest
import yaml

from ansible_collections.sparkforge.stack.plugins.module_utils import validate

COLLECTION = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
DOC = os.path.join(COLLECTION, "..", "..", "..", "..", "docs", "bad-inputs.md")


def specs():
    docs = []
    for path in sorted(glob.glob(os.path.join(COLLECTION, "roles", "*", "meta", "argument_specs.yml"))):
        with open(path) as handle:
            docs.append(yaml.safe_load(handle))
    return validate.specs_from_argument_specs(docs)


SPECS = specs()


def table():
    if not os.path.isfile(DOC):
        return []
    rows = []
    with open(DOC) as handle:
        for line in handle:
            match = re.match(r"^\| `([^`]+)` \| `(.+)` \| (.+) \|$", line.rstrip("\n"))
            if match:
                rows.append((match.group(1), json.loads(match.group(2)), match.group(3).replace("\\|", "|")))
    return rows


ROWS = table()


@pytest.mark.skipif(not ROWS, reason="docs/bad-inputs.md is not beside this collection (installed copy)")
def test_the_table_covers_every_family():
    assert len(ROWS) >= 40
    kinds = set()
    for name, value, message in ROWS:
        spec = SPECS.get(name) or validate.EXTRA_SPECS.get(name) or {}
        kinds.add(spec.get("type", "str"))
        kinds.add(validate.RULES.get(name, {}).get("kind"))
    for family in ("path", "list", "dict", "bool", "int", "float", "url", "git", "release", "version", "sha256",
                   "arch_list", "jobs", "serial"):
        assert family in kinds, family


@pytest.mark.parametrize("name,value,message", ROWS, ids=["%s=%s" % (r[0], json.dumps(r[1])[:30]) for r in ROWS])
def test_each_bad_input_is_refused_naming_the_variable(name, value, message):
    values, errors = validate.check({name: value}, SPECS)
    assert [e["message"] for e in errors] == [message]
    assert errors[0]["variable"] == name and name not in values


def test_every_variable_named_is_declared_somewhere():
    for name, value, message in ROWS:
        assert name in SPECS or name in validate.EXTRA_SPECS, name
    for name in validate.RULES:
        assert name in SPECS or name in validate.EXTRA_SPECS, name


def test_the_preflight_role_asks_for_every_extra_variable_and_reads_every_roles_spec():
    with open(os.path.join(COLLECTION, "roles", "preflight", "vars", "main.yml")) as handle:
        role_vars = yaml.safe_load(handle)
    assert sorted(role_vars["_preflight_extra_names"]) == sorted(validate.EXTRA_SPECS)
    # Every role's argument_specs, whatever roles there are (tests/test_core_only.py renders the list).
    assert "query('sparkforge.stack.argument_specs', role_path | dirname)" in role_vars["_preflight_specs"]


def test_good_values_pass_normalised():
    values, errors = validate.check({
        "sparkforge_components": "pytorch, torch_domains",
        "ml_packages_packages": ["einops"],
        "preflight_allow_x86_64": "yes",
        "sparkforge_probe_timeout": "7",
        "sparkforge_torch_version": "latest",
        "pytorch_jobs": "auto",
        "triton_jobs": "4",
        "sparkforge_serial": "25%",
        "sparkforge_cuda_arch_list": "9.0;12.1a;10.0+PTX",
        "preflight_min_python": "3.10",
        "pytorch_repo": "git@github.com:pytorch/pytorch.git",
        "triton_repo": "/srv/mirrors/triton.git",
        "pytorch_wheelhouse": "https://wheels.example.com/",
        "ml_packages_index_url": "",
        "sparkforge_bundle": "",
        "llvm_version": 18,
        "sparkforge_venv": validate.UNSET,
        "pytorch_venv": None,
    }, SPECS)
    assert errors == []
    assert values["sparkforge_components"] == ["pytorch", "torch_domains"]
    assert values["preflight_allow_x86_64"] is True and values["sparkforge_probe_timeout"] == 7
    assert "sparkforge_venv" not in values and "pytorch_venv" not in values


def test_every_error_is_reported_at_once():
    values, errors = validate.check({"sparkforge_venv": "v", "sparkforge_torch_source": "pip", "pytorch_jobs": 0},
                                    SPECS)
    assert [e["variable"] for e in errors] == ["pytorch_jobs", "sparkforge_torch_source", "sparkforge_venv"]


def test_the_manifests_own_defaults_pass():
    data = {}
    for path in sorted(glob.glob(os.path.join(COLLECTION, "roles", "manifest", "defaults", "main", "*.yml"))):
        with open(path) as handle:
            data.update(yaml.safe_load(handle) or {})
    # The templated defaults are what they render to on a host.
    data = dict((k, v) for k, v in data.items() if not (isinstance(v, str) and "{{" in v))
    values, errors = validate.check(data, SPECS)
    assert errors == []


def test_no_component_name_is_inside_another():
    """The plays test `'<name>' in sparkforge_components`; on a string given with -e that is a substring
    test, right only because no component's name contains another's."""
    for a in validate.COMPONENTS:
        assert [b for b in validate.COMPONENTS if a != b and a in b] == []
