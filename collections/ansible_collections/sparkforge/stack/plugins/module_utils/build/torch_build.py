# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Kept whole: one PyTorch release's source build, in the order torch_job plans it: the release and the arch
# list it can build (the names are cuda/arch.py's since issue 45 item 1; left here is the releases' data,
# arch_min_version and traps), the fixes that list needs, the environment and key; applying the chosen
# fixes to the tree is torch_fixes.py.
"""PyTorch source builds: what to build and with which environment.

Plain functions (no Ansible imports) used by the ``pytorch_wheel_build``
module and called directly by the unit tests:

* arch lists: parse ``TORCH_CUDA_ARCH_LIST``, validate every name against the
  release (``sparkforge_torch_arch_min_version``), refuse ``f`` suffixes,
  know the release's traps (mem-efficient attention on sm_121);
* the default arch list from the host's facts and the version data;
* features -> ``USE_*`` variables, BLAS, cuSPARSELt, CUDA_HOME, version pins,
  in a clean environment built from nothing;
* the jobs figure and the cache key;
* which fixes a release needs (torch_fixes.py applies them).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.sparkforge.stack.plugins.module_utils.build.build_common import (
    JobError,
    cache_key,
    resolve_jobs,
)
from ansible_collections.sparkforge.stack.plugins.module_utils.build.torch_fixes import FixError
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import arch

# Peak resident memory of one compile job of PyTorch's CUDA files.  The heavy
# translation units (CUTLASS GEMMs, flash/mem-efficient attention, FBGEMM GenAI)
# run cicc + ptxas once per arch and peak at 3-4 GiB each; the C++ files stay
# under 2 GiB.  4 GiB per job keeps a 20-core/128 GB GB10 at ~20 jobs with the
# GPU idle, and a 16 GiB box at 3 jobs instead of being OOM-killed at 92%.
MEM_PER_JOB_GIB = 4.0
# Kept free for the system, the linker of libtorch_cuda.so (several GiB) and pip.
RESERVE_GIB = 4.0


class ArchListError(JobError):
    """The arch list cannot be built by this release (message says why and what to do)."""


def version_tuple(text):
    """'2.10.0' -> (2, 10, 0); '2.9.1a0+git123' -> (2, 9, 1)."""
    match = re.match(r"^\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?", str(text or ""))
    if not match:
        raise JobError("not a version: %r" % (text,))
    return tuple(int(part or 0) for part in match.groups())


# ---------------------------------------------------------------- arch lists

def _parse(value):
    """cuda/arch.py's entries of a TORCH_CUDA_ARCH_LIST; a name that is not one is this module's ArchListError."""
    try:
        return arch.parse_list(value, "TORCH_CUDA_ARCH_LIST")
    except arch.ArchError as exc:
        raise ArchListError(str(exc))


def uncovered_capabilities(entries, capabilities):
    """The host's GPU capabilities for which no entry of the arch list has code, in order."""
    return [c for c in capabilities if not any(arch.runs_on(e, c) for e in entries)]


def arch_list_errors(entries, version, arch_min_version):
    """Every reason the release ``version`` cannot build ``entries`` (empty list: fine)."""
    errors = []
    have = version_tuple(version)
    if not entries:
        errors.append("the arch list is empty: name at least one compute capability (e.g. 12.0)")
    for entry in entries:
        if entry["variant"] == "f":
            errors.append(
                "'%s': family ('f') targets are refused: torch.utils.cpp_extension (torchvision, torchaudio and "
                "every extension build) rejects them; use '%s' (SASS for %s runs on every later %s.x GPU)"
                % (entry["text"], entry["base"], entry["base"], entry["base"].split(".")[0]))
            continue
        minimum = arch_min_version.get(entry["base"])
        if minimum is None:
            errors.append(
                "'%s': PyTorch does not know the arch %s; known names: %s (a release that accepts it goes in "
                "sparkforge_torch_arch_min_version, roles/manifest/defaults/main/torch.yml)"
                % (entry["text"], entry["base"], ", ".join(sorted(arch_min_version, key=version_tuple))))
            continue
        if have < version_tuple(minimum):
            errors.append(
                "'%s': torch %s rejects it (\"Unknown CUDA arch (%s)\"); it is accepted from torch %s on: "
                "pick a newer release or a lower arch (SASS for X.0 runs on every X.y GPU)"
                % (entry["text"], version, entry["base"], minimum))
    return errors


