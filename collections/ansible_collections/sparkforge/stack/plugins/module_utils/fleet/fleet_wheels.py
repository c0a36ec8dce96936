# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A platform class's wheels, from its builder to every host of the class, as plain functions.

On the builder (M(fleet_wheels)): the artifacts this run built (Triton, torch, the domain
libraries) and the wheels they depend on, resolved once by pip and keyed by the artifacts'
sha256, each described by name, file, sha256 and the wheelhouse directory it is published in.

On every host (M(fleet_wheel_install)): the copies checked against the builder's sha256, and
only the wheels whose bytes the venv does not hold yet installed (the record
<venv>/sparkforge-wheels.json says which, and is written only after pip succeeded, so a host
killed halfway is found out of date on the next run).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import hashlib
import json
import os
import shlex
import shutil

from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import atomic_write_text, sha256_file
from ansible_collections.sparkforge.stack.plugins.module_utils.packages.pip_env import isolated_argv, task_environment

RECORD_NAME = "sparkforge-wheels.json"
# Next to the wheels: the sha256 each file had at a size and mtime, so an unchanged wheel is not
# read again on every run (a 1 GB torch wheel costs seconds; a no-op rerun should not).
HASH_CACHE_NAME = ".sparkforge-sha256.json"


class FleetWheelError(Exception):
    pass


def _one_wheel(directory, name, version=None):
    """The single wheel of `name` (at `version` when given) in `directory`; an error otherwise."""
    pattern = "%s-%s*.whl" % (name, version) if version else "%s-*.whl" % name
    found = sorted(glob.glob(os.path.join(directory, pattern)))
    if len(found) != 1:
        raise FleetWheelError("expected one %s wheel (%s) in %s, found %s"
                              % (name, pattern, directory, [os.path.basename(p) for p in found] or "none"))
    return found[0]


def build_artifacts(triton=None, torch=None, domains=None, heavy=None):
    """The artifacts of one build run, in install order: Triton, torch, the domain libraries, then the
    GPU packages built against that torch.

    ``triton``: the triton_llvm_build result (``wheel``, ``cache_key``, ``built``: list of what it built).
    ``torch``: the pytorch_wheel_build result (``wheel``, ``cache_key``, ``changed``).
    ``domains``: ``dir`` (where their wheels were built), ``key`` (what that dir is keyed by),
    ``libraries`` (name -> version) and ``built`` (names whose build ran this time).
    ``heavy``: the heavy_wheel_build result's ``wheels`` (``name``, ``wheel``, ``cache_key``,
    ``changed``, ``module``): each published on the builder after its arch audit passed.
    Returns [{name, path, key, built, kind}] (``module`` too where the import name differs).
    """
    out = []
    for name, result, built in (("triton", triton, lambda r: bool(r.get("built"))),
                                ("torch", torch, lambda r: bool(r.get("changed")))):
        if not result:
            continue
        path = result.get("wheel")
        if not path or not os.path.isfile(path):
            raise FleetWheelError("the %s build result names no wheel that exists (%r)" % (name, path))
        if not result.get("cache_key"):
            raise FleetWheelError("the %s build result has no cache_key" % name)
        out.append({"name": name, "path": path, "key": str(result["cache_key"]), "built": built(result),
                    "kind": "artifact"})
    if domains:
        libraries = domains.get("libraries") or {}
        if not domains.get("dir") or not domains.get("key"):
            raise FleetWheelError("domains needs dir and key")
        built = set(domains.get("built") or [])
        for name in libraries:
            out.append({"name": name, "path": _one_wheel(domains["dir"], name, libraries[name]),
                        "key": str(domains["key"]), "built": name in built, "kind": "artifact"})
    for result in heavy or []:
        path = result.get("wheel")
        if not path or not os.path.isfile(path):
            raise FleetWheelError("the %s build result names no wheel that exists (%r)" % (result.get("name"), path))
        if not result.get("cache_key") or not result.get("name"):
            raise FleetWheelError("a heavy build result needs name and cache_key: %r" % (result,))
        entry = {"name": str(result["name"]), "path": path, "key": str(result["cache_key"]),
                 "built": bool(result.get("changed")), "kind": "artifact"}
        if result.get("module"):
            entry["module"] = str(result["module"])
        out.append(entry)
    return out


