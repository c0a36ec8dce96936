"""The ml_packages module for real: a local PEP 503 index on 127.0.0.1, a venv holding a
marker "custom torch", real small packages from PyPI, and real source builds (C, Rust).

The venv's torch must be byte-identical afterwards; packages that need another torch
fail on their own while the others install.
"""

import copy
import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest

from helpers import REPO, copy_venv, cudaext_entry, load_manifest, run_module, venv_template

FIXTURES = os.path.join(REPO, "tests", "fixtures", "ml_packages")
sys.path.insert(0, FIXTURES)

from fixture_index import CUSTOM_TORCH, assemble  # noqa: E402
from index_server import serve  # noqa: E402

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


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    root, custom = assemble(str(tmp_path_factory.mktemp("ml_index")), (os.uname().machine,))
    url, server = serve(root)
    yield {"url": url, "custom_torch": custom, "templates": str(tmp_path_factory.mktemp("venv_templates"))}
    server.shutdown()


def _venv(path, index):
    """A venv at ``path`` holding the marker torch (a copy of the module's template venv)."""
    def make(where):
        subprocess.run([sys.executable, "-m", "venv", where], check=True)
        subprocess.run([os.path.join(where, "bin", "python"), "-m", "pip", "install", "-q", "--no-index",
                        index["custom_torch"]], check=True, env=_clean_pip_env())
    return copy_venv(venv_template(index["templates"], "torch", make), path)


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
    py = _venv(venv, index)
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
    py = _venv(venv, index)
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
    py = _venv(venv, index)
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
    py = _venv(venv, index)
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


NVCC = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")

# The fixture's interface in the manifest's gpu_build form (force-build flag, TORCH_CUDA_ARCH_LIST, the fix).
CUDAEXT = cudaext_entry(optional=True, cuda_home=os.path.dirname(os.path.dirname(NVCC)))


def _gpu_venv(path, index):
    """A venv with the marker torch and a setuptools with bdist_wheel (>= 70.1): the build runs without isolation
    (a copy of the module's template venv)."""
    def make(where):
        py = _venv(where, index)
        subprocess.run([py, "-m", "pip", "install", "-q", "--index-url", index["url"], "-U", "setuptools"],
                       check=True, env=_clean_pip_env())
    return copy_venv(venv_template(index["templates"], "gpu", make), path)


def _cudaext_args(venv, index, **extra):
    args = _args(venv, index, ["sparkforge-cudaext"], matrix={"sparkforge-cudaext": CUDAEXT}, pins={},
                 build_cpus=2, build_memory_gib=8.0)
    args.update(extra)
    return args


@pytest.mark.skipif(not os.access(NVCC, os.X_OK), reason="CUDA's nvcc is not installed at " + NVCC)
def test_gpu_source_build_is_fixed_audited_and_installed(tmp_path, index):
    """The plan's arch list reaches the build (after the fix), the wheel is audited for the host, installed."""
    venv = str(tmp_path / "venv")
    py = _gpu_venv(venv, index)
    result, rc = run_module("ml_packages", _cudaext_args(venv, index, cuda_arch_list="9.0", audit_targets=["9.0"]))
    assert rc == 0, result
    row = _rows(result)["sparkforge-cudaext"]
    assert row["status"] == "installed", row["reason"]
    assert row["build_env"] == {"TORCH_CUDA_ARCH_LIST": "9.0", "SPARKFORGE_CUDAEXT_FORCE_BUILD": "TRUE",
                                "MAX_JOBS": "1"}
    assert row["fixes"] == [{"file": "setup.py", "replaced": 2, "why": "hard-coded -gencode pairs"}]
    libs = row["audit"]["libraries"]
    assert [(lib["sass"], lib["ptx"], lib["verdicts"]) for lib in libs] == [(["sm_90"], [], {"9.0": "native"})]
    assert libs[0]["path"].startswith("sparkforge_cudaext/_kernels")
    assert "sparkforge-cudaext" in _pip_list(py)
    # A rerun builds nothing, and the host report keeps the audit (from the venv's provenance record).
    again, rc = run_module("ml_packages", _cudaext_args(venv, index, cuda_arch_list="9.0", audit_targets=["9.0"]))
    assert rc == 0 and again["changed"] is False and _rows(again)["sparkforge-cudaext"]["status"] == "present"
    assert again["report"]["packages"] == result["report"]["packages"]
    assert again["report"]["packages"][0]["audit"]["libraries"][0]["verdicts"] == {"9.0": "native"}
    # The venv keeps how it was built; a plan with another arch list rebuilds it and says why (check mode first).
    recorded = _rows(result)["sparkforge-cudaext"]["build"]
    assert recorded["env"] == {"SPARKFORGE_CUDAEXT_FORCE_BUILD": "TRUE", "TORCH_CUDA_ARCH_LIST": "9.0"}
    assert recorded["torch"] == "2.11.0+sparkforge" and "release 13" in recorded["cuda"]
    why = "rebuilt: the installed build differs from the plan (TORCH_CUDA_ARCH_LIST 9.0 -> 9.0;12.1)"
    wider = _cudaext_args(venv, index, cuda_arch_list="9.0;12.1", audit_targets=["9.0"])
    planned, rc = run_module("ml_packages", wider, check_mode=True)
    assert rc == 0 and _rows(planned)["sparkforge-cudaext"]["status"] == "would_install", planned
    assert _rows(planned)["sparkforge-cudaext"]["reason"] == why
    rebuilt, rc = run_module("ml_packages", wider)
    row = _rows(rebuilt)["sparkforge-cudaext"]
    assert rc == 0 and row["status"] == "installed" and row["reason"] == why, row
    assert row["audit"]["libraries"][0]["sass"] == ["sm_90", "sm_121"]


