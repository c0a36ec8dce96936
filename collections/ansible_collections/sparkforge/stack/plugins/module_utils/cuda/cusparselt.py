# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Kept whole: small pure functions about one thing, NVIDIA's cuSPARSELt local repo; the apt source
# parsing and editing (parse_one_line..one_line_source) is its natural cut if it grows.
"""cuSPARSELt local-repo knowledge, as plain functions (no Ansible imports).

NVIDIA ships cuSPARSELt up to 0.8.x as a "local repo" Debian package:
``cusparselt-local-repo-<distro>-<V>_<V>-1_<arch>.deb`` under
``compute/cusparselt/<V>/local_installers/``.  Installing it unpacks a flat apt
repository to ``/var/cusparselt-local-repo-<distro>-<V>/`` (Packages index,
signed Release, the ``cusparselt-local-*-keyring.gpg`` that signs it) and an
apt source pointing at it.  The libraries then come from that repository:
``libcusparselt0-cuda-<M>`` / ``libcusparselt0-dev-cuda-<M>`` for CUDA major M
(or ``libcusparselt0`` / ``libcusparselt0-dev`` in repos built for one CUDA).

The module ``sparkforge.stack.cusparselt_repo`` uses these functions; the unit
tests call them directly.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fcntl
import glob
import gzip
import os
import re
import struct

SUPPORTED_DISTROS = ("ubuntu2204", "ubuntu2404", "debian12")
SUPPORTED_ARCHES = ("amd64", "arm64")
DEFAULT_BASE_URL = "https://developer.download.nvidia.com/compute/cusparselt/{version}/local_installers/"
KEYRING_DIR = "/usr/share/keyrings"
SOURCES_DIR = "/etc/apt/sources.list.d"
LDCONF_DIR = "/etc/ld.so.conf.d"
HEADER = "cusparseLt.h"
SONAME = "libcusparseLt.so.0"
DEV_LINK = "libcusparseLt.so"

# What the symbolic entries of the module's `packages` option stand for.
SYMBOLIC = {
    "runtime": ("libcusparselt0-cuda-{major}", "libcusparselt0"),
    "dev": ("libcusparselt0-dev-cuda-{major}", "libcusparselt0-dev"),
}

_ARCH_ALIASES = {
    "amd64": "amd64",
    "x86_64": "amd64",
    "arm64": "arm64",
    "aarch64": "arm64",
    "sbsa": "arm64",
}
_TRIPLETS = {"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}
_VERSION_RE = re.compile(r"^[0-9]+(\.[0-9]+){1,3}$")
_NVCC_RE = re.compile(r"release\s+([0-9]+)\.([0-9]+)")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class CusparseltError(Exception):
    """An error the module reports with fail_json (the message says what to do)."""


# --------------------------------------------------------------------------- names


def normalize_arch(arch):
    """Debian architecture name (amd64/arm64) for a machine or Debian arch name."""
    key = (arch or "").strip().lower()
    if key not in _ARCH_ALIASES:
        raise CusparseltError(
            "unsupported architecture %r: NVIDIA publishes cuSPARSELt local repos for %s only"
            % (arch, ", ".join(SUPPORTED_ARCHES))
        )
    return _ARCH_ALIASES[key]


def distro_from_os_release(text):
    """``ubuntu2404``/``ubuntu2204``/``debian12`` style name from /etc/os-release text."""
    fields = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        fields[key.strip()] = value.strip().strip("'\"")
    ident = fields.get("ID", "").lower()
    version = fields.get("VERSION_ID", "")
    if not ident or not version:
        return None
    if ident == "debian":
        return "debian" + version.split(".")[0]
    return ident + version.replace(".", "")


def validate_target(version, distro, arch):
    """Check version/distro/arch; return (version, distro, debian_arch) or raise."""
    if not _VERSION_RE.match(version or ""):
        raise CusparseltError("version %r is not a cuSPARSELt release number such as 0.8.1" % (version,))
    if distro not in SUPPORTED_DISTROS:
        raise CusparseltError(
            "unsupported distro %r: cuSPARSELt local repos exist for %s; set distro to one of them"
            % (distro, ", ".join(SUPPORTED_DISTROS))
        )
    return version, distro, normalize_arch(arch)


def repo_package(version, distro):
    """Package name of the local-repo .deb (what dpkg knows it as)."""
    return "cusparselt-local-repo-%s-%s" % (distro, version)


def deb_filename(version, distro, arch):
    return "cusparselt-local-repo-%s-%s_%s-1_%s.deb" % (distro, version, version, normalize_arch(arch))


def repo_dir(version, distro):
    return "/var/cusparselt-local-repo-%s-%s" % (distro, version)


def repo_uri(version, distro):
    return "file://" + repo_dir(version, distro)


def deb_url(base_url, version, distro, arch):
    """Full URL of the local-repo .deb.  ``base_url`` may contain ``{version}``."""
    base = (base_url or DEFAULT_BASE_URL).replace("{version}", version)
    if not base.endswith("/"):
        base += "/"
    return base + deb_filename(version, distro, arch)


def triplet(arch):
    return _TRIPLETS[normalize_arch(arch)]


def source_file_for(version, distro):
    """The apt source file the module writes when the .deb brought none."""
    return os.path.join(SOURCES_DIR, "cusparselt-local-%s-%s.list" % (distro, version))


def ldconf_file_for(version, distro, cuda_major):
    """Linker configuration the module writes when the library directory is not on the linker path."""
    return os.path.join(LDCONF_DIR, "sparkforge-cusparselt-%s-%s-cuda-%s.conf" % (distro, version, cuda_major))


def apt_lists_glob(version, distro):
    """Files apt-get update writes for the local repo under /var/lib/apt/lists."""
    mangled = repo_dir(version, distro).strip("/").replace("/", "_")
    return "/var/lib/apt/lists/_%s_*" % mangled


# --------------------------------------------------------------------------- CUDA major


def parse_nvcc_version(text):
    """CUDA major from ``nvcc --version`` output (``... release 13.0, V13.0.88``), or None."""
    match = _NVCC_RE.search(text or "")
    return int(match.group(1)) if match else None


# --------------------------------------------------------------------------- checksums


def parse_checksum(text):
    """``sha256:<hex>`` (or bare 64-hex) -> lowercase hex; None for empty input."""
    if text is None or not str(text).strip():
        return None
    value = str(text).strip()
    if ":" in value:
        algo, digest = value.split(":", 1)
        if algo.strip().lower() != "sha256":
            raise CusparseltError("checksum %r: only sha256 is supported (write sha256:<64 hex digits>)" % value)
    else:
        digest = value
    digest = digest.strip().lower()
    if not _HEX64.match(digest):
        raise CusparseltError("checksum %r is not sha256:<64 hex digits>" % value)
    return digest


# --------------------------------------------------------------------------- Packages index


def parse_control_stanzas(text):
    """Debian control-format text -> list of dicts (field names as written, continuation lines joined)."""
    stanzas = []
    current = {}
    last = None
    for line in text.splitlines():
        if not line.strip():
            if current:
                stanzas.append(current)
            current, last = {}, None
            continue
        if line[0] in " \t" and last:
            current[last] += "\n" + line.strip()
            continue
        if ":" not in line:
            continue
        key, value = line.split(":", 1)
        last = key.strip()
        current[last] = value.strip()
    if current:
        stanzas.append(current)
    return stanzas


def read_packages_index(directory):
    """Stanzas of the Packages (or Packages.gz) index of a flat repo directory."""
    plain = os.path.join(directory, "Packages")
    packed = plain + ".gz"
    if os.path.exists(plain):
        with open(plain, "rb") as handle:
            data = handle.read()
    elif os.path.exists(packed):
        with gzip.open(packed, "rb") as handle:
            data = handle.read()
    else:
        raise CusparseltError("%s holds no Packages index; the local repo package is damaged, reinstall it" % directory)
    return parse_control_stanzas(data.decode("utf-8", "replace"))


def index_versions(stanzas, arch=None):
    """{package: version} from index stanzas (for ``arch`` and ``all`` when given)."""
    result = {}
    for stanza in stanzas:
        name = stanza.get("Package")
        if not name:
            continue
        if arch and stanza.get("Architecture") not in (None, arch, "all"):
            continue
        result[name] = stanza.get("Version", "")
    return result


def select_packages(available, cuda_major, wanted=("runtime", "dev")):
    """Concrete package names for ``wanted`` from the names the repo has.

    ``runtime``/``dev`` map to the CUDA-major-suffixed names when the repo has the
    suffixed runtime package, else to the generic names; other entries are taken
    as package names.  Raises when the repo lacks a package (listing what it has).
    Returns (names, flavour) where flavour is ``suffixed``, ``generic`` or ``explicit``.
    """
    available = set(available)
    suffixed_runtime = SYMBOLIC["runtime"][0].format(major=cuda_major)
    flavour = "suffixed" if suffixed_runtime in available else "generic"
    names = []
    for entry in wanted:
        if entry in SYMBOLIC:
            suffixed, generic = SYMBOLIC[entry]
            names.append(suffixed.format(major=cuda_major) if flavour == "suffixed" else generic)
        else:
            names.append(entry)
    if not any(entry in SYMBOLIC for entry in wanted):
        flavour = "explicit"
    missing = [name for name in names if name not in available]
    if missing:
        raise CusparseltError(
            "the cuSPARSELt repo has no package %s (looked for the CUDA %s names %s, then the generic names %s); "
            "it has: %s. Pick another version, set cuda_major, or list the packages explicitly"
            % (
                ", ".join(missing),
                cuda_major,
                ", ".join(SYMBOLIC[key][0].format(major=cuda_major) for key in ("runtime", "dev")),
                ", ".join(SYMBOLIC[key][1] for key in ("runtime", "dev")),
                ", ".join(sorted(available)) or "no packages at all",
            )
        )
    return names, flavour


def candidate_packages(cuda_major, explicit=()):
    """Every name the module may have installed for this CUDA major (for state=absent)."""
    names = []
    for suffixed, generic in SYMBOLIC.values():
        names.extend([suffixed.format(major=cuda_major), generic])
    names.extend(name for name in explicit if name not in SYMBOLIC)
    return names


def find_keyring(directory):
    """The repo's ``cusparselt-*keyring.gpg`` in ``directory`` (None when absent)."""
    found = sorted(glob.glob(os.path.join(directory, "cusparselt*keyring.gpg")))
    return found[0] if found else None


