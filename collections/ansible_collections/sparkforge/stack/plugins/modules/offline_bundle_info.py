#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: offline_bundle_info
short_description: Read an offline bundle's manifest and check every file against it
version_added: "0.5.0"
description:
  - Reads C(manifest.json) of a bundle made by M(sparkforge.stack.offline_bundle) and checks that every
    file it lists is there with its size and sha256, and that the bundle holds no file it does not list.
  - Run it where the bundle is (the controller). Its result is what M(sparkforge.stack.stack_plan)'s
    C(bundle) option takes, so that each host's preflight names any item its plan needs that is missing,
    made for another target, or differs from the manifest.
author:
  - sparkforge developers (@sparkforge)
options:
  path:
    description: The bundle directory.
    type: path
    required: true
  verify:
    description: Hash every file (false only reads the manifest).
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: Reads only.
  diff_mode:
    support: none
    description: Changes nothing.
"""

EXAMPLES = r"""
- name: Check the bundle before any host uses it
  sparkforge.stack.offline_bundle_info:
    path: /srv/sparkforge-bundle
  delegate_to: localhost
  run_once: true
  register: bundle
"""

RETURN = r"""
manifest:
  description: The manifest (format, made, targets, plans, sources, items).
  returned: success
  type: dict
bad:
  description:
    - Files that are missing or whose size or sha256 differ from the manifest, and files under the bundle that
      the manifest does not list, each with C(path) and C(problem).
  returned: success
  type: list
  elements: dict
targets:
  description: The targets (CUDA distro, Debian architecture, Python) the bundle was made for, by id.
  returned: success
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import bundle


def main():
    module = AnsibleModule(argument_spec=dict(path=dict(type="path", required=True),
                                              verify=dict(type="bool", default=True)),
                           supports_check_mode=True)
    try:
        manifest = bundle.load_manifest(module.params["path"])
    except bundle.BundleError as exc:
        module.fail_json(msg=str(exc))
    bad = bundle.verify(module.params["path"], manifest) if module.params["verify"] else []
    module.exit_json(changed=False, manifest=manifest, bad=bad,
                     targets=[t["id"] for t in manifest.get("targets") or []])


if __name__ == "__main__":
    main()
