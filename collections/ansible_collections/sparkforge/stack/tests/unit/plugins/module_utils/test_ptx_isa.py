# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PTX against the driver (issue 53, item 2): a PTX-only library is "jit" only where the driver loads its ISA.

Real inputs, built here (cached under ~/.cache/sparkforge/ptx-isa-tests): a shared library nvcc 13.0 builds with
PTX only (``-gencode arch=compute_90,code=compute_90``: ISA 9.0, Zstandard-compressed by default), and fat binaries
that CUDA's ``fatbinary`` makes from a hand-written PTX whose ``.version`` line says 9.1 or 8.7, put into a
gcc-built shared object's ``.nv_fatbin``.  Stand-in drivers are nvidia-smi scripts that print the real banner
(tests/unit/fixtures/nvidia-smi/h200-banner.txt) with another "CUDA Version".
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import shutil
import stat
import struct
import subprocess

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import arch as cuda_arch
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import fatbin, ptx_isa
from ansible_collections.sparkforge.stack.plugins.module_utils.host.host_facts import driver_cuda
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import gpu_audit

HERE = os.path.dirname(os.path.abspath(__file__))
STACK = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
BANNER = os.path.join(STACK, "tests", "unit", "fixtures", "nvidia-smi", "h200-banner.txt")
with open(os.path.join(STACK, "roles", "manifest", "defaults", "main", "host.yml")) as _handle:
    TABLE = yaml.safe_load(_handle)["sparkforge_ptx_isa"]

CUDA = os.environ.get("SPARKFORGE_CUDA", "/usr/local/cuda")
NVCC = os.path.join(CUDA, "bin", "nvcc")
FATBINARY = os.path.join(CUDA, "bin", "fatbinary")
CACHE = os.path.expanduser("~/.cache/sparkforge/ptx-isa-tests")
SOURCE = "__global__ void add1(float *x, int n) { int i = threadIdx.x; if (i < n) x[i] += 1.0f; }\n"
STUB = "int sparkforge_stub(void) { return 0; }\n"
needs_cuda = pytest.mark.skipif(not (os.access(NVCC, os.X_OK) and os.access(FATBINARY, os.X_OK)
                                     and shutil.which("gcc") and shutil.which("objcopy")),
                                reason="CUDA's nvcc/fatbinary (%s), gcc or objcopy missing" % CUDA)


def _run(cmd, cwd):
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.fixture(scope="module")
def built():
    """libptx90.so (nvcc, PTX only), and libptx<V>[-nc].so: fatbinary output of PTX with `.version V`
    (compressed, as fatbinary does by default, and not), in a gcc-built shared object."""
    version = subprocess.run([NVCC, "--version"], stdout=subprocess.PIPE, check=True).stdout
    out = os.path.join(CACHE, hashlib.sha256(version + SOURCE.encode()).hexdigest()[:16])
    if os.path.isdir(out):
        return out
    work = out + ".tmp%d" % os.getpid()
    os.makedirs(work)
    with open(os.path.join(work, "k.cu"), "w") as handle:
        handle.write(SOURCE)
    with open(os.path.join(work, "stub.c"), "w") as handle:
        handle.write(STUB)
    _run([NVCC, "-shared", "-Xcompiler", "-fPIC", "-gencode", "arch=compute_90,code=compute_90", "-o",
          "libptx90.so", "k.cu"], work)
    _run([NVCC, "-ptx", "-arch=compute_90", "-o", "k.ptx", "k.cu"], work)
    _run(["gcc", "-shared", "-fPIC", "-o", "stub.so", "stub.c"], work)
    with open(os.path.join(work, "k.ptx")) as handle:
        ptx = handle.read()
    assert ".version 9.0\n" in ptx  # what CUDA 13.0 writes
    for isa in ("9.1", "8.7"):
        with open(os.path.join(work, "k%s.ptx" % isa), "w") as handle:
            handle.write(ptx.replace(".version 9.0\n", ".version %s\n" % isa))
        for suffix, extra in (("", []), ("-nc", ["--compress=false"])):
            fat = "k%s%s.fatbin" % (isa, suffix)
            _run([FATBINARY, "--create=" + fat, "-64"] + extra + ["--image3=kind=ptx,sm=90,file=k%s.ptx" % isa], work)
            _run(["objcopy", "--add-section", ".nv_fatbin=" + fat, "stub.so", "libptx%s%s.so" % (isa, suffix)], work)
    os.rename(work, out)
    return out


