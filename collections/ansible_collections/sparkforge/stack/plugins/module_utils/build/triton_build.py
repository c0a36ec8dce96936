# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the ``triton_llvm_build`` module knows about Triton and LLVM builds.

Plain functions, no Ansible imports: unit tests call them directly.

* Triton pins its LLVM in ``cmake/llvm-hash.txt``; ``read_llvm_hash`` reads it.
* Triton's ``setup.py`` sits at the repository root from 3.4 and under
  ``python/`` before; ``resolve_setup_dir`` checks the version rule against
  the tree and fails clearly when they disagree.
* ``llvm_cmake_command`` / ``triton_build_env``: the command line and the
  environment of the two builds.
* ``llvm_cache_key`` / ``triton_cache_key``: one hash over every input that
  changes the output, and over nothing else (jobs, work dir, wheel dir, ccache
  and the clone URL do not change what is built).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import json
import os
import re
import subprocess
import threading

from ansible_collections.sparkforge.stack.plugins.module_utils.build import repro
from ansible_collections.sparkforge.stack.plugins.module_utils.build.build_common import (
    JobError,
    cache_key,
    resolve_jobs,
)
from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import sha256_file

# Peak resident memory of one compile job of LLVM + MLIR + LLD in a Release
# build with assertions and without debug info.  Most LLVM translation units
# stay under 1 GiB with GCC/Clang; the heaviest MLIR ones (TableGen-generated
# dialect and pass code) reach about 1.5-2 GiB, so 2 GiB per job keeps a full
# parallel build out of the OOM killer.  Links are capped separately with
# LLVM_PARALLEL_LINK_JOBS (a static LLVM link can take several GiB).
LLVM_MEM_PER_JOB_GIB = 2.0
# Links of LLVM/MLIR tools that run at the same time: one per this many compile jobs.
LLVM_COMPILE_JOBS_PER_LINK = 4
# Triton's own C++ (MLIR dialects, conversions, the NVIDIA/AMD backends) includes
# most of MLIR's headers in every file: about 2.5-3 GiB per job.
TRITON_MEM_PER_JOB_GIB = 3.0

DEFAULT_LLVM_PROJECTS = "mlir;llvm;lld"
DEFAULT_LLVM_TARGETS = "host;NVPTX;AMDGPU"

# Layout versions: Triton moved setup.py from python/ to the repository root in 3.4.
SETUP_AT_ROOT_FROM = (3, 4)
# TRITON_PTXAS_BLACKWELL_PATH (a separate ptxas for sm_100+ targets) exists from 3.6.
PTXAS_BLACKWELL_FROM = (3, 6)

LLVM_STAMP = ".sparkforge-llvm.json"
RECORD_SUFFIX = ".sparkforge.json"

