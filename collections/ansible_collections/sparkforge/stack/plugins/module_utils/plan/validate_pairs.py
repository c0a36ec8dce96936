# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What no single variable's check can see: one input spelt twice, values that must agree, and the ML
layer's inputs against the manifest's matrix.  Run by validate_vars after validate.check, on its typed
values, before any host is read.

* ``ALIASES``: each input the plan reads (sparkforge_*) and the role variables that spell the same input
  (their defaults are ``{{ sparkforge_* }}``).  Two spellings the user set with different values are
  refused, naming both; one role spelling set alone becomes the input's value (``one_source``, published
  by preflight as the sparkforge_* variable), so the plan and every role read one value.
* ``PAIRINGS``: values that state one fact (the CUDA major: a number, the CUDA libraries' release, a torch
  index's cuNNN, a versioned CUDA install's directory) in different variables; every one stated must agree,
  whether set by the user or left at the manifest's default.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.sparkforge.stack.plugins.module_utils.packages import ml_inputs
from ansible_collections.sparkforge.stack.plugins.module_utils.plan.validate import show

# The input (as the plan and the manifest name it) -> the role variables that spell it too.  The roles'
# defaults chain them (pytorch_version: "{{ sparkforge_torch_version }}");
# the checkout's tests/integration/test_validate_pairs.py derives the pairs from the defaults and checks this
# table holds every one (but NOT_ALIASES).
ALIASES = {
    "sparkforge_torch_version": ("pytorch_version", "torch_domains_version", "triton_torch_version"),
    "sparkforge_torch_source": ("pytorch_source", "torch_domains_source"),
    "sparkforge_ml_profile": ("ml_packages_profile",),
    "sparkforge_venv": ("pytorch_venv", "torch_domains_venv", "ml_packages_venv", "runtime_env_venv"),
    "sparkforge_torch_index_url": ("pytorch_index_url", "torch_domains_index_url"),
    "sparkforge_cuda_repo_url": ("cuda_libs_repo_url",),
    "sparkforge_cuda_keyring_version": ("cuda_libs_keyring_version",),
    "sparkforge_cusparselt_base_url": ("cusparselt_base_url",),
    "sparkforge_cusparselt_version": ("cusparselt_version",),
    "sparkforge_pytorch_repo_url": ("pytorch_repo",),
    "sparkforge_triton_repo_url": ("triton_repo",),
    "sparkforge_llvm_repo_url": ("triton_llvm_repo",),
    "sparkforge_cuda_home": ("torch_domains_cuda_home",),
    "sparkforge_report_dir": ("ml_packages_report_dir",),
    "sparkforge_wheel_dir": ("pytorch_wheel_dir", "triton_wheel_dir"),
}

# Role defaults that take a sparkforge_* value as a starting point for a different thing: where wheels are
# read from (a wheelhouse may be any directory) is not where they are built; the triton build's
# requirements, the verify role's platform table and audit exemptions, the node health thresholds of one
# cross-host check are settings of their own.
NOT_ALIASES = ("pytorch_wheelhouse", "triton_wheelhouse", "torch_domains_wheelhouse",
               "triton_venv_build_requirements", "verify_platforms", "verify_venv_audit_exempt",
               "xhost_node_health_spec")

# The CUDA major of a PyTorch wheel index: .../whl/cu130 -> 13 (cuNNN: major and one minor digit).
CUDA_TAG = re.compile(r"/cu([0-9]{2,3})(/|$)", re.ASCII)


def cuda_of_index(url):
    match = CUDA_TAG.search(str(url or "").rstrip("/"))
    return int(match.group(1)[:-1]) if match else None


# The CUDA major of a versioned CUDA install: /usr/local/cuda-12.8 -> 12 (/usr/local/cuda, a symlink, states none).
CUDA_HOME = re.compile(r"/cuda-([0-9]+)\.[0-9]+/?$", re.ASCII)


def cuda_of_home(path):
    match = CUDA_HOME.search(str(path or ""))
    return int(match.group(1)) if match else None


