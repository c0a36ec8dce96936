# -*- coding: utf-8 -*-
"""heavy_build: arch list forms, job sizing, sdist fixes and the audit of built GPU wheels.

The audit tests build real shared objects with CUDA 13's nvcc (skipped without it) and pack them
into wheels; the fix tests run the manifest's own causal-conv1d pattern over the fixture sdist's
setup.py, which hard-codes -gencode pairs the same way (tests/fixtures/ml_packages/cudaext).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import os
import shutil
import subprocess
import tarfile
import zipfile

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils.packages import gpu_audit as ga
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import heavy_build as hb
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import ml_packages as mp


NVCC = os.environ.get("SPARKFORGE_NVCC", "/usr/local/cuda/bin/nvcc")
needs_nvcc = pytest.mark.skipif(not os.access(NVCC, os.X_OK), reason="CUDA's nvcc is not installed at " + NVCC)
HEAVY = ("xformers", "flash-attn", "causal-conv1d", "deepspeed")


@pytest.fixture(scope="module")
def matrix(manifest):
    return manifest["sparkforge_ml_packages"]


def test_build_env_reads_the_arch_list_through_cuda_arch(matrix):
    """';', ',' or blanks between; every form derived from cuda/arch.py's entries; bad or empty lists refused as the
    build's own error, naming the variable."""
    gb = matrix["flash-attn"]["gpu_build"]
    env = hb.build_env("flash-attn", gb, "9.0; 12.1,12.0+PTX", 20, 110.0)[0]
    assert env["TORCH_CUDA_ARCH_LIST"] == "9.0;12.1;12.0+PTX"
    with pytest.raises(hb.HeavyBuildError, match=r"cuda_arch_list='9.0;Hopper': 'Hopper' is not an architecture"):
        hb.build_env("flash-attn", gb, "9.0;Hopper", 20, 110.0)
    with pytest.raises(hb.HeavyBuildError, match="sparkforge_cuda_arch_list is empty"):
        hb.build_env("flash-attn", gb, " ", 20, 110.0, "sparkforge_cuda_arch_list")


def test_every_heavy_package_has_complete_facts(matrix):
    for name in HEAVY:
        gb = hb.validate_gpu_build(name, matrix[name]["gpu_build"])
        assert any(spec["name"] == "TORCH_CUDA_ARCH_LIST" for spec in gb["arch_env"]), name
        assert gb["checked"] and all(any(w in c for w in ("setup.py", "cpp_extension", "op_builder"))
                                     for c in gb["checked"]), name
        # The job count must be the plan's, never a hard-coded one in the entry's plain env.
        assert "MAX_JOBS" not in (matrix[name].get("source") or {}).get("env", {}), name


def test_build_env_per_package_on_spark_and_gh200(matrix):
    env, notes = hb.build_env("flash-attn", matrix["flash-attn"]["gpu_build"], "12.1", 20, 110.0)
    # sm_120 SASS is the one of flash-attn's four targets that runs on 12.1.
    assert env == {"TORCH_CUDA_ARCH_LIST": "12.1", "FLASH_ATTN_CUDA_ARCHS": "120",
                   "FLASH_ATTENTION_FORCE_BUILD": "TRUE", "MAX_JOBS": "9", "NVCC_THREADS": "4"}
    assert notes == ["MAX_JOBS=9: 20 CPUs, 110 GiB available, 9 GiB per compile job (nvcc --threads 4)"]
    env = hb.build_env("causal-conv1d", matrix["causal-conv1d"]["gpu_build"], "9.0", 72, 400.0)[0]
    assert env == {"TORCH_CUDA_ARCH_LIST": "9.0", "CAUSAL_CONV1D_FORCE_BUILD": "TRUE", "MAX_JOBS": "72"}
    env = hb.build_env("xformers", matrix["xformers"]["gpu_build"], "9.0;12.1", 20, 12.0)[0]
    assert env == {"TORCH_CUDA_ARCH_LIST": "9.0;12.1", "FORCE_CUDA": "1", "MAX_JOBS": "1"}


