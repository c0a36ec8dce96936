# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Kept whole: the matrix resolution and the torch guard are the plan and the check of one pip run;
# the pip command lines (index_args..record_provenance) are the cut once issue 34 item 3 moves Pip here.
"""The ML package layer: matrix resolution and the torch guard.

Plain functions, no Ansible imports, so unit tests call them directly:

* ``resolve``: the manifest's matrix (roles/manifest/defaults/main/ml_packages.yml)
  turned into an ordered install plan for one host (cpu arch, platform class,
  CUDA major) and a profile or an explicit package list.
* ``constraints_text``: the pip constraints file that pins the protected
  distributions (torch, torchvision, torchaudio, triton) to the builds installed
  in the venv, local wheel files included.
* ``report_install_items`` / ``guard_violations``: what pip's
  ``install --dry-run --report`` (pip >= 23) says it would install, and whether
  that touches a protected distribution.
* ``classify_failure``: why a pip run failed (guard conflict, no wheel, build).
* ``dist_digest``: one sha256 over the files a distribution's RECORD lists, to
  prove torch is byte-identical before and after.
* ``format_table``: the per-package result table for the host report.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import csv
import glob
import hashlib
import os
import re

from ansible_collections.sparkforge.stack.plugins.module_utils.packages import heavy_build
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import smoke

METHODS = ("wheel", "index", "source", "skip")
WHEN_KEYS = ("arch", "platform_class", "cuda_major")
ALL_MARKER = "*"
MIN_PIP = (23, 0)

_ARCH_ALIASES = {"arm64": "aarch64", "aarch64": "aarch64", "amd64": "x86_64", "x86_64": "x86_64", "x64": "x86_64"}
_SPECIFIER_START = re.compile(r"^\s*(==|!=|<=|>=|~=|<|>|===)")


class MatrixError(Exception):
    """A matrix, profile or package name that cannot be resolved."""


def canonical_name(name):
    """PEP 503 normalized distribution name."""
    return re.sub(r"[-_.]+", "-", str(name)).lower()


def normalize_arch(arch):
    value = str(arch or "").strip().lower()
    return _ARCH_ALIASES.get(value, value)


def _as_list(value):
    if value is None:
        return []
    if isinstance(value, (list, tuple, set)):
        return list(value)
    return [value]


def rule_matches(when, platform):
    """True when every key of ``when`` matches the host ``platform`` dict."""
    for key, wanted in (when or {}).items():
        if key not in WHEN_KEYS:
            raise MatrixError("unknown condition '%s' in a matrix rule (known: %s)" % (key, ", ".join(WHEN_KEYS)))
        values = _as_list(wanted)
        have = platform.get(key)
        if key == "arch":
            values = [normalize_arch(v) for v in values]
            have = normalize_arch(have)
        elif key == "cuda_major":
            values = [str(v) for v in values]
            have = None if have is None else str(have)
        if have not in values:
            return False
    return True


def select_rule(name, entry, platform):
    """The first rule of ``entry['methods']`` that matches the host."""
    rules = entry.get("methods") or []
    if not rules:
        raise MatrixError("matrix entry '%s' has no methods" % name)
    for rule in rules:
        method = rule.get("method")
        if method not in METHODS:
            raise MatrixError("matrix entry '%s' has method %r (known: %s)" % (name, method, ", ".join(METHODS)))
        if rule.get("fallback") not in (None, "source"):
            raise MatrixError("matrix entry '%s' has fallback %r (only 'source' is known)" % (name, rule.get("fallback")))
        if rule_matches(rule.get("when"), platform):
            return rule
    raise MatrixError("no rule of matrix entry '%s' matches this host (%s); add a rule without 'when'" % (
        name, ", ".join("%s=%s" % (k, platform.get(k)) for k in WHEN_KEYS)))


def requirement_for(name, pin):
    """'name==1.2' for a bare version, 'name>=1,<2' for a specifier, 'name' when unpinned."""
    pin = "" if pin is None else str(pin).strip()
    if not pin:
        return name
    if _SPECIFIER_START.match(pin):
        return name + pin.replace(" ", "")
    return "%s==%s" % (name, pin)


def _lookup(matrix, name):
    """Find a matrix entry by name, tolerant to -/_/. and case."""
    if name in matrix:
        return name
    wanted = canonical_name(name)
    for key in matrix:
        if canonical_name(key) == wanted:
            return key
    return None


def select_names(matrix, profiles, profile=None, packages=None):
    """The matrix names asked for: the profile's plus the explicit list (in that order)."""
    names = []
    if profile:
        if profile not in (profiles or {}):
            raise MatrixError("unknown profile '%s' (known: %s)" % (profile, ", ".join(sorted(profiles or {}))))
        for item in profiles[profile] or []:
            if item == ALL_MARKER:
                names.extend(key for key, entry in matrix.items() if not (entry or {}).get("opt_in"))
            else:
                names.append(item)
    names.extend(packages or [])
    if not names:
        raise MatrixError("nothing selected: give a profile (%s) or a list of packages" % ", ".join(sorted(profiles or {})))
    result = []
    unknown = []
    for item in names:
        key = _lookup(matrix, item)
        if key is None:
            unknown.append(item)
        elif key not in result:
            result.append(key)
    if unknown:
        raise MatrixError("unknown package(s) %s: not in the matrix (sparkforge_ml_packages); known: %s" % (
            ", ".join(sorted(set(unknown))), ", ".join(sorted(matrix))))
    return result


