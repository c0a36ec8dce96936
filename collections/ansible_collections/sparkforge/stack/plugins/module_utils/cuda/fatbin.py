# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Kept whole: one binary format (fat binary containers in ELF) and the verdicts read from it; the parsers
# and the audit share the format's constants and are checked as one against cuobjdump (test_fatbin.py).
"""Read CUDA fat binaries inside ELF files, without the CUDA toolkit.

What a library can run on is decided by the device code nvcc put in it: SASS
(machine code, "ELF"/cubin entries) for some ``sm_XY`` targets and PTX
(``compute_XY``) that the driver can compile at load time.  This module lists
them the way ``cuobjdump --list-elf/--list-ptx`` does and decides, for a target
compute capability, whether a library runs natively, through binary
compatibility, through the driver's PTX JIT, or not at all.

Formats (all little-endian), as checked against nvcc/fatbinary 13.0 output
and cuobjdump 13.x (see tests/unit/plugins/module_utils/test_fatbin.py):

* The host ELF keeps the fat binaries in the section ``.nv_fatbin`` (shared
  libraries, executables) or ``__nv_relfatbin`` (relocatable objects built
  with ``-rdc``).  A library linked from ``-rdc`` objects carries both; only
  ``.nv_fatbin`` is registered with (and loaded by) the CUDA runtime, so only
  it counts there, as in cuobjdump's listing.  A section holds one container per translation unit, back
  to back, each 8-byte aligned.
* Container header, 16 bytes: ``u32 magic 0xBA55ED50, u16 version (1),
  u16 header_size (16), u64 size of the entries that follow``.
* Entry header (``header_size`` bytes, 64 or more): ``u16 kind (1 PTX,
  2 ELF), u16 version, u32 header_size, u64 payload size (padded),
  u32 compressed size, u32 -, u16 minor, u16 major (PTX ISA version for PTX
  entries), u32 arch (e.g. 120), u32 name offset, u32 name length,
  u64 flags, u64 -, u64 uncompressed size``; header bytes beyond 64 carry
  extra records that this reader skips.
* Entry flags: 0x1 64-bit, 0x10 Linux host, 0x2000 LZ4-compressed payload,
  0x8000 Zstandard-compressed payload, 0x100000 arch-specific target
  (``sm_90a``), 0x200000 family target (``sm_120f``).  nvcc 13.0 writes the
  same cubin for sm_120, sm_120a and sm_120f (identical ELF ``e_flags``); the
  ``a``/``f`` variant lives only in these entry flags.
* Cubin ELF header ``e_flags``: ELF ABI version 7 (CUDA <= 12.x) keeps the SM
  number in bits 0-7 (and the virtual SM in bits 16-23); ABI version 8
  (CUDA >= 12.8/13) keeps it in bits 8-15.

Kernel count (one definition, used everywhere): the number of symbols of type
STT_FUNC in a cubin's ``.symtab`` whose ``st_other`` has the CUDA entry bit
(0x10), i.e. ``__global__`` functions; non-inlined ``__device__`` functions do
not count.  Compressed payloads are decompressed when a decoder is available
(LZ4 always, in pure Python; Zstandard through the ``zstandard`` or
``compression.zstd`` module, or the ``zstd`` program); otherwise the count is
``None``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import mmap
import os
import re
import shutil
import struct
import subprocess
import tempfile
import zipfile

from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import arch as cuda_arch
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import ptx_isa

FATBIN_MAGIC = 0xBA55ED50
FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin")
KIND_PTX = 1
KIND_ELF = 2

FLAG_64BIT = 0x1
FLAG_LINUX = 0x10
FLAG_LZ4 = 0x2000
FLAG_ZSTD = 0x8000
FLAG_ARCH_SPECIFIC = 0x100000
FLAG_FAMILY = 0x200000

STO_CUDA_ENTRY = 0x10
STT_FUNC = 2
SHT_SYMTAB = 2

VERDICTS = ("native", "compatible", "jit", "unsupported")
# Better verdicts have lower ranks.
_RANK = dict((name, index) for index, name in enumerate(VERDICTS))

_ELF_MAGIC = b"\x7fELF"
_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")  # the first 64 bytes of an entry header
_CONTAINER = struct.Struct("<IHHQ")
_SO_NAME = re.compile(r"(\.so(\.\d+)*|\.o)$")


class FatbinError(Exception):
    pass


# ---------------------------------------------------------------- ELF -------

def elf_sections(buf):
    """Sections of a 64-bit little-endian ELF image: list of (name, type, offset, size).

    Raises FatbinError for anything else (the hosts sparkforge supports,
    x86_64 and aarch64 Linux, only produce this kind).
    """
    if len(buf) < 64 or buf[:4] != _ELF_MAGIC:
        raise FatbinError("not an ELF file")
    if buf[4] != 2 or buf[5] != 1:
        raise FatbinError("not a 64-bit little-endian ELF file")
    shoff = struct.unpack_from("<Q", buf, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", buf, 0x3A)
    if shoff == 0:
        return []
    if shnum == 0:  # more than 0xff00 sections: the count is in section 0's sh_size
        shnum = struct.unpack_from("<Q", buf, shoff + 32)[0]
    if shoff + shnum * shentsize > len(buf):
        raise FatbinError("truncated ELF: section headers run past the end of the file")
    raw = []
    for index in range(shnum):
        name, stype, _flags, _addr, offset, size = struct.unpack_from("<IIQQQQ", buf, shoff + index * shentsize)
        raw.append((name, stype, offset, size))
    names_off = raw[shstrndx][2] if shstrndx < len(raw) else 0
    out = []
    for name, stype, offset, size in raw:
        end = buf.find(b"\0", names_off + name)
        out.append((bytes(buf[names_off + name:end]).decode("ascii", "replace"), stype, offset, size))
    return out


def cubin_sm(buf):
    """(sm number, ELF ABI version, e_flags) of a cubin ELF image."""
    if len(buf) < 64 or buf[:4] != _ELF_MAGIC:
        raise FatbinError("cubin entry is not an ELF image")
    abi_version = buf[8]
    e_flags = struct.unpack_from("<I", buf, 0x30)[0]
    if abi_version >= 8:
        sm = (e_flags >> 8) & 0xFF
    else:
        sm = e_flags & 0xFF
    return sm, abi_version, e_flags


def count_kernels(cubin):
    """Number of __global__ functions (STT_FUNC symbols with the CUDA entry bit) in a cubin."""
    count = 0
    for _name, stype, offset, size in elf_sections(cubin):
        if stype != SHT_SYMTAB:
            continue
        for base in range(offset, offset + size - 23, 24):
            info = cubin[base + 4]
            other = cubin[base + 5]
            if (info & 0xF) == STT_FUNC and (other & STO_CUDA_ENTRY):
                count += 1
    return count


# --------------------------------------------------------- decompression ----

def lz4_block_decompress(data, size):
    """Decode one raw LZ4 block (no frame header) of known decompressed ``size``."""
    out = bytearray()
    pos = 0
    end = len(data)
    while pos < end:
        token = data[pos]
        pos += 1
        literal = token >> 4
        if literal == 15:
            while True:
                extra = data[pos]
                pos += 1
                literal += extra
                if extra != 255:
                    break
        out += data[pos:pos + literal]
        pos += literal
        if pos >= end or len(out) >= size:
            break
        offset = data[pos] | (data[pos + 1] << 8)
        pos += 2
        if offset == 0 or offset > len(out):
            raise FatbinError("corrupt LZ4 block (match offset %d at output %d)" % (offset, len(out)))
        length = token & 0xF
        if length == 15:
            while True:
                extra = data[pos]
                pos += 1
                length += extra
                if extra != 255:
                    break
        length += 4
        start = len(out) - offset
        if length <= offset:
            out += out[start:start + length]
        else:
            for index in range(length):
                out.append(out[start + index])
    if len(out) < size:
        raise FatbinError("LZ4 block decoded to %d bytes, header says %d" % (len(out), size))
    return bytes(out[:size])


def _zstd_module():
    try:
        import zstandard  # pylint: disable=import-error

        return lambda data, size: zstandard.ZstdDecompressor().decompress(data, max_output_size=size)
    except ImportError:
        pass
    try:
        from compression import zstd  # pylint: disable=import-error

        return lambda data, size: zstd.decompress(data)
    except ImportError:
        return None


class Decompressor:
    """Decompresses entry payloads; Zstandard payloads are batched into one ``zstd`` run."""

    def __init__(self, zstd_program=None):
        self.module = _zstd_module()
        self.program = zstd_program if zstd_program is not None else shutil.which("zstd")

    @property
    def zstd_available(self):
        return bool(self.module or self.program)

    def zstd_many(self, payloads):
        """Decompress a list of (data, size); returns a list of bytes (None where it failed)."""
        if not payloads:
            return []
        if self.module:
            out = []
            for data, size in payloads:
                try:
                    out.append(self.module(data, size))
                except Exception:  # pylint: disable=broad-except
                    out.append(None)
            return out
        if not self.program:
            return [None] * len(payloads)
        # Concatenated Zstandard frames decode to the concatenated outputs.
        with tempfile.TemporaryFile() as src:
            for data, _size in payloads:
                src.write(data)
            src.seek(0)
            proc = subprocess.run([self.program, "-d", "-c", "-q"], stdin=src, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, check=False)
        blob = proc.stdout
        if proc.returncode != 0 or len(blob) != sum(size for _data, size in payloads):
            return [None] * len(payloads)
        out = []
        pos = 0
        for _data, size in payloads:
            out.append(blob[pos:pos + size])
            pos += size
        return out


# ------------------------------------------------------------- fatbin -------

def arch_name(prefix, number, flags):
    """'sm' / 'compute', 90, flags -> 'sm_90a', 'compute_120f', 'sm_75'."""
    suffix = "a" if flags & FLAG_ARCH_SPECIFIC else ("f" if flags & FLAG_FAMILY else "")
    return "%s_%d%s" % (prefix, number, suffix)


def iter_containers(buf, start, end):
    """Yield (offset, header_size, entries_size) for each fat binary container in buf[start:end]."""
    pos = start
    while pos + _CONTAINER.size <= end:
        magic, _version, header_size, size = _CONTAINER.unpack_from(buf, pos)
        if magic != FATBIN_MAGIC:
            pos = start + ((pos - start) // 8 + 1) * 8  # padding between containers
            continue
        if pos + header_size + size > end:
            raise FatbinError("fat binary container at 0x%x runs past its section" % pos)
        yield pos, header_size, size
        pos += header_size + size


def iter_entries(buf, start, size):
    """Yield one dict per entry of the container whose entries span buf[start:start+size]."""
    pos = start
    end = start + size
    while pos + _ENTRY.size <= end:
        (kind, _ver, header_size, payload_size, compressed_size, _u1, minor, major, arch,
         _name_off, _name_len, flags, _u2, uncompressed_size) = _ENTRY.unpack_from(buf, pos)
        if kind not in (KIND_PTX, KIND_ELF) or header_size < _ENTRY.size:
            raise FatbinError("unknown fat binary entry (kind %d, header %d) at 0x%x" % (kind, header_size, pos))
        payload = pos + header_size
        yield {
            "kind": "ptx" if kind == KIND_PTX else "elf",
            "arch": arch,
            "flags": flags,
            "version": "%d.%d" % (major, minor),
            "payload_offset": payload,
            "payload_size": payload_size,
            "compressed_size": compressed_size if flags & (FLAG_LZ4 | FLAG_ZSTD) else None,
            "uncompressed_size": uncompressed_size if flags & (FLAG_LZ4 | FLAG_ZSTD) else payload_size,
            "compression": "lz4" if flags & FLAG_LZ4 else ("zstd" if flags & FLAG_ZSTD else None),
        }
        pos = payload + payload_size


def scan_elf(buf, kernels=True, decompressor=None):
    """Every fat binary entry of one ELF image (a bytes-like object or mmap).

    Returns a dict: ``sections`` (the fatbin sections found), ``entries`` (kind,
    name as cuobjdump prints it, our arch name with the a/f variant, version,
    compression, kernels) in file order.
    """
    decompressor = decompressor or Decompressor()
    found = [(name, offset, size) for name, _t, offset, size in elf_sections(buf) if name in FATBIN_SECTIONS]
    # A library linked with -rdc keeps both: the relocatable inputs (__nv_relfatbin)
    # and the linked result (.nv_fatbin) that the CUDA runtime registers and loads.
    # Only what is loaded counts (cuobjdump lists the same); __nv_relfatbin alone
    # is what a relocatable object has.
    sections = [s for s in found if s[0] == ".nv_fatbin"] or found
    entries = []
    pending = []  # (entry, compressed data, size) waiting for one batched zstd run
    for _name, offset, size in sections:
        for cpos, header_size, csize in iter_containers(buf, offset, offset + size):
            for raw in iter_entries(buf, cpos + header_size, csize):
                entry = _describe(buf, raw)
                entries.append(entry)
                if not kernels and raw["kind"] == "elf":
                    continue
                data_len = raw["compressed_size"] if raw["compression"] else raw["payload_size"]
                data = buf[raw["payload_offset"]:raw["payload_offset"] + data_len]
                if raw["compression"] == "zstd":
                    pending.append((entry, bytes(data), raw["uncompressed_size"]))
                    continue
                try:
                    if raw["compression"] == "lz4":
                        data = lz4_block_decompress(bytes(data), raw["uncompressed_size"])
                    _read_payload(entry, data)
                except (FatbinError, IndexError, struct.error):
                    _read_payload(entry, None)
    if pending and decompressor.zstd_available:
        outputs = decompressor.zstd_many([(data, size) for _e, data, size in pending])
        for (entry, _data, _size), payload in zip(pending, outputs):
            try:
                _read_payload(entry, payload)
            except (FatbinError, IndexError, struct.error):
                _read_payload(entry, None)
    return {"sections": [name for name, _o, _s in sections],
            "ignored_sections": [name for name, _o, _s in found if (name, _o, _s) not in sections],
            "entries": entries}


def _read_payload(entry, data):
    """A cubin's kernel count, or a PTX entry's ISA from its text's ``.version`` line (what the driver reads; the
    entry header's version stays the ISA when the text cannot be read: no Zstandard decoder)."""
    if entry["kind"] == "elf":
        entry["kernels"] = count_kernels(data) if data else None
        return
    isa = ptx_isa.text_isa(bytes(data[:4096])) if data else None
    if isa:
        entry["ptx_isa"], entry["ptx_isa_from"] = isa, "text"


