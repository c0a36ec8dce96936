# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a shared object links against, read from its ELF dynamic section, and whether this host has it.

Read in Python (no pyelftools, and binutils' readelf/nm are not on every host this audits:
a minimal Ubuntu image has neither): the section headers give ``.dynamic`` (DT_NEEDED,
DT_RUNPATH/DT_RPATH, DT_SONAME, 16-byte entries) and ``.dynsym`` (24-byte Elf64_Sym), each
with its string table through ``sh_link`` (ELF-64 Object File Format, gABI).  Checked against
``readelf -d`` / ``nm -D`` on objects built by gcc and nvcc (tests/unit/.../test_elf_links.py).

Two checks, the field's commonest failures after "no kernel image":

* CUDA libraries by major version (``libcudart.so.12`` on a CUDA 13 host: "cannot open shared
  object file"): every DT_NEEDED name of a CUDA library must be a file in one of the host's
  library directories (the toolkit, torch's bundled libraries, the venv's ``nvidia-*`` wheels,
  the system's) or be shipped beside it (the same wheel, its RUNPATH with ``$ORIGIN``).
  The driver's libraries (libcuda.so.1, libnvidia-ml.so.1) come with the driver, not a toolkit,
  and are not looked for.
* The torch ABI ("undefined symbol"): every undefined, non-weak dynamic symbol in the c10, at
  or torch namespaces must be exported by one of the venv's torch libraries (``torch/lib/*.so``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import mmap
import os
import re
import struct
import zipfile

from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import fatbin

SHT_DYNAMIC = 6
SHT_DYNSYM = 11
DT_NEEDED = 1
DT_SONAME = 14
DT_RPATH = 15
DT_RUNPATH = 29
STB_GLOBAL = 1
STB_WEAK = 2
SHN_UNDEF = 0

# CUDA libraries a GPU package may need, by the name before ".so.<major>" (toolkit and wheel names).
CUDA_LIBRARY = re.compile(r"^lib(cudart|cublas|cublasLt|cudnn\w*|nccl|cufft\w*|curand|cusparse\w*|cusolver\w*|"
                          r"nvrtc\w*|nvJitLink|cupti|nvToolsExt|cufile\w*|nvshmem\w*|npp\w*|nvjpeg|nvblas)"
                          r"\.so\.(\d+)")
DRIVER_LIBRARIES = ("libcuda.so.1", "libnvidia-ml.so.1")
# Mangled C++ names in torch's namespaces (c10::, at::, torch::), with const/volatile member and
# typeinfo/vtable prefixes: _ZN3c10..., _ZNK2at..., _ZTIN5torch..., _ZTVN3c10...
TORCH_SYMBOL = re.compile(r"^_Z(?:N[KVR]*|T[IVS]N)(3c10|2at|5torch)")
SYSTEM_DIRS = ("/usr/lib64", "/usr/lib", "/lib64", "/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu")

_SECTION = struct.Struct("<IIQQQQIIQQ")
_DYN = struct.Struct("<qQ")
_SYM = struct.Struct("<IBBHQQ")


class ElfLinkError(Exception):
    pass


def _sections(buf):
    if len(buf) < 64 or buf[:4] != b"\x7fELF" or buf[4] != 2 or buf[5] != 1:
        raise ElfLinkError("not a 64-bit little-endian ELF file")
    shoff = struct.unpack_from("<Q", buf, 0x28)[0]
    shentsize, shnum = struct.unpack_from("<HH", buf, 0x3A)
    if shoff and shnum == 0:
        shnum = struct.unpack_from("<Q", buf, shoff + 32)[0]
    if shoff + shnum * shentsize > len(buf):
        raise ElfLinkError("truncated ELF: section headers run past the end of the file")
    return [_SECTION.unpack_from(buf, shoff + i * shentsize) for i in range(shnum)] if shoff else []


def _string(buf, table, index):
    start = table[4] + index
    end = buf.find(b"\0", start, table[4] + table[5])
    return bytes(buf[start:end if end >= 0 else table[4] + table[5]]).decode("utf-8", "replace")


def dynamic_info(buf):
    """{soname, needed, runpath, undefined, defined} of one ELF image (bytes or mmap).

    ``undefined``: non-weak undefined dynamic symbols; ``defined``: exported (global or weak,
    defined) dynamic symbols.  A static object (no .dynamic) gives empty lists."""
    sections = _sections(buf)
    info = {"soname": None, "needed": [], "runpath": [], "undefined": [], "defined": []}
    for sec in sections:
        stype, offset, size, link = sec[1], sec[4], sec[5], sec[6]
        if stype == SHT_DYNAMIC and link < len(sections):
            strtab = sections[link]
            for pos in range(offset, offset + size - _DYN.size + 1, _DYN.size):
                tag, val = _DYN.unpack_from(buf, pos)
                if tag == 0:
                    break
                if tag == DT_NEEDED:
                    info["needed"].append(_string(buf, strtab, val))
                elif tag == DT_SONAME:
                    info["soname"] = _string(buf, strtab, val)
                elif tag in (DT_RPATH, DT_RUNPATH):
                    info["runpath"].extend(p for p in _string(buf, strtab, val).split(":") if p)
        elif stype == SHT_DYNSYM and link < len(sections):
            strtab = sections[link]
            for pos in range(offset + _SYM.size, offset + size - _SYM.size + 1, _SYM.size):  # entry 0 is null
                name_off, st_info, _other, shndx, _value, _size = _SYM.unpack_from(buf, pos)
                bind = st_info >> 4
                if not name_off:
                    continue
                if shndx == SHN_UNDEF:
                    if bind == STB_GLOBAL:
                        info["undefined"].append(_string(buf, strtab, name_off))
                elif bind in (STB_GLOBAL, STB_WEAK):
                    info["defined"].append(_string(buf, strtab, name_off))
    return info


def read_file(path):
    """dynamic_info of an ELF file on disk."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size < 64:
            raise ElfLinkError("%s is not an ELF file" % path)
        with mmap.mmap(handle.fileno(), size, access=mmap.ACCESS_READ) as buf:
            return dynamic_info(buf)


def host_library_dirs(cuda_home=None, site_dir=None):
    """Where this host's CUDA libraries are: the toolkit, torch's bundled ones, the venv's nvidia-* wheels,
    the system's directories (in that order; only those that exist)."""
    dirs = []
    if cuda_home:
        dirs += [os.path.join(cuda_home, "lib64"), os.path.join(cuda_home, "lib")]
        dirs += sorted(glob.glob(os.path.join(cuda_home, "targets", "*", "lib")))
    if site_dir:
        dirs.append(os.path.join(site_dir, "torch", "lib"))
        # nvidia-cublas-cu12 keeps nvidia/cublas/lib; the CUDA 13 wheels nvidia/cu13/lib.
        dirs += sorted(glob.glob(os.path.join(site_dir, "nvidia", "*", "lib")))
        dirs += sorted(glob.glob(os.path.join(site_dir, "nvidia", "*", "*", "lib")))
    dirs += ld_so_conf_dirs() + list(SYSTEM_DIRS)
    out = []
    for d in dirs:
        if os.path.isdir(d) and d not in out:
            out.append(d)
    return out


def ld_so_conf_dirs(conf="/etc/ld.so.conf"):
    """The directories the dynamic loader searches by its configuration (include lines followed)."""
    dirs = []
    pending = [conf]
    seen = set()
    while pending:
        path = pending.pop(0)
        if path in seen or not os.path.isfile(path):
            continue
        seen.add(path)
        with open(path) as handle:
            for line in handle:
                line = line.split("#", 1)[0].strip()
                if line.startswith("include "):
                    pattern = line.split(None, 1)[1]
                    if not os.path.isabs(pattern):
                        pattern = os.path.join(os.path.dirname(path), pattern)
                    pending.extend(sorted(glob.glob(pattern)))
                elif line.startswith("/"):
                    dirs.append(line)
    return dirs


def cuda_libraries_present(dirs):
    """{library stem: sorted majors} of the CUDA libraries in ``dirs`` ({'cudart': ['13']})."""
    found = {}
    for directory in dirs:
        for name in os.listdir(directory):
            match = CUDA_LIBRARY.match(name)
            if match:
                found.setdefault(match.group(1), set()).add(match.group(2))
    return dict((k, sorted(v, key=int)) for k, v in found.items())


def torch_exports(site_dir):
    """Every dynamic symbol the venv's torch libraries export (None when the venv has no torch/lib)."""
    lib_dir = os.path.join(site_dir or "", "torch", "lib")
    if not site_dir or not os.path.isdir(lib_dir):
        return None
    exported = set()
    for path in sorted(glob.glob(os.path.join(lib_dir, "*.so*"))):
        if os.path.isfile(path):
            try:
                exported.update(read_file(path)["defined"])
            except (ElfLinkError, OSError, struct.error):
                continue
    return exported


def venv_site_dir(venv):
    """The venv's site-packages (lib/pythonX.Y/site-packages), or None when it has none."""
    found = sorted(glob.glob(os.path.join(venv, "lib", "python*", "site-packages")))
    return found[0] if found else None


class HostLinks:
    """What this host offers a GPU library: its CUDA library directories and the venv's torch exports
    (read once, when first asked)."""

    def __init__(self, cuda_home=None, site_dir=None):
        self.site_dir = site_dir
        self.dirs = host_library_dirs(cuda_home, site_dir)
        self.present = cuda_libraries_present(self.dirs)
        self._torch = False

    @property
    def torch(self):
        if self._torch is False:
            self._torch = torch_exports(self.site_dir)
        return self._torch

    def has(self, name, beside=()):
        return name in (beside or ()) or any(os.path.exists(os.path.join(d, name)) for d in self.dirs)


def check_library(info, host, beside=(), origin_dirs=()):
    """Problems of one library, as (kind, message): ``cuda_library``, a CUDA library it needs that the host
    lacks; ``torch_symbol``, a torch symbol it leaves undefined that the venv's torch does not export.
    ``beside``: library names shipped with it (the same wheel);
    ``origin_dirs``: its own directory and RUNPATH entries, where bundled libraries are found."""
    problems = []
    for name in info["needed"]:
        match = CUDA_LIBRARY.match(name)
        if not match or name in DRIVER_LIBRARIES:
            continue
        if host.has(name, beside) or any(os.path.exists(os.path.join(d, name)) for d in origin_dirs):
            continue
        have = host.present.get(match.group(1))
        problems.append(("cuda_library", "needs %s, which this host does not have (%s)" % (
            name, "it has %s" % ", ".join("lib%s.so.%s" % (match.group(1), v) for v in have) if have else
            "no lib%s.so in %s" % (match.group(1), ", ".join(host.dirs) or "any library directory"))))
    wanted = sorted(set(s for s in info["undefined"] if TORCH_SYMBOL.match(s)))
    if wanted:
        exported = host.torch
        if exported is None:
            problems.append(("torch_symbol", "needs torch (%d undefined c10/at/torch symbols, e.g. %s) and the venv "
                                             "has no torch/lib" % (len(wanted), wanted[0])))
        else:
            missing = [s for s in wanted if s not in exported]
            if missing:
                problems.append(("torch_symbol", "undefined symbol %s%s: built against another torch than the venv's"
                                 % (missing[0], " (and %d more)" % (len(missing) - 1) if len(missing) > 1 else "")))
    return problems


def origin_dirs(path, info):
    """The library's own directory and its RUNPATH/RPATH entries with $ORIGIN resolved."""
    here = os.path.dirname(os.path.abspath(path))
    dirs = [here]
    for entry in info["runpath"]:
        dirs.append(os.path.normpath(entry.replace("${ORIGIN}", here).replace("$ORIGIN", here)))
    return dirs


def audit_wheel_links(path, host):
    """{member: [(kind, message)]} for every ELF member of a wheel that has problems; the libraries the
    wheel ships (auditwheel's ``<pkg>.libs/``, a package's own lib/) count as present."""
    with zipfile.ZipFile(path) as wheel:
        shipped = [os.path.basename(n) for n in wheel.namelist() if not n.endswith("/")]
    out = {}
    for member, tmp in fatbin.iter_wheel(path):
        try:
            found = check_library(read_file(tmp), host, beside=shipped)
        except (ElfLinkError, OSError, struct.error) as exc:
            found = [("cuda_library", "unreadable ELF: %s" % exc)]
        if found:
            out[member] = found
    return out
