# -*- coding: utf-8 -*-
"""Which Python files read the version manifest's YAML themselves (the layout tests of the collection and of the
project hold that only plugin_utils/manifest.py does)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import os
import re


# A path to the version manifest's data in code: the reader's own constant or the folders spelt out.
_MANIFEST_PATH = re.compile(r"""["']manifest["']\s*,\s*["']defaults["']|roles/manifest/defaults|MANIFEST_(REL|DIR)\b""")


def manifest_readers(root, home):
    """Python files under ``root`` (``home`` aside) that parse YAML and name the manifest's data directory in code."""
    found = []
    for base, _dirs, files in os.walk(root):
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(base, name)
            if os.path.abspath(path) == os.path.abspath(home):
                continue
            with open(path) as handle:
                tree = ast.parse(handle.read(), path)
            loads = any(isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "yaml"
                        and n.attr in ("safe_load", "load", "full_load", "unsafe_load") for n in ast.walk(tree))
            # Strings that are code (docstrings say where data lives; they read nothing).
            docs = set(id(n.body[0].value) for n in ast.walk(tree)
                       if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
                       and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant))
            code = [n for n in ast.walk(tree) if (isinstance(n, ast.Constant) and isinstance(n.value, str)
                                                  and id(n) not in docs) or isinstance(n, ast.Name)]
            text = " ".join(repr(n.value) if isinstance(n, ast.Constant) else n.id for n in code)
            joined = ", ".join(repr(n.value) for n in code if isinstance(n, ast.Constant))
            if loads and (_MANIFEST_PATH.search(text) or _MANIFEST_PATH.search(joined)):
                found.append(os.path.relpath(path, root))
    return found
