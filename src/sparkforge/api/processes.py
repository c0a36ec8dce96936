"""The processes of a run on this machine, found by a token in their environment, and ended."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import atexit
import os
import threading
import time

# Every run's processes carry this variable in their environment, with a value of its own: ansible-runner
# kills ansible-playbook's process group on cancel and timeout, but Ansible's worker processes leave that
# group (os.setsid) and async tasks daemonize, so they would run on (a canceled build, for hours). The
# token finds them all, on this machine, even after they were reparented.
RUN_TOKEN_VAR = "SPARKFORGE_RUN_TOKEN"
_ACTIVE_TOKENS = set()
_ACTIVE_LOCK = threading.Lock()


def run_processes(token):
    """Pids of the processes on this machine whose environment carries RUN_TOKEN_VAR=token (this
    process excluded; zombies too: they hold nothing)."""
    needle = ("%s=%s" % (RUN_TOKEN_VAR, token)).encode()
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:  # no /proc: only ansible-runner's own kill of the process group applies
        return found
    me = os.getpid()
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open("/proc/%s/environ" % name, "rb") as handle:
                if needle not in handle.read().split(b"\0"):
                    continue
            with open("/proc/%s/stat" % name) as handle:
                if handle.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
        except OSError:
            continue
        found.append(int(name))
    return found


def end_run_processes(token, grace=5.0):
    """End every process of the run ``token``: SIGTERM to each one's process group (its own pid when it
    shares ours), SIGKILL to what is left after ``grace`` seconds.  Returns the pids that were alive."""
    import signal

    pids = run_processes(token)
    if not pids:
        return []
    own_group = os.getpgrp()

    def send(sig, pid):
        try:
            group = os.getpgid(pid)
            if group != own_group:
                os.killpg(group, sig)
            else:
                os.kill(pid, sig)
        except OSError:
            pass

    for pid in pids:
        send(signal.SIGTERM, pid)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and run_processes(token):
        time.sleep(0.1)
    for pid in run_processes(token):
        send(signal.SIGKILL, pid)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and run_processes(token):
        time.sleep(0.1)
    return pids


def _end_active_runs():
    """At interpreter exit: end the processes of runs still in flight (a stream nobody finished)."""
    with _ACTIVE_LOCK:
        tokens = list(_ACTIVE_TOKENS)
    for token in tokens:
        end_run_processes(token, grace=2.0)


atexit.register(_end_active_runs)
