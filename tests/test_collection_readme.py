"""The collection's README lists every module_utils file by domain and every module with its short description,
exactly: a file added, moved or removed, or a short description changed, fails here until the README follows
(issue 45 item 5: the list had gone stale)."""

import ast
import os
import re

import yaml

from helpers import COLLECTION, MODULES

README = os.path.join(COLLECTION, "README.md")
MODULE_UTILS = os.path.join(COLLECTION, "plugins", "module_utils")


def section(name):
    """The README's text between ``<!-- NAME: ...-->`` and ``<!-- end of NAME -->``."""
    with open(README) as handle:
        text = handle.read()
    found = re.search(r"<!-- %s:[^>]*-->\n(.*?)\n<!-- end of %s -->" % (re.escape(name), re.escape(name)), text, re.S)
    assert found, "%s has no '%s' section between its markers" % (README, name)
    return found.group(1)


def listed_module_utils():
    """{domain: [names as listed]} from the domains section: each top-level bullet ``- `domain/`: ...`` and the
    backquoted names of its paragraph."""
    listed = {}
    for paragraph in re.split(r"\n(?=- `)", section("module_utils domains")):
        head = re.match(r"^- `([\w]+)/`:", paragraph)
        if head:
            names = re.findall(r"`([\w/]+)`", paragraph)[1:]
            listed[head.group(1)] = names
    return listed


def module_utils_files():
    """{domain: sorted names}: each .py file of each domain package, relative to it, without .py."""
    found = {}
    for domain in sorted(os.listdir(MODULE_UTILS)):
        top = os.path.join(MODULE_UTILS, domain)
        if not os.path.isdir(top) or domain == "__pycache__":
            continue
        names = []
        for base, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in files:
                if name.endswith(".py") and name != "__init__.py":
                    names.append(os.path.relpath(os.path.join(base, name), top)[:-3].replace(os.sep, "/"))
        found[domain] = sorted(names)
    return found


def short_descriptions():
    out = {}
    for name in sorted(os.listdir(MODULES)):
        if name.endswith(".py") and name != "__init__.py":
            path = os.path.join(MODULES, name)
            with open(path) as handle:
                tree = ast.parse(handle.read(), path)
            doc = [n.value.value for n in tree.body if isinstance(n, ast.Assign)
                   and any(getattr(t, "id", None) == "DOCUMENTATION" for t in n.targets)]
            assert doc, "%s has no DOCUMENTATION" % path
            out[name[:-3]] = yaml.safe_load(doc[0])["short_description"]
    return out


def test_every_module_utils_file_is_listed_under_its_domain_and_nothing_else():
    actual = module_utils_files()
    listed = listed_module_utils()
    assert len(actual) >= 9 and sum(len(v) for v in actual.values()) > 50, "module_utils not found: %s" % actual
    assert sorted(listed) == sorted(actual), "README domains %s, module_utils has %s" % (sorted(listed), sorted(actual))
    for domain, names in sorted(listed.items()):
        twice = sorted(set(n for n in names if names.count(n) > 1))
        assert not twice, "README lists %s under %s/ more than once" % (twice, domain)
        missing, extra = sorted(set(actual[domain]) - set(names)), sorted(set(names) - set(actual[domain]))
        assert not missing and not extra, \
            "README's %s/ list: missing %s, naming what is not there %s" % (domain, missing, extra)


def test_every_module_is_listed_with_its_short_description():
    rows = re.findall(r"^- `(\w+)`: (.*)$", section("modules"), re.M)
    listed = dict((name, text) for name, text in rows)
    assert len(listed) == len(rows), "a module is listed twice: %s" % sorted(n for n, _t in rows)
    expected = dict((name, text.rstrip(".") + ".") for name, text in short_descriptions().items())
    assert len(expected) > 20, "the modules were not found under %s" % MODULES
    assert sorted(listed) == sorted(expected), "README's modules: missing %s, naming what is not there %s" % (
        sorted(set(expected) - set(listed)), sorted(set(listed) - set(expected)))
    differ = dict((n, (listed[n], expected[n])) for n in expected if listed[n] != expected[n])
    assert not differ, "README's module lines differ from their short_description: %s" % differ