def _smi(tmp_path, cuda):
    """A stand-in driver: nvidia-smi printing the real banner with ``cuda`` as its CUDA Version."""
    with open(BANNER) as handle:
        text = handle.read().replace("CUDA Version: 13.0", "CUDA Version: %s" % cuda)
    banner = tmp_path / ("banner-%s.txt" % cuda)
    banner.write_text(text)
    path = tmp_path / ("nvidia-smi-%s" % cuda)
    path.write_text("#!/bin/sh\nif [ $# -gt 0 ]; then echo 9.0; exit 0; fi\ncat '%s'\n" % banner)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def _judge(lib, smi, target="9.0"):
    limit = ptx_isa.driver_limit(driver_cuda(smi, 10), TABLE)
    return fatbin.audit(lib, target=target, ptx_isa_max=limit["ptx_isa_max"])["libraries"][0], limit


# ---------------------------------------------------------------- real libraries ------

@needs_cuda
@pytest.mark.parametrize("cuda,verdict", [("12.8", "unsupported"), ("12.9", "unsupported"), ("13.0", "jit"),
                                          ("13.1", "jit")], ids=["D01", "12.9", "13.0", "13.1"])
def test_nvcc_ptx_only_library_against_older_and_newer_drivers(built, tmp_path, cuda, verdict):
    """D01: nvcc 13.0's PTX (ISA 9.0) loads on a CUDA 13.0 driver or newer, not on 12.8/12.9 (ISA 8.7/8.8)."""
    lib, limit = _judge(os.path.join(built, "libptx90.so"), _smi(tmp_path, cuda))
    assert lib["ptx"] == ["compute_90"] and lib["sass"] == [] and lib["ptx_versions"] == ["9.0"]
    assert lib["verdict"] == verdict
    if verdict == "unsupported":
        assert lib["ptx_refused"] == [{"arch": "compute_90", "isa": "9.0"}]
        line = ptx_isa.refusal("libptx90.so", lib["ptx_refused"], limit)
        assert line.startswith("libptx90.so runs only through the driver's PTX JIT")
        assert "compute_90 PTX ISA 9.0 (needs a driver of CUDA 13.0 or newer)" in line
        assert "the driver is CUDA %s, which JIT-compiles PTX ISA up to %s" % (cuda, limit["ptx_isa_max"]) in line


@needs_cuda
@pytest.mark.parametrize("name", ["libptx9.1.so", "libptx9.1-nc.so"])
@pytest.mark.parametrize("cuda,verdict", [("13.0", "unsupported"), ("13.1", "jit")], ids=["D02", "13.1"])
def test_hand_edited_ptx_91_on_the_580_driver(built, tmp_path, name, cuda, verdict):
    """D02: PTX ISA 9.1 (a CUDA 13.1 toolkit's) on the 580 driver (CUDA 13.0, measured to refuse 9.1): unsupported."""
    lib, _limit = _judge(os.path.join(built, name), _smi(tmp_path, cuda))
    assert lib["ptx_versions"] == ["9.1"] and lib["verdict"] == verdict


@needs_cuda
@pytest.mark.parametrize("cuda,verdict", [("12.7", "unsupported"), ("12.8", "jit"), ("13.0", "jit")])
def test_older_isa_loads_on_newer_drivers(built, tmp_path, cuda, verdict):
    lib, _limit = _judge(os.path.join(built, "libptx8.7.so"), _smi(tmp_path, cuda))
    assert lib["ptx_versions"] == ["8.7"] and lib["verdict"] == verdict