# --------------------------------------------------------------------------- apt sources


def _split_options(raw):
    options = []
    for item in raw.split():
        if "=" in item:
            key, value = item.split("=", 1)
            options.append((key, value))
        elif item:
            options.append((item, None))
    return options


def parse_one_line(line):
    """One ``deb [opts] uri suite [components]`` line -> dict, or None (comment/blank/other)."""
    stripped = line.strip()
    if not stripped or stripped.startswith("#"):
        return None
    match = re.match(r"^(deb|deb-src)\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+(\S+)(.*)$", stripped)
    if not match:
        return None
    return {
        "type": match.group(1),
        "options": _split_options(match.group(2) or ""),
        "uri": match.group(3),
        "suite": match.group(4),
        "components": match.group(5).split(),
    }


def format_one_line(entry):
    parts = [entry["type"]]
    if entry["options"]:
        parts.append("[%s]" % " ".join(k if v is None else "%s=%s" % (k, v) for k, v in entry["options"]))
    parts.extend([entry["uri"], entry["suite"]] + list(entry["components"]))
    return " ".join(parts)


def _same_uri(left, right):
    return left.rstrip("/") == right.rstrip("/")


def parse_deb822(text):
    """deb822 .sources text -> list of stanzas, each a list of [key, value] (order kept; comments dropped)."""
    stanzas, current, last = [], [], None
    for line in text.splitlines():
        if not line.strip():
            if current:
                stanzas.append(current)
            current, last = [], None
            continue
        if line.lstrip().startswith("#"):
            continue
        if line[0] in " \t" and last is not None:
            last[1] += "\n" + line
            continue
        if ":" in line:
            key, value = line.split(":", 1)
            last = [key.strip(), value.strip()]
            current.append(last)
    if current:
        stanzas.append(current)
    return stanzas


