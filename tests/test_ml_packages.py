"""The ml_packages module for real: a local PEP 503 index on 127.0.0.1, a venv holding a
marker "custom torch", real small packages from PyPI, and real source builds (C, Rust).

The venv's torch must be byte-identical afterwards; packages that need another torch
fail on their own while the others install.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile

import pytest

from helpers import REPO, load_manifest, run_module

FIXTURES = os.path.join(REPO, "tests", "fixtures", "ml_packages")
sys.path.insert(0, FIXTURES)

from index_server import build_index, serve  # noqa: E402
from wheelmaker import build_wheel  # noqa: E402

CACHE = os.path.join(os.path.expanduser("~"), ".cache", "sparkforge", "ml_packages")
# Real packages from PyPI (pinned): einops and omegaconf as the manifest pins them, and
# omegaconf's dependencies; setuptools/wheel so that pip can build sdists in isolation.
PYPI_REQUIREMENTS = ["einops==0.8.2", "omegaconf==2.4.0", "PyYAML==6.0.3", "packaging==26.3",
                     "setuptools==84.2.1", "wheel==0.48.0"]
CUSTOM_TORCH = "2.11.0+sparkforge"
PROTECTED = ["torch", "torchvision", "torchaudio", "triton"]


def _clean_pip_env():
    """pip in the children sees only what a test gives it (no site mirrors or find-links)."""
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith("PIP_"))
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.fixture(autouse=True)
def _isolated_pip(monkeypatch):
    for key in list(os.environ):
        if key.startswith("PIP_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")


def _pypi_files():
    os.makedirs(CACHE, exist_ok=True)
    stamp = os.path.join(CACHE, "downloaded.json")
    wanted = sorted(PYPI_REQUIREMENTS)
    if os.path.exists(stamp):
        with open(stamp) as handle:
            done = json.load(handle)
        if done.get("requirements") == wanted and all(os.path.exists(os.path.join(CACHE, f)) for f in done["files"]):
            return [os.path.join(CACHE, f) for f in done["files"]]
    before = set(os.listdir(CACHE))
    env = dict(os.environ)
    env.pop("PIP_FIND_LINKS", None)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-d", CACHE]
                   + PYPI_REQUIREMENTS, check=True, env=env, stdout=subprocess.DEVNULL)
    files = []
    for req in PYPI_REQUIREMENTS:
        prefix = req.split("==")[0].lower().replace("-", "_") + "-" + req.split("==")[1]
        files += [f for f in os.listdir(CACHE) if f.lower().startswith(prefix) and f.endswith(".whl")]
    assert len(files) == len(PYPI_REQUIREMENTS), (files, before)
    with open(stamp, "w") as handle:
        json.dump({"requirements": wanted, "files": sorted(files)}, handle)
    return [os.path.join(CACHE, f) for f in files]


def _sdist(project_dir, name, version, out_dir):
    """A real sdist (name-version/ with PKG-INFO) of a fixture project."""
    base = "%s-%s" % (name.replace("-", "_"), version)
    path = os.path.join(out_dir, base + ".tar.gz")
    with open(os.path.join(out_dir, "PKG-INFO"), "w") as handle:
        handle.write("Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version))
    with tarfile.open(path, "w:gz") as tar:
        tar.add(project_dir, arcname=base, filter=lambda ti: None if "/target" in ti.name else ti)
        tar.add(os.path.join(out_dir, "PKG-INFO"), arcname=base + "/PKG-INFO")
    os.unlink(os.path.join(out_dir, "PKG-INFO"))
    return path


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    work = tmp_path_factory.mktemp("ml_index")
    built = str(work / "built")
    os.makedirs(built)
    files = _pypi_files()
    # Decoys an upstream index would offer: index builds of torch and torchvision.
    files.append(build_wheel(built, "torch", "9.9", {"torch/__init__.py": "INDEX_BUILD = True\n"}))
    files.append(build_wheel(built, "torch", "2.12.0", {"torch/__init__.py": "INDEX_BUILD = True\n"}))
    files.append(build_wheel(built, "torchvision", "0.26.0", {"torchvision/__init__.py": "INDEX_BUILD = True\n"},
                             requires=["torch==2.11.0"]))
    # Packages of the ML layer's kinds.
    files.append(build_wheel(built, "usestorch", "1.0", {"usestorch/__init__.py": "import torch\nTORCH = torch\n"},
                             requires=["torch>=2.0", "einops>=0.8"]))
    files.append(build_wheel(built, "badtorch", "1.0", {"badtorch/__init__.py": ""}, requires=["torch==9.9"]))
    files.append(build_wheel(built, "needsvision", "1.0", {"needsvision/__init__.py": ""}, requires=["torchvision"]))
    files.append(_sdist(os.path.join(FIXTURES, "cext"), "sparkforge-cext", "1.0", built))
    files.append(_sdist(os.path.join(FIXTURES, "rustext"), "sparkforge-rustext", "1.0", built))
    root = str(work / "root")
    build_index(root, files)
    url, server = serve(root)
    custom = build_wheel(str(work / "custom"), "torch", CUSTOM_TORCH, {
        "torch/__init__.py": "__version__ = '%s'\nSPARKFORGE_BUILD = True\n" % CUSTOM_TORCH,
        "torch/lib/libtorch_marker.txt": "sm_121 build\n" * 100,
    }, tag="py3-none-any")
    yield {"url": url, "custom_torch": custom}
    server.shutdown()


def _venv(path, custom_torch):
    subprocess.run([sys.executable, "-m", "venv", path], check=True)
    py = os.path.join(path, "bin", "python")
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-index", custom_torch], check=True, env=_clean_pip_env())
    return py


def _tree_sha(venv_python):
    """sha256 of every file under site-packages/torch* (computed here, not by the module)."""
    site = subprocess.check_output([venv_python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   universal_newlines=True).strip()
    digest = hashlib.sha256()
    count = 0
    for entry in sorted(os.listdir(site)):
        if not (entry == "torch" or entry.startswith("torch-")):
            continue
        for dirpath, dirnames, filenames in os.walk(os.path.join(site, entry)):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                full = os.path.join(dirpath, name)
                digest.update(os.path.relpath(full, site).encode() + b"\0")
                with open(full, "rb") as handle:
                    digest.update(handle.read())
                count += 1
    return count, digest.hexdigest()


def _pip_list(venv_python):
    out = subprocess.check_output([venv_python, "-m", "pip", "list", "--format", "json"], env=_clean_pip_env())
    return dict((p["name"].lower(), p["version"]) for p in json.loads(out))


def _matrix():
    """The manifest's entries for the real packages, plus test entries of each kind."""
    manifest = load_manifest()
    real = manifest["sparkforge_ml_packages"]
    matrix = {"einops": real["einops"], "omegaconf": real["omegaconf"]}
    matrix.update({
        "usestorch": {"needs_torch": True, "methods": [{"method": "wheel"}]},
        "badtorch": {"optional": False, "methods": [{"method": "wheel"}]},
        "needsvision": {"optional": True, "methods": [{"method": "wheel"}]},
        "sparkforge-cext": {"optional": False, "methods": [{"method": "wheel", "fallback": "source"}],
                            "source": {"prereqs": ["build-essential", "python3-dev"]}},
        "sparkforge-rustext": {"optional": True, "methods": [{"method": "source"}],
                               "source": {"prereqs": ["rustc", "cargo"]}},
        "flash-attn": real["flash-attn"],
    })
    pins = {"einops": manifest["sparkforge_ml_package_pins"]["einops"],
            "omegaconf": manifest["sparkforge_ml_package_pins"]["omegaconf"], "usestorch": "1.0"}
    return matrix, pins


