#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: stack_plan
short_description: Check a host against sparkforge's requirements and plan what to install or build on it
version_added: "0.1.0"
description:
  - Takes the facts of M(sparkforge.stack.gpu_facts) and C(setup) (or, with O(gather), reads them itself in
    the same call), the user's settings and the version manifest, and returns the list of problems that stop the host from being provisioned (each with what to
    do about it) and the plan (what each component will install or build, and why).
  - Reads only its arguments and, with O(gather), the host; never changes the host. The C(preflight) role publishes the result as the
    C(sparkforge_plan) fact that later roles read.
  - Also refuses, probing or not, a root of trust (cuda-keyring, the cuSPARSELt local-repo installer) that
    comes neither over https nor with a valid pinned sha256 (a pinned file on a local path is hashed); a
    malformed proxy variable in the host's environment (named with its value); and, with torch from a
    wheelhouse on the host, a wheel pip would take there that is not a valid wheel zip, whose METADATA is not
    the name and version (local tag included) its file name says, or whose tags fit no wheel of the planned
    torch (or torchvision, torchaudio) to the venv's Python, the host's CPU and the host's glibc.
author:
  - sparkforge developers (@sparkforge)
options:
  facts:
    description:
      - The C(ansible_facts.sparkforge) dict returned by M(sparkforge.stack.gpu_facts).
      - Exactly one of O(facts) and O(gather) is given.
    type: dict
  gather:
    description:
      - Read the host in this call instead of taking O(facts) - what M(sparkforge.stack.gpu_facts) (with
        C(required=false)) and C(setup) (subsets C(distribution), C(python), C(platform)) return - and return
        them as C(ansible_facts), so that preflight costs one remote call per host, not three.
      - Keys C(nvidia_smi) (path or name, default C(nvidia-smi)), C(disk_paths) (list of paths whose free space
        to report), C(timeout) (seconds nvidia-smi may take, default 30) and C(platforms) (required, the
        manifest's C(sparkforge_gpu_platforms), whose rows' C(match) and C(class) classify the GPUs, as
        M(sparkforge.stack.gpu_facts) takes it).
    type: dict
  host:
    description:
      - OS facts of the host, keys C(name), C(distribution), C(distribution_version), C(python_version),
        C(architecture) and C(glibc) (its version, C(2.39)). With O(gather), the keys not given come from the host;
        C(glibc), when not given, always does.
    type: dict
    default: {}
  platform_maps:
    description:
      - How the host's OS and CPU name NVIDIA's repository paths, to fill the O(sources) keys C(cuda_distro),
        C(cuda_repo_arch), C(deb_arch) and C(cusparselt_sha256) when they are not given - keys
        C(cuda_distro_map) (C(<distribution>-<version>), else C(<distribution>-<major version>), to a repository
        distro; a host it does not name is refused when the plan installs from NVIDIA's repository),
        C(cuda_repo_arch_map) and C(cuda_deb_arch_map) (CPU architecture to the repository's and Debian's
        names), C(cusparselt_sha256) (version, then distro, then Debian arch, to the installer's sha256) and
        C(cuda_keyring_sha256) (version, then distro, then repository arch, to the cuda-keyring's pinned sha256,
        used when O(sources) gives none).
    type: dict
    default: {}
  checks:
    description:
      - Preflight settings, keys C(allow_x86_64), C(supported_distributions) (list of dicts with
        C(distribution) and C(versions)), C(min_python), C(require_gpu), C(min_driver_blackwell),
        C(min_ram_gib), C(min_ram_gib_source_build), C(min_disk_gib), C(min_disk_gib_source_build),
        C(build_dir), and C(disk_places) (list of dicts with C(variable), C(path) and C(place), one of C(venv),
        C(wheel_dir) or C(report_dir)). Each place the plan makes grow is measured on its own file system with
        the manifest's C(sparkforge_disk_needs_gib) for it, places on one file system adding up.
      - With O(gather), the user the module runs as is read (root when become works); where the plan installs a
        component of the manifest's C(sparkforge_root_needs) and that user is not root, the host has a C(root)
        problem naming the user and what to do (C(sudo -n true) is tried to say which).
    type: dict
    required: true
  settings:
    description:
      - What the user asked for, keys C(components) (list), C(torch_version) (C(latest) or a version of the
        manifest), C(torch_source) (C(source), C(index), C(wheelhouse) or C(existing)), C(cuda_arch_list)
        (empty for the default from the host's GPUs), C(ml_profile) (empty - none), C(ml_packages), C(ml_pins) and
        C(ml_extra_matrix) (the ML packages role's list, pins and extra matrix entries), and C(index_url) (the index the
        C(index) source installs from, shown in the plan). C(latest) skips releases whose wheels need a newer
        Python than the host's (C(python_version) of O(host), or of this dict). C(venv) (the stack venv); with
        C(torch_source=existing) it must already hold the planned torch, else the host has a problem, and its torch's
        C(torch.cuda.get_arch_list()) becomes every consumer's arch list. C(venv_python) (the
        interpreter the venv is made with, C(pytorch_venv_python)) - a wheelhouse's wheels are matched against the
        Python of C(venv) when it exists, else of this interpreter, else of the host.
    type: dict
    required: true
  manifest:
    description:
      - The version manifest (the C(sparkforge.stack.manifest) role's variables), at least
        C(sparkforge_torch_releases), C(sparkforge_triton_releases) and C(sparkforge_torch_arch_min_version),
        and for the default arch list C(sparkforge_torch_arch_defaults), C(sparkforge_torch_traps) and
        C(sparkforge_torch_fixes); C(sparkforge_cxx_min_compilers) for the compiler check of a source build;
        C(sparkforge_torch_wheel_archs) for what an installed wheel carries; C(sparkforge_disk_needs_gib) and
        C(sparkforge_root_needs) for the disk and root checks.
    type: dict
    required: true
  sources:
    description:
      - The source URLs in force on the host (the preflight role passes them, inventory overrides included) -
        C(cuda_repo_url), C(cuda_distro), C(cuda_repo_arch), C(cuda_keyring_version), C(cuda_keyring_sha256),
        C(cusparselt_base_url), C(cusparselt_version), C(cusparselt_sha256), C(deb_arch), C(triton_repo),
        C(llvm_repo), C(pytorch_repo), C(torchvision_repo), C(torchaudio_repo), C(torch_index_url), C(wheelhouse),
        C(ml_index_url), C(ml_extra_index_urls) - and C(variables), the variable name that sets each.
      - The plan lists every source a component that will run fetches from (C(plan.sources)).
    type: dict
    default: {}
  probe_sources:
    description:
      - Probe every source of the plan before anything changes, concurrently, TLS verified, the proxy environment
        honoured. An unreachable source, or a plain-http download with no sha256 to check, is a problem that stops
        the host, with the variable that points the source at a mirror.
    type: bool
    default: true
  probe_timeout:
    description: Seconds one probe may take.
    type: int
    default: 5
  bundle:
    description:
      - An offline bundle to take every source from instead of the network (C(sparkforge_bundle)); no
        source is probed then.
      - C(dir) is the bundle on the controller, C(host_dir) where it will be on the host, C(manifest) and
        C(bad) what M(sparkforge.stack.offline_bundle_info) returned for it.
      - Every source of the plan must be in the bundle for the host's target (CUDA distro, Debian
        architecture, Python); a missing item, one made for another target or a file whose sha256 differs
        is a problem of check C(bundle) naming the item. The plan then carries C(bundle.overrides), the
        role variables that point each source at the host's copy.
    type: dict
  host_traps:
    description:
      - Known-bad kernels, driver flavours and host settings to check before anything changes, as data. Keys
        C(traps) (the manifest's C(sparkforge_host_traps), each row with its check, source, what to do, C(severity)
        refuse or warn and C(confirmed)), C(root) (where the host's files are read, default C(/); a stand-in tree
        in tests), C(uses) (C(rdma), C(containers) - where the host uses them beyond what its files show) and
        C(ignore) (ids of refuse rows to report as warnings instead).
      - The facts are read from the files the kernel and driver write - C(/proc/sys/kernel/osrelease),
        C(/proc/meminfo), C(/proc/driver/nvidia/version), C(/sys/class/infiniband), C(/etc/systemd/system) -
        under C(root). A refuse row found is a problem of check C(host_traps); a warn row a plan line.
    type: dict
attributes:
  check_mode:
    support: full
    description: Reads only, so check mode runs it fully.
  diff_mode:
    support: none
    description: Nothing is changed, so there is no diff.
"""

EXAMPLES = r"""
- name: Read the host and plan it in one call (what the preflight role does)
  sparkforge.stack.stack_plan:
    gather:
      disk_paths: [/opt/sparkforge/build]
      platforms: "{{ sparkforge_gpu_platforms }}"
    host:
      name: "{{ inventory_hostname }}"
    checks: "{{ my_checks }}"
    settings: {torch_version: latest, torch_source: index}
    manifest:
      sparkforge_torch_releases: "{{ sparkforge_torch_releases }}"
      sparkforge_torch_arch_min_version: "{{ sparkforge_torch_arch_min_version }}"
  register: planned

- name: Plan the host from facts gathered before
  sparkforge.stack.stack_plan:
    facts: "{{ ansible_facts.sparkforge }}"
    host:
      distribution: "{{ ansible_facts.distribution }}"
      distribution_version: "{{ ansible_facts.distribution_version }}"
      python_version: "{{ ansible_facts.python_version }}"
    checks:
      allow_x86_64: false
      supported_distributions: [{distribution: Ubuntu, versions: ["24.04"]}]
      min_python: "3.10"
      require_gpu: true
      min_driver_blackwell: "580"
      min_ram_gib: 8
      min_ram_gib_source_build: 32
      min_disk_gib: 20
      min_disk_gib_source_build: 120
      build_dir: /opt/sparkforge/build
    settings:
      torch_version: latest
      torch_source: source
    manifest:
      sparkforge_torch_releases: "{{ sparkforge_torch_releases }}"
      sparkforge_triton_releases: "{{ sparkforge_triton_releases }}"
      sparkforge_torch_arch_min_version: "{{ sparkforge_torch_arch_min_version }}"
  register: planned
"""

RETURN = r"""
ansible_facts:
  description:
    - With O(gather) only - C(sparkforge) (as M(sparkforge.stack.gpu_facts) returns it) and the OS, Python and
      platform facts C(setup) returns (C(distribution), C(distribution_version), C(distribution_release),
      C(architecture), C(python_version), C(python), ...).
  returned: when O(gather) is given
  type: dict
plan:
  description:
    - What each component will do on this host and why; C(sources) lists every remote source it will fetch from
      (component, source, url, variable, status C(ok)/C(unreachable)/C(refused)/C(not probed), error).
    - With O(bundle), a source's status is C(bundle) (with its C(path) in the bundle), C(missing), C(bad) (a file
      differs from the manifest) or C(local) (a wheelhouse on the host), and C(bundle) holds the host's target,
      the paths to copy (C(dirs), C(paths)) and the role variables to set (C(overrides)).
    - C(target) is what picks the host's part of an offline bundle (CUDA distro, Debian architecture, Python).
  returned: success
  type: dict
  sample:
    platform_class: dgx_spark
    compute_capabilities: ["12.1"]
    # arch: the one CUDA arch list every build compiles for (torch, domains, ML GPU builds, runtime_env's export)
    # and where it came from.
    arch: {list: "12.0", reason: "default for platform class dgx_spark"}
    torch: {version: "2.11.0", source: source}
    triton: {version: "3.6.0", llvm_commit: f6ded0be897e2878612dd903f7e8bb85448269e5}
    torchvision: "0.26.0"
    torchaudio: "2.11.0"
    source_build: true
    steps:
      - {component: pytorch, action: build, detail: "PyTorch 2.11.0 wheel, TORCH_CUDA_ARCH_LIST=12.0", why: "..."}
    # gpu_builds: each ML package built from source with CUDA kernels, its C++ standard against the torch of the
    # plan (module_utils/packages/cxx_std.py): the facts it rests on and the problems.
    gpu_builds:
      - {package: flash-attn, release: 2.8.3.post2, torch: "2.15.0", torch_std: 20, std: 20, compiler: "GCC 13.3.0",
         std_from: "set by the entry's fix", arch_list: "12.1", problems: []}
problems:
  description: Every reason the host cannot be provisioned, each with what to do. Empty when it can.
  returned: always
  type: list
  elements: dict
  sample: [{check: cpu_arch, message: "this host is x86_64; ..."}]
build_warnings:
  description:
    - A C++ standard or compiler conflict of an optional GPU package a profile brings (not one the user named in
      C(ml_packages_packages)) - it is not built, and the run goes on. A conflict of any other is in C(problems).
  returned: always
  type: list
  elements: str
plan_text:
  description: The plan and the problems as lines a person reads.
  returned: always
  type: list
  elements: str
ready:
  description:
    - True when there is no problem. For a source build the RAM/disk thresholds of the build are not part of
      this verdict (only the builder of a platform class builds), see C(can_build).
  returned: always
  type: bool
can_build:
  description:
    - True when the host meets the source-build RAM and disk thresholds (C(min_ram_gib_source_build),
      C(min_disk_gib_source_build)), so it can build the wheels of its platform class. The fleet planning picks
      builders among these hosts; a class with none fails there with C(build_problems).
  returned: always
  type: bool
host_traps:
  description:
    - The host traps checked (C(null) without O(host_traps)) - C(rows) (each C(id), C(severity), C(status) found, clear
      or n/a, C(confirmed)), C(warnings) (the warn rows found, with source and what to do), C(kernel_release),
      C(rdma_devices), C(container_toolkit).
  returned: always
  type: dict
build_problems:
  description:
    - Why the host cannot build from source (RAM or disk under the source-build thresholds, or a C++
      compiler older than the release's C(cxx_standard) needs, per C(sparkforge_cxx_min_compilers)).
  returned: always
  type: list
  elements: dict
  sample: [{check: ram, message: "16.0 GiB of RAM, the planned work needs 32 GiB (building from source). ..."}]
environment_dropped:
  description:
    - The names of the host's C(PYTHON*) and C(PIP_*) variables (as the module saw them) that the venv's python and
      pip never get (a C(PYTHONPATH) holding a torch would pass for the venv's); the plan text names them too, with
      the variable to set instead where one exists (C(PIP_INDEX_URL)... are never taken from the host).
  returned: always
  type: list
  elements: str
  sample: [PIP_INDEX_URL, PYTHONPATH]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import AnsibleSystem, JobError
from ansible_collections.sparkforge.stack.plugins.module_utils.plan.stack_plan_job import StackPlanJob, check_bundle
from ansible_collections.sparkforge.stack.plugins.module_utils.host.host_facts import os_facts, sparkforge_facts
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import wheel_check


def _open_url(url, **kwargs):
    # Imported on the first probe: urls costs every plan about 0.1 s of CPU, and most runs probe nothing.
    from ansible.module_utils.urls import open_url  # pylint: disable=import-outside-toplevel
    return open_url(url, **kwargs)


def _opener(url, timeout):
    """None when ``url`` answers 2xx/3xx, else why not. TLS is verified; http(s)_proxy/no_proxy apply."""
    try:
        resp = _open_url(url, method="GET", timeout=timeout, validate_certs=True, follow_redirects="all",
                         use_proxy=True, headers={"Range": "bytes=0-0"})
        resp.close()
        return None
    except HTTPError as exc:
        return "HTTP %s %s" % (exc.code, exc.reason)
    except URLError as exc:
        return str(getattr(exc, "reason", exc))
    # ssl errors and socket timeouts too: any failure is the answer.
    except Exception as exc:  # pylint: disable=broad-except
        return "%s: %s" % (type(exc).__name__, exc)


def _fetcher(url, timeout, limit):
    """(bytes, None) of a small file at ``url`` (at most ``limit`` bytes), or (None, why not)."""
    try:
        resp = _open_url(url, method="GET", timeout=timeout, validate_certs=True, follow_redirects="all",
                         use_proxy=True)
        try:
            data = resp.read(limit + 1)
        finally:
            resp.close()
    except HTTPError as exc:
        return None, "HTTP %s %s" % (exc.code, exc.reason)
    except URLError as exc:
        return None, str(getattr(exc, "reason", exc))
    except Exception as exc:  # pylint: disable=broad-except
        return None, "%s: %s" % (type(exc).__name__, exc)
    if len(data) > limit:
        return None, "larger than %d bytes: not a cuda-keyring package" % limit
    return data, None


_GATHER_KEYS = ("nvidia_smi", "disk_paths", "timeout", "platforms")


def _gather(module, spec):
    """ansible_facts as gpu_facts (GPU optional: preflight's require_gpu judges it) and setup return them."""
    unknown = sorted(set(spec) - set(_GATHER_KEYS))
    if unknown:
        module.fail_json(msg="gather has unknown key(s) %s; it takes %s" % (", ".join(unknown), ", ".join(_GATHER_KEYS)))
    timeout = spec.get("timeout", 30)
    if not isinstance(timeout, int) or isinstance(timeout, bool) or timeout < 1:
        module.fail_json(msg="gather.timeout must be a whole number of seconds, at least 1 (got %r)" % (timeout,))
    paths = spec.get("disk_paths") or []
    if not isinstance(paths, list) or not all(isinstance(p, str) and p for p in paths):
        module.fail_json(msg="gather.disk_paths must be a list of paths (got %r)" % (paths,))
    if "platforms" not in spec:
        module.fail_json(msg="gather.platforms is required: the manifest's sparkforge_gpu_platforms, whose rows "
                             "classify the GPUs")
    facts = os_facts(module)
    facts["sparkforge"] = sparkforge_facts(module, spec.get("nvidia_smi") or "nvidia-smi", paths, timeout, False,
                                           spec["platforms"])
    return facts


def _host_from(facts):
    return dict((key, facts.get(key)) for key in
                ("distribution", "distribution_version", "python_version", "architecture"))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            facts=dict(type="dict"),
            gather=dict(type="dict"),
            host=dict(type="dict", default={}),
            platform_maps=dict(type="dict", default={}),
            checks=dict(type="dict", required=True),
            settings=dict(type="dict", required=True),
            manifest=dict(type="dict", required=True),
            sources=dict(type="dict", default={}),
            probe_sources=dict(type="bool", default=True),
            probe_timeout=dict(type="int", default=5),
            bundle=dict(type="dict"),
            host_traps=dict(type="dict"),
        ),
        mutually_exclusive=[("facts", "gather")],
        required_one_of=[("facts", "gather")],
        supports_check_mode=True,
    )
    params = module.params
    gathered = None
    try:
        check_bundle(params["bundle"])
        if params["gather"] is not None:
            gathered = _gather(module, params["gather"])
            params["facts"] = gathered["sparkforge"]
            params["host"] = dict(_host_from(gathered), **params["host"])
        # The host's glibc, which a manylinux wheel in a wheelhouse must not need newer than.
        params["host"].setdefault("glibc", wheel_check.host_glibc())
        job = StackPlanJob(params, AnsibleSystem(module), module.check_mode, opener=_opener, fetcher=_fetcher)
        result = job.run()
    except JobError as exc:
        module.fail_json(**exc.fail_args())
    if gathered is not None:
        result["ansible_facts"] = gathered
    module.exit_json(**result)


if __name__ == "__main__":
    main()
