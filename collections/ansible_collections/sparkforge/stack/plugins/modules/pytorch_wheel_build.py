#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pytorch_wheel_build
short_description: Build a PyTorch wheel from source for the host's GPUs
version_added: "0.1.0"
description:
  - Builds a PyTorch wheel with C(pip wheel . --no-build-isolation) in a kept source tree, for an arch list
    validated against the release (names the release accepts, no C(f) suffixes, the known build traps).
  - Applies the release's fixes from the stack's version data and the user's patch files, each checked first
    (C(git apply --check) semantics; exact-text edits verify the old text) and applied once.
  - The environment is built from nothing (explicit C(PATH) and C(LD_LIBRARY_PATH), C(USE_*) from I(features),
    C(BLAS=OpenBLAS) on aarch64, C(CUDA_HOME), cuSPARSELt, C(PYTORCH_BUILD_VERSION)/C(PYTORCH_BUILD_NUMBER)).
  - A cache key over every input (commit, fixes, patches, arch list, features, environment, toolchain and CUDA
    versions, Python) makes a rerun with the same inputs a no-op; a lock stops concurrent builds; a status file
    (phase, ninja progress, elapsed) can be polled while the module runs under C(async).
  - The wheel is published atomically into I(wheel_dir) with a JSON build manifest next to it.
  - In check mode returns the plan and the full environment without building.
author:
  - sparkforge developers (@sparkforge)
