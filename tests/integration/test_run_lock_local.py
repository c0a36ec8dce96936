"""The run lock through spark.yml on the local stand-in host (issue 42): a live run's lock refused, naming it;
a stale one taken over with a message and released by the playbook's last play."""

import json
import socket
import subprocess
import time

from test_check_mode_local import TORCH_ONLY, make_host, playbook, template_venv  # noqa: F401 (a fixture)


def test_a_live_lock_is_refused_and_a_stale_one_taken_over_and_released(tmp_path, template_venv):  # noqa: F811
    host = make_host(tmp_path, template_venv, "existing", components=TORCH_ONLY)
    lock = host["prefix"] / "venv.lock"
    other = {"controller": "ctl-other", "pid": 4242, "started": 1764360000, "run_id": "other-run",
             "taken_at": time.time()}
    lock.write_text(json.dumps(other))
    refused, _ = playbook(host, "--tags", "preflight")
    assert refused.returncode != 0, refused.stdout[-3000:]
    assert "another run holds the lock %s: ansible-playbook PID 4242 on ctl-other, started 2025-11-28T20:00:00Z " \
           "(run other-run)" % lock in refused.stdout, refused.stdout[-3000:]
    assert json.loads(lock.read_text()) == other, "the refused run touched the lock"

    # A lock of this controller whose ansible-playbook is gone (a run killed with SIGKILL leaves one).
    gone = subprocess.Popen(["true"])
    gone.wait()
    lock.write_text(json.dumps(dict(other, controller=socket.gethostname(), pid=gone.pid)))
    taken, recap = playbook(host, "--tags", "preflight")
    assert taken.returncode == 0 and recap["failed"] == 0, taken.stdout[-3000:]
    assert "take over the stale run lock %s: PID %d is gone on %s" % (lock, gone.pid, socket.gethostname()) \
        in taken.stdout, taken.stdout[-3000:]
    assert not lock.exists(), "the last play did not release the lock"


def test_every_playbook_that_changes_a_host_refuses_a_run_while_another_holds_the_lock(tmp_path):
    """rollback.yml takes the same lock after its variables are checked: a live run's
    lock stops each, naming that run, and is left as it was. (spark.yml's own case is the test above.)"""
    from test_validate_playbook import run_book
    host = make_host(tmp_path, None, "index", torch=False, venv=False, components=TORCH_ONLY)
    lock = host["prefix"] / "venv.lock"
    other = {"controller": "ctl-other", "pid": 4242, "started": 1764360000, "run_id": "other-run",
             "taken_at": time.time()}
    host["prefix"].mkdir(parents=True, exist_ok=True)
    lock.write_text(json.dumps(other))
    for book in ("playbooks/rollback.yml",):
        proc = run_book(host, book)
        assert proc.returncode != 0, (book, proc.stdout[-3000:])
        assert "another run holds the lock %s: ansible-playbook PID 4242 on ctl-other" % lock in proc.stdout, \
            (book, proc.stdout[-3000:])
        assert json.loads(lock.read_text()) == other, "%s touched the lock" % book
