"""The offline bundle's git mirrors and its modules' refusals, without containers.

The git mirrors, for real: a superproject whose submodules are pinned below their branch tips
(tests/fixtures/git_submodules) is mirrored at depth 1 by the offline_bundle module; then the
originals are moved away and the stack's one fetch (git_fetch.fetch_checkout, as the PyTorch and
Triton builds run it) checks the tag out with every submodule from the mirrors alone, through the
variables and git environment preflight's plan hands the roles. The test_offline_bundle.py container
run covers apt, the cuSPARSELt installer and wheels on a host with no network.
"""

import json
import os
import shutil
import subprocess
import sys

from helpers import COLLECTIONS, REPO, run_module

sys.path.insert(0, COLLECTIONS)
from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import bundle  # noqa: E402
from ansible_collections.sparkforge.stack.plugins.module_utils.build import git_fetch  # noqa: E402

MAKE_REPOS = os.path.join(REPO, "tests", "fixtures", "git_submodules", "make_repos.py")
TARGET = {"id": "ubuntu2404-amd64-py3.11", "distro": "ubuntu2404", "repo_arch": "x86_64", "deb_arch": "amd64",
          "python": "3.11", "machine": "x86_64"}


def git_row(url, ref, key="pytorch_repo", component="pytorch"):
    return {"component": component, "source": "PyTorch source (git)", "url": url, "probe": url, "kind": "git",
            "variable": "sparkforge_pytorch_repo_url", "sha256": None, "key": key, "ref": ref}


def plan_with(rows, **extra):
    plan = {"target": TARGET, "sources": rows, "torch": {"version": "2.10.0", "source": "source"},
            "actions": {"pytorch": "build"}}
    plan.update(extra)
    return plan


def test_git_mirrors_serve_a_pinned_tag_and_its_submodules_with_the_originals_gone(tmp_path):
    fixture = tmp_path / "upstream"
    described = json.loads(subprocess.run([sys.executable, MAKE_REPOS, str(fixture), "--commits", "4",
                                           "--submodules", "3", "--bytes", "2000"], check=True,
                                          stdout=subprocess.PIPE, universal_newlines=True).stdout)
    url = described["super"]
    out = str(tmp_path / "bundle")
    result, rc = run_module("offline_bundle", {"dest": out, "plans": [{"host": "h1", "plan": plan_with(
        [git_row(url, "v1.0")])}]})
    assert rc == 0 and result["changed"] and result["targets"] == [TARGET["id"]], result
    manifest = bundle.load_manifest(out)
    entry = [s for s in manifest["sources"] if s["url"] == url][0]["targets"]["any"]
    assert entry["ref"] == "v1.0" and entry["commit"] == described["commit"]
    assert len(entry["mirrors"]) == 3 and bundle.verify(out, manifest) == []
    # Depth 1: each mirror holds the one pinned commit (no history), and a ref names it.
    for origin, rel in list(entry["mirrors"].items()) + [(url, entry["path"])]:
        count = subprocess.run(["git", "-C", os.path.join(out, rel), "rev-list", "--all", "--count"],
                               stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout.strip()
        assert count == "1", (origin, count)
    again, rc = run_module("offline_bundle", {"dest": out, "plans": [{"host": "h1", "plan": plan_with(
        [git_row(url, "v1.0")])}]})
    assert rc == 0 and not again["changed"] and again["fetched"] == [], again

    # The air-gapped side: nothing of upstream left.
    shutil.move(str(fixture), str(tmp_path / "gone"))
    rows, problems = bundle.match(manifest, [git_row(url, "v1.0")], TARGET, plan_with([]))
    assert problems == []
    values = bundle.overrides(rows, out, TARGET)
    env = dict(os.environ, **values["sparkforge_bundle_env"])
    repo = values["pytorch_repo"]
    commit = git_fetch.remote_commit(repo, "v1.0", env=env)
    assert commit == described["commit"]
    work = str(tmp_path / "src")
    done = git_fetch.fetch_checkout(repo, "v1.0", commit, work, str(tmp_path / "fetch.log"), submodules=True, env=env)
    assert done["fetched"] and done["submodules"] in ("shallow", "full")
    for path, pinned in described["pinned"].items():
        head = subprocess.run(["git", "-C", os.path.join(work, path), "rev-parse", "HEAD"], stdout=subprocess.PIPE,
                              universal_newlines=True, check=True).stdout.strip()
        assert head == pinned, path
    # A plan that needs another tag is refused by preflight, naming it.
    rows, problems = bundle.match(manifest, [git_row(url, "v2.0")], TARGET, plan_with([]))
    assert problems == ["pytorch: PyTorch source (git) (%s): the bundle's mirror holds v1.0, the plan needs v2.0" % url]


def test_make_refuses_bad_input_and_writes_nothing(tmp_path):
    out = tmp_path / "bundle"
    http = git_row("http://example.invalid/x.deb", None)
    http.update(kind="http", component="cusparselt", source="cuSPARSELt installer")
    result, rc = run_module("offline_bundle", {"dest": str(out), "plans": [{"host": "h1", "plan": plan_with([http])}]})
    assert rc != 0 and "http://example.invalid/x.deb is plain http: a bundle fetches over https" in result["msg"]
    ml = {"component": "ml_packages", "source": "ML package index", "url": "(pip's configuration on the host)",
          "kind": "pipconf", "variable": "ml_packages_index_url", "sha256": None, "key": "ml_index_url"}
    plan = plan_with([ml], ml_packages=[{"name": "flash-attn", "requirement": "flash-attn==2.8.3", "method": "source"}],
                     actions={"ml_packages": "install"})
    result, rc = run_module("offline_bundle", {"dest": str(out), "plans": [{"host": "h1", "plan": plan}]})
    assert rc != 0 and "ML package(s) flash-attn are built from source on ubuntu2404-amd64-py3.11" in result["msg"]
    result, rc = run_module("offline_bundle", {"dest": str(out), "plans": [{"host": "h1", "plan": {"torch": {}}}]})
    assert rc != 0 and "each entry needs host and plan" in result["msg"]
    result, rc = run_module("offline_bundle", {"dest": str(out), "plans": []})
    assert rc != 0 and "plans is empty" in result["msg"]
    assert not (out / "manifest.json").exists()
    result, rc = run_module("offline_bundle_info", {"path": str(out)})
    assert rc != 0 and "cannot read the bundle's manifest" in result["msg"]
