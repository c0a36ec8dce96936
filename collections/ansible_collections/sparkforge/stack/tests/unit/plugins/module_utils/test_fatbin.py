# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests of the fat binary reader.

The real inputs are built here with CUDA 13's nvcc (cached under
~/.cache/sparkforge/fatbin-tests, keyed by the nvcc version and the source),
one object per target variant, so the a/f layout found empirically stays
checked.  Tests that need nvcc skip without it; the format walk, LZ4 and the
verdict rules are also tested on byte-exact synthetic containers.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os
import shutil
import struct
import subprocess
import zipfile

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import fatbin

NVCC = os.environ.get("SPARKFORGE_NVCC", "/usr/local/cuda/bin/nvcc")
CACHE = os.path.expanduser("~/.cache/sparkforge/fatbin-tests")

SOURCE = r"""
__device__ __noinline__ float helper(float x) { return x * x + 1.0f; }
__global__ void kadd(float *a, float b) { a[threadIdx.x] = helper(a[threadIdx.x]) + b; }
__global__ void kmul(float *a, float b) { a[threadIdx.x] *= b; }
template <int N> __global__ void kt(float *a) { a[threadIdx.x] += N; }
template __global__ void kt<1>(float *);
void launch(float *a) { kadd<<<1, 32>>>(a, 1.0f); kmul<<<1, 32>>>(a, 2.0f); }
"""
KERNELS = 3  # kadd, kmul, kt<1>; helper is a __device__ function and does not count

# name -> nvcc target flags
VARIANTS = {
    "sm_75": ["-gencode", "arch=compute_75,code=sm_75"],
    "sm_90": ["-gencode", "arch=compute_90,code=sm_90"],
    "sm_90a": ["-gencode", "arch=compute_90a,code=sm_90a"],
    "sm_120": ["-gencode", "arch=compute_120,code=sm_120"],
    "sm_120a": ["-gencode", "arch=compute_120a,code=sm_120a"],
    "sm_120f": ["-gencode", "arch=compute_120f,code=sm_120f"],
    "sm_121": ["-gencode", "arch=compute_121,code=sm_121"],
    "sm_121a": ["-gencode", "arch=compute_121a,code=sm_121a"],
    "ptx120": ["-gencode", "arch=compute_120,code=compute_120"],
    "multi": ["-gencode", "arch=compute_90,code=sm_90", "-gencode", "arch=compute_120,code=[sm_120,compute_120]"],
    "lz4": ["-gencode", "arch=compute_90,code=[sm_90,compute_90]", "-Xfatbin", "-compress-all",
            "-Xfatbin", "--compress-mode=speed"],
    "zstd": ["-gencode", "arch=compute_90,code=[sm_90,compute_90]", "-Xfatbin", "-compress-all",
             "-Xfatbin", "--compress-mode=size"],
}

needs_nvcc = pytest.mark.skipif(not os.access(NVCC, os.X_OK), reason="CUDA's nvcc is not installed at " + NVCC)


def _nvcc_version():
    return subprocess.run([NVCC, "--version"], stdout=subprocess.PIPE, check=True).stdout


@pytest.fixture(scope="session")
def built():
    """Build (or reuse) one object per variant plus a shared library and an -rdc object."""
    key = hashlib.sha256(_nvcc_version() + SOURCE.encode() + repr(sorted(VARIANTS.items())).encode()).hexdigest()[:16]
    out = os.path.join(CACHE, key)
    if not os.path.isdir(out):
        work = out + ".tmp%d" % os.getpid()
        os.makedirs(work)
        src = os.path.join(work, "k.cu")
        with open(src, "w") as handle:
            handle.write(SOURCE)
        procs = []
        for name, flags in VARIANTS.items():
            procs.append(subprocess.Popen([NVCC, "-c", "-Xcompiler", "-fPIC"] + flags + ["-o", os.path.join(work, name + ".o"), src]))
            if len(procs) >= 2:
                assert procs.pop(0).wait() == 0
        procs.append(subprocess.Popen([NVCC, "-shared", "-Xcompiler", "-fPIC", "-cudart", "shared"] + VARIANTS["multi"]
                                      + ["-o", os.path.join(work, "libmulti.so"), src]))
        procs.append(subprocess.Popen([NVCC, "-c", "-rdc=true", "-Xcompiler", "-fPIC"] + VARIANTS["sm_90"]
                                      + ["-o", os.path.join(work, "rdc.o"), src]))
        for proc in procs:
            assert proc.wait() == 0
        os.rename(work, out)
    return out