def release_entry(releases, version):
    try:
        return releases[str(version)]
    except KeyError:
        raise JobError(
            "torch %s is not in the stack's version data (sparkforge_torch_releases); known: %s"
            % (version, ", ".join(sorted(releases, key=version_tuple))))


def trap_decisions(entries, release, traps, fixes):
    """Which fixes the arch list needs, and which traps make it impossible.

    Returns (fix_names, refusals) where refusals are messages.
    """
    names = {entry["base"] for entry in entries}
    need, refusals = [], []
    for trap_name in release.get("traps") or []:
        trap = traps.get(trap_name)
        if trap is None:
            raise JobError("the release names trap '%s' but sparkforge_torch_traps has no such entry" % trap_name)
        hit = sorted(names & set(trap.get("archs") or []), key=version_tuple)
        if not hit:
            continue
        fix = trap.get("fix")
        if fix and fix in (release.get("fixes") or []) and fix in fixes:
            if fix not in need:
                need.append(fix)
        else:
            refusals.append(
                "arch %s with this release: %s; the stack has no fix for this release, so build with %s instead"
                % (", ".join(hit), " ".join(str(trap.get("explanation", trap_name)).split()),
                   trap.get("safe_arch", "another arch")))
    return need, refusals


def default_arch_list(platform_class, capabilities, release, data):
    """The arch list to build when the user gives none, and why.

    ``data``: {'arch_defaults', 'arch_min_version', 'traps'}.  The default never
    relies on a fix: an arch that triggers a trap of the release is replaced by
    the trap's safe arch (12.1 -> 12.0 on releases with the mem-eff guard).
    """
    defaults = data.get("arch_defaults") or {}
    if platform_class in defaults:
        text = defaults[platform_class]
        why = "default for platform class %s" % platform_class
    elif capabilities:
        text = ";".join(capabilities)
        why = "the host's compute capabilities"
    elif "none" in defaults:
        text = defaults["none"]
        why = "no GPU facts: the official aarch64 cu130 list"
    else:
        raise ArchListError("no cuda_arch_list given and no default for platform class %r" % platform_class)
    entries = _parse(text)
    known = data.get("arch_min_version") or {}
    nearest = []
    for i, entry in enumerate(entries):
        # A GPU newer than the names PyTorch knows (GB300's 10.3 before sparkforge_torch_arch_min_version
        # lists it): the highest known name of its major at or below it, whose SASS runs on it (cuda/arch.py).
        if entry["base"] not in known and not entry["variant"]:
            below = [arch.parse_name(n) for n in known
                     if arch.sass_runs_on(arch.capability(n)[0], arch.capability(n)[1], "",
                                          (entry["major"], entry["minor"]))]
            if below:
                best = max(below, key=lambda e: (e["major"], e["minor"]))["base"]
                nearest.append("%s -> %s (PyTorch knows no %s; SASS for %s runs on it)"
                               % (entry["base"], best, entry["base"], best))
                entries[i] = arch.parse_name(best + ("+PTX" if entry["ptx"] else ""))
    if nearest:
        why += "; nearest known arch: " + ", ".join(nearest)
    swapped = []
    for trap_name in release.get("traps") or []:
        trap = (data.get("traps") or {}).get(trap_name) or {}
        bad = set(trap.get("archs") or [])
        safe = trap.get("safe_arch")
        for i, entry in enumerate(entries):
            if entry["base"] in bad and safe:
                swapped.append("%s -> %s (%s)" % (entry["base"], safe, trap_name))
                entries[i] = arch.parse_name(safe + entry["variant"] + ("+PTX" if entry["ptx"] else ""))
    if swapped:
        why += "; trap avoided: " + ", ".join(swapped)
    return arch.to_torch(entries), why


