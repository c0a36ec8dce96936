# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Is a wheel in a wheelhouse one that pip can install on this host? Found before anything changes.

A wheel's file name carries its tags (PEP 427/425: ``name-version[-build]-python-abi-platform.whl``,
each tag part possibly a ``.``-joined set). ``tag_problem`` says why no tag fits a host's CPython
``X.Y``, machine and glibc (a small form of pip's tag matching: CPython and pure-Python wheels, the linux
and manylinux platforms of the machine, a manylinux tag's glibc at most the host's, ``any``).
``metadata_problem`` says why a wheel's METADATA is not the project and version its file name says
(pip refuses such a wheel only once it installs it, after the venv is made). ``zip_problem`` says why a
file is not a wheel pip can open (a truncated file has no zip central directory) or lacks its
``.dist-info`` METADATA and RECORD; ``manifest_problem`` why a wheel differs from the build manifest
published beside it.
``wheelhouse_problems`` applies them to the wheels a plan installs from a directory.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import re
import zipfile

try:
    from urllib.parse import urlparse, unquote
except ImportError:  # pragma: no cover - Python 2
    from urlparse import urlparse
    from urllib import unquote

WHEEL_RE = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(?:-(?P<build>\d[^-]*))?-(?P<python>[^-]+)"
                      r"-(?P<abi>[^-]+)-(?P<platform>[^-]+)\.whl$")
# Platform tags a glibc Linux host takes for its machine (the glibc version itself is pip's to judge).
_LINUX_PLATFORM = re.compile(r"^(?P<kind>linux|manylinux1|manylinux2010|manylinux2014"
                             r"|manylinux_(?P<major>\d+)_(?P<minor>\d+))_(?P<machine>.+)$")
MACHINES = {"amd64": "x86_64", "arm64": "aarch64"}
# The glibc each legacy manylinux tag stands for (PEP 600: manylinux1 = manylinux_2_5, 2010 = 2_12, 2014 = 2_17).
LEGACY_GLIBC = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


