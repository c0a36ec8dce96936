#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: wheel_diff
short_description: Say which files of two wheels differ, and how
version_added: "0.1.0"
description:
  - Compares two wheels (or any two zip archives) member by member, for example two builds of the same
    cache key that should be byte-identical, or the wheel a host has against the one the builder published.
  - Lists the members only one wheel has, and for each member whose bytes differ its kind (C(elf), C(text)
    or C(binary)), both sizes and sha256s and the first differing offset. For ELF libraries it lists the
    sections that differ, and for string tables the names only one side has (an nvcc temporary file name
    or a build path shows there). For text members it gives the unified diff.
  - Archive-level differences (entry order, entry times, modes, compression) are listed separately in
    RV(zip). They change a wheel's sha256 but not what gets installed.
  - Reads only; never changes the host.
author:
  - sparkforge developers (@sparkforge)
options:
  a:
    description: The first wheel.
    type: path
    required: true
  b:
    description: The second wheel.
    type: path
    required: true
  max_lines:
    description: At most this many diff lines per text member and names per string table.
    type: int
    default: 20
  fail_on_difference:
    description:
      - Fail when the two wheels are not byte-identical (for a gate in a playbook).
    type: bool
    default: false
attributes:
  check_mode:
    description: The module only reads; check mode returns the same result.
    support: full
  diff_mode:
    description: Not supported (nothing changes).
    support: none
notes:
  - Members whose CRC-32 and size agree are taken as equal without being read, so two large wheels that
    differ in one library cost about one library's read.
"""

EXAMPLES = r"""
- name: Two builders built the same cache key; are the wheels the same?
  sparkforge.stack.wheel_diff:
    a: /srv/wheelhouse/builder1/torch-2.15.0-cp312-cp312-linux_aarch64.whl
    b: /srv/wheelhouse/builder2/torch-2.15.0-cp312-cp312-linux_aarch64.whl
    fail_on_difference: true
  register: same

- name: Where they differ
  ansible.builtin.debug:
    var: same.summary
"""

RETURN = r"""
identical:
  description: Whether the two files are byte-identical.
  returned: always
  type: bool
same_contents:
  description: Whether every member has the same bytes (the archives may still differ in order, times or modes).
  returned: always
  type: bool
sha256:
  description: The sha256 of O(a) and of O(b).
  returned: always
  type: list
  elements: str
only_in_a:
  description: Members only O(a) has.
  returned: always
  type: list
  elements: str
only_in_b:
  description: Members only O(b) has.
  returned: always
  type: list
  elements: str
differ:
  description: One entry per member whose bytes differ.
  returned: always
  type: list
  elements: dict
  contains:
    member:
      description: The member's name in the archive.
      type: str
    kind:
      description: C(elf), C(text) or C(binary).
      type: str
    size:
      description: Its size in O(a) and in O(b).
      type: list
      elements: int
    sha256:
      description: Its sha256 in O(a) and in O(b).
      type: list
      elements: str
    first_difference:
      description: The first byte offset at which the two differ.
      type: int
    sections:
      description: For ELF members, the sections that differ (name, sizes, first differing offset in the
        section, and for string tables C(strings_only_in_a)/C(strings_only_in_b)).
      type: list
      elements: dict
    lines:
      description: For text members, the unified diff (at most O(max_lines) lines).
      type: list
      elements: str
zip:
  description: Archive-level differences, each with C(member), C(field) (C(order), C(date_time), C(mode),
    C(compress_type)), C(a) and C(b).
  returned: always
  type: list
  elements: dict
summary:
  description: One line per difference, for a person.
  returned: always
  type: list
  elements: str
  sample: ["differs: torch/lib/libtorch_cuda.so (elf, 1024 vs 1024 bytes): sections .strtab"]
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkforge.stack.plugins.module_utils.build import repro

ARGUMENT_SPEC = dict(
    a=dict(type="path", required=True),
    b=dict(type="path", required=True),
    max_lines=dict(type="int", default=20),
    fail_on_difference=dict(type="bool", default=False),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    p = module.params
    if p["max_lines"] < 1:
        module.fail_json(msg="max_lines must be at least 1, got %d" % p["max_lines"])
    for side in ("a", "b"):
        if not os.path.isfile(p[side]):
            module.fail_json(msg="%s: %s is not a file" % (side, p[side]))
    try:
        diff = repro.diff_wheels(p["a"], p["b"], max_lines=p["max_lines"])
    except repro.ReproError as exc:
        module.fail_json(msg=str(exc))
    diff["summary"] = repro.summarize(diff)
    if p["fail_on_difference"] and not diff["identical"]:
        module.fail_json(msg="the wheels differ: %s" % "; ".join(diff["summary"]), changed=False, **diff)
    module.exit_json(changed=False, **diff)


if __name__ == "__main__":
    main()