def _describe(buf, raw):
    flags = raw["flags"]
    if raw["kind"] == "elf":
        sm = raw["arch"]
        e_flags = None
        abi = None
        if not raw["compression"]:
            head = bytes(buf[raw["payload_offset"]:raw["payload_offset"] + 64])
            sm, abi, e_flags = cubin_sm(head)
            if sm != raw["arch"]:
                raise FatbinError("cubin says sm_%d, its fat binary entry says sm_%d" % (sm, raw["arch"]))
        name = arch_name("sm", sm, flags)
        return {
            "kind": "elf", "arch": name, "cuobjdump_name": _cuobjdump_name(sm, flags),
            "sm": sm, "elf_abi": abi, "e_flags": e_flags, "flags": flags,
            "compression": raw["compression"], "size": raw["uncompressed_size"], "kernels": None,
        }
    return {
        "kind": "ptx", "arch": arch_name("compute", raw["arch"], flags),
        "cuobjdump_name": _cuobjdump_name(raw["arch"], flags), "sm": raw["arch"],
        "ptx_version": raw["version"], "ptx_isa": raw["version"], "ptx_isa_from": "header", "flags": flags,
        "compression": raw["compression"], "size": raw["uncompressed_size"],
    }


def _cuobjdump_name(sm, flags):
    # cuobjdump 13 prints "sm_90a" for arch-specific entries, but plain "sm_120"
    # for family (f) entries.
    return "sm_%d%s" % (sm, "a" if flags & FLAG_ARCH_SPECIFIC else "")