def _with_prerequisites(matrix, names):
    """Insert each entry's install_first packages before it (recursively, once each)."""
    ordered = []
    visiting = set()

    def visit(key):
        if key in ordered:
            return
        if key in visiting:
            raise MatrixError("install_first of '%s' forms a cycle" % key)
        visiting.add(key)
        for dep in (matrix[key] or {}).get("install_first") or []:
            dep_key = _lookup(matrix, dep)
            if dep_key is None:
                raise MatrixError("matrix entry '%s' lists unknown install_first package '%s'" % (key, dep))
            visit(dep_key)
        visiting.discard(key)
        ordered.append(key)

    for key in names:
        visit(key)
    return ordered


def resolve(matrix, profiles, pins, platform, profile=None, packages=None, allow_source_builds=True):
    """The ordered install plan for one host.

    ``platform``: {'arch': 'aarch64', 'platform_class': 'dgx_spark', 'cuda_major': 13}.
    Each plan item: name, requirement, method, fallback, optional, experimental,
    needs_torch, index_url, source {spec, prereqs, env, build_isolation},
    caveats, skip_reason.
    """
    if not isinstance(matrix, dict) or not matrix:
        raise MatrixError("the package matrix is empty or not a mapping")
    pins = pins or {}
    pin_by_name = dict((canonical_name(k), v) for k, v in pins.items())
    names = _with_prerequisites(matrix, select_names(matrix, profiles, profile, packages))
    plan = []
    for key in names:
        entry = matrix[key] or {}
        rule = select_rule(key, entry, platform)
        source = entry.get("source") or {}
        caveats = list(entry.get("caveats") or [])
        if rule.get("caveat"):
            caveats.insert(0, rule["caveat"])
        method = rule["method"]
        fallback = rule.get("fallback")
        skip_reason = rule.get("reason") if method == "skip" else None
        if method == "skip" and not skip_reason:
            skip_reason = "the matrix skips it on this platform"
        if method == "source" and not allow_source_builds:
            skip_reason = "needs a source build and allow_source_builds is false"
            method = "skip"
        if fallback == "source" and not allow_source_builds:
            fallback = None
        if method == "index" and not rule.get("index_url"):
            raise MatrixError("matrix entry '%s' uses method index without index_url" % key)
        plan.append({
            "name": key,
            "requirement": requirement_for(key, pin_by_name.get(canonical_name(key))),
            "method": method,
            "fallback": fallback,
            "optional": bool(entry.get("optional", False)),
            "experimental": bool(rule.get("experimental", False)),
            "needs_torch": bool(entry.get("needs_torch", False)),
            "index_url": rule.get("index_url"),
            "source": {
                "spec": source.get("spec"),
                "prereqs": list(source.get("prereqs") or []),
                "env": dict((str(k), str(v)) for k, v in (source.get("env") or {}).items()),
                "build_isolation": bool(source.get("build_isolation", True)),
            },
            "caveats": caveats,
            "skip_reason": skip_reason,
            # Heavy packages (CUDA kernels): how their source build gets the arch list (heavy_build.py).
            "gpu_build": _gpu_build(key, entry.get("gpu_build")),
            # A prebuilt wheel with CUDA code (methods wheel/index): downloaded and audited before it is installed.
            "gpu_wheel": _flag(key, entry, "gpu_wheel"),
            "smoke": _smoke(key, entry.get("smoke")),
        })
    return plan


