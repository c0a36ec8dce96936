# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Kept whole: one PyTorch release's source build, in the order torch_job plans it: the release and the arch
# list it can build (the names are cuda/arch.py's since issue 45 item 1; left here is the releases' data,
# arch_min_version and traps), the fixes that list needs, the environment and key, then those fixes applied.
# The cut at build_env would part trap_decisions/select_fixes, which pick sparkforge_torch_fixes entries by
# name, from fix_fingerprint/apply_all, which read the same entries.
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
* fixes: exact-text edits and patch files, each checked before it is applied.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import hashlib
import json
import os
import re
import subprocess

from ansible_collections.sparkforge.stack.plugins.module_utils.build.build_common import (
    JobError,
    cache_key,
    resolve_jobs,
)
from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import (
    atomic_write_text, canonical_json, sha256_file)
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


class FixError(JobError):
    """A fix or patch does not apply (message names the file and the hunk)."""


def version_tuple(text):
    """'2.10.0' -> (2, 10, 0); '2.9.1a0+git123' -> (2, 9, 1)."""
    match = re.match(r"^\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?", str(text or ""))
    if not match:
        raise JobError("not a version: %r" % (text,))
    return tuple(int(part or 0) for part in match.groups())


# ---------------------------------------------------------------- arch lists

def parse_arch_list(value):
    """Split a TORCH_CUDA_ARCH_LIST ('8.0;9.0 12.0+PTX' or a list) into entries (cuda/arch.py reads them).

    Each entry: cuda.arch's fields plus 'name' (the text) and 'suffix' (the variant: '', 'a' or 'f').
    Raises ArchListError for text that is not an arch name.
    """
    try:
        entries = arch.parse_list(value, "TORCH_CUDA_ARCH_LIST")
    except arch.ArchError as exc:
        raise ArchListError(str(exc))
    for entry in entries:
        entry["name"], entry["suffix"] = entry["text"], entry["variant"]
    return entries


def format_arch_list(entries):
    """Canonical ';'-joined list: sorted by capability, duplicates merged (read again from each name,
    which plan_arch_list may have swapped)."""
    return arch.to_torch([arch.parse_name(entry["name"]) for entry in entries])


def runs_on(entry, capability):
    """Whether an arch list entry gives code a GPU of ``capability`` ('12.1') runs (cuda/arch.py's rules)."""
    return arch.runs_on(entry["name"], capability)


def uncovered_capabilities(entries, capabilities):
    """The host's GPU capabilities for which no entry of the arch list has code, in order."""
    return [c for c in capabilities if not any(runs_on(e, c) for e in entries)]


def arch_list_errors(entries, version, arch_min_version):
    """Every reason the release ``version`` cannot build ``entries`` (empty list: fine)."""
    errors = []
    have = version_tuple(version)
    if not entries:
        errors.append("the arch list is empty: name at least one compute capability (e.g. 12.0)")
    for entry in entries:
        if entry["suffix"] == "f":
            errors.append(
                "'%s': family ('f') targets are refused: torch.utils.cpp_extension (torchvision, torchaudio and "
                "every extension build) rejects them; use '%s' (SASS for %s runs on every later %s.x GPU)"
                % (entry["name"], entry["base"], entry["base"], entry["base"].split(".")[0]))
            continue
        minimum = arch_min_version.get(entry["base"])
        if minimum is None:
            errors.append(
                "'%s': PyTorch does not know the arch %s; known names: %s"
                % (entry["name"], entry["base"], ", ".join(sorted(arch_min_version, key=version_tuple))))
            continue
        if have < version_tuple(minimum):
            errors.append(
                "'%s': torch %s rejects it (\"Unknown CUDA arch (%s)\"); it is accepted from torch %s on: "
                "pick a newer release or a lower arch (SASS for X.0 runs on every X.y GPU)"
                % (entry["name"], version, entry["base"], minimum))
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
    entries = parse_arch_list(text)
    swapped = []
    for trap_name in release.get("traps") or []:
        trap = (data.get("traps") or {}).get(trap_name) or {}
        bad = set(trap.get("archs") or [])
        safe = trap.get("safe_arch")
        for entry in entries:
            if entry["base"] in bad and safe:
                swapped.append("%s -> %s (%s)" % (entry["base"], safe, trap_name))
                entry["base"] = safe
                entry["name"] = safe + entry["suffix"] + ("+PTX" if entry["ptx"] else "")
    if swapped:
        why += "; trap avoided: " + ", ".join(swapped)
    return format_arch_list(entries), why


