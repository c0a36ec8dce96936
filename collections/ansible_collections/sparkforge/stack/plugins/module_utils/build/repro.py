# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reproducible wheels: the same inputs give the same bytes, whatever the build directory, the
date, the time zone or the user; and a diff of two wheels that says where they differ.

Where the differences come from, and what each piece here does about it:

* timestamps: ``SOURCE_DATE_EPOCH`` is the source commit's time (the packaging tools and compilers
  that honour it use it), and ``normalize_wheel`` writes every zip entry with that time;
* paths: ``-ffile-prefix-map`` for the host compiler, and for nvcc's host side through
  ``NVCC_APPEND_FLAGS`` (nvcc reads it on every call, whoever calls nvcc), maps the build and
  temporary directories to fixed names in debug info and ``__FILE__``;
* nvcc's temporary file names: nvcc hands the host compiler ``tmpxft_<pid>_<counter>-<n>_<name>
  .cudafe1.cpp``, and the host compiler records that name (the object's STT_FILE symbol, and the
  debug info with ``-g``). The pid is eight hex digits, so ``normalize_wheel`` replaces it, in every
  ELF member, with zeros of the same length: no offset in the file moves;
* the archive: entries sorted (the .dist-info last, RECORD at the very end), fixed modes (0644, or
  0755 where any execute bit was set), one compression level, no directory entries, RECORD written
  again from the final bytes.

``find_leaks`` lists build paths, the home directory and the host name that a wheel still carries
(in text the build wrote, or in binaries), so a build says what would differ on another builder.
No Ansible imports: modules and tests call these functions directly.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import difflib
import hashlib
import os
import re
import subprocess
import time
import zipfile

from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import atomic_file, sha256_file
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda.fatbin import FatbinError, elf_sections

# Part of every build's cache key: a change to what normalize_wheel writes must not reuse old wheels.
SCHEME = 1

# nvcc's temporary names: "tmpxft_" + pid (8 hex) + "_" + counter (8 hex) + "-".
NVCC_TMP = re.compile(rb"tmpxft_[0-9a-f]{8}_[0-9a-f]{8}-")
NVCC_TMP_FIXED = b"tmpxft_00000000_00000000-"

ZIP_EPOCH_MIN = 315532800  # 1980-01-01T00:00:00Z: a zip entry cannot say an earlier time
COMPRESS_LEVEL = 6
ELF_MAGIC = b"\x7fELF"
# Where the build's paths are mapped to (fixed, so every builder writes the same names).
MAPPED_ROOT = "/sparkforge"


class ReproError(Exception):
    """A wheel that cannot be read or normalised; the message says which and why."""


def commit_epoch(src_dir, commit="HEAD"):
    """The committer time of ``commit`` in ``src_dir`` (seconds since 1970): SOURCE_DATE_EPOCH."""
    try:
        out = subprocess.check_output(["git", "show", "-s", "--format=%ct", commit], cwd=src_dir,
                                      stderr=subprocess.STDOUT)
        return int(out.decode().strip().splitlines()[-1])
    except (OSError, subprocess.CalledProcessError, ValueError, IndexError) as exc:
        raise ReproError("cannot read the commit time of %s in %s: %s" % (commit, src_dir, exc))


def prefix_maps(paths):
    """[(path, fixed name)] for the build's directories, ``paths`` being [(path, name)]: real paths,
    each once, the longest last.  GCC tries the last -ffile-prefix-map given first, so a build
    directory inside the temporary directory still gets its own name."""
    out = []
    for path, name in paths:
        if not path:
            continue
        path = os.path.realpath(path).rstrip("/")
        if path and path not in [p for p, _n in out]:
            out.append((path, name))
    return sorted(out, key=lambda item: len(item[0]))