@needs_cuda
def test_the_isa_is_read_from_the_ptx_text(built, tmp_path):
    """The driver reads the text's .version: a header that says otherwise is not believed; without a Zstandard
    decoder a compressed entry falls back to its header's version."""
    with open(os.path.join(built, "k9.1-nc.fatbin"), "rb") as handle:
        blob = bytearray(handle.read())
    entry = 16  # after the container header; minor, major at bytes 24-27 of the entry header
    assert struct.unpack_from("<HH", blob, entry + 24) == (1, 9)
    struct.pack_into("<HH", blob, entry + 24, 0, 9)  # the header now says 9.0, the text still 9.1
    fat = tmp_path / "lying.fatbin"
    fat.write_bytes(bytes(blob))
    lib = str(tmp_path / "liblying.so")
    subprocess.run(["objcopy", "--add-section", ".nv_fatbin=" + str(fat), os.path.join(built, "stub.so"), lib],
                   check=True)
    entries = fatbin.scan_elf(open(lib, "rb").read())["entries"]
    assert [(e["ptx_version"], e["ptx_isa"], e["ptx_isa_from"]) for e in entries] == [("9.0", "9.1", "text")]
    assert fatbin.audit(lib, target="9.0", ptx_isa_max="9.0")["libraries"][0]["verdict"] == "unsupported"
    blind = fatbin.Decompressor(zstd_program="")
    blind.module = None
    entries = fatbin.scan_elf(open(os.path.join(built, "libptx90.so"), "rb").read(), decompressor=blind)["entries"]
    assert [(e["compression"], e["ptx_isa"], e["ptx_isa_from"]) for e in entries] == [("zstd", "9.0", "header")]
    if fatbin.Decompressor().zstd_available:
        entries = fatbin.scan_elf(open(os.path.join(built, "libptx90.so"), "rb").read())["entries"]
        assert [(e["ptx_isa"], e["ptx_isa_from"]) for e in entries] == [("9.0", "text")]


@needs_cuda
def test_sass_beside_the_ptx_is_not_held_to_the_driver(tmp_path):
    """SASS for the GPU runs whatever the PTX's ISA: only PTX-only coverage depends on the driver."""
    src = tmp_path / "k.cu"
    src.write_text(SOURCE)
    lib = str(tmp_path / "libboth.so")
    subprocess.run([NVCC, "-shared", "-Xcompiler", "-fPIC", "-gencode", "arch=compute_90,code=[sm_90,compute_90]",
                    "-o", lib, str(src)], check=True, stdout=subprocess.PIPE)
    got = fatbin.audit(lib, target="9.0", ptx_isa_max="8.7")["libraries"][0]
    assert got["verdict"] == "native" and got["ptx_refused"] == []


@needs_cuda
@pytest.mark.parametrize("row", ["D03+D04"])
def test_package_audits_refuse_and_name_the_library_and_isa(built, tmp_path, row):
    """D03+D04: the venv audit (verify) and the built-wheel audit (ml_packages) fail a PTX-only library whose ISA
    the driver (CUDA 12.8 here) does not load, naming it and the ISA; on a CUDA 13.0 driver it is a jit note."""
    site = tmp_path / "site-packages"
    (site / "ptxpkg").mkdir(parents=True)
    shutil.copy(os.path.join(built, "libptx90.so"), str(site / "ptxpkg" / "libptx90.so"))
    (site / "ptxpkg-1.0.dist-info").mkdir()
    (site / "ptxpkg-1.0.dist-info" / "RECORD").write_text("ptxpkg/libptx90.so,,\n")
    old = ptx_isa.driver_limit("12.8", TABLE)
    result = gpu_audit.venv_audit(str(site), "9.0", ptx_limit=old)
    assert result["packages"]["ptxpkg"]["verdict"] == "unsupported"
    assert len(result["failures"]) == 1
    assert "ptxpkg/libptx90.so runs only through the driver's PTX JIT" in result["failures"][0]
    assert "compute_90 PTX ISA 9.0 (needs a driver of CUDA 13.0 or newer)" in result["failures"][0]
    ok = gpu_audit.venv_audit(str(site), "9.0", ptx_limit=ptx_isa.driver_limit("13.0", TABLE))
    assert ok["failures"] == [] and ok["packages"]["ptxpkg"]["verdict"] == "jit"
    wheel = tmp_path / "ptxpkg-1.0-py3-none-linux_x86_64.whl"
    shutil.make_archive(str(wheel), "zip", str(site))
    os.rename(str(wheel) + ".zip", str(wheel))
    refused = gpu_audit.audit_wheel(str(wheel), ["9.0"], "ptxpkg", ptx_limit=old)
    assert refused["ok"] is False
    assert "ptxpkg: refused by the arch audit" in refused["message"]
    assert "PTX ISA 9.0 (needs a driver of CUDA 13.0 or newer)" in refused["message"]
    assert gpu_audit.audit_wheel(str(wheel), ["9.0"], "ptxpkg", ptx_limit=ptx_isa.driver_limit("13.0", TABLE))["ok"]


