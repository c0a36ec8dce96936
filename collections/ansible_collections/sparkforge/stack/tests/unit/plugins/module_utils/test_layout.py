# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils by domain: no file left directly in module_utils, an empty package __init__.py in
every subpackage (explicit packages, not namespace ones), no import cycle between the modules, the
generic _common importing no domain, and every module importable on its own in a fresh interpreter."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MU_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "..", "..", "plugins", "module_utils"))
MU = "ansible_collections.sparkforge.stack.plugins.module_utils"
COLLECTIONS = os.path.normpath(os.path.join(MU_DIR, "..", "..", "..", "..", ".."))


def modules():
    """{dotted name: path} of every module under module_utils (packages' __init__ left out)."""
    found = {}
    for top, dirs, files in os.walk(MU_DIR):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py") and name != "__init__.py":
                rel = os.path.relpath(os.path.join(top, name), MU_DIR)[:-3]
                found[MU + "." + rel.replace(os.sep, ".")] = os.path.join(top, name)
    return found


def imported(path, known):
    """The module_utils modules that the file at ``path`` imports (module level or inside functions)."""
    with open(path) as handle:
        tree = ast.parse(handle.read(), path)
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(MU):
            for alias in node.names:
                full = node.module + "." + alias.name
                out.add(full if full in known else node.module)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names if alias.name.startswith(MU))
    return out & set(known)


def test_no_module_directly_in_module_utils():
    loose = sorted(n for n in os.listdir(MU_DIR) if n.endswith(".py"))
    assert loose == [], "files directly in module_utils (give each a domain subpackage): %s" % loose


def test_every_subpackage_has_an_empty_init():
    packages = sorted(d for d in os.listdir(MU_DIR)
                      if os.path.isdir(os.path.join(MU_DIR, d)) and d != "__pycache__")
    assert packages, "no subpackage in %s" % MU_DIR
    for name in packages:
        init = os.path.join(MU_DIR, name, "__init__.py")
        assert os.path.isfile(init), "%s has no __init__.py" % name
        assert os.path.getsize(init) == 0, "%s is not empty" % init


def test_no_import_cycle():
    known = modules()
    graph = {name: imported(path, known) - {name} for name, path in known.items()}
    assert sum(len(v) for v in graph.values()) > 10, "the import graph was not read"
    state, stack = {}, []

    def visit(name):
        state[name] = "open"
        stack.append(name)
        for dep in sorted(graph[name]):
            if state.get(dep) == "open":
                cycle = stack[stack.index(dep):] + [dep]
                raise AssertionError("import cycle: " + " -> ".join(c[len(MU) + 1:] for c in cycle))
            if dep not in state:
                visit(dep)
        stack.pop()
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name)


def test_common_imports_no_domain():
    known = modules()
    for name, path in known.items():
        if name.startswith(MU + "._common."):
            deps = [d for d in imported(path, known) if not d.startswith(MU + "._common.")]
            assert deps == [], "%s imports a domain module: %s" % (name, deps)


def test_every_module_imports_alone_in_a_fresh_interpreter():
    names = sorted(modules())
    code = ("import subprocess, sys\n"
            "bad = []\n"
            "for name in sys.argv[1:]:\n"
            "    proc = subprocess.run([sys.executable, '-c', 'import ' + name], capture_output=True, text=True,\n"
            "                          check=False)\n"
            "    if proc.returncode:\n"
            "        bad.append(name + ': ' + proc.stderr.strip().splitlines()[-1])\n"
            "print('\\n'.join(bad))\n"
            "sys.exit(1 if bad else 0)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([COLLECTIONS, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", code] + names, capture_output=True, text=True, env=env,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(names) > 30
