# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The checks across variables (validate_pairs), the ML layer's inputs (ml_inputs), the schema classes of
validate.check as properties (Hypothesis: every declared variable, bad values drawn from its type), the
host's resolved-path rule, and RULES against the argument_spec of every module option a role variable feeds."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import glob
import os
import re

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.sparkforge.stack.plugins.module_utils.host import host_paths
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import ml_inputs
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import wheel_check
from ansible_collections.sparkforge.stack.plugins.module_utils.plan import validate, validate_pairs

from schema_strategies import NAMES, bad_values
from test_validate import COLLECTION, PROTECTED, SPECS
from helpers import REPO, load_manifest

MANIFEST = load_manifest()
CONTEXT = {"sparkforge_ml_packages": MANIFEST["sparkforge_ml_packages"],
           "sparkforge_ml_profiles": MANIFEST["sparkforge_ml_profiles"]}


def row(row_id):
    """A row's message (the last column) by its id, <tmp> as %(tmp)s."""
    doc = os.path.join(REPO, "docs", "bad-inputs.md")
    with open(doc) as handle:
        for line in handle:
            if line.startswith("| %s |" % row_id):
                text = line.rstrip("\n")[:-2].split(" | ")[-1]
                return (text[1:-1] if text.startswith("`") else text).replace("<tmp>", "%(tmp)s")
    raise AssertionError(row_id)


def cross(values, given=None, context=None):
    typed, errors = validate.check(values, SPECS)
    assert errors == []
    return validate_pairs.cross_check(typed, list(values) if given is None else given, context)


def cross_errors(*args, **kwargs):
    return cross(*args, **kwargs)[0]


def check_errors(*args):
    return validate.check(*args)[1]


# ---------------------------------------------------------------- one input, one name (item 2)

def role_defaults():
    out = {}
    for path in sorted(glob.glob(os.path.join(COLLECTION, "roles", "*", "defaults", "main.yml"))):
        role = path.split(os.sep)[-3]
        if role == "manifest":
            continue
        with open(path) as handle:
            for name, value in (yaml.safe_load(handle) or {}).items():
                out[name] = value
    return out


def test_every_role_default_that_is_a_sparkforge_value_is_an_alias_or_said_not_to_be():
    """A role default "{{ sparkforge_X }}" spells the input sparkforge_X: ALIASES must list it (or
    NOT_ALIASES say why it is another thing), so two spellings cannot disagree unseen."""
    listed = dict((alias, name) for name, aliases in validate_pairs.ALIASES.items() for alias in aliases)
    found = {}
    for name, value in role_defaults().items():
        match = re.match(r"^\{\{ (sparkforge_[a-z0-9_]+) \}\}$", str(value))
        if match and name in SPECS:
            found[name] = match.group(1)
    missing = dict((k, v) for k, v in found.items() if k not in listed and k not in validate_pairs.NOT_ALIASES)
    assert missing == {}
    assert dict((k, v) for k, v in found.items() if k in listed) == dict((k, listed[k]) for k in found if k in listed)


def test_v24_two_spellings_of_one_input_with_different_values_are_refused_naming_both():
    """V24: sparkforge_torch_version 2.11.0 beside pytorch_version 2.10.0 (planned as one, installed as the other)."""
    errors = cross_errors({"sparkforge_torch_version": "2.11.0", "pytorch_version": "2.10.0"})
    assert [e["message"] for e in errors] == [row("V24")]


def test_a_role_spelling_set_alone_becomes_the_inputs_one_value():
    """ml_packages_profile set alone: the plan's sparkforge_ml_profile takes it (published by preflight)."""
    errors, one = cross({"sparkforge_ml_profile": "minimal", "ml_packages_profile": "training",
                         "sparkforge_venv": "/opt/v", "pytorch_venv": "/opt/v"},
                        given=["ml_packages_profile", "pytorch_venv", "sparkforge_venv"])
    assert errors == [] and one == {"sparkforge_ml_profile": "training"}


