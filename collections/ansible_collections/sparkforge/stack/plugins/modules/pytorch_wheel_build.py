#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pytorch_wheel_build
short_description: Build a PyTorch wheel from source for the host's GPUs
version_added: "0.1.0"
description:
  - Builds a PyTorch wheel with C(pip wheel . --no-build-isolation) in a kept source tree, for an arch list
    validated against the release (names the release accepts, no C(f) suffixes, the known build traps).
  - Applies the release's fixes from the stack's version data and the user's patch files, each checked first
    (C(git apply --check) semantics; exact-text edits verify the old text) and applied once.
  - The environment is built from nothing (explicit C(PATH) and C(LD_LIBRARY_PATH), C(USE_*) from I(features),
    C(BLAS=OpenBLAS) on aarch64, C(CUDA_HOME), cuSPARSELt, C(PYTORCH_BUILD_VERSION)/C(PYTORCH_BUILD_NUMBER)).
  - A cache key over every input (commit, fixes, patches, arch list, features, environment, toolchain and CUDA
    versions, Python) makes a rerun with the same inputs a no-op; a lock stops concurrent builds; a status file
    (phase, ninja progress, elapsed) can be polled while the module runs under C(async).
  - The wheel is published atomically into I(wheel_dir) with a JSON build manifest next to it.
  - In check mode returns the plan and the full environment without building.
author:
  - sparkforge developers (@sparkforge)