def _lib(built_dir, name, target="12.1"):
    result = fatbin.audit(os.path.join(built_dir, name), target=target)
    assert len(result["libraries"]) == 1, result
    return result["libraries"][0]


# ------------------------------------------------------- real nvcc output ---

@needs_nvcc
@pytest.mark.parametrize("name,sass,cuobjdump", [
    ("sm_75", "sm_75", "sm_75"),
    ("sm_90", "sm_90", "sm_90"),
    ("sm_90a", "sm_90a", "sm_90a"),
    ("sm_120", "sm_120", "sm_120"),
    ("sm_120a", "sm_120a", "sm_120a"),
    ("sm_120f", "sm_120f", "sm_120"),  # cuobjdump drops the family letter
    ("sm_121", "sm_121", "sm_121"),
    ("sm_121a", "sm_121a", "sm_121a"),
])
def test_sass_variant_and_kernel_count(built, name, sass, cuobjdump):
    lib = _lib(built, name + ".o")
    assert lib["sass"] == [sass]
    assert lib["ptx"] == []
    assert lib["kernels"] == {sass: KERNELS}
    assert lib["cuobjdump_elf"] == [cuobjdump]
    assert lib["fatbin_sections"] == [".nv_fatbin"]


@needs_nvcc
def test_elf_abi8_keeps_sm_in_bits_8_to_15_and_no_variant_bits(built):
    """nvcc 13 writes identical e_flags for sm_120/120a/120f: the variant is in the entry flags."""
    seen = {}
    for name in ("sm_120", "sm_120a", "sm_120f", "sm_90", "sm_90a"):
        with open(os.path.join(built, name + ".o"), "rb") as handle:
            scan = fatbin.scan_elf(handle.read())
        (entry,) = scan["entries"]
        assert entry["elf_abi"] == 8
        assert (entry["e_flags"] >> 8) & 0xFF == entry["sm"]
        seen[name] = (entry["e_flags"], entry["flags"] & (fatbin.FLAG_ARCH_SPECIFIC | fatbin.FLAG_FAMILY))
    assert seen["sm_120"][0] == seen["sm_120a"][0] == seen["sm_120f"][0]
    assert seen["sm_90"][0] == seen["sm_90a"][0]
    assert seen["sm_120"][1] == 0 and seen["sm_90"][1] == 0
    assert seen["sm_120a"][1] == fatbin.FLAG_ARCH_SPECIFIC == seen["sm_90a"][1]
    assert seen["sm_120f"][1] == fatbin.FLAG_FAMILY


@needs_nvcc
@pytest.mark.parametrize("name,target,verdict", [
    ("sm_121", "12.1", "native"),
    ("sm_121a", "12.1", "native"),
    ("sm_120", "12.1", "compatible"),
    ("sm_120f", "12.1", "compatible"),
    ("sm_120a", "12.1", "unsupported"),  # arch-specific code runs only on 12.0
    ("sm_120a", "12.0", "native"),
    ("sm_121", "12.0", "unsupported"),  # a higher minor never runs on a lower one
    ("sm_90", "12.1", "unsupported"),  # SASS never crosses a major
    ("sm_90a", "9.0", "native"),
    ("ptx120", "12.1", "jit"),
    ("ptx120", "9.0", "unsupported"),
    ("multi", "12.1", "compatible"),
    ("multi", "10.0", "unsupported"),
    ("multi", "13.0", "jit"),
    ("multi", "9.0", "native"),
])
def test_verdicts_on_real_objects(built, name, target, verdict):
    assert _lib(built, name + ".o", target)["verdict"] == verdict


@needs_nvcc
def test_ptx_entry(built):
    lib = _lib(built, "ptx120.o")
    assert lib["sass"] == [] and lib["ptx"] == ["compute_120"]
    assert lib["ptx_versions"] == ["9.0"]  # CUDA 13.0 writes PTX ISA 9.0
    assert lib["cuobjdump_ptx"] == ["sm_120"]


