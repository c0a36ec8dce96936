"""``sparkforge versions --checksums``: the sha256 pins of checksums.yml against their published sources.

Reads over https only (the server's certificate verified against the system's CAs, or SSL_CERT_FILE;
http_proxy/https_proxy/no_proxy honoured by urllib) from the URLs the roles download from, so a mirror
answers for NVIDIA. The parsing, comparison and writing are sparkforge/tooling/checksums.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import gzip
import json
import os
import ssl


try:
    from urllib.error import HTTPError, URLError
    from urllib.request import urlopen
except ImportError:  # pragma: no cover - Python 2
    from urllib2 import HTTPError, URLError, urlopen

from sparkforge.collection import MANIFEST_REL, importable, manifest_reader

DATA_FILE = "checksums.yml"


class Unreadable(Exception):
    """A published document that could not be fetched (not a 404: the network, TLS, the server)."""


def _module(project_root):
    # tooling.checksums reads .deb names and Packages stanzas with the collection's module_utils/cuda/cusparselt.py
    # (the cusparselt module uses them too, so they stay there): the project's collection, through the one door.
    importable(project_root)
    from sparkforge.tooling import checksums
    return checksums


def _fetch(url, timeout):
    """The body of ``url``, or None on HTTP 404/410; raises Unreadable otherwise."""
    try:
        response = urlopen(url, timeout=timeout, context=ssl.create_default_context())
        try:
            if not response.geturl().startswith("https://"):
                # A redirect to plain http would drop the proof TLS gives.
                raise Unreadable("%s redirected to %s, not https" % (url, response.geturl()))
            return response.read()
        finally:
            response.close()
    except HTTPError as exc:
        if exc.code in (404, 410):
            return None
        raise Unreadable("%s: HTTP %s %s" % (url, exc.code, exc.reason))
    except (URLError, ssl.SSLError, OSError) as exc:
        raise Unreadable("%s: %s" % (url, getattr(exc, "reason", exc)))


def _base(url):
    return url.rstrip("/") + "/"


def _published_keyrings(cs, data, repo_url, timeout, notes):
    """[(path, digest, source)] from the Packages index of every repository directory the maps name."""
    out = []
    versions = [data["sparkforge_cuda_keyring_version"]] + sorted(
        v for v in (data.get(cs.KEYRING_VARIABLE) or {}) if v != data["sparkforge_cuda_keyring_version"])
    distros = sorted(set((data.get("sparkforge_cuda_distro_map") or {}).values()))
    arches = sorted(set((data.get("sparkforge_cuda_repo_arch_map") or {}).values()))
    for distro in distros:
        for arch in arches:
            directory = "%s%s/%s/" % (_base(repo_url), distro, arch)
            body, name = _fetch(directory + "Packages.gz", timeout), "Packages.gz"
            if body is not None:
                try:
                    body = gzip.decompress(body)
                except (OSError, EOFError) as exc:
                    raise Unreadable("%sPackages.gz: not gzip (%s)" % (directory, exc))
            else:
                body, name = _fetch(directory + "Packages", timeout), "Packages"
            if body is None:
                notes.append("%s has no Packages index (HTTP 404): no cuda-keyring there" % directory)
                continue
            text = body.decode("utf-8", "replace")
            for version in versions:
                try:
                    digest = cs.keyring_from_packages(text, version)
                except cs.ChecksumError as exc:
                    raise Unreadable("%s%s: %s" % (directory, name, exc))
                if digest is None:
                    notes.append("%s%s lists no cuda-keyring %s (it lists: %s)" % (
                        directory, name, version, ", ".join(cs.keyring_versions(text)) or "none"))
                    continue
                out.append(((version, distro, arch), digest, "%s of %s" % (name, directory)))
    return out


def _published_cusparselt(cs, data, redist_url, timeout, notes):
    """[(path, digest, source)] for the local-repo .debs a redistrib_<version>.json names."""
    from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import cusparselt
    out = []
    versions = [data["sparkforge_cusparselt_version"]] + sorted(
        v for v in (data.get(cs.CUSPARSELT_VARIABLE) or {}) if v != data["sparkforge_cusparselt_version"])
    distros = sorted(set((data.get("sparkforge_cuda_distro_map") or {}).values()) & set(cusparselt.SUPPORTED_DISTROS))
    arches = sorted(set((data.get("sparkforge_cuda_deb_arch_map") or {}).values()))
    for version in versions:
        url = "%sredistrib_%s.json" % (_base(redist_url), version)
        body = _fetch(url, timeout)
        if body is None:
            notes.append("%s does not exist (HTTP 404): no published cuSPARSELt %s digests" % (url, version))
            continue
        try:
            files = cs.redistrib_files(body.decode("utf-8", "replace"))
        except cs.ChecksumError as exc:
            raise Unreadable("%s: %s" % (url, exc))
        missing = []
        for distro in distros:
            for arch in arches:
                name = cusparselt.deb_filename(version, distro, arch)
                if name in files:
                    out.append(((version, distro, arch), files[name], url))
                else:
                    missing.append(name)
        if missing:
            notes.append("%s names no local-repo .deb of cuSPARSELt %s (%s; it names %d other files, the "
                         "archives): these stay unpinned, https only" % (url, version, ", ".join(missing), len(files)))
    return out


def run(args, project_root, stdout, stderr):
    """0 the pins agree, 1 pins missing with --check, 3 a published digest differs from a pin,
    4 bad input, 5 a source unreadable."""
    if not args.timeout > 0:
        stderr.write("sparkforge versions: --timeout %r is not a number of seconds above 0\n" % (args.timeout,))
        return 4
    manifest_dir = args.manifest_dir or os.path.join(project_root, MANIFEST_REL)
    path = os.path.join(manifest_dir, DATA_FILE)
    if not os.path.isfile(path):
        stderr.write("sparkforge versions: no %s in %s\n" % (DATA_FILE, manifest_dir))
        return 4
    cs = _module(project_root)
    reader = manifest_reader(project_root)
    if reader is None:
        stderr.write("sparkforge versions: no sparkforge collection in %s to read the manifest with\n" % project_root)
        return 4
    try:
        data = reader.load(manifest_dir)
    except reader.ManifestError as exc:
        stderr.write("sparkforge versions: %s\n" % exc)
        return 4
    repo_url = args.cuda_repo_url or data.get("sparkforge_cuda_repo_url") or ""
    redist_url = args.cusparselt_redist_url or data.get("sparkforge_cusparselt_redist_url") or ""
    for option, value in (("--cuda-repo-url (sparkforge_cuda_repo_url)", repo_url),
                          ("--cusparselt-redist-url (sparkforge_cusparselt_redist_url)", redist_url)):
        if not value.startswith("https://"):
            stderr.write("sparkforge versions: %s is %r, not an https URL: the published checksums are read over "
                         "TLS only\n" % (option, value))
            return 4
    notes = []
    try:
        keyrings = _published_keyrings(cs, data, repo_url, args.timeout, notes)
        debs = _published_cusparselt(cs, data, redist_url, args.timeout, notes)
    except Unreadable as exc:
        stderr.write("sparkforge versions: cannot read a published source: %s\n" % exc)
        return 5
    rows = []
    for variable, found in ((cs.KEYRING_VARIABLE, keyrings), (cs.CUSPARSELT_VARIABLE, debs)):
        compared = cs.compare(data.get(variable) or {}, [(p, d) for p, d, _s in found])
        for row, (_p, _d, source) in zip(compared, found):
            row.update(variable=variable, source=source)
            rows.append(row)
    changed = [r for r in rows if r["status"] == "changed"]
    added = [r for r in rows if r["status"] == "added"]
    if args.json:
        stdout.write(json.dumps({"rows": rows, "notes": notes}, indent=1, sort_keys=True) + "\n")
    else:
        _print(rows, notes, stdout)
    for row in changed:
        stderr.write("CHANGED: %s%s is pinned to %s, but %s now says %s. A published file should never change: find "
                     "out why before touching the pin (it is not overwritten)\n"
                     % (row["variable"], "".join("[%r]" % k for k in row["path"]), row["data"], row["source"],
                        row["published"]))
    if args.write and added:
        with open(path) as handle:
            text = handle.read()
        today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
        for row in added:
            text = cs.set_leaf(text, row["variable"], row["path"], row["published"],
                               "%s, read %s" % (row["source"], today))
        with open(path + ".tmp", "w") as handle:
            handle.write(text)
        os.replace(path + ".tmp", path)
        # With --json, stdout stays one JSON document.
        (stderr if args.json else stdout).write("wrote %d pin%s to %s\n" % (len(added), "" if len(added) == 1 else "s",
                                                                          path))
    if changed:
        return 3
    if args.check and added:
        return 1
    return 0


def _print(rows, notes, out):
    out.write("%-8s %-40s %-24s %s\n" % ("status", "variable", "pin", "published sha256 (source)"))
    for row in rows:
        out.write("%-8s %-40s %-24s %s (%s)\n" % (row["status"], row["variable"], "/".join(row["path"]),
                                                 row["published"], row["source"]))
    if notes:
        out.write("\nnotes:\n")
        for note in notes:
            out.write("  %s\n" % note)
    added = sum(1 for r in rows if r["status"] == "added")
    if added:
        out.write("\n%d published digest%s not pinned yet (--write adds them)\n" % (added, "" if added == 1 else "s"))
    elif not any(r["status"] == "changed" for r in rows):
        out.write("\nevery pin agrees with its published source\n")