def _field(stanza, name):
    for key, value in stanza:
        if key.lower() == name.lower():
            return value
    return None


def source_format(path):
    return "deb822" if path.endswith(".sources") else "one-line"


def source_entries(text, fmt):
    """[(uri, signed_by or None, enabled)] of every ``deb`` entry in a source file."""
    entries = []
    if fmt == "deb822":
        for stanza in parse_deb822(text):
            types = (_field(stanza, "Types") or "").split()
            if "deb" not in types:
                continue
            enabled = (_field(stanza, "Enabled") or "yes").lower() != "no"
            for uri in (_field(stanza, "URIs") or "").split():
                entries.append((uri, _field(stanza, "Signed-By"), enabled))
    else:
        for line in text.splitlines():
            entry = parse_one_line(line)
            if entry and entry["type"] == "deb":
                signed = dict(entry["options"]).get("signed-by")
                entries.append((entry["uri"], signed, True))
    return entries


def references(text, fmt, uri):
    """True when the source text has an enabled ``deb`` entry for ``uri``."""
    return any(_same_uri(u, uri) and enabled for u, _signed, enabled in source_entries(text, fmt))


def signed_by_ok(text, fmt, uri, keyring):
    """True when every entry for ``uri`` is signed-by exactly ``keyring``."""
    found = [signed for u, signed, enabled in source_entries(text, fmt) if _same_uri(u, uri) and enabled]
    return bool(found) and all(signed == keyring for signed in found)


