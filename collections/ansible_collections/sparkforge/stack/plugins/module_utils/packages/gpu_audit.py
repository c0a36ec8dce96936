# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit of GPU packages before they are installed, and of the whole venv (verify).

* Device code (module_utils/cuda/fatbin.py): every shared object against the host's compute
  capabilities (a wheel without code the host can run, no SASS of the same major with minor <=
  the host's and no PTX it can JIT, is refused) and, for a source build, against the arch list
  it was asked for (requested_targets: a target missing is refused, one not asked reported, or
  refused where the entry says the list is honoured).
* Links (module_utils/packages/elf_links.py): the CUDA libraries it needs by major version and
  the torch symbols it leaves undefined, against what this host has.

Plain functions, no Ansible imports; the callers (ml_packages_job, heavy_wheels, torch_verify_job)
install or publish only what passes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import shutil
import struct

from ansible_collections.sparkforge.stack.plugins.module_utils.packages.heavy_build import HeavyBuildError
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import arch as cuda_arch
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import fatbin
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import ptx_isa
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import elf_links


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
        try:
            archs = cuda_arch.parse_list(value, name, allow_empty=False)
        except cuda_arch.ArchError as exc:
            raise HeavyBuildError(str(exc))
        sass = [cuda_arch.to_sm(a) for a in archs]
        ptx = [cuda_arch.to_sm(a, "compute") for a in archs if a["ptx"]]
    else:
        sass = ["sm_%s" % n for n in value.split(spec.get("separator", ";")) if n]
        ptx = []
    return {"variable": name, "value": value, "sass": sass, "ptx": ptx,
            "honoured": bool(gpu_build.get("arch_list_honoured"))}


def _meets(asked, present):
    """SASS/PTX ``present`` is what ``asked`` names: same compute capability; an arch-specific ('a')
    request needs the 'a' build (its extra instructions), a plain or family one takes any variant."""
    a_major, a_minor, a_variant = cuda_arch.parse_sm(asked)
    p_major, p_minor, p_variant = cuda_arch.parse_sm(present)
    return (a_major, a_minor) == (p_major, p_minor) and (a_variant != "a" or p_variant == "a")


def compare_requested(lib, requested):
    """(missing, extra) targets of one library against the request: asked for but absent, present but not asked."""
    missing = [t for t in requested["sass"] if not any(_meets(t, s) for s in lib["sass"])]
    missing += [t for t in requested["ptx"] if not any(_meets(t, p) for p in lib["ptx"])]
    extra = [s for s in lib["sass"] if not any(_meets(t, s) for t in requested["sass"])]
    extra += [p for p in lib["ptx"] if not any(_meets(t, p) for t in requested["ptx"])]
    return missing, extra


def _isa_max(ptx_limit):
    return (ptx_limit or {}).get("ptx_isa_max")


def _ptx_lines(lib, ptx_limit):
    """The refusal sentence of a library whose only code for a target is PTX the driver does not load."""
    return [ptx_isa.refusal(lib["path"], lib["ptx_refused"], ptx_limit)] if lib.get("ptx_refused") else []


def audit_wheel(path, targets, package, env=None, gpu_build=None, links=None, ptx_limit=None):
    """Audit every shared object of a built wheel for each target capability.

    Returns {ok, libraries: [{path, sass, ptx, verdicts: {target: verdict}}], message}.
    Refused (ok False): no library with GPU code (the build compiled no kernels; the message
    gives the likely cause from ``env``, the build's environment, and ``gpu_build``), or a
    library with no SASS or PTX that runs on one of the targets.  With ``gpu_build`` each library
    is also held to what was asked (requested_targets): a requested target missing is refused;
    one not asked is reported (the build ignored the list), and refused where the entry says
    the list is honoured.  With ``links`` (elf_links.HostLinks) every ELF member is held to what this
    host has: the CUDA libraries it needs by major version and the torch symbols it leaves undefined.
    With ``ptx_limit`` (ptx_isa.driver_limit) PTX counts only where this driver loads its ISA.
    """
    if not targets:
        raise HeavyBuildError("%s: no compute capability to audit the built wheel against: the host reports no "
                              "GPU; give audit_targets (e.g. ['12.1'])" % package)
    libraries = {}
    for target in targets:
        result = fatbin.audit(path, target=target, ptx_isa_max=_isa_max(ptx_limit))
        for lib in result["libraries"]:
            entry = libraries.setdefault(lib["path"], {"path": lib["path"], "sass": lib["sass"], "ptx": lib["ptx"],
                                                       "ptx_versions": lib["ptx_versions"], "verdicts": {},
                                                       "ptx_refused": []})
            entry["verdicts"][result["target"]] = lib["verdict"]
            entry["ptx_refused"] += [r for r in lib["ptx_refused"] if r not in entry["ptx_refused"]]
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
        bad += _ptx_lines(lib, ptx_limit)
        for target, verdict in sorted(lib["verdicts"].items()):
            if verdict == "unsupported" and not lib["ptx_refused"]:
                bad.append("%s holds SASS %s, PTX %s: nothing runs on %s" % (
                    lib["path"], ",".join(lib["sass"]) or "none", ",".join(lib["ptx"]) or "none", target))
            elif verdict == "jit":
                notes.append("%s runs on %s only through the driver's PTX JIT (%s)" % (
                    lib["path"], target, ",".join(lib["ptx"])))
    linked = []
    if links is not None:
        problems = elf_links.audit_wheel_links(path, links)
        for lib in libs:
            lib["links"] = [text for _kind, text in problems.get(lib["path"], [])]
        linked = ["%s %s" % (member, text) for member in sorted(problems) for _kind, text in problems[member]]
    if bad or linked:
        what = " and ".join(w for w, found in (("arch audit", bad), ("link audit", linked)) if found)
        return {"ok": False, "libraries": libs, "message": "%s: refused by the %s of %s: %s" % (
            package, what, name, "; ".join(bad + linked))}
    return {"ok": True, "libraries": libs, "message": "; ".join(notes)}


def audit_prebuilt(path, targets, package, links, ptx_limit=None):
    """Audit a prebuilt GPU wheel (methods ``wheel``/``index``) before it is installed, per distribution as
    venv_audit does: such a wheel may ship one library per CUDA release and load the one that fits
    (bitsandbytes), so it passes when, for each target, a library that loads here has code that runs.
    A c10/at/torch symbol the venv's torch lacks refuses it whatever else loads.  Without targets (no
    GPU on this host) only the links are checked, and the result says so.
    Returns {ok, libraries, message}."""
    libraries = {}
    for target in targets or [None]:
        result = fatbin.audit(path, target=target, kernels=False, ptx_isa_max=_isa_max(ptx_limit))
        for lib in result["libraries"]:
            entry = libraries.setdefault(lib["path"], {"path": lib["path"], "sass": lib["sass"], "ptx": lib["ptx"],
                                                       "ptx_versions": lib["ptx_versions"], "verdicts": {},
                                                       "ptx_refused": []})
            if target:
                entry["verdicts"][result["target"]] = lib["verdict"]
                entry["ptx_refused"] += [r for r in lib["ptx_refused"] if r not in entry["ptx_refused"]]
    problems = elf_links.audit_wheel_links(path, links)
    libs = [libraries[k] for k in sorted(libraries)]
    for lib in libs:
        lib["links"] = [text for _kind, text in problems.get(lib["path"], [])]
    name = os.path.basename(path)
    bad = ["%s %s" % (member, text) for member in sorted(problems) for kind, text in problems[member]
           if kind == "torch_symbol"]
    loads = [lib for lib in libs if not lib["links"]]
    notes = ["%s %s (another library of it loads)" % (lib["path"], "; ".join(lib["links"]))
             for lib in libs if lib["links"] and loads]
    if libs and not loads:
        bad += ["%s %s" % (lib["path"], "; ".join(lib["links"])) for lib in libs]
    for target in targets or []:
        target = "%d.%d" % cuda_arch.capability(target)
        if loads and not [lib for lib in loads if lib["verdicts"].get(target) not in (None, "unsupported")]:
            bad.append("no library that loads here has code for %s (%s)" % (target, "; ".join(
                "%s: SASS %s, PTX %s" % (lib["path"], ",".join(lib["sass"]) or "none", ",".join(lib["ptx"]) or "none")
                for lib in loads)))
            bad += [line for lib in loads for line in _ptx_lines(lib, ptx_limit)]
    if not targets:
        notes.append("no compute capability to audit against (this host reports no GPU): links checked only")
    if bad:
        return {"ok": False, "libraries": libs, "message": "%s: refused by the audit of the prebuilt %s: %s" % (
            package, name, "; ".join(bad))}
    if not libs:
        notes.append("%s holds no GPU code" % name)
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


def canonical(name):
    return re.sub(r"[-_.]+", "-", str(name)).lower()


def record_distributions(site_dir):
    """Names of the distributions installed in ``site_dir`` (its *.dist-info directories)."""
    return [entry[:-len(".dist-info")].rsplit("-", 1)[0] for entry in sorted(os.listdir(site_dir))
            if entry.endswith(".dist-info")]


def venv_links(site_dir, rel, links):
    """(kind, message) problems of one library of the venv (elf_links.check_library), its own RUNPATH searched."""
    full = os.path.join(site_dir, rel)
    try:
        info = elf_links.read_file(full)
    except (elf_links.ElfLinkError, OSError, ValueError, struct.error) as exc:
        return [("cuda_library", "unreadable ELF: %s" % exc)]
    return elf_links.check_library(info, links, origin_dirs=elf_links.origin_dirs(full, info))


def venv_audit(site_dir, target, exempt=None, links=None, ptx_limit=None):
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
    CUDA library fails it when none of its GPU libraries loads (as for the arch verdict).  With ``ptx_limit``
    (ptx_isa.driver_limit) PTX counts only where this driver loads its ISA: a distribution that would run only
    through newer PTX fails, its library and ISA named.
    """
    result = fatbin.audit(site_dir, target=target, kernels=False, ptx_isa_max=_isa_max(ptx_limit))
    owners = record_owners(site_dir)
    notes = []
    packages = {}
    for lib in result["libraries"]:
        rel = os.path.normpath(lib["path"])
        owner = owners.get(rel) or "(no RECORD: %s)" % rel.split(os.sep)[0]
        slot = packages.setdefault(owner, {"libraries": []})
        entry = {"path": rel, "verdict": lib["verdict"], "sass": lib["sass"], "ptx": lib["ptx"],
                 "ptx_versions": lib["ptx_versions"], "ptx_refused": lib["ptx_refused"]}
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
    exempt = dict((canonical(k), v) for k, v in (exempt or {}).items())
    for name in sorted(packages):
        slot = packages[name]
        best = min((lib["verdict"] for lib in slot["libraries"]), key=fatbin.VERDICTS.index)
        slot["verdict"] = best
        reason = exempt.get(canonical(name))
        if reason and best in ("unsupported", "jit"):
            slot["exempt"] = reason
            notes.append("%s is %s on %s by its fat binaries, exempt: %s" % (name, best, result["target"], reason))
        elif best == "unsupported":
            failures.append("%s has no code for compute capability %s: %s" % (name, result["target"], "; ".join(
                "%s (SASS %s, PTX %s)" % (lib["path"], ",".join(lib["sass"]) or "none", ",".join(lib["ptx"]) or "none")
                for lib in slot["libraries"])) + "".join(
                "; " + line for lib in slot["libraries"] for line in _ptx_lines(lib, ptx_limit)))
        elif best == "jit":
            notes.append("%s runs on %s only through the driver's PTX JIT" % (name, result["target"]))
    return {"target": result["target"], "verdict": fatbin.weakest(s["verdict"] for s in packages.values()),
            "packages": packages, "failures": failures, "notes": notes, "scanned": result["scanned"],
            "errors": result["errors"], "driver": ptx_limit}