@pytest.mark.skipif(not os.access(NVCC, os.X_OK), reason="CUDA's nvcc is not installed at " + NVCC)
def test_gpu_wheel_without_code_for_the_host_is_refused_and_not_installed(tmp_path, index):
    venv = str(tmp_path / "venv")
    py = _gpu_venv(venv, index)
    before = _pip_list(py)
    result, rc = run_module("ml_packages", _cudaext_args(venv, index, cuda_arch_list="8.0", audit_targets=["9.0"]))
    row = _rows(result)["sparkforge-cudaext"]
    assert rc == 0 and row["status"] == "failed" and result["failed_packages"] == ["sparkforge-cudaext"], result
    assert "refused by the arch audit" in row["reason"] and "holds SASS sm_80, PTX none: nothing runs on 9.0" \
        in row["reason"] and "not installed" in row["reason"]
    assert _pip_list(py) == before


@pytest.mark.skipif(not os.access(NVCC, os.X_OK), reason="CUDA's nvcc is not installed at " + NVCC)
def test_gpu_wheel_holding_targets_not_asked_is_refused_where_the_list_is_honoured(tmp_path, index):
    """Without its fix the fixture compiles its own sm_75/sm_80 pairs and ignores TORCH_CUDA_ARCH_LIST: sm_80 runs
    on the 8.0 host, but sm_75 was not asked, and the entry says the list is honoured: refused, nothing installed."""
    venv = str(tmp_path / "venv")
    py = _gpu_venv(venv, index)
    before = _pip_list(py)
    entry = copy.deepcopy(CUDAEXT)
    entry["gpu_build"].update(fixes=[], arch_list_honoured=True)
    args = _cudaext_args(venv, index, cuda_arch_list="8.0", audit_targets=["8.0"], matrix={"sparkforge-cudaext": entry})
    result, rc = run_module("ml_packages", args)
    row = _rows(result)["sparkforge-cudaext"]
    assert rc == 0 and row["status"] == "failed", result
    lib = row["audit"]["libraries"][0]
    expected = (["sm_75", "sm_80"], ["sm_75"], [], {"8.0": "native"})
    assert (lib["sass"], lib["extra"], lib["missing"], lib["verdicts"]) == expected
    assert ("holds sm_75, not asked by TORCH_CUDA_ARCH_LIST=8.0: the build ignored TORCH_CUDA_ARCH_LIST "
            "(gpu_build.arch_list_honoured is true); not installed") in row["reason"]
    assert _pip_list(py) == before


