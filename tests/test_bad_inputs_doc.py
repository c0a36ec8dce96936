"""docs/bad-inputs.md is a list of tests: every row has an id (a class letter and two digits), and a test
names that id (a pytest param id or a literal), where it asserts the row's exit code, message and that
nothing changed. A row no test names, or an id used twice, fails here."""

import glob
import os
import re

from helpers import COLLECTION, REPO

DOC = os.path.join(REPO, "docs", "bad-inputs.md")
ROW = re.compile(r"^\|\s*([A-Z]\d{2})\s*\|", re.M)


def row_ids():
    with open(DOC) as handle:
        return ROW.findall(handle.read())


def test_every_row_has_a_unique_id_and_there_are_at_least_90():
    ids = row_ids()
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
    assert len(ids) >= 90, len(ids)


def test_every_row_is_named_by_a_test():
    sources = []
    for path in glob.glob(os.path.join(REPO, "tests", "**", "*.py"), recursive=True) + \
            glob.glob(os.path.join(COLLECTION, "tests", "unit", "**", "*.py"), recursive=True):
        if os.path.abspath(path) == os.path.abspath(__file__):
            continue
        with open(path) as handle:
            sources.append(handle.read())
    text = "\n".join(sources)
    missing = [i for i in row_ids() if not re.search(r"[\"']%s[\"']" % i, text)]
    assert not missing, "rows of docs/bad-inputs.md that no test names: %s" % ", ".join(missing)
