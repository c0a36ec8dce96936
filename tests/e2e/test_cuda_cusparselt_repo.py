"""sparkforge.stack.cusparselt_repo for real: apt/dpkg in podman containers against the stand-in NVIDIA server.

Every test gets a fresh container (the module installs packages) and compares a
snapshot of the container before and after where the host must stay unchanged.
"""

import os
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "nvidia_repo"))
import build_repo  # noqa: E402
import podman_host  # noqa: E402

DISTRO = "ubuntu2404"
KEYRING_DIR = "/usr/share/keyrings"


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    started = time.time()
    cache = build_repo.build()
    import json
    with open(os.path.join(cache, "manifest.json")) as handle:
        manifest = json.load(handle)
    server = podman_host.Server(os.path.join(cache, "tree"), str(tmp_path_factory.mktemp("srv") / "requests.log"))
    server.manifest = manifest
    server.build_seconds = time.time() - started
    server.base_url = server.base + "/compute/cusparselt/{version}/local_installers/"
    yield server
    server.stop()


def make_container(arch):
    reason = podman_host.image_missing(arch)
    if reason:
        pytest.skip(reason)
    return podman_host.Container(arch)


@pytest.fixture
def host():
    box = make_container("amd64")
    yield box
    box.stop()


def args_for(repo, version="0.8.1", arch="amd64", **extra):
    args = {"version": version, "distro": DISTRO, "arch": arch, "base_url": repo.base_url, "lock_timeout": 20}
    debs = repo.manifest["cusparselt"].get(version, {}).get("debs", {})
    if arch in debs:
        args["checksum"] = "sha256:" + debs[arch]["sha256"]
    args.update(extra)
    return args


def deb_requests(repo):
    return [path for _status, path in repo.requests() if path.endswith(".deb")]


