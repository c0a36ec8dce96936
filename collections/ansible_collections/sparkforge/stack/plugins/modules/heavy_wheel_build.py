#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: heavy_wheel_build
short_description: Build a fleet class's GPU packages once, on its builder, audited and published with their inputs
version_added: "0.2.0"
description:
  - Runs on a platform class's builder after torch. Resolves the ML package matrix for the host the way
    M(sparkforge.stack.ml_packages) does, and for every entry with C(gpu_build) whose method here is C(source)
    downloads its sdist, applies the entry's fixes, builds a wheel against the torch in O(venv) with the arch list
    in every form the build reads, and audits every shared object for O(audit_targets).
  - A wheel that passes is published whole into O(wheel_dir)/<name>-<cache key>/ with C(<wheel>.manifest.json)
    (sha256, the audit, every build input). A refused wheel is never published, so no host of the class gets it;
    the module fails naming the library and the archs it holds.
  - The cache key covers the torch build (O(depends_on)), the requirement, the sdist's sha256, the arch list and
    every variable derived from it, the force-build flags, the fixes, the CUDA release of O(cuda_home), the build
    Python and O(audit_targets) (not the job counts). A wheel published with the same key (its sha256 checked)
    is reused, and nothing is built.
  - Installs nothing; the class's hosts, the builder among them, install the published wheels through
    M(sparkforge.stack.fleet_wheels) and M(sparkforge.stack.fleet_wheel_install).
author:
  - sparkforge developers (@sparkforge)
options:
  venv:
    description: The builder's stack venv (its Python imports the torch to build against).
    type: path
    required: true
  wheel_dir:
    description: Where the wheels are published, one directory per package and cache key.
    type: path
    required: true
  depends_on:
    description: The sha256 of the torch wheel the packages are built against (part of the cache key).
    type: str
    default: ""
  cuda_home:
    description: The CUDA toolkit the builds compile with; its nvcc release is part of the cache key.
    type: path
    default: /usr/local/cuda
  matrix:
    description: The package matrix (C(sparkforge_ml_packages) of the manifest).
    type: dict
    required: true
  profiles:
    description: Named lists of matrix packages (C(sparkforge_ml_profiles)).
    type: dict
    default: {}
  pins:
    description: Version per package, as for M(sparkforge.stack.ml_packages).
    type: dict
    default: {}
  profile:
    description: The profile the hosts install.
    type: str
  packages:
    description: Matrix packages the hosts install in addition to the profile's.
    type: list
    elements: str
    default: []
  arch:
    description: CPU architecture of the class.
    type: str
    required: true
  platform_class:
    description: Platform class of the class (C(dgx_spark), C(gh200), ...).
    type: str
    default: generic
  cuda_major:
    description: The CUDA major the stack targets.
    type: int
    default: 13
  allow_source_builds:
    description: When false no GPU package is built (the matrix then skips them).
    type: bool
    default: true
  index_url:
    description: Base URL of the package index the sdists come from.
    type: str
  extra_index_urls:
    description: Extra package indexes.
    type: list
    elements: str
    default: []
  find_links:
    description: Local directories or URLs with sdists (air-gapped builders).
    type: list
    elements: str
    default: []
  no_index:
    description: Use only O(find_links).
    type: bool
    default: false
  env:
    description: Extra environment for pip (proxies, C(PIP_CERT), C(CUDA_HOME)).
    type: dict
    default: {}
  cuda_arch_list:
    description: The plan's arch list (C(9.0), C(12.1)); each build gets it in every form it reads.
    type: str
    default: ""
  cxx_facts:
    description:
      - What decides the C++ standard of each GPU source build (C(gpu_build)) against the venv's torch
        (module_utils/packages/cxx_std.py) - C(releases) (C(sparkforge_torch_releases), each release's
        C(cxx_standard)), C(checked) (C(sparkforge_torch_cxx_checked), where that was read) and C(min_compilers)
        (C(sparkforge_cxx_min_compilers)).
      - A build whose standard (read from its sdist's setup.py/CMakeLists.txt once fetched, else from the entry's
        C(gpu_build.cxx)) is below what the torch release's headers require, with no C(fixes) entry that sets it,
        or whose standard the host's C(c++) is too old for, is refused before it compiles. Empty - no such check.
    type: dict
    default: {}
  audit_targets:
    description: Compute capabilities of the class's GPUs; every built wheel is audited against them before it is published.
    type: list
    elements: str
    default: []
  build_cpus:
    description: CPUs for the builds (the job count's upper bound); default the machine's.
    type: int
  build_memory_gib:
    description: Memory (GiB) the builds may plan with; default MemAvailable of C(/proc/meminfo).
    type: float
  log_dir:
    description: Where the build logs go (default O(wheel_dir)).
    type: path
  force:
    description: Build even when a wheel with the same cache key is published.
    type: bool
    default: false
attributes:
  check_mode:
    description: Downloads each sdist into a temporary directory to key its build, and says whether it would build; writes nothing else.
    support: full
  diff_mode:
    description: Not supported.
    support: none
"""

EXAMPLES = r"""
- name: Build the class's GPU packages against the torch just built
  sparkforge.stack.heavy_wheel_build:
    venv: /opt/sparkforge/venv
    wheel_dir: /var/cache/sparkforge/wheels/heavy
    depends_on: "{{ pytorch_build.sha256 }}"
    matrix: "{{ sparkforge_ml_packages }}"
    profiles: "{{ sparkforge_ml_profiles }}"
    pins: "{{ sparkforge_ml_package_pins }}"
    packages: [causal-conv1d]
    arch: aarch64
    platform_class: dgx_spark
    cuda_arch_list: "12.1"
    audit_targets: ["12.1"]
  register: ml_packages_class_build
"""

RETURN = r"""
wheels:
  description:
    - One entry per GPU package built on the class's builder - name, requirement, wheel (null in check mode when it
      would be built), sha256, version, cache_key, changed (built in this run), sdist (file, sha256), build_env,
      audit, module (its import name), plan, cxx (the C++ plan read from the sdist when cxx_facts is given).
  returned: always
  type: list
  elements: dict
