# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import textwrap

import pytest
import yaml

from sparkforge.tooling import checksums as cs

A, B, C = "a" * 64, "b" * 64, "c" * 64

# Two stanzas as apt-ftparchive writes them (a continuation line, two keyring versions).
PACKAGES = textwrap.dedent("""\
    Package: cuda-keyring
    Architecture: all
    Version: 1.0-1
    Filename: ./cuda-keyring_1.0-1_all.deb
    SHA256: %s
    Description: GPG keyring for the CUDA repository
     The key that signs the repository.

    Package: cuda-keyring
    Architecture: all
    Version: 1.1-1
    Filename: ./cuda-keyring_1.1-1_all.deb
    SHA256: %s

    Package: libcublas-13-0
    Architecture: arm64
    Version: 13.0.2.14-1
    SHA256: %s
    """) % (A, B.upper(), C)


def test_keyring_digest_is_the_stanza_of_that_version():
    assert cs.keyring_from_packages(PACKAGES, "1.1-1") == B  # lowercased
    assert cs.keyring_from_packages(PACKAGES, "1.0-1") == A
    assert cs.keyring_from_packages(PACKAGES, "1.2-1") is None
    assert cs.keyring_versions(PACKAGES) == ["1.0-1", "1.1-1"]


def test_a_keyring_stanza_without_a_digest_is_an_error_not_a_miss():
    broken = PACKAGES.replace("SHA256: %s" % B.upper(), "SHA256: 1234")
    with pytest.raises(cs.ChecksumError, match=r"cuda-keyring 1.1-1 has SHA256 '1234', not 64 hexadecimal digits"):
        cs.keyring_from_packages(broken, "1.1-1")


# The shape of NVIDIA's redistrib_<version>.json: per platform (and CUDA variant) one archive.
REDISTRIB = {
    "release_date": "2025-08-01", "release_label": "0.8.1", "release_product": "cusparselt",
    "libcusparse_lt": {
        "name": "NVIDIA cuSPARSELt", "license": "cuSPARSELt", "version": "0.8.1.1", "cuda_variant": ["12", "13"],
        "linux-x86_64": {"cuda13": {"relative_path": "libcusparse_lt/linux-x86_64/"
                                                     "libcusparse_lt-linux-x86_64-0.8.1.1_cuda13-archive.tar.xz",
                                    "sha256": A, "md5": "0" * 32, "size": "1"}},
        "linux-sbsa": {"cuda13": {"relative_path": "libcusparse_lt/linux-sbsa/"
                                                   "libcusparse_lt-linux-sbsa-0.8.1.1_cuda13-archive.tar.xz",
                                  "sha256": B, "md5": "0" * 32, "size": "1"}},
    },
}


def test_redistrib_names_its_files_and_the_deb_only_when_listed():
    text = json.dumps(REDISTRIB)
    assert sorted(cs.redistrib_files(text)) == ["libcusparse_lt-linux-sbsa-0.8.1.1_cuda13-archive.tar.xz",
                                                "libcusparse_lt-linux-x86_64-0.8.1.1_cuda13-archive.tar.xz"]
    # NVIDIA's lists name the archives, not the local-repo .deb the project downloads: no pin.
    assert cs.cusparselt_from_redistrib(text, "0.8.1", "ubuntu2404", "arm64") is None
    listed = dict(REDISTRIB, local={"relative_path": "0.8.1/local_installers/"
                                                     "cusparselt-local-repo-ubuntu2404-0.8.1_0.8.1-1_arm64.deb",
                                    "sha256": C.upper()})
    assert cs.cusparselt_from_redistrib(json.dumps(listed), "0.8.1", "ubuntu2404", "aarch64") == C


@pytest.mark.parametrize("text,message", [
    ("{not json", "not JSON"),
    (json.dumps({"x": {"relative_path": "a.tar.xz", "sha256": "zz"}}), "a.tar.xz has sha256 'zz', not 64 hexadecimal"),
])
def test_a_bad_redistrib_is_an_error(text, message):
    with pytest.raises(cs.ChecksumError, match=message):
        cs.redistrib_files(text)


