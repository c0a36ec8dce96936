#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Kept whole: some 250 of its lines are DOCUMENTATION, EXAMPLES and RETURN, which ansible-doc reads from
# the module file; its Pip orchestration moves to module_utils with issue 34 item 3.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: ml_packages
short_description: Install the ML package layer into a venv without ever replacing its torch
description:
  - Resolves the package matrix (the manifest's C(sparkforge_ml_packages)) for this host and a
    profile or a list of packages, then installs each package into the venv with its own
    C(pip install), one at a time.
  - Every pip call ignores the host's own pip configuration (its C(PIP_*) environment variables and pip.conf
    files); the sources are O(index_url), O(extra_index_urls), O(find_links) and O(env).
  - Every pip call runs with a constraints file that pins the protected distributions (torch,
    torchvision, torchaudio, triton) to the builds installed in the venv (by exact version, and by
    local wheel file when that file still exists).
  - Before installing, C(pip install --dry-run --report) probes each package. A package that
    cannot be installed without installing or replacing a protected distribution fails on its own
    with a clear message; the other packages go on.
  - When the matrix allows it (C(fallback=source)) and no wheel fits the host, the package is
    built from source instead.
  - The protected distributions are hashed (every file their RECORD lists, byte code caches
    excepted) before and after; a difference fails the module.
  - Already-satisfied pins install nothing and report C(changed=false). In check mode the module
    lists what would be installed (including dependencies) and installs nothing.
  - Needs pip >= 23 in the venv.
version_added: "0.1.0"
author:
  - sparkforge developers (@sparkforge)