notes:
  description: GPU packages of the plan that are not built here (a wheel-first entry's source fallback is decided per host).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkforge.stack.plugins.module_utils.packages import heavy_wheels
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import AnsibleSystem, JobError


def main():
    module = AnsibleModule(
        argument_spec=dict(
            venv=dict(type="path", required=True),
            wheel_dir=dict(type="path", required=True),
            depends_on=dict(type="str", default=""),
            cuda_home=dict(type="path", default="/usr/local/cuda"),
            matrix=dict(type="dict", required=True),
            profiles=dict(type="dict", default={}),
            pins=dict(type="dict", default={}),
            profile=dict(type="str"),
            packages=dict(type="list", elements="str", default=[]),
            arch=dict(type="str", required=True),
            platform_class=dict(type="str", default="generic"),
            cuda_major=dict(type="int", default=13),
            allow_source_builds=dict(type="bool", default=True),
            index_url=dict(type="str"),
            extra_index_urls=dict(type="list", elements="str", default=[]),
            find_links=dict(type="list", elements="str", default=[]),
            no_index=dict(type="bool", default=False),
            env=dict(type="dict", default={}),
            cuda_arch_list=dict(type="str", default=""),
            audit_targets=dict(type="list", elements="str", default=[]),
            cxx_facts=dict(type="dict", default={}),
            build_cpus=dict(type="int"),
            build_memory_gib=dict(type="float"),
            log_dir=dict(type="path"),
            force=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    # AnsibleSystem makes the environment the run's own (no PIP_*/PYTHON* of the host: _common/run_env.py).
    job = heavy_wheels.HeavyWheelsJob(module.params, AnsibleSystem(module), module.check_mode)
    try:
        result = job.run()
    except JobError as exc:
        module.fail_json(**exc.fail_args())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
