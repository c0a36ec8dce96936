# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The CUDA arch list of the plan, with the reason: decided here, once, and published by the plan as
``sparkforge_plan.arch`` = {list, reason}; every role reads it the one way, the plan_arch filter over
``for_role`` below (the plan's block when the plan is for the role's torch, else the same rules for this host).

One list for every build: the torch source build (and fleet_build), the torchvision/torchaudio source builds, the
ML layer's GPU source builds and the TORCH_CUDA_ARCH_LIST runtime_env exports for the user's own extension builds.
A kernel of an extension that torch cannot load is useless, so whatever decides torch's list decides theirs; the
reason says where it came from (sparkforge_cuda_arch_list, the release's default for the platform class, the host's
GPUs, the installed torch's own list).  Entries are torch's TORCH_CUDA_ARCH_LIST form (``9.0;12.0+PTX``), the one
vocabulary of module_utils/cuda/arch.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.sparkforge.stack.plugins.module_utils.build import torch_build
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import arch

# Who compiles for the list (shown in the plan text).
USERS = "torch, domains, ml_builds, runtime"


def block(text, reason):
    """The plan's arch: {'list', 'reason'}."""
    return {"list": text, "reason": reason}


def planned_reason(got, overridden):
    """The reason of torch_build.plan_arch_list's answer ``got``: the user's variable or the rule that chose it,
    and the release's fixes the list needs (preflight's plan and for_role say it the same way)."""
    why = "set by sparkforge_cuda_arch_list" if overridden else got["why"]
    if got["fixes_needed"]:
        why += "; fixes applied: %s" % ", ".join(got["fixes_needed"])
    return why


def installed_list(archs):
    """torch.cuda.get_arch_list() (['sm_90', 'sm_121', 'compute_121']) -> '9.0;12.1+PTX'; '' for none.
    Raises arch.ArchError for a name that is not an architecture."""
    return arch.to_torch([arch.from_sm(name) for name in archs or []])


def for_plan(planned, planned_reason, overridden=False, source="source", installed=None, venv=None, unread=None):
    """The plan's block.  ``planned``: torch_build.plan_arch_list's list (the user's override, validated for
    the release, or the release's default for this host) and ``planned_reason`` (the variable that set it, the
    release's fixes); ``overridden``: whether the user set it (it then wins over an installed torch's list);
    ``installed``: torch.cuda.get_arch_list() of the venv's torch (torch source ``existing``), None when not
    read, ``unread`` then saying why (the plan keeps its own list and says so)."""
    if overridden:
        return block(planned, planned_reason)
    if source == "existing" and installed is not None:
        try:
            text = installed_list(installed)
        except arch.ArchError as exc:
            text, why = "", "the venv's torch reported an arch list this stack cannot read (%s)" % exc
        else:
            why = "the venv's torch reported no arch list (a CPU build, or no GPU visible)"
        if text:
            return block(text, "the installed torch's own arch list (torch.cuda.get_arch_list() in %s: %s)"
                         % (venv or "the venv", ", ".join(installed)))
        return block(planned, "%s; %s" % (planned_reason, why))
    if source == "existing" and unread:
        return block(planned, "%s; the venv's torch's own arch list could not be read (%s)" % (planned_reason, unread))
    return block(planned, planned_reason)


def without_plan(gpus, override=""):
    """A role run without preflight's plan (cluster.yml's runtime_env, a role on its own): the user's
    sparkforge_cuda_arch_list (``override``) when set, else this host's GPUs (``gpus``: gpu_facts' sm_archs or
    compute capabilities)."""
    override = str(override or "").strip()
    if override:
        return block(arch.to_torch(arch.parse_list(override, "sparkforge_cuda_arch_list", allow_empty=False)),
                     "set by sparkforge_cuda_arch_list (no plan: preflight did not run)")
    names = [str(g).strip() for g in gpus or [] if str(g).strip()]
    entries = [arch.parse_name(g) if "." in g else arch.from_sm(g) for g in names]
    # A GPU's own capability is SASS for it: an 'a'/'f' suffix of gpu_facts' sm name says what it supports,
    # not what to compile for.
    text = arch.to_torch([dict(e, variant="", ptx=False) for e in entries])
    if not text:
        return block("", "no plan and no GPU found: nothing to compile for")
    return block(text, "this host's GPUs (gpu_facts: %s; no plan: preflight did not run)" % ", ".join(names))


def for_role(plan, gpus, override="", torch="", torch_data=None, platform_class=None):
    """The one way a role reads its arch list: {list, reason}.

    ``plan``: sparkforge_plan ({} or None without one); ``gpus``: the host's GPUs (gpu_facts' sm_archs or
    compute capabilities); ``override``: sparkforge_cuda_arch_list; ``torch``: the release the role builds
    against ('' when any plan's list is the role's: the ML layer, the runtime exports).  The plan's block is the
    role's when the plan is for that release; otherwise, with the version data (``torch_data``: the manifest's
    releases, arch_min_version, arch_defaults, traps, fixes), the plan's own rules (torch_build.plan_arch_list)
    answer for this host and that release, else (no release given) without_plan.  Raises arch.ArchError or
    torch_build.ArchListError naming the variable.
    """
    plan = plan or {}
    planned_for = (plan.get("torch") or {}).get("version") or ""
    if plan.get("arch") is not None and (not torch or planned_for == torch):
        return block(plan["arch"]["list"], plan["arch"]["reason"])
    if not torch:
        return without_plan(gpus, override)
    data = torch_data or {}
    releases = data.get("releases") or {}
    if torch not in releases:
        raise torch_build.ArchListError("torch %s is not in the version data (sparkforge_torch_releases knows %s): "
                                        "set the role's version to one of them or add it" % (torch, ", ".join(releases)))
    override = str(override or "").strip()
    names = [str(g).strip() for g in gpus or [] if str(g).strip()]
    capabilities = sorted({"%d.%d" % arch.capability(g) for g in names}, key=arch.capability)
    got = torch_build.plan_arch_list(override or None, torch, releases[torch], platform_class, capabilities,
                                     data, data.get("fixes") or {}, variable="sparkforge_cuda_arch_list")
    why = planned_reason(got, bool(override))
    where = ("the plan is for torch %s" % planned_for) if plan.get("arch") is not None else "preflight did not run"
    return block(got["arch_list"], "%s (the plan's rules for torch %s on this host: %s)" % (why, torch, where))