def plan_arch_list(requested, version, release, platform_class, capabilities, data, fixes,
                   variable="sparkforge_cuda_arch_list"):
    """Validate (or choose) the arch list for ``version``.

    Returns {'arch_list', 'why', 'fixes_needed'}; raises ArchListError with
    every problem at once.
    """
    coverage = None
    if requested:
        entries = _parse(requested)
        why = "given"
        # An explicit list must give every GPU of this host code it runs (a build without it is useless).
        missing = uncovered_capabilities(entries, capabilities or [])
        if missing:
            coverage = (
                "%s %r has no code for this host's GPU capability %s (the host has %s): "
                "SASS X.Y runs only on X.Z with Z >= Y, an 'a' target only on exactly X.Y, +PTX on any later "
                "capability. Add %s to the list, or leave %s empty to let the plan choose"
                % (variable, requested, ", ".join(missing), ", ".join(capabilities), " and ".join(missing), variable))
    else:
        text, why = default_arch_list(platform_class, capabilities, release, data)
        entries = _parse(text)
    errors = arch_list_errors(entries, version, data.get("arch_min_version") or {})
    if coverage and not errors:
        raise ArchListError(coverage)
    need, refusals = trap_decisions(entries, release, data.get("traps") or {}, fixes)
    errors.extend(refusals)
    if coverage:
        # Unknown names and traps are reported with it, every problem at once.
        errors.append(coverage)
    if errors:
        raise ArchListError(
            "cuda_arch_list %r cannot be built with torch %s:\n- %s"
            % (arch.to_torch(entries) if entries else requested, version, "\n- ".join(errors)))
    return {"arch_list": arch.to_torch(entries), "why": why, "fixes_needed": need}


def python_allowed(entry, python_version):
    """Whether the release's wheels (``wheels`` data: Requires-Python per platform) accept this
    Python ('3.10'); True when the data records nothing or no Python is given."""
    if not python_version:
        return True
    floors = []
    for facts in (entry.get("wheels") or {}).values():
        match = re.match(r"^>=\s*(\d+(?:\.\d+)*)$", (facts or {}).get("requires_python") or "")
        if match:
            floors.append(match.group(1))
    return all(version_tuple(python_version) >= version_tuple(floor) for floor in floors)


def default_version(releases, platform_class=None, python_version=None):
    """What ``latest`` means: the newest release whose ``good_for`` names the platform class
    (any release when ``platform_class`` is None), whose pairings are all confirmed and whose
    wheels accept the host's Python (torch 2.15 requires 3.11: a 22.04 host with 3.10 gets 2.14.1).

    An entry with ``unconfirmed`` fields is used only when pinned: ``latest`` must not
    send a whole fleet to a pairing nobody has checked.
    """
    candidates = [v for v, entry in releases.items()
                  if (platform_class is None or platform_class in (entry.get("good_for") or []))
                  and python_allowed(entry, python_version)]
    if not candidates:
        raise JobError(
            "no release in the version data is marked good for platform class %r; set version explicitly"
            % platform_class)
    confirmed = [v for v in candidates if not releases[v].get("unconfirmed")]
    if not confirmed:
        raise JobError(
            "the releases marked good for platform class %r (%s) all have unconfirmed pairings; pin one "
            "explicitly to use it" % (platform_class, ", ".join(sorted(candidates, key=version_tuple))))
    return max(confirmed, key=version_tuple)


