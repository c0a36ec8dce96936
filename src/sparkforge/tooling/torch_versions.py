# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stack's PyTorch version data checked against what the wheels on an index state.

Plain functions (no Ansible imports) behind ``sparkforge versions``; the unit tests call them.

* ``survey``: for every final torch release on the index from ``min_version`` on, per Linux
  platform (aarch64, x86_64) and CPython: Requires-Python, the Triton requirement and the CUDA
  library pins of the torch wheels; the torchvision/torchaudio releases whose wheels pin that
  torch exactly.
* ``compare``: the releases the data lacks, and every pairing the wheels contradict.
* ``update_text``: the data file (torch.yml) rewritten line by line, comments and layout kept:
  pairings corrected, ``wheels`` facts refreshed, missing releases inserted in order.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from concurrent.futures import ThreadPoolExecutor

from sparkforge.tooling.pkg_index import (
    CUDA_PIN_RE,
    PLATFORMS,
    exact_pin,
    is_final,
    machine_of,
    parse_metadata,
    parse_wheel_filename,
    python_of,
    requirements_for,
    spec_allows,
    version_key,
)

PROJECTS = ("torch", "triton", "torchvision", "torchaudio")
# Pairing fields of a release entry and the project that provides them.
DOMAIN_FIELDS = ("torchvision", "torchaudio")


def _linux_wheels(files, project, min_version=None):
    """{version: [(machine, python, entry)]} of the final-release Linux CPython wheels."""
    out = {}
    for entry in files:
        if entry.get("yanked"):
            continue
        info = parse_wheel_filename(entry["filename"])
        if not info or info["name"] != project or not is_final(info["version"]):
            continue
        if min_version and version_key(info["version"]) < version_key(min_version):
            continue
        machine = machine_of(info["platform"])
        python = python_of(info["python"], info["abi"])
        if machine and python:
            out.setdefault(info["version"], []).append((machine, python, entry))
    return out


def _versions(files, project):
    """Every final release of ``project`` with at least one wheel or sdist on the index."""
    found = set()
    for entry in files:
        if entry.get("yanked"):
            continue
        info = parse_wheel_filename(entry["filename"])
        if info and info["name"] == project and is_final(info["version"]):
            found.add(info["version"])
    return sorted(found, key=version_key)


def survey(index, min_version="2.9.0", workers=8, progress=None):
    """What the index's wheels state; see the module docstring.  ``index``: a pkg_index.Index."""
    files = {name: index.project(name) for name in PROJECTS}
    torch_wheels = _linux_wheels(files["torch"], "torch", min_version)
    domain_wheels = {name: _linux_wheels(files[name], name) for name in DOMAIN_FIELDS}
    jobs = [("torch", v, m, p, e) for v, ws in torch_wheels.items() for m, p, e in ws]
    # Domain libraries: only their pins on torch matter, one wheel per release and platform is enough
    # when they agree; read all Linux ones anyway (small wheels, cached by sha256).
    jobs += [(name, v, m, p, e) for name in DOMAIN_FIELDS for v, ws in domain_wheels[name].items()
             if version_key(v) >= version_key(_domain_floor(name)) for m, p, e in ws]

    def read(job):
        name, version, machine, python, entry = job
        meta = parse_metadata(index.metadata(entry))
        if progress:
            progress("%s %s %s cp%s" % (name, version, machine, python))
        return job, meta

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        results = list(pool.map(read, jobs))

    torch = {}
    specs = {name: {} for name in DOMAIN_FIELDS}   # name -> domain version -> its torch specifier
    for (name, version, machine, python, _entry), meta in results:
        if name == "torch":
            reqs = requirements_for(meta["requires_dist"], machine, python)
            facts = {"requires_python": meta["requires_python"] or "",
                     "triton": reqs.get("triton"),
                     "cuda": dict(sorted((k, v) for k, v in reqs.items() if CUDA_PIN_RE.match(k)))}
            torch.setdefault(version, {}).setdefault(machine, {})[python] = facts
        else:
            reqs = requirements_for(meta["requires_dist"], machine, python)
            specs[name].setdefault(version, set()).add(reqs.get("torch") or "")
    # A domain release whose wheels disagree on their torch requirement keeps the strictest one.
    domain = {name: {v: sorted(s, key=len)[-1] for v, s in specs[name].items()} for name in DOMAIN_FIELDS}
    releases = {}
    for version in sorted(torch, key=version_key):
        releases[version] = {
            "platforms": {m: _merge_pythons(torch[version][m]) for m in PLATFORMS if m in torch[version]}}
        for name in DOMAIN_FIELDS:
            releases[version][name] = domain_candidates(domain[name], version)
    return {
        "index": index.url,
        "releases": releases,
        "triton_versions": _versions(files["triton"], "triton"),
        "torchvision_versions": _versions(files["torchvision"], "torchvision"),
        "torchaudio_versions": _versions(files["torchaudio"], "torchaudio"),
        "domain_torch_specs": domain,
        "requests": index.requests,
    }