def test_v25_a_cuda_major_that_disagrees_with_the_torch_index_is_refused_naming_both():
    errors = cross_errors({"sparkforge_cuda_major": 12, "sparkforge_torch_index_url": "https://download.pytorch.org/whl/cu130"})
    assert [e["message"] for e in errors] == [row("V25")]
    # Agreeing, or an index that names no CUDA (a mirror, a file:// index): nothing to compare.
    assert cross({"sparkforge_cuda_major": 12, "pytorch_index_url": "https://download.pytorch.org/whl/cu128/"})[0] == []
    assert cross({"sparkforge_cuda_major": 12, "pytorch_index_url": "file:///srv/index"})[0] == []
    # The index read is the one the roles read: a role spelling set alone.
    errors = cross_errors({"sparkforge_cuda_major": 13, "pytorch_index_url": "https://download.pytorch.org/whl/cu126"})
    assert "pytorch_index_url='https://download.pytorch.org/whl/cu126' says CUDA major 12" in errors[0]["message"]


def test_the_cuda_libraries_release_must_name_the_cuda_major():
    # sparkforge_cuda_minor (cuda.yml: the math libraries' packages and paths) states the major too.
    errors = cross_errors({"sparkforge_cuda_major": 13, "sparkforge_cuda_minor": "12.9"})
    assert [e["message"] for e in errors] == [
        "sparkforge_cuda_major: sparkforge_cuda_major=13 (int) says CUDA major 13 but sparkforge_cuda_minor='12.9' "
        "says CUDA major 12: they must agree; set both for one CUDA (e.g. sparkforge_cuda_major: 13 with the index "
        ".../whl/cu130)"]
    assert cross_errors({"sparkforge_cuda_major": 13, "sparkforge_cuda_minor": "13.0"}) == []
    assert cross_errors({"sparkforge_cuda_major": 12, "sparkforge_cuda_minor": "12.9",
                         "sparkforge_torch_index_url": "https://download.pytorch.org/whl/cu129"}) == []
    # The manifest's own pair agrees.
    assert cross_errors({"sparkforge_cuda_major": MANIFEST["sparkforge_cuda_major"],
                         "sparkforge_cuda_minor": MANIFEST["sparkforge_cuda_minor"]}) == []


def test_v43_a_versioned_cuda_home_that_disagrees_with_the_cuda_major_is_refused():
    errors = cross_errors({"sparkforge_cuda_major": 13, "sparkforge_cuda_home": "/usr/local/cuda-12.8"})
    assert [e["message"] for e in errors] == [row("V43")]
    # A role spelling set alone is the one read; an unversioned directory states no CUDA.
    assert "torch_domains_cuda_home='/usr/local/cuda-12.6'" in cross_errors(
        {"sparkforge_cuda_major": 13, "torch_domains_cuda_home": "/usr/local/cuda-12.6"})[0]["message"]
    assert cross_errors({"sparkforge_cuda_major": 13, "sparkforge_cuda_home": "/usr/local/cuda"}) == []
    assert cross_errors({"sparkforge_cuda_major": 12, "sparkforge_cuda_home": "/opt/cuda-12.8/",
                         "pytorch_index_url": "https://download.pytorch.org/whl/cu128"}) == []


# ---------------------------------------------------------------- the ML layer's inputs (item 3)

@pytest.mark.parametrize("row_id,values", [
    pytest.param("V26", {"ml_packages_pins": {"transformers": 4.40}}, id="V26"),
    pytest.param("V27", {"ml_packages_pins": {"transformerz": "4.40.0"}}, id="V27"),
    pytest.param("V28", {"ml_packages_pins": {"einops": "latest"}}, id="V28"),
    pytest.param("V29", {"ml_packages_profile": "trainig"}, id="V29"),
    pytest.param("V44", {"ml_packages_pins": {"einops": "0.8.2 "}}, id="V44"),
    pytest.param("V40", {"ml_packages_extra_matrix": {"mypkg": {"methods": [{"method": "pipx"}]}}}, id="V40"),
    pytest.param("V41", {"ml_packages_extra_matrix": {"mypkg": {"methods": [{"method": "wheel", "when": {"os": "x"}}]}}},
                 id="V41"),
])
def test_the_ml_layers_inputs_are_refused_against_the_manifests_matrix(row_id, values):
    errors = cross_errors(values, context=CONTEXT)
    assert [m for m in (e["message"] for e in errors) if m.startswith(row(row_id))], (row(row_id), errors)


