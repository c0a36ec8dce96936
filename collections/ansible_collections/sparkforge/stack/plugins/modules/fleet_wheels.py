#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fleet_wheels
short_description: List a platform class's wheels on its builder, with the wheels they depend on
version_added: "0.2.0"
description:
  - Runs on a class's builder after the build roles. Takes the results of M(sparkforge.stack.triton_llvm_build)
    and M(sparkforge.stack.pytorch_wheel_build) the directory of the domain library wheels and the GPU packages of
    M(sparkforge.stack.heavy_wheel_build), and lists the class's artifacts in install order (Triton, torch, the
    domain libraries, the GPU packages).
  - Resolves the wheels those artifacts depend on with C(pip wheel) (the builder's index or mirror, see
    O(pip_env)) into O(dependencies_dir)/<key>/, keyed by the artifacts' sha256, so the class's other hosts
    install everything without an index. An unchanged set of artifacts reuses the last resolution; a new one
    resolves into a temporary directory that is renamed into place only when pip succeeded.
  - Returns each wheel with its sha256 and the wheelhouse directory it is published in
    (<class id>/<name>-<cache key>/).
author:
  - sparkforge developers (@sparkforge)
options:
  triton:
    description: The registered result of M(sparkforge.stack.triton_llvm_build) (C(wheel), C(cache_key), C(built)).
    type: dict
  torch:
    description: The registered result of M(sparkforge.stack.pytorch_wheel_build) (C(wheel), C(cache_key), C(changed)).
    type: dict
  domains:
    description:
      - The domain library wheels - C(dir) (where they were built), C(key) (what that directory is keyed by),
        C(libraries) (name to version; exactly one wheel of each must be in C(dir)) and C(built) (names whose
        build ran in this run).
    type: dict
  heavy:
    description:
      - The GPU packages built on the builder, as M(sparkforge.stack.heavy_wheel_build) returns them in C(wheels)
        (C(name), C(wheel), C(cache_key), C(changed), C(module)); listed after the domain libraries. Only wheels that
        passed the builder's arch audit are published, so only those can be listed.
    type: list
    elements: dict
  dependencies_dir:
    description: Where dependency sets are resolved, one subdirectory per set of artifacts.
    type: path
    required: true
  python:
    description: The Python whose pip resolves the dependencies (the builder's stack venv).
    type: path
    required: true
  pip_env:
    description: Environment for pip (C(PIP_INDEX_URL), C(PIP_FIND_LINKS), proxies).
    type: dict
    default: {}
  rehash:
    description:
      - Read every wheel's bytes again. By default a wheel whose size and mtime match the last run's reuses the
        sha256 recorded then, in C(.sparkforge-sha256.json) next to it, so a no-op rerun does not read
        gigabytes of wheels.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Lists the wheels and says whether a resolution would run; runs no pip.
  diff_mode:
    support: none
    description: Nothing to compare.
"""

EXAMPLES = r"""
- name: List the class's wheels and resolve what they depend on
  sparkforge.stack.fleet_wheels:
    triton: "{{ triton_build_result }}"
    torch: "{{ pytorch_build }}"
    domains:
      dir: /var/cache/sparkforge/wheels/domains/0123456789abcdef
      key: 0123456789abcdef
      libraries: {torchvision: 0.26.0, torchaudio: 2.11.0}
      built: [torchvision]
    dependencies_dir: /var/cache/sparkforge/wheels/deps
    python: /opt/sparkforge/venv/bin/python
  register: fleet_build_wheels
"""

RETURN = r"""
wheels:
  description:
    - The class's wheels, artifacts first - name, kind (C(artifact) or C(dependency)), dir, file, path, sha256,
      cache_key, manifest (an artifact's build record - a GPU package's carries its audit, sdist, arch list, CUDA
      and the torch it was built against), module (an import name that differs from the name).
  returned: always
  type: list
  elements: dict
builds:
  description: Names of the artifacts whose build ran in this run.
  returned: always
  type: list
  elements: str
dependencies_dir:
  description: The directory of this artifact set's dependency wheels (null without artifacts).
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import fleet_wheels as fw
from ansible_collections.sparkforge.stack.plugins.module_utils._common import run_env


def main():
    module = AnsibleModule(
        argument_spec=dict(
            triton=dict(type="dict"),
            torch=dict(type="dict"),
            domains=dict(type="dict"),
            heavy=dict(type="list", elements="dict"),
            dependencies_dir=dict(type="path", required=True),
            python=dict(type="path", required=True),
            pip_env=dict(type="dict", default={}),
            rehash=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    # The venv's python runs in the run's own environment: no PYTHON*/PIP_* of the host (_common/run_env.py).
    run_env.scrub()
    p = module.params

    def run(argv, env):
        return module.run_command(argv, environ_update=dict((str(k), str(v)) for k, v in env.items()))

    # An unchanged wheel's sha256 comes from the cache next to it (same size and mtime).
    hashes = fw.Hashes(rehash=p["rehash"], write=not module.check_mode)
    try:
        artifacts = fw.build_artifacts(p["triton"], p["torch"], p["domains"], p["heavy"])
        deps_dir, deps, resolved = fw.resolve_dependencies(run, p["python"], p["dependencies_dir"], artifacts,
                                                           p["pip_env"], module.check_mode, hashes)
        wheels = fw.describe(artifacts + deps, hashes)
        hashes.save()
    except (fw.FleetWheelError, IOError, OSError) as exc:
        module.fail_json(msg=str(exc))
    # The wheels already exist; only a new dependency resolution writes anything.
    module.exit_json(changed=resolved, wheels=wheels, dependencies_dir=deps_dir,
                     builds=[a["name"] for a in artifacts if a["built"]])


if __name__ == "__main__":
    main()
