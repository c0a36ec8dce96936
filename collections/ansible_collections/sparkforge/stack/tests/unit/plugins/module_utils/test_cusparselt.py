# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import gzip
import os
import subprocess
import sys
import time

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import cusparselt as cl
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda.cusparselt import CusparseltError

KEY = "/usr/share/keyrings/cusparselt-local-0A1B2C3D-keyring.gpg"
URI = "file:///var/cusparselt-local-repo-ubuntu2404-0.8.1"


def test_names_for_version_distro_arch():
    assert cl.deb_filename("0.8.1", "ubuntu2404", "arm64") == "cusparselt-local-repo-ubuntu2404-0.8.1_0.8.1-1_arm64.deb"
    assert cl.deb_filename("0.8.1", "ubuntu2204", "x86_64") == "cusparselt-local-repo-ubuntu2204-0.8.1_0.8.1-1_amd64.deb"
    assert cl.repo_dir("0.8.1", "ubuntu2404") == "/var/cusparselt-local-repo-ubuntu2404-0.8.1"
    assert cl.repo_package("0.8.0", "ubuntu2404") == "cusparselt-local-repo-ubuntu2404-0.8.0"
    assert cl.deb_url(None, "0.8.0", "ubuntu2404", "aarch64") == (
        "https://developer.download.nvidia.com/compute/cusparselt/0.8.0/local_installers/"
        "cusparselt-local-repo-ubuntu2404-0.8.0_0.8.0-1_arm64.deb"
    )
    # mirrors: with or without a {version} placeholder, with or without a trailing slash
    assert cl.deb_url("http://mirror/nv/{version}", "0.8.1", "ubuntu2404", "amd64") == (
        "http://mirror/nv/0.8.1/cusparselt-local-repo-ubuntu2404-0.8.1_0.8.1-1_amd64.deb"
    )
    assert cl.deb_url("http://mirror/flat/", "0.8.1", "ubuntu2404", "amd64").startswith("http://mirror/flat/cusparselt-")
    assert cl.triplet("arm64") == "aarch64-linux-gnu"
    assert cl.apt_lists_glob("0.8.1", "ubuntu2404") == "/var/lib/apt/lists/_var_cusparselt-local-repo-ubuntu2404-0.8.1_*"


@pytest.mark.parametrize("arch,expected", [("x86_64", "amd64"), ("amd64", "amd64"), ("aarch64", "arm64"),
                                           ("ARM64", "arm64"), ("sbsa", "arm64")])
def test_normalize_arch(arch, expected):
    assert cl.normalize_arch(arch) == expected


def test_unsupported_targets_are_rejected_with_the_supported_list():
    with pytest.raises(CusparseltError, match="unsupported architecture 'ppc64el'.*amd64, arm64"):
        cl.normalize_arch("ppc64el")
    with pytest.raises(CusparseltError, match="unsupported distro 'fedora40'.*ubuntu2204, ubuntu2404"):
        cl.validate_target("0.8.1", "fedora40", "arm64")
    with pytest.raises(CusparseltError, match="not a cuSPARSELt release"):
        cl.validate_target("latest", "ubuntu2404", "arm64")
    assert cl.validate_target("0.8.1", "ubuntu2404", "aarch64") == ("0.8.1", "ubuntu2404", "arm64")


def test_distro_from_os_release():
    ubuntu = 'NAME="Ubuntu"\nVERSION_ID="24.04"\nID=ubuntu\nID_LIKE=debian\n'
    debian = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nVERSION_ID="12"\nID=debian\n'
    assert cl.distro_from_os_release(ubuntu) == "ubuntu2404"
    assert cl.distro_from_os_release(debian) == "debian12"
    assert cl.distro_from_os_release("ID=arch\n") is None


def test_parse_nvcc_version():
    text = ("nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2025 NVIDIA Corporation\n"
            "Built on Wed_Aug_20_01:58:59_PM_PDT_2025\nCuda compilation tools, release 13.0, V13.0.88\n"
            "Build cuda_13.0.r13.0/compiler.36424714_0\n")
    assert cl.parse_nvcc_version(text) == 13
    assert cl.parse_nvcc_version("Cuda compilation tools, release 12.8, V12.8.93") == 12
    assert cl.parse_nvcc_version("command not found") is None
    assert cl.parse_nvcc_version("") is None


