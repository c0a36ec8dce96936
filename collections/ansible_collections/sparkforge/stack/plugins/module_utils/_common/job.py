# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one shape of a build or install job, its one error type and its seam to the host.

* ``Job(params, system, check_mode=False)``: ``plan()`` probes the host and returns a ``Plan``
  (what would change and why, and the result a run that stops there reports); ``apply(plan)``
  makes the changes and returns the module's result; ``run(diff=False)`` is plan, then (unless
  check mode or nothing to change) apply: what every module calls.
* ``JobError``: every failure of a job, with the message, the tail of the failing tool's output
  (``tail``, None when no tool ran) and the result fields the module reports with it.  Bad input
  raises it from ``plan()``, before anything on the host changed.
* ``system``: the boundary to the host (commands, downloads, warnings, tool lookup): ``run(cmd,
  env=None, cwd=None) -> (rc, out, err)`` (rc 127 when the program does not exist, as a shell
  says), ``fetch(url, timeout) -> (response or None, info)`` (fetch_url's shape), ``warn(msg)``,
  ``which(name, opt_dirs=())``.  The module
  passes ``AnsibleSystem`` (run_command, fetch_url: TLS verified, proxies honoured), the
  integration tests ``LocalSystem`` (subprocess, open_url), unit tests a stand-in that answers the
  commands a host would.  Files are read and written with the standard library: tests give the
  job directories under a temporary path.

No AnsibleModule needed: unit tests import this directly.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import subprocess
from abc import ABC, abstractmethod
from urllib.error import HTTPError, URLError

from ansible_collections.sparkforge.stack.plugins.module_utils._common import run_env

# How much of a failing tool's output a JobError keeps (the end is where tools say why).
TAIL_CHARS = 2000


class JobError(Exception):
    """A job that failed: ``msg``, the tool's output ``tail`` (or None) and the result fields
    (``result``) that fail_json reports with the message."""

    def __init__(self, msg, tail=None, **result):
        Exception.__init__(self, msg)
        self.msg = msg
        self.tail = tail
        self.result = result

    def fail_args(self):
        """fail_json's keyword arguments: the message, the result fields and, where a tool's
        output was kept, ``output_tail``."""
        args = dict(self.result)
        if self.tail is not None and "output_tail" not in args:
            args["output_tail"] = self.tail
        args["msg"] = self.msg
        return args


def output_tail(out, err=""):
    """The last TAIL_CHARS of what a tool printed (stderr first: that is where tools say why)."""
    text = (err or "").strip() or (out or "").strip()
    return text[-TAIL_CHARS:]


def git_output(system, args, cwd):
    """``git args`` in ``cwd`` through ``system``: its stripped output; JobError (with git's output)
    when it fails."""
    rc, out, err = system.run(["git"] + list(args), cwd=cwd)
    if rc != 0:
        raise JobError("git %s failed in %s: %s" % (" ".join(args), cwd, err.strip()), tail=output_tail(out, err))
    return out.strip()


def capture(system, cmd, cwd=None):
    """(rc, stdout and stderr as one text) of ``cmd`` through ``system``: for tools whose answer may
    come on either stream."""
    rc, out, err = system.run(cmd, cwd=cwd)
    return rc, out + err


class Plan:
    """What a job would change and why.

    ``changes``: one line per change ("what: why"), empty when the host is as wanted;
    ``result``: the module's result of a run that stops after the plan (check mode, or nothing to do);
    ``state``: what ``apply`` needs, the job's own business.
    """

    def __init__(self, changes, result, state=None):
        self.changes = list(changes)
        self.result = result
        self.state = state if state is not None else {}

    @property
    def changed(self):
        return bool(self.changes)


class Job(ABC):
    """Base of the build and install jobs.  Subclasses implement ``plan`` and ``apply`` (a job missing
    either cannot be made)."""

    def __init__(self, params, system, check_mode=False):
        self.params = dict(params)
        self.system = system
        self.check_mode = check_mode

    @abstractmethod
    def plan(self):
        """Probe the host and return a ``Plan``; changes nothing.  Raises JobError."""

    @abstractmethod
    def apply(self, plan):
        """Make the plan's changes; the module's result.  Raises JobError."""

    def run(self, diff=False):
        """The module's result: the plan's in check mode or when nothing changes, else apply's."""
        plan = self.plan()
        if self.check_mode or not plan.changed:
            return self.report(plan, diff)
        return self.applied(self.apply(plan), plan, diff)

    def report(self, plan, diff):
        """The result of a run that stops after the plan (a hook for diff-capable jobs)."""
        return plan.result

    def applied(self, result, plan, diff):
        """The result of a run that applied the plan (a hook for diff-capable jobs)."""
        return result


class LocalSystem:
    """The host this process runs on, without a module: subprocess, Ansible's open_url (TLS
    verified, proxies from the environment) and shutil.which.  Warnings are
    kept in ``warnings`` for the caller to show.  Each command gets the run's own environment: this
    process's without the host's PYTHON*/PIP_* variables (run_env), then the caller's ``env``; the
    names left out are in ``environment_dropped``."""

    def __init__(self):
        self.warnings = []
        self.environment_dropped = run_env.dropped(os.environ)

    def run(self, cmd, env=None, cwd=None):
        try:
            proc = subprocess.Popen(cmd, env=run_env.child_environ(os.environ, env)[0], cwd=cwd,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as exc:  # no such program: what a shell answers
            return 127, "", str(exc)
        out, err = proc.communicate()
        return proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")

    def fetch(self, url, timeout):
        # Imported here, not with this file: every module imports job.py, and urls (TLS, email, http.client)
        # costs about 0.1 s of CPU a module run on an x86 host, 0.3-0.6 s on the emulated arm64 one; only
        # LocalSystem downloads with it (a module's downloads go through the fetch_url it passes).
        from ansible.module_utils.urls import open_url  # pylint: disable=import-outside-toplevel
        try:
            response = open_url(url, timeout=timeout, validate_certs=True, follow_redirects="all", use_proxy=True)
        except HTTPError as exc:
            return None, {"status": exc.code, "msg": str(exc.reason)}
        except URLError as exc:
            return None, {"status": -1, "msg": str(exc.reason)}
        return response, {"status": response.getcode()}

    def warn(self, msg):
        self.warnings.append(msg)

    def which(self, name, opt_dirs=()):
        found = shutil.which(name)
        if not found and opt_dirs:
            found = shutil.which(name, path=os.pathsep.join(opt_dirs))
        return found


class AnsibleSystem:
    """The host as a module sees it: AnsibleModule's run_command, get_bin_path and warn, and the
    ``fetch_url`` the module passes (ansible.module_utils.urls', kept out of this file's imports).

    Made once per module: the module's process environment becomes the run's own (run_env.scrub: the
    host's PYTHON*/PIP_* variables removed, since run_command can add variables but not remove them),
    so every command the job starts, and every ``dict(os.environ)`` it builds, is without them; the
    names removed are in ``environment_dropped``."""

    def __init__(self, module, fetch_url=None):
        self.module = module
        self.fetch_url = fetch_url
        self.environment_dropped = run_env.scrub()

    def run(self, cmd, env=None, cwd=None):
        try:
            # Not run_command's own handling: it ends the module when the program is missing, and a
            # job probes for tools that may be absent (nvcc on a CPU-only build).
            return self.module.run_command(cmd, environ_update=env or {}, cwd=cwd, handle_exceptions=False)
        except OSError as exc:
            return 127, "", str(exc)

    def fetch(self, url, timeout):
        if self.fetch_url is None:
            raise JobError("this job downloads %s but its module gave no fetch_url" % url)
        return self.fetch_url(self.module, url, timeout=timeout)

    def warn(self, msg):
        self.module.warn(msg)

    def which(self, name, opt_dirs=()):
        return self.module.get_bin_path(name, opt_dirs=list(opt_dirs))
