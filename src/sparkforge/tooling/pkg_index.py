# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read a Python package index (PEP 503 HTML or PEP 691 JSON) and its wheels' metadata.

Plain functions and small classes (no Ansible imports), used by ``sparkforge versions`` and
called directly by the unit tests:

* the files of a project on an index: ``http(s)://``, ``file://`` or a plain directory (a
  mirror, or a bundle laid out as a simple index);
* a wheel's core metadata without downloading the wheel: the PEP 658/714 ``.metadata`` file
  when the index has one, else HTTP range reads of the wheel's zip directory and its
  ``METADATA`` member (about 1.5 MB for a 450 MB torch wheel);
* ``Requires-Dist`` parsed and evaluated for a platform and Python;
* what the wheels of torch, triton, torchvision and torchaudio state about each other, compared
  with the stack's version data (``sparkforge_torch_releases``).

The index is read directly, never through a resolver: a site-wide pip constraint (``pip config
list``) hides releases from a resolver, not from the index.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import email.parser
import hashlib
import io
import json
import os
import re
import zipfile

from html.parser import HTMLParser
from urllib.parse import urljoin, urlparse, unquote
from urllib.request import url2pathname
from urllib.error import HTTPError, URLError

# TLS verified against the system CA store, proxy variables honoured.
from ansible.module_utils.urls import open_url

try:
    from packaging.requirements import Requirement, InvalidRequirement
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version, InvalidVersion
    HAS_PACKAGING = True
except ImportError:  # pragma: no cover - ansible-core requires packaging on the controller
    HAS_PACKAGING = False

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
ACCEPT = "%s, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1" % JSON_TYPE
PLATFORMS = ("aarch64", "x86_64")
# CUDA libraries a torch wheel pins (Requires-Dist names), recorded as what the wheel carries.
CUDA_PIN_RE = re.compile(r"^(nvidia-[a-z0-9-]+|cuda-toolkit|cuda-bindings)$")
_WHEEL_RE = re.compile(
    r"^(?P<name>[^-]+)-(?P<version>[^-]+)(?:-(?P<build>\d[^-]*))?-(?P<python>[^-]+)-(?P<abi>[^-]+)"
    r"-(?P<platform>[^-]+)\.whl$")


class IndexError_(Exception):
    """The index or a file on it could not be read (the message names the URL)."""


def normalize(name):
    """PEP 503 name normalization."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_wheel_filename(filename):
    """Name, version, python/abi/platform tags of a wheel file name; None if it is not one."""
    match = _WHEEL_RE.match(filename)
    if not match:
        return None
    out = match.groupdict()
    out["name"] = normalize(out["name"])
    return out


def machine_of(platform_tag):
    """'aarch64' or 'x86_64' for a Linux wheel's platform tag, None for any other platform."""
    for tag in platform_tag.split("."):
        if tag.startswith(("manylinux", "musllinux", "linux")):
            for machine in PLATFORMS:
                if tag.endswith("_" + machine):
                    return machine
    return None


def python_of(python_tag, abi_tag):
    """'3.11' for cp311, '3.14t' for a free-threaded cp314t build, 'py3' for a pure wheel."""
    if python_tag.split(".")[0] == "py3" or "py3" in python_tag.split("."):
        return "py3"
    match = re.match(r"^cp(\d)(\d+)$", python_tag)
    if not match:
        return None
    return "%s.%s%s" % (match.group(1), match.group(2), "t" if abi_tag.endswith("t") else "")


def version_key(text):
    """Sort key of a release version (PEP 440 when packaging is there)."""
    if HAS_PACKAGING:
        try:
            return (0, Version(text))
        except InvalidVersion:
            pass
    return (1, tuple(int(p) if p.isdigit() else 0 for p in re.split(r"[.+]", text)))


def is_final(text):
    """A final release (no pre/dev/post/local part)."""
    return bool(re.match(r"^\d+(\.\d+)*$", text))


# ------------------------------------------------------------------------ the index


class _AnchorParser(HTMLParser):
    """The anchors of a PEP 503 project page with their data-* attributes."""

    def __init__(self):
        HTMLParser.__init__(self)
        self.files = []
        self._current = None

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self._current = dict(attrs)
            self._current["_text"] = ""

    def handle_data(self, data):
        if self._current is not None:
            self._current["_text"] += data

    def handle_endtag(self, tag):
        if tag == "a" and self._current is not None:
            self.files.append(self._current)
            self._current = None


def _hash_from_url(url):
    frag = urlparse(url).fragment
    if "=" in frag:
        algo, value = frag.split("=", 1)
        return {algo: value}
    return {}


def _metadata_flag(value):
    """PEP 658/714: the attribute/key is absent, 'true', or 'sha256=<hex>' (JSON: bool or hashes)."""
    if value in (None, False, "false"):
        return None
    if isinstance(value, dict):
        return value or True
    if isinstance(value, str) and "=" in value:
        algo, digest = value.split("=", 1)
        return {algo: digest}
    return True


