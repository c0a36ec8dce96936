#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: cuda_libs_present
short_description: What a host already has of the CUDA math libraries and the build prerequisites
version_added: "0.3.0"
description:
  - For each library group (cuBLAS, cuDNN, NCCL, cuFile), whether the host already has it - by dpkg (every package
    of the group installed at a version the manifest's pattern accepts) or by files (its header and library in the
    CUDA toolkit's, the distribution's or the linker's directories, for hosts whose CUDA no apt source knows, such
    as runfile installs) - and where its library and headers are.
  - Whether the build prerequisites are installed (dpkg).
  - The C(cuda_libs) role reads it first and, when everything is there, adds no apt source, downloads nothing and
    installs nothing.
  - Reads only.
author:
  - sparkforge developers (@sparkforge)
options:
  groups:
    description: Library groups to look for (keys of I(packages)).
    type: list
    elements: str
    required: true
  packages:
    description: The manifest's C(sparkforge_cuda_libs_packages) (group -> packages and version pattern).
    type: dict
    required: true
  paths:
    description: Group -> C(library) and C(include_dir) where the manifest's packages put them (triplet filled in).
    type: dict
    default: {}
  cuda_home:
    description: The CUDA toolkit root, searched for headers and libraries.
    type: path
    default: /usr/local/cuda
  triplet:
    description: Multiarch triplet of the library directories (C(aarch64-linux-gnu)).
    type: str
    required: true
  targets:
    description: CUDA's targets directory name (C(sbsa-linux), C(x86_64-linux)).
    type: str
    required: true
  build_packages:
    description: Build prerequisites to look for in dpkg.
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: full
    description: Reads only.
  diff_mode:
    support: none
    description: Nothing to diff.
"""

EXAMPLES = r"""
- name: Look for the CUDA math libraries the host already has
  sparkforge.stack.cuda_libs_present:
    groups: [cublas, cudnn, nccl]
    packages: "{{ sparkforge_cuda_libs_packages }}"
    paths: "{{ _cuda_libs_paths }}"
    cuda_home: /usr/local/cuda
    triplet: aarch64-linux-gnu
    targets: sbsa-linux
    build_packages: [build-essential, cmake]
  register: present
"""

RETURN = r"""
groups:
  description: Per group - satisfied, by (C(dpkg), C(files) or null), packages (name -> installed version or null),
    library, include_dir.
  returned: always
  type: dict
paths:
  description: Group -> C(library) and C(include_dir) (where they are, or where the manifest's packages put them).
  returned: always
  type: dict
libraries_satisfied:
  description: Every group is there.
  returned: always
  type: bool
build_packages_missing:
  description: Build prerequisites that dpkg does not list as installed.
  returned: always
  type: list
  elements: str
missing:
  description: Groups that are not there.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import cuda_present


def main():
    module = AnsibleModule(
        argument_spec=dict(
            groups=dict(type="list", elements="str", required=True),
            packages=dict(type="dict", required=True),
            paths=dict(type="dict", default={}),
            cuda_home=dict(type="path", default="/usr/local/cuda"),
            triplet=dict(type="str", required=True),
            targets=dict(type="str", required=True),
            build_packages=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    unknown = [g for g in p["groups"] if g not in p["packages"]]
    if unknown:
        module.fail_json(msg="unknown library group(s) %s; the manifest knows %s"
                         % (", ".join(unknown), ", ".join(sorted(p["packages"]))))
    names = sorted(set(n for g in p["groups"] for n in p["packages"][g].get("packages") or []) | set(p["build_packages"]))
    installed = {}
    dpkg = module.get_bin_path("dpkg-query")
    if dpkg and names:
        # Exit 1 when some package is unknown to dpkg: its lines are simply absent.
        rc, out, err = module.run_command([dpkg, "-W", "-f", "${Package}\\t${Version}\\t${db:Status-Abbrev}\\n"] + names)
        installed = cuda_present.parse_dpkg(out)
    groups = cuda_present.assess(p["groups"], p["packages"], p["paths"], installed, p["cuda_home"], p["triplet"],
                                 p["targets"])
    missing = [g for g in p["groups"] if not groups[g]["satisfied"]]
    module.exit_json(changed=False, groups=groups, libraries_satisfied=not missing, missing=missing,
                     paths=dict((g, {"library": groups[g]["library"], "include_dir": groups[g]["include_dir"]})
                                for g in p["groups"]),
                     build_packages_missing=[n for n in p["build_packages"] if n not in installed])


if __name__ == "__main__":
    main()
