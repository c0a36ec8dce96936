# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading a host: its GPUs, CPU, memory and disk (sparkforge's facts) and its OS and Python.

Shared by gpu_facts and stack_plan, so that preflight reads a host in one module call instead of
three (a remote call per task is what a fleet run pays per host).  The OS and Python facts come
from ansible-core's own fact collectors, so they are the values `setup` would return.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import platform
import pwd
import subprocess

from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import read_meminfo
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import ptx_isa
from ansible_collections.sparkforge.stack.plugins.module_utils.host.host_paths import filesystem_problem
from ansible_collections.sparkforge.stack.plugins.module_utils.host.platforms import (
    QUERY_FIELDS,
    FactsError,
    parse_cpuinfo,
    parse_nvidia_smi_csv,
    platform_rows,
    summarize,
)


def disk_free(path, statvfs=os.statvfs, device_of=None):
    """Free and total MiB at ``path``, or at its nearest existing parent when it does not exist yet, and the
    file system's device (st_dev: places on one device share its free space).  ``statvfs`` and
    ``device_of`` are the host's (tests give stand-in figures per device)."""
    probe = os.path.abspath(path)
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    stat = statvfs(probe)
    mib = 1024 * 1024
    out = {
        "measured_at": probe,
        "free_mib": stat.f_bavail * stat.f_frsize // mib,
        "total_mib": stat.f_blocks * stat.f_frsize // mib,
        "device": (device_of or (lambda p: os.stat(p).st_dev))(probe),
    }
    # A kernel or read-only file system reports no free space; the plan names that, not the space.
    unwritable = filesystem_problem(probe)
    if unwritable:
        out["unwritable"] = unwritable
    return out


def query_gpus(module, nvidia_smi, timeout, platforms):
    """(path of nvidia-smi or None, list of GPU dicts, error or None); ``platforms`` classifies the GPUs."""
    path = nvidia_smi if os.path.sep in nvidia_smi else module.get_bin_path(
        nvidia_smi, opt_dirs=["/usr/bin", "/usr/local/bin"])
    if not path or not os.access(path, os.X_OK):
        return None, [], (
            "nvidia-smi not found (looked for %r): install the NVIDIA driver (580 or newer for Blackwell, "
            "e.g. nvidia-open-580 on Ubuntu) or set nvidia_smi to its path" % nvidia_smi)
    cmd = [path, "--query-gpu=%s" % ",".join(QUERY_FIELDS), "--format=csv,nounits"]
    env = dict(os.environ, LC_ALL="C")
    try:
        proc = subprocess.run(cmd, check=False, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                              timeout=timeout, universal_newlines=True)
    except subprocess.TimeoutExpired:
        return path, [], "%s did not answer within %ds: the driver may be hung" % (path, timeout)
    out = proc.stdout
    if proc.returncode != 0:
        return path, [], "%s exited %d: %s" % (" ".join(cmd), proc.returncode, (proc.stderr or out).strip())
    try:
        return path, parse_nvidia_smi_csv(out, platforms), None
    except FactsError as exc:
        return path, [], "could not read nvidia-smi output: %s" % exc


def driver_cuda(path, timeout):
    """The driver's CUDA release from nvidia-smi's banner ("CUDA Version: 13.0"), or None where it prints none:
    what the PTX audit holds PTX-only libraries to (cuda/ptx_isa.py)."""
    try:
        proc = subprocess.run([path], check=False, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=dict(os.environ, LC_ALL="C"), timeout=timeout, universal_newlines=True)
    except (subprocess.TimeoutExpired, OSError):
        return None
    return ptx_isa.smi_cuda(proc.stdout) if proc.returncode == 0 else None


def sparkforge_facts(module, nvidia_smi, disk_paths, timeout, required, platforms):
    """The ``ansible_facts.sparkforge`` dict; fails the module when the GPU read is required and fails.

    ``platforms`` is the manifest's sparkforge_gpu_platforms (each row's match and class): a table that cannot
    classify fails the module whether or not the GPU is required (it is the caller's input, not the host's)."""
    try:
        platform_rows(platforms)
    except FactsError as exc:
        module.fail_json(msg=str(exc))
    path, gpus, error = query_gpus(module, nvidia_smi, timeout, platforms)
    if error is None and not gpus:
        error = "nvidia-smi (%s) lists no GPU: check that the driver is loaded (lsmod | grep nvidia)" % path
    if error and required:
        module.fail_json(msg=error, nvidia_smi=path)
    try:
        with open("/proc/cpuinfo") as handle:
            cpu = parse_cpuinfo(handle.read())
        mem = read_meminfo()
    except (IOError, OSError) as exc:
        module.fail_json(msg="cannot read CPU/memory information: %s" % exc)
    facts = summarize(gpus, cpu, platform.machine(), mem, path)
    facts["gpu_error"] = error
    facts["driver_cuda"] = driver_cuda(path, timeout) if gpus else None
    facts["disk"] = dict((p, disk_free(p)) for p in disk_paths if p)
    facts["user"] = process_user()
    return facts


def process_user():
    """The user this module runs as ({uid, name}): root when the connection is root or become works."""
    uid = os.geteuid()
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:  # a uid without a passwd entry (a container's arbitrary uid)
        name = "uid %d" % uid
    return {"uid": uid, "name": name}


def os_facts(module):
    """What `setup` with gather_subset distribution, python and platform returns (without `ansible_`)."""
    # Imported here: the fact collectors (about 50 ms of CPU on an x86 host) are for stack_plan alone, and
    # gpu_facts and wheel_arch_audit import this file too.
    # pylint: disable=import-outside-toplevel
    from ansible.module_utils.facts.system.distribution import DistributionFactCollector
    from ansible.module_utils.facts.system.platform import PlatformFactCollector
    from ansible.module_utils.facts.system.python import PythonFactCollector
    facts = {}
    for collector in (PlatformFactCollector(), DistributionFactCollector(), PythonFactCollector()):
        facts.update(collector.collect(module=module, collected_facts=facts))
    return facts
