"""docs/bad-inputs.md is a list of tests: every row has an id (a class letter and two digits) and a test that
runs it. The rows of the variable tables (a variable, its value as JSON, the message) are run by the table
itself: tests/integration/test_validate_playbook.py reads them and carries each through a playbook, asserting
the message as written, exit 2 and nothing changed. Every other row must be named by a test where a test
uses it: a pytest param id, or a literal inside a test function or in a module-level table a test function
reads -- a mention in a comment or a docstring does not count. A row no test runs, or an id used twice, fails
here."""

import ast
import glob
import os
import re

from helpers import BAD_INPUTS as DOC, COLLECTION, REPO

ROW = re.compile(r"^\|\s*([A-Z]\d{2})\s*\|", re.M)
ID = re.compile(r"^[A-Z]\d{2}$")


def row_ids():
    with open(DOC) as handle:
        return ROW.findall(handle.read())


def test_every_row_has_a_unique_id_and_there_are_at_least_90():
    ids = row_ids()
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
    assert len(ids) >= 90, len(ids)


def ids_in(node):
    """Row ids among the string literals under node ("H10+H11" names two), docstrings left out."""
    out = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            out.update(p for p in sub.value.split("+") if ID.match(p))
    return out


def docstrings(tree):
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body \
                and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant):
            out.add(id(node.body[0].value))
    return out


def used_ids(tree):
    """Ids a test uses: literals in test functions (and their decorators), and in module-level assignments whose
    name a test function, a decorator or another such assignment reads."""
    skip = docstrings(tree)
    literal = lambda node: set(p for sub in ast.walk(node) if isinstance(sub, ast.Constant) and id(sub) not in skip
                               and isinstance(sub.value, str) for p in sub.value.split("+") if ID.match(p))
    tests = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    out, read = set(), set()
    for fn in tests:
        out |= literal(fn)
        read |= set(n.id for n in ast.walk(fn) if isinstance(n, ast.Name))
    tables = dict((t.id, stmt.value) for stmt in tree.body if isinstance(stmt, ast.Assign)
                  for t in stmt.targets if isinstance(t, ast.Name))
    seen = set()
    while read - seen:
        name = (read - seen).pop()
        seen.add(name)
        if name in tables:
            out |= literal(tables[name])
            read |= set(n.id for n in ast.walk(tables[name]) if isinstance(n, ast.Name))
    return out


def test_every_row_is_run_by_a_test():
    from test_validate_playbook import ROWS, RUNS, SPARK_BATCHES
    carried = set(r for p in RUNS for r in p.values[1]) | set(r for b in SPARK_BATCHES for r in b)
    assert carried == set(ROWS), sorted(set(ROWS) ^ carried)
    used = set()
    for path in glob.glob(os.path.join(REPO, "tests", "**", "*.py"), recursive=True) + \
            glob.glob(os.path.join(COLLECTION, "tests", "unit", "**", "*.py"), recursive=True):
        if os.path.abspath(path) == os.path.abspath(__file__):
            continue
        with open(path) as handle:
            used |= used_ids(ast.parse(handle.read()))
    missing = [i for i in row_ids() if i not in carried and i not in used]
    assert not missing, "rows of docs/bad-inputs.md that no test runs: %s" % ", ".join(missing)


def test_a_mention_in_a_docstring_or_an_unread_table_does_not_count():
    tree = ast.parse('"""Covers Z01."""\nUNREAD = ["Z02"]\nREAD = {"Z03": 1}\n'
                     'def test_x():\n    """Z04 too."""\n    assert READ and "Z05"\n')
    assert used_ids(tree) == {"Z03", "Z05"}
