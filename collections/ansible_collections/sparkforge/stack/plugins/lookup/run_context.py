# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lookup run_context: where and as whom the user runs, for the defaults that derive from it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: run_context
short_description: the directory the user runs ansible-playbook from, the controller's user and home
description:
  - C(cwd) is the directory the user runs from, the current directory of the ansible-playbook process (where
    C(-i inventory) and C(reports/) are read from), or C(SPARKFORGE_RUN_DIR) when set (the sparkforge CLI sets it
    to the directory it was started in, because ansible-runner starts ansible-playbook in the playbook's
    directory). Never the playbook's directory, which is what C(lookup('ansible.builtin.pipe', 'pwd')) gives (an
    installed collection's C(playbooks/)).
  - C(user) is C(USER) when set, else the login name of the controller's uid (C(getpwuid)), as ssh uses it. Cron,
    containers, systemd units and C(env -i) leave C(USER) unset.
  - C(home) is C(HOME) when set, else the home directory of the controller's uid.
  - A value that cannot be found is an error naming the environment variable to set, never an empty string.
options:
  _terms:
    description: What to return, each one of C(cwd), C(user), C(home).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: The reports directory of the directory the user runs from
  ansible.builtin.debug:
    msg: "{{ lookup('sparkforge.stack.run_context', 'cwd') ~ '/reports' }}"
"""

RETURN = r"""
_list:
  description: One string per term, in the order asked.
  type: list
  elements: str
"""

import os
import pwd

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

RUN_DIR_VAR = "SPARKFORGE_RUN_DIR"


def _account():
    try:
        return pwd.getpwuid(os.getuid())
    except KeyError:  # a uid without a passwd entry (a container run with --user N)
        return None


def run_dir(environ=None):
    environ = os.environ if environ is None else environ
    given = environ.get(RUN_DIR_VAR)
    if given is not None:
        if not os.path.isabs(given) or not os.path.isdir(given):
            raise AnsibleLookupError("%s=%r is not an absolute path of a directory: unset it (ansible-playbook "
                                     "then uses its current directory) or give one" % (RUN_DIR_VAR, given))
        return given
    try:
        return os.getcwd()
    except OSError as exc:
        raise AnsibleLookupError("the current directory cannot be read (%s): cd into a directory that exists and "
                                 "run again" % exc)


def user(environ=None):
    environ = os.environ if environ is None else environ
    if environ.get("USER"):
        return environ["USER"]
    account = _account()
    if account is not None and account.pw_name:
        return account.pw_name
    raise AnsibleLookupError("the environment variable USER is unset and uid %d has no passwd entry: set USER (or "
                             "the variable that names the user) to the user's name" % os.getuid())


def home(environ=None):
    environ = os.environ if environ is None else environ
    if environ.get("HOME"):
        return environ["HOME"]
    account = _account()
    if account is not None and account.pw_dir:
        return account.pw_dir
    raise AnsibleLookupError("the environment variable HOME is unset and uid %d has no passwd entry: set HOME"
                             % os.getuid())


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        known = {"cwd": run_dir, "user": user, "home": home}
        values = []
        for term in terms:
            if term not in known:
                raise AnsibleLookupError("run_context knows %s, not %r" % (", ".join(sorted(known)), term))
            values.append(known[term]())
        return values