def domain_candidates(specs, torch_version):
    """The domain releases that go with ``torch_version``, best first: those pinning it exactly,
    then those whose torch requirement allows it, then those that state none (torchaudio 2.11.0,
    its last release, requires no torch at all); each group newest first."""
    exact, allowing, silent = [], [], []
    for version, spec in specs.items():
        if exact_pin(spec) == torch_version:
            exact.append(version)
        elif spec and spec_allows(spec, torch_version):
            allowing.append(version)
        elif not spec:
            silent.append(version)
    return {group: sorted(found, key=version_key, reverse=True)
            for group, found in (("exact", exact), ("allowing", allowing), ("silent", silent))}


def best_domain(candidates):
    for group in ("exact", "allowing", "silent"):
        if candidates[group]:
            return candidates[group][0]
    return None


def _domain_floor(name):
    # The domain releases that can pin torch >= 2.9 (torchvision 0.24 / torchaudio 2.9 on).
    return {"torchvision": "0.24.0", "torchaudio": "2.9.0"}[name]


def _merge_pythons(by_python):
    """One set of facts for a platform with the Pythons it holds for; the Pythons whose facts
    differ are listed under ``differs`` (each with its own facts)."""
    groups = []
    for python in sorted(by_python, key=lambda p: (int(p.split(".")[1].rstrip("t")), p)):
        facts = by_python[python]
        for group in groups:
            if group["facts"] == facts:
                group["pythons"].append(python)
                break
        else:
            groups.append({"facts": facts, "pythons": [python]})
    groups.sort(key=lambda g: -len(g["pythons"]))
    main = dict(groups[0]["facts"], pythons=groups[0]["pythons"])
    if len(groups) > 1:
        main["differs"] = [dict(g["facts"], pythons=g["pythons"]) for g in groups[1:]]
    return main


# ------------------------------------------------------------------ comparison


def _finding(torch, field, manifest, wheels, why, platform=None, pythons=None):
    return {"torch": torch, "field": field, "manifest": manifest, "wheels": wheels, "why": why,
            "platform": platform, "pythons": pythons}


def wheel_facts(found):
    """The ``wheels`` data of a release, as --write records it, from a survey entry."""
    out = {}
    for machine, facts in sorted(found["platforms"].items()):
        out[machine] = {"requires_python": facts["requires_python"], "triton": facts["triton"] or "",
                        "cuda": facts["cuda"]}
    return out


def compare(data, surveyed):
    """Releases the data lacks and pairings the wheels contradict.

    ``data``: sparkforge_torch_releases.  Returns {"missing": [...], "disagreements": [...],
    "notes": [...]}; a disagreement names the release, the field, both values, the platform and
    Pythons it holds for, and why.
    """
    missing, disagreements, notes = [], [], []
    for version, found in surveyed["releases"].items():
        entry = data.get(version)
        if entry is None:
            missing.append(version)
            continue
        for machine, facts in found["platforms"].items():
            groups = [facts] + facts.get("differs", [])
            for group in groups:
                spec = group["triton"]
                if spec and entry.get("triton") and not spec_allows(spec, entry["triton"]):
                    disagreements.append(_finding(
                        version, "triton", entry["triton"], "triton%s" % spec,
                        "the torch %s wheels require triton%s" % (version, spec), machine, group["pythons"]))
            recorded = (entry.get("wheels") or {}).get(machine)
            if recorded is not None:
                for key in ("requires_python", "triton", "cuda"):
                    now = facts.get(key) or ({} if key == "cuda" else "")
                    if (recorded.get(key) or ({} if key == "cuda" else "")) != now:
                        disagreements.append(_finding(
                            version, "wheels.%s.%s" % (machine, key), recorded.get(key), now,
                            "the data records what the wheels carried; the index now says otherwise",
                            machine, facts["pythons"]))
            if facts.get("differs"):
                notes.append("torch %s on %s: Pythons %s state other requirements than %s" % (
                    version, machine, ", ".join(p for g in facts["differs"] for p in g["pythons"]),
                    ", ".join(facts["pythons"])))
        for field in DOMAIN_FIELDS:
            ours = entry.get(field)
            spec = surveyed["domain_torch_specs"][field].get(ours)
            cands = found[field]
            if ours is None:
                notes.append("torch %s: no %s in the data" % (version, field))
            elif spec is None:
                disagreements.append(_finding(
                    version, field, ours, best_domain(cands),
                    "%s %s has no Linux wheel on the index" % (field, ours)))
            elif spec and not spec_allows(spec, version):
                disagreements.append(_finding(
                    version, field, ours, best_domain(cands),
                    "the %s %s wheels require torch%s" % (field, ours, spec)))
            elif cands["exact"] and ours not in cands["exact"]:
                disagreements.append(_finding(
                    version, field, ours, ", ".join(cands["exact"]),
                    "the %s wheels made for torch %s are %s" % (field, version, ", ".join(cands["exact"]))))
            elif not spec:
                notes.append("torch %s: %s %s states no torch requirement" % (version, field, ours))
            elif not cands["exact"]:
                notes.append("torch %s: no %s release pins it exactly; %s %s allows it (torch%s)"
                             % (version, field, field, ours, spec))
    return {"missing": missing, "disagreements": disagreements, "notes": notes}


