"""docs/results/test-behaviours.md stays true (issue 54, item 5): every test it names by ``path::name`` exists in
the checkout, or the document says what became of it (a line naming it says removed, renamed, moved or replaced)."""

import glob
import os
import re

from helpers import COLLECTION, REPO

DOC = os.path.join(REPO, "docs", "results", "test-behaviours.md")
NAMED = re.compile(r"`(?:[\w./-]*\.py)?::(test_\w+)")
FATE = re.compile(r"\b(removed|renamed|moved|replaced)\b", re.IGNORECASE)


def _test_functions():
    names = set()
    for path in glob.glob(os.path.join(REPO, "tests", "**", "*.py"), recursive=True) + \
            glob.glob(os.path.join(COLLECTION, "tests", "**", "*.py"), recursive=True):
        with open(path) as handle:
            names.update(re.findall(r"^\s*(?:async\s+)?def\s+(test_\w+)", handle.read(), re.M))
    return names


def test_every_test_the_behaviours_document_names_exists_or_its_fate_is_written():
    with open(DOC) as handle:
        lines = handle.read().splitlines()
    named = {}
    for number, line in enumerate(lines, 1):
        for name in NAMED.findall(line):
            named.setdefault(name, []).append((number, line))
    assert len(named) > 300, "the document's test names were not read"
    existing = _test_functions()
    untrue = ["line %d: %s" % (mentions[0][0], name) for name, mentions in sorted(named.items())
              if name not in existing and not any(FATE.search(line) for _n, line in mentions)]
    assert untrue == [], ("docs/results/test-behaviours.md names tests that do not exist and does not say what "
                          "became of them (write 'removed', 'renamed', 'moved' or 'replaced' and where its "
                          "behaviour is asserted now): " + "; ".join(untrue))
