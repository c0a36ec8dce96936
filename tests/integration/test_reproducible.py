"""Reproducible wheels, for real: the fixture PyTorch (a real nvcc kernel) and the fixture Triton (a C
extension linked against the fixture LLVM) are each built twice, in two directories, at two times,
in two time zones, with two home directories and user names; each pair must give one sha256.

Then the wheel_diff module must find a difference planted in one copy (a byte of an ELF section and
a line of a text file), and nvcc's own nondeterminism (its temporary file name carries its pid) is
shown on two direct nvcc builds before and after the wheel is normalised.
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile

import pytest

from helpers import COLLECTIONS, run_module

sys.path.insert(0, COLLECTIONS)
from ansible_collections.sparkforge.stack.plugins.module_utils.build import repro  # noqa: E402
from ansible_collections.sparkforge.stack.plugins.module_utils.build import triton_build as tb  # noqa: E402
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda.fatbin import elf_sections  # noqa: E402
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import JobError, LocalSystem  # noqa: E402
from ansible_collections.sparkforge.stack.plugins.module_utils.build.torch_job import TorchWheelJob  # noqa: E402
from ansible_collections.sparkforge.stack.plugins.module_utils.build.triton_job import TritonLlvmJob  # noqa: E402


def _sibling(name):
    spec = importlib.util.spec_from_file_location("sparkforge_repro_" + name, os.path.join(
        os.path.dirname(os.path.abspath(__file__)), name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_jobs = _sibling("test_build_jobs")
params = _jobs.params
build_python, fixture_repo, torch_data = _jobs.build_python, _jobs.fixture_repo, _jobs.torch_data
FIXTURE_PTXAS, python, repos = _jobs.FIXTURE_PTXAS, _jobs.python, _jobs.repos
NVCC = "/usr/local/cuda/bin/nvcc"
KERNEL = os.path.join(os.path.dirname(COLLECTIONS), "tests", "fixtures", "pytorch", "src", "csrc",
                      "scale_kernel.cu")

needs_nvcc = pytest.mark.skipif(not os.path.exists(NVCC), reason="needs CUDA's nvcc in /usr/local/cuda")

# Two builders that share nothing but the inputs: the clock, the zone, the home and the user differ.
BUILDERS = ({"TZ": "America/Los_Angeles", "USER": "alice", "LOGNAME": "alice"},
            {"TZ": "Asia/Kolkata", "USER": "bob", "LOGNAME": "bob"})


def as_builder(monkeypatch, tmp_path, index):
    for name, value in BUILDERS[index].items():
        monkeypatch.setenv(name, value)
    home = tmp_path / ("home-%s" % BUILDERS[index]["USER"])
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    time.tzset()
    if index:
        time.sleep(2.1)  # zip times have a 2-second step: the second build is at another zip time


@pytest.fixture(scope="module")
def torch_pair(tmp_path_factory, build_python, fixture_repo):  # noqa: F811
    """The fixture torch built by two builders (module scope: the diff test reuses the wheels)."""
    results = []
    with pytest.MonkeyPatch.context() as monkeypatch:
        for index in (0, 1):
            root = tmp_path_factory.mktemp("torch-builder-%d" % index)
            as_builder(monkeypatch, root, index)
            args = params("pytorch_wheel_build", torch_data=torch_data(), repo=fixture_repo,
                          build_dir=str(root / "work" / ("b%d" % index) / "build"),
                          wheel_dir=str(root / "wheels"), python=build_python, platform_class="gh200",
                          compute_capabilities=["9.0"], machine="aarch64", version="2.9.1", cuda_arch_list="9.0",
                          features={"kineto": False, "fbgemm": False}, jobs=2, ccache=False, build_deps="check")
            results.append(TorchWheelJob(args, LocalSystem()).run())
    time.tzset()
    return results


@needs_nvcc
def test_fixture_torch_with_a_real_kernel_is_byte_identical_on_two_builders(torch_pair):
    first, second = torch_pair
    assert first["changed"] and second["changed"]
    assert first["cache_key"] == second["cache_key"]
    assert os.path.dirname(first["wheel"]) != os.path.dirname(second["wheel"])
    assert first["sha256"] == second["sha256"], repro.summarize(repro.diff_wheels(first["wheel"], second["wheel"]))
    for result in torch_pair:
        record = result["reproducible"]
        # nvcc's pid-named temporary file was recorded in the library and made fixed.
        assert record["normalized"]["nvcc_names"] >= 2 and record["leaks"] == [] and result["warnings"] == []
        assert record["source_date_epoch"] == int(subprocess.check_output(
            ["git", "show", "-s", "--format=%ct", result["commit"]], cwd=result["src_dir"]))
    with zipfile.ZipFile(first["wheel"]) as archive:
        assert archive.namelist()[-1].endswith(".dist-info/RECORD")
        lib = archive.read("torch/lib/libtorch_fixture_cuda.so")
        assert b"tmpxft_00000000_00000000-" in lib and os.path.dirname(first["wheel"]).encode() not in lib


def _plant(src, dest):
    """A copy of the torch wheel with one byte of the CUDA library's .text and one line of version.py changed."""
    with zipfile.ZipFile(src) as archive, zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as out:
        for info in archive.infolist():
            data = archive.read(info.filename)
            if info.filename == "torch/lib/libtorch_fixture_cuda.so":
                text = [s for s in elf_sections(data) if s[0] == ".text"][0]
                at = text[2] + text[3] // 2
                data = data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1:]
            elif info.filename == "torch/version.py":
                data = data.replace(b"__version__ = '2.9.1'", b"__version__ = '2.9.1+planted'")
            out.writestr(info, data)
    return dest


