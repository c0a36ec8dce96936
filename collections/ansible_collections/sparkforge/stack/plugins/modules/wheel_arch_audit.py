#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: wheel_arch_audit
short_description: List the CUDA SASS/PTX architectures in a wheel, library or directory and judge a GPU target
version_added: "0.1.0"
description:
  - Reads the CUDA fat binaries (sections C(.nv_fatbin) and C(__nv_relfatbin)) inside every ELF shared
    library or object of a wheel, a directory tree (for example a venv's site-packages) or a single file.
    Needs neither the CUDA toolkit nor a GPU.
  - Returns, per library, the SASS architectures with their C(a) (arch-specific) and C(f) (family) variants,
    the PTX architectures and PTX ISA versions, the number of kernels per architecture, and a verdict for
    the target compute capability.
  - "Verdicts: C(native) (SASS for exactly the target), C(compatible) (SASS of the same major with a lower
    or equal minor, or a family C(f) target of that major), C(jit) (only PTX that the driver compiles, of
    an architecture at or below the target), C(unsupported). Arch-specific C(a) SASS counts only for exactly
    its capability. A library's verdict is that of the runnable SASS that carries the most code (kernels
    when every runnable arch has a count, else cubins), so a handful of extra C(sm_121a) kernels beside a
    full C(sm_120) build give C(compatible), not C(native)."
  - PTX counts as C(jit) only when the installed driver loads its ISA version (the C(.version) line of the PTX
    text). A driver JIT-compiles PTX up to the ISA of its own CUDA release (O(ptx_isa), the manifest's
    C(sparkforge_ptx_isa), maps the driver's CUDA release to that ISA). A library that runs only through PTX
    newer than that is C(unsupported), and RV(ptx_refusals) names the library and the ISA.
  - The summary verdict is the weakest verdict of the libraries that hold GPU code.
  - Reads only; never changes the host.
author:
  - sparkforge developers (@sparkforge)
options:
  path:
    description:
      - A wheel (C(.whl), read member by member), a shared library or object, or a directory to walk
        (files named C(*.so), C(*.so.N) and C(*.o)).
    type: path
    required: true
  target:
    description:
      - The compute capability to judge against, such as C(12.1), C(9.0) or C(sm_121).
      - When not given, the lowest capability of the host's GPUs (from C(nvidia-smi)); on a host without
        a GPU the libraries are listed without verdicts.
    type: str
  kernels:
    description:
      - Count the kernels in every cubin (decompressing compressed entries when a decoder is present).
      - When false only the fat binary headers are read, which is faster on very large libraries.
    type: bool
    default: true
  require:
    description:
      - Fail when the summary verdict is worse than this. C(any) never fails on the verdict.
    type: str
    choices: [native, compatible, jit, any]
    default: any
  nvidia_smi:
    description: Path or name of C(nvidia-smi), used when O(target) or O(driver_cuda) is not given.
    type: str
    default: nvidia-smi
  driver_cuda:
    description:
      - The installed driver's CUDA release (C(13.0)), as C(nvidia-smi) prints it (C(CUDA Version)) or
        C(cuDriverGetVersion) returns it; when not given, read from the banner of O(nvidia_smi).
      - Without it (no driver) or without O(ptx_isa), PTX is not held to the driver (RV(driver) says why).
    type: str
  ptx_isa:
    description:
      - The manifest's C(sparkforge_ptx_isa) (C(releases), rows of C(cuda) and C(isa)), the newest PTX ISA
        each CUDA release's driver loads.
    type: dict
attributes:
  check_mode:
    description: The module only reads; check mode returns the same result.
    support: full
  diff_mode:
    description: Not supported (nothing changes).
    support: none
notes:
  - C(cuobjdump --list-elf) prints family (C(f)) cubins without the letter (C(sm_120f) as C(sm_120));
    RV(libraries[].cuobjdump_elf) gives the names as cuobjdump prints them, for comparison.
  - A library linked from C(-rdc) objects holds both C(__nv_relfatbin) (the inputs) and C(.nv_fatbin)
    (what the CUDA runtime loads); only C(.nv_fatbin) is counted then, as cuobjdump does.
"""

EXAMPLES = r"""
- name: Check that the installed torch runs on this host's GPU without PTX JIT
  sparkforge.stack.wheel_arch_audit:
    path: /opt/sparkforge/venv/lib/python3.12/site-packages/torch/lib
    require: compatible

- name: Audit a wheel for DGX Spark (sm_121) before installing it
  sparkforge.stack.wheel_arch_audit:
    path: /opt/sparkforge/wheels/torch-2.11.0-cp312-cp312-linux_aarch64.whl
    target: "12.1"
  register: audit

- name: Show the verdict
  ansible.builtin.debug:
    msg: "{{ audit.verdict }}: {{ audit.libraries | map(attribute='path') | list }}"
"""

RETURN = r"""
input:
  description: The path audited.
  returned: always
  type: str
input_type:
  description: C(wheel), C(directory) or C(file).
  returned: always
  type: str
target:
  description: The capability judged against (C(null) when none was given and the host has no GPU).
  returned: always
  type: str
  sample: "12.1"
target_source:
  description: Where the target came from, C(argument), C(nvidia-smi) or C(none).
  returned: always
  type: str
scanned:
  description: How many candidate files were read.
  returned: always
  type: int
verdict:
  description: The weakest verdict of the libraries with GPU code (C(null) without a target or GPU code).
  returned: always
  type: str
  sample: compatible
driver:
  description: The driver's CUDA release and the newest PTX ISA it loads (C(ptx_isa_max), C(null) when unknown; C(note)
    says why).
  returned: always
  type: dict
  sample: {driver_cuda: "13.0", ptx_isa_max: "9.0", known: true, confirmed: true, note: null, needs: {"9.1": "13.1"}}