def parse_project_page(body, content_type, base_url):
    """The files of a project page, JSON (PEP 691) or HTML (PEP 503), as dicts with filename, url,
    hashes, requires_python, metadata (None, True or a hash dict), yanked and size (or None)."""
    files = []
    if content_type.split(";")[0].strip() == JSON_TYPE or body.lstrip().startswith("{"):
        data = json.loads(body)
        for entry in data.get("files", []):
            meta = entry.get("core-metadata", entry.get("data-dist-info-metadata", entry.get("dist-info-metadata")))
            files.append({"filename": entry["filename"], "url": urljoin(base_url, entry["url"]),
                          "hashes": entry.get("hashes") or {}, "requires_python": entry.get("requires-python"),
                          "metadata": _metadata_flag(meta), "yanked": bool(entry.get("yanked")),
                          "size": entry.get("size")})
        return files
    parser = _AnchorParser()
    parser.feed(body)
    for anchor in parser.files:
        href = anchor.get("href")
        if not href:
            continue
        url = urljoin(base_url, href)
        filename = unquote(urlparse(url).path.rsplit("/", 1)[-1]) or anchor["_text"].strip()
        meta = anchor.get("data-core-metadata", anchor.get("data-dist-info-metadata"))
        files.append({"filename": filename, "url": url.split("#", 1)[0], "hashes": _hash_from_url(url),
                      "requires_python": anchor.get("data-requires-python"),
                      "metadata": _metadata_flag(meta if meta is not None else None),
                      "yanked": "data-yanked" in anchor, "size": None})
    return files