def _args(venv, index, packages, **extra):
    matrix, pins = _matrix()
    args = {"venv": venv, "matrix": matrix, "pins": pins, "packages": packages,
            "index_url": index["url"], "arch": "aarch64", "platform_class": "dgx_spark", "cuda_major": 13}
    args.update(extra)
    return args


def _rows(result):
    return dict((row["name"], row) for row in result["packages"])


def test_guarded_install_fallback_and_rerun(tmp_path, index):
    venv = str(tmp_path / "venv")
    py = _venv(venv, index["custom_torch"])
    torch_before = _tree_sha(py)

    packages = ["einops", "omegaconf", "usestorch", "badtorch", "needsvision", "sparkforge-cext"]
    result, rc = run_module("ml_packages", _args(venv, index, packages, log_dir=str(tmp_path / "logs")))
    rows = _rows(result)
    print(result.get("table"))
    # badtorch is required and cannot be installed: the module fails, after doing the rest.
    assert result["failed"] is True and rc != 0
    assert "badtorch" in result["msg"] and result["failed_packages"] == ["badtorch", "needsvision"]
    assert rows["badtorch"]["status"] == "failed"
    assert "replacing a protected package" in rows["badtorch"]["reason"]
    assert "badtorch 1.0 depends on torch==9.9" in rows["badtorch"]["reason"]
    assert rows["needsvision"]["status"] == "failed"
    assert "would install torchvision 0.26.0" in rows["needsvision"]["reason"]
    for name in ("einops", "omegaconf", "usestorch"):
        assert rows[name]["status"] == "installed" and rows[name]["method_used"] == "wheel", rows[name]
    assert rows["einops"]["version"] == "0.8.2" and rows["omegaconf"]["version"] == "2.4.0"
    assert rows["usestorch"]["would_install"] == ["usestorch==1.0"]
    cext = rows["sparkforge-cext"]
    assert cext["status"] == "installed" and cext["method_used"] == "source" and cext["fallback_taken"] is True
    assert "no wheel fits" in cext["reason"]
    assert os.path.exists(os.path.join(str(tmp_path / "logs"), "sparkforge-cext.log"))

    # The dependent package runs against the custom torch; the C extension was compiled.
    out = subprocess.check_output([py, "-c", "import usestorch, sparkforge_cext, omegaconf, einops; "
                                   "print(usestorch.TORCH.__version__, usestorch.TORCH.SPARKFORGE_BUILD, "
                                   "sparkforge_cext.add(40, 2))"], universal_newlines=True).split()
    assert out == [CUSTOM_TORCH, "True", "42"]
    installed = _pip_list(py)
    assert installed["torch"] == CUSTOM_TORCH and "torchvision" not in installed and "badtorch" not in installed

    # torch byte-identical, by the module's digest and by ours.
    assert result["protected_unchanged"] is True
    assert result["protected_before"]["torch"] == result["protected_after"]["torch"]
    assert result["protected_before"]["torch"]["version"] == CUSTOM_TORCH
    assert result["protected_before"]["torchvision"] is None
    assert result["constraints"].splitlines()[1].startswith("torch @ file://")
    assert _tree_sha(py) == torch_before

    # Second run: nothing to do (the refused packages stay refused, still cleanly).
    again, rc = run_module("ml_packages", _args(venv, index, packages))
    rows = _rows(again)
    assert again["changed"] is False
    assert [rows[n]["status"] for n in ("einops", "omegaconf", "usestorch", "sparkforge-cext")] == ["present"] * 4
    assert rows["badtorch"]["status"] == "failed"
    assert rows["sparkforge-cext"]["method_used"] == "source" and rows["sparkforge-cext"]["fallback_taken"]
    # The host report is the same after a rerun (how each package came is remembered in the venv).
    assert again["report"] == result["report"]
    assert _pip_list(py) == installed and _tree_sha(py) == torch_before

    # Without the failing required package the module succeeds with changed=false.
    ok, rc = run_module("ml_packages", _args(venv, index, ["einops", "omegaconf", "usestorch", "flash-attn"],
                                             allow_source_builds=False))
    assert rc == 0 and ok["changed"] is False, ok
    flash = _rows(ok)["flash-attn"]
    assert flash["status"] == "skipped" and "allow_source_builds" in flash["reason"]


