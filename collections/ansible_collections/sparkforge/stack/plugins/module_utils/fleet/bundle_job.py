# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One run of offline_bundle, on the controller: everything the hosts' plans fetch, into one
directory with a sha256 manifest (module_utils/fleet/bundle.py's Maker does each kind of source).

The job has the shape of module_utils/_common/job.py: ``BundleJob(params, system, check_mode, fetch=...)``.
``plan()`` refuses bad input (no plans, a plan without sources or target, plain-http index, a dest
that is a file) before anything is fetched; in check mode it lists what would be fetched and its
result is the run's.  ``apply(plan)`` fetches.  Downloads go through ``fetch(url) -> bytes`` (the
module's: Ansible's open_url, TLS verified), git and pip through bundle.runner.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import bundle
from ansible_collections.sparkforge.stack.plugins.module_utils.build import torch_build as tb
from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import atomic_write_text, makedirs
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import Job, JobError, Plan

# Beside the manifest while a run fills the directory (the manifest is written last).
MAKING = ".sparkforge-bundle-making"


def foreign_dest(dest):
    """The refusal of a bundle directory sparkforge did not make: a run removes the files under its apt/,
    cusparselt/, git/ and wheels/ that it does not list, and each wheels/<tag>/simple. None when ``dest`` is
    absent, empty, a bundle (its manifest) or one a killed run was making (MAKING)."""
    if not os.path.isdir(dest):
        return None
    entries = sorted(os.listdir(dest))
    if not entries or bundle.MANIFEST in entries or MAKING in entries:
        return None
    return ("dest (sparkforge_bundle_out)=%s is a directory sparkforge did not make (no %s of a bundle in it; it holds "
            "%s): nothing was changed; a bundle removes what it does not list under its apt/, cusparselt/, git/ and "
            "wheels/, so give a new or empty directory" % (dest, bundle.MANIFEST, ", ".join(entries[:5])
                                                           + (", ..." if len(entries) > 5 else "")))


def make(p, fetch, check_mode):
    """Fetch what the plans need into p["dest"] (in check mode: list it); (maker, manifest, log)."""
    log = []
    maker = bundle.Maker(p["dest"], fetch, log.append, check_mode=check_mode)
    run = bundle.runner()
    python = p["python"] or sys.executable
    targets = {}
    plans = {}
    done = set()
    for entry in p["plans"]:
        host, plan = entry.get("host"), entry.get("plan")
        if not host or not isinstance(plan, dict) or not plan.get("target") or "sources" not in plan:
            raise JobError("plans: each entry needs host and plan (a sparkforge_plan with sources and target); "
                           "%r has not" % (host,))
        target = plan["target"]
        targets[target["id"]] = target
        plans[host] = {"target": target["id"], "torch": plan.get("torch", {}).get("version"),
                       "torch_source": plan.get("torch", {}).get("source"),
                       "sources": sorted(set("%s %s" % (s["kind"], s["url"]) for s in plan["sources"]))}
        rows = plan["sources"]
        torch_index = next((r["url"] for r in rows if r["component"] == "pytorch" and r["kind"] == "index"
                            and plan["torch"].get("source") == "index"), None)
        for row in rows:
            key = (row["kind"], row["url"], target["id"] if row["kind"] != "git" else "any", row["component"])
            if key in done:
                continue
            done.add(key)
            if row["component"] == "cuda_libs" and row["source"] == "CUDA apt repository":
                maker.apt(row["url"], target, p["cuda_packages"],
                          keyring={"version": p["keyring"].get("version"), "sha256": p["keyring"].get("sha256") or ""}
                          if p["keyring"].get("version") else None)
            elif row["component"] == "cuda_libs":
                continue  # cuda-keyring: brought with its repository above
            elif row["component"] == "cusparselt":
                maker.cusparselt(row["url"], target, row.get("sha256"))
            elif row["kind"] == "git":
                ref = row.get("ref")
                commit = None
                if row.get("key") == "llvm_repo" and not ref:
                    triton = next((r for r in rows if r.get("key") == "triton_repo"), None)
                    commit = triton and maker.git_file(triton["url"], triton.get("ref"), "cmake/llvm-hash.txt", run)
                    if not commit:
                        raise JobError("the LLVM commit is neither in the version data nor in Triton's "
                                       "cmake/llvm-hash.txt at %s" % (triton and triton.get("ref")))
                maker.git(row["url"], ref if ref and len(ref) != 40 else None, row["variable"], run,
                          commit=commit or (ref if ref and len(ref) == 40 else None))
            elif row.get("key") == "build_index_url":
                # The builds' pip installs and the builder's dependency resolution, from the bundle.
                reqs = list(p["build_wheels"])
                if plan["actions"].get("triton") == "build":
                    reqs += p["triton_build_requirements"]
                if plan["actions"].get("pytorch") == "build":
                    source = next((r for r in rows if r.get("key") == "pytorch_repo"), None)
                    commit = source and maker.commit_of(source["url"])
                    text = None
                    for name in ("requirements-build.txt", "requirements.txt"):
                        text = commit and maker.git_file(source["url"], commit, name, run)
                        if text:
                            break
                    reqs += tb.parse_build_requirements(text or "")
                reqs = sorted(set(reqs))
                index = row["url"] if row["kind"] == "index" else (p["pip_index_url"] or None)
                maker.wheels(target, reqs, index, [], run, python, variable=row["variable"],
                             key=bundle.index_key(row), torch=plan["torch"].get("version"))
            elif row["kind"] == "index" and row["component"] == "pytorch":
                if plan["torch"].get("source") != "index":
                    continue  # a wheelhouse is a directory on the host
                maker.wheels(target, bundle.needed_requirements(plan, "pytorch"), row["url"], [], run, python,
                             variable=row["variable"], key=row["url"])
            elif row["kind"] == "pipconf" or (row["component"] == "ml_packages"
                                              and row["source"] == "ML package index"):
                source_built = [i["name"] for i in plan.get("ml_packages") or [] if i["method"] == "source"]
                if source_built:
                    raise JobError("ML package(s) %s are built from source on %s in this profile; a bundle "
                                   "carries wheels only. Choose a profile without them, or leave "
                                   "ml_packages out of sparkforge_components"
                                   % (", ".join(source_built), target["id"]))
                extras = [r["url"] for r in rows if r["source"] == "ML extra index"]
                index = row["url"] if row["kind"] == "index" else (p["pip_index_url"] or None)
                # Resolve the torch family at the plan's versions, from the torch index when that is the
                # plan's source: pip on the host keeps the installed torch (the ML role's guard).
                pins = ["%s==%s" % (n, v) for n, v in (("torch", plan["torch"].get("version")),
                                                       ("torchvision", plan.get("torchvision")),
                                                       ("torchaudio", plan.get("torchaudio"))) if v]
                key = bundle.index_key(row)
                maker.wheels(target, bundle.needed_requirements(plan, "ml_packages"), index,
                             extras + ([torch_index] if torch_index else []), run, python, constraints=pins,
                             variable=row["variable"], key=key)
                for extra in extras:
                    maker.source("index", extra, target["id"], "wheels/%s/simple" % bundle.wheel_dir_name(target),
                                 "ml_packages_extra_index_urls",
                                 requirements=sorted(bundle.needed_requirements(plan, "ml_packages")))
    maker.wheel_index()
    manifest = maker.finish(targets, plans)
    return maker, manifest, log


