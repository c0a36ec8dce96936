# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One run at a time on a host: the run lock file.

The lock (JSON) names its holder: the controller's hostname, the ansible-playbook PID and that
process's start time (epoch seconds; a PID alone is reused), the run id, and when the host took it.
A second run refuses, naming them.  A lock is stale, and taken over with a message, when

* it was taken from this controller and no ansible-playbook process of the controller has its PID
  with its start time (``live_runs``: what the controller's lookup ``controller_run`` found), or
* it was taken from another controller (whose processes this run cannot see) more than ``lease``
  seconds ago, by the host's clock;
* it is empty (a lock whose text never reached the disk: the host lost power after the link).

A file at the lock's path that is not a lock (any other text: a run killed while writing cannot leave one, see
``_create``) is not sparkforge's: it is refused, naming it (never its text), and never removed.

Taking it is atomic: the text is written aside and hard-linked to the lock's name (``link`` fails when
the name exists), so of two runs starting together exactly one wins; a stale lock is first removed
under a breaker file made with O_EXCL (one run at a time removes it, and only if it is still the lock it
judged stale) and the link then decides again.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import json
import os
import stat
import time

from ansible_collections.sparkforge.stack.plugins.module_utils._common.clock import utc_now
from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import makedirs
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import Job, JobError, Plan

HOLDER_KEYS = ("controller", "pid", "started", "run_id")
# Seconds after which a takeover's breaker file is taken as left by a killed run.
BREAKER_STALE = 60


def read_lock(path):
    """The holder recorded in ``path``: a dict, None when there is no lock, ``{"unreadable": text}``."""
    try:
        with open(path) as handle:
            text = handle.read()
    except (IOError, OSError) as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise
    if not text:
        return {"unreadable": text}
    try:
        holder = json.loads(text)
    except ValueError:
        holder = None
    if not isinstance(holder, dict) or any(key not in holder for key in HOLDER_KEYS):
        st = os.lstat(path)
        # The user's file: described, never quoted (it may hold a secret).
        return {"foreign": "mode %04o, owner uid %d, %d bytes" % (stat.S_IMODE(st.st_mode), st.st_uid, st.st_size)}
    return holder


def describe(holder):
    return "ansible-playbook PID %s on %s, started %s (run %s)" % (
        holder["pid"], holder["controller"],
        utc_now(float(holder["started"])), holder["run_id"])


def stale_reason(holder, owner, live_runs, lease, now):
    """Why ``holder``'s lock is stale (None: its run may still be going)."""
    if "unreadable" in holder:
        return "the lock file is empty (its text never reached the disk)"
    if holder["controller"] == owner["controller"]:
        live = live_runs.get(str(holder["pid"]))
        if live is None:
            return "PID %s is gone on %s" % (holder["pid"], holder["controller"])
        if int(live) != int(holder["started"]):
            return "PID %s on %s is another process now (started at %s, not %s)" % (
                holder["pid"], holder["controller"], live, holder["started"])
        return None
    age = now - float(holder.get("taken_at", 0))
    if age > lease:
        return "taken from another controller %d s ago, longer than the lease (sparkforge_lock_lease: %d s)" % (
            age, lease)
    return None


def _same(holder, other):
    return holder is not None and other is not None and all(holder.get(k) == other.get(k) for k in HOLDER_KEYS)