def plan_arch_list(requested, version, release, platform_class, capabilities, data, fixes,
                   variable="sparkforge_cuda_arch_list"):
    """Validate (or choose) the arch list for ``version``.

    Returns {'arch_list', 'why', 'fixes_needed'}; raises ArchListError with
    every problem at once.
    """
    coverage = None
    if requested:
        entries = parse_arch_list(requested)
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
        entries = parse_arch_list(text)
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
            % (format_arch_list(entries) if entries else requested, version, "\n- ".join(errors)))
    return {"arch_list": format_arch_list(entries), "why": why, "fixes_needed": need}


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


# ---------------------------------------------------------------- fixes and patches

def fix_fingerprint(definition):
    return hashlib.sha256(canonical_json(definition).encode("utf-8")).hexdigest()


def _edit_targets(src, pattern):
    if os.path.isabs(pattern) or ".." in pattern.split("/"):
        raise FixError("edit path %r must be relative to the source tree" % pattern)
    matches = sorted(p for p in glob.glob(os.path.join(src, pattern)) if os.path.isfile(p))
    return matches


def check_edit(src, edit, fix_name="edit"):
    """Verify an exact-text edit applies; return [(path, occurrences)]."""
    pattern = edit["files"]
    old, new = edit["old"], edit["new"]
    count = str(edit.get("count", "once"))
    if count not in ("once", "all"):
        raise FixError("%s: count must be 'once' or 'all', got %r" % (fix_name, count))
    targets = _edit_targets(src, pattern)
    if not targets:
        raise FixError("%s: no file matches %s in %s" % (fix_name, pattern, src))
    plan = []
    for path in targets:
        with open(path) as handle:
            text = handle.read()
        found = text.count(old)
        rel = os.path.relpath(path, src)
        if count == "once" and found != 1:
            raise FixError("%s: %s must contain the text %r exactly once, found %d time(s)"
                           % (fix_name, rel, old, found))
        if count == "all" and found < 1:
            state = " (the fixed text is already there: the source is not the expected release)" \
                if new in text else ""
            raise FixError("%s: %s does not contain the text %r%s" % (fix_name, rel, old, state))
        plan.append((path, found))
    return plan


def apply_edit(src, edit, fix_name="edit"):
    """Apply an exact-text edit after checking every target (all or nothing)."""
    plan = check_edit(src, edit, fix_name)
    for path, _found in plan:
        with open(path) as handle:
            text = handle.read()
        # Aside and renamed: a run killed here leaves the old text or the new, never half a file; the
        # source file's mode goes with it (an executable script stays one).
        atomic_write_text(path, text.replace(edit["old"], edit["new"]), os.stat(path).st_mode & 0o7777)
    return [os.path.relpath(p, src) for p, _f in plan]