options:
  torch_data:
    description:
      - The stack's PyTorch version data (from the C(sparkforge.stack.manifest) role), with the keys
        C(releases) (C(sparkforge_torch_releases)), C(arch_min_version), C(arch_defaults), C(traps) and C(fixes).
    type: dict
    required: true
  version:
    description:
      - PyTorch release to build (a key of C(torch_data.releases)). Also the wheel version
        (C(PYTORCH_BUILD_VERSION)), so the wheel satisfies C(torch==VERSION) pins.
      - Default is the newest release the data marks good for I(platform_class).
    type: str
  repo:
    description:
      - Git URL (or local path) of the PyTorch source. Only the ref's commit is fetched, at depth 1, and the
        submodules' pinned commits, also at depth 1, into C(BUILD_DIR/src).
      - Mutually exclusive with I(src).
    type: str
    default: https://github.com/pytorch/pytorch.git
  ref:
    description: Tag, branch or commit to build from I(repo). Default C(v<version>).
    type: str
  src:
    description:
      - A local PyTorch source tree to build in place instead of cloning I(repo). Its HEAD commit is recorded.
    type: path
  fetch_jobs:
    description: Submodules fetched at once (C(git submodule update --jobs)).
    type: int
    default: 8
  submodules:
    description: Update git submodules recursively after checkout, each at its pinned commit at depth 1.
    type: bool
    default: true
  build_dir:
    description: Work directory (source clone, logs, status file, lock). Kept between runs so a failed build resumes.
    type: path
    required: true
  wheel_dir:
    description: Directory the finished wheel and its manifest are published into.
    type: path
    required: true
  python:
    description: Python interpreter of the build venv (the wheel is built for it).
    type: path
    required: true
  build_deps:
    description:
      - C(install) installs the build requirements (I(build_requirements)) with I(python)'s pip first;
        C(check) only verifies they are installed (offline hosts); C(skip) does neither.
    type: str
    choices: [install, check, skip]
    default: install
  build_requirements:
    description:
      - Requirements installed before the build. Default C(setuptools), C(wheel) plus the source's
        C(requirements-build.txt) (or C(requirements.txt)).
    type: list
    elements: str
  cuda_arch_list:
    description:
      - C(TORCH_CUDA_ARCH_LIST) as a string (C(9.0;12.0+PTX)) or a list. Default from I(platform_class),
        I(compute_capabilities) and the version data (GB10 gets C(12.0) on releases with the mem-efficient
        attention trap, C(12.1) on fixed releases).
    type: raw
  platform_class:
    description: The host's platform class (C(ansible_facts.sparkforge.platform_class) from C(gpu_facts)).
    type: str
    default: none
  compute_capabilities:
    description: The host's compute capabilities (C(ansible_facts.sparkforge.compute_capabilities)).
    type: list
    elements: str
    default: []
  machine:
    description: CPU architecture the wheel is built for (default the host's, e.g. C(aarch64)).
    type: str
  features:
    description: Build features, each mapped to its C(USE_*) variable; unset means the default.
    type: dict
    suboptions:
      cuda: {description: "C(USE_CUDA) (default on).", type: bool}
      cudnn: {description: "C(USE_CUDNN) (default on).", type: bool}
      cusparselt: {description: "C(USE_CUSPARSELT) (default on when cuSPARSELt is found).", type: bool}
      cufile: {description: "C(USE_CUFILE) (default off; needs GDS).", type: bool}
      nccl: {description: "C(USE_NCCL) (default on).", type: bool}
      system_nccl: {description: "C(USE_SYSTEM_NCCL) (default off: PyTorch builds its own).", type: bool}
      distributed: {description: "C(USE_DISTRIBUTED) (default on).", type: bool}
      gloo: {description: "C(USE_GLOO) (default on).", type: bool}
      tensorpipe: {description: "C(USE_TENSORPIPE) (default on).", type: bool}
      mpi: {description: "C(USE_MPI) (default off).", type: bool}
      flash_attention: {description: "C(USE_FLASH_ATTENTION) (default on).", type: bool}
      mem_eff_attention: {description: "C(USE_MEM_EFF_ATTENTION) (default on).", type: bool}
      fbgemm: {description: "C(USE_FBGEMM) (default on).", type: bool}
      fbgemm_genai: {description: "C(USE_FBGEMM_GENAI) (default off).", type: bool}
      kineto: {description: "C(USE_KINETO) (default on).", type: bool}
      xnnpack: {description: "C(USE_XNNPACK) (default on).", type: bool}
      mkldnn: {description: "C(USE_MKLDNN) (default on for x86_64, off for aarch64).", type: bool}
      mkldnn_acl: {description: "C(USE_MKLDNN_ACL) (default off; needs C(ACL_ROOT_DIR) in I(extra_env)).", type: bool}
      nnpack: {description: "C(USE_NNPACK) (default on).", type: bool}
      qnnpack: {description: "C(USE_PYTORCH_QNNPACK) (default on).", type: bool}
      magma: {description: "C(USE_MAGMA) (default off).", type: bool}
      numpy: {description: "C(USE_NUMPY) (default on).", type: bool}
      rocm: {description: "C(USE_ROCM) (default off).", type: bool}
      tests: {description: "C(BUILD_TEST) (default off).", type: bool}
  blas:
    description: C(BLAS) choice. C(auto) is OpenBLAS on aarch64 (MKL does not exist there) and MKL on x86_64.
    type: str
    choices: [auto, OpenBLAS, MKL, Eigen, BLIS, FLAME]
    default: auto
  cuda_home:
    description: CUDA toolkit root (C(CUDA_HOME)).
    type: path
    default: /usr/local/cuda
  cusparselt_root:
    description: C(CUSPARSELT_ROOT_DIR). Default found from the CUDA-13 Debian packages' layout.
    type: path
  cusparselt_include_dir:
    description: C(CUSPARSELT_INCLUDE_DIR) (the directory with C(cusparseLt.h)).
    type: path
  cusparselt_library:
    description: C(CUSPARSELT_LIBRARY) (path of C(libcusparseLt.so)).
    type: path
  cuda_major:
    description: CUDA major version, used to find cuSPARSELt (C(/usr/include/libcusparseLt/13)).
    type: int
    default: 13
  build_number:
    description: C(PYTORCH_BUILD_NUMBER).
    type: int
    default: 1
  fixes:
    description: Fixes from C(torch_data.fixes) to apply in addition to those the arch list needs.
    type: list
    elements: str
    default: []
  patches:
    description: The user's patch files (paths on the target), applied after the fixes with C(git apply).
    type: list
    elements: path
    default: []
  extra_env:
    description: More build environment variables (they win over the computed ones and enter the cache key).
    type: dict
    default: {}
  jobs:
    description:
      - Parallel compile jobs (C(MAX_JOBS)). C(auto) uses the cores and the free RAM at 4 GiB per job with
        4 GiB kept free, so the OOM killer does not end the build.
    type: raw
    default: auto
  ccache:
    description: Use ccache (compiler launchers) when it is installed.
    type: bool
    default: true
  force:
    description: Build even when a wheel with the same cache key is already published.
    type: bool
    default: false
  status_file:
    description: Status file (JSON) to poll. Default C(BUILD_DIR/status.json).
    type: path
  log_file:
    description: Build log. Default C(BUILD_DIR/build.log).
    type: path
notes:
  - Run it with C(async) and poll; the C(sparkforge.stack.pytorch) role prints the status file while it waits.
  - Check mode clones nothing; when the source tree already exists the fixes are checked against it.
seealso:
  - module: sparkforge.stack.gpu_facts
"""

EXAMPLES = r"""
- name: Build PyTorch 2.9.1 for this GB10 (12.1 with the mem-efficient attention fix)
  sparkforge.stack.pytorch_wheel_build:
    torch_data:
      releases: "{{ sparkforge_torch_releases }}"
      arch_min_version: "{{ sparkforge_torch_arch_min_version }}"
      arch_defaults: "{{ sparkforge_torch_arch_defaults }}"
      traps: "{{ sparkforge_torch_traps }}"
      fixes: "{{ sparkforge_torch_fixes }}"
    version: "2.9.1"
    cuda_arch_list: "12.1"
    platform_class: "{{ ansible_facts.sparkforge.platform_class }}"
    compute_capabilities: "{{ ansible_facts.sparkforge.compute_capabilities }}"
    python: /opt/sparkforge/venv/bin/python
    build_dir: /opt/sparkforge/build/pytorch
    wheel_dir: /opt/sparkforge/wheels
    features:
      fbgemm_genai: false
  async: 36000
  poll: 0
  register: torch_build

- name: Show what a build would do
  sparkforge.stack.pytorch_wheel_build:
    torch_data: "{{ torch_data }}"
    python: /opt/sparkforge/venv/bin/python
    build_dir: /opt/sparkforge/build/pytorch
    wheel_dir: /opt/sparkforge/wheels
  check_mode: true
  register: torch_plan
"""

RETURN = r"""
version:
  description: The PyTorch release built (also the wheel version).
  returned: always
  type: str
  sample: "2.9.1"
commit:
  description: The resolved source commit (null in check mode when the source is not cloned and the remote is unreachable).
  returned: always
  type: str
arch_list:
  description: The validated C(TORCH_CUDA_ARCH_LIST).
  returned: always
  type: str
  sample: "12.0;12.1"
arch_list_why:
  description: Where the arch list came from.
  returned: always
  type: str
fixes:
  description: Fixes and patches with their state (applied, already, would apply).
  returned: always
  type: list
  elements: dict
env:
  description: The complete build environment.
  returned: always
  type: dict
jobs:
  description: Parallel jobs and why.
  returned: always
  type: dict
cache_key:
  description: sha256 over every build input.
  returned: always
  type: str
src_dir:
  description: The source tree the wheel is built from (its C(test/) is what M(sparkforge.stack.torch_acceptance) runs).
  returned: when the version data is valid
  type: str
wheel:
  description: Path of the published wheel (null in check mode before a build).
  returned: always
  type: str
sha256:
  description: sha256 of the wheel.
  returned: when a wheel exists
  type: str
manifest:
  description: Path of the JSON build manifest next to the wheel.
  returned: when a wheel exists
  type: str
duration_s:
  description: Seconds the build took (0 for a no-op).
  returned: always
  type: float
plan:
  description: What would change and why.
  returned: always
  type: str
status_file:
  description: The status file polled while the build runs.
  returned: always
  type: str
log_file:
  description: The build log.
  returned: always
  type: str
pairing:
  description: The release's triton/torchvision/torchaudio versions from the version data.
  returned: always
  type: dict
"""

import json
import os
import platform
import shutil
import subprocess
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkforge.stack.plugins.module_utils.build_common import (
    BuildError,
    BuildFailed,
    BuildLock,
    StatusFile,
    atomic_publish,
    atomic_write_text,
    command_version,
    git,
    makedirs,
    run_logged,
    sha256_file,
)
from ansible_collections.sparkforge.stack.plugins.module_utils import git_fetch
from ansible_collections.sparkforge.stack.plugins.module_utils import torch_build as tb

FEATURE_OPTIONS = dict((name, dict(type="bool")) for name in sorted(tb.FEATURES))


def nvcc_version(cuda_home):
    """Last line of nvcc --version ('Build cuda_13.0.r13.0/compiler.36424714_0')."""
    try:
        out = subprocess.check_output([os.path.join(cuda_home, "bin", "nvcc"), "--version"],
                                      stderr=subprocess.STDOUT).decode("utf-8", "replace")
    except (OSError, subprocess.CalledProcessError):
        raise BuildError("nvcc not found under %s: install the CUDA toolkit or set cuda_home (or features.cuda: false)"
                         % cuda_home)
    return out.strip().splitlines()[-1]


def python_version(python):
    try:
        out = subprocess.check_output([python, "-c", "import sys, platform; print(sys.version.split()[0], "
                                       "platform.machine(), sys.implementation.cache_tag)"])
    except (OSError, subprocess.CalledProcessError) as exc:
        raise BuildError("the build python %s does not run (%s): create the build venv first" % (python, exc))
    return out.decode().strip()


def resolve_commit(module, src_dir, repo, ref, cloned):
    """The commit ``ref`` names: from the kept source tree when it was fetched before (no network),
    else from the remote (git ls-remote). None when neither knows it."""
    if cloned:
        local = git_fetch.local_ref(src_dir, ref)
        if local:
            return local
    try:
        return git_fetch.remote_commit(repo, ref)
    except BuildFailed as exc:
        if module.check_mode:
            return None
        raise BuildError("cannot resolve %s: %s" % (ref, exc.tail))


def find_published(wheel_dir, key):
    """(wheel, manifest, data) of a published wheel with this cache key, or None."""
    if not os.path.isdir(wheel_dir):
        return None
    for name in sorted(os.listdir(wheel_dir)):
        if not name.endswith(".whl.manifest.json"):
            continue
        path = os.path.join(wheel_dir, name)
        try:
            with open(path) as handle:
                data = json.load(handle)
        except (IOError, OSError, ValueError):
            continue
        if data.get("cache_key") != key:
            continue
        wheel = os.path.join(wheel_dir, data.get("wheel_file", ""))
        if os.path.isfile(wheel) and sha256_file(wheel) == data.get("sha256"):
            return wheel, path, data
    return None


def check_build_deps(python, requirements):
    names = list(requirements)
    code = (
        "import sys, re\n"
        "from importlib import metadata\n"
        "missing = []\n"
        "for req in sys.argv[1:]:\n"
        "    name = re.split(r'[<>=!~;\\[ ]', req, 1)[0]\n"
        "    try:\n"
        "        metadata.version(name)\n"
        "    except metadata.PackageNotFoundError:\n"
        "        missing.append(req)\n"
        "print(' '.join(missing))\n"
    )
    out = subprocess.check_output([python, "-c", code] + names).decode().strip()
    return out.split() if out else []


def main():
    module = AnsibleModule(
        argument_spec=dict(
            torch_data=dict(type="dict", required=True),
            version=dict(type="str"),
            repo=dict(type="str", default="https://github.com/pytorch/pytorch.git"),
            ref=dict(type="str"),
            src=dict(type="path"),
            submodules=dict(type="bool", default=True),
            fetch_jobs=dict(type="int", default=8),
            build_dir=dict(type="path", required=True),
            wheel_dir=dict(type="path", required=True),
            python=dict(type="path", required=True),
            build_deps=dict(type="str", choices=["install", "check", "skip"], default="install"),
            build_requirements=dict(type="list", elements="str"),
            cuda_arch_list=dict(type="raw"),
            platform_class=dict(type="str", default="none"),
            compute_capabilities=dict(type="list", elements="str", default=[]),
            machine=dict(type="str"),
            features=dict(type="dict", options=FEATURE_OPTIONS),
            blas=dict(type="str", choices=list(tb.BLAS_CHOICES), default="auto"),
            cuda_home=dict(type="path", default="/usr/local/cuda"),
            cusparselt_root=dict(type="path"),
            cusparselt_include_dir=dict(type="path"),
            cusparselt_library=dict(type="path"),
            cuda_major=dict(type="int", default=13),
            build_number=dict(type="int", default=1),
            fixes=dict(type="list", elements="str", default=[]),
            patches=dict(type="list", elements="path", default=[]),
            extra_env=dict(type="dict", default={}),
            jobs=dict(type="raw", default="auto"),
            ccache=dict(type="bool", default=True),
            force=dict(type="bool", default=False),
            status_file=dict(type="path"),
            log_file=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        result = run(module, p)
    except BuildError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


def run(module, p):
    data = p["torch_data"]
    for key in ("releases", "arch_min_version", "traps", "fixes"):
        if key not in data:
            raise BuildError("torch_data has no '%s': pass the manifest's sparkforge_torch_* variables" % key)
    releases = data["releases"]
    fixes_data = data["fixes"] or {}
    version = p["version"] or tb.default_version(releases, p["platform_class"])
    release = tb.release_entry(releases, version)
    warnings = []
    for field in release.get("unconfirmed") or []:
        warnings.append("torch %s: the version data's %s pairing (%s) is not confirmed against the release"
                        % (version, field, release.get(field)))
    if p["platform_class"] not in ("none", "generic", "mixed") and p["platform_class"] not in (
            release.get("good_for") or []):
        warnings.append("torch %s is not marked good for platform class %s in the version data"
                        % (version, p["platform_class"]))

    arch = tb.plan_arch_list(p["cuda_arch_list"], version, release, p["platform_class"],
                             p["compute_capabilities"], data, fixes_data)
    fix_names = tb.select_fixes(release, arch["fixes_needed"], fixes_data, p["fixes"])
    machine = p["machine"] or platform.machine()

    cusparselt = None
    if p["cusparselt_include_dir"] or p["cusparselt_library"] or p["cusparselt_root"]:
        root = p["cusparselt_root"]
        cusparselt = {
            "root": root or os.path.dirname(p["cusparselt_include_dir"] or ""),
            "include": p["cusparselt_include_dir"] or (os.path.join(root, "include") if root else None),
            "library": p["cusparselt_library"] or (os.path.join(root, "lib", "libcusparseLt.so") if root else None),
        }
    else:
        cusparselt = tb.find_cusparselt(machine, p["cuda_major"])
    features = tb.resolve_features(p["features"], machine, cusparselt)

    jobs, jobs_why = tb.plan_jobs(p["jobs"])
    build_dir = p["build_dir"]
    status_path = p["status_file"] or os.path.join(build_dir, "status.json")
    log_path = p["log_file"] or os.path.join(build_dir, "build.log")
    venv_bin = os.path.dirname(p["python"])
    ccache = None
    if p["ccache"]:
        ccache = shutil.which("ccache") or None
    env = tb.build_env({
        "arch_list": arch["arch_list"], "features": features, "machine": machine, "blas": p["blas"],
        "cuda_home": p["cuda_home"], "venv_bin": venv_bin, "cusparselt": cusparselt,
        "build_version": version, "build_number": p["build_number"], "jobs": jobs,
        "extra_env": p["extra_env"], "home": os.environ.get("HOME"), "tmpdir": os.environ.get("TMPDIR"),
        "ccache": ccache, "caller_env": dict(os.environ),
    })

    # Source and commit.
    if p["src"]:
        src_dir = p["src"]
        if not os.path.isdir(src_dir):
            raise BuildError("src %s does not exist" % src_dir)
        commit = git(["rev-parse", "HEAD"], cwd=src_dir)
        ref = p["ref"] or "HEAD"
        cloned = True
    else:
        src_dir = os.path.join(build_dir, "src")
        ref = p["ref"] or "v%s" % version
        cloned = os.path.isdir(os.path.join(src_dir, ".git"))
        commit = resolve_commit(module, src_dir, p["repo"], ref, cloned)
        if commit is None and not module.check_mode:
            raise BuildError("ref %s not found in %s" % (ref, p["repo"]))

    toolchain = {"nvcc": nvcc_version(p["cuda_home"]) if features["cuda"] else None}
    toolchain["cc"] = command_version(["cc"])
    toolchain["cxx"] = command_version(["c++"])
    toolchain["cmake"] = command_version([os.path.join(venv_bin, "cmake")]) or command_version(["cmake"])
    py_version = python_version(p["python"])

    patches = {}
    for patch in p["patches"]:
        if not os.path.isfile(patch):
            raise BuildError("patch file %s does not exist" % patch)
        patches[patch] = sha256_file(patch)
    fix_defs = dict((name, tb.fix_fingerprint(fixes_data[name])) for name in fix_names)
    key_inputs = {
        "commit": commit, "version": version, "build_number": p["build_number"],
        "arch_list": arch["arch_list"], "features": features, "env": tb.output_env(env),
        "fixes": fix_defs, "patches": dict((os.path.basename(k), v) for k, v in patches.items()),
        "toolchain": toolchain, "python": py_version,
    }
    key = tb.build_key(key_inputs)
    pairing = dict((k, release.get(k)) for k in ("triton", "torchvision", "torchaudio"))
    result = dict(changed=False, version=version, commit=commit, src_dir=src_dir, arch_list=arch["arch_list"],
                  arch_list_why=arch["why"], env=env, jobs=dict(jobs=jobs, why=jobs_why), cache_key=key,
                  wheel=None, duration_s=0.0, fixes=[], pairing=pairing, status_file=status_path,
                  log_file=log_path)
    for warning in warnings:
        module.warn(warning)

    published = None if p["force"] else find_published(p["wheel_dir"], key)
    if published:
        wheel, manifest, mdata = published
        result.update(wheel=wheel, manifest=manifest, sha256=mdata.get("sha256"), fixes=mdata.get("fixes", []),
                      plan="a wheel with the same cache key is published (%s): nothing to do" % os.path.basename(wheel))
        return result

    why = "force: rebuilding" if p["force"] else "no published wheel has cache key %s" % key[:12]
    if module.check_mode:
        if cloned and commit:
            try:
                result["fixes"] = tb.apply_all(src_dir, fix_names, fixes_data, list(patches), check_only=True) \
                    if git(["rev-parse", "HEAD"], cwd=src_dir) == commit else [
                        {"name": n, "kind": "fix", "state": "would apply", "files": []} for n in fix_names]
            except tb.FixError as exc:
                raise BuildError("the build would fail: %s" % exc)
        else:
            result["fixes"] = [{"name": n, "kind": "fix", "state": "would apply", "files": []} for n in fix_names]
        result.update(changed=True, plan="would build torch %s (%s) for %s: %s"
                      % (version, (commit or ref)[:12], arch["arch_list"], why))
        return result

    started = time.time()
    makedirs(build_dir)
    with BuildLock(os.path.join(build_dir, ".lock")):
        status = StatusFile(status_path, "pytorch %s" % version, log_path)
        status.update(message=why)
        try:
            built = build(module, p, status, env, src_dir, commit, ref, cloned, fix_names, fixes_data,
                          list(patches), log_path, version)
        except BuildError as exc:
            if status.state.get("state") == "running":
                status.finish("failed", str(exc).splitlines()[0])
            raise
        status.phase("publish")
        wheel = atomic_publish(built["wheel"], p["wheel_dir"])
        digest = sha256_file(wheel)
        finished = time.time()
        manifest_data = {
            "cache_key": key, "key_inputs": key_inputs, "wheel_file": os.path.basename(wheel),
            "sha256": digest, "size": os.path.getsize(wheel), "torch_version": version,
            "build_number": p["build_number"], "repo": None if p["src"] else p["repo"], "src": src_dir,
            "ref": ref, "commit": commit, "arch_list": arch["arch_list"], "arch_list_why": arch["why"],
            "features": features, "env": env, "fixes": built["fixes"],
            "fix_definitions": dict((n, fixes_data[n]) for n in fix_names),
            "patches": patches, "toolchain": toolchain, "python": py_version, "jobs": jobs,
            "jobs_why": jobs_why, "platform_class": p["platform_class"], "machine": machine,
            "pairing": pairing, "build_host": platform.node(), "started": time.strftime(
                "%Y-%m-%dT%H:%M:%S", time.localtime(started)),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(finished)),
            "duration_s": round(finished - started, 1), "log": log_path,
        }
        manifest = wheel + ".manifest.json"
        atomic_write_text(manifest, json.dumps(manifest_data, indent=1, sort_keys=True) + "\n")
        status.finish("done", "published %s" % os.path.basename(wheel))
    result.update(changed=True, wheel=wheel, sha256=digest, manifest=manifest, fixes=built["fixes"],
                  duration_s=round(finished - started, 1),
                  plan="built torch %s (%s) for %s: %s" % (version, commit[:12], arch["arch_list"], why))
    return result


def build(module, p, status, env, src_dir, commit, ref, cloned, fix_names, fixes_data, patches, log_path,
          version):
    genv = {"PATH": env["PATH"], "HOME": env["HOME"], "LANG": "C.UTF-8"}
    for name in tb.PASSTHROUGH_ENV:
        if name in env:
            genv[name] = env[name]
    if not p["src"]:
        if not cloned and os.path.exists(src_dir):
            shutil.rmtree(src_dir)
        head = git(["rev-parse", "--verify", "-q", "HEAD"], cwd=src_dir, check=False) if cloned else ""
        if head != commit and os.path.exists(os.path.join(src_dir, tb.MARKER)):
            # Another commit: its pristine tree (checked out and cleaned below) has no fixes applied.
            os.unlink(os.path.join(src_dir, tb.MARKER))
        # The tag's commit and the submodules' pinned commits only, at depth 1 (a resumed run fetches nothing).
        git_fetch.fetch_checkout(p["repo"], ref, commit, src_dir, log_path, status, submodules=p["submodules"],
                                 jobs=p["fetch_jobs"], env=genv, clean=True)
    status.phase("fixes")
    try:
        fixes = tb.apply_all(src_dir, fix_names, fixes_data, patches)
    except tb.FixError as exc:
        status.finish("failed", str(exc))
        raise
    reqs = p["build_requirements"] or tb.read_build_requirements(src_dir)
    if p["build_deps"] == "install":
        run_logged([p["python"], "-m", "pip", "install", "--disable-pip-version-check"] + reqs, log_path,
                   "build-deps", status, cwd=src_dir, env=env)
    elif p["build_deps"] == "check":
        status.phase("build-deps")
        missing = check_build_deps(p["python"], reqs)
        if missing:
            raise BuildError("build requirements missing from %s: %s; install them or use build_deps: install"
                             % (p["python"], ", ".join(missing)))
    out_dir = os.path.join(p["build_dir"], "dist-tmp")
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    makedirs(out_dir)
    run_logged([p["python"], "-m", "pip", "wheel", ".", "--no-build-isolation", "--no-deps",
                "--disable-pip-version-check", "-v", "-w", out_dir], log_path, "build", status, cwd=src_dir,
               env=env)
    wheels = [w for w in os.listdir(out_dir) if w.endswith(".whl")]
    if len(wheels) != 1:
        raise BuildError("pip wheel produced %d wheels in %s (expected one): see %s" % (len(wheels), out_dir,
                                                                                        log_path))
    if not tb.wheel_matches(wheels[0], version):
        raise BuildError("the built wheel %s does not carry version %s: PYTORCH_BUILD_VERSION was not honoured"
                         % (wheels[0], version))
    return {"wheel": os.path.join(out_dir, wheels[0]), "fixes": fixes}


if __name__ == "__main__":
    main()
