# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
""""Provisioned" is a proof: what a venv holds, compared with the host's plan, component by component.

``expected`` reads the plan (sparkforge_plan: torch's release and local tag, torchvision/torchaudio,
the ML packages the profile installs) for the components the run installs.  ``PROBE`` runs in the
venv's own python: it lists the installed distributions (importlib.metadata, what pip wrote in
site-packages) and evaluates each planned requirement with the packaging library pip vendors.
``differences`` compares the two and says, per component, what differs; [] is the proof.  A proven
host keeps ``compared`` (each compared distribution at its version); ``drift`` later says which of them
the venv no longer holds at that version (`sparkforge status`: a pip install over torch since).

Beyond the venv: the runtime profile files runtime_env wrote (each file's exported variables against the ones
the role computed from the plan: env vars, arch list, paths; ``profile_differences``, and ``profile_drift``
against the variables a proven run recorded) and verify's verdict where verify is a component
(``verify_differences``: a failed or missing report).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
import shlex

from ansible_collections.sparkforge.stack.plugins.module_utils.build.torch_result import planned_build
from ansible_collections.sparkforge.stack.plugins.module_utils.build.torch_result import split_version

# Runs in the venv's python with one argument: a JSON list of requirements.  Prints
# {"dists": {canonical name: version}, "satisfied": {requirement: true/false/null}}.
PROBE = r"""
import json, re, sys
from importlib import metadata
try:
    from packaging.requirements import Requirement
except ImportError:
    try:
        from pip._vendor.packaging.requirements import Requirement
    except ImportError:
        Requirement = None
canon = lambda n: re.sub(r"[-_.]+", "-", n).lower()
dists = {}
for d in metadata.distributions():
    name = d.metadata["Name"]
    if name:
        dists[canon(name)] = d.version
satisfied = {}
for text in json.loads(sys.argv[1]):
    if Requirement is None:
        satisfied[text] = None
        continue
    req = Requirement(text)
    have = dists.get(canon(req.name))
    satisfied[text] = have is not None and req.specifier.contains(have, prereleases=True)
print(json.dumps({"dists": dists, "satisfied": satisfied}))
"""


def canonical(name):
    """PEP 503 normalised name: 'Flash_Attn' and 'flash-attn' are one distribution."""
    return re.sub(r"[-_.]+", "-", name or "").lower()


def requirement_name(text):
    return canonical(re.split(r"[<>=!~;\[ @]", text.strip(), 1)[0])


def expected(plan, components, cuda_major=13, ml_packages=None):
    """What the plan says the venv holds after a run of ``components``: {torch, domains, ml_packages}.

    ``ml_packages``: the rows the ML packages role resolved from its own inputs in this run (its result
    table), taken instead of the plan's list when given: the role's inputs (an explicit package list) may
    name other packages than the plan's profile, and the venv is compared with what was asked of it."""
    plan = plan or {}
    components = components or []
    out = {"torch": None, "domains": {}, "ml_packages": []}
    torch = plan.get("torch") or {}
    if "pytorch" in components and torch.get("version"):
        out["torch"] = planned_build(torch["version"], torch.get("source"), torch.get("index_url") or "", cuda_major)
    if "torch_domains" in components:
        for name in ("torchvision", "torchaudio"):
            if plan.get(name):
                out["domains"][name] = split_version(str(plan[name]))[0]
    if "ml_packages" in components:
        # A skipped package is not planned; an optional one may fail without the run failing.
        items = plan.get("ml_packages") or [] if ml_packages is None else ml_packages
        out["ml_packages"] = [dict(name=i["name"], requirement=i["requirement"]) for i in items
                              if i.get("method") != "skip" and i.get("status") != "skipped"
                              and not i.get("optional")]
    return out


def requirements(want):
    """The requirements the probe evaluates."""
    return [item["requirement"] for item in want["ml_packages"]]


def parse_probe(stdout):
    """The probe's JSON line (the last line: a sitecustomize may print before it)."""
    lines = [line for line in (stdout or "").splitlines() if line.strip()]
    if not lines:
        raise ValueError("the venv's python printed nothing")
    found = json.loads(lines[-1])
    if not isinstance(found, dict) or "dists" not in found:
        raise ValueError("the venv's python printed no distribution list: %s" % lines[-1][:200])
    return found


def differences(want, found):
    """[{component, package, planned, installed, words}] of what the venv holds that the plan does not say."""
    dists = found.get("dists") or {}
    satisfied = found.get("satisfied") or {}
    out = []

    def add(component, package, planned, installed):
        out.append({"component": component, "package": package, "planned": planned, "installed": installed,
                    "words": "%s: %s %s, plan %s" % (component, package,
                                                     "%s installed" % installed if installed else "not installed",
                                                     planned)})

    torch = want.get("torch")
    if torch:
        have = dists.get("torch")
        release, local = split_version(have)
        if have is None or release != torch["version"] or (torch["local"] is not None and local != torch["local"]):
            add("pytorch", "torch", torch["words"], have)
    for name, version in sorted((want.get("domains") or {}).items()):
        have = dists.get(name)
        if have is None or split_version(have)[0] != version:
            add("torch_domains", name, version, have)
    for item in want.get("ml_packages") or []:
        have = dists.get(canonical(item["name"]))
        ok = satisfied.get(item["requirement"])
        if ok is None:  # no packaging library in the venv: at least the package must be there
            ok = have is not None
        if not ok:
            add("ml_packages", item["name"], item["requirement"], have)
    return out