options:
  torch_data:
    description:
      - The stack's PyTorch version data (from the C(sparkforge.stack.manifest) role), with the keys
        C(releases) (C(sparkforge_torch_releases)), C(arch_min_version), C(arch_defaults), C(traps) and C(fixes).
    type: dict
    required: true
  version:
    description:
      - PyTorch release to build (a key of C(torch_data.releases)). Also the wheel version
        (C(PYTORCH_BUILD_VERSION)), so the wheel satisfies C(torch==VERSION) pins.
      - Default is the newest release the data marks good for I(platform_class).
    type: str
  repo:
    description:
      - Git URL (or local path) of the PyTorch source. Only the ref's commit is fetched, at depth 1, and the
        submodules' pinned commits, also at depth 1, into C(BUILD_DIR/src).
      - Mutually exclusive with I(src).
    type: str
    default: https://github.com/pytorch/pytorch.git
  ref:
    description: Tag, branch or commit to build from I(repo). Default C(v<version>).
    type: str
  src:
    description:
      - A local PyTorch source tree to build in place instead of cloning I(repo). Its HEAD commit is recorded.
    type: path
  fetch_jobs:
    description: Submodules fetched at once (C(git submodule update --jobs)).
    type: int
    default: 8
  submodules:
    description: Update git submodules recursively after checkout, each at its pinned commit at depth 1.
    type: bool
    default: true
  build_dir:
    description: Work directory (source clone, logs, status file, lock). Kept between runs so a failed build resumes.
    type: path
    required: true
  wheel_dir:
    description: Directory the finished wheel and its manifest are published into.
    type: path
    required: true
  python:
    description: Python interpreter of the build venv (the wheel is built for it).
    type: path
    required: true
  build_deps:
    description:
      - C(install) installs the build requirements (I(build_requirements)) with I(python)'s pip first;
        C(check) only verifies they are installed (offline hosts); C(skip) does neither.
    type: str
    choices: [install, check, skip]
    default: install
  build_requirements:
    description:
      - Requirements installed before the build. Default C(setuptools), C(wheel) plus the source's
        C(requirements-build.txt) (or C(requirements.txt)).
    type: list
    elements: str
  cuda_arch_list:
    description:
      - C(TORCH_CUDA_ARCH_LIST) as a string (C(9.0;12.0+PTX)) or a list. Default from I(platform_class),
        I(compute_capabilities) and the version data (GB10 gets C(12.0) on releases with the mem-efficient
        attention trap, C(12.1) on fixed releases).
    type: raw
  platform_class:
    description: The host's platform class (C(ansible_facts.sparkforge.platform_class) from C(gpu_facts)).
    type: str
    default: none
  compute_capabilities:
    description: The host's compute capabilities (C(ansible_facts.sparkforge.compute_capabilities)).
    type: list
    elements: str
    default: []
  machine:
    description: CPU architecture the wheel is built for (default the host's, e.g. C(aarch64)).
    type: str
  features:
    description: Build features, each mapped to its C(USE_*) variable; unset means the default.
    type: dict
    suboptions:
      cuda: {description: "C(USE_CUDA) (default on).", type: bool}
      cudnn: {description: "C(USE_CUDNN) (default on).", type: bool}
      cusparselt: {description: "C(USE_CUSPARSELT) (default on when cuSPARSELt is found).", type: bool}
      cufile: {description: "C(USE_CUFILE) (default off; needs GDS).", type: bool}
      nccl: {description: "C(USE_NCCL) (default on).", type: bool}
      system_nccl: {description: "C(USE_SYSTEM_NCCL) (default off: PyTorch builds its own).", type: bool}
      distributed: {description: "C(USE_DISTRIBUTED) (default on).", type: bool}
      gloo: {description: "C(USE_GLOO) (default on).", type: bool}
      tensorpipe: {description: "C(USE_TENSORPIPE) (default on).", type: bool}
      mpi: {description: "C(USE_MPI) (default off).", type: bool}
      flash_attention: {description: "C(USE_FLASH_ATTENTION) (default on).", type: bool}
      mem_eff_attention: {description: "C(USE_MEM_EFF_ATTENTION) (default on).", type: bool}
      fbgemm: {description: "C(USE_FBGEMM) (default on).", type: bool}
      fbgemm_genai: {description: "C(USE_FBGEMM_GENAI) (default off).", type: bool}
      kineto: {description: "C(USE_KINETO) (default on).", type: bool}
      xnnpack: {description: "C(USE_XNNPACK) (default on).", type: bool}
      mkldnn: {description: "C(USE_MKLDNN) (default on for x86_64, off for aarch64).", type: bool}
      mkldnn_acl: {description: "C(USE_MKLDNN_ACL) (default off; needs C(ACL_ROOT_DIR) in I(extra_env)).", type: bool}
      nnpack: {description: "C(USE_NNPACK) (default on).", type: bool}
      qnnpack: {description: "C(USE_PYTORCH_QNNPACK) (default on).", type: bool}
      magma: {description: "C(USE_MAGMA) (default off).", type: bool}
      numpy: {description: "C(USE_NUMPY) (default on).", type: bool}
      rocm: {description: "C(USE_ROCM) (default off).", type: bool}
      tests: {description: "C(BUILD_TEST) (default off).", type: bool}
  blas:
    description: C(BLAS) choice. C(auto) is OpenBLAS on aarch64 (MKL does not exist there) and MKL on x86_64.
    type: str
    choices: [auto, OpenBLAS, MKL, Eigen, BLIS, FLAME]
    default: auto
  cuda_home:
    description: CUDA toolkit root (C(CUDA_HOME)).
    type: path
    default: /usr/local/cuda
  cusparselt_root:
    description: C(CUSPARSELT_ROOT_DIR). Default found from the CUDA-13 Debian packages' layout.
    type: path
  cusparselt_include_dir:
    description: C(CUSPARSELT_INCLUDE_DIR) (the directory with C(cusparseLt.h)).
    type: path
  cusparselt_library:
    description: C(CUSPARSELT_LIBRARY) (path of C(libcusparseLt.so)).
    type: path
  cuda_major:
    description: CUDA major version, used to find cuSPARSELt (C(/usr/include/libcusparseLt/13)).
    type: int
    default: 13
  build_number:
    description: C(PYTORCH_BUILD_NUMBER).
    type: int
    default: 1
  fixes:
    description: Fixes from C(torch_data.fixes) to apply in addition to those the arch list needs.
    type: list
    elements: str
    default: []
  patches:
    description: The user's patch files (paths on the target), applied after the fixes with C(git apply).
    type: list
    elements: path
    default: []
  extra_env:
    description: More build environment variables (they win over the computed ones and enter the cache key).
    type: dict
    default: {}
  jobs:
    description:
      - Parallel compile jobs (C(MAX_JOBS)). C(auto) uses the cores and the free RAM at 4 GiB per job with
        4 GiB kept free, so the OOM killer does not end the build.
    type: raw
    default: auto
  ccache:
    description: Use ccache (compiler launchers) when it is installed.
    type: bool
    default: true
  force:
    description: Build even when a wheel with the same cache key is already published.
    type: bool
    default: false
  status_file:
    description: Status file (JSON) to poll. Default C(BUILD_DIR/status.json).
    type: path
  log_file:
    description: Build log. Default C(BUILD_DIR/build.log).
    type: path
notes:
  - Run it with C(async) and poll; the C(sparkforge.stack.pytorch) role prints the status file while it waits.
  - Check mode clones nothing; when the source tree already exists the fixes are checked against it.
seealso:
  - module: sparkforge.stack.gpu_facts
"""

EXAMPLES = r"""
- name: Build PyTorch 2.9.1 for this GB10 (12.1 with the mem-efficient attention fix)
  sparkforge.stack.pytorch_wheel_build:
    torch_data:
      releases: "{{ sparkforge_torch_releases }}"
      arch_min_version: "{{ sparkforge_torch_arch_min_version }}"
      arch_defaults: "{{ sparkforge_torch_arch_defaults }}"
      traps: "{{ sparkforge_torch_traps }}"
      fixes: "{{ sparkforge_torch_fixes }}"
    version: "2.9.1"
    cuda_arch_list: "12.1"
    platform_class: "{{ ansible_facts.sparkforge.platform_class }}"
    compute_capabilities: "{{ ansible_facts.sparkforge.compute_capabilities }}"
    python: /opt/sparkforge/venv/bin/python
    build_dir: /opt/sparkforge/build/pytorch
    wheel_dir: /opt/sparkforge/wheels
    features:
      fbgemm_genai: false
  async: 36000
  poll: 0
  register: torch_build

- name: Show what a build would do
  sparkforge.stack.pytorch_wheel_build:
    torch_data: "{{ torch_data }}"
    python: /opt/sparkforge/venv/bin/python
    build_dir: /opt/sparkforge/build/pytorch
    wheel_dir: /opt/sparkforge/wheels
  check_mode: true
  register: torch_plan
"""

RETURN = r"""
reproducible:
  description:
    - How the wheel was made reproducible (the same cache key gives the same sha256 on any builder).
    - Keys C(source_date_epoch) (the source commit's time), C(prefix_maps) (build paths and the fixed names the
      compilers record instead), C(normalized) (entries, nvcc temporary names made fixed, the entry time)
      and C(leaks) (build paths or the host name the wheel still carries; each is also a warning). Also in
      the wheel's manifest.
  returned: when a wheel is built or reused
  type: dict
version:
  description: The PyTorch release built (also the wheel version).
  returned: always
  type: str
  sample: "2.9.1"
commit:
  description: The resolved source commit (null in check mode when the source is not cloned and the remote is unreachable).
  returned: always
  type: str
arch_list:
  description: The validated C(TORCH_CUDA_ARCH_LIST).
  returned: always
  type: str
  sample: "12.0;12.1"
arch_list_why:
  description: Where the arch list came from.
  returned: always
  type: str
fixes:
  description: Fixes and patches with their state (applied, already, would apply).
  returned: always
  type: list
  elements: dict
env:
  description: The complete build environment.
  returned: always
  type: dict
jobs:
  description: Parallel jobs and why.
  returned: always
  type: dict
cache_key:
  description: sha256 over every build input.
  returned: always
  type: str
src_dir:
  description: The source tree the wheel is built from (its C(test/) is what M(sparkforge.stack.torch_acceptance) runs).
  returned: when the version data is valid
  type: str
wheel:
  description: Path of the published wheel (null in check mode before a build).
  returned: always
  type: str
sha256:
  description: sha256 of the wheel.
  returned: when a wheel exists
  type: str
manifest:
  description: Path of the JSON build manifest next to the wheel.
  returned: when a wheel exists
  type: str
duration_s:
  description: Seconds the build took (0 for a no-op).
  returned: always
  type: float
plan:
  description: What would change and why.
  returned: always
  type: str
status_file:
  description: The status file polled while the build runs.
  returned: always
  type: str
log_file:
  description: The build log.
  returned: always
  type: str
pairing:
  description: The release's triton/torchvision/torchaudio versions from the version data.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import AnsibleSystem, JobError
from ansible_collections.sparkforge.stack.plugins.module_utils.build import torch_build as tb
from ansible_collections.sparkforge.stack.plugins.module_utils.build.torch_job import TorchWheelJob

FEATURE_OPTIONS = dict((name, dict(type="bool")) for name in sorted(tb.FEATURES))


# The options (DOCUMENTATION above); the unit tests validate their params against it too.
ARGUMENT_SPEC = dict(
    torch_data=dict(type="dict", required=True),
    version=dict(type="str"),
    repo=dict(type="str", default="https://github.com/pytorch/pytorch.git"),
    ref=dict(type="str"),
    src=dict(type="path"),
    submodules=dict(type="bool", default=True),
    fetch_jobs=dict(type="int", default=8),
    build_dir=dict(type="path", required=True),
    wheel_dir=dict(type="path", required=True),
    python=dict(type="path", required=True),
    build_deps=dict(type="str", choices=["install", "check", "skip"], default="install"),
    build_requirements=dict(type="list", elements="str"),
    cuda_arch_list=dict(type="raw"),
    platform_class=dict(type="str", default="none"),
    compute_capabilities=dict(type="list", elements="str", default=[]),
    machine=dict(type="str"),
    features=dict(type="dict", options=FEATURE_OPTIONS),
    blas=dict(type="str", choices=list(tb.BLAS_CHOICES), default="auto"),
    cuda_home=dict(type="path", default="/usr/local/cuda"),
    cusparselt_root=dict(type="path"),
    cusparselt_include_dir=dict(type="path"),
    cusparselt_library=dict(type="path"),
    cuda_major=dict(type="int", default=13),
    build_number=dict(type="int", default=1),
    fixes=dict(type="list", elements="str", default=[]),
    patches=dict(type="list", elements="path", default=[]),
    extra_env=dict(type="dict", default={}),
    jobs=dict(type="raw", default="auto"),
    ccache=dict(type="bool", default=True),
    force=dict(type="bool", default=False),
    status_file=dict(type="path"),
    log_file=dict(type="path"),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    job = TorchWheelJob(module.params, AnsibleSystem(module), module.check_mode)
    try:
        result = job.run()
    except JobError as exc:
        module.fail_json(**exc.fail_args())
    for warning in result.pop("warnings"):
        module.warn(warning)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
