#!/usr/bin/env python3
"""Bytes and time to fetch a source tree with submodules: a full recursive clone against the stack's
shallow fetch (module_utils.build.git_fetch, what pytorch_wheel_build and triton_llvm_build use).

usage: bench/git_fetch.py [--commits N] [--submodules K] [--bytes B] [--repeat R] [--out FILE.md]

The fixture (tests/fixtures/git_submodules/make_repos.py) is a superproject and K submodules with N
commits each, B incompressible bytes changed per commit, pinned at commits that are not branch tips
(like PyTorch's third_party). Served over file:// (git's pack protocol, which honours --depth).
Bytes are what the fetched tree occupies on disk (work tree + .git), the median time of R runs.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "collections"))
from ansible_collections.sparkforge.stack.plugins.module_utils.build import git_fetch  # noqa: E402

ENV = dict(os.environ, GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="protocol.file.allow", GIT_CONFIG_VALUE_0="always")


def du(path):
    total = 0
    for root, dummy, files in os.walk(path):
        for name in files:
            p = os.path.join(root, name)
            if not os.path.islink(p):
                total += os.path.getsize(p)
    return total


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--commits", type=int, default=100)
    parser.add_argument("--submodules", type=int, default=4)
    parser.add_argument("--bytes", type=int, default=50000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out")
    a = parser.parse_args()
    work = tempfile.mkdtemp(prefix="git-fetch-bench-")
    try:
        fx = json.loads(subprocess.check_output([sys.executable, os.path.join(REPO, "tests", "fixtures", "git_submodules",
                                                                              "make_repos.py"), os.path.join(work, "repos"),
                                                 "--commits", str(a.commits), "--submodules", str(a.submodules),
                                                 "--bytes", str(a.bytes)]))
        rows = {}
        for kind in ("full", "shallow"):
            times, size = [], None
            for i in range(a.repeat):
                dest = os.path.join(work, "%s-%d" % (kind, i))
                start = time.perf_counter()
                if kind == "full":
                    subprocess.check_call(["git", "clone", "-q", "--recurse-submodules", "--jobs", "8", fx["super"], dest],
                                          env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    subprocess.check_call(["git", "-C", dest, "checkout", "-q", fx["commit"]], env=ENV)
                else:
                    git_fetch.fetch_checkout(fx["super"], fx["ref"], fx["commit"], dest, os.path.join(work, "log"),
                                             submodules=True, jobs=8, env=ENV)
                times.append(time.perf_counter() - start)
                size = du(dest)
                shutil.rmtree(dest)
            rows[kind] = {"seconds": statistics.median(times), "bytes": size}
        # A resumed shallow run over a tree that is already there.
        dest = os.path.join(work, "resume")
        git_fetch.fetch_checkout(fx["super"], fx["ref"], fx["commit"], dest, os.path.join(work, "log"), submodules=True,
                                 jobs=8, env=ENV)
        start = time.perf_counter()
        done = git_fetch.fetch_checkout(fx["super"], fx["ref"], fx["commit"], dest, os.path.join(work, "log"),
                                        submodules=True, jobs=8, env=ENV)
        rows["resume"] = {"seconds": time.perf_counter() - start, "bytes": du(dest), "done": done}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    lines = ["| fetch | bytes on disk | seconds (median of %d) |" % a.repeat, "|---|---|---|"]
    for kind in ("full", "shallow", "resume"):
        lines.append("| %s | %d (%.1f MB) | %.2f |" % (kind, rows[kind]["bytes"], rows[kind]["bytes"] / 1e6,
                                                      rows[kind]["seconds"]))
    text = ("Fixture: superproject + %d submodules, %d commits each, %d bytes changed per commit.\n\n"
            % (a.submodules, a.commits, a.bytes)) + "\n".join(lines) + "\n\nShallow / full: %.1f%% of the bytes, %.1f%% of the time.\n" % (
        100.0 * rows["shallow"]["bytes"] / rows["full"]["bytes"], 100.0 * rows["shallow"]["seconds"] / rows["full"]["seconds"])
    print(text)
    print(json.dumps(rows["resume"]["done"]))
    if a.out:
        with open(a.out, "w") as handle:
            handle.write(text)


if __name__ == "__main__":
    main()
