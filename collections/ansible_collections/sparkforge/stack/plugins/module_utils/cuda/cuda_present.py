# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a host already has of the CUDA math libraries, so cuda_libs changes nothing where all is there.

A library group (cublas, cudnn, nccl, gds) is satisfied by dpkg when every package of the group is
installed at a version the manifest's pattern accepts, or by files when its header and its library
are on the host (the CUDA toolkit's directories, the distribution's, the linker's): DGX OS images
and runfile installs that no apt source knows. Plain functions; the cuda_libs_present module
is the glue.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import glob
import os

# The header each group's build needs, beside its library.
HEADERS = {"cublas": "cublas_v2.h", "cudnn": "cudnn.h", "nccl": "nccl.h", "gds": "cufile.h"}


def parse_dpkg(text):
    """{package: version} of installed packages from
    ``dpkg-query -W -f '${Package}\\t${Version}\\t${db:Status-Abbrev}\\n'``."""
    out = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and parts[2].strip().startswith("ii"):
            out[parts[0].split(":")[0]] = parts[1]
    return out


def dpkg_satisfies(spec, installed):
    """(True, {pkg: version}) when every package of ``spec`` is installed at a version its pattern accepts."""
    found = dict((p, installed.get(p)) for p in spec.get("packages") or [])
    pattern = spec.get("version") or "*"
    ok = bool(found) and all(v is not None and fnmatch.fnmatchcase(v, pattern) for v in found.values())
    return ok, found


def _first(patterns):
    for pattern in patterns:
        for path in sorted(glob.glob(pattern)):
            if os.path.isfile(path):
                return path
    return None


def find_files(group, paths, cuda_home, triplet, targets, root="/"):
    """(library, include_dir) of the group where they already are on the host, or (None, None)."""
    entry = paths.get(group) or {}
    library = entry.get("library") or ""
    base = os.path.basename(library) or "lib%s.so" % group
    stem = base.split(".so")[0] + ".so"
    lib_dirs = [os.path.dirname(library)] if library else []
    lib_dirs += [os.path.join(cuda_home, "lib64"), os.path.join(cuda_home, "targets", targets, "lib"),
                 "/usr/lib/%s" % triplet, "/usr/lib64", "/usr/lib"]
    inc_dirs = [entry.get("include_dir")] if entry.get("include_dir") else []
    inc_dirs += [os.path.join(cuda_home, "include"), os.path.join(cuda_home, "targets", targets, "include"),
                 "/usr/include/%s" % triplet, "/usr/include"]

    def rooted(path):
        return os.path.join(root, path.lstrip("/"))

    lib = _first([rooted(os.path.join(d, base)) for d in lib_dirs] + [rooted(os.path.join(d, stem + "*"))
                                                                      for d in lib_dirs])
    header = _first([rooted(os.path.join(d, HEADERS.get(group, group + ".h"))) for d in inc_dirs])
    if not (lib and header):
        return None, None
    strip = len(root.rstrip("/"))
    return lib[strip:] if strip else lib, os.path.dirname(header)[strip:] if strip else os.path.dirname(header)


def assess(groups, packages, paths, installed, cuda_home, triplet, targets, root="/"):
    """Per group: satisfied, by (dpkg, files or None), the packages' versions, library and include_dir."""
    out = {}
    for group in groups:
        spec = packages.get(group) or {}
        ok, found = dpkg_satisfies(spec, installed)
        entry = paths.get(group) or {}
        if ok:
            out[group] = {"satisfied": True, "by": "dpkg", "packages": found, "library": entry.get("library"),
                          "include_dir": entry.get("include_dir")}
            continue
        lib, inc = find_files(group, paths, cuda_home, triplet, targets, root)
        out[group] = {"satisfied": bool(lib), "by": "files" if lib else None, "packages": found,
                      "library": lib or entry.get("library"), "include_dir": inc or entry.get("include_dir")}
    return out
