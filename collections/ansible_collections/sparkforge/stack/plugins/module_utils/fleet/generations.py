# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Generations: numbered wheel sets per class lineage, and the record of one on each host.

On the controller, ``<wheelhouse>/generations/<lineage>.json`` lists a lineage's generations,
oldest first.  A lineage is what stays of a platform class when its build inputs change (the
hosts' CPU, GPUs, OS, Python, CUDA major; module_utils/fleet/fleet.py), so a torch upgrade, which makes a
new class, is the next generation of the same lineage.  A generation is the wheel set a builder
published (each wheel's name, file, wheelhouse dir, sha256, cache key and build record), the class
whose wheelhouse directory holds them, when and from which inputs, and the verify result on the
builder.  A build whose wheel set equals the newest generation's is that generation; any other set
is a new number.  Old generations are pruned by count; the wheel directories only they used go
with them, and their numbers stay listed as pruned so a rollback to one says so.

On each host, ``<prefix>/generation.json`` says which generation of which lineage the host runs, in
what state (``installing`` while pip runs, so a host killed halfway is found partial), how it got
there, and the generation before it (the rollback target). It carries sparkforge's marker
(host/records.py); a file there that is not sparkforge's record is refused, never written over.

Plain functions, no Ansible imports: modules and tests call them directly.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shutil

from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import atomic_write_text
from ansible_collections.sparkforge.stack.plugins.module_utils.fleet.fleet_wheels import HashCache
from ansible_collections.sparkforge.stack.plugins.module_utils.host import records

HOST_FILE = "generation.json"
# A wheelhouse directory of the fleet flow: <name>-<16 hex of the cache key>.
_WHEEL_DIR = re.compile(r"^[A-Za-z0-9_.]+-[0-9a-f]{16}$")
HOST_STATES = ("installing", "installed", "verified", "rolled_back", "failed")
HISTORY = 20  # host record: how many past changes it keeps


class GenerationError(Exception):
    """Bad input or a generation that cannot be used; the message says which and why."""


# ------------------------------------------------------------------ the controller's record


def lineage_file(wheelhouse, lineage):
    if not lineage or "/" in lineage or lineage in (".", ".."):
        raise GenerationError("lineage %r is not a file name" % (lineage,))
    return os.path.join(wheelhouse, "generations", "%s.json" % lineage)


def load(wheelhouse, lineage):
    """The lineage's record ({"lineage", "generations": [...], "pruned": [numbers]}); empty when none."""
    path = lineage_file(wheelhouse, lineage)
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (IOError, OSError):
        return {"lineage": lineage, "generations": [], "pruned": []}
    except ValueError as exc:
        raise GenerationError("%s is not valid JSON (%s): fix or remove it" % (path, exc))
    if not isinstance(data, dict) or not isinstance(data.get("generations"), list):
        raise GenerationError("%s has no list of generations" % path)
    data.setdefault("pruned", [])
    return data


def save(wheelhouse, lineage, data):
    atomic_write_text(lineage_file(wheelhouse, lineage), json.dumps(data, indent=1, sort_keys=True) + "\n")


def wheel_set(wheels):
    """What makes a generation: the (name, sha256) of each of its wheels, in install order."""
    return [[w["name"], w["sha256"]] for w in wheels]


def _clean_wheel(item):
    missing = [k for k in ("name", "file", "dir", "sha256") if not item.get(k)]
    if missing:
        raise GenerationError("wheel entry %r lacks %s" % (item.get("file") or item, ", ".join(missing)))
    if not _WHEEL_DIR.match(str(item["dir"])) or "/" in str(item["file"]):
        raise GenerationError("wheel entry %s: dir %r and file %r must be plain names in the class's directory"
                              % (item["file"], item["dir"], item["file"]))
    clean = dict((k, item.get(k)) for k in ("name", "kind", "dir", "file", "sha256", "cache_key", "manifest"))
    # A GPU package's import name (flash_attn for flash-attn): the rollback's gate imports it.
    if item.get("module"):
        clean["module"] = str(item["module"])
    return clean


def check_wheels(class_dir, wheels, write_cache=True):
    """[(file, problem)] for each wheel of a generation missing from its class's directory or with other bytes."""
    problems = []
    caches = {}
    for item in wheels:
        directory = os.path.join(class_dir, item["dir"])
        path = os.path.join(directory, item["file"])
        if not os.path.isfile(path):
            problems.append((item["file"], "missing from %s" % directory))
            continue
        cache = caches.setdefault(directory, HashCache(directory, write=write_cache))
        got = cache.sha256(path)
        if got != item["sha256"]:
            problems.append((item["file"], "sha256 %s, the generation records %s" % (got, item["sha256"])))
    for cache in caches.values():
        cache.save()
    return problems


def find(data, number):
    """The generation ``number`` of a class record; GenerationError saying why when it cannot be used."""
    for gen in data["generations"]:
        if gen["number"] == number:
            return gen
    if number in data.get("pruned", []):
        raise GenerationError("generation %d of %s was pruned (the wheelhouse keeps the newest %s): it "
                              "cannot be installed again" % (number, data.get("lineage"), data.get("keep", "few")))
    known = [g["number"] for g in data["generations"]]
    raise GenerationError("%s has no generation %d (it has %s)" % (
        data.get("lineage"), number, ", ".join(str(n) for n in known) or "none"))


def generation_dir(wheelhouse, generation):
    """Where a generation's wheel directories are: its class's directory in the wheelhouse."""
    return os.path.join(wheelhouse, generation["class"])


def publish(wheelhouse, lineage, class_id, wheels, builder, inputs, keep, now, check_mode=False):
    """Record a builder's wheel set (in <wheelhouse>/<class_id>/) as the lineage's newest generation (a
    new number only when the set differs from the newest one's), then prune to ``keep`` generations.

    Every wheel must be in the wheelhouse with the sha256 given: a generation is never recorded with
    missing or different files.  Returns {"generation", "new", "previous", "pruned", "removed_dirs"}."""
    if keep < 1:
        raise GenerationError("keep must be at least 1, got %d" % keep)
    if not wheels:
        raise GenerationError("a generation needs at least one wheel")
    if not class_id or "/" in class_id or class_id in (".", ".."):
        raise GenerationError("class_id %r is not a directory name" % (class_id,))
    wheels = [_clean_wheel(w) for w in wheels]
    problems = check_wheels(os.path.join(wheelhouse, class_id), wheels, write_cache=not check_mode)
    if problems:
        raise GenerationError("generation not recorded, its wheels are not in the wheelhouse as built: %s"
                              % "; ".join("%s %s" % p for p in problems))
    data = load(wheelhouse, lineage)
    data["lineage"] = lineage
    data["keep"] = keep
    newest = data["generations"][-1] if data["generations"] else None
    result = {"new": False, "previous": None, "pruned": [], "removed_dirs": []}
    if newest and wheel_set(newest["wheels"]) == wheel_set(wheels):
        result["generation"] = newest["number"]
        result["previous"] = data["generations"][-2]["number"] if len(data["generations"]) > 1 else None
    else:
        number = max([g["number"] for g in data["generations"]] + list(data["pruned"]) + [0]) + 1
        data["generations"].append({"number": number, "class": class_id, "created": now, "builder": builder,
                                    "inputs": inputs, "wheels": wheels, "verify": {"state": "pending"}})
        result.update(generation=number, new=True, previous=newest["number"] if newest else None)
    result.update(_prune(wheelhouse, data, keep, check_mode))
    if not check_mode and (result["new"] or result["pruned"]):
        save(wheelhouse, lineage, data)
    result["generations"] = [g["number"] for g in data["generations"]]
    return result


def _prune(wheelhouse, data, keep, check_mode):
    gone = data["generations"][:-keep] if len(data["generations"]) > keep else []
    if not gone:
        return {"pruned": [], "removed_dirs": []}
    data["generations"] = data["generations"][-keep:]
    data["pruned"] = sorted(set(data["pruned"]) | set(g["number"] for g in gone))
    used = set((g["class"], w["dir"]) for g in data["generations"] for w in g["wheels"])
    dirs = sorted(set((g["class"], w["dir"]) for g in gone for w in g["wheels"]) - used)
    if not check_mode:
        for cls, name in dirs:
            shutil.rmtree(os.path.join(wheelhouse, cls, name), ignore_errors=True)
    return {"pruned": [g["number"] for g in gone], "removed_dirs": ["%s/%s" % item for item in dirs]}


def record_verify(wheelhouse, lineage, number, state, host, detail, now):
    """The verify result of a generation on its builder; returns whether the record changed."""
    if state not in ("passed", "failed"):
        raise GenerationError("verify state must be passed or failed, got %r" % (state,))
    data = load(wheelhouse, lineage)
    gen = find(data, number)
    new = {"state": state, "host": host, "detail": detail or "", "at": now}
    old = gen.get("verify") or {}
    if dict(old, at=None) == dict(new, at=None):
        return False
    gen["verify"] = new
    save(wheelhouse, lineage, data)
    return True


# ------------------------------------------------------------------ the host's record


def host_file(prefix):
    return os.path.join(prefix, HOST_FILE)


def read_host(path):
    """The host's record, or {} when it was never upgraded through generations."""
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (IOError, OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    data.pop(records.MARKER_KEY, None)  # the file's marker, not part of the record (write_host adds it)
    return data


def host_view(record):
    """What a status shows of a host record."""
    if not record:
        return {"generation": None, "state": None, "partial": False, "how": "never upgraded through generations",
                "previous": None, "class": None, "lineage": None}
    return {"generation": record.get("generation"), "state": record.get("state"),
            "partial": record.get("state") == "installing", "how": record.get("how"),
            "previous": (record.get("previous") or {}).get("generation"), "class": record.get("class"),
            "lineage": record.get("lineage"), "at": record.get("at")}


def _entry(record):
    return dict((k, record.get(k)) for k in ("lineage", "class", "generation", "state", "how", "at", "wheels"))


def host_transition(record, target, state, how, now, wheels=None):
    """The host record after a change: ``state`` of ``target`` ({lineage, class, number}; wheels: name ->
    sha256).

    Entering another generation keeps the last completed one as ``previous`` (the rollback target);
    an interrupted install (state ``installing``) is not a generation to go back to."""
    if state not in HOST_STATES:
        raise GenerationError("host state must be one of %s, got %r" % (", ".join(HOST_STATES), state))
    record = dict(record or {})
    number = target["number"]
    history = list(record.get("history") or [])
    if record and (record.get("lineage"), record.get("generation"), record.get("state")) != (
            target["lineage"], number, state):
        history.append(_entry(record))
    previous = record.get("previous")
    if record.get("generation") is not None and (record.get("lineage"), record.get("generation")) != (
            target["lineage"], number) and record.get("state") in ("installed", "verified", "rolled_back"):
        previous = _entry(record)
    out = {"lineage": target["lineage"], "class": target["class"], "generation": number, "state": state,
           "how": how, "at": now, "wheels": dict(wheels if wheels is not None else record.get("wheels") or {}),
           "previous": previous, "history": history[-HISTORY:]}
    return out


# The variable that names the host's record (the roles pass it as the modules' record / host_record).
HOST_VARIABLE = "sparkforge_host_generation_file"


def host_refusal(path):
    """The refusal of what is at the host record's ``path`` when it is not sparkforge's record (host/records.py:
    a file sparkforge did not write, a symlink, a directory), or None."""
    return records.refusal(HOST_VARIABLE, path, "generation")


def write_host(path, record):
    """Write the host's record, with its marker; GenerationError, nothing written, when what is at ``path`` is not
    sparkforge's record (the modules refuse it in their plan first)."""
    why = host_refusal(path)
    if why:
        raise GenerationError(why)
    atomic_write_text(path, json.dumps(records.mark("generation", record), indent=1, sort_keys=True) + "\n")


# ------------------------------------------------------------------ status: hosts against the record


def compare(host, record, installed, data):
    """One row of `sparkforge status`: a host's own record and its venv's wheel record against the
    controller's generations of its lineage."""
    view = host_view(record)
    row = dict(view, host=host, installed=installed or {})
    gens = dict((g["number"], g) for g in (data or {}).get("generations", []))
    newest = max(gens) if gens else None
    row["newest"] = newest
    if not record:
        row["verdict"] = "never upgraded"
        return row
    number = record.get("generation")
    gen = gens.get(number)
    if gen is None:
        row["verdict"] = ("on pruned generation %s" % number if number in (data or {}).get("pruned", [])
                          else "on generation %s, which the controller does not know" % number)
        return row
    expected = dict((w["name"], w["sha256"]) for w in gen["wheels"])
    differ = sorted(n for n in expected if (installed or {}).get(n) != expected[n])
    if view["partial"]:
        row["verdict"] = "partial: an install of generation %s was interrupted" % number
    elif differ:
        row["verdict"] = "diverged: %s not as generation %s records" % (", ".join(differ), number)
    elif number != newest:
        row["verdict"] = "behind: generation %s, newest %s" % (number, newest)
    else:
        row["verdict"] = "current"
    row["differ"] = differ
    return row
