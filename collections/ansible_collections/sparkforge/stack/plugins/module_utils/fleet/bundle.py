# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Kept whole: one format, made (Maker) and read (verify, match, overrides) side by side so both change
# together; the Debian index it reads (versions, Packages, apt's closure) is apt_index.py.
"""The offline bundle: everything an inventory's plans fetch, in one directory with a manifest.

Made on a machine with network (``Maker``), used on the air-gapped side (``verify`` on the
controller, ``match`` per host). Layout (docs/design/offline-bundle.md):

  manifest.json                      every file: path, sha256, size, origin, kind, target
  apt/<distro>/<arch>/               NVIDIA's CUDA repository index as published (InRelease, Release,
                                     Release.gpg, Packages*) and the planned .debs with their
                                     dependencies from that index, plus cuda-keyring
  cusparselt/<installer>.deb         the cuSPARSELt local-repo installers
  git/<name>.git                     bare repositories with the pinned refs (depth 1), submodules too
  wheels/<cpXY>-<machine>/           wheels for one Python and CPU, with a PEP 503 index in simple/

The signed apt index files are copied unchanged, so apt on the host still checks NVIDIA's signature
with cuda-keyring's key. The distribution's own packages are not bundled: a site mirror serves them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import gzip
import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import tempfile

try:
    from urllib.parse import urljoin, urlparse
except ImportError:  # pragma: no cover - Python 2
    from urlparse import urljoin, urlparse

from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import (
    atomic_write_bytes,
    atomic_write_text,
    makedirs,
    sha256_file,
)
from ansible_collections.sparkforge.stack.plugins.module_utils.fleet.apt_index import (
    AptIndexError,
    apt_closure,
    parse_packages,
)
from ansible_collections.sparkforge.stack.plugins.module_utils.packages.pip_env import isolated_environ
from ansible_collections.sparkforge.stack.plugins.module_utils._common.clock import utc_now
from ansible_collections.sparkforge.stack.plugins.module_utils._common import run_env

FORMAT = 1
MANIFEST = "manifest.json"
# Signed index files of a flat apt repository; only those the server has are kept.
APT_INDEX_FILES = ("InRelease", "Release", "Release.gpg", "Packages", "Packages.gz", "Packages.xz")
MACHINES = {"x86_64": "x86_64", "aarch64": "aarch64", "amd64": "x86_64", "arm64": "aarch64"}
GIT_ENV = {"GIT_TERMINAL_PROMPT": "0"}


class BundleError(Exception):
    """Making or using a bundle cannot go on; the message says what and where."""


# ---------------------------------------------------------------------------- targets and names

def target_of(host):
    """The bundle target of a host: what picks its apt repository, cuSPARSELt installer and wheels.

    ``host``: cuda_distro, cuda_repo_arch, deb_arch, architecture, python_version (X.Y or X.Y.Z)."""
    missing = [k for k in ("cuda_distro", "cuda_repo_arch", "deb_arch", "architecture", "python_version")
               if not host.get(k)]
    if missing:
        raise BundleError("the host's target lacks %s" % ", ".join(missing))
    python = ".".join(str(host["python_version"]).split(".")[:2])
    machine = MACHINES.get(host["architecture"], host["architecture"])
    return {"distro": host["cuda_distro"], "repo_arch": host["cuda_repo_arch"], "deb_arch": host["deb_arch"],
            "python": python, "machine": machine,
            "id": "%s-%s-py%s" % (host["cuda_distro"], host["deb_arch"], python)}


def wheel_dir_name(target):
    return "cp%s-%s" % (target["python"].replace(".", ""), target["machine"])


def git_name(url):
    """The mirror's directory for a git URL: readable and unique (host and path, a short hash)."""
    parsed = urlparse(url)
    stem = (parsed.netloc + parsed.path) if parsed.scheme else url
    stem = re.sub(r"\.git/?$", "", stem.strip("/"))
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", stem)[-60:].strip("_.") or "repo"
    return "%s-%s.git" % (readable, hashlib.sha256(url.encode("utf-8")).hexdigest()[:8])