class HashCache:
    """sha256 of the files of one directory, reused while a file keeps its size and mtime.

    ``rehash``: read every file again (the cache is still rewritten).  ``save`` writes nothing
    when nothing changed or when ``write`` is false (check mode).
    """

    def __init__(self, directory, rehash=False, write=True):
        self.path = os.path.join(directory, HASH_CACHE_NAME)
        self.rehash = rehash
        self.write = write
        self.dirty = False
        self.hashed = []
        self.entries = {}
        if not rehash:
            try:
                with open(self.path) as handle:
                    data = json.load(handle)
                self.entries = data if isinstance(data, dict) else {}
            except (IOError, OSError, ValueError):
                self.entries = {}

    def sha256(self, path):
        st = os.stat(path)
        name = os.path.basename(path)
        entry = self.entries.get(name)
        if isinstance(entry, dict) and entry.get("size") == st.st_size and entry.get("mtime_ns") == st.st_mtime_ns \
                and entry.get("sha256"):
            return entry["sha256"]
        digest = sha256_file(path)
        self.hashed.append(name)
        self.entries[name] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest}
        self.dirty = True
        return digest

    def save(self):
        if not (self.dirty and self.write and os.path.isdir(os.path.dirname(self.path))):
            return
        live = dict((k, v) for k, v in self.entries.items()
                    if os.path.isfile(os.path.join(os.path.dirname(self.path), k)))
        atomic_write_text(self.path, json.dumps(live, indent=1, sort_keys=True))
        self.dirty = False


class Hashes:
    """sha256 of files in any directory, each directory through its own HashCache."""

    def __init__(self, rehash=False, write=True):
        self.rehash = rehash
        self.write = write
        self.caches = {}

    def sha256(self, path):
        directory = os.path.dirname(path)
        if directory not in self.caches:
            self.caches[directory] = HashCache(directory, self.rehash, self.write)
        return self.caches[directory].sha256(path)

    def hashed(self):
        """The files whose bytes were read in this run."""
        return sorted(name for cache in self.caches.values() for name in cache.hashed)

    def save(self):
        for cache in self.caches.values():
            cache.save()


def dependency_key(sha256s):
    """What the dependency set is keyed by: the artifacts' sha256, in order (16 hex)."""
    return hashlib.sha256(",".join(sha256s).encode("ascii")).hexdigest()[:16]


def resolve_dependencies(run, python, root, artifacts, env=None, check_mode=False, hashes=None):
    """The wheels the artifacts depend on, resolved by pip into <root>/<key>/ once per artifact set.

    ``run(argv, env)`` runs a command and returns (rc, stdout, stderr).  An unchanged set of
    artifacts reuses the last resolution; a new one resolves into <dir>.partial, which is renamed
    into place only when pip succeeded.  Returns (dir, [{name, path, key, built, kind}], resolved).
    """
    if not artifacts:
        return None, [], False
    hashes = hashes or Hashes(write=False)
    key = dependency_key([hashes.sha256(a["path"]) for a in artifacts])
    dest = os.path.join(root, key)
    resolved = False
    if not os.path.isdir(dest):
        if check_mode:
            return dest, [], True
        partial = dest + ".partial"
        shutil.rmtree(partial, ignore_errors=True)
        os.makedirs(root, exist_ok=True)
        # The plan's pip environment (sparkforge_fleet_pip_env) as options; nothing of the builder's own.
        argv = isolated_argv(python, "wheel", ["--disable-pip-version-check", "--wheel-dir", partial]
                             + [a["path"] for a in artifacts], env or {}, variable="sparkforge_fleet_pip_env")
        rc, out, err = run(argv, task_environment(env or {}))
        if rc != 0:
            tail = "\n".join((err or out or "").strip().splitlines()[-15:])
            raise FleetWheelError("pip could not resolve the dependencies of %s (exit %d):\n%s"
                                  % (", ".join(os.path.basename(a["path"]) for a in artifacts), rc, tail))
        # pip wheel saves the artifacts themselves too: only their dependencies stay.
        for artifact in artifacts:
            own = os.path.join(partial, os.path.basename(artifact["path"]))
            if os.path.exists(own):
                os.remove(own)
        os.rename(partial, dest)
        resolved = True
    deps = []
    for path in sorted(glob.glob(os.path.join(dest, "*.whl"))):
        deps.append({"name": os.path.basename(path).split("-")[0].lower(), "path": path, "key": key,
                     "built": False, "kind": "dependency"})
    return dest, deps, resolved


# The build record next to an artifact (pytorch_wheel_build/domain_wheel_build, triton_llvm_build), and
# what of it a generation keeps: enough to say what was built from what, not the whole environment.
MANIFEST_SUFFIXES = (".manifest.json", ".sparkforge.json")
MANIFEST_KEYS = ("cache_key", "commit", "triton_commit", "llvm_commit", "torch_version", "triton_version",
                 "version", "arch_list", "fixes", "toolchain", "python", "reproducible", "acceptance", "finished",
                 "built_at", "requirement", "depends_on", "cuda", "sdist", "audit")