def select_fixes(release, arch_fixes, fixes, extra=None):
    """Fixes to apply, in order: those the arch list needs, then ``extra`` ones named by the user.

    Every name must be a fix the release lists (a fix written for 2.9 source
    is not applied to another release's tree).
    """
    allowed = release.get("fixes") or []
    chosen = []
    for name in list(arch_fixes) + list(extra or []):
        if name not in fixes:
            raise FixError("unknown fix '%s'; sparkforge_torch_fixes knows: %s" % (name, ", ".join(sorted(fixes))))
        if name not in allowed:
            raise FixError("fix '%s' is not listed for this release (its `fixes`: %s)"
                           % (name, ", ".join(allowed) or "none"))
        if name not in chosen:
            chosen.append(name)
    return chosen


# ---------------------------------------------------------------- features / environment

# option name -> (environment variable, default)
FEATURES = {
    "cuda": ("USE_CUDA", True),
    "cudnn": ("USE_CUDNN", True),
    "cusparselt": ("USE_CUSPARSELT", None),  # None: on when cuSPARSELt is found
    "cufile": ("USE_CUFILE", False),
    "nccl": ("USE_NCCL", True),
    "system_nccl": ("USE_SYSTEM_NCCL", False),
    "distributed": ("USE_DISTRIBUTED", True),
    "gloo": ("USE_GLOO", True),
    "tensorpipe": ("USE_TENSORPIPE", True),
    "mpi": ("USE_MPI", False),
    "flash_attention": ("USE_FLASH_ATTENTION", True),
    "mem_eff_attention": ("USE_MEM_EFF_ATTENTION", True),
    "fbgemm": ("USE_FBGEMM", True),
    "fbgemm_genai": ("USE_FBGEMM_GENAI", False),
    "kineto": ("USE_KINETO", True),
    "xnnpack": ("USE_XNNPACK", True),
    "mkldnn": ("USE_MKLDNN", None),  # None: on for x86_64, off for aarch64 (oneDNN needs ACL there)
    "mkldnn_acl": ("USE_MKLDNN_ACL", False),
    "nnpack": ("USE_NNPACK", True),
    "qnnpack": ("USE_PYTORCH_QNNPACK", True),
    "magma": ("USE_MAGMA", False),
    "numpy": ("USE_NUMPY", True),
    "rocm": ("USE_ROCM", False),
    "tests": ("BUILD_TEST", False),
}

BLAS_CHOICES = ("auto", "OpenBLAS", "MKL", "Eigen", "BLIS", "FLAME")

# Environment entries that change how fast or where a build runs, not what it
# produces: they stay out of the cache key.
NON_OUTPUT_ENV = frozenset([
    "MAX_JOBS", "CMAKE_BUILD_PARALLEL_LEVEL", "HOME", "TMPDIR", "CCACHE_DIR",
    "CMAKE_C_COMPILER_LAUNCHER", "CMAKE_CXX_COMPILER_LAUNCHER", "CMAKE_CUDA_COMPILER_LAUNCHER",
    "http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
    "PIP_CERT", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX",
    "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "LANG", "LC_ALL",
])

# Taken from the caller's environment when set (network and certificate settings).
PASSTHROUGH_ENV = ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
                   "PIP_CERT", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX",
                   "PIP_CONFIG_FILE", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")
# Git configuration given through the environment (GIT_CONFIG_COUNT, GIT_CONFIG_KEY_<n>, GIT_CONFIG_VALUE_<n>):
# an offline bundle's mirrors for the submodules.
PASSTHROUGH_PREFIXES = ("GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_")

SYSTEM_PATH = ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]


def debian_triplet(machine):
    return {"aarch64": "aarch64-linux-gnu", "arm64": "aarch64-linux-gnu",
            "x86_64": "x86_64-linux-gnu", "amd64": "x86_64-linux-gnu"}.get(machine, "%s-linux-gnu" % machine)


def find_cusparselt(machine, cuda_major, root="/"):
    """cuSPARSELt of the CUDA-13 Debian packages: {'root', 'include', 'library'} or None."""
    triplet = debian_triplet(machine)
    candidates = [
        (os.path.join(root, "usr/include/libcusparseLt", str(cuda_major)),
         os.path.join(root, "usr/lib", triplet, "libcusparseLt", str(cuda_major))),
        (os.path.join(root, "usr/include"), os.path.join(root, "usr/lib", triplet)),
    ]
    for include, libdir in candidates:
        lib = os.path.join(libdir, "libcusparseLt.so")
        if os.path.isfile(os.path.join(include, "cusparseLt.h")) and os.path.exists(lib):
            return {"root": os.path.join(root, "usr"), "include": include, "library": lib}
    return None