# ------------------------------------------------------------------------ data ------

def test_manifest_table_and_the_measured_driver():
    """The manifest's rows are ordered and hold the measured fact: a CUDA 13.0 driver loads up to ISA 9.0."""
    rows = ptx_isa.validate_table(TABLE)
    assert ["%d.%d" % r["isa"] for r in rows if r["cuda"] in ((12, 8), (12, 9), (13, 0), (13, 1))] == \
        ["8.7", "8.8", "9.0", "9.1"]
    limit = ptx_isa.driver_limit(ptx_isa.driver_int_cuda(13000), TABLE)
    assert limit["ptx_isa_max"] == "9.0" and limit["confirmed"] is True
    assert [ptx_isa.accepts(i, "9.0") for i in ("8.0", "8.8", "9.0", "9.1", "9.9")] == [True] * 3 + [False] * 2
    assert ptx_isa.driver_limit("99.0", TABLE)["ptx_isa_max"] is None  # beyond the table: no refusal
    assert "add its row" in ptx_isa.driver_limit("99.0", TABLE)["note"]
    assert ptx_isa.driver_limit(None, TABLE)["ptx_isa_max"] is None


def test_banner_and_driver_version_parsing():
    with open(BANNER) as handle:
        assert ptx_isa.smi_cuda(handle.read()) == "13.0"
    assert ptx_isa.smi_cuda("GPU 0: NVIDIA H200 (UUID: GPU-x)") is None
    assert ptx_isa.driver_int_cuda(12090) == "12.9"
    assert ptx_isa.text_isa(b"//\n// Generated by NVIDIA NVVM Compiler\n//\n\n.version 8.8\n.target sm_90\n") == "8.8"
    assert ptx_isa.text_isa(".target sm_90\n") is None


@pytest.mark.parametrize("table,words", [
    ({}, "give releases"),
    ({"releases": [{"cuda": "13"}]}, "is not a {cuda, isa} row"),
    ({"releases": [{"cuda": "13", "isa": "9.0"}]}, "'13' is not a major.minor version"),
    ({"releases": [{"cuda": "13.0", "isa": "9.0"}, {"cuda": "13.1", "isa": "8.0"}]}, "older than CUDA 13.0's 9.0"),
])
def test_bad_tables_are_refused(table, words):
    with pytest.raises(ptx_isa.PtxIsaError, match=words.replace("{", "\\{").replace("}", "\\}").replace(".", "\\.")
                       .replace("(", "\\(").replace(")", "\\)")):
        ptx_isa.validate_table(table)


# ------------------------------------------------- property: ISA x driver ------