def ensure_signed_by(text, fmt, uri, keyring):
    """Rewrite the entries for ``uri`` so they are signed-by ``keyring``; return (text, changed).

    Other lines/stanzas are kept as they are (comments included).
    """
    if fmt == "deb822":
        return _ensure_signed_by_deb822(text, uri, keyring)
    out, changed = [], False
    for line in text.splitlines():
        entry = parse_one_line(line)
        if entry and _same_uri(entry["uri"], uri):
            options = [(k, v) for k, v in entry["options"] if k not in ("signed-by", "trusted")]
            options.append(("signed-by", keyring))
            new_line = format_one_line(dict(entry, options=options))
            if new_line != line.strip():
                changed = True
            out.append(new_line)
        else:
            out.append(line)
    result = "\n".join(out) + ("\n" if out else "")
    return result, changed or result != text


def _ensure_signed_by_deb822(text, uri, keyring):
    blocks = re.split(r"\n\s*\n", text.strip("\n")) if text.strip() else []
    out, changed = [], False
    for block in blocks:
        lines = block.splitlines()
        stanza = parse_deb822(block)
        uris = (_field(stanza[0], "URIs") or "").split() if stanza else []
        if not any(_same_uri(u, uri) for u in uris):
            out.append(block)
            continue
        new_lines, seen = [], False
        skip_continuation = False
        for line in lines:
            if skip_continuation and line[:1] in (" ", "\t"):
                continue
            skip_continuation = False
            key = line.split(":", 1)[0].strip().lower() if ":" in line and line[:1] not in (" ", "\t", "#") else None
            if key == "signed-by":
                seen = True
                skip_continuation = True
                new_lines.append("Signed-By: %s" % keyring)
            elif key == "trusted":
                skip_continuation = True
            else:
                new_lines.append(line)
        if not seen:
            new_lines.append("Signed-By: %s" % keyring)
        new_block = "\n".join(new_lines)
        changed = changed or new_block != block
        out.append(new_block)
    return "\n\n".join(out) + "\n", changed


def one_line_source(uri, keyring):
    """The line the module writes for a flat local repo."""
    return "deb [signed-by=%s] %s /\n" % (keyring, uri)


# --------------------------------------------------------------------------- installed files


