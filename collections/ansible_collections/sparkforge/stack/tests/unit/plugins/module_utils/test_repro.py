# -*- coding: utf-8 -*-
"""Unit tests of module_utils/build/repro.py on wheels made here (the real nvcc builds are in tests/)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import hashlib
import os
import subprocess
import zipfile

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils.build import repro


def make_wheel(path, members, order=None, when=(2026, 1, 2, 3, 4, 6), modes=None):
    """A wheel with ``members`` {name: bytes}, written in ``order``, each entry at ``when``."""
    modes = modes or {}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in order or sorted(members):
            info = zipfile.ZipInfo(name, date_time=when)
            info.external_attr = (0o100000 | modes.get(name, 0o644)) << 16
            archive.writestr(info, members[name])
    return path


ELF = b"\x7fELF" + b"\x00" * 60 + b"/tmp/tmpxft_00003a1f_00000000-6_k.cudafe1.cpp\x00"


def members(**more):
    out = {
        "pkg/__init__.py": b"x = 1\n",
        "pkg/_k.so": ELF,
        "pkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n",
        "pkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n",
        "pkg-1.0.dist-info/RECORD": b"stale,,\n",
    }
    out.update(more)
    return out


def test_normalize_gives_one_form_whatever_order_times_modes_and_nvcc_pid(tmp_path):
    a = make_wheel(str(tmp_path / "a.whl"), members())
    other = members(**{"pkg/_k.so": ELF.replace(b"00003a1f", b"0000beef"),
                       "pkg-1.0.dist-info/RECORD.jws": b"signature"})
    b = make_wheel(str(tmp_path / "b.whl"), other, order=sorted(other, reverse=True), when=(2030, 5, 6, 7, 8, 10),
                   modes={"pkg/__init__.py": 0o600})
    assert repro.diff_wheels(a, b)["same_contents"] is False
    ra = repro.normalize_wheel(a, a, 1700000000)
    rb = repro.normalize_wheel(b, b, 1700000000)
    assert ra == rb == {"members": 5, "nvcc_names": 1, "date_time": "2023-11-14T22:13:20Z"}
    assert repro.diff_wheels(a, b)["identical"] is True
    with zipfile.ZipFile(a) as archive:
        names = archive.namelist()
        assert names[-1] == "pkg-1.0.dist-info/RECORD" and names[:2] == ["pkg/__init__.py", "pkg/_k.so"]
        assert b"tmpxft_00000000_00000000-6_k" in archive.read("pkg/_k.so")
        assert set((i.external_attr >> 16) & 0o777 for i in archive.infolist()) == {0o644}
        record = archive.read("pkg-1.0.dist-info/RECORD").decode().splitlines()
        for line in record[:-1]:
            name, digest, size = line.split(",")
            data = archive.read(name)
            expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert (digest, int(size)) == ("sha256=" + expected, len(data))
        assert record[-1] == "pkg-1.0.dist-info/RECORD,,"


def test_normalize_keeps_execute_bits_and_clamps_old_times(tmp_path):
    path = make_wheel(str(tmp_path / "x.whl"), members(**{"pkg/tool": b"#!/bin/sh\n"}), modes={"pkg/tool": 0o750})
    assert repro.normalize_wheel(path, path, 0)["date_time"] == "1980-01-01T00:00:00Z"
    with zipfile.ZipFile(path) as archive:
        assert (archive.getinfo("pkg/tool").external_attr >> 16) & 0o777 == 0o755
        assert archive.getinfo("pkg/tool").date_time == (1980, 1, 1, 0, 0, 0)


def test_normalize_refuses_what_is_not_a_wheel(tmp_path):
    bad = tmp_path / "bad.whl"
    bad.write_bytes(b"not a zip")
    with pytest.raises(repro.ReproError, match="is not a readable wheel"):
        repro.normalize_wheel(str(bad), str(bad), 1)
    two = make_wheel(str(tmp_path / "two.whl"), members(**{"b-1.dist-info/METADATA": b""}))
    with pytest.raises(repro.ReproError, match="exactly one top-level .dist-info directory; found b-1.dist-info, "
                                               "pkg-1.0.dist-info"):
        repro.normalize_wheel(two, two, 1)
    assert sorted(os.listdir(str(tmp_path))) == ["bad.whl", "two.whl"]  # no temporary file left behind


def test_diff_lists_members_text_lines_and_archive_fields(tmp_path):
    a = make_wheel(str(tmp_path / "a.whl"), members())
    b = make_wheel(str(tmp_path / "b.whl"), members(**{"pkg/__init__.py": b"x = 2\n", "pkg/new.py": b""}),
                   when=(2026, 1, 2, 3, 4, 8))
    diff = repro.diff_wheels(a, b)
    assert diff["identical"] is False and diff["only_in_b"] == ["pkg/new.py"] and diff["only_in_a"] == []
    text = [d for d in diff["differ"] if d["member"] == "pkg/__init__.py"][0]
    assert text["kind"] == "text" and text["lines"][-2:] == ["-x = 1", "+x = 2"]
    assert {"member": "pkg/_k.so", "field": "date_time", "a": [2026, 1, 2, 3, 4, 6],
            "b": [2026, 1, 2, 3, 4, 8]} in diff["zip"]
    assert "only in b: pkg/new.py" in repro.summarize(diff)


def test_find_leaks_names_member_and_kind(tmp_path):
    path = make_wheel(str(tmp_path / "x.whl"), members(**{"pkg/info.json": b'{"src": "/home/alice/build/src"}'}))
    leaks = repro.find_leaks(path, {"build_dir": "/home/alice/build", "host_name": "gpu-node-7", "home": None})
    assert leaks == [{"member": "pkg/info.json", "kind": "build_dir", "value": "/home/alice/build"}]
    assert repro.leak_warnings("x.whl", {"leaks": leaks}) == [
        "x.whl: pkg/info.json carries the build dir /home/alice/build, so a build elsewhere gives other bytes"]


def test_prefix_maps_and_env(tmp_path):
    outer = str(tmp_path)
    inner = str(tmp_path / "build")
    maps = repro.prefix_maps([(inner, "/sparkforge/build"), (None, "/x"), (outer, "/tmp"), (inner, "/again")])
    # The longer path last: GCC tries the last map given first.
    assert maps == [(os.path.realpath(outer), "/tmp"), (os.path.realpath(inner), "/sparkforge/build")]
    env = repro.build_env(1700000000, maps, {"CFLAGS": "-O2", "NVCC_APPEND_FLAGS": "-lineinfo"})
    assert env["SOURCE_DATE_EPOCH"] == "1700000000" and env["TZ"] == "UTC"
    assert env["CFLAGS"] == "-O2 -ffile-prefix-map=%s=/tmp -ffile-prefix-map=%s=/sparkforge/build" % (
        os.path.realpath(outer), os.path.realpath(inner))
    assert env["NVCC_APPEND_FLAGS"].startswith("-lineinfo -Xcompiler=-ffile-prefix-map=")
    # Applied twice (a resumed build), the flags are not repeated.
    assert repro.build_env(1700000000, maps, env)["CFLAGS"] == env["CFLAGS"]


def test_commit_epoch_reads_the_commit_time(tmp_path):
    src = str(tmp_path)
    env = dict(os.environ, GIT_COMMITTER_DATE="2025-02-03T04:05:06Z", GIT_AUTHOR_DATE="2025-02-03T04:05:06Z")
    for cmd in (["git", "init", "-q"], ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                                        "--allow-empty", "-m", "x"]):
        subprocess.check_call(cmd, cwd=src, env=env)
    assert repro.commit_epoch(src) == 1738555506
    with pytest.raises(repro.ReproError, match="cannot read the commit time of nope"):
        repro.commit_epoch(src, "nope")