_HEX_COMMIT = re.compile(r"^[0-9a-f]{7,40}$")
_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")
_DUNDER_VERSION = re.compile(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", re.M)


def parse_version(text):
    """'3.6.0', 'v3.5.1', '3.4' -> (3, 6, 0); anything else -> None."""
    if text is None:
        return None
    match = _VERSION.match(str(text).strip())
    if not match:
        return None
    return tuple(int(part or 0) for part in match.groups())


def read_llvm_hash(triton_src):
    """The LLVM commit Triton pins (``cmake/llvm-hash.txt``)."""
    path = os.path.join(triton_src, "cmake", "llvm-hash.txt")
    try:
        with open(path) as handle:
            text = handle.read().strip()
    except (IOError, OSError):
        raise JobError(
            "%s is missing: this does not look like a Triton source tree (Triton pins its LLVM there); "
            "check triton_src/triton_ref, or give llvm_commit" % path)
    commit = text.split()[0].lower() if text else ""
    if not _HEX_COMMIT.match(commit):
        raise JobError("%s does not hold a git commit (found %r)" % (path, text[:80]))
    return commit


def version_from_tree(triton_src):
    """Triton's version from ``python/triton/__init__.py`` (``__version__``), or None."""
    path = os.path.join(triton_src, "python", "triton", "__init__.py")
    try:
        with open(path) as handle:
            return version_from_text(handle.read())
    except (IOError, OSError):
        return None


def version_from_text(text):
    """``__version__ = '3.5.1'`` in a file's text -> '3.5.1' (or None)."""
    match = _DUNDER_VERSION.search(text or "")
    return match.group(1) if match else None


def expected_setup_dir(version):
    """Where setup.py lives for a Triton version: '' (root) from 3.4, 'python' before."""
    parsed = parse_version(version)
    if parsed is None:
        raise JobError("cannot tell the Triton version from %r; give triton_version (e.g. 3.5.1)" % (version,))
    return "" if parsed[:2] >= SETUP_AT_ROOT_FROM else "python"


def detect_setup_dirs(triton_src):
    """The places of the tree that hold a setup.py ('' for the root, 'python')."""
    return [rel for rel in ("", "python") if os.path.isfile(os.path.join(triton_src, rel, "setup.py"))]


def resolve_setup_dir(triton_src, version):
    """Check the version rule against the tree; return the setup.py directory (relative)."""
    found = detect_setup_dirs(triton_src)
    if not found:
        raise JobError("no setup.py at the root or under python/ of %s: not a Triton source tree" % triton_src)
    if version is None:
        if len(found) > 1:
            raise JobError("%s has setup.py both at the root and under python/ and the Triton version is "
                           "unknown; give triton_version" % triton_src)
        return found[0]
    want = expected_setup_dir(version)
    if want not in found:
        raise JobError(
            "Triton %s keeps setup.py %s, but %s has it %s: the source does not match triton_version "
            "(check the ref, or the version given)" % (
                version, "at the repository root" if want == "" else "under python/", triton_src,
                " and ".join("at the root" if rel == "" else "under python/" for rel in found)))
    return want


def default_llvm_prefix(work_dir, llvm_commit):
    """An install prefix per LLVM commit, so Triton versions that pin the same LLVM share it."""
    return os.path.join(work_dir, "llvm", "llvm-%s" % llvm_commit[:12])


def llvm_build_dir(work_dir, llvm_key):
    """The LLVM build tree, per LLVM cache key (kept so that a killed build resumes)."""
    return os.path.join(work_dir, "build", "llvm-%s" % llvm_key[:16])


def split_list(value):
    """'mlir;llvm;lld' or ['mlir', 'llvm'] -> ['mlir', 'llvm'] (order kept, blanks dropped)."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        items = value
    else:
        items = str(value).split(";")
    return [str(item).strip() for item in items if str(item).strip()]


def llvm_cmake_command(llvm_src, build_dir, prefix, projects=DEFAULT_LLVM_PROJECTS, targets=DEFAULT_LLVM_TARGETS,
                       build_type="Release", assertions=True, ccache=False, jobs=None, extra_args=None,
                       cmake="cmake"):
    """The CMake configure command of the LLVM build (Ninja generator, source under ``llvm/``)."""
    cmd = [
        cmake, "-G", "Ninja",
        "-S", os.path.join(llvm_src, "llvm"),
        "-B", build_dir,
        "-DCMAKE_BUILD_TYPE=%s" % build_type,
        "-DLLVM_ENABLE_ASSERTIONS=%s" % ("ON" if assertions else "OFF"),
        "-DLLVM_ENABLE_PROJECTS=%s" % ";".join(split_list(projects)),
        "-DLLVM_TARGETS_TO_BUILD=%s" % ";".join(split_list(targets)),
        "-DCMAKE_INSTALL_PREFIX=%s" % prefix,
    ]
    if jobs:
        cmd.append("-DLLVM_PARALLEL_LINK_JOBS=%d" % max(1, int(jobs) // LLVM_COMPILE_JOBS_PER_LINK))
    if ccache:
        cmd += ["-DCMAKE_C_COMPILER_LAUNCHER=ccache", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
    cmd += list(extra_args or [])
    return cmd


def ptxas_blackwell_supported(version):
    parsed = parse_version(version)
    return parsed is not None and parsed[:2] >= PTXAS_BLACKWELL_FROM


def cuda_tool_beside(ptxas_path, name):
    """``cuobjdump``/``nvdisasm`` next to the given ptxas, when present."""
    candidate = os.path.join(os.path.dirname(ptxas_path), name)
    return candidate if os.path.isfile(candidate) and os.access(candidate, os.X_OK) else None


def triton_build_env(llvm_prefix, triton_version, ptxas_path, jobs, json_syspath=None, ccache=False,
                     extra_env=None):
    """Variables for Triton's setup.py: the custom LLVM, no downloads, CUDA 13's tools, MAX_JOBS."""
    env = {
        "LLVM_INCLUDE_DIRS": os.path.join(llvm_prefix, "include"),
        "LLVM_LIBRARY_DIR": os.path.join(llvm_prefix, "lib"),
        "LLVM_SYSPATH": llvm_prefix,
        "TRITON_OFFLINE_BUILD": "1",
        "TRITON_PTXAS_PATH": ptxas_path,
        "MAX_JOBS": str(int(jobs)),
    }
    if ptxas_blackwell_supported(triton_version):
        env["TRITON_PTXAS_BLACKWELL_PATH"] = ptxas_path
    for name, var in (("cuobjdump", "TRITON_CUOBJDUMP_PATH"), ("nvdisasm", "TRITON_NVDISASM_PATH")):
        tool = cuda_tool_beside(ptxas_path, name)
        if tool:
            env[var] = tool
    if json_syspath:
        env["JSON_SYSPATH"] = json_syspath
    if ccache:
        env["TRITON_BUILD_WITH_CCACHE"] = "true"
    for key, value in (extra_env or {}).items():
        env[str(key)] = str(value)
    return env


def runtime_env(triton_version, ptxas_path):
    """Variables that make an installed Triton use the given ptxas (CUDA 13 knows sm_121a)."""
    env = {"TRITON_PTXAS_PATH": ptxas_path}
    if ptxas_blackwell_supported(triton_version):
        env["TRITON_PTXAS_BLACKWELL_PATH"] = ptxas_path
    return env


def llvm_key_inputs(llvm_commit, projects, targets, build_type, assertions, compiler_version, extra_args=None):
    return {
        "what": "llvm",
        "llvm_commit": llvm_commit,
        "projects": sorted(split_list(projects)),
        "targets": sorted(split_list(targets)),
        "build_type": build_type,
        "assertions": bool(assertions),
        "compiler": compiler_version,
        "extra_cmake_args": list(extra_args or []),
        "reproducible": repro.SCHEME,
    }


def llvm_cache_key(llvm_commit, projects, targets, build_type, assertions, compiler_version, extra_args=None):
    """Key of an LLVM install: commit, projects, targets, flags and compiler (order of lists ignored)."""
    return cache_key(llvm_key_inputs(llvm_commit, projects, targets, build_type, assertions, compiler_version,
                                     extra_args))


def triton_key_inputs(triton_commit, triton_version, llvm_key, python_version, compiler_version, ptxas_version,
                      source_diff=None, extra_env=None):
    return {
        "what": "triton",
        "triton_commit": triton_commit,
        "triton_version": triton_version,
        "source_diff": source_diff or "",
        "llvm": llvm_key,
        "python": python_version,
        "compiler": compiler_version,
        "ptxas": ptxas_version,
        "extra_env": dict(extra_env or {}),
        "reproducible": repro.SCHEME,
    }


def triton_cache_key(triton_commit, triton_version, llvm_key, python_version, compiler_version, ptxas_version,
                     source_diff=None, extra_env=None):
    """Key of a Triton wheel: its source, the LLVM key (commit, projects, targets, flags, compiler), the
    Python that builds it, the compiler and the ptxas bundled into it."""
    return cache_key(triton_key_inputs(triton_commit, triton_version, llvm_key, python_version, compiler_version,
                                       ptxas_version, source_diff, extra_env))


def resolve_llvm_jobs(jobs, meminfo_path="/proc/meminfo"):
    """``jobs`` ('auto' or a number) for the LLVM build -> (jobs, why)."""
    return resolve_jobs(jobs, LLVM_MEM_PER_JOB_GIB, meminfo_path=meminfo_path)


def resolve_triton_jobs(jobs, meminfo_path="/proc/meminfo"):
    """``jobs`` ('auto' or a number) for Triton's own C++ (MAX_JOBS) -> (jobs, why)."""
    return resolve_jobs(jobs, TRITON_MEM_PER_JOB_GIB, meminfo_path=meminfo_path)


def record_path(wheel_dir, wheel_name):
    return os.path.join(wheel_dir, wheel_name + RECORD_SUFFIX)


def is_remote_url(repo):
    if "://" in repo:
        return not repo.startswith("file://")
    return re.match(r"^[\w.-]+@[\w.-]+:", repo) is not None


def local_repo_path(repo):
    """The directory of a local repository (a path or file:// URL), or None for a remote one."""
    if repo.startswith("file://"):
        return repo[len("file://"):]
    if is_remote_url(repo):
        return None
    return repo


def looks_like_commit(ref):
    return bool(ref) and len(ref) == 40 and _HEX_COMMIT.match(ref.lower()) is not None


def wheel_version_matches(wheel_name, version):
    """Does ``triton-3.6.0-cp311-...whl`` carry ``version`` (local suffixes such as +git1234 allowed)?"""
    parts = wheel_name.split("-")
    if len(parts) < 2:
        return False
    return parts[1] == version or parts[1].startswith(version + "+")


def run_capture(cmd, cwd=None):
    """Run ``cmd``; return (returncode, stdout+stderr as text)."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = proc.communicate()[0].decode("utf-8", "replace")
    return proc.returncode, out


def python_identity(python, run=run_capture):
    """'3.12.3 cpython-312 aarch64' for the interpreter that builds the wheel (part of the key)."""
    code = ("import sys, platform; print('%d.%d.%d' % sys.version_info[:3], "
            "sys.implementation.cache_tag, platform.machine())")
    rc, out = run([python, "-c", code])
    if rc != 0:
        raise JobError("cannot run the build interpreter %s: %s" % (python, out.strip()))
    return out.strip()


def ptxas_identity(ptxas, run=run_capture):
    """The release line of ``ptxas --version`` (the ptxas is bundled into the wheel: part of the key)."""
    if not (os.path.isfile(ptxas) and os.access(ptxas, os.X_OK)):
        raise JobError("ptxas_path %s is not an executable ptxas: install the CUDA 13 toolkit "
                       "(its ptxas knows sm_121a) or point ptxas_path at one" % ptxas)
    rc, out = run([ptxas, "--version"])
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    if rc != 0 or not lines:
        raise JobError("%s --version failed: %s" % (ptxas, out.strip()))
    for line in lines:
        if "compilation tools" in line:
            return line
    return lines[-1]


def read_json(path):
    """A JSON file's content, or None when it is missing or unreadable."""
    try:
        with open(path) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError):
        return None


