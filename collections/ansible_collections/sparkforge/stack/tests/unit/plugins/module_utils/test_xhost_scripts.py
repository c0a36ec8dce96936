# -*- coding: utf-8 -*-
"""The programs the cross-host check runs with the stack's python (module_utils/fabric/scripts): real Python files,
whose text the module reads through the loader that imported them - as AnsiballZ ships module_utils, inside a zip
that zipimport reads, where no file of that path exists."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import os
import subprocess
import sys
import zipfile

from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import scripts, xhost
from ansible_collections.sparkforge.stack.plugins.module_utils.fabric.scripts import collectives, probe

COLLECTIONS = os.path.abspath(os.path.join(os.path.dirname(scripts.__file__), *[".."] * 7))


def test_each_script_is_a_python_file_whose_source_is_what_runs():
    for module in (collectives, probe):
        with open(module.__file__) as handle:
            text = handle.read()
        assert scripts.source_of(module) == text
        tree = ast.parse(text)
        # Run as `python -c SOURCE`, __name__ is __main__: the file's last statement calls main().
        assert isinstance(tree.body[-1], ast.If) and "__main__" in ast.dump(tree.body[-1].test), module.__name__
    assert xhost.script_source() == scripts.source_of(collectives)


def test_the_source_is_read_from_a_zip_as_ansiballz_ships_it(tmp_path):
    """The module_utils packed the way AnsiballZ packs them (a zip on sys.path, imported by zipimport): the source
    comes back whole, and the probe run from that text prints its JSON line."""
    payload = tmp_path / "payload.zip"
    base = os.path.join("ansible_collections", "sparkforge", "stack", "plugins", "module_utils", "fabric", "scripts")
    with zipfile.ZipFile(str(payload), "w") as zipped:
        parts = base.split(os.sep)
        for depth in range(1, len(parts)):
            zipped.writestr("/".join(parts[:depth]) + "/__init__.py", "")
        for name in ("__init__.py", "probe.py"):
            zipped.write(os.path.join(COLLECTIONS, base, name), base.replace(os.sep, "/") + "/" + name)
    code = ("import sys; sys.path.insert(0, %r)\n"
            "from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import scripts\n"
            "from ansible_collections.sparkforge.stack.plugins.module_utils.fabric.scripts import probe\n"
            "assert '.zip' in probe.__file__, probe.__file__\n"
            "sys.stdout.write(scripts.source_of(probe))\n" % str(payload))
    got = subprocess.run([sys.executable, "-I", "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True, check=False)
    assert got.returncode == 0, got.stderr
    assert got.stdout == scripts.source_of(probe)
    ran = subprocess.run([sys.executable, "-I", "-c", got.stdout], stdout=subprocess.PIPE, universal_newlines=True,
                         check=False)
    assert ran.stdout.strip().startswith("{") and ("torch" in ran.stdout or "error" in ran.stdout), ran.stdout