def resolve_features(features, machine, cusparselt_found):
    """Every feature to a bool (None in ``features`` means the default)."""
    features = dict(features or {})
    unknown = sorted(set(features) - set(FEATURES))
    if unknown:
        raise JobError("unknown feature(s) %s; known: %s" % (", ".join(unknown), ", ".join(sorted(FEATURES))))
    resolved = {}
    for name, (_var, default) in FEATURES.items():
        value = features.get(name)
        if value is None:
            if name == "cusparselt":
                value = bool(cusparselt_found)
            elif name == "mkldnn":
                value = machine not in ("aarch64", "arm64")
            else:
                value = default
        resolved[name] = bool(value)
    if not resolved["cuda"]:
        for name in ("cudnn", "cusparselt", "cufile", "nccl", "system_nccl", "flash_attention",
                     "mem_eff_attention", "fbgemm_genai", "magma"):
            resolved[name] = False
    if not resolved["distributed"]:
        for name in ("nccl", "system_nccl", "gloo", "tensorpipe", "mpi"):
            resolved[name] = False
    if resolved["system_nccl"] and not resolved["nccl"]:
        raise JobError("features.system_nccl needs features.nccl")
    if resolved["mkldnn_acl"] and not resolved["mkldnn"]:
        raise JobError("features.mkldnn_acl needs features.mkldnn")
    return resolved


def choose_blas(blas, machine):
    """BLAS for the machine: OpenBLAS on aarch64 (MKL does not exist there)."""
    arm = machine in ("aarch64", "arm64")
    if blas in (None, "", "auto"):
        return "OpenBLAS" if arm else "MKL"
    if blas not in BLAS_CHOICES:
        raise JobError("blas must be one of %s, got %r" % (", ".join(BLAS_CHOICES), blas))
    if arm and blas == "MKL":
        raise JobError("blas=MKL is impossible on aarch64 (Intel MKL has no Arm build): use OpenBLAS")
    return blas


