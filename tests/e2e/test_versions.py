"""`sparkforge versions` against a fixture index (tests/fixtures/versions_index.py).

The index serves real wheels of a few fake releases over HTTP (PEP 691 JSON, range requests) and
as a directory (PEP 503 HTML, file://):

* torch 2.9.0: as the test's data says (triton 3.5.0, torchvision 0.24.0, torchaudio 2.9.0);
* torch 2.14.0: its wheels require triton==3.8.1 while the data pairs 3.8.0 (a disagreement),
  and torchvision 0.29.0 pins it;
* torch 2.16.0: not in the data at all (missing); its wheels require triton~=3.10.0, Python >= 3.11,
  and only its x86_64 wheel has a .metadata file (the aarch64 one is read by range requests).

`--check` must report both findings and exit 1; `--write` must produce data the manifest role's
own assertions and argument specs accept, after which `--check` passes.
"""

import io
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import yaml

from fixtures import versions_index
from helpers import COLLECTIONS, REPO
import readme

from sparkforge import cli

BIN = os.path.dirname(sys.executable)

TORCH_YML = textwrap.dedent('''\
    ---
    # Test data: a comment the writer must keep.
    sparkforge_torch_version: latest

    sparkforge_torch_releases:
      "2.9.0":
        triton: "3.5.0"
        torchvision: "0.24.0"
        torchaudio: "2.9.0"   # kept comment
        traps: []
        fixes: []
        good_for: [gh200, dgx_spark]
        cxx_standard: 17
      "2.14.0":
        triton: "3.8.0"
        torchvision: "0.29.0"
        torchaudio: "2.11.0"
        traps: []
        fixes: []
        good_for: [gh200, dgx_spark]
        cxx_standard: 20

    # The lowest PyTorch release that accepts each arch name (kept as is).
    sparkforge_torch_arch_min_version:
      "9.0": "2.0.0"
    ''')

TRITON_YML = textwrap.dedent('''\
    ---
    sparkforge_triton_releases:
      "3.5.0":
        llvm_commit: null
        setup_dir: "."
        ptxas_blackwell: false
      "3.8.0":
        llvm_commit: null
        setup_dir: "."
        ptxas_blackwell: true

    # Where the sources come from.
    sparkforge_triton_repo_url: https://example.invalid/triton.git
    ''')

LINUX = [("manylinux_2_28_x86_64", True), ("manylinux_2_28_aarch64", True)]


def _torch(version, reqs, requires_python=">=3.10", metadata=None):
    out = []
    for platform, has_meta in LINUX:
        meta = has_meta if metadata is None else metadata.get(platform, has_meta)
        out.append(dict(version=version, requires_dist=reqs, requires_python=requires_python,
                        platform_tag=platform, metadata_file=meta, padding=600000))
    return out


def _domain(version, torch_req):
    return [dict(version=version, requires_dist=["torch%s" % torch_req] if torch_req else [],
                 python_tag="cp311", abi_tag="cp311", platform_tag=p) for p, _ in LINUX]


@pytest.fixture(scope="module")
def index_root(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("index") / "simple")
    linux = 'platform_system == "Linux"'
    versions_index.build_index(root, {
        "torch": _torch("2.9.0", ['triton==3.5.0; %s' % linux, 'filelock'])
        + _torch("2.14.0", ['triton==3.8.1; %s' % linux, 'nvidia-cudnn-cu13==9.24.0.43; %s' % linux])
        + _torch("2.16.0", ['triton~=3.10.0; %s and python_version < "3.15"' % linux,
                            'nvidia-cudnn-cu13==9.30.0.1; %s' % linux], requires_python=">=3.11",
                 metadata={"manylinux_2_28_aarch64": False}),
        "triton": [dict(version=v, platform_tag="manylinux_2_28_x86_64") for v in ("3.5.0", "3.8.1", "3.10.0", "3.10.1")],
        "torchvision": _domain("0.24.0", "==2.9.0") + _domain("0.29.0", "==2.14.0") + _domain("0.31.0", "==2.16.0"),
        "torchaudio": _domain("2.9.0", "==2.9.0") + _domain("2.11.0", ""),
    })
    return root


@pytest.fixture()
def manifest_dir(tmp_path):
    path = tmp_path / "manifest"
    path.mkdir()
    (path / "torch.yml").write_text(TORCH_YML)
    (path / "triton.yml").write_text(TRITON_YML)
    return path


def run_cli(*args):
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["--project-dir", REPO, "versions", "--cache-dir", ""] + list(args), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("transport", ["http", "file"])
def test_check_finds_the_missing_release_and_the_disagreeing_pairing(index_root, manifest_dir, transport):
    with versions_index.serve(index_root) as url:
        index_url = url if transport == "http" else "file://" + index_root
        code, out, err = run_cli("--index-url", index_url, "--manifest-dir", str(manifest_dir), "--check")
    assert code == 1, out + err
    assert "missing from the data: 2.16.0" in out
    assert "torch 2.14.0 triton: data 3.8.0, wheels triton==3.8.1" in out
    # Per platform: both Linux platforms state it.
    assert "[aarch64" in out and "[x86_64" in out
    # 2.9.0 agrees: no finding names it.
    assert "torch 2.9.0 triton" not in out and "torch 2.9.0 torchvision" not in out