def _smoke(key, value):
    try:
        return smoke.validate(key, value)
    except smoke.SmokeError as exc:
        raise MatrixError(str(exc))


def _flag(key, entry, field):
    value = entry.get(field, False)
    if not isinstance(value, bool):
        raise MatrixError("matrix entry '%s': %s must be true or false, got %r" % (key, field, value))
    return value


def _gpu_build(key, gpu_build):
    if gpu_build is None:
        return None
    try:
        return heavy_build.validate_gpu_build(key, gpu_build)
    except heavy_build.HeavyBuildError as exc:
        raise MatrixError(str(exc))


def possible_prereqs(plan):
    """Debian packages any source build of the plan could need (sorted, unique)."""
    wanted = set()
    for item in plan:
        if item["method"] == "source" or item.get("fallback") == "source":
            wanted.update(item["source"]["prereqs"])
    return sorted(wanted)


# ---- pip's view of the venv ---------------------------------------------------------

def venv_torch_version(venv):
    """The torch version a venv holds, read from its site-packages' dist-info (no interpreter run);
    None when it holds none (or the venv does not exist)."""
    found = sorted(glob.glob(os.path.join(venv, "lib", "python*", "site-packages", "torch-*.dist-info", "METADATA")))
    for path in found:
        with open(path, errors="replace") as handle:
            for line in handle:
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
                if not line.strip():
                    break
    return None


def pip_version_ok(text):
    """True for 'pip 23.2.1 from ...' and newer."""
    match = re.search(r"pip\s+(\d+)\.(\d+)", text or "")
    return bool(match) and (int(match.group(1)), int(match.group(2))) >= MIN_PIP


def installed_from_inspect(inspect_json):
    """{canonical name: {name, version, url, metadata_location}} from ``pip inspect``."""
    result = {}
    for item in (inspect_json or {}).get("installed") or []:
        meta = item.get("metadata") or {}
        name = meta.get("name")
        if not name:
            continue
        direct = item.get("direct_url") or {}
        result[canonical_name(name)] = {
            "name": name,
            "version": meta.get("version"),
            "url": direct.get("url"),
            "metadata_location": item.get("metadata_location"),
        }
    return result


def _local_file(url):
    if not url or not url.startswith("file://"):
        return None
    path = url[len("file://"):]
    path = re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), path)
    return path


def constraints_text(installed, protected):
    """The constraints file content pinning every installed protected distribution.

    An installed build is pinned by exact version (local label included, e.g.
    ``torch==2.11.0+sparkforge``); when it was installed from a local wheel file that
    still exists, that file is named too, so pip can only ever pick that very build.
    """
    lines = ["# sparkforge: the venv's own builds of these may never be replaced"]
    for name in protected:
        info = installed.get(canonical_name(name))
        if not info:
            continue
        path = _local_file(info.get("url"))
        if path and path.endswith(".whl") and os.path.isfile(path):
            lines.append("%s @ %s" % (name, info["url"]))
        else:
            lines.append("%s==%s" % (name, info["version"]))
    return "\n".join(lines) + "\n"


