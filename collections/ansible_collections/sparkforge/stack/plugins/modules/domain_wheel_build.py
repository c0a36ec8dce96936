#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: domain_wheel_build
short_description: Build a torchvision or torchaudio wheel against the installed torch, reproducibly
version_added: "0.1.0"
description:
  - Builds the wheel of a domain library (torchvision, torchaudio) from a checked-out source tree with
    C(pip wheel --no-build-isolation) in the build venv, so it compiles against the torch installed there.
  - The build is reproducible the way the stack's other builds are (module_utils/build/repro), with the commit's time as
    C(SOURCE_DATE_EPOCH), the source and temporary directories mapped to fixed names for the compilers
    (C(-ffile-prefix-map), also through C(NVCC_APPEND_FLAGS)), and the wheel normalised (entry order, times,
    modes, nvcc's temporary file names, RECORD). The same inputs give the same sha256 on any builder.
  - The cache key covers the source commit, the version, the build environment (less the job count and
    proxies), the build Python, O(depends_on) and the normalisation scheme. A wheel published with the same
    key (its sha256 checked against its manifest) is reused; otherwise the build runs under a lock, logs to
    O(log_file), and the wheel appears in O(wheel_dir) whole or not at all, with C(<wheel>.manifest.json).
author:
  - sparkforge developers (@sparkforge)
options:
  name:
    description: The distribution name the tree builds (C(torchvision), C(torchaudio)).
    type: str
    required: true
  version:
    description: The version the wheel must carry (passed to the build as C(BUILD_VERSION) by the caller).
    type: str
    required: true
  src:
    description: The git checkout of the library at its paired tag.
    type: path
    required: true
  python:
    description: The build venv's Python (it must import the torch to build against).
    type: path
    required: true
  wheel_dir:
    description: Where the wheel and its manifest are published.
    type: path
    required: true
  environment:
    description:
      - Variables for the build (C(TORCH_CUDA_ARCH_LIST), C(FORCE_CUDA), C(BUILD_VERSION), C(CUDA_HOME),
        C(MAX_JOBS), C(PATH)...), on top of the module's own environment. All but the job count and proxies
        are part of the cache key.
    type: dict
    default: {}
  depends_on:
    description:
      - An identity of what the wheel is built against that the tree does not show, such as the sha256 of
        the torch wheel in the venv. Part of the cache key.
    type: str
  log_file:
    description: The build log (appended). Default C(<parent of src>/<name>-build.log).
    type: path
  force:
    description: Build even when a wheel with the same cache key is published.
    type: bool
    default: false
attributes:
  check_mode:
    description: Says whether it would build, and why; builds nothing and writes nothing.
    support: full
  diff_mode:
    description: Not supported.
    support: none
"""

EXAMPLES = r"""
- name: Build torchvision against the torch just built
  sparkforge.stack.domain_wheel_build:
    name: torchvision
    version: 0.24.1
    src: /var/cache/sparkforge/build/domains/torchvision
    python: /opt/sparkforge/venv/bin/python
    wheel_dir: /var/cache/sparkforge/wheels/domains/3f2a9c0d1e2b4a5c
    depends_on: "{{ pytorch_build.sha256 }}"
    environment:
      TORCH_CUDA_ARCH_LIST: "12.1"
      FORCE_CUDA: "1"
      BUILD_VERSION: 0.24.1
      MAX_JOBS: "8"
"""

RETURN = r"""
wheel:
  description: The published wheel (C(null) in check mode when it would be built).
  returned: always
  type: str
sha256:
  description: Its sha256.
  returned: always
  type: str
cache_key:
  description: The key over every input of the build.
  returned: always
  type: str
commit:
  description: The source commit built.
  returned: always
  type: str
plan:
  description: What the run did or would do, and why.
  returned: always
  type: str
reproducible:
  description: The reproducibility record (C(source_date_epoch), C(prefix_maps), what normalising changed,
    and C(leaks), build paths or host names the wheel still carries).
  returned: when a wheel is built or reused
  type: dict
log:
  description: The build log.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkforge.stack.plugins.module_utils.build.domain_build import DomainWheelJob
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import AnsibleSystem, JobError

ARGUMENT_SPEC = dict(
    name=dict(type="str", required=True),
    version=dict(type="str", required=True),
    src=dict(type="path", required=True),
    python=dict(type="path", required=True),
    wheel_dir=dict(type="path", required=True),
    environment=dict(type="dict", default={}),
    depends_on=dict(type="str"),
    log_file=dict(type="path"),
    force=dict(type="bool", default=False),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    job = DomainWheelJob(module.params, AnsibleSystem(module), module.check_mode)
    try:
        result = job.run()
    except JobError as exc:
        module.fail_json(**exc.fail_args())
    for warning in result.pop("warnings", []):
        module.warn(warning)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