def test_real_nvcc_here_if_present():
    nvcc = "/usr/local/cuda/bin/nvcc"
    if not os.path.exists(nvcc):
        pytest.skip("no CUDA toolkit on this machine")
    out = subprocess.run([nvcc, "--version"], stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
    assert cl.parse_nvcc_version(out) >= 12


def test_parse_checksum():
    digest = "ab" * 32
    assert cl.parse_checksum("sha256:" + digest) == digest
    assert cl.parse_checksum("SHA256:" + digest.upper()) == digest
    assert cl.parse_checksum(digest) == digest
    assert cl.parse_checksum(None) is None
    assert cl.parse_checksum("  ") is None
    with pytest.raises(CusparseltError, match="only sha256"):
        cl.parse_checksum("md5:" + "a" * 32)
    with pytest.raises(CusparseltError, match="64 hex"):
        cl.parse_checksum("sha256:abc")


PACKAGES = """Package: libcusparselt0-cuda-13
Architecture: arm64
Version: 0.8.1.1-1
Depends: libc6
Description: cuSPARSELt runtime
 continued description line

Package: libcusparselt0-dev-cuda-13
Architecture: arm64
Version: 0.8.1.1-1

Package: libcusparselt0-cuda-12
Architecture: arm64
Version: 0.8.1.1-1

Package: libcusparselt0-dev-cuda-12
Architecture: arm64
Version: 0.8.1.1-1

Package: cusparselt-doc
Architecture: all
Version: 0.8.1.1-1
"""


def test_packages_index_from_plain_and_gz(tmp_path):
    (tmp_path / "Packages").write_text(PACKAGES)
    stanzas = cl.read_packages_index(str(tmp_path))
    assert stanzas[0]["Description"] == "cuSPARSELt runtime\ncontinued description line"
    versions = cl.index_versions(stanzas, "arm64")
    assert versions["libcusparselt0-cuda-13"] == "0.8.1.1-1"
    assert "cusparselt-doc" in versions
    assert cl.index_versions(stanzas, "amd64") == {"cusparselt-doc": "0.8.1.1-1"}
    gz_dir = tmp_path / "gz"
    gz_dir.mkdir()
    with gzip.open(str(gz_dir / "Packages.gz"), "wb") as handle:
        handle.write(PACKAGES.encode())
    assert len(cl.read_packages_index(str(gz_dir))) == 5
    with pytest.raises(CusparseltError, match="no Packages index"):
        cl.read_packages_index(str(tmp_path / "nothing"))


def test_select_prefers_cuda_major_suffix():
    available = cl.index_versions(cl.parse_control_stanzas(PACKAGES))
    assert cl.select_packages(available, 13) == (["libcusparselt0-cuda-13", "libcusparselt0-dev-cuda-13"], "suffixed")
    assert cl.select_packages(available, 12, ["runtime"]) == (["libcusparselt0-cuda-12"], "suffixed")
    assert cl.select_packages(available, 13, ["cusparselt-doc"]) == (["cusparselt-doc"], "explicit")


def test_select_falls_back_to_generic_names():
    assert cl.select_packages({"libcusparselt0", "libcusparselt0-dev"}, 13) == (
        ["libcusparselt0", "libcusparselt0-dev"], "generic")


def test_select_lists_what_the_repo_has():
    with pytest.raises(CusparseltError) as info:
        cl.select_packages({"cusparselt-doc", "libcusparselt0-cuda-12"}, 13)
    msg = str(info.value)
    assert "no package libcusparselt0, libcusparselt0-dev" in msg
    assert "it has: cusparselt-doc, libcusparselt0-cuda-12" in msg
    with pytest.raises(CusparseltError, match="no packages at all"):
        cl.select_packages(set(), 13)


def test_candidate_packages_cover_both_flavours():
    names = cl.candidate_packages(13, ["runtime", "extra-pkg"])
    assert set(names) == {"libcusparselt0-cuda-13", "libcusparselt0", "libcusparselt0-dev-cuda-13",
                          "libcusparselt0-dev", "extra-pkg"}


def test_one_line_source_gets_signed_by():
    text = "# local repo\ndeb %s /\ndeb http://deb.debian.org/debian bookworm main\n" % URI
    assert cl.references(text, "one-line", URI)
    assert not cl.signed_by_ok(text, "one-line", URI, KEY)
    new, changed = cl.ensure_signed_by(text, "one-line", URI, KEY)
    assert changed
    assert new == "# local repo\ndeb [signed-by=%s] %s /\ndeb http://deb.debian.org/debian bookworm main\n" % (KEY, URI)
    assert cl.signed_by_ok(new, "one-line", URI, KEY)
    again, changed = cl.ensure_signed_by(new, "one-line", URI, KEY)
    assert (again, changed) == (new, False)


def test_one_line_source_wrong_key_and_trusted_are_replaced():
    text = "deb [arch=arm64 trusted=yes signed-by=/etc/apt/old.gpg] %s/ /\n" % URI
    new, changed = cl.ensure_signed_by(text, "one-line", URI, KEY)
    assert changed
    assert new == "deb [arch=arm64 signed-by=%s] %s/ /\n" % (KEY, URI)
    entry = cl.parse_one_line(new)
    assert entry["options"] == [("arch", "arm64"), ("signed-by", KEY)]
    assert entry["suite"] == "/" and entry["components"] == []


def test_one_line_other_repos_untouched():
    text = "deb [signed-by=/x.gpg] https://example.org/repo stable main\n"
    assert not cl.references(text, "one-line", URI)
    assert cl.ensure_signed_by(text, "one-line", URI, KEY) == (text, False)
    assert cl.parse_one_line("# deb %s /" % URI) is None


def test_deb822_source_gets_signed_by():
    text = ("# Debian\nTypes: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\n"
            "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
            "Types: deb\nURIs: %s\nSuites: /\nTrusted: yes\n" % URI)
    assert cl.references(text, "deb822", URI)
    assert not cl.signed_by_ok(text, "deb822", URI, KEY)
    new, changed = cl.ensure_signed_by(text, "deb822", URI, KEY)
    assert changed
    assert "Trusted" not in new
    assert new.endswith("URIs: %s\nSuites: /\nSigned-By: %s\n" % (URI, KEY))
    assert "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" in new
    assert cl.signed_by_ok(new, "deb822", URI, KEY)
    assert cl.ensure_signed_by(new, "deb822", URI, KEY) == (new, False)


def test_deb822_multiline_signed_by_replaced_and_disabled_ignored():
    text = ("Types: deb\nURIs: %s\nSuites: /\nSigned-By:\n -----BEGIN PGP PUBLIC KEY BLOCK-----\n .\n"
            " abc\n -----END PGP PUBLIC KEY BLOCK-----\n" % URI)
    new, changed = cl.ensure_signed_by(text, "deb822", URI, KEY)
    assert changed and "BEGIN PGP" not in new and new.endswith("Signed-By: %s\n" % KEY)
    disabled = "Types: deb\nURIs: %s\nSuites: /\nEnabled: no\n" % URI
    assert not cl.references(disabled, "deb822", URI)
    assert cl.source_format("/etc/apt/sources.list.d/x.sources") == "deb822"
    assert cl.source_format("/etc/apt/sources.list.d/x.list") == "one-line"
    assert cl.one_line_source(URI, KEY) == "deb [signed-by=%s] %s /\n" % (KEY, URI)


def test_pick_paths_prefers_cuda_major_dirs():
    files = [
        "/usr/include/libcusparseLt/13/cusparseLt.h",
        "/usr/lib/aarch64-linux-gnu/libcusparseLt/13/libcusparseLt.so.0",
        "/usr/lib/aarch64-linux-gnu/libcusparseLt/13/libcusparseLt.so",
        "/usr/lib/aarch64-linux-gnu/libcusparseLt/13/libcusparseLt.so.0.8.1.1",
        "/usr/include/libcusparseLt/12/cusparseLt.h",
        "/usr/share/doc/libcusparselt0-cuda-13/copyright",
    ]
    assert cl.pick_paths(files, 13) == {
        "include_dir": "/usr/include/libcusparseLt/13",
        "library": "/usr/lib/aarch64-linux-gnu/libcusparseLt/13/libcusparseLt.so",
        "root_dir": "/usr",
    }
    runtime_only = cl.pick_paths(files[1:2], 13)
    assert runtime_only["library"].endswith("libcusparseLt.so.0") and runtime_only["include_dir"] is None


def test_pick_paths_generic_layout():
    files = ["/usr/include/cusparseLt.h", "/usr/lib/x86_64-linux-gnu/libcusparseLt.so.0"]
    assert cl.pick_paths(files, 13) == {"include_dir": "/usr/include",
                                        "library": "/usr/lib/x86_64-linux-gnu/libcusparseLt.so.0",
                                        "root_dir": "/usr"}


def test_discover_paths_on_a_tree(tmp_path):
    inc = tmp_path / "usr/include/libcusparseLt/13"
    lib = tmp_path / "usr/lib/aarch64-linux-gnu/libcusparseLt/13"
    inc.mkdir(parents=True)
    lib.mkdir(parents=True)
    (inc / "cusparseLt.h").write_text("/* */\n")
    (lib / "libcusparseLt.so.0").write_text("")
    found = cl.discover_paths(13, "arm64", root=str(tmp_path))
    assert found == {"include_dir": "/usr/include/libcusparseLt/13",
                     "library": "/usr/lib/aarch64-linux-gnu/libcusparseLt/13/libcusparseLt.so.0",
                     "root_dir": "/usr"}
    assert cl.discover_paths(13, "amd64", root=str(tmp_path))["library"] is None


def test_ldconfig_has():
    out = ("3 libs found in cache `/etc/ld.so.cache'\n"
           "\tlibcusparseLt.so.0 (libc6,AArch64) => /usr/lib/aarch64-linux-gnu/libcusparseLt/13/libcusparseLt.so.0\n"
           "\tlibc.so.6 (libc6,AArch64) => /lib/aarch64-linux-gnu/libc.so.6\n")
    assert cl.ldconfig_has(out, "/usr/lib/aarch64-linux-gnu/libcusparseLt/13")
    assert not cl.ldconfig_has(out, "/usr/lib/aarch64-linux-gnu")


def test_dpkg_query_and_versions():
    out = "libcusparselt0-cuda-13\t0.8.1.1-1\tii \nlibcusparselt0\t\tun \nfoo\t1.0\trc \nbar\t2:1.0-3\thi \n"
    assert cl.parse_dpkg_query(out) == {"libcusparselt0-cuda-13": "0.8.1.1-1", "bar": "2:1.0-3"}
    assert cl.upstream_version("0.8.1-1") == "0.8.1"
    assert cl.upstream_version("2:1.0-3") == "1.0"
    assert cl.upstream_version("1.0") == "1.0"
    assert cl.same_release("0.8.1.1-1", "0.8.1") and cl.same_release("0.8.1-1", "0.8.1")
    assert not cl.same_release("0.8.10.1-1", "0.8.1") and not cl.same_release("0.6.3.2-1", "0.8.1")


def test_find_keyring(tmp_path):
    assert cl.find_keyring(str(tmp_path)) is None
    (tmp_path / "cusparselt-local-0A1B2C3D-keyring.gpg").write_bytes(b"\x99")
    assert cl.find_keyring(str(tmp_path)).endswith("cusparselt-local-0A1B2C3D-keyring.gpg")


def test_lock_holder_sees_another_process(tmp_path):
    path = str(tmp_path / "lock-frontend")
    open(path, "w").close()
    assert cl.lock_holder(path) is None
    assert cl.lock_holder(str(tmp_path / "absent")) is None
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl,sys,time; f=open(sys.argv[1],'w'); fcntl.lockf(f, fcntl.LOCK_EX); print('ok', flush=True);"
         " time.sleep(30)", path], stdout=subprocess.PIPE, universal_newlines=True)
    try:
        assert holder.stdout.readline().strip() == "ok"
        assert cl.lock_holder(path) == holder.pid
        assert cl.dpkg_lock_holders([path, str(tmp_path / "absent")]) == {path: holder.pid}
    finally:
        holder.kill()
        holder.wait()
    deadline = time.time() + 5
    while cl.lock_holder(path) is not None and time.time() < deadline:
        time.sleep(0.05)
    assert cl.lock_holder(path) is None