ptx_refusals:
  description: One sentence per library that runs only through PTX newer than the driver loads (its ISA, the driver
    it needs).
  returned: always
  type: list
  elements: str
zstd_decoder:
  description: Whether Zstandard-compressed cubins could be decompressed for kernel counts.
  returned: always
  type: bool
errors:
  description: Files that looked like ELF libraries but could not be read, with the reason.
  returned: always
  type: list
  elements: dict
libraries:
  description: One entry per library that holds GPU code.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: The library (relative to the wheel or directory).
      type: str
    sass:
      description: SASS architectures with their variant letter.
      type: list
      elements: str
      sample: [sm_90, sm_100, sm_120, sm_121a]
    ptx:
      description: PTX architectures.
      type: list
      elements: str
      sample: [compute_120]
    ptx_versions:
      description: PTX ISA versions of the PTX entries.
      type: list
      elements: str
    kernels:
      description: Kernels per SASS architecture (C(null) where a compressed cubin could not be read).
      type: dict
    cuobjdump_elf:
      description: The SASS entries as C(cuobjdump --list-elf) names them, one per entry.
      type: list
      elements: str
    cuobjdump_ptx:
      description: The PTX entries as C(cuobjdump --list-ptx) names them, one per entry.
      type: list
      elements: str
    compressed_entries:
      description: How many entries are compressed.
      type: int
    fatbin_sections:
      description: The sections read.
      type: list
      elements: str
    ignored_sections:
      description: Fat binary sections present but not loaded by the runtime (C(__nv_relfatbin) beside C(.nv_fatbin)).
      type: list
      elements: str
    verdict:
      description: This library's verdict for the target.
      type: str
    via:
      description: The architectures that can run on the target.
      type: list
      elements: str
    ptx_refused:
      description: The PTX (C(arch), C(isa)) that would run on the target but whose ISA the driver does not load.
      type: list
      elements: dict
