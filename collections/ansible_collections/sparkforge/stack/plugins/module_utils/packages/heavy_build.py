# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Source builds of packages with CUDA kernels ("heavy" packages: xformers, flash-attn, causal-conv1d).

Plain functions, no Ansible imports, so unit tests call them directly.  A matrix entry of
roles/manifest/defaults/main/ml_packages.yml that compiles GPU code carries a ``gpu_build`` mapping:

* ``arch_env``: the environment variables its build reads for the architectures, each with
  the form it wants: ``torch`` ("9.0;12.1", TORCH_CUDA_ARCH_LIST's form) or ``sm_numbers``
  ("90;120") restricted to ``choices`` (the values its setup.py knows).
* ``force_build``: variables that stop setup.py from downloading a prebuilt wheel (or make
  it compile CUDA code on a builder without a visible GPU).
* ``jobs_env`` / ``threads_env`` / ``nvcc_threads`` / ``job_memory_gib``: how many compile
  jobs run at once and how much memory each takes, so the job count fits the host's memory
  (a GB10's memory is shared by CPU and GPU: a parallel nvcc can take the host down).
* ``fixes``: text replacements in the unpacked sdist for builds that ignore the standard
  variable (causal-conv1d 1.7.0 hard-codes nine ``-gencode`` targets, and torch's
  cpp_extension then drops TORCH_CUDA_ARCH_LIST).  Each names the file, a regular expression,
  the replacement and how many matches the checked release has: another count means the
  package changed and the build is refused rather than built with archs nobody chose.
* ``checked``: where each fact was read (repository, path, release).

After the build every shared object of the wheel is audited (gpu_audit.py: its device code against
the host's compute capabilities and the requested arch list, its links against the host) and a
refused wheel is never installed.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import tarfile
import zipfile

from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import arch as cuda_arch
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import cxx_std

GPU_BUILD_KEYS = ("arch_env", "force_build", "jobs_env", "threads_env", "nvcc_threads", "job_memory_gib",
                  "fixes", "checked", "audit_env", "arch_list_honoured", "cxx")
ARCH_FORMS = ("torch", "sm_numbers")
# Share of the memory the compile jobs may take together; the rest stays for the OS, the
# linker and (on unified-memory hosts) the GPU.
MEMORY_SHARE = 0.75


class HeavyBuildError(Exception):
    """A gpu_build entry, arch list or sdist that cannot be used; the message names what and why."""


def _runs_on(choice, target):
    """SASS for sm_<choice> runs on ``target`` (an entry)."""
    major, minor, variant = cuda_arch.parse_sm(choice)
    return cuda_arch.sass_runs_on(major, minor, variant, (target["major"], target["minor"]))


def render_arch(archs, spec, package):
    """The value of one arch variable (``spec``: {name, form, choices?, separator?}) for ``archs``."""
    form = spec.get("form")
    sep = spec.get("separator", ";")
    if form == "torch":
        variants = [a["text"] for a in archs if a["variant"]]
        if variants and spec.get("variants") is False:
            raise HeavyBuildError(
                "%s reads %s as numbers only (no a/f variants): %s cannot be built for %s; give the plain "
                "architecture (e.g. 9.0 for 9.0a) for this package" % (package, spec["name"], package, ", ".join(variants)))
        return sep.join(a["text"] for a in archs)
    if form == "sm_numbers":
        choices = [str(c) for c in spec.get("choices") or []]
        if not choices:
            return sep.join("%d%d" % (a["major"], a["minor"]) for a in archs)
        picked = []
        for arch in archs:
            fits = [c for c in choices if _runs_on(c, arch)]
            if not fits:
                raise HeavyBuildError(
                    "%s compiles only for %s (%s in its setup.py): none of them runs on %d.%d; "
                    "leave %s out on this host class or give it a newer release"
                    % (package, ";".join(choices), spec["name"], arch["major"], arch["minor"], package))
            best = max(fits, key=lambda c: cuda_arch.parse_sm(c)[:2])
            if best not in picked:
                picked.append(best)
        return sep.join(sorted(picked, key=lambda c: cuda_arch.parse_sm(c)[:2]))
    raise HeavyBuildError("%s: gpu_build arch_env %s has form %r (known: %s)"
                          % (package, spec.get("name"), form, ", ".join(ARCH_FORMS)))


def validate_gpu_build(package, gpu_build):
    """Refuse a malformed gpu_build entry with a message naming the package and the field."""
    if not isinstance(gpu_build, dict):
        raise HeavyBuildError("%s: gpu_build must be a mapping, got %r" % (package, gpu_build))
    unknown = sorted(set(gpu_build) - set(GPU_BUILD_KEYS))
    if unknown:
        raise HeavyBuildError("%s: gpu_build has unknown field(s) %s (known: %s)"
                              % (package, ", ".join(unknown), ", ".join(GPU_BUILD_KEYS)))
    specs = gpu_build.get("arch_env") or []
    if not specs:
        raise HeavyBuildError("%s: gpu_build.arch_env is empty: name the variable(s) its build reads "
                              "for the architectures (TORCH_CUDA_ARCH_LIST at least)" % package)
    for spec in specs:
        if not isinstance(spec, dict) or not spec.get("name") or spec.get("form") not in ARCH_FORMS:
            raise HeavyBuildError("%s: gpu_build.arch_env entry %r needs a name and a form (%s)"
                                  % (package, spec, ", ".join(ARCH_FORMS)))
    audit_env = gpu_build.get("audit_env")
    if audit_env is not None and audit_env not in [spec["name"] for spec in specs]:
        raise HeavyBuildError("%s: gpu_build.audit_env %r is not one of its arch_env variables (%s)"
                              % (package, audit_env, ", ".join(spec["name"] for spec in specs)))
    if not isinstance(gpu_build.get("arch_list_honoured", False), bool):
        raise HeavyBuildError("%s: gpu_build.arch_list_honoured must be true or false, got %r"
                              % (package, gpu_build["arch_list_honoured"]))
    for key in ("nvcc_threads", "job_memory_gib"):
        value = gpu_build.get(key)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            raise HeavyBuildError("%s: gpu_build.%s must be a positive number, got %r" % (package, key, value))
    if not gpu_build.get("jobs_env"):
        raise HeavyBuildError("%s: gpu_build.jobs_env is empty (MAX_JOBS for torch's cpp_extension builds)" % package)
    for fix in gpu_build.get("fixes") or []:
        if not isinstance(fix, dict) or not all(fix.get(k) is not None for k in ("file", "pattern", "replace", "count")):
            raise HeavyBuildError("%s: gpu_build.fixes entry %r needs file, pattern, replace and count" % (package, fix))
        if os.path.isabs(fix["file"]) or ".." in fix["file"].split("/"):
            raise HeavyBuildError("%s: gpu_build.fixes file %r must be a path inside the sdist" % (package, fix["file"]))
        try:
            re.compile(fix["pattern"])
        except re.error as exc:
            raise HeavyBuildError("%s: gpu_build.fixes pattern %r is not a regular expression: %s"
                                  % (package, fix["pattern"], exc))
    if not gpu_build.get("checked"):
        raise HeavyBuildError("%s: gpu_build.checked is empty: say where each fact was read" % package)
    try:
        cxx_std.validate(package, gpu_build)
    except cxx_std.CxxError as exc:
        raise HeavyBuildError(str(exc))
    return gpu_build


def build_jobs(cpus, memory_gib, job_memory_gib, share=MEMORY_SHARE):
    """Compile jobs at once: no more than the CPUs, and no more than fit in ``share`` of the memory."""
    by_memory = int((float(memory_gib) * share) // float(job_memory_gib))
    return max(1, min(int(cpus), by_memory))


def build_env(package, gpu_build, arch_list, cpus, memory_gib, variable="cuda_arch_list"):
    """(environment, notes) of one heavy source build: every arch form, force-build flags, job knobs."""
    validate_gpu_build(package, gpu_build)
    # Only the numeric names TORCH_CUDA_ARCH_LIST accepts (cuda/arch.py), so every form derived is exact.
    try:
        archs = cuda_arch.parse_list(arch_list, variable, allow_empty=False)
    except cuda_arch.ArchError as exc:
        raise HeavyBuildError(str(exc))
    env = {}
    for spec in gpu_build["arch_env"]:
        env[spec["name"]] = render_arch(archs, spec, package)
    for name, value in (gpu_build.get("force_build") or {}).items():
        env[str(name)] = str(value)
    threads = int(gpu_build["nvcc_threads"])
    jobs = build_jobs(cpus, memory_gib, gpu_build["job_memory_gib"])
    env[gpu_build["jobs_env"]] = str(jobs)
    if gpu_build.get("threads_env"):
        env[gpu_build["threads_env"]] = str(threads)
    notes = ["%s=%s: %d CPUs, %.0f GiB available, %s GiB per compile job (nvcc --threads %d)"
             % (gpu_build["jobs_env"], jobs, int(cpus), float(memory_gib), gpu_build["job_memory_gib"], threads)]
    return env, notes


def memory_available_gib(meminfo_text):
    """MemAvailable of /proc/meminfo in GiB (what the build may use now)."""
    match = re.search(r"^MemAvailable:\s+(\d+)\s+kB", meminfo_text or "", re.MULTILINE)
    if not match:
        raise HeavyBuildError("cannot read MemAvailable from /proc/meminfo: the job count cannot be sized to memory")
    return int(match.group(1)) / (1024.0 * 1024.0)


# ---- the sdist ------------------------------------------------------------------------

def unpack_sdist(archive, dest):
    """Unpack a .tar.gz/.zip sdist into ``dest`` (no member may leave it); returns the project directory."""
    real_dest = os.path.realpath(dest)

    def inside(name):
        target = os.path.realpath(os.path.join(real_dest, name))
        return target == real_dest or target.startswith(real_dest + os.sep)

    if archive.endswith((".tar.gz", ".tgz", ".tar")):
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                if not inside(member.name) or member.issym() or member.islnk() or member.isdev():
                    raise HeavyBuildError("%s: member %r is a link or leaves the directory: refused"
                                          % (archive, member.name))
            tar.extractall(real_dest)  # nosec: every member was checked above
    elif archive.endswith(".zip"):
        with zipfile.ZipFile(archive) as zipped:
            for name in zipped.namelist():
                if not inside(name):
                    raise HeavyBuildError("%s: member %r leaves the directory: refused" % (archive, name))
            zipped.extractall(real_dest)
    else:
        raise HeavyBuildError("%s is not an sdist (.tar.gz or .zip)" % archive)
    tops = [d for d in sorted(os.listdir(real_dest)) if os.path.isdir(os.path.join(real_dest, d))]
    for top in tops:
        project = os.path.join(real_dest, top)
        if os.path.isfile(os.path.join(project, "setup.py")) or os.path.isfile(os.path.join(project, "pyproject.toml")):
            return project
    raise HeavyBuildError("%s holds no project directory with setup.py or pyproject.toml" % archive)


def apply_fixes(project, fixes, package):
    """Apply each fix to the unpacked sdist; a match count other than the checked one refuses the build."""
    applied = []
    for fix in fixes or []:
        path = os.path.join(project, fix["file"])
        if not os.path.isfile(path):
            raise HeavyBuildError("%s: the fix for %s cannot be applied: the sdist has no %s"
                                  % (package, fix["file"], fix["file"]))
        with open(path) as handle:
            text = handle.read()
        new, count = re.subn(fix["pattern"], fix["replace"], text, flags=re.MULTILINE)
        if count != int(fix["count"]):
            raise HeavyBuildError(
                "%s: the fix for %s matched %d time(s), the checked release has %d: the file changed, so the "
                "build would not get the arch list asked for; check the new release and update gpu_build.fixes"
                % (package, fix["file"], count, int(fix["count"])))
        with open(path, "w") as handle:
            handle.write(new)
        applied.append({"file": fix["file"], "replaced": count, "why": fix.get("why", "")})
    return applied


# ---- the toolkit ----------------------------------------------------------------------

def toolkit_env(env, base_path=None):
    """``env`` with ``$CUDA_HOME/bin`` first on PATH: a setup.py that looks for nvcc on PATH (torch's
    cpp_extension finds CUDA_HOME, many packages' own checks do not) finds the toolkit the plan chose,
    not whichever nvcc the host's PATH happens to hold, nor none (it then skips its CUDA extension)."""
    out = dict(env)
    cuda_home = out.get("CUDA_HOME")
    if not cuda_home:
        return out
    rest = [d for d in (out.get("PATH") or base_path or os.environ.get("PATH", "")).split(os.pathsep) if d]
    bin_dir = os.path.join(cuda_home, "bin")
    out["PATH"] = os.pathsep.join([bin_dir] + [d for d in rest if d != bin_dir])
    return out