def normalise(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def parse(filename):
    """{name, version, build, python, abi, platform} of a wheel file name (tag sets as lists), or None."""
    m = WHEEL_RE.match(os.path.basename(filename))
    if not m:
        return None
    out = m.groupdict()
    for key in ("python", "abi", "platform"):
        out[key] = out[key].split(".")
    out["name"] = normalise(out["name"])
    return out


def _python_fits(tag, abi, major, minor):
    """Does (python tag, abi tag) run on CPython major.minor?"""
    m = re.match(r"^(cp|py)(\d)(\d*)$", tag)
    if not m:
        return False
    kind, tmajor, tminor = m.group(1), int(m.group(2)), m.group(3)
    if tmajor != major:
        return False
    if kind == "py":
        # py3 or py3X with no compiled ABI: pure Python.
        return abi == "none" and (tminor == "" or int(tminor) <= minor)
    if tminor == "":
        return False
    if abi == "abi3":
        return int(tminor) <= minor
    if abi == "none":
        return int(tminor) == minor
    return int(tminor) == minor and re.match(r"^cp%d%d[a-z]*$" % (major, minor), abi) is not None


def glibc_of(platform):
    """(major, minor) of the glibc a manylinux platform tag needs; None for linux_* and any."""
    m = _LINUX_PLATFORM.match(platform)
    if not m or m.group("kind") == "linux":
        return None
    if m.group("major"):
        return int(m.group("major")), int(m.group("minor"))
    return LEGACY_GLIBC[m.group("kind")]


def parse_glibc(text):
    """(major, minor) of a glibc version ('2.35', 'glibc 2.35'); None when it is not one (a musl host, unknown)."""
    m = re.search(r"(\d+)\.(\d+)", str(text or ""))
    return (int(m.group(1)), int(m.group(2))) if m else None


def host_glibc():
    """The glibc version of this machine ('2.35'), as the C library reports it; None without glibc."""
    try:
        found = parse_glibc(os.confstr("CS_GNU_LIBC_VERSION"))
    except (AttributeError, ValueError, OSError):
        return None
    return "%d.%d" % found if found else None


def _platform_problem(platform, machine, glibc):
    """None when the platform tag fits ``machine`` with glibc (major, minor) (None: not judged), else why not."""
    if platform == "any":
        return None
    m = _LINUX_PLATFORM.match(platform)
    if not m or m.group("machine") != machine:
        return "is for %s, this host is %s" % (platform, machine)
    need = glibc_of(platform)
    if need and glibc and need > glibc:
        return "is for %s (glibc %d.%d or newer), this host's glibc is %d.%d" % ((platform,) + need + glibc)
    return None


def tag_problem(filename, python_version, machine, glibc=None):
    """None when some tag of the wheel fits CPython ``python_version`` (X.Y[.Z]) on ``machine``
    (x86_64, aarch64) with ``glibc`` (X.Y; None: the manylinux version is not judged), else why not, as a
    person reads it."""
    tags = parse(filename)
    if tags is None:
        return "is not a wheel file name (name-version-python-abi-platform.whl)"
    machine = MACHINES.get(machine, machine)
    have_glibc = parse_glibc(glibc)
    parts = str(python_version).split(".")
    major, minor = int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    platform_why = [_platform_problem(p, machine, have_glibc) for p in tags["platform"]]
    platform_ok = None in platform_why
    python_ok = any(_python_fits(py, abi, major, minor) for py in tags["python"] for abi in tags["abi"])
    if platform_ok and python_ok:
        return None
    why = []
    if not platform_ok:
        other = [w for w in platform_why if "glibc" not in w]
        # The glibc is named only where the machine fits: a wheel for another CPU is that first.
        why.append("is for %s, this host is %s" % (".".join(tags["platform"]), machine)
                   if len(other) == len(platform_why) else "; ".join(w for w in platform_why if "glibc" in w))
    if not python_ok:
        why.append("is for Python %s (ABI %s), the venv's Python is %d.%d" % (
            ".".join(tags["python"]), ".".join(tags["abi"]), major, minor))
    return " and ".join(why)


def zip_problem(path):
    """None when ``path`` opens as a zip with its .dist-info METADATA and RECORD, else why not."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            meta = [n for n in names if re.match(r"^[^/]+\.dist-info/METADATA$", n)]
            record = [n for n in names if re.match(r"^[^/]+\.dist-info/RECORD$", n)]
            if not meta or not record:
                return "has no .dist-info/%s: not a wheel pip installs" % ("METADATA" if not meta else "RECORD")
            archive.read(meta[0])
    except zipfile.BadZipfile as exc:
        return "is not a valid zip (truncated or not a wheel: %s)" % exc
    except (IOError, OSError) as exc:
        return "cannot be read (%s)" % exc
    except (zipfile.LargeZipFile, RuntimeError, ValueError) as exc:
        return "cannot be read as a wheel (%s)" % exc
    return None


_VERSION_WORDS = {"alpha": "a", "beta": "b", "c": "rc", "pre": "rc", "preview": "rc", "rev": "post", "r": "post"}


def version_key(version):
    """A version as PEP 440 compares it, enough to tell two spellings of one version from two versions:
    case, a leading v, trailing .0 of the release, separators and long words of the pre/post/dev parts,
    and the local tag's separators (+cu130, +CU-130) do not count."""
    text = str(version or "").strip().lower()
    public, _sep, local = text.partition("+")
    m = re.match(r"^v?(\d+(?:\.\d+)*)(.*)$", public)
    if not m:
        return text
    release = [int(x) for x in m.group(1).split(".")]
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    rest, tokens = re.findall(r"[a-z]+|\d+", m.group(2)), []
    for i, token in enumerate(rest):
        if token.isdigit():
            tokens.append(str(int(token)))
        else:
            tokens.append(_VERSION_WORDS.get(token, token))
            if i + 1 == len(rest) or not rest[i + 1].isdigit():
                tokens.append("0")  # 1.0a is 1.0a0
    local = ".".join(str(int(p)) if p.isdigit() else p for p in re.split(r"[-_.]", local) if p)
    return ".".join(str(n) for n in release) + "".join(tokens) + ("+" + local if local else "")


def read_metadata(path):
    """(the .dist-info directory, {Name, Version}) of the wheel at ``path``, from its METADATA's headers
    (the first .dist-info with a METADATA); (None, {}) when there is none."""
    with zipfile.ZipFile(path) as archive:
        names = [n for n in archive.namelist() if re.match(r"^[^/]+\.dist-info/METADATA$", n)]
        if not names:
            return None, {}
        text = archive.read(names[0]).decode("utf-8", "replace")
    headers = {}
    for line in text.splitlines():
        if not line.strip():
            break  # the headers end at the first blank line; the description follows
        key, sep, value = line.partition(":")
        if sep and key in ("Name", "Version") and key not in headers:
            headers[key] = value.strip()
    return names[0].split("/", 1)[0], headers


def metadata_problem(path):
    """None when the wheel's METADATA names the project and version its file name says (pip refuses a wheel
    whose metadata differs, after the venv is made: 'inconsistent version'), else what each says."""
    tags = parse(path)
    if tags is None:
        return None
    try:
        info, meta = read_metadata(path)
    except (zipfile.BadZipfile, IOError, OSError, RuntimeError, ValueError):
        return None  # zip_problem names it
    if info is None:
        return None
    said = "%s %s" % (tags["name"], tags["version"])
    if normalise(info[:-len(".dist-info")].split("-", 1)[0]) != tags["name"]:
        return ("says %s in its file name, but its metadata directory is %s (pip finds no %s .dist-info in it): "
                "the file was renamed; use the wheel as it was built" % (said, info, tags["name"]))
    name, version = meta.get("Name"), meta.get("Version")
    if not name or not version:
        return "has no %s in %s/METADATA: not a wheel pip installs" % ("Name" if not name else "Version", info)
    wrong = []
    if normalise(name) != tags["name"]:
        wrong.append("name")
    if version_key(version) != version_key(tags["version"].replace("_", "-")):
        base = [v.split("+", 1) for v in (version_key(version), version_key(tags["version"].replace("_", "-")))]
        wrong.append("version" if base[0][0] != base[1][0] else "local tag")
    if not wrong:
        return None
    return ("says %s in its file name, but its METADATA (%s/METADATA) says %s %s (the %s %s): pip refuses it "
            "after the venv is made; use the wheel as it was built, or rename it to what its METADATA says"
            % (said, info, name, version, " and ".join(wrong), "differ" if len(wrong) > 1 else "differs"))


def manifest_problem(path):
    """A wheel published with a build manifest beside it (``<wheel>.manifest.json``, what the PyTorch build
    writes, with the wheel's ``sha256``) must be the wheel the manifest describes; None when it is or
    when there is no manifest."""
    manifest = path + ".manifest.json"
    if not os.path.isfile(manifest):
        return None
    try:
        with open(manifest) as handle:
            data = json.load(handle)
    except (IOError, OSError, ValueError) as exc:
        return "has a build manifest %s that cannot be read as JSON (%s)" % (os.path.basename(manifest), exc)
    want = data.get("sha256") if isinstance(data, dict) else None
    if not (isinstance(want, str) and re.match(r"^[0-9a-fA-F]{64}$", want)):
        return "has a build manifest %s without a sha256 of 64 hex digits (got %r)" % (os.path.basename(manifest), want)
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != want.lower():
        return "has sha256 %s, its build manifest %s says %s" % (
            digest.hexdigest(), os.path.basename(manifest), want.lower())
    return None


def content_problem(path):
    """Why the wheel file at ``path`` is not one pip installs as its file name says (a zip with its .dist-info
    METADATA and RECORD, whose METADATA names the project, version and local tag of its file name), or None."""
    return zip_problem(path) or metadata_problem(path)


def install_problem(path, python_version, machine, glibc=None):
    """Why pip cannot install the wheel at ``path`` on a host of CPython ``python_version`` (X.Y; None: the Python
    tag is not judged, only the platform), ``machine`` and ``glibc`` (X.Y; None: not judged), or None: its tags
    (tag_problem), then its contents (content_problem). The one check of a wheel a host is about to install: the
    local wheelhouse in preflight (wheelhouse_problems), a fleet's wheels before their install."""
    if python_version:
        why = tag_problem(path, python_version, machine, glibc)
    elif parse(path) is None:
        why = "is not a wheel file name (name-version-python-abi-platform.whl)"
    else:
        fits = [_platform_problem(p, MACHINES.get(machine, machine), parse_glibc(glibc))
                for p in parse(path)["platform"]]
        why = None if None in fits else "; ".join(fits)
    return why or content_problem(path)


def local_dir(location):
    """The directory of a wheelhouse given as a path or file:// URL; None for a remote URL."""
    parsed = urlparse(location or "")
    if parsed.scheme == "file":
        return unquote(parsed.path)
    if not parsed.scheme and (location or "").startswith("/"):
        return location
    return None


def wheelhouse_problems(location, wanted, python_version, machine, variable, glibc=None):
    """Problems (strings) of the wheels a plan installs from the wheelhouse ``location``.

    ``python_version`` is the venv's Python (X.Y), ``glibc`` the host's (X.Y; None: manylinux versions are
    not judged).

    ``wanted``: project -> planned version (the local tag aside, as pip's ``name==version`` takes it).
    For each project the wheelhouse holds at that version, some wheel must fit the host's Python and
    machine; every wheel that fits (any of them may be what pip installs, a dependency too) must open
    as a wheel whose METADATA names the project and version its file name says. torch itself must be there
    at its planned release: the pytorch role installs it from this directory alone (pip --no-index), after
    the venv is made, so an empty wheelhouse or one without torch would fail only after a change. Another
    project the wheelhouse lacks is pip's to report (its role may read a wheelhouse of its own)."""
    directory = local_dir(location)
    if directory is not None and os.path.lexists(directory) and not os.path.isdir(directory):
        # A wheel file given where the directory that holds the wheels is meant: every check below would skip it.
        return ["the wheelhouse %s (%s) is a file, not a directory: give the directory that holds the wheels"
                % (directory, variable)]
    if directory is None or not os.path.isdir(directory):
        return []
    files = sorted(f for f in os.listdir(directory) if f.endswith(".whl") and os.path.isfile(os.path.join(directory, f)))
    out = []
    for project, version in sorted(wanted.items()):
        if not version:
            continue
        planned = str(version).split("+", 1)[0]
        candidates = [f for f in files if (parse(f) or {}).get("name") == normalise(project)
                      and (parse(f) or {}).get("version", "").split("+", 1)[0] == planned]
        if project == "torch" and not candidates:
            held = sorted(set("%s %s" % (p["name"], p["version"]) for p in (parse(f) for f in files)
                              if p and p.get("name") == "torch"))
            out.append("the wheelhouse %s (%s) has no torch %s wheel (%s): pip installs torch from it alone "
                       "(--no-index); put the planned wheel there, or set sparkforge_torch_source to index"
                       % (directory, variable, planned, "it holds " + ", ".join(held) if held
                          else "it holds %d wheel(s), none of torch" % len(files)))
            continue
        if candidates and all(tag_problem(f, python_version, machine, glibc) for f in candidates):
            out.append("the wheelhouse %s (%s) has no %s %s wheel for this host (Python %s, %s): %s" % (
                directory, variable, project, version, ".".join(str(python_version).split(".")[:2]),
                MACHINES.get(machine, machine),
                "; ".join("%s %s" % (f, tag_problem(f, python_version, machine, glibc)) for f in candidates)))
    for fname in files:
        if tag_problem(fname, python_version, machine, glibc):
            continue
        path = os.path.join(directory, fname)
        why = content_problem(path) or manifest_problem(path)
        if why:
            out.append("the wheelhouse %s (%s): %s %s" % (directory, variable, os.path.join(directory, fname), why))
    return out