def assert_installed_081(host, result, arch="amd64"):
    triplet = {"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[arch]
    lib_dir = "/usr/lib/%s/libcusparseLt/13" % triplet
    assert result["include_dir"] == "/usr/include/libcusparseLt/13"
    assert result["library"] == lib_dir + "/libcusparseLt.so"
    assert result["root_dir"] == "/usr"
    assert result["cuda_major"] == 13 and result["cuda_major_source"] == "fallback"
    assert [(p["name"], p["version"]) for p in result["packages"]] == [
        ("libcusparselt0-cuda-13", "0.8.1.1-1"), ("libcusparselt0-dev-cuda-13", "0.8.1.1-1")]
    keyring = result["keyring"]
    assert keyring.startswith(KEYRING_DIR + "/cusparselt-local-") and keyring.endswith("-keyring.gpg")
    assert result["repo_dir"] == "/var/cusparselt-local-repo-ubuntu2404-0.8.1"
    out = host.sh("test -s %s && test -s /usr/include/libcusparseLt/13/cusparseLt.h && "
                  "cat %s && ldconfig -p | grep libcusparseLt" % (keyring, result["source_file"])).stdout
    assert "deb [signed-by=%s] file:///var/cusparselt-local-repo-ubuntu2404-0.8.1 /" % keyring in out
    assert "libcusparseLt.so.0 (" in out and lib_dir + "/libcusparseLt.so.0" in out
    # the library is a real ELF of the right machine with the right soname
    header = host.sh("python3 - <<'EOF'\nimport struct\nd=open('%s/libcusparseLt.so.0','rb').read(20)\n"
                     "print(d[:4]==b'\\x7fELF', struct.unpack('<H', d[18:20])[0])\nEOF" % lib_dir).stdout.split()
    assert header == ["True", {"amd64": "62", "arm64": "183"}[arch]]


def test_converge_twice_check_mode_and_absent_leave_no_trace(repo, host):
    pristine = host.snapshot()
    planned = host.module(args_for(repo), check_mode=True, diff=True)
    assert planned["_rc"] == 0 and planned["changed"], planned
    assert "package libcusparselt0-cuda-13 0.8.1.1-1" in planned["diff"]["after"]
    assert any(a.startswith("install cusparselt-local-repo-ubuntu2404-0.8.1") for a in planned["actions"])
    assert host.snapshot() == pristine, "check mode changed the host"

    before = len(deb_requests(repo))
    first = host.module(args_for(repo), diff=True)
    assert first["_rc"] == 0 and first["changed"] and first["downloaded"], first
    assert_installed_081(host, first)
    assert "package libcusparselt0-dev-cuda-13 0.8.1.1-1" in first["diff"]["after"]
    assert "file %s" % first["keyring"] in first["diff"]["after"]
    assert first["diff"]["before"] == ""
    assert len(deb_requests(repo)) == before + 1

    downloads = len(deb_requests(repo))
    second = host.module(args_for(repo), diff=True)
    assert second["_rc"] == 0 and not second["changed"] and not second["downloaded"], second
    assert second["actions"] == [] and "diff" not in second
    assert_installed_081(host, second)
    assert len(deb_requests(repo)) == downloads, "second run downloaded again"
    again = host.module(args_for(repo), check_mode=True)
    assert not again["changed"], again

    gone = host.module(args_for(repo, state="absent"), diff=True)
    assert gone["_rc"] == 0 and gone["changed"], gone
    assert "package libcusparselt0-cuda-13 0.8.1.1-1" in gone["diff"]["before"]
    assert host.snapshot() == pristine, "state=absent left something behind"
    still = host.module(args_for(repo, state="absent"))
    assert still["_rc"] == 0 and not still["changed"], still


def test_generic_names_and_unsigned_source_get_fixed(repo, host):
    """0.6.3's repo has only the generic package names and ships a source without signed-by."""
    pristine = host.snapshot()
    res = host.module(args_for(repo, version="0.6.3"))
    assert res["_rc"] == 0 and res["changed"], res
    assert [p["name"] for p in res["packages"]] == ["libcusparselt0", "libcusparselt0-dev"]
    assert res["include_dir"] == "/usr/include"
    assert res["library"] == "/usr/lib/x86_64-linux-gnu/libcusparseLt.so"
    source = host.sh("cat %s" % res["source_file"]).stdout
    assert source.strip() == "deb [signed-by=%s] file:///var/cusparselt-local-repo-ubuntu2404-0.6.3 /" % res["keyring"]
    assert not host.module(args_for(repo, version="0.6.3"))["changed"]
    # someone drops signed-by again: the module notices and repairs it without downloading
    host.sh("echo 'deb file:///var/cusparselt-local-repo-ubuntu2404-0.6.3 /' > %s" % res["source_file"])
    downloads = len(deb_requests(repo))
    fixed = host.module(args_for(repo, version="0.6.3"))
    assert fixed["changed"] and not fixed["downloaded"], fixed
    assert any("signed-by" in a for a in fixed["actions"])
    assert len(deb_requests(repo)) == downloads
    assert host.module(args_for(repo, version="0.6.3", state="absent"))["changed"]
    assert host.snapshot() == pristine


def test_absent_keeps_a_keyring_another_repo_uses(repo, host):
    """0.8.1 and 0.6.3 are signed by the same NVIDIA key: removing one must not break the other."""
    assert host.module(args_for(repo))["changed"]
    other = host.module(args_for(repo, version="0.6.3"))
    assert other["changed"] and other["keyring"] == host.module(args_for(repo))["keyring"]
    gone = host.module(args_for(repo, version="0.6.3", state="absent"))
    assert gone["changed"] and any(a.startswith("keep ") for a in gone["actions"]), gone
    after = host.module(args_for(repo))
    assert not after["changed"], after["actions"]
    host.sh("test -s %s" % other["keyring"])


def test_cuda_12_packages_by_option(repo, host):
    res = host.module(args_for(repo, cuda_major=12, packages=["runtime"]))
    assert res["_rc"] == 0, res
    assert res["cuda_major_source"] == "option"
    assert res["packages"] == [{"name": "libcusparselt0-cuda-12", "version": "0.8.1.1-1"}]
    assert res["library"] == "/usr/lib/x86_64-linux-gnu/libcusparseLt/12/libcusparseLt.so.0"
    assert res["include_dir"] is None


def test_wrong_checksum_installs_nothing(repo, host):
    pristine = host.snapshot()
    bad = "sha256:" + "0" * 64
    res = host.module(args_for(repo, checksum=bad))
    assert res["_rc"] != 0 and res["failed"]
    assert "checksum mismatch" in res["msg"] and "0" * 64 in res["msg"]
    assert repo.manifest["cusparselt"]["0.8.1"]["debs"]["amd64"]["sha256"] in res["msg"]
    assert "nothing was installed" in res["msg"]
    assert host.snapshot() == pristine


def test_missing_version_404_names_the_url(repo, host):
    pristine = host.snapshot()
    res = host.module(args_for(repo, version="9.9.9"))
    assert res["_rc"] != 0
    url = repo.base + "/compute/cusparselt/9.9.9/local_installers/cusparselt-local-repo-ubuntu2404-9.9.9_9.9.9-1_amd64.deb"
    assert url in res["msg"] and "404" in res["msg"], res["msg"]
    assert host.snapshot() == pristine


def test_unreachable_server_names_the_url(repo, host):
    res = host.module(args_for(repo, base_url="http://127.0.0.1:9/nv/{version}/"))
    assert res["_rc"] != 0
    assert "http://127.0.0.1:9/nv/0.8.1/cusparselt-local-repo" in res["msg"] and "unreachable" in res["msg"]


def test_unknown_distro(repo, host):
    pristine = host.snapshot()
    res = host.module(args_for(repo, distro="fedora40"))
    assert res["_rc"] != 0
    assert "unsupported distro 'fedora40'" in res["msg"] and "ubuntu2404" in res["msg"]
    res = host.module(args_for(repo, arch="ppc64el"))
    assert "unsupported architecture 'ppc64el'" in res["msg"]
    assert host.snapshot() == pristine


def test_repo_without_the_packages_lists_what_it_has(repo, host):
    pristine = host.snapshot()
    res = host.module(args_for(repo, version="0.5.2"))
    assert res["_rc"] != 0
    assert "it has: libcusparselt0-cuda-11, libcusparselt0-dev-cuda-11" in res["msg"], res["msg"]
    assert res["available"] == ["libcusparselt0-cuda-11", "libcusparselt0-dev-cuda-11"]
    assert host.snapshot() == pristine


def test_held_dpkg_lock_waits_then_fails_clearly(repo, host):
    pristine = host.snapshot()
    holder = host.hold_dpkg_lock()
    res = host.module(args_for(repo, lock_timeout=3))
    assert res["_rc"] != 0
    assert "/var/lib/dpkg/lock-frontend by pid %d" % holder in res["msg"], res["msg"]
    assert "after waiting 3s" in res["msg"] and "python3 -c import fcntl" in res["msg"]
    assert 3 <= res["_seconds"] < 30
    host.release_dpkg_lock(holder)
    assert host.snapshot() == pristine
    # once the lock is free the same call goes through
    assert host.module(args_for(repo, lock_timeout=3))["changed"]
