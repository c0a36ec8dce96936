# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stack venv, made completely or not at all, and never one that sparkforge did not make.

``python -m venv`` killed half way (Ctrl-C, a lost connection) leaves a directory with ``bin/python``
but no pip; a task that takes ``bin/python`` as proof then skips the venv on every later run and each
pip call fails "No module named pip".  So a venv counts as made only when its completion marker
(``MARKER``, written last) exists *and* its python imports pip.

Whose it is (``ownership``): sparkforge's own when its marker is in it, or when ``PENDING`` sits beside it
(written before ``python -m venv`` starts, removed after the marker: a run of this job was making it). Any
other directory at the path is the user's, whatever it holds: a venv made with ``uv venv`` or
``python -m venv --without-pip`` has no pip yet holds the user's packages, and one with pip may be theirs
too. Such a venv is refused, naming the two choices, unless adopted (``adopt``): then pip is bootstrapped
with the venv's own ``python -m ensurepip`` when it lacks pip, and the marker records the adoption; the venv
is never removed. A directory that is not a venv (no ``pyvenv.cfg``) is refused even when adoption is asked.

* no directory, or an empty one: create it;
* ours, marker and pip: nothing to do;
* ours, left incomplete (no python, no pip, ``PENDING`` beside it: pip may import while half unpacked):
  removed and made again;
* adopted (the marker says so) without pip: pip bootstrapped again, never removed;
* the user's venv, adopted: pip bootstrapped when missing, then marked as adopted;
* the user's venv or directory, not adopted: refused before any change.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import json
import os
import shutil

from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import atomic_write_text, makedirs
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import Job, JobError, Plan, output_tail

MARKER = ".sparkforge-venv-complete"
PENDING = ".sparkforge-venv-pending"
# The variables a refusal names (the manifest's; a role's own venv variable is named by the caller).
ADOPT_VARIABLE = "sparkforge_venv_adopt"


def pending_path(path):
    """The file beside ``path`` that says a venv is being made there (sibling: the venv may not exist yet)."""
    return os.path.join(os.path.dirname(path), "%s.%s" % (PENDING, os.path.basename(path)))