def find_record(wheel_dir, key):
    """The record of a published wheel with this cache key, when the wheel is still intact."""
    for path in sorted(glob.glob(os.path.join(wheel_dir, "*.whl" + RECORD_SUFFIX))):
        record = read_json(path)
        if not record or record.get("cache_key") != key:
            continue
        wheel = os.path.join(wheel_dir, record.get("wheel", ""))
        if os.path.isfile(wheel) and sha256_file(wheel) == record.get("sha256"):
            return record
    return None


_ERROR_LINE = re.compile(r"(\berror\b|\bfatal\b|FAILED:|Traceback)", re.I)


def error_lines(log_path, limit=15, scan_bytes=512 * 1024):
    """The last ``limit`` lines of the log that look like errors (compiler, CMake, ninja, Python).

    pip and setuptools print many lines after the real error; these lines keep the cause in the
    failure message even when it is above the log tail.
    """
    try:
        with open(log_path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - scan_bytes))
            text = handle.read().decode("utf-8", "replace")
    except (IOError, OSError):
        return []
    hits = [line.rstrip() for line in text.splitlines() if _ERROR_LINE.search(line)]
    return hits[-limit:]


class Heartbeat:
    """Rewrites the status file every ``interval`` seconds while a phase runs.

    Ninja progress refreshes the file during compiles; a long silent step (CMake, pip, a big link)
    would leave ``elapsed_s`` frozen and make a poller think the build hangs.
    """

    def __init__(self, status, interval=10.0):
        self.status = status
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="status-heartbeat")
        self._thread.daemon = True

    def _run(self):
        while not self._stop.wait(self.interval):
            try:
                self.status.update(force=True)
            except Exception:  # pylint: disable=broad-except
                # A status write racing the main thread is retried on the next beat.
                continue

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        return False
