# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils by domain: no file left directly in module_utils, an empty package __init__.py in
every subpackage (explicit packages, not namespace ones), no import cycle between the modules nor between
the folders (of any length: a folder that imports another is above it), the generic _common importing no
domain, every module importable on its own in a fresh interpreter, and no Python file of the collection over
700 lines. These are the collection's own architecture rules: they hold when the collection is tested alone
(issue 55, item 4)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import os
import subprocess
import sys

from ansible_collections.sparkforge.stack.tests.unit.utils.cycles import strongly_connected
from ansible_collections.sparkforge.stack.tests.unit.utils.readers import manifest_readers

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


def folder_graph():
    """``{folder: {folder it imports: [the importing files]}}`` between module_utils' subpackages."""
    known = modules()
    graph = {}
    for name, path in known.items():
        folder = name[len(MU) + 1:].split(".")[0]
        mine = graph.setdefault(folder, {})
        for dep in imported(path, known):
            other = dep[len(MU) + 1:].split(".")[0]
            if other != folder:
                mine.setdefault(other, []).append(os.path.basename(path))
    return graph


def test_the_cycle_finder_finds_cycles_of_any_length():
    assert strongly_connected({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["a", "b", "c"], ["d"]]
    assert strongly_connected({"a": ["b"], "b": ["a"]}) == [["a", "b"]]
    assert all(len(c) == 1 for c in strongly_connected({"a": ["b", "c"], "b": ["c"], "c": []}))


def test_no_import_cycle_between_module_utils_folders():
    """A folder that imports another is above it: rules sit beside their users, so dependencies run one way, through
    any number of folders (cuda -> fleet -> build -> cuda is a cycle as much as cuda -> fleet -> cuda)."""
    graph = folder_graph()
    assert sum(len(v) for v in graph.values()) > 10, "the folder import graph was not read"
    cycles = [c for c in strongly_connected(graph) if len(c) > 1]
    detail = ["; ".join("%s -> %s (%s)" % (a, b, ", ".join(sorted(set(graph[a][b]))))
                        for a in cycle for b in sorted(graph[a]) if b in cycle) for cycle in cycles]
    assert cycles == [], "module_utils folders importing each other in a cycle: " + " | ".join(detail)


LIMIT = 700


def test_no_python_file_of_the_collection_over_700_lines():
    """The house rule: a file past 700 lines is split by domain."""
    root = os.path.normpath(os.path.join(MU_DIR, "..", ".."))
    files = []
    for top, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in ("__pycache__", ".git")]
        files.extend(os.path.join(top, n) for n in names if n.endswith(".py"))
    assert len(files) > 100, "the collection's Python files were not found under %s" % root
    long_files = []
    for path in sorted(files):
        with open(path) as handle:
            count = sum(1 for _line in handle)
        if count > LIMIT:
            long_files.append("%s (%d lines)" % (os.path.relpath(path, root), count))
    assert long_files == [], "split these by domain (at most %d lines a file): %s" % (LIMIT, ", ".join(long_files))


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


def test_the_manifest_is_read_on_the_controller_by_plugin_utils_alone():
    """issue 55 item 3: one controller-side reader of the version manifest (plugin_utils/manifest.py, as
    community.docker keeps its controller helpers); no other plugin parses its files."""
    plugins = os.path.dirname(MU_DIR)
    assert manifest_readers(plugins, os.path.join(plugins, "plugin_utils", "manifest.py")) == []


# Ansible's module_utils that cost a module run real CPU to import (urls: TLS, email, http.client, about 0.1 s on an
# x86 host, 0.3-0.6 s on the emulated arm64 test host; the fact collectors about 0.05 s). Every module imports job.py, so a
# module_utils file imports them inside the function that uses them, never with the file.
HEAVY_ANSIBLE = ("ansible.module_utils.urls", "ansible.module_utils.facts")


def test_module_utils_import_ansibles_heavy_module_utils_only_where_used():
    bad = []
    for name, path in sorted(modules().items()):
        with open(path) as handle:
            tree = ast.parse(handle.read(), path)
        top = list(tree.body)
        for node in list(top):  # a top-level try (an optional import) is still the file's import
            if isinstance(node, ast.Try):
                top.extend(node.body)
        for node in top:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            bad.extend("%s line %d imports %s" % (name, node.lineno, n) for n in names
                       if any(n == h or n.startswith(h + ".") for h in HEAVY_ANSIBLE))
    assert bad == []
