#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: run_lock
short_description: One sparkforge run at a time on a host (take or release the run lock)
version_added: "0.5.0"
description:
  - With O(state=present), takes the lock file O(path) for this run, or fails naming the run that holds it (its
    ansible-playbook PID, controller, start time and run id). Nothing else on the host changes when it fails.
  - A stale lock is taken over, and the result's RV(taken_over) says why. Stale means, for a lock taken from this
    controller, that no ansible-playbook process of O(live_runs) has its PID with its start time; for one taken
    from another controller, that it was taken more than O(lease) seconds ago by the host's clock.
  - Taking is atomic (the record is written aside and hard-linked to O(path)), so of two runs starting together
    exactly one wins.
  - With O(state=absent), removes the lock when this run holds it; a lock of another run is left alone.
  - A file at O(path) that is not a run lock (another text, not written by sparkforge) is never removed nor taken
    over - the module fails naming it (its mode, owner and size, never its text). An empty one (a lock whose text a
    power loss kept from the disk) is taken over as stale.
author:
  - sparkforge developers (@sparkforge)
options:
  path:
    description: The lock file (absolute).
    type: path
    required: true
  state:
    description: Take (V(present)) or release (V(absent)) the lock.
    type: str
    choices: [present, absent]
    default: present
  owner:
    description: This run, from the lookup C(sparkforge.stack.controller_run) and the run id.
    type: dict
    required: true
    suboptions:
      controller:
        description: The controller's hostname.
        type: str
        required: true
      pid:
        description: The ansible-playbook process's PID.
        type: int
        required: true
      started:
        description: That process's start time (epoch seconds).
        type: int
        required: true
      run_id:
        description: The run id.
        type: str
        required: true
  live_runs:
    description: The controller's live ansible-playbook processes, PID to start time.
    type: dict
    default: {}
  lease:
    description: Seconds after which a lock taken from another controller is stale.
    type: int
    default: 86400
attributes:
  check_mode:
    support: full
    description: Takes and releases nothing; fails, as the real run would, when a live run holds the lock.
  diff_mode:
    support: none
    description: Not supported.
"""

EXAMPLES = r"""
- name: Take the run lock
  sparkforge.stack.run_lock:
    path: /var/lock/sparkforge.lock
    owner:
      controller: ctl
      pid: 4242
      started: 1764363000
      run_id: ctl-4242-1764363000
    live_runs: {"4242": 1764363000}
"""

RETURN = r"""
path:
  description: The lock file.
  returned: always
  type: str
holder:
  description: The lock's holder before this call (null when there was none).
  returned: always
  type: dict
taken_over:
  description: Why the lock taken over was stale; empty when none was.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import AnsibleSystem, JobError
from ansible_collections.sparkforge.stack.plugins.module_utils.host.run_lock import RunLockJob


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            owner=dict(type="dict", required=True, options=dict(
                controller=dict(type="str", required=True),
                pid=dict(type="int", required=True),
                started=dict(type="int", required=True),
                run_id=dict(type="str", required=True),
            )),
            live_runs=dict(type="dict", default={}),
            lease=dict(type="int", default=86400),
        ),
        supports_check_mode=True,
    )
    try:
        result = RunLockJob(module.params, AnsibleSystem(module), module.check_mode).run()
    except JobError as exc:
        module.fail_json(**exc.fail_args())
    except OSError as exc:
        module.fail_json(msg="the run lock %s: %s" % (module.params["path"], exc), path=module.params["path"])
    if result.get("taken_over"):
        module.warn(result["msg"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