def suggest_entry(version, found, data, triton_versions):
    """A new release entry from the wheels' statements (None values: the wheels do not say).

    Pairings: the newest Triton release on the index the torch wheels allow, the best domain
    release (``domain_candidates``).  Traps, fixes, good_for and the C++ standard come from the
    newest older release (a patch release shares them; check them for a new minor release).
    """
    previous = [v for v in data if version_key(v) < version_key(version)]
    base = data[max(previous, key=version_key)] if previous else {}
    specs = {f["triton"] for f in found["platforms"].values() if f["triton"]}
    triton = None
    if specs:
        allowed = [t for t in triton_versions if all(spec_allows(s, t) for s in specs)]
        triton = max(allowed, key=version_key) if allowed else None
        if triton is None:
            pins = [exact_pin(s) for s in specs]
            triton = pins[0] if pins and pins[0] else None
    entry = {"triton": triton}
    for field in DOMAIN_FIELDS:
        entry[field] = best_domain(found[field])
    unconfirmed = [f for f in ("triton",) + DOMAIN_FIELDS if entry.get(f) is None]
    entry["traps"] = list(base.get("traps") or [])
    entry["fixes"] = list(base.get("fixes") or [])
    entry["good_for"] = list(base.get("good_for") or [])
    if base.get("cxx_standard"):
        entry["cxx_standard"] = base["cxx_standard"]
    if unconfirmed:
        entry["unconfirmed"] = unconfirmed
    entry["wheels"] = wheel_facts(found)
    return entry


# ------------------------------------------------------------------- the data file


def _q(value):
    return '"%s"' % value


def render_wheels(wheels, indent=4):
    pad = " " * indent
    lines = [pad + "# What the index's Linux wheels state (sparkforge versions --write)."]
    lines.append(pad + "wheels:")
    for machine in sorted(wheels):
        facts = wheels[machine]
        lines.append(pad + "  %s:" % machine)
        lines.append(pad + "    requires_python: %s" % _q(facts.get("requires_python") or ""))
        lines.append(pad + "    triton: %s" % _q(facts.get("triton") or ""))
        if facts.get("cuda"):
            lines.append(pad + "    cuda:")
            for name, spec in sorted(facts["cuda"].items()):
                lines.append(pad + "      %s: %s" % (name, _q(spec)))
        else:
            lines.append(pad + "    cuda: {}")
    return lines


def render_entry(version, entry):
    def flow(items):
        return "[%s]" % ", ".join(items)
    lines = ['  "%s":' % version]
    for field in ("triton",) + DOMAIN_FIELDS:
        value = entry.get(field)
        lines.append("    %s: %s" % (field, _q(value) if value is not None else "null"))
    lines.append("    traps: %s" % flow(entry.get("traps") or []))
    lines.append("    fixes: %s" % flow(entry.get("fixes") or []))
    lines.append("    good_for: %s" % flow(entry.get("good_for") or []))
    if entry.get("cxx_standard"):
        lines.append("    cxx_standard: %s" % entry["cxx_standard"])
    if entry.get("unconfirmed"):
        lines.append("    unconfirmed: %s" % flow(entry["unconfirmed"]))
    lines.extend(render_wheels(entry["wheels"]))
    return lines


_ENTRY_RE = re.compile(r'^  "(?P<version>[^"]+)":\s*$')


