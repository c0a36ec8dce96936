# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""validate.check: every row of docs/bad-inputs.md is refused with exactly its message; good values
(the manifest's defaults, lists given as comma-separated strings, booleans as words) pass, normalised."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools
import glob
import os
import re

import pytest
import yaml

from ansible_collections.sparkforge.stack.plugins.module_utils.plan import validate, var_names
from helpers import COLLECTION, REPO, bad_input_rows


def specs():
    docs = []
    for path in sorted(glob.glob(os.path.join(COLLECTION, "roles", "*", "meta", "argument_specs.yml"))):
        with open(path) as handle:
            docs.append(yaml.safe_load(handle))
    defaults = {}
    for path in sorted(glob.glob(os.path.join(COLLECTION, "roles", "*", "defaults", "main.yml"))
                       + glob.glob(os.path.join(COLLECTION, "roles", "*", "defaults", "main", "*.yml"))):
        with open(path) as handle:
            for name, value in (yaml.safe_load(handle) or {}).items():
                defaults.setdefault(name, value)
    # As the argument_specs lookup gives them to preflight: empty and null role defaults marked.
    return var_names.mark_defaults(var_names.specs_from_argument_specs(docs), defaults)


SPECS = specs()


CHECKOUT = REPO
# The checkout's table of bad inputs (docs/bad-inputs.md): why these tests live in the checkout's tests/, not the
# collection's.
ROWS = [(row_id,) + row for row_id, row in bad_input_rows().items()]
PROTECTED = validate.protected_dirs(COLLECTION)
ROLES = sorted(os.listdir(os.path.join(COLLECTION, "roles")))
KNOWN = set(SPECS) | set(validate.EXTRA_SPECS)


# The form rows (docs/bad-inputs.md, section F), each checked by the parametrized test below by its id.
FORM_ROWS = (
    "F01", "F02", "F03", "F04", "F05", "F06", "F07", "F08", "F09", "F10", "F11", "F12", "F13", "F14", "F15",
    "F16", "F17", "F18", "F19", "F20", "F21", "F22", "F23", "F24", "F25", "F26", "F27", "F28", "F29", "F30",
    "F31", "F32", "F33", "F34", "F35", "F36", "F37", "F38", "F39", "F40", "F41", "F42", "F43", "F44", "F45",
    "F46", "F47", "F48", "F49", "F50", "F51", "F52", "F53", "F54", "F55", "F56", "F57", "F58", "F59", "F60",
    "F61", "F62", "F63", "F64", "F65", "F66", "F67",
)


def test_the_table_covers_every_family():
    assert len(ROWS) >= 40
    ids = [row[0] for row in ROWS]
    assert len(ids) == len(set(ids)), "a row id is used twice"
    assert list(FORM_ROWS) == [i for i in ids if i.startswith("F")]
    kinds = set()
    for row_id, name, value, message in ROWS:
        spec = SPECS.get(name) or validate.EXTRA_SPECS.get(name) or {}
        kinds.add(spec.get("type", "str"))
        kinds.add(validate.RULES.get(name, {}).get("kind"))
    for family in ("path", "list", "dict", "bool", "int", "float", "url", "git", "release", "version", "sha256",
                   "arch_list", "jobs", "serial", "generation", "cidr"):
        assert family in kinds, family


@pytest.mark.parametrize("row_id,name,value,message", [r for r in ROWS if not r[0].startswith("N")],
                         ids=[r[0] for r in ROWS if not r[0].startswith("N")])
def test_each_bad_input_is_refused_naming_the_variable(row_id, name, value, message):
    values, errors = validate.check({name: value}, SPECS, PROTECTED)
    assert [e["message"] for e in errors] == [message]
    assert errors[0]["variable"] == name and name not in values


@pytest.mark.parametrize("row_id,name,value,message", [r for r in ROWS if r[0].startswith("N")],
                         ids=[r[0] for r in ROWS if r[0].startswith("N")])
def test_each_misspelt_name_is_refused_with_the_closest_name(row_id, name, value, message):
    assert name not in KNOWN and name not in known_names()["names"]
    assert name.startswith(tuple(var_names.prefixes(ROLES)))
    errors = var_names.unknown_names({name: value}, KNOWN, var_names.prefixes(ROLES))
    assert [e["message"] for e in errors] == [message]


def test_every_variable_named_is_declared_somewhere():
    for row_id, name, value, message in ROWS:
        if row_id.startswith("N"):
            continue
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
    good = {
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
    }
    # pytorch_venv is null but not set by the user (a role default that is null): skipped.
    values, errors = validate.check(good, SPECS, given=[name for name in good if name != "pytorch_venv"])
    assert errors == []
    assert values["sparkforge_components"] == ["pytorch", "torch_domains"]
    assert values["preflight_allow_x86_64"] is True and values["sparkforge_probe_timeout"] == 7
    assert "sparkforge_venv" not in values and "pytorch_venv" not in values


def test_every_error_is_reported_at_once():
    values, errors = validate.check({"sparkforge_venv": "v", "sparkforge_torch_source": "pip", "pytorch_jobs": 0},
                                    SPECS)
    assert [e["variable"] for e in errors] == ["pytorch_jobs", "sparkforge_torch_source", "sparkforge_venv"]


def test_the_manifests_own_defaults_pass(manifest):
    # The templated defaults are what they render to on a host.
    data = dict((k, v) for k, v in manifest.items() if not (isinstance(v, str) and "{{" in v))
    values, errors = validate.check(data, SPECS)
    assert errors == []


def test_every_roles_own_defaults_pass():
    """What a user gets without setting anything is never refused: each role's defaults (the untemplated ones;
    a templated one is what it renders to) pass the check the preflight makes of every variable. A path a role
    only reads, such as a procfs root defaulting to /proc, belongs in READ_PATHS."""
    data = {}
    for path in sorted(glob.glob(os.path.join(COLLECTION, "roles", "*", "defaults", "main.yml"))
                       + glob.glob(os.path.join(COLLECTION, "roles", "*", "defaults", "main", "*.yml"))):
        with open(path) as handle:
            data.update(yaml.safe_load(handle) or {})
    data = dict((k, v) for k, v in data.items() if not (isinstance(v, str) and "{{" in v))
    values, errors = validate.check(data, SPECS)
    assert errors == []


def test_no_component_name_is_inside_another():
    """The plays test `'<name>' in sparkforge_components`; on a string given with -e that is a substring
    test, right only because no component's name contains another's."""
    for a in validate.COMPONENTS:
        assert [b for b in validate.COMPONENTS if a != b and a in b] == []


@functools.lru_cache(maxsize=None)
def known_names():
    from ansible_collections.sparkforge.stack.plugins.lookup.known_names import known_names as scan
    return scan(os.path.join(COLLECTION, "roles"))


# Words with a project prefix in the roles' and playbooks' YAML that are not variables: module and role
# names, module parameters, YAML anchors, group names, file names, keys of the manifest's data.
NOT_VARIABLES = {"cluster_fabric", "cluster_ssh", "fleet_install_wheel_args", "llvm_commit", "llvm_projects",
                 "llvm_repo", "llvm_targets", "ml_packages_logs", "offline_bundle_info", "offline_bundle_make",
                 "pytorch_wheel_build", "xhost_collectives", "sparkforge_class_builders", "sparkforge_class_members",
                 "sparkforge_rollback", "sparkforge_rollback_none", "sparkforge_runtime", "sparkforge_runtime_hook",
                 "triton_build_args", "triton_llvm_build", "verify_state"}


def test_every_prefixed_name_the_collection_reads_is_known():
    """A variable the roles read but nothing declares or sets would be refused as a misspelling: every word
    with a project prefix in the roles and playbooks is a known name (or listed above as no variable)."""
    known = known_names()
    pattern = re.compile(r"(?<![\w.])(?:%s)\w+" % "|".join(known["prefixes"]))
    found = set()
    paths = glob.glob(os.path.join(COLLECTION, "roles", "**", "*.yml"), recursive=True) \
        + glob.glob(os.path.join(COLLECTION, "roles", "**", "*.j2"), recursive=True) \
        + glob.glob(os.path.join(COLLECTION, "playbooks", "*.yml"))
    for path in paths:
        with open(path) as handle:
            found.update(pattern.findall(handle.read()))
    assert sorted(found - set(known["names"]) - NOT_VARIABLES) == []
    # What the roles set themselves is known: a register, a set_fact, a loop_var, a role default.
    for name in ("preflight_result", "sparkforge_plan", "fleet_rollback_target", "pytorch_installed",
                 "fleet_rollback_to", "sparkforge_bundle_env", "cluster_group"):
        assert name in known["names"], name
    assert {"sparkforge_", "pytorch_", "cuda_libs_", "xhost_", "cluster_"} <= set(known["prefixes"])


def test_every_number_has_a_range():
    for name, spec in sorted(dict(SPECS, **validate.EXTRA_SPECS).items()):
        rule = validate.RULES.get(name, {})
        if spec.get("type") in ("int", "float") or rule.get("kind") == "jobs":
            assert rule.get("min") is not None and rule.get("max") is not None, name


def test_good_paths_and_numbers_pass_typed():
    values, errors = validate.check({
        "sparkforge_venv": "/opt/sparkforge/venv", "pytorch_build_dir": "/srv/build", "sparkforge_prefix": "/opt/x/",
        "verify_controller_dir": os.path.join(CHECKOUT, "reports"), "cluster_fabric_root": "/",
        "cluster_fabric_sysfs_root": "/sys", "preflight_min_ram_gib": "1", "preflight_min_disk_gib_source_build": "1",
        "triton_jobs": 8, "pytorch_jobs": "1024", "sparkforge_rollback_to": "2", "fleet_rollback_to": 3,
        "cluster_fabric_subnet": "192.168.100.0/24", "xhost_min_link_fraction": "0.5",
    }, SPECS, PROTECTED)
    assert errors == []
    assert values["preflight_min_ram_gib"] == 1 and values["preflight_min_disk_gib_source_build"] == 1
    assert values["xhost_min_link_fraction"] == 0.5


def test_names_set_reads_what_roles_set():
    doc = [{"name": "t", "ansible.builtin.set_fact": {"a_one": 1, "cacheable": True}, "register": "a_two"},
           {"block": [{"vars": {"a_three": 1}, "loop_control": {"loop_var": "a_four"}}]}]
    assert var_names.names_set(doc) == {"a_one", "a_two", "a_three", "a_four"}
    assert var_names.names_set({"a_five": 1}, top_level=True) == {"a_five"}


def test_protected_dirs_are_the_collection_and_its_checkout():
    assert PROTECTED == [(os.path.normpath(COLLECTION), ()), (CHECKOUT, ("reports", ".sparkforge-cluster-keys"))]
    assert validate.protected_dirs("/elsewhere/stack") == [("/elsewhere/stack", ())]


def test_an_empty_value_a_role_default_can_render_is_accepted_and_one_it_cannot_is_refused():
    """A role default that is a template which falls back to empty (cluster_fabric_interface's
    ``{{ sparkforge_fabric_interface | default('') }}``), or forwards a variable whose rule allows empty
    (a variable whose rule allows empty, as sparkforge_cuda_arch_list's does), documents empty as one of its values: the
    same value given by a user (cluster.yml's play holds these roles' defaults) is accepted. A template that
    forwards a non-empty value (pytorch_venv's ``{{ sparkforge_venv }}``) does not."""
    for name in ("cluster_fabric_interface", "cluster_fabric_address", "sparkforge_cuda_arch_list"):
        values, errors = validate.check({name: ""}, SPECS)
        assert errors == [] and values[name] == "", (name, errors)
    values, errors = validate.check({"cluster_fabric_apply_command": []}, SPECS)
    assert errors == [] and values["cluster_fabric_apply_command"] == []
    _values, errors = validate.check({"pytorch_venv": ""}, SPECS)
    assert [e["variable"] for e in errors] == ["pytorch_venv"]
    assert var_names.default_may_be_empty("{{ x | default('', true) }}", {})
    assert not var_names.default_may_be_empty("{{ x | default('/opt/x') }}", {})
    assert var_names.default_may_be_empty("{{ x }}", {"x": []})
