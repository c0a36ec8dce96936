"""The command blocks of the README and the guides, as a user copies them: tests run these lines as written.

``commands(doc, heading=None)`` gives the lines of the ```bash blocks of ``doc`` ("README.md", or a guide's
file name under docs/guides/, e.g. "air-gapped-sites.md"), or of its section under ``heading`` (up to the
next heading of the same or a higher level), blank lines left out, comments left in: bash ignores them.

tests/test_docs.py reads every call of ``commands`` and ``command`` in the tests (the document and heading
must be written out as literals there) and fails when a ```bash block of the README or a guide lies in no
section some test reads.
"""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
GUIDES = os.path.join(ROOT, "docs", "guides")

# A ```bash block, possibly indented (inside a list item): (indent, its lines).
BASH_BLOCK = re.compile(r"^( *)```bash\n(.*?)^ *```", re.S | re.M)


def path(doc):
    """The file of ``doc``: README.md at the repository's root, any other name a guide in docs/guides/."""
    return README if doc == "README.md" else os.path.join(GUIDES, doc)


def text(doc):
    with open(path(doc)) as handle:
        return handle.read()


def span(doc, heading=None):
    """(start, end) offsets in ``doc``'s text of the section under ``heading`` (the whole text without one)."""
    whole = text(doc)
    if heading is None:
        return 0, len(whole)
    found = re.search("^" + re.escape(heading) + "\n", whole, re.M)
    if not found:
        raise AssertionError("%s has no heading %r" % (doc, heading))
    level = len(heading) - len(heading.lstrip("#"))
    end = re.compile(r"^#{1,%d} " % level, re.M).search(whole, found.end())
    return found.end(), end.start() if end else len(whole)


def section(doc, heading=None):
    """The text of ``doc`` under ``heading`` (all of it without one)."""
    start, end = span(doc, heading)
    return text(doc)[start:end]


def blocks(doc):
    """Every ```bash block of ``doc``: (offset of its opening fence, its command lines)."""
    found = []
    for match in BASH_BLOCK.finditer(text(doc)):
        indent, block = match.group(1), match.group(2)
        # An indented block's lines are taken without the indent.
        found.append((match.start(), [line[len(indent):] if line.startswith(indent) else line.strip()
                                      for line in block.splitlines() if line.strip()]))
    return found


def commands(doc, heading=None):
    """Every command line of the ```bash blocks of ``doc`` (under ``heading`` when given)."""
    start, end = span(doc, heading)
    lines = []
    for offset, block in blocks(doc):
        if start <= offset < end:
            lines += block
    if not lines:
        raise AssertionError("%s%s has no bash block" % (doc, " section %r" % heading if heading else ""))
    return lines


def command(doc, starts, heading=None):
    """The one command line of ``doc`` (under ``heading`` when given) that starts with ``starts``."""
    found = [line for line in commands(doc, heading) if line.startswith(starts)]
    if len(found) != 1:
        raise AssertionError("%s%s: %d lines start with %r" % (doc, " section %r" % heading if heading else "",
                                                                len(found), starts))
    return found[0]
