# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Acceptance tests after a PyTorch source build: run a curated subset of PyTorch's own
test suite through ``test/run_test.py``, parse what the runners print, and judge the
result against a failure budget and per-platform-class exclusions (the way EasyBuild's
PyTorch easyblock keeps ``max_failed_tests`` and ``excluded_tests``).

Plain functions; the torch_acceptance module is the Ansible glue around them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import os
import re
import signal
import subprocess
import time

COUNT_KEYS = ("passed", "failed", "errors", "skipped", "xfailed", "xpassed")

# pytest's closing line: "==== 2 failed, 10 passed, 1 skipped, 3 warnings in 4.21s ====".
_PYTEST_SUMMARY = re.compile(r"^=+ (?P<body>(?:\d+ \w+(?:, )?)+) in [\d.]+s(?: \([^)]*\))? =+$")
_PYTEST_PART = re.compile(r"(\d+) (\w+)")
_PYTEST_WORDS = {"passed": "passed", "failed": "failed", "error": "errors", "errors": "errors",
                 "skipped": "skipped", "xfailed": "xfailed", "xpassed": "xpassed"}
# pytest -rfE short summary: "FAILED test_nn.py::TestNN::test_x - AssertionError: ..."
_PYTEST_FAILED = re.compile(r"^(?P<kind>FAILED|ERROR) (?P<name>[^\s(]\S*)")
# unittest: "Ran 12 tests in 0.034s", then "OK", "OK (skipped=2)" or "FAILED (failures=1, errors=1)".
_UNITTEST_RAN = re.compile(r"^Ran (?P<n>\d+) tests? in [\d.]+s$")
_UNITTEST_RESULT = re.compile(r"^(?P<state>OK|FAILED)(?: \((?P<body>[^)]*)\))?$")
# unittest's failure headers: "FAIL: test_x (__main__.TestFoo.test_x)" (3.11) or "(__main__.TestFoo)".
_UNITTEST_FAILED = re.compile(r"^(?P<kind>FAIL|ERROR): (?P<test>\S+) \((?P<where>[^)]+)\)")
# run_test.py, for a suite that did not pass: "test_nn failed!", "test_decomp 1/1 failed!",
# "test_jit failed! Received signal: SIGSEGV".
_SUITE_FAILED = re.compile(r"^(?:RuntimeError: )?(?P<suite>[\w/.]+) (?:\d+/\d+ )?failed!"
                           r"(?: Received signal: (?P<signal>SIG\w+))?")


def empty_counts():
    return dict((k, 0) for k in COUNT_KEYS)


def parse_output(text, suite=None):
    """What one run_test.py run printed: counts, failed test names, suites that failed or died.

    Returns {"counts": {...}, "failed_tests": [...], "error_tests": [...], "suites": [{"suite",
    "signal"}], "summaries": n} where summaries counts the runner summary lines seen (0 means the
    output ended before any runner reported: a crash or a kill).
    """
    counts = empty_counts()
    failed, errored, suites = [], [], []
    summaries = 0
    unittest_ran = None
    for raw in text.splitlines():
        line = raw.rstrip()
        m = _PYTEST_SUMMARY.match(line)
        if m:
            summaries += 1
            for n, word in _PYTEST_PART.findall(m.group("body")):
                key = _PYTEST_WORDS.get(word)
                if key:
                    counts[key] += int(n)
            continue
        m = _PYTEST_FAILED.match(line)
        if m:
            (failed if m.group("kind") == "FAILED" else errored).append(m.group("name"))
            continue
        m = _UNITTEST_RAN.match(line)
        if m:
            unittest_ran = int(m.group("n"))
            continue
        m = _UNITTEST_RESULT.match(line)
        if m and unittest_ran is not None:
            summaries += 1
            parts = dict((k.strip(), int(v)) for k, v in
                         (p.split("=") for p in (m.group("body") or "").split(",") if "=" in p))
            fails, errs, skips = parts.get("failures", 0), parts.get("errors", 0), parts.get("skipped", 0)
            xfail, xpass = parts.get("expected failures", 0), parts.get("unexpected successes", 0)
            counts["failed"] += fails
            counts["errors"] += errs
            counts["skipped"] += skips
            counts["xfailed"] += xfail
            counts["xpassed"] += xpass
            counts["passed"] += max(0, unittest_ran - fails - errs - skips - xfail - xpass)
            unittest_ran = None
            continue
        m = _UNITTEST_FAILED.match(line)
        if m:
            where = m.group("where")
            # 3.11 prints module.Class.test; older ones module.Class.
            name = where if where.endswith("." + m.group("test")) else where + "." + m.group("test")
            name = name.split("__main__.", 1)[-1]
            (failed if m.group("kind") == "FAIL" else errored).append(name)
            continue
        m = _SUITE_FAILED.match(line)
        if m:
            suites.append({"suite": m.group("suite"), "signal": m.group("signal")})
    return {"counts": counts, "failed_tests": _unique(failed), "error_tests": _unique(errored),
            "suites": suites, "summaries": summaries}


