"""The mutation table (tests/mutation/rows.yml, run by scripts/mutate) stays runnable as the code moves: every row's
pattern is found exactly once in its file, and every test it names exists. Whether each row's tests fail on its
mutation is scripts/mutate's to show (minutes: it runs them); this test is the cheap half, in every run."""

import os
import re
import subprocess

import readme
from tests.mutation import mutate

from helpers import REPO


def test_every_mutation_row_applies_once_and_names_tests_that_exist():
    rows = mutate.load()
    assert len(rows) >= 10
    problems = []
    for row in rows:
        path = os.path.join(REPO, row["file"])
        if not os.path.isfile(path):
            problems.append("%s: %s does not exist" % (row["name"], row["file"]))
            continue
        with open(path) as handle:
            count = handle.read().count(row["pattern"])
        if count != 1:
            problems.append("%s: its pattern is found %d times in %s, not once" % (row["name"], count, row["file"]))
        for test in row["tests"]:
            file_part, _sep, name = test.partition("::")
            test_path = os.path.join(REPO, file_part)
            if not os.path.isfile(test_path):
                problems.append("%s: %s does not exist" % (row["name"], file_part))
                continue
            with open(test_path) as handle:
                text = handle.read()
            if name and not re.search(r"^def %s\(" % re.escape(name.split("[")[0]), text, re.M):
                problems.append("%s: %s has no test %s" % (row["name"], file_part, name))
    assert problems == [], "; ".join(problems)


def test_the_guides_mutation_lines_are_what_scripts_mutate_takes():
    lines = [line.split("#")[0].strip() for line in readme.commands("tests.md", heading="## Mutations")]
    assert lines == ["scripts/mutate", 'scripts/mutate --row "NAME"'], lines
    listed = subprocess.run([os.path.join(REPO, "scripts", "mutate"), "--list"], capture_output=True, text=True,
                            timeout=60, check=False)
    assert listed.returncode == 0 and len(listed.stdout.splitlines()) == len(mutate.load()), listed.stdout
    # --row as the guide writes it: a name that is no row is refused, naming it, before anything is copied or run.
    wrong = subprocess.run([os.path.join(REPO, "scripts", "mutate"), "--row", "NAME"], capture_output=True,
                           text=True, timeout=60, check=False)
    assert wrong.returncode == 2 and "no row named NAME" in wrong.stderr, wrong.stderr