def _releases_block(lines):
    """(first, end) line indexes of the sparkforge_torch_releases mapping's entries."""
    try:
        start = next(i for i, line in enumerate(lines) if line.startswith("sparkforge_torch_releases:"))
    except StopIteration:
        raise ValueError("no sparkforge_torch_releases mapping in the data file")
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or lines[end].startswith((" ", "#"))):
        end += 1
    # Trailing blank/comment lines belong to what follows.
    while end > start + 1 and (not lines[end - 1].strip() or lines[end - 1].startswith("#")):
        end -= 1
    return start + 1, end


def _entries(lines, first, end):
    """{version: (start, stop)} line ranges of each entry inside the mapping."""
    starts = [(i, _ENTRY_RE.match(lines[i]).group("version")) for i in range(first, end) if _ENTRY_RE.match(lines[i])]
    out = {}
    for n, (i, version) in enumerate(starts):
        out[version] = (i, starts[n + 1][0] if n + 1 < len(starts) else end)
    return out


def _set_field(block, field, value):
    """Replace ``    field: ...`` in an entry's lines (the comment after it is kept)."""
    pattern = re.compile(r"^(    %s:\s*)([^#\n]*?)(\s*#.*)?$" % re.escape(field))
    for n, line in enumerate(block):
        match = pattern.match(line)
        if match:
            block[n] = match.group(1) + value + (match.group(3) or "")
            return block
    # Not there: add it after the pairing fields.
    insert_at = max([n for n, line in enumerate(block) if re.match(r"^    (triton|torchvision|torchaudio):", line)]
                    or [0]) + 1
    block.insert(insert_at, "    %s: %s" % (field, value))
    return block


def _replace_wheels(block, wheels):
    """Swap the entry's ``wheels:`` sub-block (and its comment line) for a fresh one."""
    start = next((n for n, line in enumerate(block) if line.startswith("    wheels:")), None)
    fresh = render_wheels(wheels)
    if start is None:
        while block and not block[-1].strip():
            block.pop()
        return block + fresh
    stop = start + 1
    while stop < len(block) and (block[stop].startswith("      ") or not block[stop].strip()):
        stop += 1
    if start > 0 and block[start - 1].strip().startswith("# What the index's Linux wheels state"):
        start -= 1
    return block[:start] + fresh + block[stop:]


def update_text(text, data, surveyed, report):
    """The data file's text with ``report``'s findings applied (see the module docstring)."""
    lines = text.split("\n")
    first, end = _releases_block(lines)
    spans = _entries(lines, first, end)
    new_blocks = {}
    for version, (start, stop) in spans.items():
        block = lines[start:stop]
        found = surveyed["releases"].get(version)
        if found is None:
            new_blocks[version] = block
            continue
        for item in report["disagreements"]:
            if item["torch"] != version:
                continue
            if item["field"] == "triton":
                suggested = suggest_entry(version, found, {}, surveyed["triton_versions"])["triton"]
                if suggested:
                    block = _set_field(block, "triton", _q(suggested))
            elif item["field"] in DOMAIN_FIELDS and best_domain(found[item["field"]]):
                block = _set_field(block, item["field"], _q(best_domain(found[item["field"]])))
        new_blocks[version] = _replace_wheels(block, wheel_facts(found))
    for version in report["missing"]:
        entry = suggest_entry(version, surveyed["releases"][version], data, surveyed["triton_versions"])
        new_blocks[version] = render_entry(version, entry)
    ordered = []
    for version in sorted(new_blocks, key=version_key):
        ordered.extend(new_blocks[version])
    return "\n".join(lines[:first] + ordered + lines[end:])


def new_tritons(data_text_entries, triton_data):
    """Triton versions the (updated) torch data names that the Triton data lacks."""
    return sorted({e.get("triton") for e in data_text_entries.values()
                   if e.get("triton") and e.get("triton") not in triton_data}, key=version_key)


def add_triton_text(text, versions):
    """triton.yml with entries for ``versions`` (LLVM pin read from the tag at build time)."""
    if not versions:
        return text
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("sparkforge_triton_releases:"))
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or lines[end].startswith((" ", "#"))):
        end += 1
    while not lines[end - 1].strip() or lines[end - 1].startswith("#"):
        end -= 1
    added = []
    for version in versions:
        added += ['  # Added by sparkforge versions --write: the LLVM pin is read from the tag\'s',
                  '  # cmake/llvm-hash.txt at build time; setup_dir/ptxas_blackwell as in 3.6 on.',
                  '  "%s":' % version, "    llvm_commit: null", '    setup_dir: "."', "    ptxas_blackwell: true"]
    return "\n".join(lines[:end] + added + lines[end:])