def test_good_ml_inputs_pass():
    extra = {"mypkg": {"methods": [{"method": "wheel", "when": {"arch": "aarch64"}}, {"method": "skip", "reason": "x86"}]}}
    errors = cross_errors({"ml_packages_pins": {"transformers": "4.40.0", "einops": ">=0.8,<1"},
                           "ml_packages_extra_matrix": extra, "sparkforge_ml_profile": "training"}, context=CONTEXT)
    assert errors == []
    assert ml_inputs.pin_problem("2.11.0+cu130") is None and ml_inputs.pin_problem("==1.*") is None


def test_v42_a_version_yaml_read_as_a_float_is_refused_inside_mappings_and_lists():
    """V42: a version-named key (versions, nccl_version, release) holding a float, at any depth."""
    errors = check_errors({"preflight_supported_distributions": [{"distribution": "Ubuntu", "versions": [22.10]}]}, SPECS)
    assert [e["message"] for e in errors] == [row("V42").replace("`", "")]
    errors = check_errors({"cluster_fabric_nccl_version": 2.27}, SPECS)
    assert "quote it" in errors[0]["message"]


# ---------------------------------------------------------------- two schemas, one meaning (item 3)

def module_docs():
    """module -> its DOCUMENTATION options (type, choices, default, description)."""
    out = {}
    for path in glob.glob(os.path.join(COLLECTION, "plugins", "modules", "*.py")):
        with open(path) as handle:
            tree = ast.parse(handle.read())
        for node in tree.body:
            if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "DOCUMENTATION":
                out[os.path.basename(path)[:-3]] = (yaml.safe_load(node.value.value) or {}).get("options") or {}
    return out


def fed_options():
    """(module, option, role variable) for every task argument that is one role variable: `opt: "{{ var }}"`."""
    found = set()
    for path in glob.glob(os.path.join(COLLECTION, "roles", "*", "tasks", "*.yml")):
        with open(path) as handle:
            tasks = yaml.safe_load(handle) or []
        stack = list(tasks)
        while stack:
            task = stack.pop()
            if not isinstance(task, dict):
                continue
            for key in ("block", "rescue", "always"):
                stack.extend(task.get(key) or [])
            for key, args in task.items():
                if key.startswith("sparkforge.stack.") and isinstance(args, dict):
                    for option, value in args.items():
                        match = re.match(r"^\{\{ ([a-z0-9_]+)(?: \| int)? \}\}$", str(value))
                        if match and match.group(1) in SPECS:
                            found.add((key.split(".")[-1], option, match.group(1)))
    return sorted(found)


# A role variable of type str may feed an int option where its kind is a number written as text (generation).
TYPES = {"str": ("str", "path", "raw"), "path": ("str", "path", "raw"), "int": ("int", "raw", "str"), "float": ("float", "int"),
         "bool": ("bool",), "list": ("list",), "dict": ("dict",), "raw": ("str", "path", "raw", "int", "list", "dict")}


