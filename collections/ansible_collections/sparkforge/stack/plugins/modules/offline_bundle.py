#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: offline_bundle
short_description: Collect what an inventory's plans fetch into one directory for air-gapped hosts
version_added: "0.5.0"
description:
  - Runs where the network is (the controller). For each host's plan (M(sparkforge.stack.stack_plan)'s
    C(plan), with its C(sources) table and C(target)) it brings every source into O(dest), once per
    target (CUDA distro, Debian architecture, Python), as follows.
  - the CUDA apt repository's signed index files unchanged (C(InRelease), C(Release), C(Release.gpg),
    C(Packages*)), the O(cuda_packages) with their dependencies from that index (each .deb checked
    against the index's SHA256), and cuda-keyring (checked against the C(sha256) of O(keyring) when given);
  - the cuSPARSELt local-repo installer, checked against the plan's pinned sha256;
  - a bare git mirror of each repository the plan builds, holding the pinned tag or commit at depth 1
    and each submodule's pinned commit, recursively (LLVM's commit read from Triton's
    C(cmake/llvm-hash.txt) when the version data has none);
  - the wheels torch, the domain libraries and the ML packages need, with their dependencies, from
    the index the plan names (C(pip download) for the target's Python and CPU), and a PEP 503 index of them;
    for source builds also the packages the builds install and the built wheels depend on (O(build_wheels)).
  - Writes C(manifest.json) listing every file with its sha256, size, origin and target, and the sources
    it answers. Files already there with the recorded sha256 are not fetched again.
  - The distribution's own packages (compilers, clang) are not bundled; a site mirror serves those.
author:
  - sparkforge developers (@sparkforge)
options:
  dest:
    description: The bundle directory (created).
    type: path
    required: true
  plans:
    description:
      - One entry per host, C(host) (its name) and C(plan) (the host's C(sparkforge_plan)); hosts of one
        target share everything but their name.
    type: list
    elements: dict
    required: true
  cuda_packages:
    description: The apt packages the C(cuda_libs) role installs, as C(name=version-glob).
    type: list
    elements: str
    default: []
  keyring:
    description: cuda-keyring's C(version) and C(sha256) (empty sha256 - the index's SHA256 is checked).
    type: dict
    default: {}
  pip_index_url:
    description:
      - The index for ML packages when the hosts' plan leaves it to pip's configuration (C(ml_packages_index_url)
        empty); empty - this machine's pip configuration.
    type: str
    default: ""
  build_wheels:
    description:
      - For plans that build from source, the requirements the built wheels depend on (the builder resolves
        them when it collects the class's dependency wheels); PyTorch's own build requirements are read from
        its mirrored source at the pinned commit and need not be listed.
    type: list
    elements: str
    default: []
  triton_build_requirements:
    description: The Python packages Triton's build installs in its venv (bundled when a plan builds Triton).
    type: list
    elements: str
    default: []
  python:
    description: The Python whose pip downloads wheels (any version; the target's is passed to pip).
    type: path
  timeout:
    description: Seconds one download may take.
    type: int
    default: 600
attributes:
  check_mode:
    support: partial
    details: Reads the apt indexes and lists the files it would fetch; writes nothing, so git mirrors and wheels are listed by source, not by file.
    description: Reads the apt indexes and lists the files it would fetch; writes nothing.
  diff_mode:
    support: none
    description: A bundle is a directory of downloads; there is no diff to show.
"""

EXAMPLES = r"""
- name: Make the bundle for every host's plan
  sparkforge.stack.offline_bundle:
    dest: /srv/sparkforge-bundle
    plans: "{{ groups['all'] | map('extract', hostvars) | map(attribute='sparkforge_plan') | list }}"
    cuda_packages: [libcublas-13-0=13.0.*, libcublas-dev-13-0=13.0.*]
    keyring: {version: 1.1-1, sha256: ""}
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
dest:
  description: The bundle directory.
  returned: always
  type: str
fetched:
  description: Files fetched by this run (paths in the bundle).
  returned: always
  type: list
  elements: str
targets:
  description: The target ids the bundle holds.
  returned: success
  type: list
  elements: str
items:
  description: How many files the manifest lists.
  returned: success
  type: int
sources:
  description: The sources the bundle answers (kind, URL, variable, and per target the path in the bundle).
  returned: success
  type: list
  elements: dict
"""

import os
import sys

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url
from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError
from ansible_collections.sparkforge.stack.plugins.module_utils import bundle
from ansible_collections.sparkforge.stack.plugins.module_utils import torch_build as tb

TORCH_FAMILY = ("torch", "torchvision", "torchaudio", "triton")


def _fetcher(timeout):
    def fetch(url):
        if url.startswith("http://"):
            # Everything in a bundle is checked against a sha256 from a signed index or a pin, but the
            # index files and the requests themselves deserve TLS.
            raise bundle.BundleError("%s is plain http: a bundle fetches over https (or file:// from a mirror)" % url)
        try:
            resp = open_url(url, timeout=timeout, validate_certs=True, follow_redirects="all", use_proxy=True)
            try:
                return resp.read()
            finally:
                resp.close()
        except HTTPError as exc:
            raise bundle.BundleError("%s: HTTP %s %s" % (url, exc.code, exc.reason))
        except URLError as exc:
            raise bundle.BundleError("%s: %s" % (url, getattr(exc, "reason", exc)))
        except (IOError, OSError) as exc:
            raise bundle.BundleError("%s: %s" % (url, exc))
    return fetch


def make(module, p):
    log = []
    maker = bundle.Maker(p["dest"], _fetcher(p["timeout"]), log.append, check_mode=module.check_mode)
    run = bundle.runner()
    python = p["python"] or sys.executable
    targets = {}
    plans = {}
    done = set()
    for entry in p["plans"]:
        host, plan = entry.get("host"), entry.get("plan")
        if not host or not isinstance(plan, dict) or not plan.get("target") or "sources" not in plan:
            module.fail_json(msg="plans: each entry needs host and plan (a sparkforge_plan with sources and target); "
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
                        module.fail_json(msg="the LLVM commit is neither in the version data nor in Triton's "
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
                    module.fail_json(msg="ML package(s) %s are built from source on %s in this profile; a bundle "
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


def main():
    module = AnsibleModule(
        argument_spec=dict(
            dest=dict(type="path", required=True),
            plans=dict(type="list", elements="dict", required=True),
            cuda_packages=dict(type="list", elements="str", default=[]),
            keyring=dict(type="dict", default={}, no_log=False),
            pip_index_url=dict(type="str", default=""),
            build_wheels=dict(type="list", elements="str", default=[]),
            triton_build_requirements=dict(type="list", elements="str", default=[]),
            python=dict(type="path"),
            timeout=dict(type="int", default=600),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if not p["plans"]:
        module.fail_json(msg="plans is empty: no host was planned, so there is nothing to bundle")
    if p["pip_index_url"].startswith("http://"):
        module.fail_json(msg="pip_index_url %s is plain http: use https or a file:// mirror" % p["pip_index_url"])
    if os.path.exists(p["dest"]) and not os.path.isdir(p["dest"]):
        module.fail_json(msg="dest %s exists and is not a directory" % p["dest"])
    try:
        maker, manifest, log = make(module, p)
    except bundle.BundleError as exc:
        module.fail_json(msg="offline bundle: %s" % exc, dest=p["dest"], fetched=[])
    module.exit_json(changed=bool(maker.fetched), dest=p["dest"], fetched=maker.fetched, log=log,
                     targets=[t["id"] for t in manifest["targets"]], items=len(manifest["items"]),
                     sources=manifest["sources"])


if __name__ == "__main__":
    main()