def read_marker(path):
    """The venv's marker as a dict ({} when it is there but unreadable as JSON), None when absent."""
    marker = os.path.join(path, MARKER)
    if not os.path.exists(marker):
        return None
    try:
        with open(marker) as handle:
            data = json.load(handle)
    except (IOError, OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _packages(path):
    """The distributions a venv's site-packages hold (their dist-info names), for the words of a refusal."""
    found = glob.glob(os.path.join(path, "lib", "python*", "site-packages", "*.dist-info"))
    return sorted(os.path.basename(d)[:-len(".dist-info")] for d in found)


def ownership(path):
    """(state, words) for the directory at ``path``: ``absent`` (nothing there, or an empty directory: nothing
    to lose), ``ours`` (marker, not adopted), ``adopted`` (marker saying so), ``pending`` (this job was making
    it), ``user-venv`` (a venv sparkforge did not make), ``user-dir`` (a directory that is not a venv) or
    ``not-dir`` (something else). Reads only."""
    if not os.path.lexists(path):
        return "absent", "nothing at %s" % path
    if not os.path.isdir(path):
        return "not-dir", "%s is not a directory" % path
    if os.path.exists(pending_path(path)):
        return "pending", "a venv an earlier run of sparkforge was making (%s beside it)" % os.path.basename(
            pending_path(path))
    if not os.listdir(path):
        return "absent", "an empty directory at %s" % path
    marker = read_marker(path)
    if marker is not None:
        if marker.get("adopted"):
            return "adopted", "the venv at %s, adopted by an earlier run" % path
        return "ours", "sparkforge's venv at %s" % path
    if not os.path.exists(os.path.join(path, "pyvenv.cfg")):
        return "user-dir", "%s is a directory sparkforge did not make and not a venv (no pyvenv.cfg)" % path
    packages = _packages(path)
    pip = any(p.split("-")[0].lower() == "pip" for p in packages)
    held = [p for p in packages if p.split("-")[0].lower() not in ("pip", "setuptools")]
    return "user-venv", "%s is a venv sparkforge did not make (no %s in it; %s; %s)" % (
        path, MARKER, "with pip" if pip else "without pip",
        "it holds %d package(s): %s" % (len(held), ", ".join(held[:5]) + (", ..." if len(held) > 5 else ""))
        if held else "no other packages")


def refusal(variable, path, adopt=False, adopt_variable=ADOPT_VARIABLE):
    """The message refusing the directory at ``path``: None when sparkforge may use it (nothing there, its own, or
    the user's venv and ``adopt``)."""
    state, words = ownership(path)
    if state == "user-venv" and not adopt:
        return ("%s=%s: %s: nothing was changed. Either adopt it (set %s: true: sparkforge then installs into it, "
                "bootstraps pip with its own python -m ensurepip when it has none, and never removes it or its "
                "packages), or set %s to another path" % (variable, path, words, adopt_variable, variable))
    if state == "user-dir":
        return ("%s=%s: %s: nothing was changed; move it away or set %s to another path (only a venv can be "
                "adopted)" % (variable, path, words, variable))
    return None


class VenvJob(Job):
    """params: ``path`` (absolute), ``python`` (the interpreter that makes it), ``adopt`` (use a venv sparkforge
    did not make, keeping what it holds), ``variable`` and ``adopt_variable`` (named in a refusal)."""

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
        variable = self.params.get("variable") or "sparkforge_venv"
        adopt = bool(self.params.get("adopt"))
        result = dict(changed=False, path=path, action="none", reason="")
        state, words = ownership(path)
        if state == "not-dir":
            raise JobError("%s is not a directory: move it away or set another venv path; nothing changed" % path,
                           path=path)
        why = refusal(variable, path, adopt, self.params.get("adopt_variable") or ADOPT_VARIABLE)
        if why:
            raise JobError(why, path=path, found=words)
        if state == "absent":
            action, reason = "create", "no venv"
        else:
            problem = self._pip_problem(path)
            if state == "pending":
                # Killed while this job made it: pip may import yet be half unpacked.
                problem = problem or "its making was interrupted"
            if problem is None and state in ("ours", "adopted"):
                return Plan([], result)
            if state in ("ours", "pending"):
                action, reason = "remake", problem
            elif problem == "no bin/python":
                raise JobError("%s=%s: %s has no bin/python, so pip cannot be bootstrapped in it: nothing was changed; "
                               "repair it yourself or set %s to another path" % (variable, path, words, variable),
                               path=path, found=words)
            else:
                # The user's venv (adopted now or earlier): pip bootstrapped in place, its packages kept.
                action, reason = "adopt", problem or "complete (python imports pip)"
        words_of = {"create": "make the venv at %s" % path,
                    "remake": "remake the incomplete venv at %s: %s" % (path, reason),
                    "adopt": "adopt the venv at %s (%s), keeping its packages%s" % (
                        path, reason, ": bootstrap pip with its own python -m ensurepip" if reason == "no pip"
                        else "")}
        prefix = "would " if self.check_mode else ""
        result.update(changed=True, action=action, reason=reason, msg=prefix + words_of[action], found=words)
        return Plan([words_of[action]], result, state=dict(action=action, reason=reason))

    def apply(self, plan):
        try:
            return self._apply(plan)
        except OSError as exc:
            raise JobError("cannot %s: %s" % (plan.changes[0], exc), path=self.params["path"])

    def _apply(self, plan):
        path = self.params["path"]
        action = plan.state["action"]
        marker = {"python": self.params["python"]}
        if action == "adopt":
            if plan.state["reason"] == "no pip":
                python = os.path.join(path, "bin", "python")
                rc, out, err = self.system.run([python, "-m", "ensurepip", "--default-pip"])
                if rc != 0:
                    raise JobError("%s -m ensurepip failed (rc %d) in the venv being adopted at %s; its packages are "
                                   "as they were: install the python3-venv package (it brings ensurepip) or give "
                                   "the venv pip yourself, then run again" % (python, rc, path),
                                   tail=output_tail(out, err), path=path)
            marker = {"python": os.path.join(path, "bin", "python"), "adopted": True}
        else:
            pending = pending_path(path)
            makedirs(os.path.dirname(path))
            atomic_write_text(pending, "%d\n" % os.getpid())
            # Removed only when the plan found it ours (its marker, or the pending file beside it); an empty
            # directory at the path is made into the venv in place.
            if action == "remake" and os.path.lexists(path):
                shutil.rmtree(path)
            rc, out, err = self.system.run([self.params["python"], "-m", "venv", path])
            if rc != 0:
                raise JobError("%s -m venv %s failed (rc %d)" % (self.params["python"], path, rc),
                               tail=output_tail(out, err), path=path)
        problem = self._pip_problem(path)
        if problem is not None:
            raise JobError("the venv at %s has %s: install the python3-venv package (it brings "
                           "ensurepip) and run again" % (path, problem), path=path)
        atomic_write_text(os.path.join(path, MARKER), json.dumps(marker, sort_keys=True) + "\n")
        if action != "adopt":
            os.unlink(pending_path(path))
        return dict(plan.result, msg=plan.changes[0])