options:
  venv:
    description: The virtual environment to install into (it must exist and hold pip >= 23).
    type: path
    required: true
  matrix:
    description: The package matrix (C(sparkforge_ml_packages) of the manifest).
    type: dict
    required: true
  profiles:
    description: Named lists of matrix packages (C(sparkforge_ml_profiles)); C(*) means every package not opt_in.
    type: dict
    default: {}
  pins:
    description: Version per package; a bare version means C(==), a specifier is used as written, empty means unpinned.
    type: dict
    default: {}
  profile:
    description: The profile to install. Either this or O(packages) (or both) must select something.
    type: str
  packages:
    description: Matrix packages to install in addition to the profile's.
    type: list
    elements: str
    default: []
  arch:
    description: CPU architecture of the host (C(ansible_facts.sparkforge.cpu.arch)); defaults to the machine's.
    type: str
  platform_class:
    description: Platform class from gpu_facts (C(dgx_spark), C(gh200), ..., C(none)).
    type: str
    default: generic
  cuda_major:
    description: The CUDA major the stack targets.
    type: int
    default: 13
  allow_source_builds:
    description: Allow source builds (method C(source) and the C(source) fallback). When false such packages are skipped.
    type: bool
    default: true
  protected:
    description: Distributions that are never installed, upgraded or replaced.
    type: list
    elements: str
    default: [torch, torchvision, torchaudio, triton]
  index_url:
    description: Base URL of the package index (a mirror); default is pip's own configuration.
    type: str
  extra_index_urls:
    description: Extra package indexes.
    type: list
    elements: str
    default: []
  find_links:
    description: Local directories or URLs with wheels/sdists (air-gapped installs).
    type: list
    elements: str
    default: []
  no_index:
    description: Use only O(find_links), never an index.
    type: bool
    default: false
  env:
    description: Extra environment for every pip call (proxies, C(PIP_CERT), C(CUDA_HOME), ...).
    type: dict
    default: {}
  log_dir:
    description: Directory for one pip log per package (created; not in check mode, which writes nothing). Without it, failures carry the log tail only.
    type: path
  cuda_arch_list:
    description:
      - The plan's arch list (TORCH_CUDA_ARCH_LIST form, e.g. C(9.0) or C(12.1)) for the packages whose matrix
        entry has C(gpu_build). Each such build gets it in every form its setup.py reads (see the manifest),
        its force-build flags and a job count sized to the host's memory.
      - Required (non-empty) when the plan holds such a source build.
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
    description:
      - Compute capabilities (C(12.1), C(9.0)) every shared object of a built GPU wheel is audited against
        before it is installed. A wheel with no SASS of the same major and a lower or equal minor, and no
        PTX the driver can compile, for one of them is refused and never installed.
      - Required when the plan holds a GPU source build.
    type: list
    elements: str
    default: []
  driver_cuda:
    description:
      - The host driver's CUDA release (C(13.0)), as C(nvidia-smi) prints it (gpu_facts' C(driver_cuda)).
        With O(ptx_isa), a GPU wheel whose only code for a target is PTX newer than this driver loads is
        refused, naming the library and the PTX ISA. Empty, PTX is not held to the driver.
    type: str
    default: ""
  ptx_isa:
    description:
      - The manifest's C(sparkforge_ptx_isa) (C(releases), rows of C(cuda) and C(isa)). Without it PTX is not
        held to the driver.
    type: dict
  build_cpus:
    description: CPUs for GPU source builds (the job count's upper bound); default the machine's.
    type: int
  build_memory_gib:
    description: Memory (GiB) GPU source builds may plan with; default MemAvailable of C(/proc/meminfo).
    type: float
"""

EXAMPLES = r"""
- name: Install the training profile into the stack's venv
  sparkforge.stack.ml_packages:
    venv: /opt/sparkforge/venv
    matrix: "{{ sparkforge_ml_packages }}"
    profiles: "{{ sparkforge_ml_profiles }}"
    pins: "{{ sparkforge_ml_package_pins }}"
    profile: training
    arch: "{{ ansible_facts.sparkforge.cpu.arch }}"
    platform_class: "{{ ansible_facts.sparkforge.platform_class }}"
    cuda_major: "{{ sparkforge_cuda_major }}"
  register: ml

- name: Air-gapped, two packages from a local wheel directory
  sparkforge.stack.ml_packages:
    venv: /opt/sparkforge/venv
    matrix: "{{ sparkforge_ml_packages }}"
    packages: [einops, omegaconf]
    no_index: true
    find_links: [/srv/wheels]
"""

RETURN = r"""
packages:
  description: One row per package of the plan, in install order.
  returned: always
  type: list
  elements: dict
  contains:
    name: {description: Matrix name., type: str}
    requirement: {description: The pinned requirement., type: str}
    status:
      description: C(present), C(installed), C(would_install), C(failed) or C(skipped).
      type: str
    version: {description: Installed version afterwards (or the version that would be installed)., type: str}
    version_before: {description: Installed version before the run., type: str}
    method: {description: The matrix method for this host., type: str}
    method_used: {description: How it was (or would be) installed., type: str}
    fallback_taken: {description: True when the source fallback replaced the wheel., type: bool}
    optional: {description: A failure of an optional package does not fail the module., type: bool}
    experimental: {description: The matrix marks this method experimental here., type: bool}
    would_install: {description: Distributions pip installs for it (name==version)., type: list}
    reason: {description: Why it was skipped or failed., type: str}
    caveats: {description: Caveats from the matrix., type: list}
    log: {description: Path of its pip log (with O(log_dir))., type: str}
    build_env: {description: "Arch list forms, force-build flags and job knobs of a GPU source build.", type: dict}
    build_notes: {description: How the job count was sized., type: list}
    fixes: {description: "Fixes applied to the sdist (file, replaced, why).", type: list}
    cxx:
      description:
        - The C++ plan of a GPU source build (module_utils/packages/cxx_std.py) - the torch release and the standard
          its headers require (C(torch_std), C(torch_source)), what the build forces (C(forced), C(flags), the
          C(ignored) ROCm/Windows lines, from the sdist once fetched, else from data), the fixes, the standard it
          ends up with (C(std)), the compiler and C(problems) (non-empty - refused, nothing built).
      type: dict
    build_s: {description: Seconds the GPU source build took (download + build)., type: float}
    build:
      description:
        - How a GPU source build is made here (its arch and force-build variables, the venv's torch, the CUDA release,
          the entry's fixes), kept in the venv's provenance record; when the installed one was built otherwise the
          package is rebuilt and C(reason) says what changed.
      type: dict
    audit:
      description:
        - The arch audit of a built GPU wheel (wheel, targets, ok, note, libraries with sass, ptx, the verdict
          per target, and against the requested arch list the targets C(missing) and C(extra)); a requested target
          missing refuses the wheel, one not asked is reported (refused where the entry's
          C(gpu_build.arch_list_honoured) is true). The link audit holds every shared object of the wheel to this
          host (C(links) per library; C(cuda_libraries), the CUDA libraries and majors found); a CUDA library it
          needs that the host lacks (C(libcudart.so.12) on a CUDA 13 host) or a c10/at/torch symbol the venv's
          torch does not export refuses it. A refused wheel is never installed.
      type: dict
table:
  description: The rows as a plain-text table (for the host report).
  returned: always
  type: str
constraints:
  description: The constraints file content every pip call used.
  returned: always
  type: str
protected_before:
  description: Version, source URL, file count and sha256 of each protected distribution before the run (null if absent).
  returned: always
  type: dict
protected_after:
  description: The same after the run; equal to RV(protected_before) unless the module failed loudly.
  returned: always
  type: dict
protected_unchanged:
  description: True when every protected distribution is byte-identical after the run.
  returned: always
  type: bool
build_prereqs:
  description: Debian/Ubuntu packages the planned source builds need (from the probe).
  returned: always
  type: list
  elements: str
failed_packages:
  description: Names of the packages that failed (optional ones included).
  returned: always
  type: list
  elements: str
report:
  description:
    - What the host report stores; free of run-dependent fields, so a rerun that installs nothing
      gives the same report. C(state) is installed, failed, skipped or would_install; how a package
      already present was installed comes from C(sparkforge-ml-packages.json) in the venv, which the
      module writes after each install.
  returned: always
  type: dict
  contains:
    packages:
      description:
        - One row per package with name, state, version, method, method_used, fallback_taken, optional,
          experimental, reason, caveats, audit (the arch audit of a GPU source build, kept on later runs; else null).
      type: list
    table:
      description: The rows as a plain-text table.
      type: str
    protected:
      description: The protected distributions after the run (version, url, files, sha256).
      type: dict
    failed_packages:
      description: Names of the packages that failed.
      type: list
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import AnsibleSystem, JobError
from ansible_collections.sparkforge.stack.plugins.module_utils.packages.ml_packages_job import MlPackagesJob


# The options (DOCUMENTATION above); the unit tests validate their params against it too.
ARGUMENT_SPEC = dict(
    venv=dict(type="path", required=True),
    matrix=dict(type="dict", required=True),
    profiles=dict(type="dict", default={}),
    pins=dict(type="dict", default={}),
    profile=dict(type="str"),
    packages=dict(type="list", elements="str", default=[]),
    arch=dict(type="str"),
    platform_class=dict(type="str", default="generic"),
    cuda_major=dict(type="int", default=13),
    allow_source_builds=dict(type="bool", default=True),
    protected=dict(type="list", elements="str", default=["torch", "torchvision", "torchaudio", "triton"]),
    index_url=dict(type="str"),
    extra_index_urls=dict(type="list", elements="str", default=[]),
    find_links=dict(type="list", elements="str", default=[]),
    no_index=dict(type="bool", default=False),
    env=dict(type="dict", default={}),
    log_dir=dict(type="path"),
    cuda_arch_list=dict(type="str", default=""),
    audit_targets=dict(type="list", elements="str", default=[]),
    cxx_facts=dict(type="dict", default={}),
    driver_cuda=dict(type="str", default=""),
    ptx_isa=dict(type="dict"),
    build_cpus=dict(type="int"),
    build_memory_gib=dict(type="float"),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    # AnsibleSystem makes the environment the run's own (no PIP_*/PYTHON* of the host: _common/run_env.py).
    job = MlPackagesJob(module.params, AnsibleSystem(module), module.check_mode)
    try:
        result = job.run(diff=module._diff)
    except JobError as exc:
        module.fail_json(**exc.fail_args())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