# ------------------------------------------------------------ verdicts ------

def arch_level(name, target):
    """How SASS/PTX ``name`` ('sm_120f', 'compute_90') serves capability ``target`` (major, minor).

    Returns 'native', 'compatible', 'jit' or None when it cannot run there.
    """
    major, minor, variant = cuda_arch.parse_sm(name)
    if name.startswith("compute_"):
        return "jit" if cuda_arch.ptx_runs_on(major, minor, variant, target) else None
    if (major, minor) == tuple(target):
        return "native"
    return "compatible" if cuda_arch.sass_runs_on(major, minor, variant, target) else None


def library_summary(entries, target, ptx_isa_max=None):
    """Summarise one library's entries for ``target`` (major, minor) or None (no verdict).

    ``ptx_isa_max``: the newest PTX ISA the installed driver JIT-compiles (cuda/ptx_isa.py), or None when
    unknown; PTX newer than it does not count as coverage, and is listed in ``ptx_refused``."""
    sass = {}
    ptx = {}
    for entry in entries:
        table = sass if entry["kind"] == "elf" else ptx
        slot = table.setdefault(entry["arch"], {"entries": 0, "kernels": 0})
        slot["entries"] += 1
        if entry["kind"] == "elf":
            if entry.get("kernels") is None or slot["kernels"] is None:
                slot["kernels"] = None
            else:
                slot["kernels"] += entry["kernels"]
        else:
            slot.setdefault("ptx_versions", [])
            if entry["ptx_isa"] not in slot["ptx_versions"]:
                slot["ptx_versions"].append(entry["ptx_isa"])
            slot.pop("kernels", None)
    summary = {
        "has_gpu_code": bool(entries),
        "sass": sorted(sass, key=_arch_sort_key),
        "ptx": sorted(ptx, key=_arch_sort_key),
        "kernels": dict((arch, sass[arch]["kernels"]) for arch in sass),
        "ptx_versions": sorted(set(v for slot in ptx.values() for v in slot["ptx_versions"])),
        "cuobjdump_elf": sorted(e["cuobjdump_name"] for e in entries if e["kind"] == "elf"),
        "cuobjdump_ptx": sorted(e["cuobjdump_name"] for e in entries if e["kind"] == "ptx"),
        "compressed_entries": sum(1 for e in entries if e["compression"]),
        "verdict": None,
        "via": [],
        "ptx_refused": [],
    }
    if target is not None and entries:
        summary["verdict"], summary["via"], summary["ptx_refused"] = _verdict(sass, ptx, target, ptx_isa_max)
    return summary


