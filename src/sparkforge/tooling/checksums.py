# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The published sha256 of the files sparkforge downloads by a pinned version, read from where
they are published, compared with the manifest's pins, and written back into the data file.

Plain functions (no Ansible, no network): ``sparkforge versions --checksums`` fetches the
documents and calls these; the unit tests call them directly.

* cuda-keyring: the ``Packages`` index of each CUDA repository directory
  (``<sparkforge_cuda_repo_url>/<distro>/<arch>/Packages[.gz]``) lists the SHA256 of
  ``cuda-keyring_<version>_all.deb``; that index is what apt itself trusts once the key is in.
* cuSPARSELt: NVIDIA's ``redistrib_<version>.json`` lists a sha256 per file it names
  (``relative_path``); the project downloads the local-repo ``.deb``, so only an entry naming
  that file counts (NVIDIA's lists name the tarball archives, so none is found there today).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.sparkforge.stack.plugins.module_utils.cuda.cusparselt import (
    deb_filename,
    parse_control_stanzas,
)

HEX64 = re.compile(r"^[0-9a-f]{64}$")
_TEXT = (str, type(u""))
KEYRING_VARIABLE = "sparkforge_cuda_keyring_sha256_map"
CUSPARSELT_VARIABLE = "sparkforge_cusparselt_sha256"


class ChecksumError(Exception):
    """A published document that cannot be read as what it should be."""


# --------------------------------------------------------------------------- published documents


def keyring_from_packages(text, version):
    """SHA256 of ``cuda-keyring`` ``version`` in a Packages index; None when the index lists no such
    version. Raises when the stanza is there but its SHA256 is not a digest."""
    for stanza in parse_control_stanzas(text):
        if stanza.get("Package") == "cuda-keyring" and stanza.get("Version") == version:
            digest = (stanza.get("SHA256") or "").strip().lower()
            if not HEX64.match(digest):
                raise ChecksumError("the Packages stanza of cuda-keyring %s has SHA256 %r, not 64 hexadecimal digits"
                                    % (version, stanza.get("SHA256")))
            return digest
    return None


def keyring_versions(text):
    """Every cuda-keyring version a Packages index lists (to say what it has when ours is absent)."""
    return [s.get("Version") for s in parse_control_stanzas(text) if s.get("Package") == "cuda-keyring"]


def redistrib_files(text):
    """{file name: sha256} of every file a ``redistrib_<version>.json`` names (any depth)."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ChecksumError("not JSON: %s" % exc)
    found = {}

    def walk(node):
        if isinstance(node, dict):
            path, digest = node.get("relative_path"), node.get("sha256")
            if isinstance(path, _TEXT) and isinstance(digest, _TEXT):
                if not HEX64.match(digest.lower()):
                    raise ChecksumError("%s has sha256 %r, not 64 hexadecimal digits" % (path, digest))
                found[path.rsplit("/", 1)[-1]] = digest.lower()
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(data)
    return found


def cusparselt_from_redistrib(text, version, distro, deb_arch):
    """sha256 the redistrib JSON gives for the local-repo .deb of (version, distro, arch), or None."""
    return redistrib_files(text).get(deb_filename(version, distro, deb_arch))


# --------------------------------------------------------------------------- comparison


def leaf(data, path):
    node = data
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node if isinstance(node, str) else None


def compare(data, published):
    """Rows for every published digest: {path, data, published, status} with status ``same``,
    ``added`` (the data has no pin) or ``changed`` (the data pins another digest: a published file
    changed, or the pin is wrong; never overwritten silently)."""
    rows = []
    for path, digest in published:
        held = leaf(data, path)
        status = "added" if held is None else ("same" if held.lower() == digest else "changed")
        rows.append({"path": list(path), "data": held, "published": digest, "status": status})
    return rows


# --------------------------------------------------------------------------- the data file


_KEY = re.compile(r'^(?P<indent> *)(?P<quote>["\']?)(?P<key>[^"\':#\s][^"\':#]*?)(?P=quote):(?P<rest>.*)$')


def _key_of(line):
    match = _KEY.match(line)
    if not match or line.lstrip().startswith("#") or line.lstrip().startswith("- "):
        return None
    return match.group("key"), len(match.group("indent")), match.group("rest")


def _block_end(lines, start, indent):
    """Index after the last line of the block that starts at ``start`` (a key at ``indent``)."""
    end = start + 1
    last = start + 1
    while end < len(lines):
        line = lines[end]
        if line.strip() and not line.lstrip().startswith("#"):
            if len(line) - len(line.lstrip(" ")) <= indent:
                break
            last = end + 1
        end += 1
    return last


def _quoted(key):
    return '"%s"' % key if re.match(r"^[0-9.\-]+$", key) else key


def set_leaf(text, variable, path, value, source):
    """``text`` with ``variable[path[0]]...[path[-1]] = value``, a ``# source: ...`` line above the leaf;
    everything else (comments, order, other entries) kept. Missing levels are appended to their parent;
    ``variable: {}`` becomes a block."""
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if _key_of(line) and _key_of(line)[0] == variable
                  and _key_of(line)[1] == 0), None)
    if start is None:
        raise ChecksumError("the data file has no top-level %s" % variable)
    if _key_of(lines[start])[2].strip() in ("{}", ""):
        lines[start] = "%s:" % variable
    parent, indent = start, 0
    for depth, key in enumerate(path):
        child_indent = indent + 2
        end = _block_end(lines, parent, indent)
        found = None
        for i in range(parent + 1, end):
            parsed = _key_of(lines[i])
            if parsed and parsed[1] == child_indent and parsed[0] == key:
                found = i
                break
        last = depth == len(path) - 1
        pad = " " * child_indent
        if found is None:
            new = [pad + "# source: " + source, "%s%s: %s" % (pad, _quoted(key), value)] if last \
                else ["%s%s:" % (pad, _quoted(key))]
            lines[end:end] = new
            found = end + len(new) - 1
        elif last:
            lines[found] = "%s%s: %s" % (pad, lines[found].strip().split(":", 1)[0], value)
            if found > 0 and lines[found - 1].strip().startswith("# source:"):
                lines[found - 1] = pad + "# source: " + source
            else:
                lines[found:found] = [pad + "# source: " + source]
                found += 1
        parent, indent = found, child_indent
    return "\n".join(lines)
