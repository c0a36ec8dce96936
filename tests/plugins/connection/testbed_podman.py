# The test bed's connection: containers.podman.podman with Ansible's pipelining, entering the container's
# namespaces directly.
#
# Users reach their hosts over ssh with pipelining on (ansible.cfg): each task is one remote python
# reading its module on stdin.  The podman plugin cannot pipeline (it runs `podman exec` without -i, so
# stdin never reaches the container) and runs about four `podman exec` per task (mkdir, chmod, the
# module, rm), plus a `podman mount` per connection.  This subclass forwards stdin, so a task is one
# command in the container.  Measured on this project's 2-core machine: 20 `command` tasks took 18.8 s
# through containers.podman.podman, 8.4 s with one `podman exec` a task.
# That command no longer goes through `podman exec` either: the podman CLI costs about 50 ms of CPU a call
# (Go's start, the storage's lock, conmon and runc), 13% of all the CPU the offline-bundle and rollout tests
# used (process accounting, stop 41), on a machine whose two cores the suite keeps busy. As root, the
# command enters the container's mount, UTS, IPC, network and PID namespaces with nsenter(1) and runs with
# the environment the container's first process has (what `podman exec` gives it), in about 3 ms; files
# are copied the same way (cat through the namespaces). A user other than the connection's (remote_user), or
# a caller that is not root, goes through `podman exec` as before. The container's PID comes from
# `podman inspect` once and is kept in a file, checked against the process's start time on every use.
# A test-bed plugin only (tests/, set through ANSIBLE_CONNECTION_PLUGINS by tests/conftest.py and
# .config/molecule/config.yml); the collection never uses it.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = """
    name: testbed_podman
    short_description: Run tasks in a podman container, pipelined (sparkforge's test bed)
    description:
        - The containers.podman.podman connection with stdin forwarded, so Ansible pipelines modules.
        - As root, commands and file copies enter the container's namespaces with nsenter instead of
          C(podman exec); with a remote user, or not root, C(podman exec -i) and C(podman cp).
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

import errno
import os
import shlex
import shutil
import subprocess
import tempfile

from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.module_utils.common.text.converters import to_bytes, to_native
from ansible.plugins.connection import ConnectionBase
from ansible_collections.containers.podman.plugins.connection.podman import Connection as PodmanConnection


# Where each container's PID is kept between tasks (a task is a new connection in a new worker process).
PID_DIR = os.path.join(tempfile.gettempdir(), "sparkforge-testbed-pids")
NSENTER = shutil.which("nsenter")


def _start_time(pid):
    """The process's start time (field 22 of /proc/PID/stat), None when there is no such process."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


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

    def _direct(self):
        return not self.user and NSENTER is not None and os.geteuid() == 0

    def _pid(self):
        """The container's first process, as the host sees it: from the kept file when that process still
        runs (same start time), else from `podman inspect` (then kept)."""
        path = os.path.join(PID_DIR, self._container_id.replace("/", "_"))
        try:
            with open(path) as handle:
                pid, started = handle.read().split()
            if _start_time(int(pid)) == started:
                return int(pid)
        except (OSError, ValueError):
            pass
        rc, out, err = self._podman(["inspect", "--format", "{{.State.Pid}}", "--type", "container"],
                                    use_container_id=True)
        try:
            pid = int(out.strip())
        except ValueError:
            pid = 0
        if rc != 0 or pid <= 0:
            # As ssh finds a host that is down: unreachable, not a failed task.
            raise AnsibleConnectionFailure("container %s is not running%s" % (
                self._container_id, (": " + to_native(err).strip()) if rc != 0 else ""))
        try:
            os.makedirs(PID_DIR, exist_ok=True)
            tmp = "%s.%d" % (path, os.getpid())
            with open(tmp, "w") as handle:
                handle.write("%d %s" % (pid, _start_time(pid)))
            os.rename(tmp, path)
        except OSError as exc:
            if exc.errno not in (errno.EACCES, errno.EROFS):
                raise
        return pid

    def _enter(self, argv, in_data=None):
        """argv run inside the container's namespaces, with its first process's environment: (rc, out, err)."""
        pid = self._pid()
        try:
            with open("/proc/%d/environ" % pid, "rb") as handle:
                env = dict(item.split(b"=", 1) for item in handle.read().split(b"\0") if b"=" in item)
        except OSError as exc:
            raise AnsibleError("container %s: cannot read its environment: %s" % (self._container_id, exc))
        command = [NSENTER, "-t", str(pid), "-m", "-u", "-i", "-n", "-p", "--"] + argv
        proc = subprocess.Popen([to_bytes(a, errors="surrogate_or_strict") for a in command], env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = proc.communicate(input=in_data)
        return proc.returncode, out, err

    def exec_command(self, cmd, in_data=None, sudoable=False):
        ConnectionBase.exec_command(self, cmd, in_data=in_data, sudoable=sudoable)
        argv = shlex.split(to_native(cmd, errors="surrogate_or_strict"))
        if self._direct():
            return self._enter(argv, in_data)
        args = ["exec"] + (["-i"] if in_data is not None else [])
        if self.user:
            args += ["--user", self.user]
        return self._podman(args, argv, in_data)

    def put_file(self, in_path, out_path):
        if not self._direct():
            self._mount()
            return PodmanConnection.put_file(self, in_path, out_path)
        ConnectionBase.put_file(self, in_path, out_path)
        with open(to_bytes(in_path, errors="surrogate_or_strict"), "rb") as handle:
            data = handle.read()
        rc, out, err = self._enter(["/bin/sh", "-c", 'cat > "$0"', out_path], data)
        if rc != 0:
            raise AnsibleError("Failed to copy file from %s to %s in container %s\n%s"
                               % (in_path, out_path, self._container_id, to_native(err)))

    def fetch_file(self, in_path, out_path):
        if not self._direct():
            self._mount()
            return PodmanConnection.fetch_file(self, in_path, out_path)
        ConnectionBase.fetch_file(self, in_path, out_path)
        rc, out, err = self._enter(["/bin/cat", "--", in_path])
        if rc != 0:
            raise AnsibleError("Failed to fetch file from %s to %s from container %s\n%s"
                               % (in_path, out_path, self._container_id, to_native(err)))
        with open(to_bytes(out_path, errors="surrogate_or_strict"), "wb") as handle:
            handle.write(out)