def build_env(epoch, maps, existing=None):
    """Variables that make the compilers and packaging tools of a build write the same bytes.

    ``maps`` from ``prefix_maps``; ``existing``: the build's environment, whose CFLAGS, CXXFLAGS and
    NVCC_APPEND_FLAGS are kept, the maps appended."""
    existing = existing or {}
    host_flags = ["-ffile-prefix-map=%s=%s" % (path, name) for path, name in maps]
    nvcc_flags = ["-Xcompiler=%s" % flag for flag in host_flags]
    env = {
        "SOURCE_DATE_EPOCH": str(int(epoch)),
        "TZ": "UTC",
        "PYTHONHASHSEED": "0",
        "LC_ALL": "C.UTF-8",
        "LANG": "C.UTF-8",
    }
    for var, flags in (("CFLAGS", host_flags), ("CXXFLAGS", host_flags), ("NVCC_APPEND_FLAGS", nvcc_flags)):
        words = [w for w in (existing.get(var) or "").split() if w not in flags]
        env[var] = " ".join(words + flags)
    return env


def _record_hash(data):
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _dist_info(names):
    dirs = sorted(set(n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")
                      and n.count("/") == 1))
    if len(dirs) != 1:
        raise ReproError("a wheel has exactly one top-level .dist-info directory; found %s"
                         % (", ".join(dirs) or "none"))
    return dirs[0]


def _order(names, dist_info):
    record = dist_info + "/RECORD"
    body = sorted(n for n in names if not n.startswith(dist_info + "/"))
    meta = sorted(n for n in names if n.startswith(dist_info + "/") and n != record)
    return body + meta + [record]


def _open_wheel(path):
    try:
        return zipfile.ZipFile(path)
    except (IOError, OSError, zipfile.BadZipfile, zipfile.LargeZipFile) as exc:
        raise ReproError("%s is not a readable wheel (zip): %s" % (path, exc))


def zip_time(epoch):
    return time.gmtime(max(int(epoch), ZIP_EPOCH_MIN))[:6]


def normalize_wheel(src, dest, epoch):
    """Write ``src`` again as ``dest`` (atomically; ``dest`` may be ``src``) in the stack's fixed form.

    One member is in memory at a time (a torch wheel holds libraries of a gigabyte).  Returns
    {"members", "nvcc_names", "date_time"}: how many files, how many nvcc temporary names were made
    fixed, and the time every entry now carries."""
    stamp = zip_time(epoch)
    nvcc_names = 0
    # The archive is closed (its directory written) before atomic_file syncs and renames it over dest.
    with atomic_file(os.path.abspath(dest), 0o644, prefix=".normalize-", suffix=".tmp") as handle, \
            _open_wheel(src) as archive, zipfile.ZipFile(handle, "w", zipfile.ZIP_DEFLATED) as out:
        infos = dict((i.filename, i) for i in archive.infolist() if not i.filename.endswith("/"))
        dist_info = _dist_info(infos)
        record = dist_info + "/RECORD"
        names = [n for n in _order(infos, dist_info) if not n.startswith(record + ".")]
        lines = []

        def put(name, data, mode):
            info = zipfile.ZipInfo(name, date_time=stamp)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3  # unix, so the mode bits are read
            info.external_attr = (0o100000 | mode) << 16
            out.writestr(info, data, compresslevel=COMPRESS_LEVEL)

        for name in names:
            if name == record:
                continue
            data = archive.read(name)
            if data[:4] == ELF_MAGIC:
                data, count = NVCC_TMP.subn(NVCC_TMP_FIXED, data)
                nvcc_names += count
            mode = (infos[name].external_attr >> 16) & 0o111
            put(name, data, 0o755 if mode else 0o644)
            lines.append("%s,%s,%d" % (name, _record_hash(data), len(data)))
        lines.append("%s,," % record)
        put(record, ("\n".join(lines) + "\n").encode("utf-8"), 0o644)
    return {"members": len(names), "nvcc_names": nvcc_names,
            "date_time": "%04d-%02d-%02dT%02d:%02d:%02dZ" % stamp}