def report_install_items(report_json):
    """[{name, version, url, from_source}] of pip's --report 'install' list."""
    items = []
    for item in (report_json or {}).get("install") or []:
        meta = item.get("metadata") or {}
        info = item.get("download_info") or {}
        url = info.get("url") or ""
        items.append({
            "name": canonical_name(meta.get("name", "")),
            "version": meta.get("version"),
            "url": url,
            "from_source": "vcs_info" in info or not url.split("#")[0].endswith(".whl"),
        })
    return items


def guard_violations(items, protected, installed):
    """Messages for every report item that would install or replace a protected distribution."""
    problems = []
    protected_names = set(canonical_name(p) for p in protected)
    for item in items:
        if item["name"] not in protected_names:
            continue
        have = installed.get(item["name"])
        if have:
            problems.append("would replace %s %s (installed) with %s %s from %s" % (
                item["name"], have["version"], item["name"], item["version"], item["url"] or "the index"))
        else:
            problems.append("would install %s %s from %s (not in the venv: install the stack's own build first)" % (
                item["name"], item["version"], item["url"] or "the index"))
    return problems


_CONFLICT_LINE = re.compile(r"^\s*(The user requested .*|\S+ \S+ depends on .*)$")
_CONSTRAINT_LINE = re.compile(r"The user requested \(constraint\) ([A-Za-z0-9_.\-]+)")


def classify_failure(output, protected):
    """Why a pip run failed: ('guard'|'conflict'|'no_wheel'|'other', lines that say so).

    'guard': pip could not resolve without breaking a constraint, and the
    constraints file holds only the protected distributions, so the package needs
    another torch (or torchvision, ...) than the venv's.
    """
    text = output or ""
    protected_names = set(canonical_name(p) for p in protected)
    if "ResolutionImpossible" in text or "conflicting dependencies" in text:
        lines = [line.strip() for line in text.splitlines() if _CONFLICT_LINE.match(line)]
        for line in lines:
            match = _CONSTRAINT_LINE.search(line)
            if match and canonical_name(match.group(1)) in protected_names:
                return "guard", lines
        return "conflict", lines
    if "No matching distribution found" in text or "Could not find a version that satisfies" in text:
        return "no_wheel", [line.strip() for line in text.splitlines() if line.startswith("ERROR")]
    return "other", text.strip().splitlines()[-30:]


# ---- torch stays byte-identical ---------------------------------------------------------

def dist_digest(metadata_location):
    """{'files': n, 'sha256': ...} over the files the dist-info RECORD lists.

    Byte code caches (__pycache__) are left out: importing a module may rewrite them
    without changing the build.  Returns None when the RECORD is missing.
    """
    record = os.path.join(metadata_location, "RECORD")
    if not os.path.isfile(record):
        return None
    base = os.path.dirname(metadata_location)
    with open(record) as handle:
        paths = sorted(row[0] for row in csv.reader(handle) if row and row[0])
    digest = hashlib.sha256()
    count = 0
    for rel in paths:
        if "__pycache__" in rel.split("/") or rel.endswith(".pyc"):
            continue
        full = os.path.normpath(os.path.join(base, rel))
        digest.update(rel.encode("utf-8") + b"\0")
        if os.path.isfile(full):
            with open(full, "rb") as handle:
                for block in iter(lambda: handle.read(1024 * 1024), b""):
                    digest.update(block)
            count += 1
        else:
            digest.update(b"<missing>")
        digest.update(b"\0")
    return {"files": count, "sha256": digest.hexdigest()}


def protected_state(installed, protected):
    """{name: {version, url, files, sha256}} of each protected distribution (None if absent)."""
    state = {}
    for name in protected:
        info = installed.get(canonical_name(name))
        if not info:
            state[name] = None
            continue
        entry = {"version": info["version"], "url": info.get("url")}
        entry.update(dist_digest(info["metadata_location"]) or {"files": 0, "sha256": None})
        state[name] = entry
    return state


