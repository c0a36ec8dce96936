# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""heavy_build's fixes on the checkout's fixture sdist (tests/fixtures/ml_packages/cudaext, shared with the ml_packages
module tests): the manifest's causal-conv1d pattern applied to a setup.py that hard-codes -gencode pairs the same
way.  The rest of heavy_build's tests are the collection's (tests/unit/plugins/module_utils/test_heavy_build.py)."""

import os
import shutil
import tarfile

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils.packages import heavy_build as hb
from helpers import REPO


@pytest.fixture(scope="module")
def matrix(manifest):
    return manifest["sparkforge_ml_packages"]


def _fixture_sdist(tmp_path):
    project = tmp_path / "sparkforge_cudaext-1.0"
    shutil.copytree(os.path.join(REPO, "tests", "fixtures", "ml_packages", "cudaext"), str(project))
    archive = str(tmp_path / "sparkforge_cudaext-1.0.tar.gz")
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(str(project), arcname="sparkforge_cudaext-1.0")
    shutil.rmtree(str(project))
    return archive


def test_manifest_fix_pattern_removes_every_gencode_pair(tmp_path, matrix):
    """The manifest's causal-conv1d pattern on a setup.py that hard-codes pairs the same way."""
    fix = dict(matrix["causal-conv1d"]["gpu_build"]["fixes"][0])
    project = hb.unpack_sdist(_fixture_sdist(tmp_path), str(tmp_path / "src"))
    assert os.path.basename(project) == "sparkforge_cudaext-1.0"
    with pytest.raises(hb.HeavyBuildError, match=r"matched 2 time\(s\), the checked release has 9: the file changed"):
        hb.apply_fixes(project, [fix], "causal-conv1d")
    fix["count"] = 2
    assert hb.apply_fixes(project, [fix], "causal-conv1d")[0]["replaced"] == 2
    with open(os.path.join(project, "setup.py")) as handle:
        text = handle.read()
    assert 'cc_flag.append("-gencode")' not in text and 'cc_flag.append("arch=' not in text
    compile(text, "setup.py", "exec")
    with pytest.raises(hb.HeavyBuildError, match="the sdist has no CMakeLists.txt"):
        hb.apply_fixes(project, [dict(fix, file="CMakeLists.txt")], "causal-conv1d")