class Index:
    """A simple index at ``url``: http(s)://..., file:///... or a directory path.

    ``cache_dir`` keeps the core metadata of wheels by their sha256 (a wheel's metadata never
    changes), so a second run reads only the project pages.
    """

    def __init__(self, url, timeout=30.0, cache_dir=None, opener=None):
        if "://" not in url:
            url = "file://" + os.path.abspath(url)
        self.url = url.rstrip("/") + "/"
        self.timeout = timeout
        self.cache_dir = cache_dir
        self._open = opener or open_url
        self.requests = 0
        self.bytes = 0

    # -- transport
    def _get(self, url, headers=None):
        """(body bytes, content type, status) of ``url``; IndexError_ naming the URL on failure."""
        parsed = urlparse(url)
        if parsed.scheme == "file":
            path = url2pathname(parsed.path)
            if os.path.isdir(path):
                for name in ("index.json", "index.html"):
                    if os.path.isfile(os.path.join(path, name)):
                        path = os.path.join(path, name)
                        break
                else:
                    raise IndexError_("%s: a directory without index.json or index.html" % url)
            if not os.path.isfile(path):
                raise IndexError_("%s: no such file" % url)
            rng = (headers or {}).get("Range")
            with open(path, "rb") as handle:
                if rng:
                    start, end = [int(x) for x in rng.split("=", 1)[1].split("-")]
                    handle.seek(start)
                    data = handle.read(end - start + 1)
                else:
                    data = handle.read()
            self.requests += 1
            self.bytes += len(data)
            ctype = JSON_TYPE if path.endswith(".json") else "text/html"
            return data, ctype, 206 if rng else 200
        if parsed.scheme not in ("http", "https"):
            raise IndexError_("%s: unsupported URL scheme %r" % (url, parsed.scheme))
        try:
            resp = self._open(url, headers=dict(headers or {}), timeout=self.timeout,
                              http_agent="sparkforge-versions", validate_certs=True)
            try:
                data = resp.read()
                status = getattr(resp, "status", None) or resp.getcode()
                ctype = resp.headers.get("Content-Type", "")
            finally:
                resp.close()
        except HTTPError as exc:
            raise IndexError_("%s: HTTP %s %s" % (url, exc.code, exc.reason))
        except (URLError, OSError, ValueError) as exc:
            raise IndexError_("%s: %s" % (url, getattr(exc, "reason", exc)))
        self.requests += 1
        self.bytes += len(data)
        return data, ctype, status

    def project(self, name):
        """The files of project ``name`` (PEP 691 JSON asked for, PEP 503 HTML accepted)."""
        url = self.url + normalize(name) + "/"
        body, ctype, _status = self._get(url, {"Accept": ACCEPT})
        try:
            return parse_project_page(body.decode("utf-8"), ctype, url)
        except ValueError as exc:
            raise IndexError_("%s: not a PEP 503/691 project page (%s)" % (url, exc))

    # -- metadata
    def _cache_path(self, entry):
        digest = (entry.get("hashes") or {}).get("sha256")
        if not self.cache_dir or not digest:
            return None
        return os.path.join(self.cache_dir, digest + ".METADATA")

    def metadata(self, entry):
        """The core metadata (METADATA text) of a wheel entry from ``project()``."""
        cached = self._cache_path(entry)
        if cached and os.path.isfile(cached):
            with open(cached, "r") as handle:
                return handle.read()
        text = None
        if entry.get("metadata") or urlparse(entry["url"]).scheme == "file":
            try:
                data, _ctype, _status = self._get(entry["url"] + ".metadata")
            except IndexError_:
                if entry.get("metadata"):
                    raise
                data = None
            if data is not None:
                expected = entry["metadata"].get("sha256") if isinstance(entry.get("metadata"), dict) else None
                if expected and hashlib.sha256(data).hexdigest() != expected:
                    raise IndexError_("%s.metadata: sha256 %s, the index says %s"
                                      % (entry["url"], hashlib.sha256(data).hexdigest(), expected))
                text = data.decode("utf-8")
        if text is None:
            text = self._metadata_from_ranges(entry)
        if cached:
            os.makedirs(self.cache_dir, exist_ok=True)
            tmp = cached + ".tmp%d" % os.getpid()
            with open(tmp, "w") as handle:
                handle.write(text)
            os.replace(tmp, cached)
        return text

    def _metadata_from_ranges(self, entry):
        size = entry.get("size")
        if not size:
            _data, _ctype, _status = self._get(entry["url"], {"Range": "bytes=0-0"})
            raise IndexError_("%s: the index gives no size and no .metadata file; cannot read the wheel's "
                              "metadata without downloading it" % entry["url"])
        reader = RangeReader(self, entry["url"], size)
        try:
            with zipfile.ZipFile(reader) as archive:
                names = [n for n in archive.namelist()
                         if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
                if len(names) != 1:
                    raise IndexError_("%s: %d .dist-info/METADATA members" % (entry["url"], len(names)))
                return archive.read(names[0]).decode("utf-8")
        except zipfile.BadZipfile as exc:
            raise IndexError_("%s: not a zip archive (%s)" % (entry["url"], exc))


class RangeReader(io.RawIOBase):
    """A read-only, seekable view of a remote file through HTTP range requests, in blocks."""

    BLOCK = 1 << 18

    def __init__(self, index, url, size):
        io.RawIOBase.__init__(self)
        self._index = index
        self._url = url
        self._size = size
        self._pos = 0
        self._blocks = {}

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self._pos

    def seek(self, offset, whence=0):
        base = {0: 0, 1: self._pos, 2: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def _block(self, number):
        if number not in self._blocks:
            start = number * self.BLOCK
            end = min(self._size, start + self.BLOCK) - 1
            data, _ctype, status = self._index._get(self._url, {"Range": "bytes=%d-%d" % (start, end)})
            if status != 206 and len(data) != end - start + 1:
                raise IndexError_("%s: the server ignored a range request (HTTP %s)" % (self._url, status))
            self._blocks[number] = data
        return self._blocks[number]

    def readinto(self, buf):
        want = len(buf)
        got = 0
        while got < want and self._pos < self._size:
            number, offset = divmod(self._pos, self.BLOCK)
            chunk = self._block(number)[offset:offset + want - got]
            if not chunk:
                break
            buf[got:got + len(chunk)] = chunk
            got += len(chunk)
            self._pos += len(chunk)
        return got


# ----------------------------------------------------------------- requirements


def parse_metadata(text):
    """Version, Requires-Python and Requires-Dist lines of a METADATA text."""
    msg = email.parser.Parser().parsestr(text, headersonly=True)
    return {"version": msg.get("Version"), "requires_python": msg.get("Requires-Python"),
            "requires_dist": msg.get_all("Requires-Dist") or []}


def marker_env(machine, python):
    """The PEP 508 environment of a Linux host with ``machine`` and CPython ``python`` ('3.11';
    'py3' for a pure wheel, evaluated as the stack's newest supported Python)."""
    short = "3.12" if python == "py3" else python.rstrip("t")
    return {"platform_system": "Linux", "sys_platform": "linux", "os_name": "posix",
            "platform_machine": machine, "python_version": short, "python_full_version": short + ".0",
            "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}


def requirements_for(requires_dist, machine, python):
    """{name: specifier string} of the requirements that apply on that platform (no extras)."""
    if not HAS_PACKAGING:
        raise IndexError_("the 'packaging' library is needed to evaluate Requires-Dist markers")
    env = marker_env(machine, python)
    out = {}
    for line in requires_dist:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        out[normalize(req.name)] = str(req.specifier)
    return out


def spec_allows(spec, version):
    """Whether ``version`` satisfies the specifier string ``spec`` (empty: anything)."""
    if not spec:
        return True
    return SpecifierSet(spec).contains(version, prereleases=True)


def exact_pin(spec):
    """'2.14.1' for '==2.14.1', None for anything else."""
    match = re.match(r"^==\s*([^,*]+)$", spec or "")
    return match.group(1).strip() if match else None
