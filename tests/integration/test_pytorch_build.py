"""Real builds of the PyTorch-shaped fixture with sparkforge.stack.pytorch_wheel_build.

The fixture (tests/fixtures/pytorch/) compiles real CUDA kernels with this
machine's nvcc for the requested arch list; the built .so is audited with
cuobjdump (the PyPI wheel nvidia-cuda-cuobjdump, installed into
~/.cache/sparkforge/cuobjdump when missing).
"""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import zipfile

import pytest

from helpers import MODULES, COLLECTIONS, REPO, load_manifest, run_module

sys.path.insert(0, COLLECTIONS)
from ansible_collections.sparkforge.stack.plugins.module_utils.build.build_common import BuildLock  # noqa: E402

NVCC = "/usr/local/cuda/bin/nvcc"
CACHE = os.path.expanduser("~/.cache/sparkforge")
BUILD_VENV = os.path.join(CACHE, "torch-build-venv")
CUOBJDUMP_DIR = os.path.join(CACHE, "cuobjdump")
FIXTURE = os.path.join(REPO, "tests", "fixtures", "pytorch")

pytestmark = pytest.mark.skipif(not os.path.exists(NVCC), reason="needs CUDA's nvcc in /usr/local/cuda")


def torch_data(**changes):
    m = load_manifest()
    data = {
        "releases": m["sparkforge_torch_releases"],
        "arch_min_version": m["sparkforge_torch_arch_min_version"],
        "arch_defaults": m["sparkforge_torch_arch_defaults"],
        "traps": m["sparkforge_torch_traps"],
        "fixes": m["sparkforge_torch_fixes"],
    }
    data.update(changes)
    return data


@pytest.fixture(scope="session")
def build_python():
    python = os.path.join(BUILD_VENV, "bin", "python")
    if not os.path.exists(python):
        subprocess.check_call([sys.executable, "-m", "venv", BUILD_VENV])
    subprocess.check_call([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "setuptools",
                           "wheel"])
    return python


@pytest.fixture(scope="session")
def cuobjdump():
    path = os.path.join(CUOBJDUMP_DIR, "nvidia", "cu13", "bin", "cuobjdump")
    if not os.path.exists(path):
        subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                               "--no-deps", "--target", CUOBJDUMP_DIR, "nvidia-cuda-cuobjdump"])
    os.chmod(path, 0o755)
    return path


@pytest.fixture(scope="session")
def fixture_repo(tmp_path_factory):
    dest = str(tmp_path_factory.mktemp("fixture") / "pytorch")
    subprocess.check_call([sys.executable, os.path.join(FIXTURE, "make_repo.py"), dest], stdout=subprocess.DEVNULL)
    return dest


def base_args(tmp_path, build_python, fixture_repo, **more):
    args = {
        "torch_data": torch_data(),
        "repo": fixture_repo,
        "build_dir": str(tmp_path / "build"),
        "wheel_dir": str(tmp_path / "wheels"),
        "python": build_python,
        "platform_class": "dgx_spark",
        "compute_capabilities": ["12.1"],
        "machine": "aarch64",
        "jobs": 2,
        "ccache": False,
    }
    args.update(more)
    return args


def audit(cuobjdump, so_path):
    """{'sass': [...], 'ptx': [...]} of a CUDA library, from cuobjdump."""
    elf = subprocess.run([cuobjdump, "--list-elf", so_path], stdout=subprocess.PIPE, universal_newlines=True, check=False).stdout
    ptx = subprocess.run([cuobjdump, "--list-ptx", so_path], stdout=subprocess.PIPE, universal_newlines=True, check=False).stdout
    return {
        "sass": sorted(set(re.findall(r"\.(sm_\d+[a-z]?)\.cubin", elf))),
        "ptx": sorted(set(re.findall(r"\.(sm_\d+[a-z]?)\.ptx", ptx))),
        "listing": (elf + ptx).strip(),
    }


def unpack(wheel, dest):
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(dest)
    return dest


def cubins_calling_printf(cuobjdump, so_path, function, workdir):
    """{arch: calls vprintf?} for the cubins that hold ``function``."""
    os.makedirs(workdir)
    subprocess.run([cuobjdump, "-xelf", "all", so_path], cwd=workdir, stdout=subprocess.DEVNULL, check=True)
    found = {}
    for name in sorted(os.listdir(workdir)):
        data = open(os.path.join(workdir, name), "rb").read()
        if function.encode() in data:
            arch = re.search(r"\.(sm_\d+[a-z]?)\.cubin$", name).group(1)
            found[arch] = b"vprintf" in data
    return found


