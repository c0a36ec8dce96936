# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's one atomic write (_common/files.py): the mode asked for, the old file intact when
the write fails, no temporary file left either way."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import (
    atomic_file,
    atomic_write_bytes,
    atomic_write_text,
)


def mode_of(path):
    return stat.S_IMODE(os.stat(str(path)).st_mode)


@pytest.mark.parametrize("mode", [0o600, 0o644, 0o755])
def test_the_mode_asked_for_whatever_the_umask(tmp_path, mode):
    path = tmp_path / "record.json"
    old = os.umask(0o077)
    try:
        atomic_write_text(str(path), "{}\n", mode)
    finally:
        os.umask(old)
    assert path.read_text() == "{}\n" and mode_of(path) == mode
    assert os.listdir(str(tmp_path)) == ["record.json"]


def test_default_mode_is_world_readable_and_an_existing_mode_is_replaced(tmp_path):
    path = tmp_path / "report.md"
    path.write_text("old\n")
    os.chmod(str(path), 0o600)
    atomic_write_text(str(path), "new \u00b5s\n")
    assert path.read_bytes() == u"new \u00b5s\n".encode("utf-8") and mode_of(path) == 0o644


def test_bytes_and_a_missing_directory(tmp_path):
    path = tmp_path / "a" / "b" / "blob.bin"
    atomic_write_bytes(str(path), b"\x00\x01\xff", 0o640)
    assert path.read_bytes() == b"\x00\x01\xff" and mode_of(path) == 0o640
    assert os.listdir(str(path.parent)) == ["blob.bin"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "state.json"
    path.write_text("old\n")
    os.chmod(str(path), 0o600)
    with pytest.raises(TypeError):
        atomic_write_bytes(str(path), u"text where bytes belong")
    with pytest.raises(RuntimeError):
        with atomic_file(str(path)) as handle:
            handle.write(b"half a fi")
            raise RuntimeError("killed mid-write")
    assert path.read_text() == "old\n" and mode_of(path) == 0o600
    assert os.listdir(str(tmp_path)) == ["state.json"]


def test_a_failed_rename_leaves_no_temporary(tmp_path):
    # A non-empty directory where the file should go: the rename itself fails.
    target = tmp_path / "taken"
    target.mkdir()
    (target / "inside").write_text("x")
    with pytest.raises(OSError):
        atomic_write_text(str(target), "text")
    assert sorted(os.listdir(str(tmp_path))) == ["taken"] and os.listdir(str(target)) == ["inside"]


def test_named_temporary_for_a_sweeper(tmp_path):
    seen = []
    with atomic_file(str(tmp_path / "w.whl"), prefix=".partial-", suffix=".tmp") as handle:
        handle.write(b"PK")
        seen = os.listdir(str(tmp_path))
    assert len(seen) == 1 and seen[0].startswith(".partial-") and seen[0].endswith(".tmp")
    assert os.listdir(str(tmp_path)) == ["w.whl"]