def find_leaks(path, needles):
    """Where a wheel carries what would differ on another builder.

    ``needles``: {kind: text} (build_dir, src_dir, home, host name...; empty values are ignored).
    Returns [{"member", "kind", "value"}], sorted."""
    wanted = [(kind, value, value.encode("utf-8")) for kind, value in sorted((needles or {}).items())
              if value and len(value) >= 4]
    found = []
    with _open_wheel(path) as archive:
        for info in archive.infolist():
            data = archive.read(info.filename)
            for kind, value, raw in wanted:
                if raw in data:
                    found.append({"member": info.filename, "kind": kind, "value": value})
    return sorted(found, key=lambda item: (item["member"], item["kind"]))


# ------------------------------------------------------------------ diff


def _sha(data):
    return hashlib.sha256(data).hexdigest()


def _kind(data):
    if data[:4] == ELF_MAGIC:
        return "elf"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "binary"
    return "text"


def _first_difference(a, b):
    for index in range(min(len(a), len(b))):
        if a[index] != b[index]:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


def _strings(data):
    return set(s for s in data.split(b"\0") if s)


def _elf_diff(a, b, max_items):
    """Sections that differ between two ELF images, with the strings that differ in string tables."""
    try:
        secs_a = dict((name, (stype, off, size)) for name, stype, off, size in elf_sections(a))
        secs_b = dict((name, (stype, off, size)) for name, stype, off, size in elf_sections(b))
    except FatbinError as exc:
        return {"error": str(exc)}
    out = []
    for name in sorted(set(secs_a) | set(secs_b)):
        if name not in secs_a or name not in secs_b:
            out.append({"section": name, "only_in": "a" if name in secs_a else "b"})
            continue
        (type_a, off_a, size_a), (type_b, off_b, size_b) = secs_a[name], secs_b[name]
        nobits = 8  # SHT_NOBITS (.bss) has no bytes in the file
        body_a = b"" if type_a == nobits else bytes(a[off_a:off_a + size_a])
        body_b = b"" if type_b == nobits else bytes(b[off_b:off_b + size_b])
        if body_a == body_b and size_a == size_b:
            continue
        item = {"section": name, "size": [size_a, size_b], "first_difference": _first_difference(body_a, body_b)}
        if type_a == 3:  # SHT_STRTAB: say which names differ
            sa, sb = _strings(body_a), _strings(body_b)
            item["strings_only_in_a"] = sorted(s.decode("utf-8", "replace") for s in sa - sb)[:max_items]
            item["strings_only_in_b"] = sorted(s.decode("utf-8", "replace") for s in sb - sa)[:max_items]
        out.append(item)
    if not out:
        # Same sections, yet different files: the ELF, program or section headers differ.
        out.append({"section": "(headers)", "first_difference": _first_difference(bytes(a), bytes(b))})
    return {"sections": out}