def _git_apply(src, patch, check_only, reverse=False):
    cmd = ["git", "apply", "--verbose"]
    if check_only:
        cmd.append("--check")
    if reverse:
        cmd.append("--reverse")
    cmd.append(os.path.abspath(patch))
    proc = subprocess.Popen(cmd, cwd=src, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = proc.communicate()[0].decode("utf-8", "replace")
    return proc.returncode, out


def patch_failure_detail(output, patch=None):
    """Name the file and hunk git apply could not place ('patch failed: FILE:LINE')."""
    hunks = {}
    if patch and os.path.isfile(patch):
        current = None
        with open(patch, errors="replace") as handle:
            for line in handle:
                if line.startswith("+++ "):
                    current = line[4:].strip().split("\t")[0]
                    if current.startswith("b/"):
                        current = current[2:]
                match = re.match(r"^(@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@)", line)
                if match and current:
                    hunks[(current, match.group(2))] = match.group(1)
    found = []
    for match in re.finditer(r"patch failed: (.+):(\d+)", output):
        path, line = match.group(1), match.group(2)
        hunk = hunks.get((path, line), "at line %s" % line)
        found.append("file %s, hunk %s" % (path, hunk))
    if found:
        return "; ".join(found)
    lines = [line.strip() for line in output.splitlines() if line.startswith("error:")]
    return "; ".join(lines) or output.strip()


def check_patch(src, patch, name=None):
    if not os.path.isfile(patch):
        raise FixError("patch file %s does not exist" % patch)
    code, out = _git_apply(src, patch, check_only=True)
    if code != 0:
        raise FixError("patch %s does not apply to %s: %s" % (name or patch, src, patch_failure_detail(out, patch)))
    return out


def apply_patch(src, patch, name=None):
    check_patch(src, patch, name)
    code, out = _git_apply(src, patch, check_only=False)
    if code != 0:
        raise FixError("patch %s failed to apply: %s" % (name or patch, patch_failure_detail(out, patch)))
    return out


MARKER = ".sparkforge-applied.json"


def read_applied(src):
    try:
        with open(os.path.join(src, MARKER)) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError):
        return {}


def _write_applied(src, applied):
    # A half-written marker would read as "nothing applied" and the next run would apply the fixes twice.
    atomic_write_text(os.path.join(src, MARKER), json.dumps(applied, indent=1, sort_keys=True))


def apply_all(src, fix_names, fixes, user_patches, check_only=False):
    """Apply the named fixes then the user's patch files, each once.

    The marker file in the source root remembers what is applied (with a
    fingerprint), so a resumed build does not apply anything twice.  Returns a
    list of {'name', 'kind', 'state': 'applied'|'already'|'would apply', 'files'}.
    """
    applied = read_applied(src)
    report = []
    for name in fix_names:
        definition = fixes[name]
        key = "fix:" + name
        fingerprint = fix_fingerprint(definition)
        if applied.get(key) == fingerprint:
            report.append({"name": name, "kind": "fix", "state": "already", "files": []})
            continue
        if key in applied:
            raise FixError("fix %s was applied to %s in another form; start from a clean source tree "
                           "(remove it or use force with a fresh build_dir)" % (name, src))
        files = []
        for edit in definition.get("edits") or []:
            plan = check_edit(src, edit, name)
            files.extend(os.path.relpath(p, src) for p, _f in plan)
        for patch in definition.get("patches") or []:
            check_patch(src, patch, "%s (%s)" % (name, patch))
        if not check_only:
            for edit in definition.get("edits") or []:
                apply_edit(src, edit, name)
            for patch in definition.get("patches") or []:
                apply_patch(src, patch, "%s (%s)" % (name, patch))
            applied[key] = fingerprint
            _write_applied(src, applied)
        report.append({"name": name, "kind": "fix", "state": "would apply" if check_only else "applied",
                       "files": files})
    for patch in user_patches or []:
        key = "patch:" + os.path.basename(patch)
        digest = sha256_file(patch) if os.path.isfile(patch) else None
        if digest and applied.get(key) == digest:
            report.append({"name": patch, "kind": "patch", "state": "already", "files": []})
            continue
        check_patch(src, patch)
        if not check_only:
            apply_patch(src, patch)
            applied[key] = digest
            _write_applied(src, applied)
        report.append({"name": patch, "kind": "patch", "state": "would apply" if check_only else "applied",
                       "files": []})
    return report


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
