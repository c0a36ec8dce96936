# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the collection's unit tests share, found from this collection alone (no sparkforge checkout above it):
its paths, its version manifest merged as the roles see it, and ``run_module``, a module run the way Ansible runs
it on a target (a child Python reading ANSIBLE_MODULE_ARGS) without a playbook: fast, and the module under test
is the real file.  The checkout's tests/helpers.py re-exports these for the root tests."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools
import json
import os
import subprocess
import sys
import tempfile

from ansible_collections.sparkforge.stack.plugins.plugin_utils import manifest

# tests/unit/utils/ -> the collection (ansible_collections/sparkforge/stack) -> the folder that holds ansible_collections.
COLLECTION = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
COLLECTIONS = os.path.abspath(os.path.join(COLLECTION, "..", "..", ".."))
MODULES = os.path.join(COLLECTION, "plugins", "modules")
MANIFEST_DIR = manifest.directory(COLLECTION)
FIXTURES = os.path.join(COLLECTION, "tests", "unit", "fixtures")


def load_manifest():
    """Every file of the stack's version manifest, merged as Ansible merges a defaults/main/ directory (what the roles
    see), by the one controller-side reader (plugin_utils/manifest.py)."""
    return manifest.load(MANIFEST_DIR)


@functools.lru_cache(maxsize=None)
def shared_manifest():
    """The manifest loaded once per test process: what the ``manifest`` fixture (tests/unit/conftest.py) gives and
    what a test module's import-time tables read.  One object for all, so whoever changes it deep-copies it first."""
    return load_manifest()


def run_module(name, args, check_mode=False, diff=False, env=None, timeout=600, python=None):
    """Run plugins/modules/<name>.py with ``args``; return (result_dict, returncode).

    The result carries ``failed``/``msg`` as Ansible would show them.
    """
    payload = dict(args)
    payload["_ansible_check_mode"] = check_mode
    payload["_ansible_diff"] = diff
    payload.setdefault("_ansible_tmpdir", tempfile.gettempdir())
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump({"ANSIBLE_MODULE_ARGS": payload}, handle)
        args_file = handle.name
    child_env = dict(os.environ)
    child_env["PYTHONPATH"] = os.pathsep.join([COLLECTIONS] + [p for p in [child_env.get("PYTHONPATH")] if p])
    if env:
        child_env.update(env)
    try:
        proc = subprocess.run(
            [python or sys.executable, os.path.join(MODULES, name + ".py"), args_file],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env, timeout=timeout,
            universal_newlines=True, check=False,
        )
    finally:
        os.unlink(args_file)
    try:
        result = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else {}
    except ValueError:
        result = {"failed": True, "msg": "module printed no JSON", "stdout": proc.stdout}
    if proc.stderr:
        result.setdefault("_stderr", proc.stderr)
    return result, proc.returncode
