# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's unit tests need nothing outside the collection: their harness is tests/unit/utils/harness.py
(run_module, the collection's paths, the manifest) and their data tests/unit/fixtures/.  Tests that need a
sparkforge checkout (its tests/fixtures source trees, its docs, its scripts) live in the checkout's tests/."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.sparkforge.stack.tests.unit.utils.harness import shared_manifest
from ansible_collections.sparkforge.stack.tests.unit.utils.skips import skip_as_failure


@pytest.fixture(scope="session")
def manifest():
    """The version manifest (roles/manifest/defaults/main/*.yml, every file's top-level keys merged as Ansible
    merges a defaults/main/ directory), loaded once: shared by every test, so a test that changes it works on
    copy.deepcopy(manifest)."""
    return shared_manifest()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    skip_as_failure(outcome.get_result())
