# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils.build import triton_build as tb
from ansible_collections.sparkforge.stack.plugins.module_utils.build.build_common import JobError, GIB

COMMIT = "7d5de3033187c8a3bb4d2e322f5462cdaf49808f"


def write(path, text=""):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


def test_read_llvm_hash(tmp_path):
    write(str(tmp_path / "cmake" / "llvm-hash.txt"), COMMIT + "\n")
    assert tb.read_llvm_hash(str(tmp_path)) == COMMIT


def test_read_llvm_hash_missing_or_bogus(tmp_path):
    with pytest.raises(JobError, match="llvm-hash.txt is missing"):
        tb.read_llvm_hash(str(tmp_path))
    write(str(tmp_path / "cmake" / "llvm-hash.txt"), "main\n")
    with pytest.raises(JobError, match="does not hold a git commit"):
        tb.read_llvm_hash(str(tmp_path))


@pytest.mark.parametrize("version,where", [
    ("3.3.0", "python"), ("3.3.1", "python"), ("v3.2.0", "python"),
    ("3.4.0", ""), ("3.5.1", ""), ("v3.6.0", ""), ("4.0", ""),
])
def test_expected_setup_dir(version, where):
    assert tb.expected_setup_dir(version) == where


def test_expected_setup_dir_unknown_version():
    with pytest.raises(JobError, match="give triton_version"):
        tb.expected_setup_dir("main")


def test_resolve_setup_dir_matches_tree(tmp_path):
    write(str(tmp_path / "python" / "setup.py"))
    assert tb.resolve_setup_dir(str(tmp_path), "3.3.0") == "python"
    assert tb.resolve_setup_dir(str(tmp_path), None) == "python"
    with pytest.raises(JobError, match="Triton 3.6.0 keeps setup.py at the repository root"):
        tb.resolve_setup_dir(str(tmp_path), "3.6.0")


def test_resolve_setup_dir_root_and_both(tmp_path):
    write(str(tmp_path / "setup.py"))
    assert tb.resolve_setup_dir(str(tmp_path), "3.5.0") == ""
    with pytest.raises(JobError, match="under python/"):
        tb.resolve_setup_dir(str(tmp_path), "3.3.0")
    write(str(tmp_path / "python" / "setup.py"))
    assert tb.resolve_setup_dir(str(tmp_path), "3.3.0") == "python"
    with pytest.raises(JobError, match="both"):
        tb.resolve_setup_dir(str(tmp_path), None)


def test_resolve_setup_dir_no_setup(tmp_path):
    with pytest.raises(JobError, match="no setup.py"):
        tb.resolve_setup_dir(str(tmp_path), "3.5.0")


def test_version_from_tree(tmp_path):
    assert tb.version_from_tree(str(tmp_path)) is None
    write(str(tmp_path / "python" / "triton" / "__init__.py"), "import os\n__version__ = '3.5.1'\n")
    assert tb.version_from_tree(str(tmp_path)) == "3.5.1"


def test_llvm_cmake_command():
    cmd = tb.llvm_cmake_command("/src/llvm-project", "/b", "/p", jobs=8)
    assert cmd[:3] == ["cmake", "-G", "Ninja"]
    assert cmd[cmd.index("-S") + 1] == "/src/llvm-project/llvm"
    assert cmd[cmd.index("-B") + 1] == "/b"
    for flag in ("-DCMAKE_BUILD_TYPE=Release", "-DLLVM_ENABLE_ASSERTIONS=ON",
                 "-DLLVM_ENABLE_PROJECTS=mlir;llvm;lld", "-DLLVM_TARGETS_TO_BUILD=host;NVPTX;AMDGPU",
                 "-DCMAKE_INSTALL_PREFIX=/p", "-DLLVM_PARALLEL_LINK_JOBS=2"):
        assert flag in cmd
    assert not any("LAUNCHER" in arg for arg in cmd)


def test_llvm_cmake_command_options():
    cmd = tb.llvm_cmake_command("/s", "/b", "/p", projects=["mlir", "llvm"], targets="NVPTX", build_type="Debug",
                                assertions=False, ccache=True, extra_args=["-DLLVM_INCLUDE_TESTS=OFF"])
    for flag in ("-DCMAKE_BUILD_TYPE=Debug", "-DLLVM_ENABLE_ASSERTIONS=OFF", "-DLLVM_ENABLE_PROJECTS=mlir;llvm",
                 "-DLLVM_TARGETS_TO_BUILD=NVPTX", "-DCMAKE_C_COMPILER_LAUNCHER=ccache",
                 "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache", "-DLLVM_INCLUDE_TESTS=OFF"):
        assert flag in cmd
    assert not any(arg.startswith("-DLLVM_PARALLEL_LINK_JOBS") for arg in cmd)


