#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: cusparselt_repo
short_description: Install NVIDIA cuSPARSELt from its local-repo .deb, verified and idempotent
version_added: "0.1.0"
description:
  - Installs cuSPARSELt the way NVIDIA distributes it up to 0.8.x, a local apt repository packed in
    C(cusparselt-local-repo-<distro>-<version>_<version>-1_<arch>.deb).
  - Downloads that .deb over verified TLS (proxies from the environment), checks its sha256 when
    O(checksum) is given (a mismatch fails before anything is installed), checks that its repository holds
    the wanted packages, installs it with C(dpkg -i), copies the repository's keyring to
    C(/usr/share/keyrings/), makes the repository's apt source use C(signed-by) with that keyring,
    runs C(apt-get update) for that one source only, installs the packages and refreshes the linker cache.
  - Package names follow the CUDA major, C(libcusparselt0-cuda-13) and C(libcusparselt0-dev-cuda-13) when the
    repository has them, else the generic C(libcusparselt0) and C(libcusparselt0-dev).
  - Before acting it probes the host (repository package at that version, keyring, signed source, packages,
    linker cache); when all is in place nothing is downloaded and RV(ignore:changed) is false.
  - O(state=absent) removes the packages that came from that repository, purges the local-repo package and
    removes its source, keyring, repository directory, apt lists and the linker configuration the module wrote.
author:
  - sparkforge developers (@sparkforge)
options:
  version:
    description: cuSPARSELt release, for example C(0.8.1).
    type: str
    required: true
  state:
    description: Whether cuSPARSELt from that local repo should be installed or removed.
    type: str
    choices: [present, absent]
    default: present
  distro:
    description:
      - NVIDIA's name of the distribution, V(ubuntu2404), V(ubuntu2204) or V(debian12).
      - Default is taken from C(/etc/os-release) of the host.
    type: str
  arch:
    description:
      - Debian architecture of the .deb, V(arm64) or V(amd64) (V(aarch64), V(sbsa) and V(x86_64) are accepted).
      - Default is the host's C(dpkg --print-architecture).
    type: str
  base_url:
    description:
      - URL of the directory that holds the .deb. C({version}) in it is replaced by O(version).
      - Point it at a mirror for air-gapped sites.
    type: str
    default: https://developer.download.nvidia.com/compute/cusparselt/{version}/local_installers/
  checksum:
    description:
      - Expected C(sha256:<hex>) of the .deb. A mismatch fails before anything is installed.
      - Without it the .deb is only checked for its package name and version (a warning says so).
    type: str
  cuda_major:
    description:
      - CUDA major whose packages to install. Default is detected from C(nvcc --version), else O(fallback_cuda_major).
    type: int
  fallback_cuda_major:
    description: CUDA major to use when O(cuda_major) is not set and no C(nvcc) is found.
    type: int
    default: 13
  nvcc:
    description: Path of C(nvcc) for the CUDA major detection. Default is C(nvcc) in C(PATH) or C(/usr/local/cuda/bin).
    type: path
  packages:
    description:
      - Packages to install from the repository. V(runtime) and V(dev) stand for the runtime and development
        packages (CUDA-major-suffixed names when the repository has them, else the generic names); any other
        entry is a package name that the repository must hold.
    type: list
    elements: str
    default: [runtime, dev]
  download_dir:
    description:
      - Where to keep the downloaded .deb. A .deb already there with the expected checksum is used without downloading;
        without O(checksum) it is downloaded again (a kept file is proven only by its checksum).
      - Default is a temporary directory that is removed afterwards.
    type: path
  validate_certs:
    description: Verify the server's TLS certificate. Leave it on; use a mirror you trust rather than turning it off.
    type: bool
    default: true
  timeout:
    description: Seconds to wait for the download server.
    type: int
    default: 60
  lock_timeout:
    description:
      - Seconds to wait for another apt or dpkg run to release the dpkg lock before failing.
    type: int
    default: 300
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: In check mode a missing .deb is downloaded to a temporary directory, verified and read for its
      package list, then deleted, so the plan names the exact packages; nothing on the host changes.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: full
    details: The diff lists the packages (with versions) and the files the module adds or removes.
notes:
  - From cuSPARSELt 0.9.0 NVIDIA publishes the packages in the CUDA network repository; this module is for the
    local-repo releases.
  - The paths it returns are what PyTorch's build reads as C(CUSPARSELT_INCLUDE_DIR), C(CUSPARSELT_LIBRARY) and
    C(CUSPARSELT_ROOT_DIR).
requirements:
  - apt, dpkg and ldconfig on the target (Debian or Ubuntu).
"""

EXAMPLES = r"""
- name: Install cuSPARSELt 0.8.1 for CUDA 13 (pinned checksum)
  sparkforge.stack.cusparselt_repo:
    version: "0.8.1"
    checksum: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
    cuda_major: 13
  register: cusparselt

