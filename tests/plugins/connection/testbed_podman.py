# The test bed's connection: containers.podman.podman with Ansible's pipelining.
#
# Users reach their hosts over ssh with pipelining on (ansible.cfg): each task is one remote python
# reading its module on stdin.  The podman plugin cannot pipeline (it runs `podman exec` without -i, so
# stdin never reaches the container) and runs about four `podman exec` per task (mkdir, chmod, the
# module, rm), plus a `podman mount` per connection.  This subclass forwards stdin, so a task is one
# `podman exec`, and mounts the container only when a file is copied.  Measured on this project's
# 2-core machine: 20 `command` tasks took 18.8 s through containers.podman.podman, 8.4 s through this.
# A test-bed plugin only (tests/, set through ANSIBLE_CONNECTION_PLUGINS by tests/conftest.py and
# .config/molecule/config.yml); the collection never uses it.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = """
    name: testbed_podman
    short_description: Run tasks in a podman container, pipelined (sparkforge's test bed)
    description:
        - The containers.podman.podman connection with stdin forwarded to C(podman exec -i), so Ansible
          pipelines modules, and the container's filesystem mounted only when a file is copied.
    options:
      remote_addr:
        description: The container's name or ID.
        default: inventory_hostname
        vars:
          - name: ansible_host
          - name: inventory_hostname
          - name: ansible_podman_host
      remote_user:
        description: The user commands run as inside the container.
        env:
          - name: ANSIBLE_REMOTE_USER
        vars:
          - name: ansible_user
      podman_extra_args:
        description: Extra arguments for the podman command line.
        default: ''
        vars:
          - name: ansible_podman_extra_args
        env:
          - name: ANSIBLE_PODMAN_EXTRA_ARGS
      podman_executable:
        description: The podman executable.
        default: podman
        vars:
          - name: ansible_podman_executable
        env:
          - name: ANSIBLE_PODMAN_EXECUTABLE
      pipelining:
        description: Pipeline modules through stdin (on in the test bed, as ansible.cfg sets it for ssh).
        type: boolean
        default: true
        env:
          - name: ANSIBLE_PIPELINING
        ini:
          - section: connection
            key: pipelining
          - section: ssh_connection
            key: pipelining
        vars:
          - name: ansible_pipelining
"""

import shlex

from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.connection import ConnectionBase
from ansible_collections.containers.podman.plugins.connection.podman import Connection as PodmanConnection


class Connection(PodmanConnection):
    transport = "testbed_podman"
    has_pipelining = True

    def _connect(self):
        # No `podman mount` here: a pipelined task copies no file.
        ConnectionBase._connect(self)
        self._connected = True
        return self

    def _mount(self):
        if self._mount_point is None:
            PodmanConnection._connect(self)

    def exec_command(self, cmd, in_data=None, sudoable=False):
        ConnectionBase.exec_command(self, cmd, in_data=in_data, sudoable=sudoable)
        args = ["exec"] + (["-i"] if in_data is not None else [])
        if self.user:
            args += ["--user", self.user]
        return self._podman(args, shlex.split(to_native(cmd, errors="surrogate_or_strict")), in_data)

    def put_file(self, in_path, out_path):
        self._mount()
        return PodmanConnection.put_file(self, in_path, out_path)

    def fetch_file(self, in_path, out_path):
        self._mount()
        return PodmanConnection.fetch_file(self, in_path, out_path)