def _verdict(sass, ptx, target, ptx_isa_max=None):
    """The level of the runnable SASS that carries the most code (ties: the better level).

    "Most code" is the kernel count when every runnable arch has one, else the
    number of cubins (one per translation unit).  So an arch-specific 'a' cubin
    holding a handful of extra kernels next to a full compatible set (torch
    2.11's one sm_121a cubin beside 444 sm_120 cubins) does not make the
    library native.
    """
    runnable = []
    for arch, slot in sass.items():
        level = arch_level(arch, target)
        if level:
            runnable.append((level, arch, slot["kernels"], slot["entries"]))
    via = sorted(arch for _level, arch, _k, _e in runnable)
    if runnable:
        if all(r[2] is not None for r in runnable):
            weight = dict((r[1], r[2]) for r in runnable)
        else:
            weight = dict((r[1], r[3]) for r in runnable)
        most = max(weight.values())
        return min((r[0] for r in runnable if weight[r[1]] == most), key=_RANK.get), via, []
    # PTX the driver JIT-compiles counts only when its ISA is one the driver loads: an arch any of
    # whose entries (one per translation unit) is newer would fail for those kernels.
    jit, refused = [], []
    for arch in sorted((a for a in ptx if arch_level(a, target)), key=_arch_sort_key):
        newest = max(ptx[arch]["ptx_versions"], key=ptx_isa.key)
        if ptx_isa.accepts(newest, ptx_isa_max):
            jit.append(arch)
        else:
            refused.append({"arch": arch, "isa": newest})
    if jit:
        return "jit", jit, []
    return "unsupported", [], refused