@pytest.mark.skipif(not os.access(NVCC, os.X_OK), reason="CUDA's nvcc is not installed at " + NVCC)
def test_prebuilt_gpu_wheel_linked_to_another_cuda_is_refused_and_not_installed(tmp_path, index):
    """A prebuilt GPU wheel (method wheel) is downloaded and audited before pip installs it: its kernel library
    (real sm_90 code) needs libcudart.so.12 and this host has CUDA 13 only."""
    from wheelmaker import build_wheel

    (tmp_path / "k.cu").write_text("__global__ void k(float *a) { a[threadIdx.x] *= 2.0f; }\n")
    (tmp_path / "stub.c").write_text("int cudaRuntimeGetVersion(int *v) { *v = 12080; return 0; }\n")
    subprocess.run([NVCC, "-c", "-Xcompiler", "-fPIC", "-gencode", "arch=compute_90,code=sm_90", "-o",
                    str(tmp_path / "k.o"), str(tmp_path / "k.cu")], check=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcudart.so.12", "-o", str(tmp_path / "libcudart.so.12"),
                    str(tmp_path / "stub.c")], check=True)
    subprocess.run(["gcc", "-shared", "-o", str(tmp_path / "k.so"), str(tmp_path / "k.o"), "-Wl,--no-as-needed",
                    "-L", str(tmp_path), "-l:libcudart.so.12"], check=True)
    links = str(tmp_path / "links")
    files = {"sparkforge_gpuwheel/__init__.py": "", "sparkforge_gpuwheel/_k.so": (tmp_path / "k.so").read_bytes()}
    build_wheel(links, "sparkforge-gpuwheel", "1.0", files)
    venv = str(tmp_path / "venv")
    py = _venv(venv, index)
    before = _pip_list(py)
    entry = {"optional": True, "gpu_wheel": True, "methods": [{"method": "wheel"}]}
    result, rc = run_module("ml_packages", _args(venv, index, ["sparkforge-gpuwheel"], pins={}, find_links=[links],
                                                 matrix={"sparkforge-gpuwheel": entry}, audit_targets=["9.0"]))
    row = _rows(result)["sparkforge-gpuwheel"]
    assert rc == 0 and row["status"] == "failed", result
    assert ("refused by the audit of the prebuilt sparkforge_gpuwheel-1.0-py3-none-any.whl: sparkforge_gpuwheel/_k.so "
            "needs libcudart.so.12, which this host does not have") in row["reason"] and "not installed" in row["reason"]
    assert row["audit"]["libraries"][0]["verdicts"] == {"9.0": "native"}
    assert _pip_list(py) == before


def test_gpu_build_bad_arch_list_or_no_target_fails_before_anything(tmp_path, index):
    venv = str(tmp_path / "venv")
    py = _venv(venv, index)
    before = _pip_list(py)
    result, rc = run_module("ml_packages", _cudaext_args(venv, index, cuda_arch_list="9.0;sm90", audit_targets=["9.0"]))
    assert rc != 0 and "cuda_arch_list='9.0;sm90': 'sm90' is not an architecture" in result["msg"], result
    result, rc = run_module("ml_packages", _cudaext_args(venv, index, cuda_arch_list="", audit_targets=["9.0"]))
    assert rc != 0 and "cuda_arch_list is empty" in result["msg"], result
    result, rc = run_module("ml_packages", _cudaext_args(venv, index, cuda_arch_list="9.0"))
    assert rc != 0 and "audit_targets is empty" in result["msg"], result
    assert _pip_list(py) == before


def test_gpu_build_check_mode_shows_the_build_and_fails_like_the_real_run(tmp_path, index):
    venv = str(tmp_path / "venv")
    py = _gpu_venv(venv, index)
    before = _pip_list(py)
    result, rc = run_module("ml_packages", _cudaext_args(venv, index, cuda_arch_list="12.1", audit_targets=["12.1"]),
                            check_mode=True)
    row = _rows(result)["sparkforge-cudaext"]
    assert rc == 0 and row["status"] == "would_install", result
    assert row["build_env"]["TORCH_CUDA_ARCH_LIST"] == "12.1" and row["build_env"]["SPARKFORGE_CUDAEXT_FORCE_BUILD"] == "TRUE"
    result, rc = run_module("ml_packages", _cudaext_args(venv, index, cuda_arch_list="12.1", audit_targets=["sm90x"]),
                            check_mode=True)
    assert rc != 0 and "audit_targets: 'sm90x' is not a compute capability" in result["msg"], result
    assert _pip_list(py) == before


