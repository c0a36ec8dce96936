# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The module tests (plugins/modules/) and a few module_utils tests run inside a sparkforge checkout: they
use its tests/helpers.py (run_module: a module run as Ansible runs it), its fixtures (tests/fixtures) and
stand-in servers.  That tests/ folder is found by walking up from here and put on sys.path.  Outside a
checkout (the collection installed alone) it is not there, and those tests fail to import `helpers`."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys


def checkout_tests(start):
    """The tests/ folder of the checkout that holds ``start`` (the one with helpers.py), or None."""
    here = start
    while True:
        if os.path.isfile(os.path.join(here, "tests", "helpers.py")):
            return os.path.join(here, "tests")
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


TESTS = checkout_tests(os.path.dirname(os.path.abspath(__file__)))
if TESTS is not None and TESTS not in sys.path:
    sys.path.insert(0, TESTS)