"""

import os
import subprocess

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda.fatbin import (
    VERDICTS,
    FatbinError,
    audit,
)
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda.arch import ArchError, capability
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import ptx_isa
from ansible_collections.sparkforge.stack.plugins.module_utils.host.host_facts import driver_cuda as smi_driver_cuda


def smi_path(module):
    name = module.params["nvidia_smi"]
    return name if os.path.sep in name else module.get_bin_path(name, opt_dirs=["/usr/bin", "/usr/local/bin"])


def driver_limit(module):
    """What PTX the driver loads (ptx_isa.driver_limit), from the arguments or nvidia-smi's banner."""
    params = module.params
    cuda = params["driver_cuda"]
    if cuda:
        try:
            ptx_isa.key(cuda)
        except ptx_isa.PtxIsaError:
            module.fail_json(msg="driver_cuda %r is not a CUDA release: give one like 13.0 (nvidia-smi's "
                                 "'CUDA Version')" % cuda)
    elif smi_path(module):
        cuda = smi_driver_cuda(smi_path(module), 30)
    if not params["ptx_isa"]:
        return {"driver_cuda": cuda, "ptx_isa_max": None, "known": False, "confirmed": False,
                "note": "ptx_isa (the manifest's sparkforge_ptx_isa) was not given: PTX is not checked against the "
                        "driver"}
    try:
        return ptx_isa.driver_limit(cuda, params["ptx_isa"])
    except ptx_isa.PtxIsaError as exc:
        module.fail_json(msg="ptx_isa: %s" % exc)


def host_capability(module):
    """The lowest compute capability of the host's GPUs, or None (no driver / no GPU)."""
    path = smi_path(module)
    if not path:
        return None
    try:
        proc = subprocess.run([path, "--query-gpu=compute_cap", "--format=csv,noheader"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    caps = []
    for line in proc.stdout.splitlines():
        try:
            caps.append(capability(line))
        except ArchError:
            continue
    if proc.returncode != 0 or not caps:
        return None
    return "%d.%d" % min(caps)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            target=dict(type="str"),
            kernels=dict(type="bool", default=True),
            require=dict(type="str", choices=["native", "compatible", "jit", "any"], default="any"),
            nvidia_smi=dict(type="str", default="nvidia-smi"),
            driver_cuda=dict(type="str"),
            ptx_isa=dict(type="dict"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    target = params["target"]
    source = "argument"
    if target:
        try:
            capability(target)
        except ArchError:
            module.fail_json(msg="target %r is not a compute capability: give one like 12.1, 9.0 or sm_121" % target)
    else:
        target = host_capability(module)
        source = "nvidia-smi" if target else "none"
    if params["require"] != "any" and not target:
        module.fail_json(msg="require=%s needs a target: this host reports no GPU, so give target (e.g. 12.1)"
                         % params["require"])
    limit = driver_limit(module)
    try:
        result = audit(params["path"], target=target, kernels=params["kernels"], ptx_isa_max=limit["ptx_isa_max"])
    except FatbinError as exc:
        module.fail_json(msg=str(exc))
    except (OSError, ValueError) as exc:
        module.fail_json(msg="cannot read %s: %s" % (params["path"], exc))
    result["target_source"] = source
    result["driver"] = limit
    result["ptx_refusals"] = [ptx_isa.refusal(lib["path"], lib["ptx_refused"], limit)
                              for lib in result["libraries"] if lib.get("ptx_refused")]
    if params["require"] != "any" and result["verdict"]:
        if VERDICTS.index(result["verdict"]) > VERDICTS.index(params["require"]):
            weak = [lib["path"] for lib in result["libraries"]
                    if VERDICTS.index(lib["verdict"]) > VERDICTS.index(params["require"])]
            module.fail_json(msg="%s is %s on compute capability %s (required: %s); libraries below that: %s. "
                             "Install a build whose TORCH_CUDA_ARCH_LIST covers %s, or build from source."
                             % (params["path"], result["verdict"], target, params["require"], ", ".join(weak), target)
                             + "".join(" " + line for line in result["ptx_refusals"]),
                             **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