def test_json_report_reads_metadata_by_range_when_there_is_no_metadata_file(index_root, manifest_dir):
    with versions_index.serve(index_root) as url:
        code, out, _err = run_cli("--index-url", url, "--manifest-dir", str(manifest_dir), "--json")
    assert code == 0  # no --check: findings are reported, not an error
    data = yaml.safe_load(out)
    new = data["survey"]["releases"]["2.16.0"]
    # The aarch64 wheel had no .metadata file: its facts came from the wheel's zip directory.
    assert new["platforms"]["aarch64"]["triton"] == "~=3.10.0"
    assert new["platforms"]["aarch64"]["requires_python"] == ">=3.11"
    assert new["platforms"]["aarch64"]["cuda"] == {"nvidia-cudnn-cu13": "==9.30.0.1"}
    assert new["torchvision"]["exact"] == ["0.31.0"]
    assert data["report"]["missing"] == ["2.16.0"]
    assert [(d["torch"], d["field"]) for d in data["report"]["disagreements"]] == [
        ("2.14.0", "triton"), ("2.14.0", "triton")]


def test_write_keeps_the_layout_and_gives_data_the_manifest_accepts(index_root, manifest_dir, tmp_path):
    with versions_index.serve(index_root) as url:
        code, out, err = run_cli("--index-url", url, "--manifest-dir", str(manifest_dir), "--write")
        assert code == 0, out + err
        text = (manifest_dir / "torch.yml").read_text()
        # Comments and untouched parts stay as they were.
        assert "# Test data: a comment the writer must keep." in text
        assert 'torchaudio: "2.9.0"   # kept comment' in text
        assert "# The lowest PyTorch release that accepts each arch name (kept as is)." in text
        data = yaml.safe_load(text)
        releases = data["sparkforge_torch_releases"]
        assert list(releases) == ["2.9.0", "2.14.0", "2.16.0"]
        assert releases["2.14.0"]["triton"] == "3.8.1"
        assert releases["2.16.0"]["triton"] == "3.10.1"        # the newest the ~= allows
        assert releases["2.16.0"]["torchvision"] == "0.31.0"
        assert releases["2.16.0"]["torchaudio"] == "2.11.0"    # states no torch requirement
        assert releases["2.16.0"]["cxx_standard"] == 20        # carried from 2.14.0
        assert releases["2.16.0"]["wheels"]["x86_64"]["requires_python"] == ">=3.11"
        triton = yaml.safe_load((manifest_dir / "triton.yml").read_text())
        assert set(triton["sparkforge_triton_releases"]) == {"3.5.0", "3.8.0", "3.8.1", "3.10.1"}
        assert "# Where the sources come from." in (manifest_dir / "triton.yml").read_text()
        # Nothing left to report.
        code, out, err = run_cli("--index-url", url, "--manifest-dir", str(manifest_dir), "--check")
        assert code == 0, out + err
        assert "the data agrees with the index" in out

    # The manifest role's own assertions and argument specs accept the written data.
    play = tmp_path / "play.yml"
    play.write_text(textwrap.dedent('''\
        - hosts: localhost
          gather_facts: false
          vars_files: [%s, %s]
          roles: [sparkforge.stack.manifest]
          tasks:
            - name: What latest means with the written data
              ansible.builtin.debug:
                msg: "releases {{ sparkforge_torch_releases | list | join(',') }}"
        ''' % (manifest_dir / "torch.yml", manifest_dir / "triton.yml")))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", "-c", "local", str(play)],
                          cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout
    assert "releases 2.9.0,2.14.0,2.16.0" in proc.stdout
    # Without the written triton.yml the manifest's Triton releases lack the two new pairings: the role's
    # assertion names each release and its Triton, and the play stops.
    play.write_text(play.read_text().replace(", %s]" % (manifest_dir / "triton.yml"), "]"))
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", "-c", "local", str(play)],
                          cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300, check=False)
    assert proc.returncode == 2, proc.stdout
    for release, triton in (("2.14.0", "3.8.1"), ("2.16.0", "3.10.1")):
        assert "sparkforge_torch_releases[%s] pairs with Triton %s, which is not in" % (release, triton) \
            in proc.stdout.replace("\n", " ").replace("  ", " "), proc.stdout
    assert "sparkforge_torch_releases[2.9.0]" not in proc.stdout


def test_unreachable_index_is_an_error_naming_the_url(manifest_dir):
    before = (manifest_dir / "torch.yml").read_text()
    code, _out, err = run_cli("--index-url", "http://127.0.0.1:9/simple/", "--manifest-dir", str(manifest_dir),
                              "--write")
    assert code == 5
    assert "cannot read the index: http://127.0.0.1:9/simple/torch/" in err
    assert (manifest_dir / "torch.yml").read_text() == before


