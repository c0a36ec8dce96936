# -*- coding: utf-8 -*-
"""The offline bundle's logic: Debian versions, apt closure, fetching with checks, matching a host's plan."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import gzip
import hashlib
import json
import os

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import apt_index, bundle

TARGET = bundle.target_of({"cuda_distro": "ubuntu2404", "cuda_repo_arch": "sbsa", "deb_arch": "arm64",
                           "architecture": "aarch64", "python_version": "3.12.3"})


def test_target_of_names_distro_arch_and_python_minor():
    assert TARGET["id"] == "ubuntu2404-arm64-py3.12"
    assert bundle.wheel_dir_name(TARGET) == "cp312-aarch64"
    with pytest.raises(bundle.BundleError, match="lacks deb_arch, python_version"):
        bundle.target_of({"cuda_distro": "ubuntu2404", "cuda_repo_arch": "sbsa", "architecture": "aarch64"})


@pytest.mark.parametrize("low,high", [
    ("1.0~rc1", "1.0"), ("1.9", "1.10"), ("1.0-1", "1.0-2"), ("9.9", "1:0.1"),
    ("2.28.3-1+cuda13.0", "2.28.7-1+cuda13.0"), ("13.0.2.14-1", "13.0.10.1-1"), ("1.0", "1.0a"),
    ("9.13.0.50-1", "9.13.0.50-1.1"),
])
def test_debian_version_order(low, high):
    assert apt_index.deb_version_cmp(low, high) == -1
    assert apt_index.deb_version_cmp(high, low) == 1
    assert apt_index.deb_version_cmp(low, low) == 0


PACKAGES = """\
Package: libcublas-13-0
Architecture: arm64
Version: 13.0.0.19-1
Filename: ./libcublas-13-0_13.0.0.19-1_arm64.deb
SHA256: %(a)s
Depends: cuda-toolkit-13-0-config-common, libc6 (>= 2.17)

Package: libcublas-13-0
Architecture: arm64
Version: 13.0.2.14-1
Filename: ./libcublas-13-0_13.0.2.14-1_arm64.deb
SHA256: %(b)s
Depends: cuda-toolkit-13-0-config-common

Package: libcublas-13-0
Architecture: amd64
Version: 13.0.9.9-1
Filename: ./libcublas-13-0_13.0.9.9-1_amd64.deb
SHA256: %(a)s

Package: cudnn9-cuda-13
Architecture: arm64
Version: 9.13.0.50-1
Filename: ./cudnn9-cuda-13_9.13.0.50-1_arm64.deb
SHA256: %(a)s
Depends: libcudnn9-cuda-13 (= 9.13.0.50-1) | libcudnn9-other, libstdc++6

Package: libcudnn9-cuda-13
Architecture: arm64
Version: 9.14.0.1-1
Filename: ./libcudnn9-cuda-13_9.14.0.1-1_arm64.deb
SHA256: %(a)s

Package: libcudnn9-cuda-13
Architecture: arm64
Version: 9.13.0.50-1
Filename: ./libcudnn9-cuda-13_9.13.0.50-1_arm64.deb
SHA256: %(a)s