class RunLockJob(Job):
    """params: ``path``, ``state`` (present/absent), ``owner`` (controller, pid, started, run_id),
    ``live_runs`` (the controller's ansible-playbook PIDs to start times), ``lease`` (seconds), and
    ``now`` (the host's clock; a parameter so the lease is tested without waiting)."""

    def _owner(self):
        owner = dict(self.params["owner"])
        owner["pid"] = int(owner["pid"])
        owner["started"] = int(owner["started"])
        return owner

    def plan(self):
        path = self.params["path"]
        owner = self._owner()
        holder = read_lock(path)
        ours = _same(holder, owner)
        result = dict(changed=False, path=path, holder=holder, taken_over="")
        if self.params["state"] == "absent":
            if not ours:
                return Plan([], result)
            return Plan(["release the run lock %s" % path], dict(result, changed=True), state=dict(holder=holder))
        if ours:
            return Plan([], result)
        if holder is not None and "foreign" in holder:
            raise JobError("sparkforge_lock_path=%s is a file sparkforge did not make (not a run lock: %s): nothing "
                           "was changed; move it away or set sparkforge_lock_path to another path"
                           % (path, holder["foreign"]), path=path)
        if holder is None:
            return Plan(["take the run lock %s" % path], dict(result, changed=True), state=dict(holder=None))
        reason = stale_reason(holder, owner, self.params["live_runs"] or {}, self.params["lease"], self._now())
        if reason is None:
            raise JobError("another run holds the lock %s: %s; wait for it to end, or, if it was stopped, remove the "
                           "file (a lock of a run that is gone is taken over by itself); nothing changed"
                           % (path, describe(holder)), path=path, holder=holder)
        words = "take over the stale run lock %s: %s" % (path, reason)
        return Plan([words], dict(result, changed=True, taken_over=reason, msg=words), state=dict(holder=holder))

    def _now(self):
        return self.params.get("now") or time.time()

    def apply(self, plan):
        path = self.params["path"]
        owner = self._owner()
        if self.params["state"] == "absent":
            # Renamed away first: never remove a lock another run took meanwhile.
            aside = "%s.released.%d" % (path, os.getpid())
            os.rename(path, aside)
            if _same(read_lock(aside), owner):
                os.unlink(aside)
            else:
                os.rename(aside, path)
            return dict(plan.result, msg=plan.changes[0])
        if plan.state["holder"] is not None:
            self._remove_stale(path, plan.state["holder"])
        if not self._create(path, dict(owner, taken_at=self._now())):
            holder = read_lock(path)
            raise JobError("another run took the lock %s first: %s; nothing changed"
                           % (path, describe(holder) if holder and "pid" in holder else "unknown"),
                           path=path, holder=holder)
        return dict(plan.result, msg=plan.changes[0])

    def _remove_stale(self, path, judged):
        """Remove the lock judged stale, under the breaker file (made with O_EXCL): of runs taking over
        together only one removes it, and only if it is still the lock it judged."""
        breaker = path + ".breaking"
        try:
            if time.time() - os.stat(breaker).st_mtime > BREAKER_STALE:
                os.unlink(breaker)  # left by a run killed while taking over
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise
        try:
            os.close(os.open(breaker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except OSError as exc:
            if exc.errno != errno.EEXIST:
                raise
            raise JobError("another run is taking over the stale lock %s now; nothing changed" % path, path=path)
        try:
            current = read_lock(path)
            if current is not None and (_same(current, judged) or ("unreadable" in judged and "unreadable" in current)):
                os.unlink(path)
        finally:
            os.unlink(breaker)

    @staticmethod
    def _create(path, record):
        """Write ``record`` aside, then link it to ``path``: False when ``path`` exists (another run won)."""
        makedirs(os.path.dirname(path))
        aside = "%s.taking.%d" % (path, os.getpid())
        with open(aside, "w") as handle:
            handle.write(json.dumps(record, sort_keys=True) + "\n")
            # On the disk before the link: a lock a power loss cuts short would read as not a lock.
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(aside, path)
        except OSError as exc:
            if exc.errno != errno.EEXIST:
                raise
            return False
        finally:
            os.unlink(aside)
        return True


# The controller's side (lookup controller_run): its ansible-playbook processes and their start times.

def process_start(pid, proc="/proc"):
    """When process ``pid`` started (whole epoch seconds), None when there is none: /proc/<pid>/stat's
    22nd field (clock ticks after boot; proc(5)) plus the boot time (/proc/stat's btime)."""
    try:
        with open(os.path.join(proc, str(pid), "stat")) as handle:
            stat = handle.read()
        with open(os.path.join(proc, "stat")) as handle:
            btime = [int(line.split()[1]) for line in handle if line.startswith("btime ")][0]
    except (IOError, OSError, IndexError, ValueError):
        return None
    # The command name (field 2) may hold spaces and parentheses: count fields after its last ")".
    ticks = int(stat.rsplit(")", 1)[1].split()[19])
    return int(btime + ticks // os.sysconf("SC_CLK_TCK"))


def is_playbook(pid, proc="/proc"):
    try:
        with open(os.path.join(proc, str(pid), "cmdline"), "rb") as handle:
            argv = handle.read().split(b"\0")
    except (IOError, OSError):
        return False
    return any(os.path.basename(arg) == b"ansible-playbook" for arg in argv[:3])


def playbook_runs(proc="/proc"):
    """Every ansible-playbook process of this machine: PID (text) to start time."""
    runs = {}
    for name in os.listdir(proc):
        if name.isdigit() and is_playbook(name, proc):
            started = process_start(name, proc)
            if started is not None:
                runs[name] = started
    return runs


def this_run(pid=None, proc="/proc"):
    """The ansible-playbook process this one runs under: its PID, or None. A lookup runs in a worker forked from
    ansible-playbook, whose command line is the same: the run is the topmost of the ansible-playbook processes
    above this one (a worker's PID is gone after its task, and a second run would take the lock as stale)."""
    pid = pid or os.getpid()
    found = None
    while pid and pid > 1:
        if is_playbook(pid, proc):
            found = pid
        elif found is not None:
            break
        try:
            with open(os.path.join(proc, str(pid), "stat")) as handle:
                pid = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (IOError, OSError, ValueError, IndexError):
            break
    return found
