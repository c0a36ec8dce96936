"""`sparkforge versions --checksums` against a local stand-in of NVIDIA's published sources over HTTPS.

The server (tests/fixtures/https_server.py, a throwaway CA that only SSL_CERT_FILE makes trusted) serves
the stand-in CUDA repository of tests/fixtures/nvidia_repo (real Packages/Packages.gz indexes made by
apt-ftparchive, a real cuda-keyring .deb per directory, ubuntu2404 only) and a redistrib_0.8.1.json in
NVIDIA's shape, which, like NVIDIA's, names the tarball archives and not the local-repo .debs.
"""

import io
import json
import os
import re
import shutil
import datetime
import subprocess
import sys

import pytest
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "nvidia_repo"))
import build_repo  # noqa: E402
from fixtures import https_server  # noqa: E402
from helpers import MANIFEST_DIR, REPO  # noqa: E402
import readme  # noqa: E402

from sparkforge import cli  # noqa: E402

# NVIDIA's cuda-keyring 1.1-1 of ubuntu2404/x86_64 (the committed pin), which the stand-in's is not.
NVIDIA_X86 = "d2a6b11c096396d868758b86dab1823b25e14d70333f1dfa74da5ddaf6a06dba"
DATA_REL = "collections/ansible_collections/sparkforge/stack/roles/manifest/defaults/main"
REDISTRIB = {
    "release_date": "2025-08-01", "release_label": "0.8.1", "release_product": "cusparselt",
    "libcusparse_lt": {
        "name": "NVIDIA cuSPARSELt", "license": "cuSPARSELt", "version": "0.8.1.1", "cuda_variant": ["12", "13"],
        "linux-x86_64": {"cuda13": {"relative_path": "libcusparse_lt/linux-x86_64/"
                                                     "libcusparse_lt-linux-x86_64-0.8.1.1_cuda13-archive.tar.xz",
                                    "sha256": "82dd3e5ebc199a27011f58857a80cd825e77bba634ab2286ba3d4e13115db89a"}},
    },
}


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """(base URL, CA file, stand-in cuda-keyring digests by 'distro/arch', server)."""
    cache = build_repo.build()
    with open(os.path.join(cache, "manifest.json")) as handle:
        keyrings = json.load(handle)["cuda_keyring"]
    root = tmp_path_factory.mktemp("nvidia")
    os.makedirs(str(root / "compute/cusparselt/redist"))
    os.symlink(os.path.join(cache, "tree", "compute", "cuda"), str(root / "compute" / "cuda"))
    (root / "compute/cusparselt/redist/redistrib_0.8.1.json").write_text(json.dumps(REDISTRIB, indent=2))
    with https_server.serve(str(root), str(tmp_path_factory.mktemp("tls"))) as (base, ca, server):
        yield base, ca, keyrings, server


def stand_in_data(directory, base, keyrings):
    """The manifest's data in ``directory``: its URLs pointed at the stand-in, ubuntu2404/x86_64 pinned to
    the stand-in's keyring, ubuntu2404/sbsa not pinned."""
    for name in os.listdir(MANIFEST_DIR):
        shutil.copy(os.path.join(MANIFEST_DIR, name), str(directory / name))
    cuda = (directory / "cuda.yml").read_text()
    cuda = re.sub(r"(?m)^sparkforge_cuda_repo_url: .*$", "sparkforge_cuda_repo_url: %s/compute/cuda/repos" % base, cuda)
    cuda = re.sub(r"(?m)^sparkforge_cusparselt_redist_url: .*$",
                  "sparkforge_cusparselt_redist_url: %s/compute/cusparselt/redist/" % base, cuda)
    (directory / "cuda.yml").write_text(cuda)
    text = (directory / "checksums.yml").read_text()
    text = re.sub(r"(?m)^      x86_64: d2a6b11c\w+$", "      x86_64: " + keyrings["ubuntu2404/x86_64"], text)
    text = re.sub(r"(?m)^      # source: \[dgx-station\].*\n      sbsa: 6ea7\w+\n", "", text)
    (directory / "checksums.yml").write_text(text)
    return directory / "checksums.yml"


