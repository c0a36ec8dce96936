# -*- coding: utf-8 -*-
"""The NCCL a venv's torch loads, read from the library file without a GPU (module_utils.fabric.nccl_lib), on
stand-in venv trees: the order torch takes the libraries in, a version string across a read chunk's edge, the
patched build's markers, and an unreadable venv said so."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import nccl_lib

MARKERS = ["SWITCHLESS: skipping ncclTransportTreeConnect", "SWITCHLESS: skipping ncclTransportPatConnect"]


def _site(tmp_path):
    return tmp_path / "venv" / "lib" / "python3.12" / "site-packages"


def test_the_static_nccl_in_libtorch_cuda_comes_before_the_wheel_and_the_system(tmp_path):
    site = _site(tmp_path)
    (site / "torch" / "lib").mkdir(parents=True)
    (site / "nvidia" / "nccl" / "lib").mkdir(parents=True)
    (site / "torch" / "lib" / "libtorch_cuda.so").write_bytes(b"\0NCCL version 2.30.7+cuda13.0\0")
    (site / "nvidia" / "nccl" / "lib" / "libnccl.so.2").write_bytes(b"\0NCCL version 2.27.5+cuda12.9\0")
    system = tmp_path / "usr" / "lib" / "aarch64-linux-gnu"
    system.mkdir(parents=True)
    (system / "libnccl.so.2").write_bytes(b"NCCL version 2.21.5+cuda12.4")
    got = nccl_lib.read(str(tmp_path / "venv"), MARKERS, system=str(tmp_path / "usr" / "lib"))
    assert got["version"] == "2.30.7" and got["path"].endswith("libtorch_cuda.so") and not got["switchless"]
    # A torch without NCCL in it (a wheel build): the nvidia-nccl wheel's library.
    (site / "torch" / "lib" / "libtorch_cuda.so").write_bytes(b"no nccl here")
    got = nccl_lib.read(str(tmp_path / "venv"), MARKERS, system=str(tmp_path / "usr" / "lib"))
    assert got["version"] == "2.27.5" and "nvidia" in got["path"]
    (site / "nvidia" / "nccl" / "lib" / "libnccl.so.2").unlink()
    assert nccl_lib.read(str(tmp_path / "venv"), system=str(tmp_path / "usr" / "lib"))["version"] == "2.21.5"


def test_strings_across_a_chunk_edge_and_the_patched_markers(tmp_path, monkeypatch):
    monkeypatch.setattr(nccl_lib, "CHUNK", 16)
    lib = _site(tmp_path) / "torch" / "lib"
    lib.mkdir(parents=True)
    body = b"x" * 10 + b"NCCL version 2.30.7-1+cuda13.0" + b"y" * 7 + MARKERS[0].encode() + b"z" * 3 + MARKERS[1].encode()
    (lib / "libnccl.so.2").write_bytes(body)
    got = nccl_lib.read(str(tmp_path / "venv"), MARKERS, system=str(tmp_path / "none"))
    assert got["version"] == "2.30.7" and got["switchless"] and got["markers"] == sorted(MARKERS)
    # One marker alone is not the build.
    (lib / "libnccl.so.2").write_bytes(b"NCCL version 2.30.7+cuda13.0 " + MARKERS[0].encode())
    assert not nccl_lib.read(str(tmp_path / "venv"), MARKERS, system=str(tmp_path / "none"))["switchless"]


def test_an_unreadable_venv_is_said_not_guessed(tmp_path):
    got = nccl_lib.read(str(tmp_path / "absent"), MARKERS)
    assert got["version"] is None and "no venv" in got["why"]
    (_site(tmp_path) / "torch" / "lib").mkdir(parents=True)
    (_site(tmp_path) / "torch" / "lib" / "libtorch_cuda.so").write_bytes(b"nothing")
    got = nccl_lib.read(str(tmp_path / "venv"), MARKERS, system=str(tmp_path / "none"))
    assert got["version"] is None and "no NCCL version string" in got["why"]
