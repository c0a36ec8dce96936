# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Machinery shared by the long-build modules (Triton/LLVM, PyTorch, domains).

Plain functions and small classes, no Ansible imports, so unit tests call them
directly.  What every long build needs:

* ``auto_jobs``: a parallelism that fits in RAM (the OOM killer is the usual
  way a PyTorch build dies at 92%).
* ``cache_key``: one hash over every input of a build; same key, same wheel.
* ``BuildLock``: a non-blocking ``flock`` on the work dir so two runs never
  build into the same tree.
* ``StatusFile``: a small JSON file (phase, ninja's [done/total], elapsed)
  that the roles print while they poll an ``async`` task.
* ``run_logged``: runs one phase with its output appended to a log on disk,
  feeding ninja progress into the status file; on failure raises
  ``BuildFailed`` with the phase and the tail of the log.
* ``atomic_publish``: a wheel appears in the wheel dir whole or not at all.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import fcntl
import hashlib
import json
import os
import re
import subprocess
import time

from ansible_collections.sparkforge.stack.plugins.module_utils._common.clock import utc_now
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import JobError
from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import (
    atomic_write_text,
    canonical_json,
    log_tail,
    makedirs,
    read_meminfo,
)

GIB = 1024 ** 3

# ninja prints "[1234/5678] Building CXX object ..." for each finished edge.
_NINJA_PROGRESS = re.compile(r"^\[(\d+)/(\d+)\]")


# One error type for every job (module_utils/_common/job.py); the two older names stay as aliases so
# the callers that still spell them keep working.


class BuildLocked(JobError):
    def __init__(self, lock_path, holder):
        self.lock_path = lock_path
        self.holder = holder
        JobError.__init__(
            self,
            "another build holds the lock %s (%s); wait for it to finish or stop it"
            % (lock_path, holder or "holder unknown"),
        )


class BuildFailed(JobError):
    def __init__(self, phase, returncode, log_path, tail):
        self.phase = phase
        self.returncode = returncode
        self.log_path = log_path
        JobError.__init__(
            self,
            "phase '%s' failed with exit code %s; full log: %s\n--- last lines of the log ---\n%s"
            % (phase, returncode, log_path, tail),
            tail=tail,
        )


def auto_jobs(cores, mem_available_bytes, mem_per_job_gib, reserve_gib=2.0, max_jobs=None):
    """Jobs that fit both the cores and the RAM.

    ``mem_per_job_gib`` is the peak resident size of one compile job of the
    project being built (documented per module); ``reserve_gib`` is kept free
    for the system and the linker.  Never less than one job.
    """
    if cores < 1:
        cores = 1
    usable = max(0.0, float(mem_available_bytes) / GIB - float(reserve_gib))
    by_mem = int(usable // float(mem_per_job_gib)) if mem_per_job_gib > 0 else cores
    jobs = max(1, min(cores, by_mem))
    if max_jobs:
        jobs = min(jobs, int(max_jobs))
    return jobs


def resolve_jobs(jobs, mem_per_job_gib, reserve_gib=2.0, meminfo_path="/proc/meminfo"):
    """Turn the ``jobs`` option ('auto' or a number) into (jobs, why)."""
    if jobs is None or str(jobs) == "auto":
        cores = os.cpu_count() or 1
        mem = read_meminfo(meminfo_path)["available"]
        value = auto_jobs(cores, mem, mem_per_job_gib, reserve_gib)
        why = "auto: %d cores, %.1f GiB available, %.1f GiB per job, %.1f GiB reserved" % (
            cores, float(mem) / GIB, mem_per_job_gib, reserve_gib)
        return value, why
    try:
        value = int(jobs)
    except (TypeError, ValueError):
        raise JobError("jobs must be 'auto' or a positive whole number, got %r" % (jobs,))
    if value < 1:
        raise JobError("jobs must be 'auto' or a positive whole number, got %r" % (jobs,))
    return value, "set explicitly"


def cache_key(inputs):
    """sha256 over the canonical JSON of every build input."""
    return hashlib.sha256(canonical_json(inputs).encode("utf-8")).hexdigest()


class BuildLock:
    """Exclusive, non-blocking lock on ``<work_dir>/<name>``.

    ``flock`` is released by the kernel when the holder dies, so a killed
    build never leaves a stale lock behind.
    """

    def __init__(self, path):
        self.path = path
        self._fd = None

    def acquire(self):
        makedirs(os.path.dirname(self.path) or ".")
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except (IOError, OSError) as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                os.close(fd)
                raise
            holder = ""
            try:
                with open(self.path) as handle:
                    holder = handle.read().strip()
            except (IOError, OSError):
                pass
            os.close(fd)
            raise BuildLocked(self.path, holder)
        os.ftruncate(fd, 0)
        os.write(fd, ("pid %d since %s" % (os.getpid(), utc_now())).encode())
        self._fd = fd
        return self

    def release(self):
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()
        return False


class StatusFile:
    """Progress of a build, rewritten atomically so readers never see half a file."""

    def __init__(self, path, build, log_path=None, clock=time.time):
        self.path = path
        self.build = build
        self.log_path = log_path
        self._clock = clock
        self.started = clock()
        self.state = {
            "build": build,
            "pid": os.getpid(),
            "phase": "starting",
            "phases_done": [],
            "done": None,
            "total": None,
            "percent": None,
            "state": "running",
            "log": log_path,
            "message": "",
        }
        self._last_write = 0.0

    def update(self, force=True, **fields):
        self.state.update(fields)
        if self.state.get("done") is not None and self.state.get("total"):
            self.state["percent"] = round(100.0 * self.state["done"] / self.state["total"], 1)
        now = self._clock()
        self.state["elapsed_s"] = round(now - self.started, 1)
        self.state["updated_at"] = utc_now(now)
        # Ninja can finish hundreds of edges a second: write at most twice a second.
        if force or now - self._last_write >= 0.5:
            atomic_write_text(self.path, json.dumps(self.state, indent=1, sort_keys=True) + "\n")
            self._last_write = now

    def phase(self, name, message=""):
        current = self.state.get("phase")
        if current and current not in ("starting", name) and current not in self.state["phases_done"]:
            self.state["phases_done"].append(current)
        self.update(phase=name, done=None, total=None, percent=None, message=message)

    def finish(self, state, message=""):
        current = self.state.get("phase")
        if state == "done" and current and current not in self.state["phases_done"]:
            self.state["phases_done"].append(current)
        self.update(state=state, message=message)


def read_status(path):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError):
        return None


def parse_ninja_progress(line):
    """Return (done, total) from a ninja status line, or None."""
    match = _NINJA_PROGRESS.match(line.strip())
    if not match:
        return None
    return int(match.group(1)), int(match.group(2))


def run_logged(cmd, log_path, phase, status=None, cwd=None, env=None, tail_lines=40):
    """Run ``cmd`` with its output appended to ``log_path``.

    Ninja progress lines update ``status``.  A non-zero exit raises
    ``BuildFailed`` carrying the phase and the tail of the log.
    """
    makedirs(os.path.dirname(log_path) or ".")
    if status is not None:
        status.phase(phase)
    with open(log_path, "ab") as log:
        log.write(("\n=== phase %s: %s (cwd %s) at %s ===\n" % (
            phase, " ".join(cmd), cwd or os.getcwd(), utc_now())).encode())
        log.flush()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for raw in iter(proc.stdout.readline, b""):
            log.write(raw)
            if status is not None:
                progress = parse_ninja_progress(raw.decode("utf-8", "replace"))
                if progress:
                    status.update(force=False, done=progress[0], total=progress[1])
        proc.stdout.close()
        returncode = proc.wait()
        log.flush()
    if returncode != 0:
        if status is not None:
            status.finish("failed", "phase %s exited %d" % (phase, returncode))
        raise BuildFailed(phase, returncode, log_path, log_tail(log_path, tail_lines))
    return returncode


def command_version(cmd):
    """First line of ``cmd --version`` (or '' when the tool is missing)."""
    try:
        out = subprocess.check_output(cmd + ["--version"], stderr=subprocess.STDOUT)
    except (OSError, subprocess.CalledProcessError):
        return ""
    lines = out.decode("utf-8", "replace").strip().splitlines()
    return lines[0] if lines else ""


def git(args, cwd, check=True):
    proc = subprocess.Popen(["git"] + list(args), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate()
    if check and proc.returncode != 0:
        raise JobError("git %s failed in %s: %s" % (" ".join(args), cwd, err.decode("utf-8", "replace").strip()))
    return out.decode("utf-8", "replace").strip()


def git_head(src):
    return git(["rev-parse", "HEAD"], cwd=src)


def git_is_dirty(src):
    return bool(git(["status", "--porcelain", "--untracked-files=no"], cwd=src))