def test_deepspeed_builds_the_plans_list_once_per_class(matrix):
    """deepspeed is a gpu_build: its op builders read TORCH_CUDA_ARCH_LIST, DS_ACCELERATOR=cuda keeps the CUDA ops on
    a builder without a GPU, and the audit holds it to exactly the list."""
    gb = matrix["deepspeed"]["gpu_build"]
    env = hb.build_env("deepspeed", gb, "9.0", 16, 126.0)[0]
    assert env == {"TORCH_CUDA_ARCH_LIST": "9.0", "DS_ACCELERATOR": "cuda", "MAX_JOBS": "16", "DS_NVCC_THREADS": "4"}
    assert ga.requested_targets(gb, env)["honoured"] is True
    with pytest.raises(hb.HeavyBuildError, match=r"deepspeed reads TORCH_CUDA_ARCH_LIST as numbers only \(no a/f "
                       r"variants\): deepspeed cannot be built for 9.0a; give the plain architecture"):
        hb.build_env("deepspeed", gb, "8.0;9.0a", 16, 126.0)
    # Its op selection is data in the entry's env: every op by default, those needing extra libraries left out.
    ops = matrix["deepspeed"]["source"]["env"]
    left_out = ("DS_BUILD_SPARSE_ATTN", "DS_BUILD_EVOFORMER_ATTN", "DS_BUILD_CUTLASS_OPS", "DS_BUILD_GDS")
    assert ops["DS_BUILD_OPS"] == "1" and all(ops[v] == "0" for v in left_out)


def test_flash_attn_has_no_target_for_thor(matrix):
    with pytest.raises(hb.HeavyBuildError, match=r"flash-attn compiles only for 80;90;100;120 \(FLASH_ATTN_CUDA_ARCHS"
                       r" in its setup.py\): none of them runs on 11.0"):
        hb.build_env("flash-attn", matrix["flash-attn"]["gpu_build"], "11.0", 8, 64.0)


def test_build_jobs_fit_memory_and_cpus():
    assert hb.build_jobs(16, 126.0, 4) == 16
    assert hb.build_jobs(20, 110.0, 9) == 9
    assert hb.build_jobs(4, 2.0, 9) == 1
    assert hb.memory_available_gib("MemTotal: 1 kB\nMemAvailable:   2097152 kB\n") == 2.0
    with pytest.raises(hb.HeavyBuildError, match="MemAvailable"):
        hb.memory_available_gib("MemTotal: 1 kB\n")


def test_bad_gpu_build_entries_are_refused_by_name(matrix):
    good = dict(matrix["causal-conv1d"]["gpu_build"])
    cases = [
        (dict(good, arch_env=[]), "causal-conv1d: gpu_build.arch_env is empty"),
        (dict(good, arch_env=[{"name": "X", "form": "cmake"}]), "needs a name and a form"),
        (dict(good, nvcc_threads=0), "gpu_build.nvcc_threads must be a positive number, got 0"),
        (dict(good, jobs=4), r"unknown field\(s\) jobs"),
        (dict(good, fixes=[{"file": "../setup.py", "pattern": "a", "replace": "b", "count": 1}]),
         "must be a path inside the sdist"),
        (dict(good, fixes=[{"file": "setup.py", "pattern": "(", "replace": "b", "count": 1}]),
         "is not a regular expression"),
        (dict(good, checked=[]), "gpu_build.checked is empty"),
    ]
    for entry, message in cases:
        with pytest.raises(hb.HeavyBuildError, match=message):
            hb.validate_gpu_build("causal-conv1d", entry)
    # resolve() refuses the same entry as a matrix error, before any pip call.
    bad = {"causal-conv1d": dict(matrix["causal-conv1d"], gpu_build=dict(good, checked=[]))}
    with pytest.raises(mp.MatrixError, match="gpu_build.checked is empty"):
        mp.resolve(bad, {}, {}, {"arch": "x86_64", "platform_class": "hopper", "cuda_major": 13},
                   packages=["causal-conv1d"])