@needs_nvcc
@pytest.mark.parametrize("name,method", [("lz4", "lz4"), ("zstd", "zstd")])
def test_compressed_entries_are_decompressed(built, name, method):
    with open(os.path.join(built, name + ".o"), "rb") as handle:
        entries = fatbin.scan_elf(handle.read())["entries"]
    assert {e["compression"] for e in entries} == {method}
    lib = _lib(built, name + ".o", "9.0")
    if method == "zstd" and not fatbin.Decompressor().zstd_available:
        assert lib["kernels"] == {"sm_90": None}
    else:
        assert lib["kernels"] == {"sm_90": KERNELS}
    assert lib["ptx"] == ["compute_90"] and lib["verdict"] == "native"


@needs_nvcc
def test_zstd_without_a_decoder_reports_unknown_kernels(built):
    decomp = fatbin.Decompressor(zstd_program="")
    decomp.module = None
    result = fatbin.audit(os.path.join(built, "zstd.o"), target="9.0", decompressor=decomp)
    assert result["libraries"][0]["kernels"] == {"sm_90": None}
    assert result["libraries"][0]["verdict"] == "native"
    assert result["zstd_decoder"] is False


@needs_nvcc
def test_shared_library_and_rdc_object(built):
    lib = _lib(built, "libmulti.so", "12.1")
    assert lib["sass"] == ["sm_90", "sm_120"] and lib["ptx"] == ["compute_120"]
    assert lib["verdict"] == "compatible" and lib["via"] == ["sm_120"]
    rdc = _lib(built, "rdc.o", "9.0")
    assert rdc["fatbin_sections"] == ["__nv_relfatbin"]
    assert rdc["sass"] == ["sm_90"]


def _leftovers():
    import tempfile
    return sorted(n for n in os.listdir(tempfile.gettempdir()) if n.startswith("sparkforge-audit-"))


@needs_nvcc
def test_wheel_and_directory_inputs(built, tmp_path):
    wheel = tmp_path / "demo-1.0-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(str(wheel), "w", zipfile.ZIP_DEFLATED) as handle:
        handle.write(os.path.join(built, "libmulti.so"), "demo/libmulti.so")
        handle.write(os.path.join(built, "sm_121.o"), "demo/lib/k121.o")
        handle.writestr("demo/__init__.py", "")
        handle.writestr("demo/notelf.so", "plain text")
    before = _leftovers()
    result = fatbin.audit(str(wheel), target="12.1")
    assert _leftovers() == before  # each member's temporary copy is deleted
    assert result["input_type"] == "wheel"
    assert sorted(lib["path"] for lib in result["libraries"]) == ["demo/lib/k121.o", "demo/libmulti.so"]
    assert result["verdict"] == "compatible"  # the weakest library with GPU code

    tree = tmp_path / "site"
    (tree / "pkg").mkdir(parents=True)
    shutil.copy(os.path.join(built, "sm_75.o"), str(tree / "pkg" / "old.o"))
    shutil.copy(os.path.join(built, "sm_121a.o"), str(tree / "pkg" / "new.o"))
    (tree / "pkg" / "libcpu.so").write_bytes(b"\x7fELF" + b"\0" * 60)
    result = fatbin.audit(str(tree), target="12.1")
    assert result["input_type"] == "directory"
    assert {lib["path"]: lib["verdict"] for lib in result["libraries"]} == {
        os.path.join("pkg", "new.o"): "native", os.path.join("pkg", "old.o"): "unsupported"}
    assert result["verdict"] == "unsupported"


@needs_nvcc
def test_agrees_with_cuobjdump_style_listing(built):
    """cuobjdump's listing names, as this reader predicts them, for the multi-target library.

    A shared library built by nvcc holds two containers (cuobjdump 13.5 lists
    4 ELF files here: sm_90, sm_120, sm_90, sm_120).
    """
    lib = _lib(built, "libmulti.so")
    assert lib["cuobjdump_elf"] == ["sm_120", "sm_120", "sm_90", "sm_90"]
    assert lib["cuobjdump_ptx"] == ["sm_120"]


# ------------------------------------------------- synthetic (no nvcc) ------

