# -*- coding: utf-8 -*-
"""What a host already has of the CUDA math libraries (module_utils.cuda.cuda_present), on a fake root."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import cuda_present as cp

PACKAGES = {"cublas": {"packages": ["libcublas-13-0", "libcublas-dev-13-0"], "version": "13.0.*"},
            "cudnn": {"packages": ["cudnn9-cuda-13", "libcudnn9-dev-cuda-13"], "version": "9.*"},
            "nccl": {"packages": ["libnccl2", "libnccl-dev"], "version": "2.*+cuda13.0"}}
PATHS = {"cublas": {"include_dir": "/usr/local/cuda-13.0/targets/sbsa-linux/include",
                    "library": "/usr/local/cuda-13.0/targets/sbsa-linux/lib/libcublas.so"},
         "cudnn": {"include_dir": "/usr/include/aarch64-linux-gnu", "library": "/usr/lib/aarch64-linux-gnu/libcudnn.so"},
         "nccl": {"include_dir": "/usr/include", "library": "/usr/lib/aarch64-linux-gnu/libnccl.so"}}
DPKG = "\n".join([
    "libcublas-13-0\t13.0.2.14-1\tii ", "libcublas-dev-13-0\t13.0.2.14-1\tii ",
    "cudnn9-cuda-13\t9.13.0.50-1\tii ", "libcudnn9-dev-cuda-13\t9.13.0.50-1\trc ",
    "libnccl2\t2.27.7-1+cuda12.9\tii ", "libnccl-dev\t2.27.7-1+cuda12.9\tii ",
    "cmake:arm64\t3.28.3-1\tii "])


def touch(root, path):
    full = os.path.join(str(root), path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    open(full, "w").close()


def test_parse_dpkg_keeps_installed_packages_only():
    installed = cp.parse_dpkg(DPKG)
    assert installed["libcublas-13-0"] == "13.0.2.14-1" and installed["cmake"] == "3.28.3-1"
    assert "libcudnn9-dev-cuda-13" not in installed  # removed, config files left (rc)


def test_dpkg_satisfies_needs_every_package_at_the_pinned_version():
    installed = cp.parse_dpkg(DPKG)
    assert cp.dpkg_satisfies(PACKAGES["cublas"], installed)[0]
    assert not cp.dpkg_satisfies(PACKAGES["cudnn"], installed)[0]  # the dev package is gone
    ok, found = cp.dpkg_satisfies(PACKAGES["nccl"], installed)
    assert not ok and found["libnccl2"] == "2.27.7-1+cuda12.9"  # a CUDA 12 build: not the pin


def test_files_of_a_runfile_install_satisfy_a_group(tmp_path):
    # A runfile toolkit in /usr/local/cuda and NCCL/cuDNN copied into the toolkit, no dpkg at all.
    touch(tmp_path, "/usr/local/cuda/include/cublas_v2.h")
    touch(tmp_path, "/usr/local/cuda/lib64/libcublas.so.13")
    touch(tmp_path, "/usr/local/cuda/include/nccl.h")
    touch(tmp_path, "/usr/local/cuda/lib64/libnccl.so.2.27.7")
    touch(tmp_path, "/usr/include/aarch64-linux-gnu/cudnn.h")  # a header without its library
    result = cp.assess(["cublas", "cudnn", "nccl"], PACKAGES, PATHS, {}, "/usr/local/cuda", "aarch64-linux-gnu",
                       "sbsa-linux", root=str(tmp_path))
    expected = {"satisfied": True, "by": "files",
                "packages": {"libcublas-13-0": None, "libcublas-dev-13-0": None},
                "library": "/usr/local/cuda/lib64/libcublas.so.13", "include_dir": "/usr/local/cuda/include"}
    assert result["cublas"] == expected
    assert result["nccl"]["by"] == "files" and result["nccl"]["library"] == "/usr/local/cuda/lib64/libnccl.so.2.27.7"
    assert result["cudnn"]["satisfied"] is False and result["cudnn"]["library"] == PATHS["cudnn"]["library"]


def test_dpkg_wins_and_keeps_the_manifest_paths(tmp_path):
    result = cp.assess(["cublas"], PACKAGES, PATHS, cp.parse_dpkg(DPKG), "/usr/local/cuda", "aarch64-linux-gnu",
                       "sbsa-linux", root=str(tmp_path))
    assert result["cublas"]["by"] == "dpkg" and result["cublas"]["library"] == PATHS["cublas"]["library"]
