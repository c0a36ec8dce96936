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

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url
from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError
from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import bundle
from ansible_collections.sparkforge.stack.plugins.module_utils.fleet.bundle_job import BundleJob
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import AnsibleSystem, JobError


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
    job = BundleJob(p, AnsibleSystem(module), module.check_mode, fetch=_fetcher(p["timeout"]))
    try:
        result = job.run()
    except JobError as exc:
        module.fail_json(**exc.fail_args())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
