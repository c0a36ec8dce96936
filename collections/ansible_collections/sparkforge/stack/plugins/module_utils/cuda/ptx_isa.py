# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PTX against the driver: which PTX ISA versions the installed driver can JIT-compile.

A kernel shipped only as PTX runs through the driver's JIT, and the driver refuses PTX whose
``.version`` is newer than its own CUDA release (CUDA_ERROR_UNSUPPORTED_PTX_VERSION, error 222:
measured on a 580 driver, CUDA 13.0, which loads ISA 8.0-9.0 and refuses 9.1+; FIELD_NOTES
2026-12-07).  The mapping CUDA release -> newest PTX ISA is data (the manifest's
``sparkforge_ptx_isa``, from NVIDIA's PTX ISA release notes); the driver's CUDA release is what
``nvidia-smi`` prints in its banner ("CUDA Version: 13.0") or ``cuDriverGetVersion`` returns (13000).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# The directive every PTX module starts with (after comments): ".version 9.0".
VERSION_LINE = re.compile(br"^[ \t]*\.version[ \t]+(\d+)\.(\d+)[ \t]*$", re.M)
# nvidia-smi's banner: "| NVIDIA-SMI 580.159.04   Driver Version: 580.159.04     CUDA Version: 13.0     |".
SMI_CUDA = re.compile(r"CUDA Version:\s*(\d+)\.(\d+)")
_DOTTED = re.compile(r"^\d+\.\d+$")


class PtxIsaError(Exception):
    pass


def key(version):
    """'9.0' -> (9, 0); PtxIsaError for anything not major.minor."""
    text = str(version).strip()
    if not _DOTTED.match(text):
        raise PtxIsaError("%r is not a major.minor version" % (version,))
    major, minor = text.split(".")
    return int(major), int(minor)


def text_isa(ptx):
    """The ISA of PTX text (bytes or str) from its ``.version`` line, or None without one."""
    if isinstance(ptx, str):
        ptx = ptx.encode("utf-8", "replace")
    match = VERSION_LINE.search(ptx or b"")
    return "%d.%d" % (int(match.group(1)), int(match.group(2))) if match else None


def smi_cuda(text):
    """The driver's CUDA release from nvidia-smi's banner ('13.0'), or None when the text has none."""
    match = SMI_CUDA.search(text or "")
    return "%d.%d" % (int(match.group(1)), int(match.group(2))) if match else None


def driver_int_cuda(value):
    """cuDriverGetVersion's integer (13000, 12090) -> '13.0' / '12.9'."""
    value = int(value)
    if value < 1000:
        raise PtxIsaError("cuDriverGetVersion answered %d, not a CUDA release" % value)
    return "%d.%d" % (value // 1000, (value % 1000) // 10)


def validate_table(table, variable="sparkforge_ptx_isa"):
    """The manifest's rows ({cuda, isa, confirmed?}) checked and sorted by CUDA release; PtxIsaError names the row."""
    releases = (table or {}).get("releases") if isinstance(table, dict) else None
    if not isinstance(releases, list) or not releases:
        raise PtxIsaError("%s: give releases, a list of {cuda: 'X.Y', isa: 'X.Y'} rows (the manifest's host.yml)"
                          % variable)
    rows = []
    for index, row in enumerate(releases):
        if not isinstance(row, dict) or "cuda" not in row or "isa" not in row:
            raise PtxIsaError("%s.releases[%d]: %r is not a {cuda, isa} row" % (variable, index, row))
        try:
            rows.append({"cuda": key(row["cuda"]), "isa": key(row["isa"]), "confirmed": row.get("confirmed", True)})
        except PtxIsaError as exc:
            raise PtxIsaError("%s.releases[%d]: %s" % (variable, index, exc))
    rows.sort(key=lambda r: r["cuda"])
    for before, after in zip(rows, rows[1:]):
        if after["isa"] < before["isa"]:
            raise PtxIsaError("%s: CUDA %d.%d gives ISA %d.%d, older than CUDA %d.%d's %d.%d" % (
                (variable,) + after["cuda"] + after["isa"] + before["cuda"] + before["isa"]))
    return rows


def driver_limit(driver_cuda, table):
    """What PTX the driver of CUDA release ``driver_cuda`` ('13.0') JIT-compiles, from the manifest's table.

    Returns {driver_cuda, ptx_isa_max, known, confirmed, note}: ``ptx_isa_max`` is the newest ISA of the
    table's newest release at or below the driver's.  A driver newer than the table's newest release
    loads at least that release's ISA but the table cannot say more: ``ptx_isa_max`` is None then
    (nothing is refused for its ISA) and ``note`` says so.  None for ``driver_cuda``: no limit known.
    """
    rows = validate_table(table)
    # The first release that loads each ISA, for the refusal's "needs CUDA X" (refusal()).
    needs = dict(("%d.%d" % r["isa"], "%d.%d" % r["cuda"]) for r in reversed(rows))
    if not driver_cuda:
        return {"driver_cuda": None, "ptx_isa_max": None, "known": False, "confirmed": False, "needs": needs,
                "note": "the driver's CUDA release is unknown: PTX is not checked against it"}
    have = key(driver_cuda)
    below = [r for r in rows if r["cuda"] <= have]
    if not below:
        return {"driver_cuda": driver_cuda, "ptx_isa_max": None, "known": False, "confirmed": False, "needs": needs,
                "note": "CUDA %s is older than the PTX ISA table (from CUDA %d.%d): PTX is not checked against it"
                        % ((driver_cuda,) + rows[0]["cuda"])}
    row = below[-1]
    if have > rows[-1]["cuda"]:
        return {"driver_cuda": driver_cuda, "ptx_isa_max": None, "known": False, "confirmed": False, "needs": needs,
                "note": "CUDA %s is newer than the PTX ISA table's newest release (%d.%d, ISA %d.%d): add its row "
                        "to sparkforge_ptx_isa" % ((driver_cuda,) + rows[-1]["cuda"] + rows[-1]["isa"])}
    return {"driver_cuda": driver_cuda, "ptx_isa_max": "%d.%d" % row["isa"], "known": True,
            "confirmed": bool(row["confirmed"]), "needs": needs, "note": None}


def accepts(isa, ptx_isa_max):
    """Whether a driver whose newest ISA is ``ptx_isa_max`` loads PTX of ``isa`` (None: no limit known)."""
    if ptx_isa_max is None or isa is None:
        return True
    return key(isa) <= key(ptx_isa_max)


def first_cuda(isa, limit):
    """The first CUDA release whose driver loads ISA ``isa`` ('9.1' -> '13.1'), from driver_limit's ``needs``;
    None beyond the table."""
    for have, cuda in sorted(((key(i), c) for i, c in (limit.get("needs") or {}).items()), key=lambda ic: ic[0]):
        if have >= key(isa):
            return cuda
    return None


def refusal(library, refused, limit):
    """One sentence: ``library`` runs only through PTX this driver refuses, with the driver it needs."""
    parts = []
    for item in refused:
        need = first_cuda(item["isa"], limit)
        parts.append("%s PTX ISA %s (needs a driver of CUDA %s or newer)" % (
            item["arch"], item["isa"], need or "newer than the table knows"))
    return ("%s runs only through the driver's PTX JIT, and its PTX is newer than this driver loads: %s; the "
            "driver is CUDA %s, which JIT-compiles PTX ISA up to %s: update the NVIDIA driver, or install a build "
            "with SASS for this GPU" % (library, ", ".join(parts), limit["driver_cuda"], limit["ptx_isa_max"]))