def test_unpack_sdist_refuses_members_outside(tmp_path):
    archive = str(tmp_path / "evil-1.0.tar.gz")
    with tarfile.open(archive, "w:gz") as tar:
        data = b"x"
        info = tarfile.TarInfo("../outside.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    with pytest.raises(hb.HeavyBuildError, match="leaves the directory: refused"):
        hb.unpack_sdist(archive, str(tmp_path / "dest"))
    assert not os.path.exists(str(tmp_path / "outside.txt"))
    with pytest.raises(hb.HeavyBuildError, match="is not an sdist"):
        hb.unpack_sdist(str(tmp_path / "x.whl"), str(tmp_path / "dest"))


def _wheel(tmp_path, name, gencodes):
    """A wheel holding one real nvcc-built shared object for ``gencodes`` (None: a .so without GPU code)."""
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k(float *a) { a[threadIdx.x] *= 2.0f; }\n"
                   "extern \"C\" void launch(float *a) { k<<<1, 32>>>(a); }\n")
    so = str(tmp_path / (name + ".so"))
    if gencodes is None:
        csrc = tmp_path / "c.c"
        csrc.write_text("int f(void) { return 1; }\n")
        subprocess.run(["cc", "-shared", "-fPIC", "-o", so, str(csrc)], check=True)
    else:
        subprocess.run([NVCC, "-shared", "-Xcompiler", "-fPIC", "-o", so, str(src)] + gencodes, check=True)
    path = str(tmp_path / (name + "-1.0-cp311-cp311-linux_x86_64.whl"))
    with zipfile.ZipFile(path, "w") as whl:
        whl.write(so, "pkg/_ext.cpython-311-x86_64-linux-gnu.so")
        whl.writestr("pkg/__init__.py", "")
    return path


@needs_nvcc
@pytest.mark.parametrize("gencodes, targets, ok, verdicts, message", [
    (["-gencode", "arch=compute_90,code=sm_90"], ["9.0"], True, {"9.0": "native"}, ""),
    # sm_120 SASS runs on a GB10 (12.1) through binary compatibility.
    (["-gencode", "arch=compute_120,code=sm_120"], ["12.1"], True, {"12.1": "compatible"}, ""),
    (["-gencode", "arch=compute_90,code=compute_90"], ["9.0"], True, {"9.0": "jit"},
     "runs on 9.0 only through the driver's PTX JIT (compute_90)"),
    (["-gencode", "arch=compute_80,code=sm_80"], ["9.0"], False, {"9.0": "unsupported"},
     "holds SASS sm_80, PTX none: nothing runs on 9.0"),
    # A fleet's two classes: a wheel for the GH200 alone is refused for the Spark.
    (["-gencode", "arch=compute_90,code=sm_90"], ["9.0", "12.1"], False, {"9.0": "native", "12.1": "unsupported"},
     "nothing runs on 12.1"),
    (["-gencode", "arch=compute_90a,code=sm_90a"], ["12.1"], False, {"12.1": "unsupported"}, "holds SASS sm_90a"),
])
def test_audit_wheel_verdicts(tmp_path, gencodes, targets, ok, verdicts, message):
    result = ga.audit_wheel(_wheel(tmp_path, "pkg", gencodes), targets, "pkg")
    assert result["ok"] is ok
    assert [lib["verdicts"] for lib in result["libraries"]] == [verdicts]
    assert result["libraries"][0]["path"] == "pkg/_ext.cpython-311-x86_64-linux-gnu.so"
    assert message in result["message"]
    if not ok:
        assert result["message"].startswith("pkg: refused by the arch audit of pkg-1.0-cp311")


@pytest.fixture(scope="module")
def sm80_sm90_wheel(tmp_path_factory):
    """One nvcc build shared by the request tests: SASS sm_80 and sm_90, no PTX."""
    gencode = ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90"]
    return _wheel(tmp_path_factory.mktemp("req"), "pkg", gencode)


TORCH_LIST = {"arch_env": [{"name": "TORCH_CUDA_ARCH_LIST", "form": "torch"}]}