def build_env(params):
    """The complete, clean build environment (nothing inherited but proxies/certs).

    ``params`` keys: arch_list, features (resolved), machine, blas, cuda_home,
    venv_bin, cusparselt ({'root','include','library'} or None), build_version,
    build_number, jobs, extra_env, home, tmpdir, ccache (path or None),
    ccache_dir, caller_env.
    """
    cuda_home = params["cuda_home"]
    features = params["features"]
    path = [params["venv_bin"]]
    if features["cuda"]:
        path.append(os.path.join(cuda_home, "bin"))
    path.extend(SYSTEM_PATH)
    ld_path = []
    if features["cuda"]:
        ld_path.append(os.path.join(cuda_home, "lib64"))
    env = {
        "PATH": ":".join(path),
        "HOME": params.get("home") or "/root",
        "TMPDIR": params.get("tmpdir") or "/tmp",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "MAX_JOBS": str(params["jobs"]),
        "CMAKE_BUILD_PARALLEL_LEVEL": str(params["jobs"]),
        "PYTORCH_BUILD_VERSION": str(params["build_version"]),
        "PYTORCH_BUILD_NUMBER": str(params["build_number"]),
        "BLAS": choose_blas(params.get("blas"), params["machine"]),
        "USE_MKL": "0",
    }
    if env["BLAS"] == "MKL":
        env["USE_MKL"] = "1"
    for name, (var, _default) in FEATURES.items():
        env[var] = "1" if features[name] else "0"
    if features["cuda"]:
        env["CUDA_HOME"] = cuda_home
        env["CUDA_PATH"] = cuda_home
        env["CUDACXX"] = os.path.join(cuda_home, "bin", "nvcc")
        env["TORCH_CUDA_ARCH_LIST"] = params["arch_list"]
    else:
        env["TORCH_CUDA_ARCH_LIST"] = ""
    if features["cusparselt"]:
        found = params.get("cusparselt")
        if not found:
            raise JobError(
                "features.cusparselt is on but cuSPARSELt was not found: install libcusparselt0-dev-cuda-13 "
                "(see the cusparselt role), give cusparselt_root/cusparselt_include_dir/cusparselt_library, "
                "or set features.cusparselt: false")
        env["CUSPARSELT_ROOT_DIR"] = found["root"]
        env["CUSPARSELT_INCLUDE_DIR"] = found["include"]
        env["CUSPARSELT_LIBRARY"] = found["library"]
        ld_path.append(os.path.dirname(found["library"]))
    # Always set, never inherited: a `set -u` shell or a cmake step expanding an
    # unset LD_LIBRARY_PATH is seed 002's first failure.
    env["LD_LIBRARY_PATH"] = ":".join(ld_path)
    if params.get("ccache"):
        env["CCACHE_DIR"] = params.get("ccache_dir") or os.path.join(env["HOME"], ".cache", "ccache")
        env["CMAKE_C_COMPILER_LAUNCHER"] = params["ccache"]
        env["CMAKE_CXX_COMPILER_LAUNCHER"] = params["ccache"]
        if features["cuda"]:
            env["CMAKE_CUDA_COMPILER_LAUNCHER"] = params["ccache"]
    caller = params.get("caller_env") or {}
    for name in PASSTHROUGH_ENV:
        if caller.get(name):
            env[name] = caller[name]
    for name, value in caller.items():
        if name.startswith(PASSTHROUGH_PREFIXES):
            env[name] = value
    for name, value in (params.get("extra_env") or {}).items():
        env[str(name)] = "" if value is None else str(value)
    return env


def output_env(env):
    """The part of the environment that can change the wheel (goes into the key)."""
    return {k: v for k, v in env.items() if k not in NON_OUTPUT_ENV}


def plan_jobs(jobs, meminfo_path="/proc/meminfo"):
    return resolve_jobs(jobs, MEM_PER_JOB_GIB, RESERVE_GIB, meminfo_path=meminfo_path)


def build_key(inputs):
    """Cache key over every input that can change the wheel.

    ``inputs``: commit, version, build_number, arch_list, features, env
    (already reduced by output_env), fixes (name -> definition), patches
    (name -> sha256), toolchain (compiler/CUDA/cmake versions), python.
    """
    required = ("commit", "version", "build_number", "arch_list", "features", "env", "fixes",
                "patches", "toolchain", "python")
    missing = [k for k in required if k not in inputs]
    if missing:
        raise JobError("cache key inputs missing: %s" % ", ".join(missing))
    return cache_key({k: inputs[k] for k in required})


def read_build_requirements(src):
    """Build requirements named by the source (requirements-build.txt, else requirements.txt)."""
    for candidate in ("requirements-build.txt", "requirements.txt"):
        path = os.path.join(src, candidate)
        if os.path.isfile(path):
            with open(path) as handle:
                return parse_build_requirements(handle.read())
    return parse_build_requirements("")


def parse_build_requirements(text):
    """setuptools and wheel, then each requirement line of a requirements file (options and includes
    skipped), first mention of a name wins."""
    base = ["setuptools", "wheel"]
    names = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        names.append(line)
    seen, out = set(), []
    for req in base + names:
        key = re.split(r"[<>=!~;\[ ]", req, 1)[0].lower().replace("_", "-")
        if key in seen:
            continue
        seen.add(key)
        out.append(req)
    return out


def wheel_matches(filename, version):
    """Does a wheel file name carry exactly ``version`` (local part ignored)?"""
    parts = os.path.basename(filename).split("-")
    if len(parts) < 5:
        return False
    wheel_version = parts[1].split("+")[0]
    return wheel_version == str(version)
