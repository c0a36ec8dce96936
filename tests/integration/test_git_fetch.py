"""The stack's one git fetch (module_utils.build.git_fetch), used by pytorch_wheel_build and triton_llvm_build.

On a fixture superproject with three submodules, each with history (tests/fixtures/git_submodules),
pinned at commits that are not their branch tips: the fetch brings exactly one commit of the
superproject and of every submodule, a resumed run fetches nothing, the fetched ref resolves
without the network, and a full recursive clone of the same fixture holds the whole history
(bench/git_fetch.py measures bytes and time of both)."""

import json
import os
import subprocess
import sys

import pytest

from helpers import REPO

sys.path.insert(0, os.path.join(REPO, "collections"))
from ansible_collections.sparkforge.stack.plugins.module_utils.build import git_fetch  # noqa: E402
from ansible_collections.sparkforge.stack.plugins.module_utils.build.build_common import BuildFailed  # noqa: E402

MAKE = os.path.join(REPO, "tests", "fixtures", "git_submodules", "make_repos.py")
ENV = dict(os.environ, GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="protocol.file.allow", GIT_CONFIG_VALUE_0="always")


def git(cwd, *args):
    return subprocess.check_output(["git"] + list(args), cwd=cwd, env=ENV).decode().strip()


@pytest.fixture(scope="module")
def fixture(tmp_path_factory):
    dest = tmp_path_factory.mktemp("gitsub") / "repos"
    return json.loads(subprocess.check_output([sys.executable, MAKE, str(dest)]))


def test_one_commit_of_everything_then_a_resume_that_fetches_nothing(fixture, tmp_path):
    dest, log = str(tmp_path / "src"), str(tmp_path / "fetch.log")
    done = git_fetch.fetch_checkout(fixture["super"], "v1.0", fixture["commit"], dest, log, submodules=True,
                                    jobs=3, env=ENV)
    assert done == {"fetched": True, "checked_out": True, "submodules": "shallow"}, open(log).read()
    assert git(dest, "rev-parse", "HEAD") == fixture["commit"]
    assert git(dest, "rev-parse", "--is-shallow-repository") == "true"
    assert git(dest, "rev-list", "--count", "HEAD") == "1"
    for path, pinned in fixture["pinned"].items():
        sub = os.path.join(dest, path)
        assert git(sub, "rev-parse", "HEAD") == pinned
        # git's shallow submodule clone takes the branch tip at depth 1, then the pinned commit: at most
        # two commits, no history.
        assert git(sub, "rev-parse", "--is-shallow-repository") == "true", path
        assert int(git(sub, "rev-list", "--count", "--all")) <= 2, path
    assert git_fetch.local_ref(dest, "v1.0") == fixture["commit"]

    again = git_fetch.fetch_checkout(fixture["super"], "v1.0", fixture["commit"], dest, log, submodules=True,
                                     jobs=3, env=ENV)
    assert again == {"fetched": False, "checked_out": False, "submodules": "unchanged"}
    assert "submodules already at their commits" in open(log).read()


def test_a_full_clone_holds_the_whole_history(fixture, tmp_path):
    full = str(tmp_path / "full")
    subprocess.check_call(["git", "clone", "-q", "--recurse-submodules", fixture["super"], full], env=ENV,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert int(git(full, "rev-list", "--count", "HEAD")) == fixture["commits"]
    for path in fixture["pinned"]:
        assert int(git(os.path.join(full, path), "rev-list", "--count", "--all")) == fixture["commits"]


def test_remote_commit_and_its_errors(fixture, tmp_path):
    assert git_fetch.remote_commit(fixture["super"], "v1.0", env=ENV) == fixture["commit"]
    assert git_fetch.remote_commit(fixture["super"], "v9.9", env=ENV) is None
    with pytest.raises(BuildFailed) as info:
        git_fetch.remote_commit("file://" + str(tmp_path / "nowhere"), "v1.0", env=ENV)
    assert "git ls-remote" in info.value.tail