def _ptx_library(isa):
    """A host ELF whose one fat binary entry is uncompressed PTX with `.version <isa>` (the header says so too)."""
    text = (".version %s\n.target sm_90\n.address_size 64\n" % isa).encode()
    text += b"\0" * (-len(text) % 8)
    major, minor = (int(p) for p in isa.split("."))
    head = struct.pack("<HHIQIIHHIIIQQQ", 1, 0x101, 64, len(text), 0, 0, minor, major, 90, 0, 0, 0x11, 0, 0)
    body = head + text
    container = struct.pack("<IHHQ", fatbin.FATBIN_MAGIC, 1, 16, len(body)) + body
    names = b"\0.shstrtab\0.nv_fatbin\0"
    data = names + b"\0" * (-len(names) % 8)
    off = 64 + len(data)
    data += container
    shoff = 64 + len(data)
    header = (b"\x7fELF" + bytes([2, 1, 1, 0, 0]) + b"\0" * 7
              + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, 3, 1))
    shdrs = b"\0" * 64 + struct.pack("<IIQQQQIIQQ", 1, 3, 0, 0, 64, len(names), 0, 0, 1, 0)
    shdrs += struct.pack("<IIQQQQIIQQ", 11, 1, 2, 0, off, len(container), 0, 0, 8, 0)
    return header + data + shdrs


_ROWS = ptx_isa.validate_table(TABLE)
_ISAS = sorted(set("%d.%d" % r["isa"] for r in _ROWS) | {"9.9", "6.5"}, key=ptx_isa.key)
_CUDAS = ["%d.%d" % r["cuda"] for r in _ROWS]


@settings(max_examples=60, deadline=None)
@given(isa=st.sampled_from(_ISAS), cuda=st.sampled_from(_CUDAS), target=st.sampled_from(["9.0", "10.0", "12.1"]))
def test_property_jit_exactly_when_the_driver_loads_the_isa(isa, cuda, target):
    """For every ISA and every driver release of the table: PTX-only coverage is jit iff the ISA is at most the
    driver's row's, unsupported (the ISA named) otherwise; no driver limit known: always jit."""
    lib = fatbin.library_summary(fatbin.scan_elf(_ptx_library(isa))["entries"], cuda_arch.capability(target),
                                 ptx_isa.driver_limit(cuda, TABLE)["ptx_isa_max"])
    loads = ptx_isa.key(isa) <= [r["isa"] for r in _ROWS if "%d.%d" % r["cuda"] == cuda][0]
    assert lib["ptx_versions"] == [isa]
    assert lib["verdict"] == ("jit" if loads else "unsupported")
    assert lib["ptx_refused"] == ([] if loads else [{"arch": "compute_90", "isa": isa}])
    unknown = fatbin.library_summary(fatbin.scan_elf(_ptx_library(isa))["entries"], cuda_arch.capability(target))
    assert unknown["verdict"] == "jit"


# ------------------------------------------------------------ the module ------

@needs_cuda
@pytest.mark.parametrize("row", ["D02"])
def test_wheel_arch_audit_module_holds_ptx_to_the_driver(built, tmp_path, row):
    """D02 through wheel_arch_audit: ISA 9.1 PTX on a stand-in 580 driver (banner CUDA 13.0) is unsupported, and
    require=jit fails naming the library and the ISA; the driver's release is read from nvidia-smi's banner."""
    from ansible_collections.sparkforge.stack.tests.unit.utils.harness import run_module

    lib = os.path.join(built, "libptx9.1.so")
    args = {"path": lib, "target": "9.0", "ptx_isa": TABLE, "nvidia_smi": _smi(tmp_path, "13.0")}
    result, rc = run_module("wheel_arch_audit", args, check_mode=True)
    assert rc == 0, result
    assert result["driver"]["driver_cuda"] == "13.0" and result["driver"]["ptx_isa_max"] == "9.0"
    assert result["verdict"] == "unsupported"
    assert result["libraries"][0]["ptx_refused"] == [{"arch": "compute_90", "isa": "9.1"}]
    result, rc = run_module("wheel_arch_audit", dict(args, require="jit"), check_mode=True)
    assert rc != 0
    assert "is unsupported on compute capability 9.0 (required: jit)" in result["msg"]
    assert "compute_90 PTX ISA 9.1 (needs a driver of CUDA 13.1 or newer)" in result["msg"]
    result, rc = run_module("wheel_arch_audit", dict(args, driver_cuda="13.1", require="jit"), check_mode=True)
    assert rc == 0 and result["verdict"] == "jit", result