- name: Show what PyTorch's build needs
  ansible.builtin.debug:
    msg: "CUSPARSELT_INCLUDE_DIR={{ cusparselt.include_dir }} CUSPARSELT_LIBRARY={{ cusparselt.library }}"

- name: Install from an internal mirror, keeping the .deb
  sparkforge.stack.cusparselt_repo:
    version: "0.8.1"
    base_url: "https://mirror.example.org/nvidia/cusparselt/{version}/"
    download_dir: /var/cache/sparkforge

- name: Remove it again
  sparkforge.stack.cusparselt_repo:
    version: "0.8.1"
    state: absent
"""

RETURN = r"""
repo_dir:
  description: Directory of the local apt repository.
  returned: always
  type: str
  sample: /var/cusparselt-local-repo-ubuntu2404-0.8.1
keyring:
  description: Keyring the apt source is signed by (in C(/usr/share/keyrings)); null when unknown.
  returned: always
  type: str
  sample: /usr/share/keyrings/cusparselt-local-0A1B2C3D-keyring.gpg
source_file:
  description: The apt source file for the repository; null when there is none.
  returned: always
  type: str
  sample: /etc/apt/sources.list.d/cusparselt-local-ubuntu2404-0.8.1.list
packages:
  description: The cuSPARSELt packages with their installed versions (null when not installed, as in check mode).
  returned: always
  type: list
  elements: dict
  sample: [{name: libcusparselt0-cuda-13, version: 0.8.1.1-1}, {name: libcusparselt0-dev-cuda-13, version: 0.8.1.1-1}]
include_dir:
  description: Directory of C(cusparseLt.h) (C(CUSPARSELT_INCLUDE_DIR)); null when not installed.
  returned: always
  type: str
  sample: /usr/include/libcusparseLt/13
library:
  description: Path of C(libcusparseLt.so) (C(CUSPARSELT_LIBRARY)); null when not installed.
  returned: always
  type: str
  sample: /usr/lib/aarch64-linux-gnu/libcusparseLt/13/libcusparseLt.so
root_dir:
  description: Prefix holding the include directory (C(CUSPARSELT_ROOT_DIR)); null when not installed.
  returned: always
  type: str
  sample: /usr
cuda_major:
  description: The CUDA major the packages were chosen for.
  returned: always
  type: int
  sample: 13
cuda_major_source:
  description: Where RV(cuda_major) came from, V(option), V(nvcc) or V(fallback).
  returned: always
  type: str
  sample: nvcc
url:
  description: URL of the local-repo .deb.
  returned: always
  type: str
  sample: https://developer.download.nvidia.com/compute/cusparselt/0.8.1/local_installers/cusparselt-local-repo-ubuntu2404-0.8.1_0.8.1-1_arm64.deb
downloaded:
  description: Whether the .deb was downloaded in this run.
  returned: always
  type: bool
  sample: false
actions:
  description: What the module did, or would do in check mode, and why.
  returned: always
  type: list
  elements: str
  sample: ["install cusparselt-local-repo-ubuntu2404-0.8.1 0.8.1-1 (not installed)"]
distro:
  description: The distro name used.
  returned: always
  type: str
  sample: ubuntu2404
arch:
  description: The Debian architecture used.
  returned: always
  type: str
  sample: arm64
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import fetch_url
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import cusparselt as cl
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda.cusparselt_job import CusparseltJob
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import AnsibleSystem, JobError


# The options (DOCUMENTATION above); the unit tests validate their params against it too.
ARGUMENT_SPEC = dict(
    version=dict(type="str", required=True),
    state=dict(type="str", choices=["present", "absent"], default="present"),
    distro=dict(type="str"),
    arch=dict(type="str"),
    base_url=dict(type="str", default=cl.DEFAULT_BASE_URL),
    checksum=dict(type="str"),
    cuda_major=dict(type="int"),
    fallback_cuda_major=dict(type="int", default=13),
    nvcc=dict(type="path"),
    packages=dict(type="list", elements="str", default=["runtime", "dev"]),
    download_dir=dict(type="path"),
    validate_certs=dict(type="bool", default=True),
    timeout=dict(type="int", default=60),
    lock_timeout=dict(type="int", default=300),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    # The host through Ansible: run_command, and fetch_url (TLS verified unless validate_certs: false,
    # proxy environment honoured).
    job = CusparseltJob(module.params, AnsibleSystem(module, fetch_url), module.check_mode)
    try:
        res = job.run(diff=module._diff)
    except JobError as exc:
        module.fail_json(**exc.fail_args())
    module.exit_json(**res)


if __name__ == "__main__":
    main()