@needs_nvcc
def test_wheel_diff_finds_a_planted_difference(torch_pair, tmp_path):
    wheel = torch_pair[0]["wheel"]
    same, rc = run_module("wheel_diff", {"a": wheel, "b": torch_pair[1]["wheel"], "fail_on_difference": True})
    assert rc == 0 and same["identical"] and same["summary"] == ["identical (sha256 %s)" % same["sha256"][0]]

    planted = _plant(wheel, str(tmp_path / os.path.basename(wheel)))
    result, rc = run_module("wheel_diff", {"a": wheel, "b": planted, "fail_on_difference": True}, check_mode=True)
    assert rc != 0 and result["failed"] and result["msg"].startswith("the wheels differ: ")
    differ = dict((d["member"], d) for d in result["differ"])
    assert sorted(differ) == ["torch/lib/libtorch_fixture_cuda.so", "torch/version.py"]
    lib = differ["torch/lib/libtorch_fixture_cuda.so"]
    assert lib["kind"] == "elf" and lib["size"][0] == lib["size"][1]
    assert [s["section"] for s in lib["sections"]] == [".text"]
    assert differ["torch/version.py"]["lines"][-2:] == ["-__version__ = '2.9.1'", "+__version__ = '2.9.1+planted'"]
    assert "differs: torch/lib/libtorch_fixture_cuda.so (elf, %d vs %d bytes): sections .text" % tuple(
        lib["size"]) in result["summary"]
    # The copy was written with other zip metadata too: listed apart, it is not a content difference.
    assert result["same_contents"] is False and result["only_in_a"] == result["only_in_b"] == []

    bad = tmp_path / "bad.whl"
    bad.write_text("no zip")
    result, rc = run_module("wheel_diff", {"a": wheel, "b": str(bad)})
    assert rc != 0 and "bad.whl is not a readable wheel (zip)" in result["msg"]
    result, rc = run_module("wheel_diff", {"a": wheel, "b": str(tmp_path / "missing.whl")})
    assert rc != 0 and result["msg"] == "b: %s is not a file" % (tmp_path / "missing.whl")
    result, rc = run_module("wheel_diff", {"a": wheel, "b": wheel, "max_lines": 0})
    assert rc != 0 and result["msg"] == "max_lines must be at least 1, got 0"


@needs_nvcc
def test_nvcc_embeds_its_pid_and_normalising_the_wheel_removes_it(tmp_path):
    """Why normalize_wheel rewrites nvcc's temporary names: two builds of one kernel differ there only."""
    wheels = []
    for index in (0, 1):
        work = tmp_path / ("dir%d" % index)
        work.mkdir()
        shutil.copy(KERNEL, str(work / "k.cu"))
        env = dict(os.environ, NVCC_APPEND_FLAGS="-Xcompiler=-ffile-prefix-map=%s=/src" % work)
        for cmd in ([NVCC, "-c", "-O2", "-Xcompiler", "-fPIC", "-gencode", "arch=compute_90,code=sm_90", "k.cu",
                     "-o", "k.o"], [NVCC, "-shared", "k.o", "-o", "libk.so"]):
            subprocess.check_call(cmd, cwd=str(work), env=env)
        wheel = str(tmp_path / ("k%d.whl" % index))
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.write(str(work / "libk.so"), "k/libk.so")
            archive.writestr("k-1.dist-info/METADATA", "Metadata-Version: 2.1\nName: k\nVersion: 1\n")
            archive.writestr("k-1.dist-info/RECORD", "")
        wheels.append(wheel)
    before = repro.diff_wheels(*wheels)
    assert [d["member"] for d in before["differ"]] == ["k/libk.so"]
    strtab = [s for s in before["differ"][0]["sections"] if s["section"] == ".strtab"][0]
    assert strtab["strings_only_in_a"][0].startswith("tmpxft_") and strtab["strings_only_in_a"][0].endswith(
        "_k.cudafe1.cpp")
    assert [s["section"] for s in before["differ"][0]["sections"]] == [".strtab"]
    for wheel in wheels:
        assert repro.normalize_wheel(wheel, wheel, 1700000000)["nvcc_names"] == 1
    assert repro.diff_wheels(*wheels)["identical"] is True