def sources_key(kind, url):
    return "%s %s" % (kind, url.rstrip("/"))


# ---------------------------------------------------------------------------- making a bundle

def _sha256_bytes(data):
    return hashlib.sha256(data).hexdigest()


class Maker:
    """Fills a bundle directory and its manifest. ``fetch(url) -> bytes`` reads a URL (TLS
    verified, proxies honoured); ``log(text)`` records progress. Files whose recorded sha256 already
    matches are not fetched again, so a rerun only fills what is missing."""

    def __init__(self, root, fetch, log=None, check_mode=False):
        self.root = os.path.abspath(root)
        self.fetch = fetch
        self.log = log or (lambda text: None)
        self.check_mode = check_mode
        self.old = load_manifest(self.root) if os.path.isfile(os.path.join(self.root, MANIFEST)) else None
        old_items = (self.old or {}).get("items") or []
        self.known = dict((i["path"], i) for i in old_items)
        self.items = {}
        self.sources = {}
        self.targets = {}
        self.fetched = []

    # files -------------------------------------------------------------------------------------
    def _have(self, rel, sha256=None):
        path = os.path.join(self.root, rel)
        known = self.known.get(rel)
        if not os.path.isfile(path):
            return None
        size = os.path.getsize(path)
        if known and known["size"] == size and (sha256 is None or known["sha256"] == sha256):
            if sha256_file(path) == known["sha256"]:
                return known
        if sha256 and sha256_file(path) == sha256:
            return {"sha256": sha256, "size": size}
        return None

    def record(self, rel, origin, kind, target, sha256=None):
        path = os.path.join(self.root, rel)
        item = {"path": rel, "sha256": sha256 or sha256_file(path), "size": os.path.getsize(path),
                "origin": origin, "kind": kind, "target": target}
        self.items[rel] = item
        return item

    def write(self, rel, data):
        atomic_write_bytes(os.path.join(self.root, rel), data)

    def file(self, url, rel, kind, target, sha256=None):
        """Bring ``url`` to ``rel``; with ``sha256``, refuse anything else."""
        have = self._have(rel, sha256)
        if have:
            return self.record(rel, url, kind, target, have["sha256"])
        if self.check_mode:
            self.fetched.append(rel)
            return None
        data = self.fetch(url)
        got = _sha256_bytes(data)
        if sha256 and got != sha256:
            raise BundleError("%s has sha256 %s, expected %s: not written" % (url, got, sha256))
        self.write(rel, data)
        self.fetched.append(rel)
        self.log("fetched %s (%d bytes)" % (url, len(data)))
        return self.record(rel, url, kind, target, got)

    def source(self, kind, url, target, path, variable, **extra):
        key = sources_key(kind, url)
        entry = self.sources.setdefault(key, {"kind": kind, "url": url, "variable": variable, "targets": {}})
        entry["targets"][target] = dict(extra, path=path)
        return entry

    # apt ---------------------------------------------------------------------------------------
    def apt(self, base, target, packages, keyring=None):
        """NVIDIA's flat CUDA repository at ``base`` (<repo url>/<distro>/<arch>/) for ``target``: its
        signed index files, the ``packages`` (name=version-glob) with their dependencies from that
        index, and cuda-keyring (``keyring``: {version, sha256})."""
        base = base.rstrip("/") + "/"
        rel_dir = "apt/%s/%s" % (target["distro"], target["repo_arch"])
        indexes = {}
        for name in APT_INDEX_FILES:
            try:
                data = self.fetch(base + name)
            except BundleError:
                continue
            indexes[name] = data
        if "Packages" not in indexes and "Packages.gz" not in indexes:
            raise BundleError("%s has no Packages or Packages.gz index" % base)
        if "InRelease" not in indexes and "Release.gpg" not in indexes:
            raise BundleError("%s has neither InRelease nor Release.gpg: apt could not check it" % base)
        text = (indexes["Packages"] if "Packages" in indexes else gzip.decompress(indexes["Packages.gz"]))
        text = text.decode("utf-8")
        _check_release_hashes(base, indexes)
        for name, data in sorted(indexes.items()):
            rel = "%s/%s" % (rel_dir, name)
            if not self.check_mode and self._have(rel, _sha256_bytes(data)) is None:
                self.write(rel, data)
            if not self.check_mode:
                self.record(rel, base + name, "apt-index", target["id"])
        wanted = list(packages) + (["cuda-keyring=%s" % keyring["version"]] if keyring else [])
        try:
            chosen = apt_closure(parse_packages(text), wanted, target["deb_arch"])
        except AptIndexError as exc:
            raise BundleError(str(exc))
        for st in chosen:
            filename = os.path.normpath(st["Filename"]).lstrip("./")
            if filename.startswith("..") or os.path.isabs(st["Filename"]):
                raise BundleError("%s: Packages names a file outside the repository: %s" % (base, st["Filename"]))
            sha = st.get("SHA256")
            if not sha:
                raise BundleError("%s: Packages has no SHA256 for %s" % (base, st["Package"]))
            if keyring and st["Package"] == "cuda-keyring" and keyring.get("sha256") and keyring["sha256"] != sha:
                raise BundleError("%s: cuda-keyring %s has sha256 %s in Packages, the pin is %s" % (
                    base, st["Version"], sha, keyring["sha256"]))
            self.file(base + st["Filename"].lstrip("./"), "%s/%s" % (rel_dir, filename), "deb", target["id"], sha)
        self.source("http", base, target["id"], rel_dir, "cuda_repo_url")
        if keyring:
            self.source("http", base + "cuda-keyring_%s_all.deb" % keyring["version"], target["id"],
                        "%s/cuda-keyring_%s_all.deb" % (rel_dir, keyring["version"]), "cuda_repo_url")

    # cuSPARSELt ----------------------------------------------------------------------------------
    def cusparselt(self, url, target, sha256):
        name = url.rstrip("/").rsplit("/", 1)[-1]
        rel = "cusparselt/%s" % name
        self.file(url, rel, "cusparselt-installer", target["id"], sha256 or None)
        self.source("http", url, target["id"], rel, "cusparselt_base_url")

    # git -----------------------------------------------------------------------------------------
    def git(self, url, ref, variable, run, submodules=True, commit=None):
        """A bare mirror of ``url`` holding ``ref`` (tag or branch, as ls-remote names it) or
        ``commit`` at depth 1, and each submodule's pinned commit, recursively. Returns the commit."""
        done = {}
        top = self._git_one(url, ref, commit, run, submodules, done)
        self.source("git", url, "any", "git/%s" % git_name(url), variable, ref=ref or top, commit=top,
                    mirrors=dict((u, "git/%s" % git_name(u)) for u in sorted(done) if u != url))
        return top

    def _git_one(self, url, ref, commit, run, submodules, done):
        name = git_name(url)
        rel = "git/%s" % name
        dest = os.path.join(self.root, rel)
        if self.check_mode:
            done[url] = commit or ref
            return commit or ref
        if not os.path.isdir(dest):
            makedirs(os.path.dirname(dest))
            run(["git", "init", "-q", "--bare", "--template=", dest])
        wanted = []
        if ref and ref != commit:
            # The ref itself, so `git ls-remote <mirror> <ref>` resolves it as upstream does.
            full = ref if ref.startswith("refs/") else None
            if full is None:
                out = run(["git", "ls-remote", url, ref, "refs/tags/%s" % ref, "refs/heads/%s" % ref])
                names = [line.split()[1] for line in out.splitlines() if line.strip()]
                full = next((n for n in names if n in ("refs/tags/%s" % ref, "refs/heads/%s" % ref)), None)
                if full is None:
                    raise BundleError("%s has no ref %s" % (url, ref))
            wanted.append("+%s:%s" % (full, full))
        if commit:
            wanted.append(commit)
        have = run(["git", "-C", dest, "rev-parse", "--verify", "-q", (commit or ref) + "^{commit}"], check=False)
        if not have:
            run(["git", "-C", dest, "fetch", "-q", "--depth", "1", "--no-tags", url] + wanted)
            self.fetched.append(rel)
            self.log("fetched %s %s at depth 1" % (url, commit or ref))
        resolved = run(["git", "-C", dest, "rev-parse", "--verify", (commit or ref) + "^{commit}"]).strip()
        # A ref for the commit: a fetch by commit from this mirror then works with any git, without
        # uploadpack.allowReachableSHA1InWant on the serving side.
        run(["git", "-C", dest, "update-ref", "refs/sparkforge/%s" % resolved, resolved])
        done[url] = resolved
        if submodules:
            for path, sub_url, sub_commit in submodule_pins(dest, resolved, url, run):
                if sub_url not in done:
                    self._git_one(sub_url, None, sub_commit, run, True, done)
        run(["git", "-C", dest, "repack", "-a", "-d", "-q"])
        run(["git", "-C", dest, "prune-packed"])
        if os.path.exists(os.path.join(dest, "FETCH_HEAD")):
            os.unlink(os.path.join(dest, "FETCH_HEAD"))  # names the origin; not part of the mirror
        for base, dummy, files in os.walk(dest):
            for fname in files:
                full = os.path.join(base, fname)
                self.record(os.path.relpath(full, self.root), url, "git", "any")
        return resolved

    def commit_of(self, url):
        """The commit the mirror of ``url`` was made for (None before it is)."""
        entry = self.sources.get(sources_key("git", url))
        return entry and entry["targets"]["any"].get("commit")

    def git_file(self, url, commit, path, run):
        """A file of a mirrored commit (Triton's cmake/llvm-hash.txt), or None."""
        dest = os.path.join(self.root, "git", git_name(url))
        out = run(["git", "-C", dest, "show", "%s:%s" % (commit, path)], check=False)
        return out.strip() if out else None

    # wheels --------------------------------------------------------------------------------------
    def wheels(self, target, requirements, index_url, extra_index_urls, run, python, constraints=(),
               variable="", key=None, **extra):
        """``pip download`` of ``requirements`` and their dependencies for the target's Python and
        CPU into wheels/<cpXY>-<machine>/, then a PEP 503 index of that directory."""
        rel = "wheels/%s" % wheel_dir_name(target)
        dest = os.path.join(self.root, rel)
        if not self.check_mode:
            makedirs(dest)
            cmd = [python, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--only-binary=:all:",
                   "--platform", "manylinux2014_%s" % target["machine"],
                   "--platform", "manylinux_2_28_%s" % target["machine"],
                   "--platform", "linux_%s" % target["machine"],
                   "--python-version", target["python"], "--implementation", "cp",
                   "--abi", "cp%s" % target["python"].replace(".", ""), "--abi", "abi3", "--abi", "none",
                   "-d", dest]
            if index_url:
                cmd += ["--index-url", index_url]
            for extra in extra_index_urls or []:
                cmd += ["--extra-index-url", extra]
            scratch = None
            if constraints:
                # Outside the bundle: every file inside it is listed in the manifest.
                scratch = tempfile.mkdtemp(prefix="sparkforge-constraints-")
                path = os.path.join(scratch, "constraints-%s.txt" % wheel_dir_name(target))
                atomic_write_text(path, "".join("%s\n" % c for c in constraints))
                cmd += ["-c", path]
            try:
                if index_url:
                    # The plan names the index: pip's own configuration (extra indexes, find-links,
                    # constraints) must not add to it.
                    run(cmd + list(requirements), env=isolated_environ(os.environ))
                else:
                    run(cmd + list(requirements))
            finally:
                if scratch:
                    shutil.rmtree(scratch, ignore_errors=True)
        self.source("index", key or index_url or "(pip's configuration)", target["id"], rel + "/simple", variable,
                    requirements=sorted(requirements), **extra)

    def wheel_index(self):
        """Record every wheel and write simple/<project>/index.html for each wheels/ directory."""
        top = os.path.join(self.root, "wheels")
        if self.check_mode or not os.path.isdir(top):
            return
        for tag in sorted(os.listdir(top)):
            directory = os.path.join(top, tag)
            files = sorted(f for f in os.listdir(directory) if f.endswith((".whl", ".tar.gz", ".zip")))
            projects = {}
            for fname in files:
                item = self.record("wheels/%s/%s" % (tag, fname), "pip download", "wheel", tag)
                projects.setdefault(_project_of(fname), []).append((fname, item["sha256"]))
            simple = os.path.join(directory, "simple")
            if os.path.isdir(simple):
                shutil.rmtree(simple)
            for project, entries in sorted(projects.items()):
                links = "".join('<a href="../../%s#sha256=%s">%s</a><br/>\n' % (html.escape(f), sha, html.escape(f))
                                for f, sha in entries)
                page = "<!DOCTYPE html>\n<html><body>\n%s</body></html>\n" % links
                atomic_write_text(os.path.join(simple, project, "index.html"), page)
            root_page = "".join('<a href="%s/">%s</a><br/>\n' % (p, p) for p in sorted(projects))
            atomic_write_text(os.path.join(simple, "index.html"),
                              "<!DOCTYPE html>\n<html><body>\n%s</body></html>\n" % root_page)
            for base, dummy, names in os.walk(simple):
                for fname in names:
                    full = os.path.join(base, fname)
                    self.record(os.path.relpath(full, self.root), "index of wheels/%s" % tag, "wheel-index", tag)

    # manifest ------------------------------------------------------------------------------------
    def finish(self, targets, plans):
        manifest = {
            "format": FORMAT,
            "made": utc_now(),
            "targets": sorted(targets.values(), key=lambda t: t["id"]),
            "plans": plans,
            "sources": [self.sources[k] for k in sorted(self.sources)],
            "items": [self.items[k] for k in sorted(self.items)],
        }
        if not self.check_mode:
            self.prune()
            atomic_write_text(os.path.join(self.root, MANIFEST), json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        return manifest

    def prune(self):
        """Remove what an earlier run left in the maker's own directories and this run did not list (a
        package no longer planned, a half-written .part- file): the manifest must list every file, or
        preflight refuses the bundle. Files elsewhere in the directory are the user's and stay (and are
        refused as extra)."""
        for bad in extras(self.root, {"items": list(self.items.values())}):
            rel = bad["path"]
            name = os.path.basename(rel)
            if rel.split(os.sep)[0] in ("apt", "cusparselt", "git", "wheels") or name.startswith(
                    (".part-", ".constraints-")):
                os.unlink(os.path.join(self.root, rel))
                self.log("removed %s: not part of this bundle" % rel)


def _project_of(filename):
    base = filename[:-4] if filename.endswith(".whl") else re.sub(r"\.(tar\.gz|zip)$", "", filename)
    name = base.split("-")[0] if filename.endswith(".whl") else base.rsplit("-", 1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def _check_release_hashes(base, indexes):
    """The Packages files must be the ones Release names (the signature itself is apt's job on the host)."""
    release = indexes.get("InRelease") or indexes.get("Release")
    if not release:
        return
    text = release.decode("utf-8", "replace")
    section = re.search(r"^SHA256:\n((?: .*\n?)+)", text, re.M)
    if not section:
        return
    listed = dict((parts[2], parts[0]) for parts in (l.split() for l in section.group(1).splitlines()) if len(parts) == 3)
    for name in ("Packages", "Packages.gz", "Packages.xz"):
        if name in indexes and name in listed and listed[name] != _sha256_bytes(indexes[name]):
            raise BundleError("%s%s does not match the sha256 its Release lists" % (base, name))


def submodule_pins(repo, commit, url, run):
    """[(path, url, commit)] of the submodules ``commit`` pins (.gitmodules and the gitlinks)."""
    text = run(["git", "-C", repo, "show", "%s:.gitmodules" % commit], check=False)
    if not text:
        return []
    with tempfile.NamedTemporaryFile("w", suffix=".gitmodules", delete=False) as handle:
        handle.write(text + "\n")
        conf = handle.name
    try:
        out = run(["git", "config", "-f", conf, "--get-regexp", r"^submodule\..*\.(path|url)$"])
    finally:
        os.unlink(conf)
    entries = {}
    for line in out.splitlines():
        key, value = line.split(" ", 1)
        name, field = key[len("submodule."):].rsplit(".", 1)
        entries.setdefault(name, {})[field] = value
    links = {}
    for line in run(["git", "-C", repo, "ls-tree", "-r", commit]).splitlines():
        meta, path = line.split("\t", 1)
        mode, kind, sha = meta.split()
        if kind == "commit":
            links[path] = sha
    pins = []
    for entry in entries.values():
        path, sub = entry.get("path"), entry.get("url")
        if path in links and sub:
            if sub.startswith(("./", "../")):
                sub = urljoin(url.rstrip("/") + "/", sub)
            pins.append((path, sub, links[path]))
    return sorted(pins)


def runner(extra=None, timeout=3600):
    """run(cmd, check=True) -> stdout, raising BundleError with stderr's tail on failure."""
    def run(cmd, check=True, env=None):
        base = dict(env if env is not None else os.environ)
        base.update(GIT_ENV)
        base.update(extra or {})
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              env=base, timeout=timeout, check=False)
        if proc.returncode != 0:
            if not check:
                return ""
            tail = "\n".join(proc.stderr.strip().splitlines()[-8:])
            raise BundleError("%s failed (exit %d): %s" % (" ".join(cmd[:6]), proc.returncode, tail))
        return proc.stdout
    return run


# ---------------------------------------------------------------------------- using a bundle

def load_manifest(root):
    path = os.path.join(root, MANIFEST)
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (IOError, OSError) as exc:
        raise BundleError("%s: cannot read the bundle's manifest (%s)" % (path, exc))
    except ValueError as exc:
        raise BundleError("%s is not JSON: %s" % (path, exc))
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BundleError("%s is not a sparkforge bundle manifest of format %d" % (path, FORMAT))
    return data


def extras(root, manifest):
    """[{path, problem}] for every file under ``root`` that the manifest does not list (the manifest
    itself aside): a file nobody hashed is a file nobody can vouch for."""
    listed = set(item["path"] for item in manifest.get("items") or [])
    out = []
    root = os.path.abspath(root)
    for base, dirs, files in os.walk(root):
        dirs.sort()
        for fname in sorted(files):
            rel = os.path.relpath(os.path.join(base, fname), root)
            if rel != MANIFEST and rel not in listed:
                out.append({"path": rel, "problem": "not in the manifest (an extra file)"})
    return out


def verify(root, manifest, paths=None):
    """[{path, problem}] for every item (or those in ``paths``) whose file is missing or differs, and,
    over the whole bundle, every file the manifest does not list."""
    bad = [] if paths is not None else extras(root, manifest)
    for item in manifest.get("items") or []:
        if paths is not None and item["path"] not in paths:
            continue
        full = os.path.normpath(os.path.join(root, item["path"]))
        if not re.match(r"^[0-9a-f]{64}$", str(item.get("sha256"))):
            bad.append({"path": item["path"], "problem": "the manifest's sha256 %r is not 64 hexadecimal digits"
                        % item.get("sha256")})
        elif not full.startswith(os.path.abspath(root) + os.sep):
            bad.append({"path": item["path"], "problem": "points outside the bundle"})
        elif not os.path.isfile(full):
            bad.append({"path": item["path"], "problem": "missing from the bundle directory"})
        elif os.path.getsize(full) != item["size"]:
            bad.append({"path": item["path"], "problem": "size %d, the manifest says %d" % (
                os.path.getsize(full), item["size"])})
        else:
            got = sha256_file(full)
            if got != item["sha256"]:
                bad.append({"path": item["path"], "problem": "sha256 %s, the manifest says %s" % (got, item["sha256"])})
    return bad


def index_key(item):
    """What a package-index row of the sources table is called in the manifest: its URL, pip's
    configuration, or either prefixed with "build" for the builds' packages."""
    url = item["url"] if item["kind"] != "pipconf" else "(pip's configuration)"
    return "build " + url if item.get("key") == "build_index_url" else url


def needed_requirements(plan, component):
    """The requirements a host's plan installs from an index (what the bundle's wheels must hold)."""
    out = []
    torch = plan.get("torch") or {}
    actions = plan.get("actions") or {}
    if component == "pytorch":
        if actions.get("pytorch") == "install" and torch.get("source") == "index":
            out.append("torch==%s" % torch["version"])
            if actions.get("torch_domains") == "install":
                out += ["torchvision==%s" % plan.get("torchvision"), "torchaudio==%s" % plan.get("torchaudio")]
    elif component == "ml_packages" and actions.get("ml_packages") == "install":
        out += [item["requirement"] for item in plan.get("ml_packages") or []]
    return out


def match(manifest, items, target, plan, bad=()):
    """Check a host's sources (sources.plan_sources) against the bundle for the host's ``target``.

    Returns (rows, problems): each row is the source with ``status`` (bundle, missing) and
    ``path`` in the bundle; each problem names the item. ``bad``: verify()'s findings."""
    by_key = dict((sources_key(s["kind"], s["url"]), s) for s in manifest.get("sources") or [])
    made_for = sorted(t["id"] for t in manifest.get("targets") or [])
    problems = []
    rows = []
    bad_paths = dict((b["path"], b["problem"]) for b in bad)
    for item in items:
        row = dict(item, status="bundle", error=None, path=None)
        rows.append(row)
        if item["kind"] == "index" and item["component"] == "pytorch" \
                and (plan.get("torch") or {}).get("source") == "wheelhouse":
            row.update(status="local")  # a wheelhouse is a directory on the host, not a download
            continue
        kind = "index" if item["kind"] in ("index", "pipconf") else item["kind"]
        key = sources_key(kind, index_key(item))
        entry = by_key.get(key)
        where = None
        if entry:
            where = entry["targets"].get(target["id"]) or entry["targets"].get("any")
        if where is None:
            if entry:
                why = "the bundle has it for %s only, this host is %s" % (", ".join(sorted(entry["targets"])),
                                                                          target["id"])
            elif target["id"] not in made_for and item["kind"] != "git":
                why = "the bundle was made for %s, this host is %s" % (", ".join(made_for) or "no target", target["id"])
            else:
                why = "not in the bundle"
            row.update(status="missing", error=why)
            problems.append("%s: %s (%s): %s" % (item["component"], item["source"], item["url"], why))
            continue
        row["path"] = where["path"]
        row["mirrors"] = where.get("mirrors") or {}
        if kind == "git":
            wanted = item.get("ref")
            if wanted and wanted not in (where.get("ref"), where.get("commit")):
                why = "the bundle's mirror holds %s, the plan needs %s" % (where.get("ref"), wanted)
                row.update(status="missing", error=why)
                problems.append("%s: %s (%s): %s" % (item["component"], item["source"], item["url"], why))
                continue
        if item.get("key") == "build_index_url":
            # The builds' packages were read from the sources the bundle's mirrors hold for this torch.
            wanted = (plan.get("torch") or {}).get("version")
            if where.get("torch") != wanted:
                why = "the bundle's build packages are for torch %s, the plan builds %s" % (where.get("torch"), wanted)
                row.update(status="missing", error=why)
                problems.append("%s: %s: %s" % (item["component"], item["source"], why))
                continue
        elif kind == "index":
            have = set(where.get("requirements") or [])
            lacking = [r for r in needed_requirements(plan, item["component"]) if r not in have]
            if lacking:
                why = "the bundle's wheels were made for %s, the plan needs %s" % (
                    ", ".join(sorted(have)) or "nothing", ", ".join(lacking))
                row.update(status="missing", error=why)
                problems.append("%s: %s: %s" % (item["component"], item["source"], why))
                continue
        # An index row's path is its simple/ pages; the wheels they link sit in the directory above.
        scope = os.path.dirname(where["path"]) if kind == "index" and where["path"].endswith("/simple") \
            else where["path"]
        broken = [(p, why) for p, why in bad_paths.items() if p == scope or p.startswith(scope + "/")
                  or (kind == "git" and any(p.startswith(m + "/") for m in (where.get("mirrors") or {}).values()))]
        if broken:
            why = "; ".join("%s: %s" % pair for pair in broken[:3])
            row.update(status="bad", error=why)
            problems.append("%s: %s: bundle file %s" % (item["component"], item["source"], why))
    return rows, problems


# Which role variable a bundled git source replaces (sources.GIT_COMPONENTS' keys).
GIT_VARIABLES = {"triton_repo": "triton_repo", "llvm_repo": "triton_llvm_repo", "pytorch_repo": "pytorch_repo"}


def overrides(rows, host_dir, target):
    """The role variables that point each bundled source at its copy on the host under ``host_dir``,
    and ``sparkforge_bundle_env``, the environment of the build and install plays: git configuration
    (GIT_CONFIG_COUNT...) that sends each submodule URL to its mirror and lets submodules be fetched
    from file:// URLs, pip's index for the build requirements (PIP_INDEX_URL), and pip's own
    configuration files off (PIP_CONFIG_FILE), so that pip reads the bundle and nothing else."""
    out = {}
    rules = []
    env = {}

    def url(rel):
        return "file://%s/%s" % (host_dir.rstrip("/"), rel)
    for row in rows:
        if row["status"] != "bundle":
            continue
        if row["component"] == "cuda_libs" and row["source"] == "CUDA apt repository":
            out["cuda_libs_repo_url"] = url("apt")
        elif row["component"] == "cusparselt":
            out["cusparselt_base_url"] = url("cusparselt")
        elif row["kind"] == "git":
            key = row.get("key")
            if key in GIT_VARIABLES:
                out[GIT_VARIABLES[key]] = url(row["path"])
            else:
                out.setdefault("torch_domains_repos", {})[key.split("_")[0]] = url(row["path"])
            for origin, rel in sorted((row.get("mirrors") or {}).items()):
                rules.append(("url.%s.insteadOf" % url(rel), origin))
        elif row.get("key") == "build_index_url":
            pip = {"PIP_INDEX_URL": url("wheels/%s/simple" % wheel_dir_name(target)), "PIP_CONFIG_FILE": os.devnull}
            out["sparkforge_fleet_pip_env"] = pip
            out["triton_pip_env"] = pip
            env.update(pip)
        elif row["kind"] in ("index", "pipconf"):
            index = url("wheels/%s/simple" % wheel_dir_name(target))
            # The roles pass the bundle's index; the host's own pip configuration must add nothing to it.
            env["PIP_CONFIG_FILE"] = os.devnull
            if row["component"] == "pytorch":
                out["pytorch_index_url"] = index
                out["torch_domains_index_url"] = index
            else:
                out["ml_packages_index_url"] = index
                out["ml_packages_extra_index_urls"] = []
                out["ml_packages_find_links"] = []
    if rules:
        rules.append(("protocol.file.allow", "always"))
        env["GIT_CONFIG_COUNT"] = str(len(rules))
        for i, (key, value) in enumerate(rules):
            env["GIT_CONFIG_KEY_%d" % i] = key
            env["GIT_CONFIG_VALUE_%d" % i] = value
    pip_names = sorted(k for k in env if run_env.is_host_variable(k))
    if pip_names:
        # The plan's own pip settings: the modules keep them (they drop the host's PIP_*: _common/run_env.py).
        env[run_env.PLAN_ENV] = ",".join(pip_names)
    out["sparkforge_bundle_env"] = env
    return out


def host_copy(rows, target):
    """(dirs, copies): the parent directories to create under the host's bundle directory and the
    paths to copy there, only what this host's rows use (a directory ends with /)."""
    copies = []
    for row in rows:
        if row["status"] != "bundle" or not row.get("path"):
            continue
        if row["kind"] == "git":
            for rel in [row["path"]] + sorted((row.get("mirrors") or {}).values()):
                copies.append(rel + "/")
        elif row["kind"] in ("index", "pipconf"):
            copies.append("wheels/%s/" % wheel_dir_name(target))
        elif row["component"] == "cuda_libs":
            copies.append("apt/%s/%s/" % (target["distro"], target["repo_arch"]))
        else:
            copies.append(row["path"])
    copies = sorted(set(copies))
    dirs = sorted(set(os.path.dirname(c.rstrip("/")) for c in copies) - {""})
    return dirs, copies