def test_committed_data_is_what_the_data_file_says_about_itself():
    """The committed data keeps every release 2.9.0..2.15.0 with its wheel facts (a floor: adding a release
    keeps them), and `latest` is the newest release a DGX Spark with Python 3.12 may take: no newer release is
    passed over unless the data says why (not marked good for the class, unconfirmed, or its wheels refuse
    that Python). No release is named as the newest, so adding one is a data change only (issue 55)."""
    sys.path.insert(0, COLLECTIONS)
    from ansible_collections.sparkforge.stack.plugins.module_utils.build.torch_build import (
        default_version, python_allowed, version_tuple)
    from helpers import load_manifest
    releases = load_manifest()["sparkforge_torch_releases"]
    for version in ("2.9.0", "2.9.1", "2.10.0", "2.11.0", "2.12.0", "2.12.1", "2.13.0", "2.14.0", "2.14.1", "2.15.0"):
        assert version in releases and releases[version]["wheels"], version
    latest = default_version(releases, "dgx_spark", "3.12")
    assert version_tuple(latest) >= version_tuple("2.15.0")
    for version, entry in releases.items():
        if version_tuple(version) > version_tuple(latest):
            assert ("dgx_spark" not in (entry.get("good_for") or []) or entry.get("unconfirmed")
                    or not python_allowed(entry, "3.12")), "latest %s passes over %s" % (latest, version)
    # The aarch64 wheels on the index are CUDA 13 builds from 2.11.0 on, CPU-only before.
    assert releases["2.10.0"]["wheels"]["aarch64"]["cuda"] == {}
    assert "nvidia-cudnn-cu13" in releases["2.11.0"]["wheels"]["aarch64"]["cuda"]


def test_help_describes_the_command():
    proc = subprocess.run([sys.executable, "-m", "sparkforge", "versions", "--help"], cwd=REPO,
                          env=dict(os.environ, PYTHONPATH=os.path.join(REPO, "src")),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert proc.returncode == 0
    assert "--check" in proc.stdout and "--write" in proc.stdout and "--index-url" in proc.stdout


def test_the_readme_block_as_written(index_root, tmp_path):
    """The guide's "Adding a release" (docs/guides/version-pins-and-releases.md), its four lines as written,
    in a stand-in checkout (a git repository holding a copy of the collection with this file's data) that
    SPARKFORGE_HOME names, against the fixture index that SPARKFORGE_INDEX_URL names: the table, --check's
    exit 1, --write, git diff."""
    checkout = tmp_path / "sparkforge"
    shutil.copytree(os.path.join(REPO, "collections"), str(checkout / "collections"), symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(os.path.join(REPO, "ansible.cfg"), str(checkout / "ansible.cfg"))
    os.symlink(sys.prefix, str(checkout / ".venv"))
    data = checkout / "collections/ansible_collections/sparkforge/stack/roles/manifest/defaults/main"
    (data / "torch.yml").write_text(TORCH_YML)
    (data / "triton.yml").write_text(TRITON_YML)
    env = dict(os.environ, SPARKFORGE_HOME=str(checkout), SPARKFORGE_INDEX_URL="file://" + index_root,
               HOME=str(tmp_path), GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    for cmd in (["git", "init", "-q"], ["git", "add", "collections"], ["git", "commit", "-qm", "data"]):
        subprocess.run(cmd, cwd=str(checkout), env=env, check=True)
    # The section's last block (the suites to run after the data edit) is tests/test_guide_edits.py's.
    lines = [line for line in readme.commands("version-pins-and-releases.md",
                                              "## Adding a release: `sparkforge versions`")
             if not line.startswith("cd collections/")]
    assert readme.command("version-pins-and-releases.md", "cd collections/",
                          heading="## Adding a release: `sparkforge versions`")
    assert [line.split("#")[0].split() for line in lines] == [
        [".venv/bin/sparkforge", "versions"], [".venv/bin/sparkforge", "versions", "--check"],
        [".venv/bin/sparkforge", "versions", "--write"],
        ["git", "diff", "collections/ansible_collections/sparkforge/stack/roles/manifest/defaults/main/"]]
    runs = [subprocess.run(["bash", "-c", line], cwd=str(checkout), env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, universal_newlines=True, timeout=300, check=False)
            for line in lines]
    assert [p.returncode for p in runs] == [0, 1, 0, 0], [p.stdout[-2000:] for p in runs]
    assert "2.16.0" in runs[0].stdout and "2.16.0" in runs[1].stdout
    assert '+  "2.16.0":' in runs[3].stdout, runs[3].stdout
    assert yaml.safe_load((data / "torch.yml").read_text())["sparkforge_torch_releases"]["2.16.0"]["triton"] == "3.10.1"
