# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The result is the plan: the torch a venv imports against the torch the plan named.

``planned_build`` says what the plan pins: the release, its local version tag and its CUDA.  The
PyTorch index serves one CUDA build per directory (``.../whl/cu130`` holds ``2.9.1+cu130``, built
with CUDA 13.0); a source build carries PYTORCH_BUILD_VERSION (the bare release) and the CUDA of the
host (sparkforge_cuda_major); a wheelhouse holds what its builder made, so only its release and CUDA
major are pinned.  ``result_problems`` compares what ``import torch`` reports (``torch.__version__``,
``torch.version.cuda``) with it: a CPU build (``+cpu`` or ``torch.version.cuda`` None) on a host with
a GPU is refused, naming what was planned and what was found.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# cu130: CUDA 13.0, cu128: CUDA 12.8 (the last digit is the minor).
CUDA_DIR_RE = re.compile(r"/cu(\d+)(\d)/*$")


def split_version(text):
    """('2.9.1', 'cu130') of '2.9.1+cu130'; ('2.9.1', '') of '2.9.1'."""
    text = (text or "").strip()
    parts = text.partition("+")
    return parts[0], parts[2]


def planned_build(version, source, index_url="", cuda_major=13):
    """{version, local, cuda, cuda_major, words}: what the plan pins.  ``local`` None: not pinned (any
    GPU build); ``cuda`` None: only the major is pinned."""
    plan = {"version": version, "local": None, "cuda": None, "cuda_major": str(cuda_major)}
    if source == "index":
        match = CUDA_DIR_RE.search(index_url or "")
        if match:
            plan["local"] = "cu%s%s" % match.groups()
            plan["cuda"] = "%s.%s" % match.groups()
            plan["cuda_major"] = match.group(1)
    elif source == "source":
        plan["local"] = ""
    words = version + ("+" + plan["local"] if plan["local"] else "")
    if plan["cuda"]:
        words += " (CUDA %s)" % plan["cuda"]
    else:
        words += " (CUDA %s.x)" % plan["cuda_major"]
    plan["words"] = words
    return plan


def found_words(version, cuda):
    return "%s (CUDA %s)" % (version or "nothing", cuda if cuda not in (None, "", "None") else "none: a CPU build")


def result_problems(plan, version, cuda, gpu=True):
    """Why the imported torch (``version`` = torch.__version__, ``cuda`` = torch.version.cuda) is not the
    planned one; [] when it is."""
    cuda = None if cuda in (None, "", "None") else str(cuda).strip()
    base, local = split_version(version)
    problems = []
    if not version:
        return ["nothing imports as torch"]
    if base != plan["version"]:
        problems.append("release %s, planned %s" % (base, plan["version"]))
    if plan["local"] is not None and local != plan["local"]:
        problems.append("local version tag %s, planned %s" % (
            "+" + local if local else "none", "+" + plan["local"] if plan["local"] else "none"))
    if gpu and (cuda is None or local == "cpu"):
        problems.append("a CPU build on a host with a GPU")
    elif cuda is not None:
        if plan["cuda"] and cuda != plan["cuda"]:
            problems.append("CUDA %s, planned %s" % (cuda, plan["cuda"]))
        elif not plan["cuda"] and cuda.split(".", 1)[0] != plan["cuda_major"]:
            problems.append("CUDA %s, planned CUDA %s.x" % (cuda, plan["cuda_major"]))
    return problems


def result_message(venv, plan, version, cuda, source, gpu=True):
    """'' when the venv's torch is the plan's, else one message naming both."""
    problems = result_problems(plan, version, cuda, gpu)
    if not problems:
        return ""
    return ("the venv %s imports torch %s, planned torch %s from source %s: %s. The installed torch is not the "
            "planned one; not provisioned" % (venv, found_words(version, cuda), plan["words"], source,
                                              "; ".join(problems)))
