# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils.build import build_common as bc
from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import atomic_publish, sha256_file

GIB = 1024 ** 3


@pytest.mark.parametrize("cores,avail_gib,per_job,expected", [
    (20, 120, 6.0, 19),   # GB10: RAM allows 19 jobs of 6 GiB after the 2 GiB reserve
    (72, 480, 6.0, 72),   # GH200: cores are the limit
    (16, 16, 6.0, 2),
    (4, 1, 6.0, 1),       # never zero
])
def test_auto_jobs(cores, avail_gib, per_job, expected):
    assert bc.auto_jobs(cores, avail_gib * GIB, per_job) == expected


def test_resolve_jobs_rejects_garbage(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 16777216 kB\nMemAvailable: 8388608 kB\n")
    jobs, why = bc.resolve_jobs("auto", 2.0, 2.0, str(meminfo))
    assert jobs >= 1 and "8.0 GiB available" in why
    assert bc.resolve_jobs(3, 2.0)[0] == 3
    for bad in ("many", 0, -2):
        with pytest.raises(bc.JobError):
            bc.resolve_jobs(bad, 2.0)


def test_cache_key_is_order_independent_and_sensitive():
    a = bc.cache_key({"commit": "abc", "flags": {"x": 1, "y": 2}})
    assert a == bc.cache_key({"flags": {"y": 2, "x": 1}, "commit": "abc"})
    assert a != bc.cache_key({"commit": "abd", "flags": {"x": 1, "y": 2}})


def test_lock_refuses_a_second_holder_and_dies_with_its_process(tmp_path):
    lock = str(tmp_path / "build.lock")
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time, fcntl, os\n"
        "fd = os.open(%r, os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "os.write(fd, b'pid holder')\n"
        "print('locked', flush=True)\n"
        "time.sleep(60)\n") % lock], stdout=subprocess.PIPE)
    assert holder.stdout.readline().strip() == b"locked"
    with pytest.raises(bc.BuildLocked, match="another build holds the lock"):
        bc.BuildLock(lock).acquire()
    holder.kill()
    holder.wait()
    with bc.BuildLock(lock):
        pass


def test_status_file_tracks_phases_and_ninja_progress(tmp_path):
    status = bc.StatusFile(str(tmp_path / "status.json"), "demo", log_path="x.log")
    status.phase("configure")
    status.phase("build")
    log = str(tmp_path / "build.log")
    script = "for i in 1 2 3 4; do echo \"[$i/4] Building CXX object o$i\"; done"
    bc.run_logged(["sh", "-c", script], log, "build", status=status)
    status.update(force=True)
    data = json.loads((tmp_path / "status.json").read_text())
    assert data["phase"] == "build" and data["done"] == 4 and data["total"] == 4 and data["percent"] == 100.0
    assert data["phases_done"] == ["configure"]
    status.finish("done")
    assert bc.read_status(str(tmp_path / "status.json"))["phases_done"] == ["configure", "build"]


def test_failure_carries_phase_and_log_tail(tmp_path):
    log = str(tmp_path / "build.log")
    with pytest.raises(bc.BuildFailed) as info:
        bc.run_logged(["sh", "-c", "seq 1 100; echo 'ld: cannot find -lfoo'; exit 3"], log, "link")
    err = info.value
    assert err.phase == "link" and err.returncode == 3
    assert err.tail.splitlines()[-1] == "ld: cannot find -lfoo"
    assert "phase 'link' failed with exit code 3" in str(err) and log in str(err)


def test_atomic_publish_leaves_no_partial_file(tmp_path):
    src = tmp_path / "pkg-1.0-py3-none-any.whl"
    src.write_bytes(b"PK" + b"x" * 100000)
    dest = tmp_path / "wheels"
    final = atomic_publish(str(src), str(dest))
    assert os.path.basename(final) == src.name
    assert sorted(os.listdir(str(dest))) == [src.name]
    assert sha256_file(final) == sha256_file(str(src))


def test_parse_ninja_progress():
    assert bc.parse_ninja_progress("[12/345] Building CUDA object x.cu.o") == (12, 345)
    assert bc.parse_ninja_progress("-- Configuring done") is None
