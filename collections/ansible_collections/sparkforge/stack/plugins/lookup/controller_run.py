# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lookup controller_run: who this run is, for the run lock (module run_lock)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: controller_run
short_description: this run's controller, ansible-playbook PID and start time, and the controller's live runs
description:
  - Reads, on the controller, the ansible-playbook process this run is (from /proc) and its start time, and every
    ansible-playbook process alive on the controller, for M(sparkforge.stack.run_lock).
options: {}
"""

EXAMPLES = r"""
- name: Who holds the lock this run takes
  ansible.builtin.debug:
    msg: "{{ lookup('sparkforge.stack.controller_run') }}"
"""

RETURN = r"""
_list:
  description: One mapping with C(controller) (hostname), C(pid), C(started) (epoch seconds) and C(live_runs)
    (PID to start time of every ansible-playbook process of the controller).
  type: list
  elements: dict
"""

import socket

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase
from ansible_collections.sparkforge.stack.plugins.module_utils.host.run_lock import playbook_runs, process_start, this_run


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        pid = this_run()
        if pid is None:
            raise AnsibleLookupError("the run lock needs ansible-playbook's process and found none above this one "
                                     "in /proc (run the playbook with ansible-playbook)")
        return [{"controller": socket.gethostname(), "pid": pid, "started": process_start(pid),
                 "live_runs": playbook_runs()}]
