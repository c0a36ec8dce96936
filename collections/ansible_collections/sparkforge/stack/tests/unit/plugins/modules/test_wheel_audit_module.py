"""wheel_arch_audit run as Ansible runs it, on objects that CUDA 13's nvcc builds here (cached)."""

import hashlib
import os
import stat
import subprocess
import zipfile

import pytest

from ansible_collections.sparkforge.stack.tests.unit.utils.harness import run_module

NVCC = os.environ.get("SPARKFORGE_NVCC", "/usr/local/cuda/bin/nvcc")
CACHE = os.path.expanduser("~/.cache/sparkforge/audit-module-tests")
SOURCE = "__global__ void k(float *a) { a[threadIdx.x] += 1.0f; }\n"
TARGETS = {
    "hopper.o": ["-gencode", "arch=compute_90,code=sm_90"],
    "blackwell.o": ["-gencode", "arch=compute_120,code=[sm_120,compute_120]", "-gencode",
                    "arch=compute_121a,code=sm_121a"],
}

pytestmark = pytest.mark.skipif(not os.access(NVCC, os.X_OK), reason="CUDA's nvcc is not installed at " + NVCC)


@pytest.fixture(scope="module")
def objs():
    version = subprocess.run([NVCC, "--version"], stdout=subprocess.PIPE, check=True).stdout
    out = os.path.join(CACHE, hashlib.sha256(version + SOURCE.encode() + repr(sorted(TARGETS.items())).encode()).hexdigest()[:16])
    if not os.path.isdir(out):
        work = out + ".tmp%d" % os.getpid()
        os.makedirs(work)
        src = os.path.join(work, "k.cu")
        with open(src, "w") as handle:
            handle.write(SOURCE)
        for name, flags in TARGETS.items():
            subprocess.run([NVCC, "-c", "-Xcompiler", "-fPIC"] + flags + ["-o", os.path.join(work, name), src], check=True)
        os.rename(work, out)
    return out


def _fake_smi(tmp_path, caps):
    path = tmp_path / "nvidia-smi"
    path.write_text("#!/bin/sh\n" + "".join("echo %s\n" % c for c in caps))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_wheel_with_explicit_target(objs, tmp_path):
    wheel = tmp_path / "x-1.0-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(str(wheel), "w") as handle:
        handle.write(os.path.join(objs, "hopper.o"), "x/hopper.o")
        handle.write(os.path.join(objs, "blackwell.o"), "x/blackwell.o")
    result, rc = run_module("wheel_arch_audit", {"path": str(wheel), "target": "9.0"}, check_mode=True)
    assert rc == 0 and result["changed"] is False, result
    libs = {lib["path"]: lib for lib in result["libraries"]}
    assert libs["x/hopper.o"]["verdict"] == "native"
    assert libs["x/blackwell.o"]["verdict"] == "unsupported"
    assert libs["x/blackwell.o"]["sass"] == ["sm_120", "sm_121a"]
    assert libs["x/blackwell.o"]["ptx"] == ["compute_120"]
    assert libs["x/blackwell.o"]["kernels"] == {"sm_120": 1, "sm_121a": 1}
    assert result["verdict"] == "unsupported" and result["target_source"] == "argument"


def test_target_from_nvidia_smi_and_require(objs, tmp_path):
    smi = _fake_smi(tmp_path, ["12.1"])
    args = {"path": os.path.join(objs, "blackwell.o"), "nvidia_smi": smi}
    result, rc = run_module("wheel_arch_audit", args)
    assert rc == 0, result
    assert result["target"] == "12.1" and result["target_source"] == "nvidia-smi"
    # sm_121a and sm_120 each hold the one kernel: the exact target wins the tie.
    assert result["verdict"] == "native"
    result, rc = run_module("wheel_arch_audit", dict(args, path=os.path.join(objs, "hopper.o"), require="jit"))
    assert rc != 0 and result["failed"]
    assert "unsupported on compute capability 12.1" in result["msg"] and "hopper.o" in result["msg"]


def test_no_gpu_lists_without_verdict_and_require_needs_target(objs, tmp_path):
    missing = str(tmp_path / "no-such-nvidia-smi")
    result, rc = run_module("wheel_arch_audit", {"path": objs, "nvidia_smi": missing})
    assert rc == 0, result
    assert result["target"] is None and result["verdict"] is None and result["target_source"] == "none"
    assert len(result["libraries"]) == 2
    result, rc = run_module("wheel_arch_audit", {"path": objs, "nvidia_smi": missing, "require": "compatible"})
    assert rc != 0 and "needs a target" in result["msg"]


def test_bad_arguments(tmp_path):
    result, rc = run_module("wheel_arch_audit", {"path": str(tmp_path / "nothing.whl"), "target": "9.0"})
    assert rc != 0 and "does not exist" in result["msg"]
    result, rc = run_module("wheel_arch_audit", {"path": str(tmp_path), "target": "hopper"})
    assert rc != 0 and "not a compute capability" in result["msg"]