@pytest.mark.parametrize("row", ["D05"])
def test_wheel_arch_audit_module_refuses_a_bad_driver_release(tmp_path, row):
    """D05: driver_cuda must be major.minor, as nvidia-smi prints it."""
    from ansible_collections.sparkforge.stack.tests.unit.utils.harness import run_module

    result, rc = run_module("wheel_arch_audit", {"path": str(tmp_path), "target": "9.0", "driver_cuda": "13",
                                                 "ptx_isa": TABLE}, check_mode=True)
    assert rc != 0
    assert result["msg"] == "driver_cuda '13' is not a CUDA release: give one like 13.0 (nvidia-smi's 'CUDA Version')"


# ---------------------------------------------------------------------- verify ------

@needs_cuda
@pytest.mark.parametrize("driver,passed", [(12080, False), (13000, True)], ids=["D04", "13.0"])
def test_verify_holds_torch_lib_to_the_driver_torch_ran_on(built, tmp_path, driver, passed):
    """verify's audit of torch/lib: a PTX-only library there fails the host on a driver (cuDriverGetVersion, as
    the check script reads it) too old for its ISA, naming it; on a CUDA 13.0 driver it runs through the JIT."""
    import sys
    sys.path.insert(0, HERE)
    import test_torch_verify_job as tvj  # pylint: disable=import-error,import-outside-toplevel

    lib_dir = tmp_path / "site-packages" / "torch" / "lib"
    lib_dir.mkdir(parents=True)
    shutil.copy(os.path.join(built, "libptx90.so"), str(lib_dir / "libptx90.so"))
    raw = dict(tvj._raw(), torch_lib_dir=str(lib_dir), driver_cuda_version=driver)
    reports = tmp_path / "reports"
    result, failure = tvj.VerifyJob(tvj.params(host_label="h1", ptx_isa=TABLE, venv_audit=False,
                                               report_dir=str(reports)), tvj.Host(), False, tvj.RecordedGpu(raw)).run()
    assert result["audit_verdict"] == ("jit" if passed else "unsupported")
    with open(str(reports / "verify.json")) as handle:
        audit = json.load(handle)["audit"]
    assert audit["driver"]["driver_cuda"] == ("12.8" if driver == 12080 else "13.0")
    with open(str(reports / "verify.md")) as handle:
        assert "PTX held to the driver's ISA %s" % ("8.7" if driver == 12080 else "9.0") in handle.read()
    if passed:
        assert failure is None
    else:
        assert "the audit finds libraries without code for 9.0: libptx90.so; libptx90.so runs only through the " \
               "driver's PTX JIT" in failure
        assert "compute_90 PTX ISA 9.0 (needs a driver of CUDA 13.0 or newer)" in failure


@pytest.mark.parametrize("row", ["D06"])
def test_ml_packages_plan_refuses_a_bad_driver_release_and_gives_each_gpu_item_the_limit(row):
    """D06: ml_packages' driver_cuda must be major.minor; a good one gives every GPU item the driver's PTX limit."""
    from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import JobError
    from ansible_collections.sparkforge.stack.plugins.module_utils.packages import ml_gpu

    plan = [{"name": "ptxpkg", "gpu_wheel": True, "method": "wheel"}]
    with pytest.raises(JobError, match=r"driver_cuda '13' / ptx_isa: '13' is not a major\.minor version"):
        ml_gpu.gpu_plan({"audit_targets": ["9.0"], "driver_cuda": "13", "ptx_isa": TABLE}, plan)
    ml_gpu.gpu_plan({"audit_targets": ["9.0"], "driver_cuda": "12.8", "ptx_isa": TABLE}, plan)
    assert plan[0]["ptx_limit"]["ptx_isa_max"] == "8.7" and plan[0]["audit_targets"] == ["9.0"]