def _arch_sort_key(arch):
    major, minor, variant = cuda_arch.parse_sm(arch)
    return (major, minor, variant)


def weakest(verdicts):
    """The weakest of several verdicts (None entries ignored); None when there are none."""
    present = [v for v in verdicts if v]
    if not present:
        return None
    return max(present, key=_RANK.get)


# -------------------------------------------------------------- inputs ------

def _is_candidate(name):
    return bool(_SO_NAME.search(name))


def audit_file(path, target=None, kernels=True, decompressor=None, display_name=None, ptx_isa_max=None):
    """Audit one ELF file on disk; returns the library dict (``error`` set for unreadable files)."""
    result = {"path": display_name or path}
    try:
        with open(path, "rb") as handle:
            head = handle.read(4)
            if head != _ELF_MAGIC:
                result.update({"error": "not an ELF file", "has_gpu_code": False})
                return result
            size = os.fstat(handle.fileno()).st_size
            with mmap.mmap(handle.fileno(), size, access=mmap.ACCESS_READ) as buf:
                scan = scan_elf(buf, kernels=kernels, decompressor=decompressor)
    except (FatbinError, OSError, ValueError, struct.error) as exc:
        result.update({"error": str(exc), "has_gpu_code": False})
        return result
    result["fatbin_sections"] = scan["sections"]
    result["ignored_sections"] = scan["ignored_sections"]
    result.update(library_summary(scan["entries"], target, ptx_isa_max))
    return result


def iter_wheel(path, tmpdir=None):
    """Yield (member name, temporary file path) for each ELF member of a wheel, one at a time.

    Members are streamed to a temporary file (section headers sit at the end of
    an ELF, so the reader needs random access); each file is deleted before the
    next member is extracted.
    """
    with zipfile.ZipFile(path) as wheel:
        for info in wheel.infolist():
            if info.is_dir() or not _is_candidate(info.filename):
                continue
            with wheel.open(info) as member:
                if member.read(4) != _ELF_MAGIC:
                    continue
            handle = tempfile.NamedTemporaryFile(prefix="sparkforge-audit-", suffix=".so", dir=tmpdir, delete=False)
            try:
                with handle, wheel.open(info) as member:
                    shutil.copyfileobj(member, handle, 4 * 1024 * 1024)
                yield info.filename, handle.name
            finally:
                os.unlink(handle.name)


