# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The C++ standard of a GPU package's source build against a torch release, judged before anything is built.

PyTorch's headers stop a translation unit below the standard they need (2.14.0's ``ATen/ATen.h``:
``#error C++20 or later compatible compiler is required to use ATen``), and torch's cpp_extension adds
its own ``-std=`` only when the package gives none.  A package whose build hard-codes an older
standard (flash-attn 2.8.3.post2: ``"-std=c++17"`` for nvcc and the host compiler) then fails, hours
into the build.  Three facts decide it, each with its source:

* the standard the torch release's headers require: ``cxx_standard`` of the release in
  sparkforge_torch_releases, with where it was read (sparkforge_torch_cxx_checked);
* the standard the package's build forces: read from its own build files when the sdist is at hand
  (``-std=`` in the string constants of setup.py that a Linux CUDA build reaches: a branch only a
  ROCm/HIP or Windows build takes is left out and named; ``CMAKE_CXX_STANDARD`` / ``-std=`` in a
  top-level CMakeLists.txt), else the entry's ``gpu_build.cxx`` data with where it was read;
* a ``gpu_build.fixes`` entry with ``cxx_std`` that sets the standard (applied with the other fixes,
  its match count checked against the release it was written for).

Where they conflict the plan refuses the build naming the package, its release, the torch release
and what to do.  The standard the build ends up with needs a compiler at least as new as
sparkforge_cxx_min_compilers says, checked in the same pass.  Plain functions, no Ansible imports.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import os
import re

# -std=c++17, --std=c++2a, -std=gnu++20 (gcc, clang and nvcc spell it alike).
STD_FLAG = re.compile(r"(?<![\w-])--?std[= ]((?:c|gnu)\+\+(\d[0-9a-z]))")
CMAKE_STD = re.compile(r"CMAKE_CXX_STANDARD\s+\"?(\d\d)\"?|CMAKE_CXX_STANDARD\"?\s*\)")
# The draft names compilers accept for each standard.
DRAFTS = {"0x": 11, "1y": 14, "1z": 17, "2a": 20, "2b": 23, "2c": 26}
# A name, attribute or call that holds only on a ROCm/HIP build (IS_ROCM, HIP_BUILD, torch.version.hip).
HIP_NAME = re.compile(r"hip|rocm", re.I)
BUILD_FILES = ("setup.py", "CMakeLists.txt")


class CxxError(Exception):
    """Malformed cxx data; the message names the package and the field."""


def std_number(token):
    """'c++17' -> 17, 'gnu++2a' -> 20; None when it is no C++ standard."""
    match = re.match(r"^(?:c|gnu)\+\+(\d[0-9a-z])$", token or "")
    if not match:
        return None
    tail = match.group(1)
    if tail.isdigit():
        return int(tail)
    return DRAFTS.get(tail)


def version_tuple(text):
    """'2.15.0+cu130' -> (2, 15, 0): the local part and pre-release letters left out."""
    out = []
    for part in re.split(r"[.+]", str(text or ""))[:3]:
        match = re.match(r"^(\d+)", part)
        if not match:
            break
        out.append(int(match.group(1)))
    return tuple(out)


# ---- what a build file forces --------------------------------------------------------------

