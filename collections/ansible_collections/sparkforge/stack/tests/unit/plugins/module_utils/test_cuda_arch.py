# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Properties of cuda/arch.py, the one home of CUDA architecture names: the forms round-trip, the
canonical list is a fixed point, and "runs on" follows CUDA's binary-compatibility rules for the
plain, a and f variants and for PTX."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
from hypothesis import given, strategies as st

from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import arch
from ansible_collections.sparkforge.stack.plugins.module_utils.build import torch_build
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import fatbin
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import heavy_build
from ansible_collections.sparkforge.stack.plugins.module_utils.plan import validate

# A GPU source build's facts (the manifest's shape: one torch-form arch variable) for the heavy build's reader.
GPU_BUILD = {"arch_env": [{"name": "TORCH_CUDA_ARCH_LIST", "form": "torch"}], "jobs_env": "MAX_JOBS",
             "nvcc_threads": 2, "job_memory_gib": 4}

majors = st.integers(min_value=1, max_value=15)
minors = st.integers(min_value=0, max_value=9)
variants = st.sampled_from(arch.VARIANTS)
entries = st.builds(lambda M, m, v, p: arch.parse_name("%d.%d%s%s" % (M, m, v, "+PTX" if p else "")),
                    majors, minors, variants, st.booleans())
targets = st.tuples(majors, minors)


@given(entries)
def test_torch_and_sm_forms_round_trip(entry):
    assert arch.parse_name(entry["text"]) == entry
    again = arch.from_sm(arch.to_sm(entry, "compute" if entry["ptx"] else "sm"))
    assert again == entry
    assert arch.parse_sm(arch.to_sm(entry)) == (entry["major"], entry["minor"], entry["variant"])
    assert arch.capability(entry["base"]) == arch.capability(arch.to_sm(entry)[:-1] if entry["variant"]
                                                             else arch.to_sm(entry))


@given(st.lists(entries, max_size=6), st.sampled_from([";", ",", " ", " ; "]))
def test_canonical_list_is_a_fixed_point_whatever_the_separator(items, sep):
    canonical = arch.to_torch(items)
    assert arch.to_torch(arch.parse_list(sep.join(e["text"] for e in items))) == canonical
    assert arch.to_torch(arch.parse_list(canonical)) == canonical


@given(entries, targets)
def test_runs_on_follows_cudas_binary_compatibility(entry, target):
    major, minor, variant = entry["major"], entry["minor"], entry["variant"]
    same_family_newer = target[0] == major and target[1] >= minor
    sass = (major, minor) == target if variant == "a" else same_family_newer
    if variant == "a":
        ptx = (major, minor) == target
    elif variant == "f":
        ptx = same_family_newer
    else:
        ptx = (major, minor) <= target
    assert arch.runs_on(entry, target) == (sass or (entry["ptx"] and ptx))
    # Every caller answers the same: the torch build's coverage check, the fat-binary audit.
    assert (torch_build.uncovered_capabilities([entry], ["%d.%d" % target]) == []) == arch.runs_on(entry, target)
    level = fatbin.arch_level(arch.to_sm(entry), target)
    assert (level is not None) == sass
    assert (fatbin.arch_level(arch.to_sm(entry, "compute"), target) == "jit") == ptx


@pytest.mark.parametrize("text", ["Hopper", "9", "9.0b", "sm_90", "9.0+ptx", "\uff19.0", "9.0;;x"])
def test_every_reader_refuses_what_the_one_parser_refuses(text):
    with pytest.raises(arch.ArchError) as err:
        arch.parse_list(text)
    assert "architecture" in str(err.value) or "TORCH_CUDA_ARCH_LIST" in str(err.value)
    with pytest.raises(torch_build.ArchListError):
        torch_build.plan_arch_list(text, "2.11.0", {}, "dgx_spark", [], {}, {})
    with pytest.raises(heavy_build.HeavyBuildError):
        heavy_build.build_env("flash-attn", GPU_BUILD, text, 4, 16.0)
    with pytest.raises(validate.Invalid):
        validate.check_string(text, "arch_list", {})


# NVIDIA's own examples (the pages cited in cuda/arch.py's docstring), each answered by the one rule.
@pytest.mark.parametrize("name, target, runs", [
    ("8.0", "8.6", True), ("8.6", "8.0", False), ("8.6", "9.0", False),        # cubin: same major, >= minor
    ("9.0+PTX", "10.0", True), ("9.0+PTX", "12.1", True),                      # PTX: any later capability
    ("10.0f", "10.3", True), ("10.0f+PTX", "10.3", True), ("10.0f", "11.0", False), ("10.0f+PTX", "12.0", False),
    ("10.3f", "10.0", False), ("12.0f", "12.1", True),                         # f: the family, from X.Y on
    ("9.0a", "9.0", True), ("10.0a", "10.3", False), ("9.0a+PTX", "10.0", False),  # a: exactly X.Y
])
def test_runs_on_answers_nvidias_documented_examples(name, target, runs):
    assert arch.runs_on(name, target) is runs
