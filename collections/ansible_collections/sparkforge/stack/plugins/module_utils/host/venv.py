# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stack venv, made completely or not at all.

``python -m venv`` killed half way (Ctrl-C, a lost connection) leaves a directory with ``bin/python``
but no pip; a task that takes ``bin/python`` as proof then skips the venv on every later run and each
pip call fails "No module named pip".  So a venv counts as made only when its completion marker
(``MARKER``, written last) exists *and* its python imports pip.

* no directory: create it;
* marker and pip: nothing to do;
* pip but no marker (and no ``PENDING`` beside it): a venv of an earlier version, complete, so it is
  marked, not remade;
* anything else (no python, no pip, ``PENDING`` beside it: pip may import while half unpacked):
  incomplete, removed and made again.

A directory is only ever removed when it is a venv (``pyvenv.cfg``) or one this job was making
(``PENDING`` beside it, written before ``python -m venv`` starts and removed after the marker): never
a directory of the user's that merely sits at the venv's path.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil

from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import atomic_write_text, makedirs
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import Job, JobError, Plan, output_tail

MARKER = ".sparkforge-venv-complete"
PENDING = ".sparkforge-venv-pending"


def pending_path(path):
    """The file beside ``path`` that says a venv is being made there (sibling: the venv may not exist yet)."""
    return os.path.join(os.path.dirname(path), "%s.%s" % (PENDING, os.path.basename(path)))


class VenvJob(Job):
    """params: ``path`` (absolute), ``python`` (the interpreter that makes it)."""

    def _pip_problem(self, path):
        """Why the venv's python cannot run pip (None when it can)."""
        python = os.path.join(path, "bin", "python")
        if not os.path.exists(python):
            return "no bin/python"
        rc, out, err = self.system.run([python, "-c", "import pip"])
        return None if rc == 0 else "no pip"

    def plan(self):
        path = self.params["path"]
        if not os.path.isabs(path):
            raise JobError("path must be absolute, got %r" % path, path=path)
        result = dict(changed=False, path=path, action="none", reason="")
        if os.path.lexists(path) and not os.path.isdir(path):
            raise JobError("%s is not a directory: move it away or set another venv path; nothing changed" % path,
                           path=path)
        if not os.path.isdir(path) or not os.listdir(path):
            action, reason = "create", "no venv"
        else:
            problem = self._pip_problem(path)
            marked = os.path.exists(os.path.join(path, MARKER))
            if os.path.exists(pending_path(path)):
                # Killed while this job made it: pip may import yet be half unpacked.
                problem = problem or "its making was interrupted"
            if problem is None and marked:
                return Plan([], result)
            if problem is None:
                action, reason = "mark", "complete (python imports pip) but not marked: made by an earlier run"
            else:
                ours = os.path.exists(os.path.join(path, "pyvenv.cfg")) or os.path.exists(pending_path(path))
                if not ours:
                    raise JobError("%s exists and is not a venv (no pyvenv.cfg): move it away or set another venv "
                                   "path; nothing changed" % path, path=path)
                action, reason = "remake", problem
        words = {"create": "make the venv at %s" % path,
                 "mark": "mark the venv at %s as complete" % path,
                 "remake": "remake the incomplete venv at %s: %s" % (path, reason)}[action]
        prefix = "would " if self.check_mode else ""
        result.update(changed=True, action=action, reason=reason, msg=prefix + words)
        return Plan([words], result, state=dict(action=action))

    def apply(self, plan):
        try:
            return self._apply(plan)
        except OSError as exc:
            raise JobError("cannot %s: %s" % (plan.changes[0], exc), path=self.params["path"])

    def _apply(self, plan):
        path = self.params["path"]
        action = plan.state["action"]
        if action != "mark":
            pending = pending_path(path)
            makedirs(os.path.dirname(path))
            atomic_write_text(pending, "%d\n" % os.getpid())
            if os.path.lexists(path):
                shutil.rmtree(path)
            rc, out, err = self.system.run([self.params["python"], "-m", "venv", path])
            if rc != 0:
                raise JobError("%s -m venv %s failed (rc %d)" % (self.params["python"], path, rc),
                               tail=output_tail(out, err), path=path)
            problem = self._pip_problem(path)
            if problem is not None:
                raise JobError("the venv made at %s has %s: install the python3-venv package (it brings "
                               "ensurepip) and run again" % (path, problem), path=path)
        atomic_write_text(os.path.join(path, MARKER), json.dumps({"python": self.params["python"]}) + "\n")
        if action != "mark":
            os.unlink(pending_path(path))
        return dict(plan.result, msg=plan.changes[0])