Package: cuda-toolkit-13-0-config-common
Architecture: all
Version: 13.0.96-1
Filename: ./cuda-toolkit-13-0-config-common_13.0.96-1_all.deb
SHA256: %(a)s
""" % {"a": "a" * 64, "b": "b" * 64}


def test_apt_closure_follows_pins_relations_and_stays_in_the_index():
    chosen = apt_index.apt_closure(apt_index.parse_packages(PACKAGES), ["libcublas-13-0=13.0.*", "cudnn9-cuda-13"], "arm64")
    got = [(st["Package"], st["Version"]) for st in chosen]
    # The highest arm64 cuBLAS matching the glob; cudnn's `=` relation picks 9.13, not the newer 9.14;
    # libc6 and libstdc++6 are the distribution's (its mirror serves them).
    assert got == [("cuda-toolkit-13-0-config-common", "13.0.96-1"), ("cudnn9-cuda-13", "9.13.0.50-1"),
                   ("libcublas-13-0", "13.0.2.14-1"), ("libcudnn9-cuda-13", "9.13.0.50-1")]


def test_apt_closure_names_what_is_not_there():
    stanzas = apt_index.parse_packages(PACKAGES)
    with pytest.raises(apt_index.AptIndexError, match="libnccl2 is not in the repository's Packages index"):
        apt_index.apt_closure(stanzas, ["libnccl2=2.*"], "arm64")
    with pytest.raises(apt_index.AptIndexError, match=r"no version of libcublas-13-0 in the repository matches glob "
                                                      r"12\.\* \(requested; it has 13\.0\.0\.19-1, 13\.0\.2\.14-1\)"):
        apt_index.apt_closure(stanzas, ["libcublas-13-0=12.*"], "arm64")


def test_parse_depends_keeps_alternatives_and_relations():
    assert apt_index.parse_depends("a (>= 1.0), b | c (= 2:3-1), d:any") == [
        [("a", ">=", "1.0")], [("b", None, None), ("c", "=", "2:3-1")], [("d", None, None)]]


class Fetcher:
    def __init__(self, files):
        self.files = files
        self.calls = []

    def __call__(self, url):
        self.calls.append(url)
        if url not in self.files:
            raise bundle.BundleError("%s: HTTP 404 Not Found" % url)
        return self.files[url]


def sha(data):
    return hashlib.sha256(data).hexdigest()


def test_a_file_is_checked_before_it_is_written_and_not_fetched_again(tmp_path):
    fetch = Fetcher({"https://m/x.deb": b"payload"})
    maker = bundle.Maker(str(tmp_path), fetch)
    with pytest.raises(bundle.BundleError, match="has sha256 %s, expected %s: not written" % (sha(b"payload"), "0" * 64)):
        maker.file("https://m/x.deb", "files/x.deb", "deb", "t", "0" * 64)
    assert not (tmp_path / "files" / "x.deb").exists()
    item = maker.file("https://m/x.deb", "files/x.deb", "deb", "t", sha(b"payload"))
    assert item["size"] == 7 and (tmp_path / "files" / "x.deb").read_bytes() == b"payload"
    maker.finish({}, {})
    again = bundle.Maker(str(tmp_path), fetch)
    again.file("https://m/x.deb", "files/x.deb", "deb", "t", sha(b"payload"))
    assert len(fetch.calls) == 2 and again.fetched == []


def flat_repo(base, packages_text, release_sha=None):
    packages = packages_text.encode()
    release = ("Origin: NVIDIA\nSHA256:\n %s %d Packages\n %s %d Packages.gz\n" % (
        release_sha or sha(packages), len(packages), sha(gzip.compress(packages)), 0)).encode()
    files = {base + "Packages": packages, base + "Release": release, base + "InRelease": b"-----BEGIN PGP\n" + release,
             base + "Release.gpg": b"sig"}
    return files


def test_apt_keeps_the_signed_index_unchanged_and_brings_the_closure(tmp_path):
    base = "https://mirror.example/compute/cuda/repos/ubuntu2404/sbsa/"
    debs = {"libcublas-13-0_13.0.2.14-1_arm64.deb": b"cublas", "cuda-toolkit-13-0-config-common_13.0.96-1_all.deb": b"cfg",
            "cuda-keyring_1.1-1_all.deb": b"keyring"}
    text = "\n".join((
        "Package: libcublas-13-0\nArchitecture: arm64\nVersion: 13.0.2.14-1\nFilename: ./%s\nSHA256: %s\n"
        "Depends: cuda-toolkit-13-0-config-common\n" % ("libcublas-13-0_13.0.2.14-1_arm64.deb", sha(b"cublas")),
        "Package: cuda-toolkit-13-0-config-common\nArchitecture: all\nVersion: 13.0.96-1\nFilename: ./%s\n"
        "SHA256: %s\n" % ("cuda-toolkit-13-0-config-common_13.0.96-1_all.deb", sha(b"cfg")),
        "Package: cuda-keyring\nArchitecture: all\nVersion: 1.1-1\nFilename: ./cuda-keyring_1.1-1_all.deb\n"
        "SHA256: %s\n" % sha(b"keyring")))
    files = flat_repo(base, text)
    files.update(dict((base + name, data) for name, data in debs.items()))
    maker = bundle.Maker(str(tmp_path), Fetcher(files))
    maker.apt(base, TARGET, ["libcublas-13-0=13.0.*"], keyring={"version": "1.1-1", "sha256": sha(b"keyring")})
    manifest = maker.finish({TARGET["id"]: TARGET}, {})
    repo = tmp_path / "apt" / "ubuntu2404" / "sbsa"
    assert sorted(os.listdir(str(repo))) == sorted(["InRelease", "Packages", "Release", "Release.gpg"] + list(debs))
    assert (repo / "InRelease").read_bytes() == files[base + "InRelease"]
    keys = [(s["kind"], s["url"]) for s in manifest["sources"]]
    assert keys == [("http", base), ("http", base + "cuda-keyring_1.1-1_all.deb")]

    with pytest.raises(bundle.BundleError, match="cuda-keyring 1.1-1 has sha256 %s in Packages, the pin is %s"
                                                 % (sha(b"keyring"), "f" * 64)):
        pin = {"version": "1.1-1", "sha256": "f" * 64}
        bundle.Maker(str(tmp_path / "b"), Fetcher(files)).apt(base, TARGET, [], keyring=pin)
    tampered = flat_repo(base, text, release_sha="e" * 64)
    with pytest.raises(bundle.BundleError, match="Packages does not match the sha256 its Release lists"):
        bundle.Maker(str(tmp_path / "c"), Fetcher(tampered)).apt(base, TARGET, [])
    unsigned = dict((k, v) for k, v in files.items() if not k.endswith(("InRelease", "Release.gpg")))
    with pytest.raises(bundle.BundleError, match="neither InRelease nor Release.gpg"):
        bundle.Maker(str(tmp_path / "d"), Fetcher(unsigned)).apt(base, TARGET, [])


def manifest_with(sources, targets=(TARGET,)):
    return {"format": bundle.FORMAT, "targets": list(targets), "sources": sources, "items": []}


APT = "https://m/compute/cuda/repos/ubuntu2404/sbsa/"
ROWS = [
    {"component": "cuda_libs", "source": "CUDA apt repository", "url": APT, "kind": "http", "variable": "v"},
    {"component": "pytorch", "source": "PyTorch source (git)", "url": "https://git/pytorch", "kind": "git",
     "key": "pytorch_repo", "ref": "v2.10.0", "variable": "sparkforge_pytorch_repo_url"},
    {"component": "torch_domains", "source": "torchvision source (git)", "url": "https://git/vision", "kind": "git",
     "key": "torchvision_repo", "ref": "v0.25.0", "variable": "v"},
    {"component": "ml_packages", "source": "ML package index", "url": "(pip's configuration on the host)",
     "kind": "pipconf", "variable": "ml_packages_index_url"},
]
PLAN = {"torch": {"source": "source", "version": "2.10.0"}, "actions": {"ml_packages": "install"},
        "ml_packages": [{"name": "einops", "requirement": "einops==0.8.2", "method": "wheel"}]}
GOOD = [
    {"kind": "http", "url": APT, "targets": {TARGET["id"]: {"path": "apt/ubuntu2404/sbsa"}}},
    {"kind": "git", "url": "https://git/pytorch", "targets": {"any": {
        "path": "git/pytorch.git", "ref": "v2.10.0", "commit": "c" * 40,
        "mirrors": {"https://github.com/pybind/pybind11.git": "git/pybind11.git"}}}},
    {"kind": "git", "url": "https://git/vision", "targets": {"any": {"path": "git/vision.git", "ref": "v0.25.0"}}},
    {"kind": "index", "url": "(pip's configuration)", "targets": {TARGET["id"]: {
        "path": "wheels/cp312-aarch64/simple", "requirements": ["einops==0.8.2"]}}},
]


def test_match_points_every_source_at_the_hosts_copy():
    rows, problems = bundle.match(manifest_with(GOOD), ROWS, TARGET, PLAN)
    assert problems == [] and [r["status"] for r in rows] == ["bundle"] * 4
    values = bundle.overrides(rows, "/opt/sparkforge/bundle", TARGET)
    assert values["cuda_libs_repo_url"] == "file:///opt/sparkforge/bundle/apt"
    assert values["pytorch_repo"] == "file:///opt/sparkforge/bundle/git/pytorch.git"
    assert values["torch_domains_repos"] == {"torchvision": "file:///opt/sparkforge/bundle/git/vision.git"}
    assert values["ml_packages_index_url"] == "file:///opt/sparkforge/bundle/wheels/cp312-aarch64/simple"
    assert values["ml_packages_extra_index_urls"] == [] and values["ml_packages_find_links"] == []
    assert values["sparkforge_bundle_env"] == {
        "PIP_CONFIG_FILE": os.devnull, "GIT_CONFIG_COUNT": "2",
        "GIT_CONFIG_KEY_0": "url.file:///opt/sparkforge/bundle/git/pybind11.git.insteadOf",
        "GIT_CONFIG_VALUE_0": "https://github.com/pybind/pybind11.git",
        "GIT_CONFIG_KEY_1": "protocol.file.allow", "GIT_CONFIG_VALUE_1": "always",
        "SPARKFORGE_PLAN_ENV": "PIP_CONFIG_FILE"}
    dirs, paths = bundle.host_copy(rows, TARGET)
    assert paths == ["apt/ubuntu2404/sbsa/", "git/pybind11.git/", "git/pytorch.git/", "git/vision.git/",
                     "wheels/cp312-aarch64/"]
    assert dirs == ["apt/ubuntu2404", "git", "wheels"]


def test_match_names_each_item_the_bundle_cannot_answer():
    other = dict(TARGET, id="ubuntu2204-arm64-py3.10")
    sources = json.loads(json.dumps(GOOD))
    sources[0]["targets"] = {other["id"]: {"path": "apt/ubuntu2204/sbsa"}}
    sources[1]["targets"]["any"]["ref"] = "v2.9.0"
    sources[1]["targets"]["any"]["commit"] = "d" * 40
    del sources[2]
    sources[2]["targets"][TARGET["id"]]["requirements"] = ["einops==0.8.1"]
    bad = [{"path": "git/pytorch.git/objects/pack/p.pack", "problem": "sha256 1, the manifest says 2"}]
    rows, problems = bundle.match(manifest_with(sources, (other, TARGET)), ROWS, TARGET, PLAN, bad)
    assert [r["status"] for r in rows] == ["missing"] * 4
    assert problems == [
        "cuda_libs: CUDA apt repository (%s): the bundle has it for ubuntu2204-arm64-py3.10 only, this host is "
        "ubuntu2404-arm64-py3.12" % APT,
        "pytorch: PyTorch source (git) (https://git/pytorch): the bundle's mirror holds v2.9.0, the plan needs v2.10.0",
        "torch_domains: torchvision source (git) (https://git/vision): not in the bundle",
        "ml_packages: ML package index: the bundle's wheels were made for einops==0.8.1, the plan needs einops==0.8.2"]
    rows, problems = bundle.match(manifest_with(GOOD), ROWS, TARGET, PLAN, bad)
    assert problems == ["pytorch: PyTorch source (git): bundle file git/pytorch.git/objects/pack/p.pack: sha256 1, "
                        "the manifest says 2"]
    rows, problems = bundle.match(manifest_with(GOOD[1:], (other,)), ROWS[:1], TARGET, PLAN)
    assert problems == ["cuda_libs: CUDA apt repository (%s): the bundle was made for ubuntu2204-arm64-py3.10, this "
                        "host is ubuntu2404-arm64-py3.12" % APT]


def test_verify_finds_missing_resized_and_changed_files(tmp_path):
    (tmp_path / "a").write_bytes(b"abc")
    (tmp_path / "b").write_bytes(b"abcd")
    (tmp_path / "c").write_bytes(b"xyz")
    manifest = {"items": [{"path": "a", "size": 3, "sha256": sha(b"abc")}, {"path": "b", "size": 3, "sha256": sha(b"abc")},
                          {"path": "c", "size": 3, "sha256": sha(b"abc")}, {"path": "d", "size": 1, "sha256": "0" * 64},
                          {"path": "../e", "size": 1, "sha256": "0" * 64}]}
    assert bundle.verify(str(tmp_path), manifest) == [
        {"path": "b", "problem": "size 4, the manifest says 3"},
        {"path": "c", "problem": "sha256 %s, the manifest says %s" % (sha(b"xyz"), sha(b"abc"))},
        {"path": "d", "problem": "missing from the bundle directory"},
        {"path": "../e", "problem": "points outside the bundle"}]


def test_verify_names_every_file_the_manifest_does_not_list_and_malformed_digests(tmp_path):
    (tmp_path / "manifest.json").write_text("{}")
    (tmp_path / "wheels" / "cp311-x86_64").mkdir(parents=True)
    (tmp_path / "wheels" / "cp311-x86_64" / "torch-2.10.0-py3-none-any.whl").write_bytes(b"abc")
    (tmp_path / "wheels" / "cp311-x86_64" / "evil-1.0-py3-none-any.whl").write_bytes(b"x")
    (tmp_path / "apt").mkdir()
    (tmp_path / "apt" / "short").write_bytes(b"abc")
    manifest = {"items": [{"path": "wheels/cp311-x86_64/torch-2.10.0-py3-none-any.whl", "size": 3, "sha256": sha(b"abc")},
                          {"path": "apt/short", "size": 3, "sha256": sha(b"abc")[:63]}]}
    assert bundle.verify(str(tmp_path), manifest) == [
        {"path": "wheels/cp311-x86_64/evil-1.0-py3-none-any.whl", "problem": "not in the manifest (an extra file)"},
        {"path": "apt/short", "problem": "the manifest's sha256 %r is not 64 hexadecimal digits" % sha(b"abc")[:63]}]
    # Asked about some paths only (a host's part), extras are the whole bundle's business.
    assert bundle.verify(str(tmp_path), manifest, paths=["wheels/cp311-x86_64/torch-2.10.0-py3-none-any.whl"]) == []


def test_match_marks_an_index_row_bad_when_a_wheel_beside_its_simple_pages_differs():
    wheel_dir = "wheels/cp312-aarch64"
    manifest = manifest_with([{"kind": "index", "url": "https://download.pytorch.org/whl/cu130",
                               "targets": {TARGET["id"]: {"path": wheel_dir + "/simple",
                                                          "requirements": ["torch==2.11.0"]}}}])
    item = {"component": "pytorch", "source": "torch package index", "url": "https://download.pytorch.org/whl/cu130",
            "kind": "index", "variable": "sparkforge_torch_index_url", "sha256": None, "key": "torch_index_url"}
    plan = {"torch": {"version": "2.11.0", "source": "index"}, "actions": {"pytorch": "install"}}
    bad = [{"path": wheel_dir + "/torch-2.11.0-cp312-cp312-linux_aarch64.whl", "problem": "sha256 1, the manifest says 2"}]
    rows, problems = bundle.match(manifest, [item], TARGET, plan, bad)
    assert rows[0]["status"] == "bad"
    assert problems == ["pytorch: torch package index: bundle file %s/torch-2.11.0-cp312-cp312-linux_aarch64.whl: "
                        "sha256 1, the manifest says 2" % wheel_dir]


def test_load_manifest_refuses_what_is_not_a_bundle(tmp_path):
    with pytest.raises(bundle.BundleError, match="cannot read the bundle's manifest"):
        bundle.load_manifest(str(tmp_path))
    (tmp_path / "manifest.json").write_text('{"format": 99}')
    with pytest.raises(bundle.BundleError, match="is not a sparkforge bundle manifest of format 1"):
        bundle.load_manifest(str(tmp_path))


def test_git_names_are_readable_and_distinct():
    a = bundle.git_name("https://github.com/pytorch/pytorch.git")
    b = bundle.git_name("https://mirror.example/pytorch/pytorch.git")
    assert a.startswith("github.com_pytorch_pytorch-") and a.endswith(".git") and a != b


BUILD_ROW = {"component": "pytorch", "source": "Python packages for the builds (pip)",
             "url": "(pip's configuration on the host)", "kind": "pipconf", "key": "build_index_url",
             "variable": "sparkforge_fleet_pip_env"}
BUILD_SOURCE = {"kind": "index", "url": "build (pip's configuration)", "targets": {TARGET["id"]: {
    "path": "wheels/cp312-aarch64/simple", "requirements": ["setuptools", "wheel"], "torch": "2.10.0"}}}


def test_the_builds_packages_point_the_builders_pip_at_the_bundle():
    rows, problems = bundle.match(manifest_with([BUILD_SOURCE]), [BUILD_ROW], TARGET, PLAN)
    assert problems == []
    values = bundle.overrides(rows, "/b", TARGET)
    pip = {"PIP_INDEX_URL": "file:///b/wheels/cp312-aarch64/simple", "PIP_CONFIG_FILE": os.devnull}
    assert values["sparkforge_fleet_pip_env"] == pip and values["triton_pip_env"] == pip
    assert values["sparkforge_bundle_env"] == dict(pip, SPARKFORGE_PLAN_ENV="PIP_CONFIG_FILE,PIP_INDEX_URL")
    assert bundle.host_copy(rows, TARGET) == (["wheels"], ["wheels/cp312-aarch64/"])
    rows, problems = bundle.match(manifest_with([BUILD_SOURCE]), [BUILD_ROW], TARGET,
                                  dict(PLAN, torch={"source": "source", "version": "2.12.0"}))
    assert problems == ["pytorch: Python packages for the builds (pip): the bundle's build packages are for torch "
                        "2.10.0, the plan builds 2.12.0"]


def test_a_rerun_removes_what_it_no_longer_lists_from_its_own_directories_only(tmp_path):
    (tmp_path / "wheels" / "cp311-x86_64").mkdir(parents=True)
    (tmp_path / "wheels" / "cp311-x86_64" / "old-1.0-py3-none-any.whl").write_bytes(b"old")
    (tmp_path / ".constraints-cp311-x86_64.txt").write_text("torch==2.10.0\n")
    (tmp_path / "notes.txt").write_text("the site's own file\n")
    maker = bundle.Maker(str(tmp_path), fetch=None)
    maker.write("apt/ubuntu2404/x86_64/Packages", b"Package: x\n")
    maker.record("apt/ubuntu2404/x86_64/Packages", "https://m/Packages", "apt-index", "t")
    manifest = maker.finish({}, [])
    assert not (tmp_path / "wheels" / "cp311-x86_64" / "old-1.0-py3-none-any.whl").exists()
    assert not (tmp_path / ".constraints-cp311-x86_64.txt").exists()
    # Not the maker's: kept, and a bundle holding it is refused until it is moved out.
    assert bundle.verify(str(tmp_path), manifest) == [{"path": "notes.txt", "problem": "not in the manifest (an extra file)"}]