def test_check_mode_lists_and_installs_nothing(tmp_path, index):
    venv = str(tmp_path / "venv")
    py = _venv(venv, index["custom_torch"])
    before = _pip_list(py)
    result, rc = run_module("ml_packages", _args(venv, index, ["omegaconf", "sparkforge-cext", "usestorch"]),
                            check_mode=True)
    assert rc == 0 and result["changed"] is True, result
    rows = _rows(result)
    assert rows["omegaconf"]["status"] == "would_install"
    assert sorted(rows["omegaconf"]["would_install"]) == ["omegaconf==2.4.0", "pyyaml==6.0.3"]
    assert rows["sparkforge-cext"]["status"] == "would_install" and rows["sparkforge-cext"]["fallback_taken"]
    assert result["build_prereqs"] == ["build-essential", "python3-dev"]
    assert _pip_list(py) == before


def test_without_the_guard_pip_would_replace_torch(tmp_path, index):
    """The control: the very same request without constraints replaces the custom torch."""
    venv = str(tmp_path / "venv")
    py = _venv(venv, index["custom_torch"])
    report = str(tmp_path / "report.json")
    subprocess.run([py, "-m", "pip", "install", "-q", "--dry-run", "--report", report, "--index-url", index["url"],
                    "badtorch"], check=True, env=_clean_pip_env())
    with open(report) as handle:
        names = [(i["metadata"]["name"], i["metadata"]["version"]) for i in json.load(handle)["install"]]
    assert ("torch", "9.9") in names


@pytest.mark.skipif(shutil.which("cargo") is None or shutil.which("rustc") is None,
                    reason="no rustc/cargo on this machine (apt-get install rustc cargo)")
def test_rust_source_build(tmp_path, index):
    venv = str(tmp_path / "venv")
    py = _venv(venv, index["custom_torch"])
    torch_before = _tree_sha(py)
    result, rc = run_module("ml_packages", _args(venv, index, ["sparkforge-rustext"]))
    assert rc == 0, result
    row = _rows(result)["sparkforge-rustext"]
    assert row["status"] == "installed" and row["method_used"] == "source" and not row["fallback_taken"]
    out = subprocess.check_output([py, "-c", "import sparkforge_rustext; print(sparkforge_rustext.add(40, 2))"],
                                  universal_newlines=True)
    assert out.strip() == "42"
    assert _tree_sha(py) == torch_before


def test_unknown_package_and_missing_venv_fail_clearly(tmp_path, index):
    result, rc = run_module("ml_packages", _args(str(tmp_path / "none"), index, ["einops"]))
    assert rc != 0 and "not a virtual environment" in result["msg"]
    venv = str(tmp_path / "venv")
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    result, rc = run_module("ml_packages", _args(venv, index, ["einops", "tensorflow"]))
    assert rc != 0 and "unknown package(s) tensorflow" in result["msg"]
    result, rc = run_module("ml_packages", _args(venv, index, [], profile="nope"))
    assert rc != 0 and "unknown profile 'nope'" in result["msg"]