def run_cli(*args):
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["--project-dir", REPO, "versions", "--checksums"] + list(args), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture()
def trusted(published, monkeypatch):
    monkeypatch.setenv("SSL_CERT_FILE", published[1])
    for name in ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY"):
        monkeypatch.delenv(name, raising=False)
    return published


def test_check_reports_the_missing_pin_and_write_adds_it_with_its_source(trusted, tmp_path):
    base, _ca, keyrings, _server = trusted
    data = stand_in_data(tmp_path, base, keyrings)
    before = data.read_text()
    code, out, err = run_cli("--manifest-dir", str(tmp_path), "--check")
    assert code == 1, out + err
    sbsa = "%s/compute/cuda/repos/ubuntu2404/sbsa/" % base
    assert re.search(r"(?m)^added +sparkforge_cuda_keyring_sha256_map +1\.1-1/ubuntu2404/sbsa +%s "
                     r"\(Packages\.gz of %s\)$"
                     % (keyrings["ubuntu2404/sbsa"], re.escape(sbsa)), out), out
    assert re.search(r"(?m)^same +sparkforge_cuda_keyring_sha256_map +1\.1-1/ubuntu2404/x86_64 ", out), out
    # The directories the stand-in lacks (the other distros of sparkforge_cuda_distro_map) are notes, not errors.
    assert "%s/compute/cuda/repos/debian12/sbsa/ has no Packages index (HTTP 404)" % base in out
    # NVIDIA's redistrib JSON names the archives only: the .debs stay unpinned, and the output says so.
    assert ("redistrib_0.8.1.json names no local-repo .deb of cuSPARSELt 0.8.1 "
            "(cusparselt-local-repo-debian12-0.8.1_0.8.1-1_amd64.deb") in out
    assert data.read_text() == before  # --check writes nothing

    code, out, err = run_cli("--manifest-dir", str(tmp_path), "--write")
    assert code == 0, out + err
    assert "wrote 1 pin to %s" % data in out
    text = data.read_text()
    pins = yaml.safe_load(text)["sparkforge_cuda_keyring_sha256_map"]["1.1-1"]
    assert pins["ubuntu2404"] == {"x86_64": keyrings["ubuntu2404/x86_64"], "sbsa": keyrings["ubuntu2404/sbsa"]}
    today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    written = "      # source: Packages.gz of %s, read %s\n      sbsa: %s\n" % (sbsa, today, keyrings["ubuntu2404/sbsa"])
    assert written in text
    # Everything else is as it was: the header, the other pins and their sources.
    assert text.replace(written, "") == before

    code, out, err = run_cli("--manifest-dir", str(tmp_path), "--check")
    assert code == 0, out + err
    assert "every pin agrees with its published source" in out


def test_a_published_digest_that_changed_is_loud_and_never_written(trusted, tmp_path):
    base, _ca, keyrings, _server = trusted
    data = stand_in_data(tmp_path, base, keyrings)
    # The data's pin is NVIDIA's real digest; the stand-in publishes another one for the same version.
    data.write_text(data.read_text().replace(keyrings["ubuntu2404/x86_64"], NVIDIA_X86))
    code, out, err = run_cli("--manifest-dir", str(tmp_path), "--write", "--json")
    assert code == 3, out + err
    assert ("CHANGED: sparkforge_cuda_keyring_sha256_map['1.1-1']['ubuntu2404']['x86_64'] is pinned to %s, but "
            "Packages.gz of %s/compute/cuda/repos/ubuntu2404/x86_64/ now says %s. A published file should never change"
            % (NVIDIA_X86, base, keyrings["ubuntu2404/x86_64"])) in err
    rows = {"/".join(r["path"]): r["status"] for r in json.loads(out)["rows"]}
    assert rows == {"1.1-1/ubuntu2404/x86_64": "changed", "1.1-1/ubuntu2404/sbsa": "added"}
    pins = yaml.safe_load(data.read_text())["sparkforge_cuda_keyring_sha256_map"]["1.1-1"]["ubuntu2404"]
    assert "wrote 1 pin to %s" % data in err
    # The missing pin is added; the changed one keeps its value.
    assert pins == {"x86_64": NVIDIA_X86, "sbsa": keyrings["ubuntu2404/sbsa"]}


