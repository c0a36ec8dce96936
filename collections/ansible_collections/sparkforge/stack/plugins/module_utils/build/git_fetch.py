# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one git fetch of the stack (PyTorch, Triton, LLVM): only the commit the build needs.

A source tree is a git work tree kept between runs. Fetching brings exactly one commit at depth 1
(no history), checks it out, and brings the submodules at their pinned commits, also at depth 1,
in parallel jobs. A resumed run finds the commit already there and fetches nothing; submodules
already at their commits are left alone. Servers that refuse a fetch by commit (or a submodule
commit that is not a branch tip) fall back to fetching more, with the reason in the log.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess

from ansible_collections.sparkforge.stack.plugins.module_utils._common.clock import utc_now
from ansible_collections.sparkforge.stack.plugins.module_utils.build.build_common import BuildFailed, run_logged
from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import makedirs

# Where a fetched ref is remembered locally, so a resumed run resolves it without the network.
LOCAL_REF_PREFIX = "refs/sparkforge/fetched/"


def _git(args, cwd, env=None):
    proc = subprocess.Popen(["git"] + list(args), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate()
    # rstrip only: `git submodule status` marks each line with its first character.
    return proc.returncode, out.decode("utf-8", "replace").rstrip(), err.decode("utf-8", "replace").strip()


def _note(log_path, text):
    makedirs(os.path.dirname(log_path) or ".")
    with open(log_path, "a") as handle:
        handle.write("\n=== %s: %s ===\n" % (utc_now(), text))


def has_commit(dest, commit):
    if not os.path.isdir(os.path.join(dest, ".git")):
        return False
    return _git(["cat-file", "-e", commit + "^{commit}"], cwd=dest)[0] == 0


def local_ref(dest, ref):
    """The commit a ref resolved to when it was fetched, or None (no network needed)."""
    if not ref or not os.path.isdir(os.path.join(dest, ".git")):
        return None
    for candidate in (LOCAL_REF_PREFIX + ref, ref, "refs/tags/" + ref, "origin/" + ref):
        rc, out, dummy = _git(["rev-parse", "--verify", "-q", candidate + "^{commit}"], cwd=dest)
        if rc == 0 and out:
            return out
    return None


def remote_commit(repo, ref, env=None):
    """The commit ``ref`` (tag, peeled, or branch) names on ``repo``, from ``git ls-remote``; None if absent."""
    rc, out, err = _git(["ls-remote", repo, ref, ref + "^{}"], cwd="/", env=env)
    if rc != 0:
        raise BuildFailed("ls-remote", rc, "", "git ls-remote %s %s: %s" % (repo, ref, err))
    lines = [line.split() for line in out.splitlines() if line.strip()]
    peeled = [cols[0] for cols in lines if cols[1].endswith("^{}")]
    if peeled:
        return peeled[0]
    if lines:
        return lines[0][0]
    if len(ref) == 40:
        return ref
    return None


def fetch_checkout(repo, ref, commit, dest, log_path, status=None, submodules=False, jobs=4, env=None,
                   clean=False):
    """Bring ``dest`` to ``commit`` of ``repo`` (shallow), and its submodules (shallow, ``jobs`` at once).

    Returns {"fetched": bool, "checked_out": bool, "submodules": "shallow"|"full"|"unchanged"|None}.
    """
    done = {"fetched": False, "checked_out": False, "submodules": None}
    if not os.path.isdir(os.path.join(dest, ".git")):
        makedirs(dest)
        run_logged(["git", "init", "-q", dest], log_path, "clone", status, env=env)
        run_logged(["git", "-C", dest, "remote", "add", "origin", repo], log_path, "clone", status, env=env)
    else:
        run_logged(["git", "-C", dest, "remote", "set-url", "origin", repo], log_path, "clone", status, env=env)
    if not has_commit(dest, commit):
        rc, dummy, err = _git(["fetch", "--depth", "1", "origin", commit], cwd=dest, env=env)
        if rc != 0:
            # Some servers refuse a fetch by commit: fetch the ref (or everything) instead.
            _note(log_path, "fetch of %s by commit refused (%s): fetching %s" % (commit[:12], err.splitlines()[-1:]
                                                                                 , ref or "all tags"))
            what = [ref] if ref and ref != commit else []
            run_logged(["git", "-C", dest, "fetch", "--tags", "origin"] + what, log_path, "clone", status, env=env)
        else:
            _note(log_path, "fetched %s (%s) at depth 1 from %s" % (commit[:12], ref or "-", repo))
        done["fetched"] = True
    if ref and ref != commit:
        _git(["update-ref", LOCAL_REF_PREFIX + ref, commit], cwd=dest, env=env)
    head = _git(["rev-parse", "--verify", "-q", "HEAD"], cwd=dest, env=env)[1]
    if head != commit:
        run_logged(["git", "-C", dest, "-c", "advice.detachedHead=false", "checkout", "-q", "--force",
                    "--detach", commit], log_path, "checkout", status, env=env)
        if clean:
            run_logged(["git", "-C", dest, "clean", "-fdxq"], log_path, "checkout", status, env=env)
        done["checked_out"] = True
    if submodules and os.path.isfile(os.path.join(dest, ".gitmodules")):
        done["submodules"] = update_submodules(dest, log_path, status, jobs, env)
    return done


def _submodules_current(dest, env=None):
    """True when every submodule (recursively) is initialised and at its recorded commit."""
    rc, out, dummy = _git(["submodule", "status", "--recursive"], cwd=dest, env=env)
    if rc != 0:
        return False
    return all(line[:1] == " " for line in out.splitlines() if line.strip())


def update_submodules(dest, log_path, status=None, jobs=4, env=None):
    if _submodules_current(dest, env):
        _note(log_path, "submodules already at their commits")
        return "unchanged"
    base = ["git", "-C", dest, "submodule", "update", "--init", "--recursive", "--jobs", str(max(1, int(jobs)))]
    try:
        run_logged(base + ["--depth", "1"], log_path, "submodules", None, env=env)
        if status is not None:
            status.phase("submodules")
        return "shallow"
    except BuildFailed:
        # A pinned commit that is no branch tip, from a server that refuses fetches by commit.
        _note(log_path, "shallow submodule update failed: fetching the submodules' history")
        run_logged(base, log_path, "submodules", status, env=env)
        return "full"