def _cubin(sm, abi=8, kernels=2, device_funcs=1):
    """A minimal cubin ELF: header, .shstrtab, .symtab with entry and non-entry FUNC symbols."""
    shstr = b"\0.shstrtab\0.symtab\0"
    syms = b"\0" * 24
    for _kernel in range(kernels):
        syms += struct.pack("<IBBHQQ", 0, 0x12, 0x10, 0, 0, 0)
    for _func in range(device_funcs):
        syms += struct.pack("<IBBHQQ", 0, 0x02, 0x00, 0, 0, 0)
    e_flags = (sm << 8) | 0x02 if abi >= 8 else sm | 0x500 | (sm << 16)
    body_off = 64
    shoff = body_off + len(shstr) + len(syms)
    header = (b"\x7fELF" + bytes([2, 1, 1, 0x41, abi]) + b"\0" * 7
              + struct.pack("<HHIQQQIHHHHHH", 2, 190, 1, 0, 0, shoff, e_flags, 64, 0, 0, 64, 3, 1))
    sections = b"\0" * 64
    sections += struct.pack("<IIQQQQIIQQ", 1, 3, 0, 0, body_off, len(shstr), 0, 0, 1, 0)
    sections += struct.pack("<IIQQQQIIQQ", 11, 2, 0, 0, body_off + len(shstr), len(syms), 1, 1, 8, 24)
    return header + shstr + syms + sections


def _entry(kind, arch, payload, flags=0x11, version=(1, 8), compressed=None, size=None):
    data = compressed if compressed is not None else payload
    padded = data + b"\0" * (-len(data) % 8)
    head = struct.pack("<HHIQIIHHIIIQQQ", kind, 0x101, 64, len(padded), len(data) if compressed is not None else 0, 0,
                       version[1], version[0], arch, 0, 0, flags, 0,
                       size if size is not None else (len(payload) if compressed is not None else 0))
    return head + padded


def _container(entries):
    body = b"".join(entries)
    return struct.pack("<IHHQ", fatbin.FATBIN_MAGIC, 1, 16, len(body)) + body


def _host_elf(section_blobs):
    """A 64-bit host ELF with the given (name, bytes) sections."""
    names = b"\0.shstrtab\0" + b"".join(n.encode() + b"\0" for n, _b in section_blobs)
    data = names
    offsets = []
    for _n, blob in section_blobs:
        data += b"\0" * (-len(data) % 8)
        offsets.append(64 + len(data))
        data += blob
    data += b"\0" * (-len(data) % 8)
    shoff = 64 + len(data)
    header = (b"\x7fELF" + bytes([2, 1, 1, 0, 0]) + b"\0" * 7
              + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, 2 + len(section_blobs), 1))
    shdrs = b"\0" * 64 + struct.pack("<IIQQQQIIQQ", 1, 3, 0, 0, 64, len(names), 0, 0, 1, 0)
    name_off = 11
    for (name, blob), off in zip(section_blobs, offsets):
        shdrs += struct.pack("<IIQQQQIIQQ", name_off, 1, 2, 0, off, len(blob), 0, 0, 8, 0)
        name_off += len(name) + 1
    return header + data + shdrs


def _lz4_literals(data):
    """An LZ4 block made only of literals (valid LZ4, exercises the length extension)."""
    length = len(data)
    out = bytearray()
    if length >= 15:
        out.append(0xF0)
        rest = length - 15
        while rest >= 255:
            out.append(255)
            rest -= 255
        out.append(rest)
    else:
        out.append(length << 4)
    return bytes(out) + data


def test_lz4_block_with_overlapping_match():
    # "abc" literal, then a match of 9 at offset 3 -> "abcabcabcabc", then a last literal "!".
    block = bytes([0x35]) + b"abc" + struct.pack("<H", 3) + bytes([0x10]) + b"!"
    assert fatbin.lz4_block_decompress(block, 13) == b"abcabcabcabc!"
    with pytest.raises(fatbin.FatbinError):
        fatbin.lz4_block_decompress(bytes([0x10]) + b"a" + struct.pack("<H", 5) + b"", 10)