def test_tls_is_required_and_verified(published, tmp_path, monkeypatch):
    base, _ca, keyrings, _server = published
    data = stand_in_data(tmp_path, base, keyrings)
    before = data.read_text()
    code, _out, err = run_cli("--manifest-dir", str(tmp_path), "--write", "--cuda-repo-url",
                              base.replace("https://", "http://") + "/compute/cuda/repos")
    assert code == 4
    assert "--cuda-repo-url (sparkforge_cuda_repo_url) is 'http://127.0.0.1:" in err and "not an https URL" in err
    # The server's certificate is signed by the test CA, which nothing trusts without SSL_CERT_FILE.
    monkeypatch.setenv("SSL_CERT_FILE", os.devnull)
    code, _out, err = run_cli("--manifest-dir", str(tmp_path), "--write")
    assert code == 5
    assert "cannot read a published source: %s/compute/cuda/repos/debian12/sbsa/Packages.gz" % base in err
    assert "CERTIFICATE_VERIFY_FAILED" in err
    assert data.read_text() == before


def test_the_proxy_of_the_environment_is_used(trusted, tmp_path, monkeypatch):
    base, _ca, keyrings, server = trusted
    stand_in_data(tmp_path, base, keyrings)
    seen = len(server.requests)
    monkeypatch.setenv("https_proxy", "http://127.0.0.1:9")
    monkeypatch.setenv("no_proxy", "")
    code, _out, err = run_cli("--manifest-dir", str(tmp_path))
    assert code == 5, err
    assert "cannot read a published source: %s/compute/cuda/repos/debian12/sbsa/Packages.gz" % base in err
    assert len(server.requests) == seen  # it went to the (dead) proxy, not to the server


def test_the_guide_block_as_written(published, tmp_path):
    """The guide's "Refreshing the checksums" (docs/guides/version-pins-and-releases.md), its lines as written,
    in a stand-in checkout that SPARKFORGE_HOME names, whose data points at the stand-in server."""
    base, ca, keyrings, _server = published
    checkout = tmp_path / "sparkforge"
    shutil.copytree(os.path.join(REPO, "collections"), str(checkout / "collections"), symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    os.symlink(sys.prefix, str(checkout / ".venv"))
    stand_in_data(checkout / DATA_REL, base, keyrings)
    env = dict(os.environ, SPARKFORGE_HOME=str(checkout), SSL_CERT_FILE=ca, HOME=str(tmp_path), GIT_AUTHOR_NAME="t",
               GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t", no_proxy="127.0.0.1")
    for cmd in (["git", "init", "-q"], ["git", "add", "collections"], ["git", "commit", "-qm", "data"]):
        subprocess.run(cmd, cwd=str(checkout), env=env, check=True)
    lines = readme.commands("version-pins-and-releases.md", "## Refreshing the checksums: `sparkforge versions --checksums`")  # noqa: E501
    cmd = [".venv/bin/sparkforge", "versions", "--checksums"]
    assert [line.split("#")[0].split() for line in lines] == [
        cmd, cmd + ["--check"], cmd + ["--write"], ["git", "diff", DATA_REL + "/checksums.yml"]]
    runs = [subprocess.run(["bash", "-c", line], cwd=str(checkout), env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, universal_newlines=True, timeout=300, check=False)
            for line in lines]
    assert [p.returncode for p in runs] == [0, 1, 0, 0], [p.stdout[-2000:] for p in runs]
    assert "1.1-1/ubuntu2404/sbsa" in runs[0].stdout and "not pinned yet" in runs[1].stdout
    assert "+      sbsa: %s" % keyrings["ubuntu2404/sbsa"] in runs[3].stdout, runs[3].stdout