def _dotted(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return "%s.%s" % (base, node.attr) if base else node.attr
    return None


def _truth(node):
    """Whether an ``if`` test holds on a Linux CUDA build: True, False, or None (unknown: both branches count)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        value = _truth(node.operand)
        return None if value is None else not value
    if isinstance(node, ast.BoolOp):
        values = [_truth(v) for v in node.values]
        if isinstance(node.op, ast.And):
            return False if False in values else (True if all(v is True for v in values) else None)
        return True if True in values else (False if all(v is False for v in values) else None)
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and _dotted(node.left) == "sys.platform" \
            and isinstance(node.comparators[0], ast.Constant) and isinstance(node.comparators[0].value, str):
        linux = node.comparators[0].value.startswith("linux")
        if isinstance(node.ops[0], ast.Eq):
            return linux
        if isinstance(node.ops[0], ast.NotEq):
            return not linux
        return None
    if isinstance(node, ast.Call):
        func = _dotted(node.func)
        if func == "sys.platform.startswith" and node.args and isinstance(node.args[0], ast.Constant):
            return "linux".startswith(str(node.args[0].value))
        if func == "bool" and len(node.args) == 1:
            return _truth(node.args[0])
        return None
    name = _dotted(node)
    if name and HIP_NAME.search(name.split(".")[-1]):
        return False
    return None


def _collect(node, lines, live, why, out):
    if isinstance(node, (ast.If, ast.IfExp)):
        holds = _truth(node.test)
        end = getattr(node.test, "end_lineno", None) or node.lineno
        test = " ".join(" ".join(lines[node.lineno - 1:end]).split()) if isinstance(node, ast.If) else \
            "a conditional expression"
        test = test if len(test) <= 120 else test[:117] + "..."
        _collect(node.test, lines, live, why, out)
        body = node.body if isinstance(node.body, list) else [node.body]
        orelse = node.orelse if isinstance(node.orelse, list) else [node.orelse]
        for child in body:
            _collect(child, lines, live and holds is not False, why or
                     ("under `%s` (not taken by a Linux CUDA build)" % test if holds is False else ""), out)
        for child in orelse:
            _collect(child, lines, live and holds is not True, why or
                     ("in the else of `%s` (not taken by a Linux CUDA build)" % test if holds is True else ""), out)
        return
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        for match in STD_FLAG.finditer(node.value):
            std = std_number(match.group(1))
            if std:
                out.append({"line": node.lineno, "text": lines[node.lineno - 1].strip(), "std": std,
                            "flag": match.group(0), "applies": live, "why": "" if live else why})
        return
    for child in ast.iter_child_nodes(node):
        _collect(child, lines, live, why, out)


def read_setup_py(text, name="setup.py"):
    """Every ``-std=`` flag in setup.py's string constants: {file, line, text, std, flag, applies, why};
    ``applies`` is false for one only a ROCm/HIP or Windows build reaches (``why`` names the branch).
    A setup.py that does not parse is read line by line (every flag applies)."""
    lines = text.splitlines()
    out = []
    try:
        tree = ast.parse(text)
    except SyntaxError:
        for number, line in enumerate(lines, 1):
            if line.lstrip().startswith("#"):
                continue
            for match in STD_FLAG.finditer(line):
                if std_number(match.group(1)):
                    out.append({"line": number, "text": line.strip(), "std": std_number(match.group(1)),
                                "flag": match.group(0), "applies": True, "why": ""})
    else:
        _collect(tree, lines, True, "", out)
    for entry in out:
        entry["file"] = name
    return sorted(out, key=lambda e: e["line"])


def read_cmake(text, name="CMakeLists.txt"):
    """``set(CMAKE_CXX_STANDARD 17)`` and ``-std=`` flags of a CMakeLists.txt (comments left out)."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0]
        for match in re.finditer(r"CMAKE_CXX_STANDARD\s+\"?(\d\d)\b", code):
            out.append({"file": name, "line": number, "text": line.strip(), "std": int(match.group(1)),
                        "flag": match.group(0), "applies": True, "why": ""})
        for match in STD_FLAG.finditer(code):
            if std_number(match.group(1)):
                out.append({"file": name, "line": number, "text": line.strip(), "std": std_number(match.group(1)),
                            "flag": match.group(0), "applies": True, "why": ""})
    return out


def read_files(files):
    """``files``: {name: text} of the sdist's top-level build files -> every flag found, in file order."""
    out = []
    for name in BUILD_FILES:
        if name in files:
            out += read_setup_py(files[name], name) if name.endswith(".py") else read_cmake(files[name], name)
    return out


def project_files(project):
    """The top-level build files of an unpacked sdist ({name: text})."""
    files = {}
    for name in BUILD_FILES:
        path = os.path.join(project, name)
        if os.path.isfile(path):
            with open(path, errors="replace") as handle:
                files[name] = handle.read()
    return files


def std_fixes(gpu_build):
    """The entry's fixes that set the C++ standard (``cxx_std``)."""
    return [f for f in (gpu_build or {}).get("fixes") or [] if f.get("cxx_std") is not None]


def fix_files(files, fixes, package):
    """``files`` with each standard fix applied as the build applies it: (new files, problems); a match count
    other than the checked release's is a problem (the file changed: the fix may no longer set the standard)."""
    out, problems = dict(files), []
    for fix in fixes:
        if fix["file"] not in out:
            problems.append("%s: the fix that sets C++%s edits %s, which the sdist does not have"
                            % (package, fix["cxx_std"], fix["file"]))
            continue
        new, count = re.subn(fix["pattern"], fix["replace"], out[fix["file"]], flags=re.MULTILINE)
        if count != int(fix["count"]):
            problems.append("%s: the fix that sets C++%s matched %d time(s) in %s, the checked release has %d: the "
                            "file changed; check the new release and update gpu_build.fixes"
                            % (package, fix["cxx_std"], count, fix["file"], int(fix["count"])))
        out[fix["file"]] = new
    return out, problems


def validate(package, gpu_build):
    """Refuse malformed cxx data (``gpu_build.cxx`` and the fixes' ``cxx_std``) naming the package and field."""
    cxx = gpu_build.get("cxx")
    if cxx is not None:
        if not isinstance(cxx, dict) or sorted(set(cxx) - {"forces", "text", "checked"}):
            raise CxxError("%s: gpu_build.cxx must be a mapping of forces, text and checked, got %r" % (package, cxx))
        forces = cxx.get("forces")
        if forces is not None and (isinstance(forces, bool) or not isinstance(forces, int)):
            raise CxxError("%s: gpu_build.cxx.forces must be a C++ standard such as 17 (or null: the build gives no "
                           "-std and torch's cpp_extension picks it), got %r" % (package, forces))
        if not cxx.get("checked"):
            raise CxxError("%s: gpu_build.cxx.checked is empty: say where the standard was read" % package)
    for fix in std_fixes(gpu_build):
        if isinstance(fix["cxx_std"], bool) or not isinstance(fix["cxx_std"], int):
            raise CxxError("%s: gpu_build.fixes cxx_std must be a C++ standard such as 20, got %r"
                           % (package, fix["cxx_std"]))
    return gpu_build


# ---- the torch release ----------------------------------------------------------------------

def torch_requirement(torch_version, releases, checked=None):
    """{torch, std, source} of a torch release: its ``cxx_standard`` and where that was read.  A release the
    manifest lacks takes the nearest older one's, said so (std None below every known release)."""
    releases = releases or {}
    checked = checked or {}
    base = ".".join(str(n) for n in version_tuple(torch_version))
    if base in releases and releases[base].get("cxx_standard"):
        source = checked.get(base) or "sparkforge_torch_releases %s cxx_standard (not read from its headers)" % base
        return {"torch": torch_version, "std": int(releases[base]["cxx_standard"]), "source": source}
    older = sorted((r for r in releases if releases[r].get("cxx_standard")
                    and version_tuple(r) <= version_tuple(torch_version)), key=version_tuple)
    if not older:
        return {"torch": torch_version, "std": None,
                "source": "torch %s is older than every release of sparkforge_torch_releases: its standard is "
                          "unknown" % torch_version}
    near = older[-1]
    return {"torch": torch_version, "std": int(releases[near]["cxx_standard"]),
            "source": "torch %s is not in sparkforge_torch_releases: C++%s carried from %s (%s)"
                      % (torch_version, releases[near]["cxx_standard"], near,
                         checked.get(near) or "its cxx_standard")}


def newest_accepting(std, releases):
    """The newest release of the manifest whose headers accept C++``std`` (None: none does)."""
    fits = [r for r in releases or {} if releases[r].get("cxx_standard") and int(releases[r]["cxx_standard"]) <= std]
    return max(fits, key=version_tuple) if fits else None


# ---- the compiler ---------------------------------------------------------------------------

def parse_compiler_version(text):
    """('gcc', '13.2.0') or ('clang', '18.1.3') from `c++ --version`; None when unrecognised."""
    match = re.search(r"clang version (\d+(?:\.\d+)*)", text or "")
    if match:
        return ("clang", match.group(1))
    first = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    if re.match(r"^(g\+\+|c\+\+|gcc)\b", first) or "Free Software Foundation" in (text or ""):
        numbers = re.findall(r"\b(\d+\.\d+(?:\.\d+)?)\b", first)
        if numbers:
            return ("gcc", numbers[-1])
    return None


def compiler_words(compiler):
    if not compiler:
        return "none (no c++ on PATH)"
    return "%s %s" % ("GCC" if compiler[0] == "gcc" else "Clang", compiler[1])


def compiler_problem(std, floors, compiler, what):
    """Why ``compiler`` ((kind, version) of `c++ --version`, or None) cannot compile ``what`` as C++``std``."""
    floor = (floors or {}).get(str(std)) or {}
    wanted = " or ".join("%s >= %s" % ("GCC" if k == "gcc" else "Clang", v) for k, v in sorted(floor.items()))
    if not compiler:
        return "%s builds as C++%s, which needs %s: no C++ compiler (c++) on PATH; install g++ (apt install g++)" % (
            what, std, wanted or "a C++ compiler")
    kind, version = compiler
    if floor.get(kind) and version_tuple(version) < version_tuple(floor[kind]):
        return ("%s builds as C++%s, which needs %s (sparkforge_cxx_min_compilers); this host's c++ is %s: install a "
                "newer one (e.g. apt install g++-%s) and make it c++" % (
                    what, std, wanted, compiler_words(compiler), floor.get("gcc", "12")))
    return None


# ---- one build ------------------------------------------------------------------------------

# Build prerequisites that bring a C++ compiler (installed by the role only when a build happens, after the plan).
COMPILER_PREREQS = ("build-essential", "g++", "clang")


def plan_build(package, release, gpu_build, torch, releases, floors, compiler, files=None, prereqs=()):
    """The C++ plan of one GPU source build: {package, release, torch, torch_std, torch_source, forced, forced_from,
    flags, ignored, fixes, std, compiler, problems}.  ``torch``: torch_requirement's result; ``files``: the sdist's
    build files ({name: text}) when it is at hand, else the entry's ``gpu_build.cxx`` data is used.  Without a
    compiler yet, a build whose ``prereqs`` bring one is not refused (its version is judged once it is there)."""
    cxx = (gpu_build or {}).get("cxx") or {}
    fixes = std_fixes(gpu_build)
    problems = []
    out = {"package": package, "release": release, "torch": torch["torch"], "torch_std": torch["std"],
           "torch_source": torch["source"], "compiler": compiler_words(compiler),
           "fixes": ["%s: %s (sets C++%s; %d match(es) in the checked release)"
                     % (f["file"], f.get("why") or f["replace"], f["cxx_std"], int(f["count"])) for f in fixes],
           "ignored": [], "flags": []}
    if files is not None:
        found = read_files(files)
        applies = [f for f in found if f["applies"]]
        out["flags"] = ["%s line %d: %s" % (f["file"], f["line"], f["text"]) for f in applies]
        out["ignored"] = ["%s line %d: %s (%s)" % (f["file"], f["line"], f["text"], f["why"])
                          for f in found if not f["applies"]]
        out["forced"] = min(f["std"] for f in applies) if applies else None
        out["forced_from"] = "read from the sdist's %s" % " and ".join(sorted(files)) if files else \
            "the sdist has no setup.py or CMakeLists.txt at its top"
        if fixes:
            fixed, problems = fix_files(files, fixes, package)
            after = [f for f in read_files(fixed) if f["applies"]]
            out["std"] = min(f["std"] for f in after) if after else None
        else:
            out["std"] = out["forced"]
    else:
        out["forced"] = cxx.get("forces")
        out["flags"] = list(cxx.get("text") or [])
        checked = cxx.get("checked")
        checked = " / ".join(checked) if isinstance(checked, list) else checked
        out["forced_from"] = ("data (gpu_build.cxx): %s" % checked
                              if cxx else "no gpu_build.cxx data and no sdist at hand: assumed to give no -std")
        out["std"] = min(int(f["cxx_std"]) for f in fixes) if fixes else out["forced"]
    need = torch["std"]
    if out["std"] is None:
        # No -std of its own: torch's cpp_extension adds the one its release needs.
        out["std"] = need or 17
        out["std_from"] = "no -std of its own: torch's cpp_extension adds -std=c++%s" % out["std"]
    else:
        out["std_from"] = "set by the entry's fix" if fixes else "forced by its build"
    if need and out["std"] < need:
        newest = newest_accepting(out["std"], releases)
        problems.append(
            "%s %s builds as C++%s (%s), but torch %s's headers require C++%s (%s): the build would stop at "
            "'#error C++%s or later compatible compiler is required to use ATen'. Add a gpu_build.fixes entry with "
            "cxx_std: %s that sets -std=c++%s in its build files (ml_packages_extra_matrix), pin a release of %s "
            "that builds as C++%s, %sor leave %s out"
            % (package, release, out["std"], " | ".join(out["flags"]) or out["forced_from"], torch["torch"], need,
               torch["source"], need, need, need, package, need,
               "pin sparkforge_torch_version to %s (the newest release whose headers accept C++%s), " % (
                   newest, out["std"]) if newest else "", package))
    brought = [p for p in prereqs or () if p in COMPILER_PREREQS]
    if not compiler and brought:
        out["compiler"] = "none yet: %s (a prerequisite of the build) brings one, judged once installed" % brought[0]
        problem = None
    else:
        problem = compiler_problem(out["std"], floors, compiler, "%s %s" % (package, release))
    if problem:
        problems.append(problem)
    out["problems"] = problems
    return out


def describe(build, arch_list=None):
    """The --check lines of one build: torch release, C++ standard, compiler, arch list, fixes, and the facts."""
    lines = ["%s %s: torch %s, C++%s (%s), compiler %s, arch list %s" % (
        build["package"], build["release"], build["torch"], build["std"], build["std_from"], build["compiler"],
        arch_list or "-")]
    lines.append("  torch %s headers: C++%s (%s)" % (build["torch"], build["torch_std"] or "?", build["torch_source"]))
    forced = "C++%s" % build["forced"] if build["forced"] else "no -std"
    lines.append("  its build: %s (%s)" % (forced, build["forced_from"]))
    lines += ["    %s" % flag for flag in build["flags"]]
    lines += ["    ignored: %s" % flag for flag in build["ignored"]]
    lines += ["  fix: %s" % fix for fix in build["fixes"]]
    lines += ["  conflict: %s" % problem for problem in build["problems"]]
    return lines