def test_rules_and_role_specs_agree_with_every_module_option_a_role_variable_feeds():
    """Same type, choices within the module's, the module's default inside RULES' range, and where the module
    gives 0 a meaning ("0 for no timer") the range takes 0 (cluster_fabric_confirm_timeout: 10-3600 refused it)."""
    docs = module_docs()
    pairs = fed_options()
    assert ("fabric_netplan", "confirm_timeout", "cluster_fabric_confirm_timeout") in pairs
    problems = []
    for module, option, variable in pairs:
        mod = (docs.get(module) or {}).get(option)
        if mod is None:
            continue
        spec, rule = SPECS[variable], validate.RULES.get(variable, {})
        if spec.get("type", "str") not in TYPES.get(mod.get("type", "str"), ()):
            problems.append("%s: %s but %s.%s is %s" % (variable, spec.get("type"), module, option, mod.get("type")))
        choices = spec.get("choices") or rule.get("choices")
        if mod.get("choices") and choices and not set(map(str, choices)) <= set(map(str, mod["choices"])):
            problems.append("%s: choices %s, %s.%s takes %s" % (variable, choices, module, option, mod["choices"]))
        text = " ".join(mod.get("description") if isinstance(mod.get("description"), list) else [str(mod.get("description"))])
        low = rule.get("min")
        if low is not None and re.search(r"\b0 (for|means|disables)\b", text) and low > 0:
            problems.append("%s: RULES min %s, but %s.%s gives 0 a meaning" % (variable, low, module, option))
        default = mod.get("default")
        if isinstance(default, (int, float)) and not isinstance(default, bool) and low is not None \
                and not low <= default <= rule.get("max", default):
            problems.append("%s: %s.%s's default %s is outside RULES" % (variable, module, option, default))
    assert problems == []


def test_every_number_has_a_range():
    merged = dict(validate.EXTRA_SPECS)
    merged.update(SPECS)
    assert [n for n, s in merged.items() if s.get("type") in ("int", "float")
            and not ("min" in validate.RULES.get(n, {}) and "max" in validate.RULES.get(n, {}))] == []


# ---------------------------------------------------------------- paths by meaning, on the host (item 3)

def test_h_a_path_that_resolves_to_a_system_directory_or_into_the_checkout_is_refused_on_the_host(tmp_path):
    """H13, H14: the controller saw the path as written; the host follows the symlink."""
    (tmp_path / "venv").symlink_to("/usr")
    message = host_paths.path_problem("sparkforge_venv", str(tmp_path / "venv"))
    assert message == row("H13") % {"tmp": tmp_path}
    checkout = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(COLLECTION))))
    (tmp_path / "into").symlink_to(checkout)
    message = host_paths.path_problem("pytorch_venv", str(tmp_path / "into" / "venv"), protected=PROTECTED)
    assert row("H14").replace("<checkout>", checkout) in message


def test_h15_a_path_on_a_kernel_or_read_only_file_system_is_refused_though_root_may_write_it(tmp_path):
    """H15: access() says yes to root for /proc and for a read-only mount's mode bits; mkdir fails there."""
    assert host_paths.path_problem("sparkforge_venv", "/proc/sfvenv") == row("H15")
    # The mount holding a path is the longest mount point above it, its escapes (\040 for a space) read.
    mounts = tmp_path / "mounts"
    mounts.write_text("proc /proc proc rw 0 0\nsysfs /sys sysfs rw 0 0\n/dev/sda1 / ext4 rw 0 0\n"
                      "tmpfs /mnt/my\\040disk tmpfs ro 0 0\n")
    assert host_paths.mount_of("/sys/fs/x", str(mounts)) == ("/sys", "sysfs")
    assert host_paths.mount_of("/mnt/my disk/venv", str(mounts)) == ("/mnt/my disk", "tmpfs")
    assert host_paths.mount_of("/srv/venv", str(mounts)) == ("/", "ext4")
    assert host_paths.filesystem_problem(str(tmp_path), str(mounts)) is None


def test_w12_a_wheelhouse_that_is_a_file_is_refused(tmp_path):
    wheel = tmp_path / "torch-2.11.0-cp312-cp312-linux_aarch64.whl"
    wheel.write_bytes(b"PK")
    assert wheel_check.wheelhouse_problems(str(wheel), {"torch": "2.11.0"}, "3.12", "aarch64", "pytorch_wheelhouse") \
        == [row("W12") % {"tmp": tmp_path}]


# ---------------------------------------------------------------- properties: every declared variable

@settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_property_every_declared_variable_refuses_bad_values_of_its_type_naming_it(data):
    names = data.draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=8, unique=True))
    values = dict((name, data.draw(bad_values(name), label=name)) for name in names)
    errors = check_errors(values, SPECS, PROTECTED)
    refused = dict((e["variable"], e["message"]) for e in errors)
    assert sorted(refused) == sorted(names), (values, errors)
    for name, message in refused.items():
        assert message.startswith(name + ": ")