def state_of(diffs):
    """('provisioned', None) when nothing differs, else ('partial', what differs, per component)."""
    if not diffs:
        return "provisioned", None
    return "partial", "; ".join(d["words"] for d in diffs)


def compared(want, found):
    """The compared distributions at their installed versions: what a proven host records."""
    names = (["torch"] if want.get("torch") else []) + sorted(want.get("domains") or {}) \
        + [canonical(i["name"]) for i in want.get("ml_packages") or []]
    dists = found.get("dists") or {}
    return dict((name, dists.get(name)) for name in names)


def drift(recorded, dists):
    """[{package, recorded, installed, words}] of what changed in the venv since the recorded proof."""
    out = []
    for name in sorted(recorded or {}):
        have = (dists or {}).get(canonical(name))
        if have != recorded[name]:
            out.append({"component": "drift", "package": name, "planned": recorded[name], "installed": have,
                        "words": "%s %s at the last provisioning, now %s" % (name, recorded[name],
                                                                             have or "not installed")})
    return out


# The value given to a line of a profile that is not shell words (an edit that broke the file).
UNREADABLE = "<not shell words>"


def parse_profile(text):
    """{NAME: value} of a profile's `export NAME=value` lines (shell-quoted values unquoted); other lines -
    comments, blanks - are not variables.  A line that does not parse as shell words is kept under its text
    (value UNREADABLE), so an edit that breaks the file differs from every plan."""
    found = {}
    # Lines as the shell splits them: at a newline only (splitlines would also split at U+0085 in a value).
    for line in (text or "").split("\n"):
        line = line.strip(" \t\r")
        if not line.startswith("export "):
            continue
        try:
            words = shlex.split(line[len("export "):])
        except ValueError:
            found[line] = UNREADABLE
            continue
        for word in words:
            name, sep, value = word.partition("=")
            found[name] = value if sep else None
    return found


def _profile_words(name, want, have, base):
    if have == UNREADABLE:
        return "%s: a line the shell cannot read" % name
    if want is None:
        return "%s=%s, not in the %s" % (name, have, base)
    return "%s%s, %s %s" % (name, " unset" if have is None else "=%s" % have, base, want)


def profile_differences(variables, files):
    """[{component: runtime_env, ...}] of each profile file (path -> text, None: missing) whose exported
    variables are not ``variables`` (what runtime_env computed from the plan), one entry per variable."""
    want = dict((k, str(v)) for k, v in (variables or {}).items())
    out = []
    for path in sorted(files or {}):
        text = files[path]
        if text is None:
            out.append({"component": "runtime_env", "package": path, "planned": "%d variable(s)" % len(want),
                        "installed": None, "words": "runtime_env: %s is missing" % path})
            continue
        have = parse_profile(text)
        for name in sorted(set(want) | set(have)):
            if want.get(name) != have.get(name):
                out.append({"component": "runtime_env", "package": path, "planned": want.get(name),
                            "installed": have.get(name),
                            "words": "runtime_env: %s: %s" % (path, _profile_words(name, want.get(name),
                                                                                   have.get(name), "plan"))})
    return out


def verify_differences(report):
    """[] when verify's report (its JSON, parsed; None: no report) passed, else one entry saying why."""
    if report is None:
        return [{"component": "verify", "package": "verify", "planned": "passed", "installed": None,
                 "words": "verify: no report, though verify is a component of the run"}]
    if report.get("passed") is True:
        return []
    failures = [str(f) for f in report.get("failures") or []]
    return [{"component": "verify", "package": "verify", "planned": "passed", "installed": "failed",
             "words": "verify: failed (%s)" % ("; ".join(failures[:3]) or report.get("summary") or "no reason given")}]


def profile_drift(recorded, files):
    """[{component: drift, ...}] of each profile file (path -> text, None: missing) whose exported variables
    are not those a proven run recorded (path -> {NAME: value}): edited since, named with the variable."""
    out = []
    for path in sorted(recorded or {}):
        text = (files or {}).get(path)
        if text is None:
            out.append({"component": "drift", "package": path, "planned": "present", "installed": None,
                        "words": "%s written at the last provisioning, now missing" % path})
            continue
        have, want = parse_profile(text), recorded[path] or {}
        for name in sorted(set(want) | set(have)):
            if want.get(name) != have.get(name):
                out.append({"component": "drift", "package": path, "planned": want.get(name),
                            "installed": have.get(name),
                            "words": "%s edited since the last provisioning: %s" % (
                                path, _profile_words(name, want.get(name), have.get(name), "last proof"))})
    return out
