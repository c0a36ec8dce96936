"""One-spot mutations of claimed behaviours (issue 54, item 1): each row of rows.yml breaks one behaviour in a copy of
the checkout (an exact text, found exactly once in one file, replaced) and runs the tests the row names, which must
fail. A row whose tests stay green is a survivor: the behaviour it names is claimed but not proven.

    scripts/mutate                 every row; exit 1 if any survives or is wrong (its pattern not found exactly
                                   once, its tests red before the mutation, a test id that names nothing)
    scripts/mutate --row NAME ...  the named rows only
    scripts/mutate --list          the rows

The checkout is never changed: its tracked and unignored files are copied once into a temporary directory, each
row's file is changed there, its tests run there (pyproject's pythonpath puts the copy's collections/ and src/ first
on sys.path), and the file is restored before the next row.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
ROWS = os.path.join(HERE, "rows.yml")
KEYS = {"name", "file", "pattern", "replacement", "tests"}


def load(path=ROWS):
    """The rows, each checked for its keys; ValueError naming the row otherwise."""
    with open(path) as handle:
        rows = yaml.safe_load(handle) or []
    names = set()
    for index, row in enumerate(rows):
        missing = KEYS - set(row)
        if missing:
            raise ValueError("%s row %d (%s): missing %s" % (path, index + 1, row.get("name"),
                                                             ", ".join(sorted(missing))))
        if row["name"] in names:
            raise ValueError("%s: two rows named %r" % (path, row["name"]))
        if not row["tests"] or row["pattern"] == row["replacement"]:
            raise ValueError("%s row %r: no tests, or a replacement equal to its pattern" % (path, row["name"]))
        names.add(row["name"])
    return rows


def copy_checkout(dest):
    """The checkout's tracked and unignored files (what a clone has, with uncommitted work) copied to ``dest``."""
    listed = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=REPO, check=True,
                            stdout=subprocess.PIPE).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = os.path.join(REPO, rel)
        if not os.path.lexists(src):
            continue  # deleted in the work tree, not yet in the index
        target = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if os.path.islink(src):
            os.symlink(os.readlink(src), target)
        else:
            shutil.copy2(src, target)


def pytest(copy, tests):
    """(exit code, output tail) of pytest on ``tests`` in the copy: -x, as soon as one fails the row is caught."""
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(copy, "ansible.cfg"), PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "--tb=line", "-p", "no:cacheprovider"]
                          + list(tests), cwd=copy, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)
    lines = proc.stdout.strip().splitlines()
    # The first failure pytest's summary names (-ra, pyproject's addopts), so the report shows why it failed.
    first = [line for line in lines if line.startswith(("FAILED ", "ERROR "))][:1]
    # --tb=line: "<file>:<line>: <the error>", the assertion's message where it has one.
    first += [line for line in lines if re.match(r"^\S+\.py:\d+: ", line)][:1]
    return proc.returncode, "\n".join(lines[-6:] + first)


def _why(tail):
    """The failing test and the start of its message, from pytest's tail."""
    lines = tail.splitlines()
    failed = [line for line in lines if line.startswith(("FAILED ", "ERROR "))]
    where = [line for line in lines if re.match(r"^\S+\.py:\d+: ", line)]
    if failed:
        test = failed[0].partition(" - ")[0].split()[-1].rpartition("::")[2]
        said = where[0].split(": ", 1)[1] if where else failed[0].partition(" - ")[2]
        return "%s: %s" % (test, said[:120])
    return lines[-1] if lines else ""


def mutate(copy, row):
    """Apply ``row`` in the copy; returns the original text, or raises ValueError when the pattern is not there
    exactly once."""
    path = os.path.join(copy, row["file"])
    if not os.path.isfile(path):
        raise ValueError("%s does not exist" % row["file"])
    with open(path) as handle:
        text = handle.read()
    count = text.count(row["pattern"])
    if count != 1:
        raise ValueError("the pattern is found %d times in %s, not once" % (count, row["file"]))
    with open(path, "w") as handle:
        handle.write(text.replace(row["pattern"], row["replacement"]))
    return text


def run(rows, baseline=True, out=sys.stdout):
    """Each row in turn; returns the report's rows [(name, verdict, seconds, detail)] and whether all were caught."""
    report, ok = [], True
    copy = tempfile.mkdtemp(prefix="sparkforge-mutate-")
    try:
        copy_checkout(copy)
        if baseline:
            tests = sorted(set(t for row in rows for t in row["tests"]))
            started = time.time()
            code, tail = pytest(copy, tests)
            out.write("baseline: %d test ids of %d rows, unmutated: %s (%.0f s)\n"
                      % (len(tests), len(rows), "green" if code == 0 else "RED", time.time() - started))
            if code != 0:
                out.write(tail + "\n")
                return [("baseline", "red", time.time() - started, tail)], False
        for row in rows:
            started = time.time()
            try:
                original = mutate(copy, row)
            except ValueError as exc:
                report.append((row["name"], "WRONG ROW", 0.0, str(exc)))
                out.write("%-9s %5.0f s  %s  (%s)\n" % ("WRONG ROW", 0.0, row["name"], exc))
                ok = False
                continue
            try:
                code, tail = pytest(copy, row["tests"])
            finally:
                with open(os.path.join(copy, row["file"]), "w") as handle:
                    handle.write(original)
            if code in (1, 2):
                # 1: a test failed; 2: collection failed (an import the mutation broke): both are the tests failing.
                verdict, detail = "caught", _why(tail)
            elif code == 0:
                verdict, detail, ok = "SURVIVED", tail.splitlines()[-1] if tail else "", False
            else:
                verdict, detail, ok = "WRONG ROW", "pytest exit %d (a test id that names nothing?): %s" % (
                    code, tail.replace("\n", " | ")), False
            report.append((row["name"], verdict, time.time() - started, detail))
            out.write("%-9s %5.0f s  %s  (%s)\n" % (verdict, time.time() - started, row["name"], detail))
            out.flush()
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    return report, ok


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--row", action="append", default=[], help="run only this row (by name; repeatable)")
    parser.add_argument("--list", action="store_true", help="list the rows and exit")
    parser.add_argument("--no-baseline", action="store_true", help="skip running the tests on the unmutated copy")
    parser.add_argument("--rows", default=ROWS, help="the rows file (default: tests/mutation/rows.yml)")
    args = parser.parse_args(argv)
    rows = load(args.rows)
    if args.list:
        for row in rows:
            print("%s: %s (%s)" % (row["name"], row["file"], ", ".join(row["tests"])))
        return 0
    if args.row:
        unknown = sorted(set(args.row) - set(r["name"] for r in rows))
        if unknown:
            parser.error("no row named %s" % ", ".join(unknown))
        rows = [r for r in rows if r["name"] in args.row]
    started = time.time()
    report, ok = run(rows, baseline=not args.no_baseline)
    survivors = [r for r in report if r[1] != "caught"]
    print("\n| row | verdict | seconds | the tests said |\n|---|---|---|---|")
    for name, verdict, seconds, detail in report:
        print("| %s | %s | %.0f | %s |" % (name, verdict, seconds, detail.replace("|", "/")))
    print("\n%d rows, %d caught, %d not (%.0f s)%s" % (len(report), len(report) - len(survivors), len(survivors),
                                                       time.time() - started,
                                                       ": " + ", ".join(r[0] for r in survivors) if survivors else ""))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