@needs_nvcc
@pytest.mark.parametrize("asked, honoured, ok, missing, extra, message", [
    # The build ignored the list: reported, and refused only where the entry says the list is honoured.
    ("9.0", False, True, [], ["sm_80"], "holds sm_80, not asked by TORCH_CUDA_ARCH_LIST=9.0: the build ignored "
                                        "TORCH_CUDA_ARCH_LIST"),
    ("9.0", True, False, [], ["sm_80"], "(gpu_build.arch_list_honoured is true)"),
    # Runs on 9.0, but 12.1 was asked too (a fleet's other class): refused, naming the missing target.
    ("8.0;9.0;12.1", False, False, ["sm_121"], [], "lacks sm_121, asked by TORCH_CUDA_ARCH_LIST=8.0;9.0;12.1 "
                                                   "(it holds SASS sm_80,sm_90, PTX none)"),
    ("8.0;9.0+PTX", False, False, ["compute_90"], [], "lacks compute_90"),
    # An arch-specific request needs the 'a' build.
    ("8.0;9.0a", False, False, ["sm_90a"], ["sm_90"], "lacks sm_90a"),
])
def test_audit_wheel_holds_the_build_to_the_requested_list(sm80_sm90_wheel, asked, honoured, ok, missing, extra,
                                                           message):
    gpu_build = dict(TORCH_LIST, arch_list_honoured=honoured)
    result = ga.audit_wheel(sm80_sm90_wheel, ["9.0"], "pkg", {"TORCH_CUDA_ARCH_LIST": asked}, gpu_build)
    assert result["ok"] is ok, result
    lib = result["libraries"][0]
    assert (lib["missing"], lib["extra"], lib["verdicts"]) == (missing, extra, {"9.0": "native"})
    assert message in result["message"]


def test_requested_targets_per_form(matrix):
    flash = matrix["flash-attn"]["gpu_build"]
    env = hb.build_env("flash-attn", flash, "12.1", 8, 64.0)[0]
    # flash-attn's kernels follow FLASH_ATTN_CUDA_ARCHS (torch drops TORCH_CUDA_ARCH_LIST): sm_120 runs on 12.1.
    assert ga.requested_targets(flash, env) == {"variable": "FLASH_ATTN_CUDA_ARCHS", "value": "120",
                                                "sass": ["sm_120"], "ptx": [], "honoured": False}
    conv = matrix["causal-conv1d"]["gpu_build"]
    got = ga.requested_targets(conv, {"TORCH_CUDA_ARCH_LIST": "9.0;12.1+PTX"})
    assert got == {"variable": "TORCH_CUDA_ARCH_LIST", "value": "9.0;12.1+PTX", "sass": ["sm_90", "sm_121"],
                   "ptx": ["compute_121"], "honoured": True}
    with pytest.raises(hb.HeavyBuildError, match=r"x: gpu_build.audit_env 'NOPE' is not one of its arch_env variables"):
        hb.validate_gpu_build("x", dict(conv, audit_env="NOPE"))
    with pytest.raises(hb.HeavyBuildError, match="arch_list_honoured must be true or false, got 'yes'"):
        hb.validate_gpu_build("x", dict(conv, arch_list_honoured="yes"))