def pick_paths(files, cuda_major):
    """include_dir/library/root_dir of cuSPARSELt from the files its packages installed.

    Prefers the CUDA-major directories (``/usr/include/libcusparseLt/<M>``,
    ``/usr/lib/<triplet>/libcusparseLt/<M>``), then whatever directory holds the
    header and the library (generic packages use /usr/include and /usr/lib/<triplet>).
    The library is the unversioned development link when installed, else the soname.
    """
    major_dir = "/libcusparseLt/%s/" % cuda_major
    headers = [f for f in files if os.path.basename(f) == HEADER]
    libs = [f for f in files if os.path.basename(f) in (DEV_LINK, SONAME)]

    def rank(path):
        return (0 if major_dir in path else 1, 0 if os.path.basename(path) == DEV_LINK else 1, path)

    headers.sort(key=rank)
    libs.sort(key=rank)
    include_dir = os.path.dirname(headers[0]) if headers else None
    library = libs[0] if libs else None
    root_dir = None
    if include_dir:
        root_dir = include_dir.split("/include", 1)[0] or "/"
    return {"include_dir": include_dir, "library": library, "root_dir": root_dir}


def discover_paths(cuda_major, arch, root="/"):
    """Look for cuSPARSELt on disk at the places NVIDIA's packages use."""
    trip = triplet(arch)
    include_dirs = ["usr/include/libcusparseLt/%s" % cuda_major, "usr/include", "usr/include/%s" % trip]
    lib_dirs = ["usr/lib/%s/libcusparseLt/%s" % (trip, cuda_major), "usr/lib/%s" % trip, "usr/lib"]
    files = []
    for rel in include_dirs:
        path = os.path.join(root, rel, HEADER)
        if os.path.exists(path):
            files.append("/" + os.path.join(rel, HEADER))
    for rel in lib_dirs:
        for name in (DEV_LINK, SONAME):
            if os.path.exists(os.path.join(root, rel, name)):
                files.append("/" + os.path.join(rel, name))
    return pick_paths(files, cuda_major)


def ldconfig_has(ldconfig_p_output, library_dir):
    """True when ``ldconfig -p`` lists libcusparseLt.so.0 from ``library_dir``.

    Directories are compared after resolving links (merged-/usr hosts list /lib/<triplet> for /usr/lib/<triplet>).
    """
    wanted = os.path.realpath(library_dir.rstrip("/"))
    for line in ldconfig_p_output.splitlines():
        line = line.strip()
        if line.startswith(SONAME + " ") and "=>" in line:
            target = line.split("=>", 1)[1].strip()
            if os.path.realpath(os.path.dirname(target)) == wanted:
                return True
    return False


def parse_dpkg_query(text):
    """``dpkg-query -W -f '${Package}\\t${Version}\\t${db:Status-Abbrev}\\n'`` -> {name: version} of installed ones."""
    installed = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) < 3:
            continue
        name, version, status = parts[0], parts[1], parts[2].strip()
        if status.startswith("ii") or status.startswith("hi"):
            installed[name] = version
    return installed


def upstream_version(debian_version):
    """``0.8.1-1`` -> ``0.8.1`` (epoch and revision dropped)."""
    value = debian_version.split(":", 1)[-1]
    return value.rsplit("-", 1)[0] if "-" in value else value


def same_release(package_version, version):
    """True when a cuSPARSELt package version (``0.8.1.1-1``) belongs to release ``version`` (``0.8.1``)."""
    upstream = upstream_version(package_version)
    return upstream == version or upstream.startswith(version + ".")


# --------------------------------------------------------------------------- dpkg lock


def lock_holder(path):
    """PID holding a POSIX write lock on ``path`` (dpkg's kind of lock), 0 if unknown, None if free."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        # struct flock on 64-bit Linux: short type, short whence, off_t start, off_t len, pid_t pid (+padding).
        request = struct.pack("hhqqi4x", fcntl.F_WRLCK, 0, 0, 0, 0)
        try:
            answer = fcntl.fcntl(fd, fcntl.F_GETLK, request)
        except (OSError, IOError):
            return 0
        l_type, _whence, _start, _len, pid = struct.unpack("hhqqi4x", answer)
        if l_type == fcntl.F_UNLCK:
            return None
        return pid or 0
    finally:
        os.close(fd)


DPKG_LOCKS = ("/var/lib/dpkg/lock-frontend", "/var/lib/dpkg/lock")


def dpkg_lock_holders(paths=DPKG_LOCKS):
    """{lock path: pid} for every dpkg lock somebody holds now."""
    held = {}
    for path in paths:
        pid = lock_holder(path)
        if pid is not None:
            held[path] = pid
    return held