def diff_wheels(path_a, path_b, max_lines=20):
    """Which files of two wheels differ and how.

    Returns {"identical", "same_contents", "sha256": [a, b], "only_in_a", "only_in_b", "differ", "zip"}:
    ``differ`` has one entry per member whose bytes differ (kind, sizes, sha256s, and the ELF sections
    or the text lines that differ); ``zip`` the archive-level differences (entry order, times, modes).
    Members whose CRC-32 and size agree are taken as equal without being read."""
    result = {"sha256": [sha256_file(path_a), sha256_file(path_b)], "differ": [], "zip": []}
    with _open_wheel(path_a) as zip_a, _open_wheel(path_b) as zip_b:
        info_a = dict((i.filename, i) for i in zip_a.infolist())
        info_b = dict((i.filename, i) for i in zip_b.infolist())
        result["only_in_a"] = sorted(set(info_a) - set(info_b))
        result["only_in_b"] = sorted(set(info_b) - set(info_a))
        for name in sorted(set(info_a) & set(info_b)):
            ia, ib = info_a[name], info_b[name]
            for field, va, vb in (("date_time", list(ia.date_time), list(ib.date_time)),
                                  ("mode", oct((ia.external_attr >> 16) & 0o7777),
                                   oct((ib.external_attr >> 16) & 0o7777)),
                                  ("compress_type", ia.compress_type, ib.compress_type)):
                if va != vb:
                    result["zip"].append({"member": name, "field": field, "a": va, "b": vb})
            if (ia.CRC, ia.file_size) == (ib.CRC, ib.file_size):
                continue
            da, db = zip_a.read(name), zip_b.read(name)
            item = {"member": name, "kind": _kind(da), "size": [len(da), len(db)], "sha256": [_sha(da), _sha(db)],
                    "first_difference": _first_difference(da, db)}
            if item["kind"] == "elf" and db[:4] == ELF_MAGIC:
                item.update(_elf_diff(da, db, max_lines))
            elif item["kind"] == "text" and _kind(db) == "text":
                lines = list(difflib.unified_diff(da.decode("utf-8").splitlines(), db.decode("utf-8").splitlines(),
                                                  "a/" + name, "b/" + name, lineterm="", n=0))
                item["lines"] = lines[:max_lines]
                item["lines_truncated"] = len(lines) > max_lines
            result["differ"].append(item)
        order_a = [i.filename for i in zip_a.infolist() if i.filename in info_b]
        order_b = [i.filename for i in zip_b.infolist() if i.filename in info_a]
    if order_a != order_b:
        result["zip"].append({"member": None, "field": "order", "a": order_a[:max_lines], "b": order_b[:max_lines]})
    result["identical"] = result["sha256"][0] == result["sha256"][1]
    result["same_contents"] = not (result["only_in_a"] or result["only_in_b"] or result["differ"])
    return result


def summarize(diff):
    """One line per difference, for a person (a module's msg, a build's warning)."""
    if diff["identical"]:
        return ["identical (sha256 %s)" % diff["sha256"][0]]
    lines = []
    lines += ["only in a: %s" % name for name in diff["only_in_a"]]
    lines += ["only in b: %s" % name for name in diff["only_in_b"]]
    for item in diff["differ"]:
        where = ""
        if item.get("sections"):
            where = ": sections " + ", ".join(s["section"] for s in item["sections"])
        lines.append("differs: %s (%s, %d vs %d bytes)%s" % (item["member"], item["kind"], item["size"][0],
                                                             item["size"][1], where))
    fields = sorted(set(z["field"] for z in diff["zip"]))
    if fields:
        lines.append("archive differs in: %s" % ", ".join(fields))
    return lines


def build_settings(src_dir, commit, dirs, env):
    """(epoch, maps, environment) of one reproducible build: SOURCE_DATE_EPOCH from ``commit`` in
    ``src_dir``, ``dirs`` [(path, fixed name)] mapped, ``env`` with the variables above added."""
    epoch = commit_epoch(src_dir, commit)
    maps = prefix_maps(dirs)
    merged = dict(env)
    merged.update(build_env(epoch, maps, env))
    return epoch, maps, merged


def finish_wheel(wheel, epoch, maps, needles):
    """Normalise a freshly built wheel in place; the record that goes into its build manifest."""
    normalized = normalize_wheel(wheel, wheel, epoch)
    return {"scheme": SCHEME, "source_date_epoch": int(epoch), "prefix_maps": [list(m) for m in maps],
            "normalized": normalized, "leaks": find_leaks(wheel, needles)}


def leak_warnings(name, record):
    """A warning per leak a build record lists (what another builder would write differently)."""
    return ["%s: %s carries the %s %s, so a build elsewhere gives other bytes" % (
        name, leak["member"], leak["kind"].replace("_", " "), leak["value"]) for leak in record.get("leaks") or []]
