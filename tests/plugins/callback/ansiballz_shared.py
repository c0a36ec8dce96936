# -*- coding: utf-8 -*-
"""The test suite's AnsiballZ cache, shared by every ansible-playbook it starts.

Ansible builds each module's payload (the module and the module_utils it imports, found by parsing them) once
per run, in the run's own temporary directory. The suite starts some hundreds of runs with the same modules, so
this rebuilding was about a sixth of each run's CPU (py-spy over a check-mode run of spark.yml: recursive_finder
and its AST parsing). This callback, enabled by tests/conftest.py only, points the run's payload cache at a
directory shared by the suite's runs, named by a hash of every file a payload can hold (the module and
module_utils files of each collection and library path, and ansible-core's own module_utils), with
ansible-core's version and the Python's: a changed file makes a new directory, never a stale payload. The
payloads are Ansible's own, built by Ansible; only where they are kept changes. Ansible writes each one aside
and renames it, under a lock file beside it, so two runs sharing the directory read whole payloads.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: ansiballz_shared
type: aggregate
short_description: share AnsiballZ payloads between the test suite's runs
description:
  - Points the run's AnsiballZ cache at a directory shared by the test suite's runs, keyed by a hash of every
    module and module_utils file a payload can hold. Enabled by the test suite only.
options: {}
"""

import base64
import dataclasses
import hashlib
import importlib.util
import io
import os
import sys
import zipfile
from importlib import _bootstrap_external

import ansible
from ansible import constants as C
from ansible.executor import module_common
from ansible.plugins.callback import CallbackBase

# A payload's Python files are compiled by the host's Python each time a module runs (zipimport compiles a .py
# found in a zip, twice: once for the spec, once for the code), about half the CPU of a module's run
# (py-spy). Each payload kept here also holds bytecode: hash-checked .pyc files (PEP 552, "checked"), which
# zipimport uses only when their magic is the host's Python's and their hash the .py's beside them; any other
# host compiles the source as before.
BYTECODE = "bytecode-3"


def _files(top):
    for base, dirs, files in os.walk(top, followlinks=True):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".py", ".ps1", ".psm1", ".cs")) or "." not in name:
                yield os.path.join(base, name)


def with_bytecode(zip_data):
    """The base64 zip ``zip_data`` with a checked .pyc beside each .py that compiles (under this Python)."""
    src = zipfile.ZipFile(io.BytesIO(base64.b64decode(zip_data)))
    names = set(src.namelist())
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            dst.writestr(info, data)
            if not info.filename.endswith(".py") or info.filename + "c" in names:
                continue
            try:
                code = compile(data, info.filename, "exec", dont_inherit=True)
            except (SyntaxError, ValueError):
                continue  # the host's Python says why, as it would without this
            pyc = _bootstrap_external._code_to_hash_pyc(code, importlib.util.source_hash(data), True)
            dst.writestr(zipfile.ZipInfo(info.filename + "c", date_time=info.date_time), bytes(pyc),
                         compress_type=info.compress_type)
    return base64.b64encode(out.getvalue())


def _dump_with_bytecode(dump):
    def wrapped(self, path):
        # _CachedModule is a frozen dataclass: the same fields, with the bytecode added.
        return dump(dataclasses.replace(self, zip_data=with_bytecode(self.zip_data)), path)
    wrapped.sparkforge_bytecode = True
    return wrapped


def _key(roots):
    digest = hashlib.sha256()
    # The collections installed beside ansible-core (the `ansible` package) change only with its version.
    try:
        from importlib.metadata import version
        bundled = version("ansible")
    except Exception:  # pylint: disable=broad-except  # not installed, or metadata unreadable
        bundled = "none"
    digest.update(("%s|%s|%s|%s" % (ansible.__version__, bundled, sys.version, BYTECODE)).encode())
    for root in roots:
        if not os.path.isdir(root):
            continue
        digest.update(os.path.realpath(root).encode())
        for path in _files(root):
            digest.update(path.encode())
            try:
                with open(path, "rb") as handle:
                    digest.update(hashlib.sha256(handle.read()).digest())
            except OSError:
                digest.update(b"unreadable")
    return digest.hexdigest()[:24]


def _collection_paths():
    """The paths this run finds collections in: the configured ones and the playbook's adjacent
    collections/ (known once the playbook's directory is), as the collection loader has them."""
    try:
        from ansible.utils.collection_loader import AnsibleCollectionConfig
        return list(AnsibleCollectionConfig.collection_paths)
    except (ImportError, NotImplementedError):
        return list(C.COLLECTIONS_PATHS or [])


def _roots():
    roots = [os.path.join(os.path.dirname(ansible.__file__), "module_utils"),
             os.path.join(os.path.dirname(ansible.__file__), "modules")]
    for top in _collection_paths():
        # The collections installed in site-packages (the `ansible` package) are keyed by its version.
        if os.path.basename(os.path.normpath(top)) in ("site-packages", "dist-packages"):
            continue
        base = os.path.join(os.path.expanduser(top), "ansible_collections")
        if not os.path.isdir(base):
            continue
        for ns in sorted(os.listdir(base)):
            for coll in sorted(os.listdir(os.path.join(base, ns))) if os.path.isdir(os.path.join(base, ns)) else []:
                for sub in ("modules", "module_utils", "action"):
                    roots.append(os.path.join(base, ns, coll, "plugins", sub))
    roots += list(C.DEFAULT_MODULE_PATH or []) + list(C.DEFAULT_MODULE_UTILS_PATH or [])
    return roots


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "ansiballz_shared"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        shared = os.environ.get("SPARKFORGE_TEST_ANSIBALLZ_CACHE")
        if not shared:
            return
        target = os.path.join(shared, _key(_roots()))
        os.makedirs(target, exist_ok=True)
        link = os.path.join(C.DEFAULT_LOCAL_TMP, "ansiballz_cache")
        if not os.path.lexists(link):
            os.symlink(target, link)
        # Payloads are built (and dumped) in the worker processes, forked from this one after this point.
        if not getattr(module_common._CachedModule.dump, "sparkforge_bytecode", False):
            module_common._CachedModule.dump = _dump_with_bytecode(module_common._CachedModule.dump)