def test_fixture_triton_is_byte_identical_on_two_builders(repos, python, tmp_path, monkeypatch):  # noqa: F811
    results = []
    for index in (0, 1):
        as_builder(monkeypatch, tmp_path, index)
        root = tmp_path / ("builder-%d" % index)
        if index:
            root = root / "deeper"  # not even the depth of the path is shared
        args = params("triton_llvm_build", triton_repo=repos["triton_repo"], triton_ref="v3.6.0",
                      llvm_repo="file://" + repos["llvm_repo"], work_dir=str(root / "work"),
                      wheel_dir=str(root / "wheels"), python=python, ptxas_path=FIXTURE_PTXAS, jobs="2")
        results.append(TritonLlvmJob(args, LocalSystem()).run())
    first, second = results
    assert first["built"] == second["built"] == ["llvm", "triton"]
    assert first["cache_key"] == second["cache_key"] and first["wheel"] != second["wheel"]
    assert first["wheel_sha256"] == second["wheel_sha256"], repro.summarize(
        repro.diff_wheels(first["wheel"], second["wheel"]))
    for result in results:
        with open(tb.record_path(os.path.dirname(result["wheel"]), os.path.basename(result["wheel"]))) as handle:
            record = json.load(handle)["reproducible"]
        assert record["leaks"] == [] and record["normalized"]["members"] > 3


@needs_nvcc
def test_domain_wheel_is_byte_identical_on_two_builders_and_reused(torch_pair, tmp_path, monkeypatch):
    """torchvision's fixture built against the reproducible torch, from two clones on two builders."""
    from ansible_collections.sparkforge.stack.plugins.module_utils.build import domain_build
    venv = _sibling("test_triton_llvm_build")._build_python(str(tmp_path / "venv"))
    subprocess.check_call([venv, "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check",
                           torch_pair[0]["wheel"]])
    made = json.loads(subprocess.check_output([sys.executable, os.path.join(
        os.path.dirname(KERNEL), "..", "..", "..", "torch_domains", "make_repos.py"), str(tmp_path / "repos"),
        "torchvision=0.24.1"]))
    results = []
    for index in (0, 1):
        as_builder(monkeypatch, tmp_path, index)
        src = str(tmp_path / ("builder-%d" % index) / "domains" / "torchvision")
        subprocess.check_call(["git", "clone", "-q", made["torchvision"], src])
        args = params("domain_wheel_build", name="torchvision", version="0.24.1", src=src, python=venv,
                      wheel_dir=str(tmp_path / ("builder-%d" % index) / "wheels"),
                      depends_on=torch_pair[0]["sha256"],
                      environment={"BUILD_VERSION": "0.24.1", "TORCH_CUDA_ARCH_LIST": "9.0", "FORCE_CUDA": "1",
                                   "MAX_JOBS": str(index + 1)})
        plan = domain_build.DomainWheelJob(args, LocalSystem(), check_mode=True).run()["plan"]
        assert plan.startswith("would build torchvision 0.24.1 (")
        assert not os.path.exists(args["wheel_dir"])
        results.append(domain_build.DomainWheelJob(args, LocalSystem()).run())
    first, second = results
    assert first["changed"] and second["changed"] and first["cache_key"] == second["cache_key"]
    assert first["sha256"] == second["sha256"], repro.summarize(repro.diff_wheels(first["wheel"], second["wheel"]))
    assert first["reproducible"]["leaks"] == [] and first["warnings"] == []
    with open(first["wheel"] + ".manifest.json") as handle:
        assert json.load(handle)["sha256"] == first["sha256"]
    again = domain_build.DomainWheelJob(args, LocalSystem()).run()
    assert again["changed"] is False and again["wheel"] == second["wheel"] and again["plan"].endswith("nothing to do")
    # Another arch list is another key: built again, not reused.
    other = domain_build.DomainWheelJob(dict(args, environment=dict(args["environment"], TORCH_CUDA_ARCH_LIST="12.0")),
                                        LocalSystem()).run()
    assert other["changed"] is True and other["cache_key"] != again["cache_key"]
    with pytest.raises(JobError, match="is not a git checkout"):
        domain_build.DomainWheelJob(dict(args, src=str(tmp_path)), LocalSystem()).run()
