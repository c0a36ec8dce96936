#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: triton_llvm_build
short_description: Build a Triton wheel against an LLVM built from source at the commit Triton pins
version_added: "0.1.0"
description:
  - Fetches the Triton source at a ref (or uses a local tree), reads the LLVM commit Triton pins in
    C(cmake/llvm-hash.txt), builds that LLVM with CMake and Ninja into an install prefix (only when that
    LLVM is not built yet), then builds the Triton wheel against it with C(LLVM_INCLUDE_DIRS),
    C(LLVM_LIBRARY_DIR), C(LLVM_SYSPATH), C(TRITON_OFFLINE_BUILD=1) (nothing is downloaded during the
    build) and the CUDA tool paths (C(TRITON_PTXAS_PATH), from Triton 3.6 also
    C(TRITON_PTXAS_BLACKWELL_PATH)), from the setup.py location of the version (the repository root from
    Triton 3.4, C(python/) before).
  - The wheel is identified by a cache key over every input that changes it (Triton commit and local
    changes, LLVM commit, LLVM projects/targets/build type/assertions/extra CMake arguments, compiler
    version, Python version, ptxas version, extra environment). A run whose key matches the record next to
    a published wheel does nothing (C(changed=false)). A changed Triton ref that pins the same LLVM reuses
    the built LLVM; a changed LLVM pin builds the new LLVM into its own prefix.
  - The LLVM prefix holds a stamp file (C(.sparkforge-llvm.json)) with the LLVM cache key; LLVM is
    rebuilt only when the stamp is missing or different. The published wheel has a JSON record beside it
    (C(<wheel>.sparkforge.json)) with the Triton cache key, the wheel name and its sha256.
  - Build trees are kept (LLVM under C(work_dir/build/), Triton's in its source tree), so a killed or failed
    build resumes where it stopped. Wheels are published atomically; C(wheel_dir) never holds a partial
    wheel. A lock file in C(work_dir) refuses a second concurrent build there.
  - Meant to run under C(async); the status file (phase, ninja's [done/total], elapsed seconds) shows the
    progress of a build of several hours. Every command's output goes to a log file under C(work_dir/logs/).
  - Check mode resolves the refs and returns the plan (what would be built and why, the cache keys)
    without fetching or building anything.
author:
  - sparkforge developers (@sparkforge)
options:
  triton_repo:
    description:
      - Git URL of the Triton source (https, ssh, C(file://) or a local path). Fetched into
        C(work_dir/src/triton) at O(triton_ref).
      - When neither O(triton_repo) nor O(triton_src) is given, C(https://github.com/triton-lang/triton.git).
    type: str
  triton_ref:
    description:
      - Tag, branch or commit of O(triton_repo) to build. Defaults to C(v<triton_version>).
    type: str
  triton_version:
    description:
      - The Triton version (for example C(3.5.1)). Decides where setup.py must be and whether
        C(TRITON_PTXAS_BLACKWELL_PATH) is set. When not given it is read from the source
        (C(python/triton/__init__.py)).
    type: str
  triton_src:
    description:
      - A local Triton git work tree to build in place instead of fetching O(triton_repo). Uncommitted
        changes to tracked files are part of the cache key.
    type: path
  llvm_repo:
    description:
      - Git URL of llvm-project (https, ssh, C(file://) or a local path). Only the needed commit is fetched,
        into C(work_dir/src/llvm-project).
      - When neither O(llvm_repo) nor O(llvm_src) is given, C(https://github.com/llvm/llvm-project.git).
    type: str
  llvm_src:
    description:
      - A local llvm-project git work tree, checked out at the LLVM commit Triton pins, to build instead of
        fetching O(llvm_repo).
    type: path
  llvm_commit:
    description:
      - The LLVM commit to build. By default read from Triton's C(cmake/llvm-hash.txt); when given it must
        match that file (the module fails otherwise), which catches a stale version manifest.
    type: str
  work_dir:
    description:
      - Directory for sources, build trees, logs, the status file and the lock.
    type: path
    required: true
  llvm_install_prefix:
    description:
      - Where LLVM is installed. Default C(work_dir/llvm/llvm-<first 12 digits of the LLVM commit>), so
        Triton versions that pin the same LLVM share one build.
    type: path
  llvm_projects:
    description: C(LLVM_ENABLE_PROJECTS) (semicolon-separated).
    type: str
    default: mlir;llvm;lld
  llvm_targets:
    description: C(LLVM_TARGETS_TO_BUILD) (semicolon-separated). Triton builds its AMD backend too.
    type: str
    default: host;NVPTX;AMDGPU
  llvm_cmake_args:
    description: Extra arguments for LLVM's CMake configure step (part of the cache key).
    type: list
    elements: str
    default: []
  build_type:
    description: C(CMAKE_BUILD_TYPE) of LLVM.
    type: str
    default: Release
    choices: [Release, RelWithDebInfo, Debug, MinSizeRel]
  assertions:
    description: C(LLVM_ENABLE_ASSERTIONS).
    type: bool
    default: true
  jobs:
    description:
      - Parallel compile jobs, or C(auto). C(auto) takes the smaller of the CPU count and what fits in the
        available RAM with 2 GiB reserved, counting 2 GiB per LLVM compile job and 3 GiB per Triton
        compile job (C(MAX_JOBS)). LLVM links run at most one per four compile jobs
        (C(LLVM_PARALLEL_LINK_JOBS)). Not part of the cache key.
    type: str
    default: auto
  python:
    description:
      - The Python interpreter that builds the wheel (the stack's venv); it needs pip, setuptools, wheel and
        Triton's build requirements. Default the interpreter running this module.
    type: path
  wheel_dir:
    description: Directory the finished wheel and its record are published to.
    type: path
    required: true
  ptxas_path:
    description:
      - The ptxas Triton uses (and bundles); CUDA 13's ptxas knows sm_121a (GB10), Triton 3.5's own does not.
        Also used for C(TRITON_PTXAS_BLACKWELL_PATH) from Triton 3.6. C(cuobjdump) and C(nvdisasm) beside it
        are used when present.
    type: path
    default: /usr/local/cuda/bin/ptxas
  json_syspath:
    description:
      - C(JSON_SYSPATH) for the offline build (a prefix holding C(include/nlohmann/json.hpp); Debian and
        Ubuntu's C(nlohmann-json3-dev) install it under C(/usr)).
    type: path
    default: /usr
  extra_env:
    description: More environment variables for the Triton build (part of the cache key).
    type: dict
    default: {}
  ccache:
    description: Compile through C(ccache) (LLVM's compiler launcher, C(TRITON_BUILD_WITH_CCACHE)).
    type: bool
    default: false
  force:
    description: Build again even when the records say the wheel and the LLVM are up to date.
    type: bool
    default: false
  status_file:
    description: The progress file (JSON). Default C(work_dir/status.json).
    type: path
attributes:
  check_mode:
    description: Returns the plan (what would be built, why, the cache keys) and builds nothing.
    support: full
  diff_mode:
    description: Shows the cache key of the published wheel before and after.
    support: full
notes:
  - Build trees are never deleted by the module; remove C(work_dir/build) to reclaim space.
  - The compiler is C($CXX), or C(c++) when unset; its version is part of both cache keys.
"""

EXAMPLES = r"""
- name: Build Triton 3.5.1 against its pinned LLVM (hours on the first run), polling the status file
  sparkforge.stack.triton_llvm_build:
    triton_version: "3.5.1"
    work_dir: /opt/sparkforge/build/triton
    wheel_dir: /opt/sparkforge/wheels
    python: /opt/sparkforge/venv/bin/python
  async: 21600
  poll: 0
  register: triton_job

- name: Show what would be built and why
  sparkforge.stack.triton_llvm_build:
    triton_repo: https://github.com/triton-lang/triton.git
    triton_ref: v3.6.0
    work_dir: /opt/sparkforge/build/triton
    wheel_dir: /opt/sparkforge/wheels
  check_mode: true
  register: plan
"""

RETURN = r"""
reproducible:
  description:
    - How the wheel was made reproducible (the same cache key gives the same sha256 on any builder).
    - Keys C(source_date_epoch) (the Triton commit's time), C(prefix_maps) (build paths and the fixed names the
      compilers record instead), C(normalized) (entries, nvcc temporary names made fixed, the entry time)
      and C(leaks) (build paths or the host name the wheel still carries; each is also a warning).
  returned: when a wheel is built or reused
  type: dict
wheel:
  description: Path of the published wheel (or, in check mode, of the wheel that is already up to date).
  returned: success
  type: str
  sample: /opt/sparkforge/wheels/triton-3.5.1-cp312-cp312-linux_aarch64.whl
wheel_sha256:
  description: sha256 of the wheel.
  returned: success
  type: str
triton_commit:
  description: The Triton commit built.
  returned: success
  type: str
triton_version:
  description: The Triton version built.
  returned: success
  type: str
llvm_commit:
  description: The LLVM commit Triton is built against.
  returned: success
  type: str
  sample: 7d5de3033187c8a3bb4d2e322f5462cdaf49808f
llvm_prefix:
  description: The LLVM install prefix.
  returned: success
  type: str
cache_key:
  description: The Triton cache key (sha256 over every input of the wheel).
  returned: success
  type: str
llvm_cache_key:
  description: The LLVM cache key (recorded in the stamp file of the prefix).
  returned: success
  type: str
built:
  description: The parts that were built in this run (C(llvm), C(triton)); empty when nothing was.
  returned: success
  type: list
  elements: str
  sample: [llvm, triton]
duration_s:
  description: Seconds this run took.
  returned: always
  type: float
log:
  description: The log file of this run (or of the build that made the wheel, when nothing was built).
  returned: success
  type: str
status_file:
  description: The progress file.
  returned: always
  type: str
plan:
  description: What would be (or was) built and why, with the cache keys and the jobs.
  returned: success
  type: dict
phase:
  description: The phase that failed (clone, llvm-configure, llvm-build, llvm-install, triton-wheel, publish).
  returned: failure
  type: str
rc:
  description: Exit code of the command that failed.
  returned: failure of a build phase
  type: int
log_tail:
  description: The last lines of the log when a phase failed.
  returned: failure
  type: str
error_lines:
  description: The lines of the log that look like errors (the cause may sit above the tail).
  returned: failure of a build phase
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import AnsibleSystem, JobError
from ansible_collections.sparkforge.stack.plugins.module_utils.build import repro
from ansible_collections.sparkforge.stack.plugins.module_utils.build import triton_build as tb
from ansible_collections.sparkforge.stack.plugins.module_utils.build.triton_job import TritonLlvmJob


# The options (DOCUMENTATION above); the unit tests validate their params against it too.
ARGUMENT_SPEC = dict(
    triton_repo=dict(type="str"),
    triton_ref=dict(type="str"),
    triton_version=dict(type="str"),
    triton_src=dict(type="path"),
    llvm_repo=dict(type="str"),
    llvm_src=dict(type="path"),
    llvm_commit=dict(type="str"),
    work_dir=dict(type="path", required=True),
    llvm_install_prefix=dict(type="path"),
    llvm_projects=dict(type="str", default=tb.DEFAULT_LLVM_PROJECTS),
    llvm_targets=dict(type="str", default=tb.DEFAULT_LLVM_TARGETS),
    llvm_cmake_args=dict(type="list", elements="str", default=[]),
    build_type=dict(type="str", default="Release", choices=["Release", "RelWithDebInfo", "Debug",
                                                            "MinSizeRel"]),
    assertions=dict(type="bool", default=True),
    jobs=dict(type="str", default="auto"),
    python=dict(type="path"),
    wheel_dir=dict(type="path", required=True),
    ptxas_path=dict(type="path", default="/usr/local/cuda/bin/ptxas"),
    json_syspath=dict(type="path", default="/usr"),
    extra_env=dict(type="dict", default={}),
    ccache=dict(type="bool", default=False),
    force=dict(type="bool", default=False),
    status_file=dict(type="path"),
)
MUTUALLY_EXCLUSIVE = [["triton_repo", "triton_src"], ["llvm_repo", "llvm_src"]]


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, mutually_exclusive=MUTUALLY_EXCLUSIVE,
                           supports_check_mode=True)
    job = TritonLlvmJob(module.params, AnsibleSystem(module), module.check_mode)
    try:
        result = job.run(diff=module._diff)
    except JobError as exc:
        module.fail_json(**exc.fail_args())
    for warning in repro.leak_warnings(os.path.basename(result.get("wheel") or ""), result.get("reproducible") or {}):
        module.warn(warning)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