# The CUDA major of a CUDA release (sparkforge_cuda_minor): 13.0 -> 13.
CUDA_RELEASE = re.compile(r"^([0-9]+)(\.[0-9]+)+$", re.ASCII)


def cuda_of_release(value):
    match = CUDA_RELEASE.match(str(value if value is not None else "").strip())
    return int(match.group(1)) if match else None


def cuda_of_number(value):
    text = str(value if value is not None else "").strip()
    return int(text) if text.isdigit() and text.isascii() else None


# One fact, read from each variable that states it: (variable, how to read it).  A variable that does not
# state it (an index without a cuNNN, an empty cusparselt_cuda_major) is left out.
PAIRINGS = {
    "CUDA major": (("sparkforge_cuda_major", cuda_of_number),
                   ("sparkforge_cuda_minor", cuda_of_release),
                   ("sparkforge_torch_index_url", cuda_of_index),
                   ("sparkforge_ml_pytorch_index_url", cuda_of_index),
                   ("cusparselt_cuda_major", cuda_of_number),
                   ("sparkforge_cuda_home", cuda_of_home),
                   ("fleet_build_cuda_home", cuda_of_home)),
}


def one_source(values, given):
    """(errors, one_source): two spellings of an input the user set with different values are errors;
    one_source: input -> (the spelling it came from, its value) for every input of ALIASES."""
    errors, out = [], {}
    for name, spellings in sorted(ALIASES.items()):
        set_ = [n for n in (name,) + spellings if n in given and n in values]
        differ = [n for n in set_[1:] if values[n] != values[set_[0]]]
        if differ:
            both = [set_[0]] + differ
            errors.append({"variable": both[0], "value": show(values[both[0]]), "message": (
                "%s: one input set twice with different values: %s; set it once, as %s (the roles read it from there)"
                % (" and ".join(both), " but ".join("%s=%s" % (n, show(values[n])) for n in both), name))})
            continue
        if set_:
            out[name] = (set_[0], values[set_[0]])
        elif name in values:
            out[name] = (name, values[name])
    return errors, out


def pairing_errors(sources, values):
    """Every variable that states a fact of PAIRINGS states the same."""
    errors = []
    for what, readers in sorted(PAIRINGS.items()):
        stated = []
        for name, read in readers:
            spelt, value = sources.get(name) or (name, values.get(name))
            fact = read(value) if value is not None else None
            if fact is not None:
                stated.append((spelt, value, fact))
        for spelt, value, fact in stated[1:]:
            first = stated[0]
            if fact != first[2]:
                errors.append({"variable": first[0], "value": show(first[1]), "message": (
                    "%s: %s=%s says %s %s but %s=%s says %s %s: they must agree; set both for one CUDA (e.g. "
                    "sparkforge_cuda_major: 13 with the index .../whl/cu130)"
                    % (first[0], first[0], show(first[1]), what, first[2], spelt, show(value), what, fact))})
    return errors


def ml_errors(values, sources, context):
    """The ML layer's inputs against the manifest's matrix and profiles (``context``)."""
    profile = (sources.get("sparkforge_ml_profile") or (None, None))[1]
    found = ml_inputs.input_problems(context.get("sparkforge_ml_packages") or {},
                                     context.get("sparkforge_ml_profiles") or {},
                                     values.get("ml_packages_pins") or {}, values.get("ml_packages_extra_matrix") or {},
                                     profile, values.get("ml_packages_packages") or None)
    out = []
    for variable, why in found:
        if variable == "ml_packages_profile":
            variable = (sources.get("sparkforge_ml_profile") or (variable,))[0]
        out.append({"variable": variable, "value": show(values.get(variable)), "message": "%s: %s" % (variable, why)})
    return out


def cross_check(values, given, context=None):
    """(errors, one_source values): ``values`` the typed values of validate.check, ``given`` the names the
    user set, ``context`` the manifest's ML matrix and profiles (none: the ML inputs are not checked)."""
    errors, sources = one_source(values, set(given))
    errors += pairing_errors(sources, values)
    if context:
        errors += ml_errors(values, sources, context)
    changed = dict((name, value) for name, (spelt, value) in sources.items()
                   if spelt != name and value != values.get(name))
    return errors, changed