def test_synthetic_library_two_containers_abi7_abi8_lz4():
    old = _cubin(80, abi=7, kernels=5)
    new = _cubin(120, abi=8, kernels=4)
    ptx = b"//\n.version 8.4\n.target sm_90\n"
    fat = (_container([_entry(2, 80, old, version=(1, 7)),
                       _entry(2, 120, new, flags=0x11 | fatbin.FLAG_LZ4, compressed=_lz4_literals(new))])
           + _container([_entry(1, 90, ptx, version=(8, 4)),
                         _entry(2, 121, _cubin(121, kernels=1), flags=0x11 | fatbin.FLAG_ARCH_SPECIFIC)]))
    scan = fatbin.scan_elf(_host_elf([(".text", b"\x90" * 16), (".nv_fatbin", fat)]))
    assert [(e["arch"], e.get("kernels")) for e in scan["entries"]] == [
        ("sm_80", 5), ("sm_120", 4), ("compute_90", None), ("sm_121a", 1)]
    assert scan["entries"][0]["elf_abi"] == 7
    summary = fatbin.library_summary(scan["entries"], (12, 1))
    assert summary["ptx_versions"] == ["8.4"]
    # sm_121a holds 1 kernel, sm_120 holds 4: the library runs through sm_120 compatibility.
    assert summary["verdict"] == "compatible"
    assert summary["via"] == ["sm_120", "sm_121a"]
    assert fatbin.library_summary(scan["entries"], (8, 6))["verdict"] == "compatible"
    assert fatbin.library_summary(scan["entries"], (9, 0))["verdict"] == "jit"
    assert fatbin.library_summary(scan["entries"], (7, 5))["verdict"] == "unsupported"


def test_unknown_kernel_counts_weigh_by_cubins():
    """torch 2.11 cu130 (zstd cubins, no decoder): 444 sm_120 cubins and one sm_121a cubin -> compatible on 12.1."""
    entries = ([{"kind": "elf", "arch": "sm_120", "cuobjdump_name": "sm_120", "kernels": None, "compression": "zstd"}] * 444
               + [{"kind": "elf", "arch": "sm_121a", "cuobjdump_name": "sm_121a", "kernels": None, "compression": "zstd"}])
    summary = fatbin.library_summary(entries, (12, 1))
    assert summary["verdict"] == "compatible" and summary["via"] == ["sm_120", "sm_121a"]
    assert summary["kernels"] == {"sm_120": None, "sm_121a": None}
    assert fatbin.library_summary(entries[-1:], (12, 1))["verdict"] == "native"


def test_entry_arch_must_match_cubin():
    fat = _container([_entry(2, 90, _cubin(80))])
    with pytest.raises(fatbin.FatbinError):
        fatbin.scan_elf(_host_elf([(".nv_fatbin", fat)]))


def test_relfatbin_ignored_when_linked_fatbin_exists():
    rel = _container([_entry(1, 90, b".version 8.4\n", version=(8, 4)), _entry(2, 90, _cubin(90, kernels=3))])
    linked = _container([_entry(2, 90, _cubin(90, kernels=3))])
    scan = fatbin.scan_elf(_host_elf([("__nv_relfatbin", rel), (".nv_fatbin", linked)]))
    assert scan["sections"] == [".nv_fatbin"] and scan["ignored_sections"] == ["__nv_relfatbin"]
    assert [e["arch"] for e in scan["entries"]] == ["sm_90"]


def test_not_elf_and_missing_inputs(tmp_path):
    plain = tmp_path / "libx.so"
    plain.write_text("not elf")
    assert fatbin.audit(str(tmp_path), target="9.0")["libraries"] == []
    with pytest.raises(fatbin.FatbinError):
        fatbin.audit(str(tmp_path / "nope.whl"))


@pytest.mark.parametrize("arch,target,level", [
    ("sm_120", (12, 1), "compatible"), ("sm_120f", (12, 1), "compatible"), ("sm_121f", (12, 0), None),
    ("sm_100a", (10, 3), None), ("sm_100a", (10, 0), "native"), ("compute_80", (12, 1), "jit"),
    ("compute_120a", (12, 1), None), ("compute_120a", (12, 0), "jit"), ("compute_120f", (12, 1), "jit"),
    ("compute_120f", (13, 0), None), ("sm_90", (10, 0), None),
])
def test_arch_level(arch, target, level):
    assert fatbin.arch_level(arch, target) == level


def test_weakest_and_parsers():
    assert fatbin.weakest(["native", "jit", None, "compatible"]) == "jit"
    assert fatbin.weakest([None]) is None
    with pytest.raises(fatbin.FatbinError, match="sm90x"):
        fatbin.audit(os.devnull, target="sm90x")  # a target cuda/arch.py cannot read, as the audit's error
    text = "ELF file    1: libx.1.sm_90a.cubin\nELF file    2: libx.2.sm_120.cubin\nPTX file    1: libx.1.sm_120.ptx\n"
    assert fatbin.parse_cuobjdump_list(text) == ["sm_120", "sm_120", "sm_90a"]
