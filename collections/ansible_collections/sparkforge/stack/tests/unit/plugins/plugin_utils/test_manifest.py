# -*- coding: utf-8 -*-
"""plugin_utils/manifest.py, the one controller-side reader of the version manifest: the roles' merge (each file's
top-level keys, files in name order), a subset of files, and every file it cannot use refused naming it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from ansible_collections.sparkforge.stack.plugins.plugin_utils import manifest
from ansible_collections.sparkforge.stack.tests.unit.utils.harness import COLLECTION


def test_the_collections_manifest_is_every_file_merged():
    directory = manifest.directory()
    assert directory == os.path.join(COLLECTION, "roles", "manifest", "defaults", "main")
    data = manifest.load()
    for path in glob.glob(os.path.join(directory, "*.yml")):
        with open(path) as handle:
            part = yaml.safe_load(handle) or {}
        assert all(data[key] == value for key, value in part.items()), path
    only = manifest.load(files=("torch.yml",))
    assert "sparkforge_torch_releases" in only and "sparkforge_gpu_platforms" not in only


_KEYS = st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), min_size=1, max_size=3, unique=True)


@settings(max_examples=50, deadline=None)
@given(first=_KEYS, second=_KEYS)
def test_a_fact_in_two_files_is_refused_else_the_files_merge(tmp_path_factory, first, second):
    root = tmp_path_factory.mktemp("m")
    (root / "a.yml").write_text(yaml.safe_dump(dict((k, "a") for k in first)))
    (root / "b.yml").write_text(yaml.safe_dump(dict((k, "b") for k in second)))
    both = sorted(set(first) & set(second))
    if both:
        with pytest.raises(manifest.ManifestError, match=r"(%s) is defined in both a.yml and b.yml" % "|".join(both)):
            manifest.load(str(root))
    else:
        assert manifest.load(str(root)) == dict([(k, "a") for k in first] + [(k, "b") for k in second])


@pytest.mark.parametrize("text, why", [("- a\n- b\n", "mappings of variables, this one is a list"),
                                       ("a: [\n", "is not YAML")])
def test_a_file_it_cannot_use_is_refused_naming_it(tmp_path, text, why):
    (tmp_path / "x.yml").write_text(text)
    with pytest.raises(manifest.ManifestError, match=why) as err:
        manifest.load(str(tmp_path))
    assert str(tmp_path / "x.yml") in str(err.value)
    with pytest.raises(manifest.ManifestError, match="no manifest directory here"):
        manifest.load(str(tmp_path / "absent"))
    with pytest.raises(manifest.ManifestError, match="cannot read it"):
        manifest.load(str(tmp_path), ("missing.yml",))