def test_toolkit_env_puts_cuda_bin_first_once():
    env = hb.toolkit_env({"CUDA_HOME": "/opt/cuda", "PATH": "/usr/bin:/opt/cuda/bin:/bin"})
    assert env["PATH"] == "/opt/cuda/bin:/usr/bin:/bin"
    assert hb.toolkit_env({"CUDA_HOME": "/opt/cuda"}, base_path="/usr/bin")["PATH"] == "/opt/cuda/bin:/usr/bin"
    assert "PATH" not in hb.toolkit_env({"X": "1"})


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_audit_wheel_without_gpu_code_is_refused_with_the_likely_cause(tmp_path):
    wheel = _wheel(tmp_path, "pkg", None)
    result = ga.audit_wheel(wheel, ["9.0"], "pkg", {"PATH": str(tmp_path)}, {"force_build": {"FORCE_CUDA": "1"}})
    assert not result["ok"] and "holds no shared object with GPU code (the build compiled no CUDA kernels)" \
        in result["message"]
    assert "nvcc was not found on the build's PATH (%s)" % tmp_path in result["message"]
    if os.access(NVCC, os.X_OK):
        env = hb.toolkit_env({"CUDA_HOME": os.path.dirname(os.path.dirname(NVCC)), "PATH": str(tmp_path)})
        found = ga.audit_wheel(wheel, ["9.0"], "pkg", env, {"force_build": {"FORCE_CUDA": "1"}})["message"]
        assert "nvcc was found (%s) and the entry's force-build variable(s) FORCE_CUDA=1 were set" % NVCC in found
        unset = ga.audit_wheel(wheel, ["9.0"], "pkg", env, {})["message"]
        assert "the entry sets no force-build variable" in unset and "gpu_build.force_build" in unset
    with pytest.raises(hb.HeavyBuildError, match="no compute capability to audit"):
        ga.audit_wheel(_wheel(tmp_path, "pkg", None), [], "pkg")


def _so(tmp_path, dest, gencodes):
    src = tmp_path / "v.cu"
    src.write_text("__global__ void k(float *a) { a[threadIdx.x] += 1.0f; }\n")
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    subprocess.run([NVCC, "-shared", "-Xcompiler", "-fPIC", "-o", dest, str(src)] + gencodes, check=True)


@needs_nvcc
def test_venv_audit_per_distribution(tmp_path):
    """Each distribution passes when one of its libraries runs (bitsandbytes ships one per CUDA release)."""
    site = tmp_path / "site-packages"
    libs = {
        "goodpkg/_k.so": (["-gencode", "arch=compute_90,code=sm_90"], "goodpkg"),
        "multi/lib_cuda124.so": (["-gencode", "arch=compute_80,code=sm_80"], "multi"),
        "multi/lib_cuda130.so": (["-gencode", "arch=compute_90,code=sm_90"], "multi"),
        "oldpkg/_k.so": (["-gencode", "arch=compute_80,code=sm_80"], "oldpkg"),
        "ptxpkg/_k.so": (["-gencode", "arch=compute_80,code=compute_80"], "ptxpkg"),
        "loose/_k.so": (["-gencode", "arch=compute_90,code=sm_90"], None),
    }
    for rel, (gencodes, _dist) in libs.items():
        _so(tmp_path, str(site / rel), gencodes)
    for dist in ("goodpkg", "multi", "oldpkg", "ptxpkg"):
        info = site / ("%s-1.0.dist-info" % dist)
        info.mkdir()
        info.joinpath("RECORD").write_text("".join("%s,sha256=x,1\n" % rel for rel, (_g, d) in libs.items() if d == dist))
    result = ga.venv_audit(str(site), "9.0")
    verdicts = dict((name, slot["verdict"]) for name, slot in result["packages"].items())
    assert verdicts == {"goodpkg": "native", "multi": "native", "oldpkg": "unsupported", "ptxpkg": "jit",
                        "(no RECORD: loose)": "native"}
    assert [lib["verdict"] for lib in result["packages"]["multi"]["libraries"]] == ["unsupported", "native"]
    assert result["failures"] == [
        "oldpkg has no code for compute capability 9.0: oldpkg/_k.so (SASS sm_80, PTX none)"]
    assert result["notes"] == ["ptxpkg runs on 9.0 only through the driver's PTX JIT"]
    assert result["verdict"] == "unsupported"
    exempted = ga.venv_audit(str(site), "9.0", exempt={"OldPkg": "kernels outside fat binaries"})
    assert exempted["failures"] == [] and exempted["packages"]["oldpkg"]["exempt"] == "kernels outside fat binaries"
    assert "oldpkg is unsupported on 9.0 by its fat binaries, exempt: kernels outside fat binaries" in exempted["notes"]


def test_manifest_exempts_only_with_a_reason(manifest):
    exempt = manifest["sparkforge_venv_audit_exempt"]
    assert exempt and all(isinstance(v, str) and "measured" in v for v in exempt.values())