# ---- pip command lines ----------------------------------------------------------------

def index_args(index_url=None, extra_index_urls=None, find_links=None, no_index=False):
    args = []
    if no_index:
        args.append("--no-index")
    elif index_url:
        args += ["--index-url", index_url]
    for url in extra_index_urls or []:
        args += ["--extra-index-url", url]
    for link in find_links or []:
        args += ["--find-links", link]
    return args


def install_args(item, method):
    """pip install arguments (after the common ones) for ``item`` installed by ``method``."""
    canon = canonical_name(item["name"])
    if method == "wheel":
        return ["--only-binary", canon, item["requirement"]]
    if method == "index":
        return ["--only-binary", canon, "--extra-index-url", item["index_url"], item["requirement"]]
    if method == "source":
        args = ["--no-binary", canon]
        if not item["source"]["build_isolation"]:
            args.append("--no-build-isolation")
        args.append(item["source"]["spec"] or item["requirement"])
        return args
    raise MatrixError("method %r installs nothing" % method)


def build_env(item, method, base_env):
    env = dict(base_env)
    if method == "source":
        env.update(item["source"]["env"])
    return env


# ---- the result table ------------------------------------------------------------------

TABLE_COLUMNS = ("name", "status", "version", "method", "method_used", "fallback_taken", "detail")


PROVENANCE_FILE = "sparkforge-ml-packages.json"
REPORT_FIELDS = ("name", "state", "version", "method", "method_used", "fallback_taken", "optional",
                 "experimental", "reason", "caveats", "audit")


def report_rows(rows):
    """Rows without run-dependent fields (durations, present-vs-installed), for the host report.

    ``state`` is installed / failed / skipped / would_install; a rerun that installs
    nothing gives the same rows as the run that installed, so the report file is stable.
    """
    out = []
    for row in rows:
        item = dict((key, row.get(key)) for key in REPORT_FIELDS if key != "state")
        item["state"] = "installed" if row.get("status") in ("present", "installed") else row.get("status")
        out.append(item)
    return out


def apply_provenance(row, provenance):
    """Fill how an already-present package was installed, from the venv's provenance record."""
    known = provenance.get(canonical_name(row["name"]))
    if known and known.get("version") == row.get("version"):
        row["method_used"] = known.get("method_used")
        row["fallback_taken"] = bool(known.get("fallback_taken"))
        row["reason"] = known.get("reason") or ""
        # A GPU build's arch audit stays in the report of every later run (from the provenance record).
        row["audit"] = known.get("audit")
    else:
        row["method_used"] = "already installed"
    return row


def record_provenance(provenance, row):
    provenance[canonical_name(row["name"])] = {
        "version": row.get("version"),
        "method_used": row.get("method_used"),
        "fallback_taken": bool(row.get("fallback_taken")),
        "reason": row.get("reason") or "",
        "audit": row.get("audit"),
        "build": row.get("build"),
    }
    return provenance


def format_table(rows):
    """A plain-text table of the result rows (what the host report shows)."""
    cells = []
    for row in rows:
        detail = row.get("reason") or ""
        if len(detail) > 160:
            detail = detail[:157] + "..."
        if row.get("experimental"):
            detail = ("EXPERIMENTAL; " + detail).rstrip("; ")
        cells.append([
            str(row.get("name") or ""), str(row.get("status") or row.get("state") or ""), str(row.get("version") or "-"),
            str(row.get("method") or ""), str(row.get("method_used") or "-"),
            "yes" if row.get("fallback_taken") else "no", detail,
        ])
    widths = [len(col) for col in TABLE_COLUMNS]
    for line in cells:
        for index, cell in enumerate(line[:-1]):
            widths[index] = max(widths[index], len(cell))
    out = []
    for line in [list(TABLE_COLUMNS)] + cells:
        out.append("  ".join(cell.ljust(widths[i]) if i < len(line) - 1 else cell for i, cell in enumerate(line)).rstrip())
    return "\n".join(out) + "\n"
