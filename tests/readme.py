"""The README's command blocks, as a user copies them: tests run these lines as written.

``commands(heading)`` gives the lines of the ```bash blocks under a README heading (up to the next
heading of the same or a higher level), blank lines left out, comments left in: bash ignores them.
"""

import os
import re

README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")


def section(heading):
    with open(README) as handle:
        text = handle.read()
    start = text.index(heading + "\n")
    level = len(heading) - len(heading.lstrip("#"))
    rest = text[start + len(heading):]
    end = re.search(r"^#{1,%d} " % level, rest, re.M)
    return rest[:end.start()] if end else rest


def commands(heading):
    """Every command line of the ```bash blocks under ``heading`` (e.g. "### Upgrading a fleet")."""
    lines = []
    # A block may be indented (inside a list item): its lines are taken without the indent.
    for indent, block in re.findall(r"^( *)```bash\n(.*?)^ *```", section(heading), re.S | re.M):
        lines += [line[len(indent):] if line.startswith(indent) else line.strip()
                  for line in block.splitlines() if line.strip()]
    if not lines:
        raise AssertionError("README section %r has no bash block" % heading)
    return lines


def command(heading, starts):
    """The one command line under ``heading`` that starts with ``starts``."""
    found = [line for line in commands(heading) if line.startswith(starts)]
    if len(found) != 1:
        raise AssertionError("README section %r: %d lines start with %r" % (heading, len(found), starts))
    return found[0]
