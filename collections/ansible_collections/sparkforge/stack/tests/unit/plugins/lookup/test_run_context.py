# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lookup run_context: where and as whom the user runs, each value from the environment when it is set there, else
from the uid's passwd entry (cron, containers and `env -i` leave USER and HOME unset), never an empty string."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import pwd

import pytest
from hypothesis import given, strategies as st

from ansible.errors import AnsibleLookupError
from ansible_collections.sparkforge.stack.plugins.lookup import run_context

ME = pwd.getpwuid(os.getuid())


@given(user=st.sampled_from(["", None, "alice"]), home=st.sampled_from(["", None, "/home/alice"]))
def test_user_and_home_come_from_the_environment_else_from_the_uid(user, home):
    environ = dict((k, v) for k, v in (("USER", user), ("HOME", home)) if v is not None)
    assert run_context.user(environ) == (user or ME.pw_name)
    assert run_context.home(environ) == (home or ME.pw_dir)


def test_the_run_directory_is_the_process_one_unless_the_cli_names_it(tmp_path):
    assert run_context.run_dir({}) == os.getcwd()
    assert run_context.run_dir({run_context.RUN_DIR_VAR: str(tmp_path)}) == str(tmp_path)
    for bad in ("relative/dir", "", str(tmp_path / "missing")):
        with pytest.raises(AnsibleLookupError, match="SPARKFORGE_RUN_DIR=.* is not an absolute path of a directory"):
            run_context.run_dir({run_context.RUN_DIR_VAR: bad})


def test_an_unknown_term_is_refused_naming_the_known_ones():
    with pytest.raises(AnsibleLookupError, match="run_context knows cwd, home, user, not 'pwd'"):
        run_context.LookupModule().run(["pwd"])
