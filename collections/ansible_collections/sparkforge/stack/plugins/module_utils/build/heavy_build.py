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

After the build every shared object of the wheel is audited (module_utils/packages/fatbin.py)
against the host's compute capabilities: a wheel without code the host can run (no SASS of
the same major with minor <= the host's, no PTX it can JIT) is refused and never installed.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import shutil
import tarfile
import zipfile

from ansible_collections.sparkforge.stack.plugins.module_utils.packages import elf_links, fatbin

GPU_BUILD_KEYS = ("arch_env", "force_build", "jobs_env", "threads_env", "nvcc_threads", "job_memory_gib",
                  "fixes", "checked", "audit_env", "arch_list_honoured")
ARCH_FORMS = ("torch", "sm_numbers")
# Share of the memory the compile jobs may take together; the rest stays for the OS, the
# linker and (on unified-memory hosts) the GPU.
MEMORY_SHARE = 0.75

_ARCH_TOKEN = re.compile(r"^(\d+)\.(\d)([af]?)(\+PTX)?$")


class HeavyBuildError(Exception):
    """A gpu_build entry, arch list or sdist that cannot be used; the message names what and why."""


def parse_arch_list(text, variable="cuda_arch_list"):
    """'9.0;12.1+PTX' (';', ',' or spaces between) -> [{major, minor, variant, ptx, text}].

    Only the numeric names TORCH_CUDA_ARCH_LIST accepts; named ones (Hopper, ...) are refused
    here so every form derived from the list is exact.
    """
    tokens = [t for t in re.split(r"[;,\s]+", str(text or "").strip()) if t]
    if not tokens:
        raise HeavyBuildError("%s is empty: a GPU source build needs the architectures to compile for "
                              "(e.g. '12.1' on a DGX Spark, '9.0' on a GH200)" % variable)
    result = []
    bad = []
    for token in tokens:
        match = _ARCH_TOKEN.match(token)
        if not match:
            bad.append(token)
            continue
        result.append({"major": int(match.group(1)), "minor": int(match.group(2)), "variant": match.group(3),
                       "ptx": bool(match.group(4)), "text": token})
    if bad:
        raise HeavyBuildError("%s=%r: %s %s not an architecture like 9.0, 12.1 or 12.0+PTX"
                              % (variable, str(text), ", ".join(repr(b) for b in bad), "is" if len(bad) == 1 else "are"))
    return result


def _runs_on(choice, arch):
    """SASS for sm_<choice> runs on ``arch``: same major, minor <= (binary compatibility)."""
    major, minor, _variant = fatbin.parse_arch(choice)
    return major == arch["major"] and minor <= arch["minor"]


def render_arch(archs, spec, package):
    """The value of one arch variable (``spec``: {name, form, choices?, separator?}) for ``archs``."""
    form = spec.get("form")
    sep = spec.get("separator", ";")
    if form == "torch":
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
            best = max(fits, key=lambda c: fatbin.parse_arch(c)[:2])
            if best not in picked:
                picked.append(best)
        return sep.join(sorted(picked, key=lambda c: fatbin.parse_arch(c)[:2]))
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
    return gpu_build