def _unique(items):
    seen, out = set(), []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def policy_for(data, version, platform_class):
    """The failure budget and exclusions for one torch version on one platform class.

    ``data`` is the manifest's sparkforge_torch_acceptance: ``suites``, ``timeout`` and
    ``releases`` keyed by version ("2.9.1"), minor series ("2.9") or "default"; each entry has
    ``max_failed`` and ``exclude`` keyed by platform class or "all", with ``suites`` (not run)
    and ``tests`` (fnmatch patterns whose failures do not count).
    """
    releases = data.get("releases") or {}
    minor = ".".join(str(version).split(".")[:2])
    entry, source = None, None
    for key in (str(version), minor, "default"):
        if key in releases:
            entry, source = releases[key], key
            break
    if entry is None:
        raise ValueError("sparkforge_torch_acceptance has no entry for torch %s (nor %s, nor default)"
                         % (version, minor))
    exclude = entry.get("exclude") or {}
    skip_suites, allowed = [], []
    for key in ("all", platform_class):
        part = exclude.get(key) or {}
        skip_suites += [s for s in part.get("suites") or [] if s not in skip_suites]
        allowed += [t for t in part.get("tests") or [] if t not in allowed]
    return {"entry": source, "max_failed": int(entry.get("max_failed", 0)),
            "excluded_suites": skip_suites, "excluded_tests": allowed}


def normalise_suites(suites):
    """[{"name", "k"}] from names or dicts; errors for what run_test.py would not take."""
    out, errors = [], []
    for item in suites or []:
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, dict) or not item.get("name"):
            errors.append("a suite needs a name: %r" % (item,))
            continue
        name = str(item["name"])
        if not re.match(r"^[\w/.]+$", name):
            errors.append("suite name %r is not a run_test.py test name" % name)
            continue
        out.append({"name": name, "k": str(item.get("k") or "")})
    if not out and not errors:
        errors.append("no suites to run")
    return out, errors


def suite_command(python, suite):
    cmd = [python, "run_test.py", "-i", suite["name"], "--continue-through-error", "--verbose"]
    if suite["k"]:
        cmd += ["-k", suite["k"]]
    return cmd


def _signal_name(returncode):
    if returncode is not None and returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return "signal %d" % -returncode
    return None


def run_suite(source_dir, python, suite, timeout, env, log_handle, clock=time.time):
    """Run one suite from SOURCE/test; its output goes to log_handle. Returns the suite record."""
    test_dir = os.path.join(source_dir, "test")
    cmd = suite_command(python, suite)
    log_handle.write("$ cd %s && %s\n" % (test_dir, " ".join(cmd)))
    log_handle.flush()
    start = clock()
    proc = subprocess.Popen(cmd, cwd=test_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            universal_newlines=True, start_new_session=True)
    timed_out = False
    try:
        out = proc.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        timed_out = True
        # The runner and every test process it started: one process group.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        out = proc.communicate()[0]
    log_handle.write(out)
    log_handle.write("\n")
    log_handle.flush()
    parsed = parse_output(out)
    died = [s for s in parsed["suites"] if s["signal"]]
    record = {
        "name": suite["name"], "k": suite["k"], "returncode": proc.returncode,
        "seconds": round(clock() - start, 1), "counts": parsed["counts"],
        "failed_tests": parsed["failed_tests"], "error_tests": parsed["error_tests"],
        "signal": died[0]["signal"] if died else (None if timed_out else _signal_name(proc.returncode)),
        "timed_out": timed_out,
    }
    if timed_out:
        record["state"] = "timeout"
    elif record["signal"]:
        record["state"] = "signal"
    elif proc.returncode == 0:
        record["state"] = "passed"
    elif parsed["summaries"] == 0:
        # Exited non-zero before any runner reported (an import error, a missing test file).
        record["state"] = "crashed"
    else:
        record["state"] = "failed"
    return record


def total_counts(records):
    counts = empty_counts()
    for r in records:
        for k in COUNT_KEYS:
            counts[k] += r["counts"].get(k, 0)
    return counts


def _matches(name, patterns):
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def judge(records, policy):
    """Count what the budget sees and decide. Excluded tests' failures are listed, not counted;
    a suite that died (signal, timeout, crash) counts as one failure unless its name is excluded."""
    counted, excused, broken = [], [], []
    for r in records:
        for name in r["failed_tests"] + r["error_tests"]:
            (excused if _matches(name, policy["excluded_tests"]) else counted).append(name)
        # Failures a runner counted but did not name (e.g. a -q unittest run) still count.
        named = len(r["failed_tests"]) + len(r["error_tests"])
        unnamed = r["counts"]["failed"] + r["counts"]["errors"] - named
        counted += ["%s: unnamed failure %d" % (r["name"], i + 1) for i in range(max(0, unnamed))]
        if r["state"] in ("signal", "timeout", "crashed"):
            what = {"signal": "ended by %s" % r["signal"], "timeout": "timed out after %ss" % r["seconds"],
                    "crashed": "exited %s before any test runner reported" % r["returncode"]}[r["state"]]
            item = "%s (suite %s)" % (r["name"], what)
            (excused if _matches(r["name"], policy["excluded_tests"]) else broken).append(item)
    over = len(counted) + len(broken) - policy["max_failed"]
    return {
        "counted_failures": len(counted) + len(broken),
        "max_failed": policy["max_failed"],
        "within_budget": over <= 0,
        "failures": counted,
        "broken_suites": broken,
        "excused": excused,
    }


def summary_line(counts, verdict):
    return ("%(passed)d passed, %(failed)d failed, %(errors)d errors, %(skipped)d skipped" % counts
            + "; %d counted against a budget of %d: %s" % (
                verdict["counted_failures"], verdict["max_failed"],
                "within budget" if verdict["within_budget"] else "OVER BUDGET"))


def run_key(wheel_sha256, suites, excluded_suites, timeout, env=None):
    """What decides whether a recorded run still stands (the judgement is redone every time)."""
    return {"wheel_sha256": wheel_sha256, "suites": suites, "excluded_suites": sorted(excluded_suites),
            "timeout": int(timeout), "env": dict(sorted((env or {}).items()))}