class BundleJob(Job):
    """params: offline_bundle's options; fetch(url) -> bytes, raising bundle.BundleError."""

    def __init__(self, params, system, check_mode=False, fetch=None):
        Job.__init__(self, params, system, check_mode)
        self.fetch = fetch

    def plan(self):
        p = self.params
        if not p["plans"]:
            raise JobError("plans is empty: no host was planned, so there is nothing to bundle")
        if p["pip_index_url"].startswith("http://"):
            raise JobError("pip_index_url %s is plain http: use https or a file:// mirror" % p["pip_index_url"])
        if os.path.exists(p["dest"]) and not os.path.isdir(p["dest"]):
            raise JobError("dest %s exists and is not a directory" % p["dest"])
        why = foreign_dest(p["dest"])
        if why:
            raise JobError(why, dest=p["dest"])
        for entry in p["plans"]:
            host, plan = entry.get("host"), entry.get("plan")
            if not host or not isinstance(plan, dict) or not plan.get("target") or "sources" not in plan:
                raise JobError("plans: each entry needs host and plan (a sparkforge_plan with sources and target); "
                               "%r has not" % (host,))
        if self.check_mode:
            # What would be fetched: the Maker in check mode reads the apt indexes and writes nothing.
            result = self.bundle()
            return Plan(["fetch %s" % rel for rel in result["fetched"]], result)
        return Plan(["bundle what the plans of %s fetch into %s" % (", ".join(e["host"] for e in p["plans"]),
                                                                    p["dest"])], None)

    def apply(self, plan):
        # Written before anything is fetched, removed when the manifest is: a killed run's directory stays its own.
        making = os.path.join(self.params["dest"], MAKING)
        makedirs(self.params["dest"])
        atomic_write_text(making, "%d\n" % os.getpid())
        result = self.bundle()
        os.unlink(making)
        return result

    def bundle(self):
        p = self.params
        try:
            maker, manifest, log = make(p, self.fetch, self.check_mode)
        except bundle.BundleError as exc:
            raise JobError("offline bundle: %s" % exc, dest=p["dest"], fetched=[])
        return dict(changed=bool(maker.fetched), dest=p["dest"], fetched=maker.fetched, log=log,
                    targets=[t["id"] for t in manifest["targets"]], items=len(manifest["items"]),
                    sources=manifest["sources"])