def build_manifest(path):
    """The summary of an artifact's build record, or None when it has none."""
    for suffix in MANIFEST_SUFFIXES:
        try:
            with open(path + suffix) as handle:
                data = json.load(handle)
        except (IOError, OSError, ValueError):
            continue
        if isinstance(data, dict):
            return dict((k, data[k]) for k in MANIFEST_KEYS if k in data)
    return None


def describe(wheels, hashes=None):
    """The class's wheel list as published: name, kind, wheelhouse dir, file, sha256, cache key, and the
    summary of each artifact's build record (``manifest``)."""
    hashes = hashes or Hashes(write=False)
    out = []
    for item in wheels:
        entry = {"name": item["name"], "kind": item.get("kind", "artifact"),
                 # '-' of a name (flash-attn) as a wheel file spells it: <name>-<key> stays one split.
                 "dir": "%s-%s" % (item["name"].replace("-", "_"), item["key"][:16]),
                 "file": os.path.basename(item["path"]),
                 "path": item["path"], "sha256": hashes.sha256(item["path"]), "cache_key": item["key"]}
        if entry["kind"] == "artifact":
            entry["manifest"] = build_manifest(item["path"])
        if item.get("module"):
            entry["module"] = item["module"]
        out.append(entry)
    return out


# --- on every host of the class -------------------------------------------------------------

def check_copies(directory, wheels, cache=None):
    """[(file, problem)] for each copy in `directory` that is missing or differs from its sha256.

    ``cache``: a HashCache of `directory` (a copy whose size and mtime did not change is not read)."""
    bad = []
    for item in wheels:
        path = os.path.join(directory, item["file"])
        if not os.path.isfile(path):
            bad.append((item["file"], "missing from %s" % directory))
            continue
        got = cache.sha256(path) if cache else sha256_file(path)
        if got != item["sha256"]:
            bad.append((item["file"], "sha256 %s, the builder's wheel %s" % (got, item["sha256"])))
    return bad


def read_record(path):
    """name -> sha256 of what the venv holds; {} when there is no readable record (install all)."""
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (IOError, OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def to_install(wheels, record):
    """The wheels whose bytes the venv does not hold (by the record), in the given order."""
    return [w for w in wheels if record.get(w["name"]) != w["sha256"]]


def install_argv(python, directory, wheels, extra_args=""):
    """pip install of exactly these wheel files, the host's pip configuration ignored (run it with
    pip_env.CONFIG_OFF in its environment)."""
    return isolated_argv(python, "install", ["--disable-pip-version-check", "--no-index", "--find-links", directory,
                                             "--force-reinstall", "--no-deps"] + shlex.split(extra_args or "")
                         + [os.path.join(directory, w["file"]) for w in wheels])


def write_record(path, installed):
    """Write the record atomically (a reader sees the old or the new one, never half)."""
    atomic_write_text(path, json.dumps(installed, indent=4, sort_keys=True) + "\n")


# Run by the venv's Python: each distribution's installed version ('' when absent) and, when torch
# is installed, what `import torch` gives (its version and CUDA) or why it does not import. (Its arch list
# is the plan's to read: torch source existing, module_utils/plan/stack_plan_job.py.)
_VENV_STATE_SCRIPT = r"""
import importlib.metadata as m, json, sys
out = {"packages": {}, "torch": None, "torch_error": None}
for name in sys.argv[1:]:
    out["packages"][name] = m.version(name) if any(True for _ in m.distributions(name=name)) else ""
if out["packages"].get("torch"):
    try:
        import torch
        out["torch"] = {"version": torch.__version__, "cuda": getattr(getattr(torch, "version", None), "cuda", None)}
    except Exception as exc:
        out["torch_error"] = "%s: %s" % (type(exc).__name__, exc)
print(json.dumps(out))
"""


def read_venv_state(run, python, names):
    """What the venv holds of ``names`` (distribution names) and whether torch imports, read in one
    process, so that the roles after an install need not each start the venv's Python again.
    ``run(argv)`` returns (rc, stdout, stderr).  A venv that does not exist holds nothing."""
    empty = {"packages": dict((n, "") for n in names), "torch": None, "torch_error": None}
    if not os.path.exists(python):
        return dict(empty, torch_error="%s does not exist" % python)
    rc, out, err = run([python, "-c", _VENV_STATE_SCRIPT] + list(names))
    try:
        state = json.loads(out.strip().splitlines()[-1]) if rc == 0 and out.strip() else None
    except ValueError:
        state = None
    if state is None:
        return dict(empty, torch_error="%s could not read the venv (exit %d): %s"
                    % (python, rc, (err or out).strip()[-500:]))
    return state
