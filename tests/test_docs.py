"""The README and the guides (docs/guides/): every command block has a test that reads it, the README stays the
pitch and the list of guides, and the test command's lines are what scripts/test and CI run.

Which blocks the tests read is found in the tests' source: every call of ``readme.commands`` or
``readme.command`` names its document and heading as literals, and a ```bash block is read when it lies in a
section some call reads (tests/readme.py).
"""

import ast
import glob
import os
import re
import subprocess

import readme
from helpers import COLLECTION, REPO

TESTS = os.path.join(REPO, "tests")
README_LIMIT = 200
# A fenced block names what it holds: commands to run (bash), or what is not run (output samples, files).
LANGUAGES = {"bash", "text", "console", "yaml", "json", "python"}


def documents():
    return ["README.md"] + sorted(os.path.basename(p) for p in glob.glob(os.path.join(readme.GUIDES, "*.md")))


def reader_calls():
    """Every (file:line, document, heading) the tests read through readme.commands / readme.command."""
    calls, unreadable = [], []
    # The tests here and the collection's unit tests (the module tests moved there, issue 34 item 6).
    for path in sorted(glob.glob(os.path.join(TESTS, "**", "*.py"), recursive=True)
                       + glob.glob(os.path.join(COLLECTION, "tests", "unit", "**", "*.py"), recursive=True)):
        with open(path) as handle:
            tree = ast.parse(handle.read(), path)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "readme"
                    and node.func.attr in ("commands", "command")):
                continue
            where = "%s:%d" % (os.path.relpath(path, REPO), node.lineno)
            # commands(doc, heading=None); command(doc, starts, heading=None)
            heading_at = 1 if node.func.attr == "commands" else 2
            heading = node.args[heading_at] if len(node.args) > heading_at else None
            heading = next((k.value for k in node.keywords if k.arg == "heading"), heading)
            doc = node.args[0] if node.args else None
            if not (isinstance(doc, ast.Constant) and (heading is None or isinstance(heading, ast.Constant))):
                unreadable.append(where)
                continue
            calls.append((where, doc.value, heading.value if heading is not None else None))
    return calls, unreadable


def test_every_bash_block_is_read_by_a_test():
    calls, unreadable = reader_calls()
    assert not unreadable, "name the document and heading as literals in these calls: %s" % unreadable
    assert calls
    spans = {}
    for where, doc, heading in calls:
        assert doc in documents(), "%s reads %s, which is neither README.md nor a guide" % (where, doc)
        spans.setdefault(doc, []).append(readme.span(doc, heading))
    unread = []
    for doc in documents():
        whole = readme.text(doc)
        for offset, lines in readme.blocks(doc):
            if not any(start <= offset < end for start, end in spans.get(doc, [])):
                unread.append("%s line %d: %s" % (doc, whole.count("\n", 0, offset) + 1, lines[0]))
    assert not unread, "bash blocks no test reads (tests/readme.py):\n" + "\n".join(unread)


def test_every_code_block_names_what_it_holds():
    bare = []
    for doc in documents():
        inside = False
        for number, line in enumerate(readme.text(doc).splitlines(), 1):
            fence = re.match(r"^ *```(\S*)\s*$", line)
            if not fence:
                continue
            if not inside and fence.group(1) not in LANGUAGES:
                bare.append("%s line %d: ```%s" % (doc, number, fence.group(1)))
            inside = not inside
        assert not inside, "%s: a code block is not closed" % doc
    assert not bare, "a block is ```bash (a command a test reads) or one of %s:\n%s" % (sorted(LANGUAGES),
                                                                                     "\n".join(bare))


def test_the_readme_is_the_pitch_and_the_list_of_guides():
    text = readme.text("README.md")
    assert text.count("\n") <= README_LIMIT, "README.md has %d lines: a topic goes in a guide (docs/guides/)" % (
        text.count("\n"))
    with open(os.path.join(REPO, "docs", "README.md")) as handle:
        index = handle.read()
    for guide in documents()[1:]:
        assert "(docs/guides/%s)" % guide in text, "README.md does not list docs/guides/%s" % guide
        assert "(guides/%s)" % guide in index, "docs/README.md does not list guides/%s" % guide
    # Every relative link of the README, the index and the guides names a file that is there.
    pages = [("README.md", REPO, text), ("docs/README.md", os.path.join(REPO, "docs"), index)]
    pages += [("docs/guides/" + g, readme.GUIDES, readme.text(g)) for g in documents()[1:]]
    for name, base, page in pages:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page):
            assert os.path.exists(os.path.join(base, target)), "%s links to %s, which is not there" % (name, target)
    # No guide's text is kept in the README too: a line of prose (60 characters or more) is in one place.
    readme_lines = set(line.strip() for line in text.splitlines() if len(line.strip()) >= 60)
    for guide in documents()[1:]:
        both = [line for line in readme.text(guide).splitlines() if line.strip() in readme_lines]
        assert not both, "README.md repeats docs/guides/%s: %s" % (guide, both)


def test_the_test_command_lines_are_what_scripts_test_and_ci_run():
    """The Quickstart's `scripts/test` is CI's command (.ci/run), and every line of the Tests guide is a mode
    scripts/test accepts (its usage, printed for an unknown mode before it does anything)."""
    quick = readme.command("README.md", "scripts/test", heading="## Quickstart").split("#")[0].strip()
    # A line that is only a comment goes on the comment of the line before it.
    # The mutation lines are scripts/mutate's (tests/test_mutation_rows.py runs them).
    mutate = set(readme.commands("tests.md", heading="## Mutations"))
    lines = [line.split("#")[0].strip() for line in readme.commands("tests.md")
             if line.split("#")[0].strip() and line not in mutate]
    with open(os.path.join(REPO, ".ci", "run")) as handle:
        ci = [line.split()[1:] for line in handle if line.startswith("exec ")]
    assert ci == [["scripts/test"]] and quick == lines[0] == "scripts/test", (quick, lines, ci)
    usage = subprocess.run([os.path.join(REPO, "scripts", "test"), "no-such-mode"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, universal_newlines=True, timeout=30, check=False)
    modes = re.search(r"usage: scripts/test \[([a-z|]+)\]", usage.stdout)
    assert usage.returncode == 2 and modes, usage.stdout
    for line in lines:
        words = line.split()
        assert words[0] == "scripts/test" and len(words) <= 2, line
        assert len(words) == 1 or words[1] in modes.group(1).split("|"), (line, modes.group(0))
