"""The run lock: one run at a time on a host, stale locks found and taken over (real files, real processes)."""

import json
import multiprocessing
import os

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import JobError, LocalSystem
from ansible_collections.sparkforge.stack.plugins.module_utils.host.run_lock import (
    RunLockJob, playbook_runs, process_start, read_lock, this_run)

STARTED = 1764360000


def _owner(pid, controller="ctl-a", started=STARTED):
    return {"controller": controller, "pid": pid, "started": started, "run_id": "%s-%d" % (controller, pid)}


def _job(path, owner, live_runs=None, state="present", check_mode=False, lease=3600, now=None):
    params = {"path": str(path), "state": state, "owner": owner, "live_runs": live_runs or {}, "lease": lease,
              "now": now}
    return RunLockJob(params, LocalSystem(), check_mode)


def _take(args):
    path, pid, start_gate = args
    # The racers are all alive (PID 99, of the stale lock, is not).
    live = {str(p): STARTED for p in range(100, 140)}
    start_gate.wait()
    try:
        _job(path, _owner(pid), live).run()
        return pid
    except JobError:
        return None


@pytest.mark.parametrize("over_a_stale_lock", [False, True])
def test_of_runs_starting_together_exactly_one_takes_the_lock(tmp_path, over_a_stale_lock):
    path = tmp_path / "lock" / "sparkforge.lock"
    if over_a_stale_lock:
        # A lock of PID 99, which none of the racers counts as live.
        _job(path, _owner(99), {"99": STARTED}).run()
    # Spawned, not forked: a fork of a process with threads (pytest-xdist's worker) can inherit a held lock.
    context = multiprocessing.get_context("spawn")
    manager = context.Manager()
    gate = manager.Barrier(8)
    with context.Pool(8) as pool:
        won = [pid for pid in pool.map(_take, [(str(path), 100 + n, gate) for n in range(8)]) if pid]
    assert len(won) == 1, won
    assert read_lock(str(path))["pid"] == won[0]
    assert sorted(os.listdir(str(path.parent))) == ["sparkforge.lock"], "a file left aside"


def test_a_live_holder_is_named_and_a_check_run_takes_nothing(tmp_path):
    path = tmp_path / "sparkforge.lock"
    preview = _job(path, _owner(100), check_mode=True).run()
    assert preview["changed"] and not path.exists(), preview
    first = _job(path, _owner(100), {"100": STARTED}).run()
    assert first["changed"] and read_lock(str(path))["run_id"] == "ctl-a-100"
    assert not _job(path, _owner(100), {"100": STARTED}).run()["changed"], "the holder retaking its own lock"
    for check_mode in (True, False):
        with pytest.raises(JobError) as refused:
            _job(path, _owner(200), {"100": STARTED, "200": STARTED}, check_mode=check_mode).run()
        assert "PID 100 on ctl-a, started 2025-11-28T20:00:00Z (run ctl-a-100)" in refused.value.msg, \
            refused.value.msg
    assert read_lock(str(path))["pid"] == 100
    # Releasing: only the holder removes it.
    assert not _job(path, _owner(200), state="absent").run()["changed"] and path.exists()
    assert _job(path, _owner(100), state="absent", check_mode=True).run()["changed"] and path.exists()
    assert _job(path, _owner(100), state="absent").run()["changed"] and not path.exists()


def test_stale_by_pid_gone_or_reused_on_the_same_controller(tmp_path):
    path = tmp_path / "sparkforge.lock"
    _job(path, _owner(100), {"100": STARTED}).run()
    reused = _job(path, _owner(200), {"100": STARTED + 50, "200": STARTED}).run()
    assert "PID 100 on ctl-a is another process now" in reused["taken_over"], reused
    assert read_lock(str(path))["pid"] == 200
    gone = _job(path, _owner(300), {"300": STARTED}).run()
    assert gone["taken_over"] == "PID 200 is gone on ctl-a" and read_lock(str(path))["pid"] == 300, gone


def test_stale_by_lease_from_another_controller(tmp_path):
    path = tmp_path / "sparkforge.lock"
    _job(path, _owner(100, controller="ctl-b"), now=1000.0).run()
    # Another controller's PID cannot be seen from here: within the lease it is live, whatever live_runs says.
    with pytest.raises(JobError) as refused:
        _job(path, _owner(100), {}, lease=3600, now=1000.0 + 3599).run()
    assert "PID 100 on ctl-b" in refused.value.msg
    over = _job(path, _owner(100), {}, lease=3600, now=1000.0 + 3601).run()
    assert "longer than the lease (sparkforge_lock_lease: 3600 s)" in over["taken_over"], over
    assert read_lock(str(path))["controller"] == "ctl-a"


def test_a_file_that_is_not_a_lock_is_refused_and_kept_and_an_empty_one_taken_over(tmp_path):
    """Issue 52: a file at sparkforge_lock_path that is not a lock is the user's (a run killed while writing the
    lock cannot leave one: it is written aside, fsynced, then linked): refused, never removed or quoted. Before,
    it was taken over as stale, its first 200 characters printed. An empty one (a power loss after the link)
    is a lock of sparkforge's whose text never reached the disk: taken over."""
    path = tmp_path / "sparkforge.lock"
    for text in ("{\"pid\": 1", "TOKEN=secret\n", "{}", "[1, 2]"):
        path.write_text(text)
        os.chmod(str(path), 0o600)
        for check in (True, False):
            with pytest.raises(JobError) as refused:
                _job(path, _owner(100), check_mode=check).run()
            msg = refused.value.msg
            assert msg.startswith("sparkforge_lock_path=%s is a file sparkforge did not make (not a run lock: mode 0600"
                                  % path) and "set sparkforge_lock_path to another path" in msg, msg
            assert "secret" not in msg and "nothing was changed" in msg
            assert path.read_text() == text, "O10"
    path.write_text("")
    taken = _job(path, _owner(100)).run()
    assert "empty" in taken["taken_over"] and json.loads(path.read_text())["pid"] == 100


def test_this_machines_processes_are_read_from_proc():
    assert isinstance(process_start(os.getpid()), int)
    assert process_start(2 ** 22 + 1) is None
    assert all(isinstance(v, int) for v in playbook_runs().values())


def test_this_run_is_the_topmost_ansible_playbook_above_a_forked_worker(tmp_path):
    """A lookup runs in a worker forked from ansible-playbook (the same command line): the run is the process the
    user started, not the worker (gone after its task: a second run found the lock stale and took it)."""
    def process(pid, ppid, argv):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text("%d (%s) S %d 0 0\n" % (pid, os.path.basename(argv[0]), ppid))
        (tmp_path / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    playbook = ["/venv/bin/python3", "/venv/bin/ansible-playbook", "site.yml"]
    process(100, 1, ["/bin/bash"])
    process(200, 100, playbook)
    process(300, 200, playbook)  # the worker
    process(400, 300, ["/bin/sh", "-c", "lookup helper"])
    assert this_run(400, str(tmp_path)) == 200
    assert this_run(300, str(tmp_path)) == 200
    assert this_run(100, str(tmp_path)) is None
