# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NCCL a venv's torch loads, read on the host without a GPU: its version and whether it is the switchless
build a ring of four needs. NCCL embeds "NCCL version X.Y.Z<suffix>+cudaA.B" in its library so that `strings`
shows it (NVIDIA/nccl src/init.cc, VERSION_STRING, "Pre-process the string so that running "strings" on the lib
can quickly reveal the version"); the switchless build carries its own log lines as markers (alexellis/switchless-
nccl scripts/verify-nccl.sh greps "SWITCHLESS: skipping ncclTransportTreeConnect" and "...PatConnect"). With a
GPU, torch.cuda.nccl.version() says the same at run time; this reads what the cluster plan can see before any
run."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os
import re

VERSION = re.compile(br"NCCL version (\d+\.\d+\.\d+)")
CHUNK = 8 << 20


def candidates(venv, system="/usr/lib"):
    """The libraries that may hold the NCCL torch uses, in the order torch would take them: NCCL linked statically
    into libtorch_cuda.so (a source build's default), a libnccl beside it, the nvidia-nccl wheel's (what the PyPI
    torch wheels load), then the system's (a build with USE_SYSTEM_NCCL)."""
    site = sorted(glob.glob(os.path.join(venv, "lib", "python3*", "site-packages")))
    out = []
    for s in site:
        out += [os.path.join(s, "torch", "lib", "libtorch_cuda.so")]
        out += sorted(glob.glob(os.path.join(s, "torch", "lib", "libnccl.so*")))
        out += sorted(glob.glob(os.path.join(s, "nvidia", "nccl", "lib", "libnccl.so*")))
    out += sorted(glob.glob(os.path.join(system, "*-linux-gnu", "libnccl.so.2")))
    return [p for p in out if os.path.isfile(p)]


def scan(path, markers=()):
    """(version or None, [markers found]) from one library file, read in chunks that overlap by the longest
    needle, so a string across a chunk's edge is still found."""
    wanted = [m.encode() if not isinstance(m, bytes) else m for m in markers]
    keep = max([len(m) for m in wanted] + [64])
    version, found, tail = None, set(), b""
    with open(path, "rb") as handle:
        while True:
            block = handle.read(CHUNK)
            if not block:
                break
            data = tail + block
            if version is None:
                m = VERSION.search(data)
                if m:
                    version = m.group(1).decode()
            for needle in wanted:
                if needle in data:
                    found.add(needle.decode())
            tail = data[-keep:]
    return version, sorted(found)


def read(venv, markers=(), system="/usr/lib"):
    """{"version", "path", "switchless", "markers", "why"} for the first candidate library holding an NCCL version
    string; version None (with why) when no library under the venv or the system holds one."""
    if not venv or not os.path.isdir(venv):
        return {"version": None, "path": None, "switchless": False, "markers": [],
                "why": "no venv at %r to read torch's NCCL from" % (venv,)}
    tried = []
    for path in candidates(venv, system):
        try:
            version, found = scan(path, markers)
        except (IOError, OSError) as exc:
            tried.append("%s: %s" % (path, exc))
            continue
        if version:
            return {"version": version, "path": path, "markers": found,
                    "switchless": bool(markers) and len(found) == len(set(markers)), "why": None}
        tried.append("%s: no NCCL version string" % path)
    return {"version": None, "path": None, "switchless": False, "markers": [],
            "why": "no library torch could load holds an NCCL version string (%s)" % ("; ".join(tried) or "none found")}