def test_build_121_with_fix_exact_sass_manifest_and_noop(tmp_path, build_python, fixture_repo, cuobjdump):
    args = base_args(tmp_path, build_python, fixture_repo, version="2.9.1", cuda_arch_list="12.0;12.1",
                     features={"kineto": False, "fbgemm": False})
    plan, rc = run_module("pytorch_wheel_build", args, check_mode=True)
    assert rc == 0, plan
    assert plan["changed"] and plan["wheel"] is None and "would build" in plan["plan"]
    assert plan["env"]["TORCH_CUDA_ARCH_LIST"] == "12.0;12.1"
    assert plan["env"]["BLAS"] == "OpenBLAS" and plan["env"]["USE_KINETO"] == "0"
    assert not os.path.exists(args["wheel_dir"])

    start = time.time()
    result, rc = run_module("pytorch_wheel_build", args)
    first = time.time() - start
    assert rc == 0, result.get("msg")
    assert result["changed"]
    assert os.path.basename(result["wheel"]).startswith("torch-2.9.1-")
    assert result["fixes"][0]["name"] == "mem_eff_sm121_guard" and result["fixes"][0]["state"] == "applied"

    manifest = json.load(open(result["manifest"]))
    assert manifest["sha256"] == result["sha256"]
    assert manifest["torch_version"] == "2.9.1" and manifest["arch_list"] == "12.0;12.1"
    assert manifest["commit"] == result["commit"] and len(manifest["commit"]) == 40
    assert manifest["fixes"][0]["files"] == [
        "aten/src/ATen/native/transformers/cuda/mem_eff_attention/kernels/cutlassF_f16_aligned.cu"]
    assert manifest["duration_s"] > 0 and manifest["cache_key"] == result["cache_key"]
    assert manifest["env"]["PYTORCH_BUILD_VERSION"] == "2.9.1"
    assert manifest["pairing"] == {"triton": "3.5.1", "torchvision": "0.24.1", "torchaudio": "2.9.1"}

    root = unpack(result["wheel"], str(tmp_path / "unpacked"))
    so = os.path.join(root, "torch", "lib", "libtorch_fixture_cuda.so")
    report = audit(cuobjdump, so)
    assert report["sass"] == ["sm_120", "sm_121"]
    assert report["ptx"] == []
    info = json.load(open(os.path.join(root, "torch", "_build_info.json")))
    assert info["version"] == "2.9.1"
    assert info["env"]["USE_KINETO"] == "0" and info["env"]["USE_FBGEMM"] == "0"
    assert info["env"]["USE_CUDA"] == "1" and info["env"]["TORCH_CUDA_ARCH_LIST"] == "12.0;12.1"
    # The fix is real: without it the sm_121 build of the guarded kernel is only the FATAL printf
    # (it calls vprintf); with it the body is compiled and the printf is dead code.
    assert cubins_calling_printf(cuobjdump, so, "fmha_fixture_sm80", str(tmp_path / "elf")) == {
        "sm_120": False, "sm_121": False}
    print("\nARCH AUDIT torch 2.9.1, TORCH_CUDA_ARCH_LIST=12.0;12.1 (+mem_eff_sm121_guard fix):\n%s\nSASS %s PTX %s"
          % (report["listing"], report["sass"], report["ptx"]))

    start = time.time()
    again, rc = run_module("pytorch_wheel_build", args)
    noop = time.time() - start
    assert rc == 0 and again["changed"] is False, again
    assert again["wheel"] == result["wheel"] and again["sha256"] == result["sha256"]
    print("first build %.1f s, no-op rerun %.2f s" % (first, noop))
    assert noop < 10

    forced, rc = run_module("pytorch_wheel_build", dict(args, force=True))
    assert rc == 0 and forced["changed"] and forced["fixes"][0]["state"] == "already"


def test_fixed_release_12_1_and_ptx_no_fix(tmp_path, build_python, fixture_repo, cuobjdump):
    args = base_args(tmp_path, build_python, fixture_repo, version="2.12.0", cuda_arch_list="12.1;12.0+PTX",
                     build_number=3)
    result, rc = run_module("pytorch_wheel_build", args)
    assert rc == 0, result.get("msg")
    assert result["fixes"] == []
    assert os.path.basename(result["wheel"]).startswith("torch-2.12.0-")
    root = unpack(result["wheel"], str(tmp_path / "unpacked"))
    report = audit(cuobjdump, os.path.join(root, "torch", "lib", "libtorch_fixture_cuda.so"))
    assert report["sass"] == ["sm_120", "sm_121"] and report["ptx"] == ["sm_120"]
    info = json.load(open(os.path.join(root, "torch", "_build_info.json")))
    assert info["env"]["PYTORCH_BUILD_NUMBER"] == "3"
    print("\nARCH AUDIT torch 2.12.0, TORCH_CUDA_ARCH_LIST=12.0+PTX;12.1:\n%s" % report["listing"])


def test_default_arch_list_for_gb10_on_trap_release_is_12_0(tmp_path, build_python, fixture_repo):
    plan, rc = run_module("pytorch_wheel_build", base_args(tmp_path, build_python, fixture_repo, version="2.9.1"),
                          check_mode=True)
    assert rc == 0, plan
    assert plan["arch_list"] == "12.0" and "12.1 -> 12.0" in plan["arch_list_why"]
    assert plan["fixes"] == []