def iter_directory(path):
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(root, name)
            if _is_candidate(name) and os.path.isfile(full) and not os.path.islink(full):
                yield full


_MAGICS = (
    (b"PK\x03\x04", "a zip archive not named .whl or .zip"),
    (b"\x1f\x8b", "gzip-compressed data"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed data"),
    (b"\xfd7zXZ\x00", "xz-compressed data"),
    (b"\x89PNG", "a PNG image"),
    (b"%PDF", "a PDF document"),
    (b"!<arch>", "an ar archive (a static library or a .deb)"),
    (b"\x50\xed\x55\xba", "a bare CUDA fat binary (not inside an ELF)"),
)


def describe_file(path):
    """'ELF', or what the file is instead, in words (for an error that says what was given)."""
    with open(path, "rb") as handle:
        head = handle.read(512)
    if head.startswith(_ELF_MAGIC):
        return "ELF"
    if not head:
        return "an empty file"
    for magic, what in _MAGICS:
        if head.startswith(magic):
            return what
    if len(head) > 262 and head[257:262] == b"ustar":
        return "a tar archive"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return "binary data starting %s" % head[:8].hex()
    first = text.strip().splitlines()[0][:60] if text.strip() else ""
    return "a text file starting %r" % first


def audit(path, target=None, kernels=True, decompressor=None, ptx_isa_max=None):
    """Audit a wheel, a directory tree or one ELF file.

    ``target`` is a capability string ('12.1', 'sm_121') or None (no verdicts).
    Returns ``{"input", "input_type", "target", "libraries": [...], "verdict"}``:
    libraries are those with GPU code (others are counted in ``scanned``).  ``ptx_isa_max``: the newest
    PTX ISA the driver loads (None: not checked), as library_summary takes it.
    """
    decompressor = decompressor or Decompressor()
    try:
        tgt = cuda_arch.capability(target) if target else None
    except cuda_arch.ArchError as exc:
        raise FatbinError(str(exc))
    if os.path.isdir(path):
        kind = "directory"
        items = ((p, p, os.path.relpath(p, path)) for p in iter_directory(path))
    elif zipfile.is_zipfile(path) and path.endswith((".whl", ".zip")):
        kind = "wheel"
        items = ((tmp, tmp, member) for member, tmp in iter_wheel(path))
    elif os.path.isfile(path):
        what = describe_file(path)
        if what != "ELF":
            raise FatbinError("%s is neither an ELF file nor a wheel/zip: it is %s (give a wheel, a shared library "
                              "or a directory)" % (path, what))
        kind = "file"
        items = iter([(path, path, path)])
    else:
        raise FatbinError("%s does not exist (give a wheel, a shared library or a directory)" % path)
    libraries = []
    scanned = 0
    errors = []
    for _key, real, shown in items:
        scanned += 1
        lib = audit_file(real, target=tgt, kernels=kernels, decompressor=decompressor, display_name=shown,
                         ptx_isa_max=ptx_isa_max)
        if lib.get("error") and lib["error"] != "not an ELF file":
            errors.append({"path": shown, "error": lib["error"]})
        if lib.get("has_gpu_code"):
            libraries.append(lib)
    return {
        "input": path,
        "input_type": kind,
        "target": ("%d.%d" % (tgt[0], tgt[1])) if tgt else None,
        "scanned": scanned,
        "libraries": libraries,
        "errors": errors,
        "verdict": weakest(lib["verdict"] for lib in libraries) if tgt else None,
        "ptx_isa_max": ptx_isa_max,
        "zstd_decoder": bool(decompressor.zstd_available),
    }


def parse_cuobjdump_list(text):
    """Arch names from ``cuobjdump --list-elf`` / ``--list-ptx`` output ('ELF file 1: x.1.sm_90.cubin')."""
    names = []
    for line in text.splitlines():
        match = re.match(r"^\s*(?:ELF|PTX) file\s+\d+:\s+\S*?\.(sm_\d+[af]?)\.(?:cubin|ptx)\s*$", line)
        if match:
            names.append(match.group(1))
    return sorted(names)
