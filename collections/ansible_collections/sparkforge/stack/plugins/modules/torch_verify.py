#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: torch_verify
short_description: Verify a PyTorch stack on its GPU with numerical checks and benchmarks, and write a report
version_added: "0.1.0"
description:
  - Runs a check script with the stack venv's python (O(python)) and returns versions (torch, CUDA, cuDNN,
    cuSPARSELt, NCCL, Triton), the device (name, compute capability, SMs, memory, unified or not),
    C(torch.cuda.get_arch_list()) and whether it covers the device, and the fat binary audit of torch's
    libraries for the device's capability (see M(sparkforge.stack.wheel_arch_audit)).
  - "Functional checks, each against a reference with a stated tolerance (relative Frobenius error; an output
    with NaN/Inf or with less than half the reference's norm fails whatever the tolerance, which catches
    kernels that return zeros): GEMM in fp32/tf32/fp16/bf16 against float64, FP8 C(torch._scaled_mm) where the
    capability is 8.9 or higher, SDPA with the flash, memory-efficient and cuDNN backends against the math
    backend, 2:4 semi-structured sparse matmul through cuSPARSELt, a Triton JIT kernel, C(torch.compile) of
    a small model against eager, NCCL initialisation in one process, and cuFile/GDS availability (reported,
    never failing)."
  - "Benchmarks (about two minutes at O(bench_scale=1)): GEMM per precision, batched GEMM, conv2d, SDPA per
    backend, LayerNorm/softmax, device copy bandwidth and a small transformer encoder, each also as a
    percentage of the peak of the O(platforms) row that matches the device (the report names the row and its
    sources). Each figure is a steady rate: the operation runs back to back for a second (the clocks settle
    under the power limit), then for at least a second more in chunks of about 20 ms between CUDA events,
    without host synchronisation between calls; the figure is the median chunk."
  - "While each benchmark runs, NVML (nvidia-ml-py in the venv) is sampled: SM and memory clock, power against
    the limit, temperature and the throttle reasons. They are recorded next to the figure in the JSON,
    Markdown and PNG, and the figure is flagged: throttled (thermal/hardware slowdown, power brake), low for
    the clock it ran at, unsteady, power-capped (a note: the sustained rate under the power limit), or
    no clocks when NVML is missing."
  - "Every GPU: the functional checks run on every visible GPU (O(gpus) selects a subset), each GPU in a
    process that sees only it (C(CUDA_VISIBLE_DEVICES)); the first GPU runs them with the benchmarks, the
    others in parallel afterwards. RV(per_gpu) has one row per GPU per check with the GPU's index, UUID and
    name; one failing GPU fails the host and the failure names it."
  - "Collectives, on two or more GPUs: NCCL all_reduce, all_gather and reduce_scatter across the selected
    GPUs (one process each), each checked for the exact expected values, then timed from 8 MiB to 1 GiB;
    bus bandwidth with nccl-tests' formulas (all_reduce algbw x 2(n-1)/n, all_gather and reduce_scatter
    algbw x (n-1)/n) and as a percentage of the link peak: NVLink links x per-link rate from
    C(nvidia-smi nvlink -s), else the PCIe link. On one GPU they are skipped, with that reason."
  - Writes the report as JSON, Markdown and a PNG bar chart under O(report_dir) when given, plus a PNG of
    bus bandwidth against message size when collectives ran.
  - Without a GPU or without CUDA torch the result says so (RV(status) C(no_gpu) or C(no_torch)) and the
    module fails unless O(fail_on_failure=false).
author:
  - sparkforge developers (@sparkforge)