def test_compare_says_same_added_changed():
    data = {"1.1-1": {"ubuntu2404": {"x86_64": A, "sbsa": B}}}
    rows = cs.compare(data, [(("1.1-1", "ubuntu2404", "x86_64"), A), (("1.1-1", "ubuntu2404", "sbsa"), C),
                             (("1.1-1", "debian12", "sbsa"), C)])
    assert [(r["path"][1:], r["status"], r["data"]) for r in rows] == [
        (["ubuntu2404", "x86_64"], "same", A), (["ubuntu2404", "sbsa"], "changed", B),
        (["debian12", "sbsa"], "added", None)]


DATA = textwrap.dedent("""\
    ---
    # Head comment.
    other: 1
    sparkforge_cuda_keyring_sha256_map:
      "1.1-1":
        ubuntu2404:
          # source: somewhere, read 2026-01-01
          x86_64: %s  # kept? no: the leaf is rewritten
          sbsa: %s

    # Between.
    sparkforge_cusparselt_sha256: {}
    tail: [1, 2]
    """) % (A, B)


def test_set_leaf_replaces_inserts_and_keeps_the_rest():
    text = cs.set_leaf(DATA, cs.KEYRING_VARIABLE, ["1.1-1", "ubuntu2404", "x86_64"], C, "Packages of X, read D")
    text = cs.set_leaf(text, cs.KEYRING_VARIABLE, ["1.1-1", "ubuntu2404", "sbsa"], A, "Packages of Y, read D")
    text = cs.set_leaf(text, cs.KEYRING_VARIABLE, ["1.1-1", "debian12", "sbsa"], B, "Packages of Z, read D")
    text = cs.set_leaf(text, cs.CUSPARSELT_VARIABLE, ["0.8.1", "ubuntu2404", "arm64"], C, "redistrib, read D")
    data = yaml.safe_load(text)
    assert data[cs.KEYRING_VARIABLE] == {"1.1-1": {"ubuntu2404": {"x86_64": C, "sbsa": A}, "debian12": {"sbsa": B}}}
    assert data[cs.CUSPARSELT_VARIABLE] == {"0.8.1": {"ubuntu2404": {"arm64": C}}}
    assert data["other"] == 1 and data["tail"] == [1, 2]
    lines = text.splitlines()
    for comment in ("# Head comment.", "# Between."):
        assert comment in lines
    # Each written leaf has its source on the line above; the old source line was replaced, not stacked.
    for source, leaf in (("Packages of X", "x86_64: " + C), ("Packages of Y", "sbsa: " + A),
                         ("Packages of Z", "sbsa: " + B), ("redistrib", "arm64: " + C)):
        where = [i for i, line in enumerate(lines) if line.strip() == leaf]
        assert len(where) == 1 and lines[where[0] - 1].strip() == "# source: %s, read D" % source, text
    assert "somewhere" not in text


def test_set_leaf_needs_the_variable():
    with pytest.raises(cs.ChecksumError, match="no top-level sparkforge_cusparselt_sha256"):
        cs.set_leaf("---\nother: 1\n", cs.CUSPARSELT_VARIABLE, ["0.8.1"], A, "s")


def test_the_committed_pins_name_their_source():
    """Every leaf of the shipped data file has a '# source:' line above it naming a document and a date."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.path.join(root, "collections", "ansible_collections", "sparkforge", "stack", "roles", "manifest",
                        "defaults", "main", "checksums.yml")
    with open(path) as handle:
        lines = handle.read().splitlines()
    leaves = [i for i, line in enumerate(lines) if cs.HEX64.match(line.strip().split(": ")[-1])]
    assert leaves
    for i in leaves:
        assert lines[i - 1].strip().startswith("# source: ") and "read 20" in lines[i - 1], lines[i]