def build_jobs(cpus, memory_gib, job_memory_gib, share=MEMORY_SHARE):
    """Compile jobs at once: no more than the CPUs, and no more than fit in ``share`` of the memory."""
    by_memory = int((float(memory_gib) * share) // float(job_memory_gib))
    return max(1, min(int(cpus), by_memory))


def build_env(package, gpu_build, arch_list, cpus, memory_gib, variable="cuda_arch_list"):
    """(environment, notes) of one heavy source build: every arch form, force-build flags, job knobs."""
    validate_gpu_build(package, gpu_build)
    archs = parse_arch_list(arch_list, variable)
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


# ---- the audit ------------------------------------------------------------------------

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


def no_gpu_code_cause(env, gpu_build):
    """The likely reason a build compiled no kernels, from what it ran with: no nvcc on its PATH, or
    the entry's force-build variables (the data that makes setup.py compile CUDA without a GPU)."""
    path = (env or {}).get("PATH") or os.environ.get("PATH", "")
    nvcc = shutil.which("nvcc", path=path)
    if not nvcc:
        return ("nvcc was not found on the build's PATH (%s): its setup.py then skips the CUDA extension; "
                "set CUDA_HOME to the toolkit (its bin/ is put first on PATH)" % path)
    force = (gpu_build or {}).get("force_build") or {}
    if force:
        return ("nvcc was found (%s) and the entry's force-build variable(s) %s were set: check that the release "
                "still reads them (gpu_build.force_build)" % (nvcc, ", ".join("%s=%s" % kv for kv in sorted(force.items()))))
    return ("nvcc was found (%s) but the entry sets no force-build variable: if its setup.py compiles CUDA only when "
            "a GPU is visible or a variable is set, name that variable in gpu_build.force_build" % nvcc)


def requested_targets(gpu_build, env):
    """What the build was asked to compile: {variable, value, sass, ptx, honoured}, read from the arch
    variable its device code follows (``audit_env``, default the first of ``arch_env``) as the build got it.

    A torch-form list gives sm_XY (with its a/f variant) per entry and compute_XY for '+PTX' ones, as
    torch's cpp_extension turns TORCH_CUDA_ARCH_LIST into -gencode pairs; an sm_numbers list gives sm_N.
    ``honoured`` (gpu_build.arch_list_honoured) says the build compiles exactly that list, so a target
    nobody asked for is refused rather than reported."""
    name = gpu_build.get("audit_env") or gpu_build["arch_env"][0]["name"]
    spec = [s for s in gpu_build["arch_env"] if s["name"] == name][0]
    value = (env or {}).get(name, "")
    if spec["form"] == "torch":
        archs = parse_arch_list(value, name)
        sass = ["sm_%d%d%s" % (a["major"], a["minor"], a["variant"]) for a in archs]
        ptx = ["compute_%d%d%s" % (a["major"], a["minor"], a["variant"]) for a in archs if a["ptx"]]
    else:
        sass = ["sm_%s" % n for n in value.split(spec.get("separator", ";")) if n]
        ptx = []
    return {"variable": name, "value": value, "sass": sass, "ptx": ptx,
            "honoured": bool(gpu_build.get("arch_list_honoured"))}


def _meets(asked, present):
    """SASS/PTX ``present`` is what ``asked`` names: same compute capability; an arch-specific ('a')
    request needs the 'a' build (its extra instructions), a plain or family one takes any variant."""
    a_major, a_minor, a_variant = fatbin.parse_arch(asked)
    p_major, p_minor, p_variant = fatbin.parse_arch(present)
    return (a_major, a_minor) == (p_major, p_minor) and (a_variant != "a" or p_variant == "a")


def compare_requested(lib, requested):
    """(missing, extra) targets of one library against the request: asked for but absent, present but not asked."""
    missing = [t for t in requested["sass"] if not any(_meets(t, s) for s in lib["sass"])]
    missing += [t for t in requested["ptx"] if not any(_meets(t, p) for p in lib["ptx"])]
    extra = [s for s in lib["sass"] if not any(_meets(t, s) for t in requested["sass"])]
    extra += [p for p in lib["ptx"] if not any(_meets(t, p) for t in requested["ptx"])]
    return missing, extra


def audit_wheel(path, targets, package, env=None, gpu_build=None, links=None):
    """Audit every shared object of a built wheel for each target capability.

    Returns {ok, libraries: [{path, sass, ptx, verdicts: {target: verdict}}], message}.
    Refused (ok False): no library with GPU code (the build compiled no kernels; the message
    gives the likely cause from ``env``, the build's environment, and ``gpu_build``), or a
    library with no SASS or PTX that runs on one of the targets.  With ``gpu_build`` each library
    is also held to what was asked (requested_targets): a requested target missing is refused;
    one not asked is reported (the build ignored the list), and refused where the entry says
    the list is honoured.  With ``links`` (elf_links.HostLinks) every ELF member is held to what this
    host has: the CUDA libraries it needs by major version and the torch symbols it leaves undefined.
    """
    if not targets:
        raise HeavyBuildError("%s: no compute capability to audit the built wheel against: the host reports no "
                              "GPU; give audit_targets (e.g. ['12.1'])" % package)
    libraries = {}
    for target in targets:
        result = fatbin.audit(path, target=target)
        for lib in result["libraries"]:
            entry = libraries.setdefault(lib["path"], {"path": lib["path"], "sass": lib["sass"], "ptx": lib["ptx"],
                                                       "verdicts": {}})
            entry["verdicts"][result["target"]] = lib["verdict"]
    libs = [libraries[k] for k in sorted(libraries)]
    name = os.path.basename(path)
    if not libs:
        return {"ok": False, "libraries": [], "message": (
            "%s: refused by the arch audit: %s holds no shared object with GPU code (the build compiled no "
            "CUDA kernels): %s" % (package, name, no_gpu_code_cause(env, gpu_build)))}
    bad = []
    notes = []
    requested = requested_targets(gpu_build, env) if gpu_build and gpu_build.get("arch_env") else None
    for lib in libs:
        if requested:
            missing, extra = compare_requested(lib, requested)
            lib["missing"], lib["extra"] = missing, extra
            asked = "%s=%s" % (requested["variable"], requested["value"])
            if missing:
                bad.append("%s lacks %s, asked by %s (it holds SASS %s, PTX %s)" % (
                    lib["path"], ",".join(missing), asked, ",".join(lib["sass"]) or "none", ",".join(lib["ptx"]) or "none"))
            if extra:
                line = "%s holds %s, not asked by %s: the build ignored %s" % (
                    lib["path"], ",".join(extra), asked, requested["variable"])
                (bad if requested["honoured"] else notes).append(
                    line + (" (gpu_build.arch_list_honoured is true)" if requested["honoured"] else ""))
        for target, verdict in sorted(lib["verdicts"].items()):
            if verdict == "unsupported":
                bad.append("%s holds SASS %s, PTX %s: nothing runs on %s" % (
                    lib["path"], ",".join(lib["sass"]) or "none", ",".join(lib["ptx"]) or "none", target))
            elif verdict == "jit":
                notes.append("%s runs on %s only through the driver's PTX JIT (%s)" % (
                    lib["path"], target, ",".join(lib["ptx"])))
    linked = []
    if links is not None:
        problems = elf_links.audit_wheel_links(path, links)
        for lib in libs:
            lib["links"] = problems.get(lib["path"], [])
        linked = ["%s %s" % (member, problem) for member in sorted(problems) for problem in problems[member]]
    if bad or linked:
        what = " and ".join(w for w, found in (("arch audit", bad), ("link audit", linked)) if found)
        return {"ok": False, "libraries": libs, "message": "%s: refused by the %s of %s: %s" % (
            package, what, name, "; ".join(bad + linked))}
    return {"ok": True, "libraries": libs, "message": "; ".join(notes)}


# ---- the whole venv -------------------------------------------------------------------

def record_owners(site_dir):
    """{path relative to site-packages: distribution name} from every *.dist-info/RECORD."""
    owners = {}
    for entry in sorted(os.listdir(site_dir)):
        record = os.path.join(site_dir, entry, "RECORD")
        if not entry.endswith(".dist-info") or not os.path.isfile(record):
            continue
        name = entry[:-len(".dist-info")].rsplit("-", 1)[0]
        with open(record) as handle:
            for line in handle:
                path = line.rsplit(",", 2)[0].strip()
                if path:
                    owners[os.path.normpath(path)] = name
    return owners


def _canonical(name):
    return re.sub(r"[-_.]+", "-", str(name)).lower()


def venv_links(site_dir, rel, links):
    """(kind, message) problems of one library of the venv (elf_links.check_library), its own RUNPATH searched."""
    full = os.path.join(site_dir, rel)
    try:
        info = elf_links.read_file(full)
    except (elf_links.ElfLinkError, OSError, ValueError) as exc:
        return [("cuda_library", "unreadable ELF: %s" % exc)]
    return elf_links.check_library(info, links, origin_dirs=elf_links.origin_dirs(full, info))


def venv_audit(site_dir, target, exempt=None, links=None):
    """Audit every shared object with GPU code under ``site_dir`` for ``target``, per distribution.

    A distribution carries code for the GPU when at least one of its libraries does (a package may
    ship one library per CUDA release and load the one that fits, as bitsandbytes does); its weaker
    libraries are listed.  ``exempt`` ({distribution: reason}) names distributions whose device code is
    not (all) in fat binaries this audit reads: they are reported with the reason, never failed.
    Returns {target, verdict, packages: {name: {verdict, libraries}}, failures,
    notes}: a failure per distribution with nothing that runs, a note per distribution that runs
    only through the driver's PTX JIT.  Kernel counts are skipped (verdicts by cubin count): the
    venv may hold gigabytes of libraries.  With ``links`` (elf_links.HostLinks) each GPU library's
    links are checked too: a torch symbol the venv's torch lacks fails its distribution; a missing
    CUDA library fails it when none of its GPU libraries loads (as for the arch verdict).
    """
    result = fatbin.audit(site_dir, target=target, kernels=False)
    owners = record_owners(site_dir)
    notes = []
    packages = {}
    for lib in result["libraries"]:
        rel = os.path.normpath(lib["path"])
        owner = owners.get(rel) or "(no RECORD: %s)" % rel.split(os.sep)[0]
        slot = packages.setdefault(owner, {"libraries": []})
        entry = {"path": rel, "verdict": lib["verdict"], "sass": lib["sass"], "ptx": lib["ptx"]}
        if links is not None:
            entry["links"] = venv_links(site_dir, rel, links)
        slot["libraries"].append(entry)
    failures = []
    if links is not None:
        for name in sorted(packages):
            libs = packages[name]["libraries"]
            torch_bad = ["%s: %s" % (lib["path"], text) for lib in libs for kind, text in lib["links"]
                         if kind == "torch_symbol"]
            cuda_bad = ["%s: %s" % (lib["path"], text) for lib in libs for kind, text in lib["links"]
                        if kind == "cuda_library"]
            loads = any(not lib["links"] for lib in libs)
            if torch_bad or (cuda_bad and not loads):
                failures.append("%s cannot load here: %s" % (name, "; ".join(torch_bad + ([] if loads else cuda_bad))))
            elif cuda_bad:
                notes.append("%s: %s (another of its libraries loads)" % (name, "; ".join(cuda_bad)))
            for lib in libs:
                lib["links"] = [text for _kind, text in lib["links"]]
    exempt = dict((_canonical(k), v) for k, v in (exempt or {}).items())
    for name in sorted(packages):
        slot = packages[name]
        best = min((lib["verdict"] for lib in slot["libraries"]), key=fatbin.VERDICTS.index)
        slot["verdict"] = best
        reason = exempt.get(_canonical(name))
        if reason and best in ("unsupported", "jit"):
            slot["exempt"] = reason
            notes.append("%s is %s on %s by its fat binaries, exempt: %s" % (name, best, result["target"], reason))
        elif best == "unsupported":
            failures.append("%s has no code for compute capability %s: %s" % (name, result["target"], "; ".join(
                "%s (SASS %s, PTX %s)" % (lib["path"], ",".join(lib["sass"]) or "none", ",".join(lib["ptx"]) or "none")
                for lib in slot["libraries"])))
        elif best == "jit":
            notes.append("%s runs on %s only through the driver's PTX JIT" % (name, result["target"]))
    return {"target": result["target"], "verdict": fatbin.weakest(s["verdict"] for s in packages.values()),
            "packages": packages, "failures": failures, "notes": notes, "scanned": result["scanned"],
            "errors": result["errors"]}
