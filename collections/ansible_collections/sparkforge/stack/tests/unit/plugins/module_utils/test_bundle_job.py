# -*- coding: utf-8 -*-
"""offline_bundle's job (module_utils/fleet/bundle_job.py): bad input is refused in the plan, before
anything is fetched or written; a cuSPARSELt installer the plans need is listed in check mode and
fetched (its pinned sha256 checked) by apply.  The git mirrors and wheels are
tests/unit/plugins/modules/test_offline_bundle_parts.py's and the container test's."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os
import sys

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import bundle
from ansible_collections.sparkforge.stack.plugins.module_utils.fleet.bundle_job import BundleJob
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import JobError

sys.path.insert(0, os.path.dirname(__file__))
from fake_system import FakeSystem  # noqa: E402  pylint: disable=wrong-import-position

DEB = b"the cuSPARSELt local repo installer"
URL = "https://developer.download.nvidia.com/compute/cusparselt/0.8.1/local_installers/" \
      "cusparselt-local-repo-ubuntu2404-0.8.1_0.8.1-1_arm64.deb"


class Server:
    """NVIDIA's server for the Maker: the bytes of the URLs it has, BundleError for the rest."""

    def __init__(self, files):
        self.files = dict(files)
        self.asked = []

    def __call__(self, url):
        self.asked.append(url)
        if url not in self.files:
            raise bundle.BundleError("%s: HTTP 404 Not Found" % url)
        return self.files[url]


def params(dest, plans, **more):
    args = dict(dest=dest, plans=plans, cuda_packages=[], keyring={}, pip_index_url="", build_wheels=[],
                triton_build_requirements=[], python=None, timeout=60)
    args.update(more)
    return args


def a_plan(sha256=None):
    target = {"id": "ubuntu2404-arm64-cp312", "distro": "ubuntu2404", "deb_arch": "arm64", "python": "3.12",
              "arch": "aarch64", "repo_arch": "sbsa"}
    source = {"component": "cusparselt", "kind": "file", "source": "cuSPARSELt installer", "url": URL,
              "variable": "sparkforge_cusparselt_base_url", "sha256": sha256}
    return {"host": "spark-1", "plan": {"target": target, "sources": [source], "torch": {}, "actions": {}}}


def test_bad_input_is_refused_before_anything_is_fetched(tmp_path):
    server = Server({})
    dest = str(tmp_path / "bundle")
    with pytest.raises(JobError, match="plans is empty"):
        BundleJob(params(dest, []), FakeSystem(), fetch=server).run()
    with pytest.raises(JobError, match="pip_index_url http://pypi.example/simple is plain http"):
        BundleJob(params(dest, [a_plan()], pip_index_url="http://pypi.example/simple"), FakeSystem(),
                  fetch=server).run()
    with pytest.raises(JobError, match="plans: each entry needs host and plan .*'spark-2' has not"):
        BundleJob(params(dest, [a_plan(), {"host": "spark-2", "plan": {"sources": []}}]), FakeSystem(),
                  fetch=server).run()
    (tmp_path / "file").write_text("")
    with pytest.raises(JobError, match="dest .*file exists and is not a directory"):
        BundleJob(params(str(tmp_path / "file"), [a_plan()]), FakeSystem(), fetch=server).run()
    assert server.asked == [] and not os.path.exists(dest)


def test_check_mode_lists_the_installer_and_apply_fetches_it_against_its_pin(tmp_path):
    dest = str(tmp_path / "bundle")
    sha = hashlib.sha256(DEB).hexdigest()
    server = Server({URL: DEB})
    plan = BundleJob(params(dest, [a_plan(sha)]), FakeSystem(), check_mode=True, fetch=server).plan()
    assert plan.changed and plan.result["changed"] is True and server.asked == []
    assert plan.changes == ["fetch %s" % rel for rel in plan.result["fetched"]]
    assert not os.path.exists(dest)
    res = BundleJob(params(dest, [a_plan(sha)]), FakeSystem(), fetch=server).run()
    assert res["changed"] is True and server.asked == [URL] and res["fetched"] == plan.result["fetched"]
    with open(os.path.join(dest, res["fetched"][0]), "rb") as handle:
        assert handle.read() == DEB


def test_an_installer_that_is_not_the_pinned_one_is_not_written(tmp_path):
    dest = str(tmp_path / "bundle")
    with pytest.raises(JobError) as info:
        BundleJob(params(dest, [a_plan("0" * 64)]), FakeSystem(), fetch=Server({URL: DEB})).run()
    assert info.value.msg.startswith("offline bundle: %s has sha256 " % URL) and info.value.result["fetched"] == []


def test_a_directory_of_the_users_is_refused_and_a_killed_runs_is_resumed(tmp_path):
    """Issue 52: a bundle run removes what it does not list under wheels/ (and apt/, cusparselt/, git/); a dest that
    holds something and no bundle manifest is the user's: refused before anything is fetched, check mode too."""
    dest = tmp_path / "mine"
    (dest / "wheels").mkdir(parents=True)
    (dest / "wheels" / "mylib-1.0-py3-none-any.whl").write_bytes(b"the user's wheel")
    sha = hashlib.sha256(DEB).hexdigest()
    for check in (True, False):
        server = Server({URL: DEB})
        with pytest.raises(JobError) as info:
            BundleJob(params(str(dest), [a_plan(sha)]), FakeSystem(), check_mode=check, fetch=server).run()
        assert info.value.msg.startswith("dest (sparkforge_bundle_out)=%s is a directory sparkforge did not make "
                                         "(no manifest.json of a bundle in it; it holds wheels)" % dest), info.value.msg
        assert server.asked == [] and "nothing was changed" in info.value.msg, "O12"
    assert sorted(os.listdir(str(dest / "wheels"))) == ["mylib-1.0-py3-none-any.whl"]
    # A run killed while filling its directory left its marker and no manifest: the next run resumes it.
    made = tmp_path / "bundle"
    made.mkdir()
    (made / ".sparkforge-bundle-making").write_text("1\n")
    (made / "cusparselt").mkdir()
    res = BundleJob(params(str(made), [a_plan(sha)]), FakeSystem(), fetch=Server({URL: DEB})).run()
    assert res["changed"] and os.path.isfile(str(made / "manifest.json"))
    assert not (made / ".sparkforge-bundle-making").exists()