@pytest.mark.parametrize("arch,fragment", [
    ("12.0f", "cpp_extension"),
    ("13.0", "does not know the arch 13.0"),
])
def test_refused_arch_lists(tmp_path, build_python, fixture_repo, arch, fragment):
    result, rc = run_module("pytorch_wheel_build", base_args(tmp_path, build_python, fixture_repo, version="2.9.1",
                                                             cuda_arch_list=arch))
    assert rc != 0 and result["failed"]
    assert fragment in result["msg"]
    assert not os.path.exists(str(tmp_path / "build" / "src"))


def test_trap_without_fix_is_refused(tmp_path, build_python, fixture_repo):
    data = torch_data()
    data["releases"]["2.9.1"]["fixes"] = []
    result, rc = run_module("pytorch_wheel_build", base_args(tmp_path, build_python, fixture_repo, version="2.9.1",
                                                             cuda_arch_list="12.1", torch_data=data))
    assert rc != 0
    assert "__CUDA_ARCH__ <= 1200" in result["msg"] and "build with 12.0" in result["msg"]


def test_failing_fix_names_file(tmp_path, build_python, fixture_repo):
    data = torch_data()
    data["fixes"]["mem_eff_sm121_guard"]["edits"][0]["old"] = "#if __CUDA_ARCH__ <= 1100\n"
    result, rc = run_module("pytorch_wheel_build", base_args(tmp_path, build_python, fixture_repo, version="2.9.1",
                                                             cuda_arch_list="12.1", torch_data=data))
    assert rc != 0
    assert "cutlassF_f16_aligned.cu does not contain the text" in result["msg"]
    status = json.load(open(str(tmp_path / "build" / "status.json")))
    assert status["state"] == "failed" and status["phase"] == "fixes"


def test_failing_user_patch_names_file_and_hunk(tmp_path, build_python, fixture_repo):
    patch = tmp_path / "bad.patch"
    patch.write_text("--- a/csrc/scale_kernel.cu\n+++ b/csrc/scale_kernel.cu\n@@ -1,3 +1,3 @@\n"
                     " // Fixture kernel: out[i] = a[i] * s.\n-not in the file\n+replacement\n"
                     " extern \"C\" __global__ void fixture_scale(const float* a, float* out, float s, int n) {\n")
    result, rc = run_module("pytorch_wheel_build", base_args(tmp_path, build_python, fixture_repo, version="2.9.1",
                                                             cuda_arch_list="12.0", patches=[str(patch)]))
    assert rc != 0
    assert "file csrc/scale_kernel.cu, hunk @@ -1,3 +1,3 @@" in result["msg"]


def test_lock_refuses_concurrent_build(tmp_path, build_python, fixture_repo):
    args = base_args(tmp_path, build_python, fixture_repo, version="2.9.1", cuda_arch_list="12.0")
    with BuildLock(os.path.join(args["build_dir"], ".lock")):
        result, rc = run_module("pytorch_wheel_build", args)
    assert rc != 0 and "another build holds the lock" in result["msg"]


def start_module_detached(args):
    """The module as Ansible runs it, in its own session so the whole tree can be killed."""
    payload = dict(args, _ansible_check_mode=False, _ansible_diff=False, _ansible_tmpdir=tempfile.gettempdir())
    handle = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump({"ANSIBLE_MODULE_ARGS": payload}, handle)
    handle.close()
    env = dict(os.environ, PYTHONPATH=COLLECTIONS)
    proc = subprocess.Popen([sys.executable, os.path.join(MODULES, "pytorch_wheel_build.py"), handle.name],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    return proc, handle.name


def test_kill_and_resume(tmp_path, build_python, fixture_repo):
    args = base_args(tmp_path, build_python, fixture_repo, version="2.9.1", cuda_arch_list="12.0;12.1", jobs=1,
                     extra_env={"FIXTURE_PAUSE": "30"})
    proc, args_file = start_module_detached(args)
    log = os.path.join(args["build_dir"], "build.log")
    first_obj = os.path.join(args["build_dir"], "src", "build", "obj", "scale_kernel.cu.o.cmd")
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            if os.path.exists(first_obj):
                break
            assert proc.poll() is None, "module ended early"
            time.sleep(0.2)
        else:
            pytest.fail("the first object never finished")
        # The status file (what the role prints while polling) shows the progress while the build runs.
        status_path = os.path.join(args["build_dir"], "status.json")
        while time.time() < deadline:
            status = json.load(open(status_path))
            if status.get("done") == 1:
                break
            time.sleep(0.2)
        assert status["phase"] == "build" and status["state"] == "running"
        assert (status["done"], status["total"]) == (1, 3)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        os.unlink(args_file)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert not os.path.exists(args["wheel_dir"]) or not os.listdir(args["wheel_dir"])

    resumed, rc = run_module("pytorch_wheel_build", dict(args, extra_env={"FIXTURE_PAUSE": "0"}))
    assert rc == 0, resumed.get("msg")
    assert resumed["fixes"][0]["state"] == "already"
    text = open(log).read().split("=== phase build:")[-1]
    assert "kept (up to date)" in text and "scale_kernel.cu.o" in text
    assert "[2/3] Building CUDA object aten/" in text
    assert "Building CUDA object csrc/scale_kernel.cu" not in text
