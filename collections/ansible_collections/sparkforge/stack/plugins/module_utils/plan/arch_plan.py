# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The arch list each consumer compiles for, with the reason: decided here, once, and published by the plan
as ``sparkforge_plan.arch.<consumer>`` = {list, reason}; the roles only read it.

Consumers: ``torch`` (the torch source build, fleet_build), ``domains`` (torchvision/torchaudio source
builds), ``ml_builds`` (the ML layer's GPU source builds), ``runtime`` (TORCH_CUDA_ARCH_LIST exported for the
user's own extension builds).  All four get one list: a kernel of an extension that torch cannot load is
useless, so whatever decides torch's list decides theirs; the reason says where it came from (the user's
variable, the release's default for the platform class, the host's GPUs, the installed torch's own list).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import arch

CONSUMERS = ("torch", "domains", "ml_builds", "runtime")

# Why each consumer follows the list (appended to the source's reason).
FOLLOWS = {
    "torch": "",
    "domains": "torchvision/torchaudio source builds carry the kernels torch carries",
    "ml_builds": "the ML layer's GPU source builds compile for what torch runs on",
    "runtime": "exported as TORCH_CUDA_ARCH_LIST so the user's own extension builds compile for what torch runs on",
}


def block(text, reason):
    """One list for every consumer: {consumer: {'list', 'reason'}}."""
    return dict((c, {"list": text, "reason": reason if not FOLLOWS[c] else "%s; %s" % (reason, FOLLOWS[c])})
                for c in CONSUMERS)


def source_of(entry, consumer):
    """Where a consumer's list came from: its reason without why the consumer follows it."""
    tail = "; " + FOLLOWS[consumer] if FOLLOWS[consumer] else ""
    return entry["reason"][:-len(tail)] if tail and entry["reason"].endswith(tail) else entry["reason"]


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
