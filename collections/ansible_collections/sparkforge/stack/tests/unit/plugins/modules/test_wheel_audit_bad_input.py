"""wheel_arch_audit given something that is neither ELF nor a wheel/zip: an error that says what it is."""

import gzip

import pytest

from ansible_collections.sparkforge.stack.tests.unit.utils.harness import run_module


@pytest.mark.parametrize("name, content, what", [
    ("notes.txt", b"torch 2.14.1 release notes\nline two\n", "a text file starting 'torch 2.14.1 release notes'"),
    ("torch.tar.gz", gzip.compress(b"x" * 100, mtime=0), "gzip-compressed data"),
    ("libempty.so", b"", "an empty file"),
    ("blob.bin", bytes(range(200, 256)) * 4, "binary data starting c8c9cacbcccdcecf"),
], ids=["text", "gzip", "empty", "binary"])  # ids by kind: the same in every xdist worker, and readable
def test_non_elf_non_zip_file_is_an_error_naming_what_it_is(tmp_path, name, content, what):
    path = tmp_path / name
    path.write_bytes(content)
    result, _rc = run_module("wheel_arch_audit", {"path": str(path), "target": "12.1"})
    assert result.get("failed"), result
    assert "neither an ELF file nor a wheel/zip" in result["msg"] and what in result["msg"], result["msg"]
    assert result.get("verdict") is None