def test_triton_build_env_35(tmp_path):
    ptxas = str(tmp_path / "bin" / "ptxas")
    write(ptxas)
    env = tb.triton_build_env("/opt/llvm", "3.5.1", ptxas, 6, json_syspath="/usr")
    assert env == {
        "LLVM_INCLUDE_DIRS": "/opt/llvm/include",
        "LLVM_LIBRARY_DIR": "/opt/llvm/lib",
        "LLVM_SYSPATH": "/opt/llvm",
        "TRITON_OFFLINE_BUILD": "1",
        "TRITON_PTXAS_PATH": ptxas,
        "MAX_JOBS": "6",
        "JSON_SYSPATH": "/usr",
    }


def test_triton_build_env_36_with_tools(tmp_path):
    ptxas = str(tmp_path / "bin" / "ptxas")
    for tool in ("ptxas", "cuobjdump", "nvdisasm"):
        write(str(tmp_path / "bin" / tool))
        os.chmod(str(tmp_path / "bin" / tool), 0o755)
    env = tb.triton_build_env("/opt/llvm", "3.6.0", ptxas, 2, ccache=True, extra_env={"PYBIND11_SYSPATH": "/x"})
    assert env["TRITON_PTXAS_BLACKWELL_PATH"] == ptxas
    assert env["TRITON_CUOBJDUMP_PATH"] == str(tmp_path / "bin" / "cuobjdump")
    assert env["TRITON_NVDISASM_PATH"] == str(tmp_path / "bin" / "nvdisasm")
    assert env["TRITON_BUILD_WITH_CCACHE"] == "true"
    assert env["PYBIND11_SYSPATH"] == "/x"
    assert "JSON_SYSPATH" not in env


def test_runtime_env():
    assert tb.runtime_env("3.5.0", "/cuda/ptxas") == {"TRITON_PTXAS_PATH": "/cuda/ptxas"}
    assert tb.runtime_env("3.6.0", "/cuda/ptxas") == {
        "TRITON_PTXAS_PATH": "/cuda/ptxas", "TRITON_PTXAS_BLACKWELL_PATH": "/cuda/ptxas"}


LLVM_ARGS = dict(llvm_commit=COMMIT, projects="mlir;llvm;lld", targets="host;NVPTX;AMDGPU", build_type="Release",
                 assertions=True, compiler_version="gcc 12.2.0")


def test_llvm_cache_key_inputs():
    base = tb.llvm_cache_key(**LLVM_ARGS)
    assert base == tb.llvm_cache_key(**LLVM_ARGS)
    # list order and the list form do not matter
    reordered = dict(LLVM_ARGS)
    reordered["projects"] = ["lld", "mlir", "llvm"]
    assert base == tb.llvm_cache_key(**reordered)
    for change in (dict(llvm_commit="f6ded0be897e2878612dd903f7e8bb85448269e5"), dict(projects="mlir;llvm"),
                   dict(targets="host;NVPTX"), dict(build_type="Debug"), dict(assertions=False),
                   dict(compiler_version="gcc 13.3.0"), dict(extra_args=["-DLLVM_USE_LINKER=lld"])):
        assert tb.llvm_cache_key(**dict(LLVM_ARGS, **change)) != base, change


TRITON_ARGS = dict(triton_commit="a" * 40, triton_version="3.5.1", llvm_key="k" * 64, python_version="3.12.3",
                   compiler_version="gcc 13.3.0", ptxas_version="V13.0.88")


def test_triton_cache_key_inputs():
    base = tb.triton_cache_key(**TRITON_ARGS)
    assert base == tb.triton_cache_key(**TRITON_ARGS)
    for change in (dict(triton_commit="b" * 40), dict(triton_version="3.6.0"), dict(llvm_key="j" * 64),
                   dict(python_version="3.11.7"), dict(compiler_version="clang 20"), dict(ptxas_version="V13.1"),
                   dict(source_diff="d" * 64), dict(extra_env={"X": "1"})):
        assert tb.triton_cache_key(**dict(TRITON_ARGS, **change)) != base, change


def test_keys_ignore_irrelevant_inputs():
    # Jobs, ccache, work/wheel dirs, clone URLs are no arguments of the keys at all: the signatures prove it.
    import inspect
    for func in (tb.llvm_cache_key, tb.triton_cache_key):
        params = set(inspect.signature(func).parameters)
        assert not params & {"jobs", "ccache", "work_dir", "wheel_dir", "llvm_repo", "triton_repo", "force"}