options:
  python:
    description: The stack venv's Python interpreter, which imports torch.
    type: path
    required: true
  report_dir:
    description: Directory for C(<report_name>.json), C(.md) and C(.png). No files are written when not given.
    type: path
  report_name:
    description: Base name of the report files.
    type: str
    default: verify
  host_label:
    description: Name of this host in the report. Defaults to the machine's host name.
    type: str
  checks:
    description:
      - The functional check groups to run (all by default).
      - The groups are the C(@check) functions of the check script, module_utils C(torch_check_script) (its
        C(check_groups()); the one list, so that adding a check touches that file alone). A name that is not
        one fails the task with the list of the known groups, before anything runs.
    type: list
    elements: str
  benchmarks:
    description: Run the benchmarks.
    type: bool
    default: true
  extended_benchmarks:
    description:
      - Also run the rest of seed 003's list (GEMM size sweep and FP64, depthwise conv, SDPA default dispatch,
        linear layers, vector add, fp16 encoder, ResNet-50 when torchvision is installed, torch.compile
        speed-up, GPU-to-GPU copy on hosts with several GPUs). Only with O(benchmarks=true).
    type: bool
    default: true
  bench_scale:
    description: Multiplies the benchmark iteration counts (0.2 for a quick look, 1 for about two minutes).
    type: float
    default: 1.0
  gemm_size:
    description: M=N=K of the GEMM benchmarks.
    type: int
    default: 8192
  audit:
    description: Audit torch's C(lib) directory for the device's compute capability and include the verdict.
    type: bool
    default: true
  venv_audit:
    description:
      - Audit every shared object with GPU code in the venv's site-packages (not only torch's) for the device's
        compute capability, per distribution (from the RECORD files). A distribution none of whose libraries
        runs on the device fails the host; one that runs only through the driver's PTX JIT is noted.
    type: bool
    default: true
  venv_audit_exempt:
    description:
      - Distributions whose device code is not (all) in the fat binaries the audit reads, with the reason
        (the manifest's C(sparkforge_venv_audit_exempt)); they are reported with it and never fail the host.
    type: dict
    default: {}
  ptx_isa:
    description:
      - The manifest's C(sparkforge_ptx_isa) (C(releases), rows of C(cuda) and C(isa)). Both audits then count PTX
        as C(jit) only where the driver torch runs on (C(cuDriverGetVersion), read by the check script) loads its ISA;
        a library that runs only through newer PTX is C(unsupported), named with its ISA. Without it PTX is not
        held to the driver.
    type: dict
  smoke_matrix:
    description:
      - The ML package matrix (the manifest's C(sparkforge_ml_packages)); every entry with a C(smoke) test whose
        distribution is installed in the venv runs it once (an import and one op against a plain PyTorch reference
        on the GPU). A failure names the package, the op and the error and fails the host; where torch sees no GPU
        each is skipped with the reason.
    type: dict
    default: {}
  platforms:
    description:
      - Peak figures per platform, as in the manifest's C(sparkforge_gpu_platforms) (a C(match) regex on the
        device name, C(tflops) per precision, C(mem_bw_gbs)). Empty means no percentages.
      - A row without C(tflops) only gives GPUs their platform class (M(sparkforge.stack.gpu_facts)); it is never
        the peak row.
    type: dict
    default: {}
  env:
    description: Extra environment for the check script (for example the runtime_env settings).
    type: dict
    default: {}
  timeout:
    description: Seconds the check script may run.
    type: int
    default: 900
  fail_on_failure:
    description:
      - Fail the task when a check fails or no GPU is usable (after the report is written).
      - Set to false to collect the report first and fail later (the verify role does).
    type: bool
    default: true
  gpus:
    description:
      - GPU indices (as C(nvidia-smi) numbers them) to check. Omitted means every visible GPU.
    type: list
    elements: int
  collectives:
    description: Run the NCCL collectives across the selected GPUs when there are two or more.
    type: bool
    default: true
  collective_sizes:
    description: Message sizes in bytes for the collective bandwidth. Omitted means 8 MiB to 1 GiB in powers of two.
    type: list
    elements: int
  collective_iters:
    description: Timed iterations per collective and size (after 5 warm-up ones).
    type: int
    default: 20
  inject_failure:
    description:
      - For tests only. Marks check C(check) of GPU C(gpu) failed after it ran, to prove that one bad GPU
        fails the host and that the failure names it. Never set it in production.
    type: dict
  acceptance:
    description:
      - The result of M(sparkforge.stack.torch_acceptance) after a source build (PyTorch's own tests). The report
        gets its counts, suites and verdict; over budget it is a failure of the host.
    type: dict
attributes:
  check_mode:
    description: Reads versions and the device only; runs no checks or benchmarks and writes no report.
    support: full
  diff_mode:
    description: Not supported.
    support: none
"""

EXAMPLES = r"""
- name: Verify the stack and write the report
  sparkforge.stack.torch_verify:
    python: /opt/sparkforge/venv/bin/python
    report_dir: /opt/sparkforge/reports/latest
    platforms: "{{ sparkforge_gpu_platforms }}"
  register: verify

- name: Quick functional check only
  sparkforge.stack.torch_verify:
    python: /opt/sparkforge/venv/bin/python
    benchmarks: false
    checks: [gemm, sdpa]
"""

RETURN = r"""
status:
  description: C(ok), C(no_gpu) (CPU-only torch or no visible GPU) or C(no_torch).
  returned: always
  type: str
passed:
  description: True when every check passed, torch covers the device and the audit found no unsupported library.
  returned: always
  type: bool
summary:
  description: For example C(13/13 checks passed).
  returned: always
  type: str
failures:
  description: One line per failure.
  returned: always
  type: list
  elements: str
failed_checks:
  description: Names of the failed checks.
  returned: always
  type: list
  elements: str
versions:
  description: torch, cuda, cudnn, cusparselt, nccl and triton versions.
  returned: always
  type: dict
device:
  description: Name, capability, sm_count, memory_bytes, integrated, l2_bytes, count (null without a GPU).
  returned: always
  type: dict
arch_list:
  description: torch.cuda.get_arch_list().
  returned: always
  type: list
  elements: str
arch_coverage:
  description: Whether the arch list covers the device (covers, level, via, capability_warning).
  returned: when a GPU was found
  type: dict
audit_verdict:
  description: The fat binary audit verdict of torch's libraries for the device.
  returned: always
  type: str
venv_audit:
  description:
    - With O(venv_audit), the audit of the whole venv (target, verdict, packages with their libraries and verdicts,
      failures, notes, seconds); null otherwise and in check mode. Each GPU library's C(links) lists why it cannot
      load here (a CUDA library it needs by major version that the host lacks (a distribution fails when none of its
      GPU libraries loads), or a c10/at/torch symbol the venv's torch does not export, always a failure).
  returned: always
  type: dict
smoke:
  description: Each smoke test run (package, op, status passed/failed/skipped, error, reason, max_abs_err, device).
  returned: always
  type: list
  elements: dict
checks:
  description: Each check with status (pass, fail, skip, unavailable, info), rel_err, tolerance, reference, detail.
  returned: always
  type: list
  elements: dict
benchmarks:
  description:
    - Each benchmark with group, name, median_ms, tflops or gbs, pct_of_peak, peak_row (the peak table row used),
      pct_of_clock_peak (against the peak scaled to the clock it ran at), timing (window, chunks, spread),
      clocks (SM/memory MHz, power and limit, temperature, throttle reasons) and flags (flag, severity, detail).
  returned: always
  type: list
  elements: dict
derived:
  description: tf32_speedup, sdpa_fastest_correct and compile_speedup.
  returned: when a GPU was found
  type: dict
platform:
  description: The matching peak table entry (key, label, peaks).
  returned: always
  type: dict
report_files:
  description:
    - Paths of the JSON, Markdown and PNG report (empty when none was written).
    - In check mode, the paths a real run would write (reported as a change; nothing is written).
  returned: always
  type: dict
png_renderer:
  description: C(matplotlib) or C(builtin).
  returned: when a report was written
  type: str
script_stderr_tail:
  description: The last 2000 characters the check script wrote to stderr (warnings, compile logs).
  returned: always
  type: str
per_gpu:
  description:
    - C(gpus) (index, uuid, name, capability, status), C(rows) (one per GPU per check) and C(failures)
      (each naming its GPU).
  returned: when checks ran on a GPU
  type: dict
collectives:
  description:
    - C(world), C(checks) (exactness per collective), C(bandwidth) (op, bytes, ms, algbw_gbs, busbw_gbs,
      pct_of_link_peak) and C(link_peak); or C(skipped) with the reason.
  returned: when checks ran on a GPU
  type: dict
acceptance:
  description: Counts, suites and verdict of PyTorch's own tests after the build, when I(acceptance) was given.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkforge.stack.plugins.module_utils.verify.torch_checks import VerifyError
from ansible_collections.sparkforge.stack.plugins.module_utils.verify.torch_verify_job import ARGUMENT_SPEC, VerifyJob
from ansible_collections.sparkforge.stack.plugins.module_utils._common import run_env


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    # The venv's python runs in the run's own environment: no PYTHON*/PIP_* of the host (_common/run_env.py).
    run_env.scrub()
    try:
        result, failure = VerifyJob(module.params, module, check_mode=module.check_mode).run()
    except VerifyError as exc:
        module.fail_json(msg=str(exc))
    if failure:
        module.fail_json(msg=failure, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