# ---- issue 35 item 3: once per class in a fleet ------------------------------------------------------------

def _class_args(venv, index, wheel_dir, depends_on, **extra):
    """heavy_wheel_build on a class's builder, with the same selection as the hosts' ml_packages."""
    args = {"venv": venv, "wheel_dir": wheel_dir, "depends_on": depends_on,
            "cuda_home": os.path.dirname(os.path.dirname(NVCC)), "matrix": {"sparkforge-cudaext": CUDAEXT},
            "pins": {}, "packages": ["sparkforge-cudaext"], "index_url": index["url"], "arch": "x86_64",
            "platform_class": "generic", "cuda_major": 13, "build_cpus": 2, "build_memory_gib": 8.0}
    args.update(extra)
    return args


def _tree(path):
    """Every file under ``path`` with its sha256: what the builder published (its build logs and lock,
    rewritten by each build, left out)."""
    out = {}
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            if name.endswith((".log", ".lock")):
                continue
            full = os.path.join(dirpath, name)
            with open(full, "rb") as handle:
                out[os.path.relpath(full, path)] = hashlib.sha256(handle.read()).hexdigest()
    return out


@pytest.mark.skipif(not os.access(NVCC, os.X_OK), reason="CUDA's nvcc is not installed at " + NVCC)
def test_gpu_package_built_once_per_class_published_and_installed_on_another_host(tmp_path, index):
    """The builder builds, audits and publishes (keyed by every input); a rerun builds nothing; a new arch list
    builds again; a refused wheel is never published; another host of the class installs the published bytes
    (sha256 checked) and its ml_packages then finds the package present and builds nothing."""
    builder = str(tmp_path / "builder")
    _gpu_venv(builder, index)
    wheel_dir = str(tmp_path / "heavy")
    with open(index["custom_torch"], "rb") as handle:
        torch_sha = hashlib.sha256(handle.read()).hexdigest()

    built, rc = run_module("heavy_wheel_build", _class_args(builder, index, wheel_dir, torch_sha,
                                                            cuda_arch_list="9.0", audit_targets=["9.0"]))
    assert rc == 0 and built["changed"] is True, built
    entry = built["wheels"][0]
    assert entry["name"] == "sparkforge-cudaext" and entry["module"] == "sparkforge_cudaext"
    assert os.path.dirname(entry["wheel"]) == os.path.join(wheel_dir, "sparkforge-cudaext-" + entry["cache_key"][:16])
    with open(entry["wheel"] + ".manifest.json") as handle:
        manifest = json.load(handle)
    with open(entry["wheel"], "rb") as handle:
        assert manifest["sha256"] == hashlib.sha256(handle.read()).hexdigest() == entry["sha256"]
    # Every build input is in the manifest: the torch build, the version, the arch list, CUDA, the sdist, the fix.
    assert manifest["depends_on"] == torch_sha and manifest["version"] == "1.0" and manifest["arch_list"] == "9.0"
    assert manifest["cuda"].startswith("Cuda compilation tools, release ")
    assert manifest["sdist"]["file"].startswith("sparkforge_cudaext-1.0") and len(manifest["sdist"]["sha256"]) == 64
    assert manifest["fixes"] == [{"file": "setup.py", "replaced": 2, "why": "hard-coded -gencode pairs"}]
    assert manifest["key_inputs"]["env"] == {"CUDA_HOME": CUDAEXT["source"]["env"]["CUDA_HOME"],
                                             "SPARKFORGE_CUDAEXT_FORCE_BUILD": "TRUE", "TORCH_CUDA_ARCH_LIST": "9.0"}
    assert [(lib["sass"], lib["verdicts"]) for lib in manifest["audit"]["libraries"]] == [
        (["sm_90"], {"9.0": "native"})]
    # The builder's venv is not touched: every host of the class, the builder too, installs from the wheelhouse.
    assert "sparkforge-cudaext" not in _pip_list(os.path.join(builder, "bin", "python"))

    published = _tree(wheel_dir)
    again, rc = run_module("heavy_wheel_build", _class_args(builder, index, wheel_dir, torch_sha,
                                                            cuda_arch_list="9.0", audit_targets=["9.0"]))
    assert rc == 0 and again["changed"] is False and again["wheels"][0]["sha256"] == entry["sha256"], again
    assert "nothing to build" in again["wheels"][0]["plan"] and _tree(wheel_dir) == published

    # Check mode keys the build with the new inputs and says it would build; nothing is written.
    plan, rc = run_module("heavy_wheel_build", _class_args(builder, index, wheel_dir, "b" * 64,
                                                           cuda_arch_list="9.0", audit_targets=["9.0"]), check_mode=True)
    assert rc == 0 and plan["changed"] is True and plan["wheels"][0]["wheel"] is None, plan
    assert plan["wheels"][0]["cache_key"] != entry["cache_key"] and "would build" in plan["wheels"][0]["plan"]
    assert _tree(wheel_dir) == published

    # Refused by the audit on the builder: nothing is published, the class wheelhouse is as it was.
    refused, rc = run_module("heavy_wheel_build", _class_args(builder, index, wheel_dir, torch_sha,
                                                              cuda_arch_list="8.0", audit_targets=["9.0"]))
    assert rc != 0 and "refused by the arch audit" in refused["msg"], refused
    assert "holds SASS sm_80, PTX none: nothing runs on 9.0" in refused["msg"] and "not published" in refused["msg"]
    assert _tree(wheel_dir) == published

    # The class's wheel list (fleet_wheels) carries it with its manifest; another host installs those bytes.
    listed, rc = run_module("fleet_wheels", {"heavy": [entry], "dependencies_dir": str(tmp_path / "deps"),
                                             "python": os.path.join(builder, "bin", "python"),
                                             "pip_env": {"PIP_INDEX_URL": index["url"]}})
    assert rc == 0, listed
    row = [w for w in listed["wheels"] if w["name"] == "sparkforge-cudaext"][0]
    assert row["kind"] == "artifact" and row["sha256"] == entry["sha256"] and row["module"] == "sparkforge_cudaext"
    assert row["dir"] == "sparkforge_cudaext-" + entry["cache_key"][:16]
    assert row["manifest"]["depends_on"] == torch_sha and row["manifest"]["audit"]["ok"] is True
    wheels = [row]

    host = str(tmp_path / "host")
    host_py = _gpu_venv(host, index)
    copies = str(tmp_path / "host-wheels")
    os.makedirs(copies)
    shutil.copy(entry["wheel"], copies)
    with open(os.path.join(copies, row["file"]), "ab") as handle:
        handle.write(b"\0")
    bad, rc = run_module("fleet_wheel_install", {"venv": host, "wheel_dir": copies, "wheels": wheels})
    assert rc != 0 and row["file"] in bad["msg"] and "sparkforge-cudaext" not in _pip_list(host_py), bad
    shutil.copy(entry["wheel"], copies)
    done, rc = run_module("fleet_wheel_install", {"venv": host, "wheel_dir": copies, "wheels": wheels})
    assert rc == 0 and done["changed"] is True and _pip_list(host_py)["sparkforge-cudaext"] == "1.0", done
    checked, rc = run_module("venv_import_check", {"python": host_py, "wheels": wheels})
    assert rc == 0 and checked["packages"][0]["module"] == "sparkforge_cudaext", checked
    # The host's ml_packages finds the class's build installed and builds nothing.
    result, rc = run_module("ml_packages", _cudaext_args(host, index, cuda_arch_list="9.0", audit_targets=["9.0"]))
    assert rc == 0 and result["changed"] is False and _rows(result)["sparkforge-cudaext"]["status"] == "present", result

    # A new arch list is a new input: built again, into its own directory.
    rebuilt, rc = run_module("heavy_wheel_build", _class_args(builder, index, wheel_dir, torch_sha,
                                                              cuda_arch_list="12.1", audit_targets=["12.1"]))
    assert rc == 0 and rebuilt["changed"] is True and rebuilt["wheels"][0]["cache_key"] != entry["cache_key"], rebuilt
    assert rebuilt["wheels"][0]["audit"]["libraries"][0]["sass"] == ["sm_121"]