def test_default_llvm_prefix_and_build_dir():
    assert tb.default_llvm_prefix("/w", COMMIT) == "/w/llvm/llvm-7d5de3033187"
    assert tb.llvm_build_dir("/w", "0123456789abcdef0123") == "/w/build/llvm-0123456789abcdef"


def test_jobs_formula(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: %d kB\nMemAvailable: %d kB\n" % (128 * GIB // 1024, 20 * GIB // 1024))
    jobs, why = tb.resolve_llvm_jobs("auto", meminfo_path=str(meminfo))
    # (20 GiB - 2 GiB reserve) / 2 GiB per job = 9, unless there are fewer cores
    assert jobs == min(os.cpu_count() or 1, 9)
    assert "2.0 GiB per job" in why
    jobs = tb.resolve_triton_jobs("auto", meminfo_path=str(meminfo))[0]
    assert jobs == min(os.cpu_count() or 1, 6)
    assert tb.resolve_llvm_jobs(3) == (3, "set explicitly")
    with pytest.raises(JobError):
        tb.resolve_llvm_jobs("many")


def test_repo_helpers():
    assert tb.local_repo_path("file:///srv/triton") == "/srv/triton"
    assert tb.local_repo_path("/srv/triton") == "/srv/triton"
    assert tb.local_repo_path("https://github.com/triton-lang/triton.git") is None
    assert tb.local_repo_path("git@github.com:triton-lang/triton.git") is None
    assert tb.looks_like_commit(COMMIT)
    assert not tb.looks_like_commit("v3.5.0")
    assert tb.parse_version("v3.5.1") == (3, 5, 1)
    assert tb.parse_version("main") is None


def test_wheel_version_matches():
    assert tb.wheel_version_matches("triton-3.6.0-cp311-cp311-linux_aarch64.whl", "3.6.0")
    assert tb.wheel_version_matches("triton-3.6.0+git1234abcd-cp311-cp311-linux_aarch64.whl", "3.6.0")
    assert not tb.wheel_version_matches("triton-3.5.1-cp311-cp311-linux_aarch64.whl", "3.6.0")


def test_ptxas_identity(tmp_path):
    ptxas = tmp_path / "ptxas"
    ptxas.write_text("#!/bin/sh\necho 'ptxas: NVIDIA (R) Ptx optimizing assembler'\n"
                     "echo 'Cuda compilation tools, release 13.0, V13.0.88'\necho 'Build cuda_13.0.r13.0/x'\n")
    ptxas.chmod(0o755)
    assert tb.ptxas_identity(str(ptxas)) == "Cuda compilation tools, release 13.0, V13.0.88"
    with pytest.raises(JobError, match="not an executable ptxas"):
        tb.ptxas_identity(str(tmp_path / "missing"))


def test_find_record(tmp_path):
    import hashlib
    import json
    wheel = tmp_path / "triton-3.6.0-cp312-cp312-linux_aarch64.whl"
    wheel.write_bytes(b"wheel bytes")
    digest = hashlib.sha256(b"wheel bytes").hexdigest()
    record = {"wheel": wheel.name, "sha256": digest, "cache_key": "k1"}
    (tmp_path / (wheel.name + tb.RECORD_SUFFIX)).write_text(json.dumps(record))
    assert tb.find_record(str(tmp_path), "k1") == record
    assert tb.find_record(str(tmp_path), "k2") is None
    wheel.write_bytes(b"changed on disk")
    assert tb.find_record(str(tmp_path), "k1") is None


def test_error_lines(tmp_path):
    log = tmp_path / "build.log"
    log.write_text("[1/3] Building CXX object a.o\nsrc/a.cpp:3:1: error: expected ';'\nninja: build stopped\n"
                   + "noise\n" * 200 + "ERROR: Failed to build one or more wheels\n")
    assert tb.error_lines(str(log)) == ["src/a.cpp:3:1: error: expected ';'",
                                        "ERROR: Failed to build one or more wheels"]
    assert tb.error_lines(str(tmp_path / "missing")) == []


def test_heartbeat_refreshes_status(tmp_path):
    import json
    import time
    from ansible_collections.sparkforge.stack.plugins.module_utils.build.build_common import StatusFile
    status = StatusFile(str(tmp_path / "status.json"), "test")
    status.phase("llvm-build")
    with tb.Heartbeat(status, interval=0.05):
        time.sleep(0.3)
    with open(str(tmp_path / "status.json")) as handle:
        assert json.load(handle)["elapsed_s"] >= 0.2
