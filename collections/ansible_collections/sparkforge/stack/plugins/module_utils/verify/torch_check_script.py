# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Kept whole: the host runs this file with a Python that cannot import the collection (see the docstring), so
# every check and its helpers stay in it; only the NVML sampler is beside it (nvml_sampler.py, shipped with it).
"""The check script torch_verify runs with the stack venv's python, and the one list of its check groups.

This file is both a module_utils (torch_checks imports it for ``check_groups()`` and ships its text in
the module's payload) and the script itself: torch_checks writes this file's source to the host and
runs ``<venv python> <file> '<json config>'``, because the checks need the venv's torch, which the
module's interpreter does not have.  So it imports only the standard library at the top; torch, triton
and pynvml are imported by ``main()`` and the checks, in the venv.  The host runs it with a Python that cannot
import the collection, so all it needs is here, but for the NVML sampler (nvml_sampler.py), which torch_checks
writes into the same directory and the benchmarks load from beside this file.

``main()`` reads the JSON config from argv[1], prints one JSON document on its last stdout line, and
never raises: a missing torch or a missing GPU is a result ("status": "no_torch" / "no_gpu"), and an
exception inside one check fails that check alone.

A check group is a function decorated with ``@check("<group>")`` below: that is all it takes to add
one (torch_verify's ``checks`` option and the verify role take their names from ``check_groups()``).
Groups run in the order they are defined.

Every functional check compares against a reference with a stated tolerance:
``rel_err = ||out - ref||_F / ||ref||_F`` must be <= ``tolerance``, the output
must be finite, and its norm must be at least half the reference's (an
all-zero output, the sm_121 empty-kernel trap, fails even with a huge
tolerance).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math
import os
import platform
import statistics
import sys
import time
import traceback
import warnings

# The run's state, set by main() (module globals, so that the checks and benchmarks read them as names).
CFG = {}
OUT = {}
torch = None  # the venv's torch, imported by main()
cap = None  # the device's compute capability, (major, minor)
DEV = "cuda"
ONLY = set()
SCALE = 1.0
NVML = None
# Each figure is the GPU's steady rate: the operation runs back to back for WARM_S seconds first (the power
# and clock controller settles: a dense GEMM on a 700 W H100 drops from 1980 MHz to about 1.4 GHz within
# 100 ms and dips further when the one-second power average reaches the limit), then for at least TIME_S
# seconds in chunks of >= 20 ms between CUDA events, with no host synchronisation between launches.
WARM_S = 1.0
TIME_S = 1.0
LAST = {}
# The check groups, (name, function) in the order they run: filled by @check below.
CHECKS = []


def emit():
    OUT["seconds"] = round(time.time() - OUT["started"], 2)
    sys.stdout.write("\n" + json.dumps(OUT) + "\n")
    sys.stdout.flush()


def stats(out, ref):
    out = out.double()
    ref = ref.double()
    finite = bool(torch.isfinite(out).all())
    ref_norm = float(ref.norm())
    out_norm = float(out.norm()) if finite else float("nan")
    rel = float((out - ref).norm() / ref_norm) if finite and ref_norm else float("inf")
    return finite, rel, out_norm, ref_norm


def record(name, tolerance, out, ref, reference, extra=None):
    finite, rel, out_norm, ref_norm = stats(out, ref)
    problems = []
    if not finite:
        problems.append("output has NaN/Inf")
    elif out_norm < 0.5 * ref_norm:
        problems.append("output norm %.3g is less than half the reference's %.3g (zeros?)" % (out_norm, ref_norm))
    elif rel > tolerance:
        problems.append("relative error %.3g > tolerance %.3g" % (rel, tolerance))
    item = {"name": name, "status": "fail" if problems else "pass", "rel_err": rel if finite else None,
            "tolerance": tolerance, "reference": reference, "detail": "; ".join(problems) or "ok"}
    if extra:
        item.update(extra)
    OUT["checks"].append(item)


def skip(name, reason, status="skip"):
    OUT["checks"].append({"name": name, "status": status, "detail": reason})


def check(name):
    """Register a functional check group; main() runs it (when the config's checks select it) in file order."""
    def wrap(func):
        CHECKS.append((name, func))
        return func
    return wrap


def check_groups():
    """The check groups' names, in the order they run: the one list torch_verify and the verify role use."""
    return tuple(name for name, _func in CHECKS)


def run_checks():
    """Each selected group; an exception fails that group's check alone."""
    for name, func in CHECKS:
        if ONLY and name not in ONLY and name.split(":")[0] not in ONLY:
            continue
        try:
            func()
        except Exception as exc:
            OUT["checks"].append({"name": name, "status": "fail", "detail": "%s: %s" % (type(exc).__name__, exc),
                                  "trace": traceback.format_exc()[-1500:]})
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False


@check("gemm")
def _gemm():
    n = 2048
    a = torch.randn(n, n, device=DEV)
    b = torch.randn(n, n, device=DEV)
    ref = a.double() @ b.double()
    for name, dtype, tf32, tol in (("fp32", torch.float32, False, 1e-5), ("tf32", torch.float32, True, 5e-3),
                                   ("fp16", torch.float16, False, 5e-3), ("bf16", torch.bfloat16, False, 2e-2)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        x, y = a.to(dtype), b.to(dtype)
        out = x @ y
        torch.cuda.synchronize()
        record("gemm_" + name, tol, out, x.double() @ y.double(), "float64 matmul of the same (rounded) inputs")
    torch.backends.cuda.matmul.allow_tf32 = False


@check("fp8")
def _fp8():
    name = "fp8_scaled_mm"
    if cap < (8, 9):
        return skip(name, "compute capability %d.%d has no FP8 tensor cores (needs >= 8.9)" % cap)
    if not hasattr(torch, "_scaled_mm"):
        return skip(name, "this torch has no torch._scaled_mm", "fail")
    m = k = n = 1024
    a = (torch.randn(m, k, device=DEV) * 0.5).to(torch.float8_e4m3fn)
    b = (torch.randn(n, k, device=DEV) * 0.5).to(torch.float8_e4m3fn).t()
    one = torch.tensor(1.0, device=DEV)
    out = torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    ref = a.double() @ b.double()
    record(name, 1e-2, out, ref, "float64 matmul of the fp8 values; output is bf16")


@check("sdpa")
def _sdpa():
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F
    shapes = ((2, 8, 512, 64, False), (2, 8, 1024, 128, True))
    backends = (("flash", SDPBackend.FLASH_ATTENTION), ("mem_efficient", SDPBackend.EFFICIENT_ATTENTION),
                ("cudnn", SDPBackend.CUDNN_ATTENTION))
    for name, backend in backends:
        worst = None
        try:
            for bsz, heads, seq, dim, causal in shapes:
                q, k, v = (torch.randn(bsz, heads, seq, dim, device=DEV, dtype=torch.bfloat16) for _n in range(3))
                with sdpa_kernel([SDPBackend.MATH]):
                    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
                with sdpa_kernel([backend]):
                    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                torch.cuda.synchronize()
                res = stats(out, ref)
                if worst is None or not res[0] or res[1] > worst[0][1]:
                    worst = (res, out, ref, (bsz, heads, seq, dim, causal))
        except RuntimeError as exc:
            text = str(exc)
            if "No available kernel" in text or "not supported" in text.lower():
                skip("sdpa_" + name, "backend unavailable here: " + text.splitlines()[0][:300], "unavailable")
                continue
            raise
        record("sdpa_" + name, 2e-2, worst[1], worst[2], "math backend in float32 on the same bf16 inputs",
               {"shape": "B=%d H=%d S=%d D=%d causal=%s" % worst[3]})


@check("sparse24")
def _sparse():
    name = "sparse_2to4_cusparselt"
    try:
        available = torch.backends.cusparselt.is_available()
    except Exception:
        available = False
    if not available:
        return skip(name, "torch was built without cuSPARSELt", "fail")
    from torch.sparse import SparseSemiStructuredTensor, to_sparse_semi_structured
    SparseSemiStructuredTensor._FORCE_CUTLASS = False
    m = k = n = 1024
    mask = torch.tensor([0, 0, 1, 1], device=DEV, dtype=torch.float16).tile((m, k // 4))
    a = torch.randn(m, k, device=DEV, dtype=torch.float16) * mask
    b = torch.randn(k, n, device=DEV, dtype=torch.float16)
    sparse = to_sparse_semi_structured(a)
    out = torch.mm(sparse, b)
    record(name, 1e-2, out, a.double() @ b.double(), "dense float64 matmul of the same 2:4 matrix",
           {"backend": type(sparse).__name__})


@check("triton")
def _triton():
    import triton
    import triton.language as tl

    @triton.jit
    def axpy(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, alpha * x + y, mask=mask)

    n = 1 << 20
    x = torch.randn(n, device=DEV)
    y = torch.randn(n, device=DEV)
    out = torch.empty_like(x)
    axpy[(triton.cdiv(n, 1024),)](x, y, out, 2.0, n, BLOCK=1024)
    torch.cuda.synchronize()
    record("triton_jit", 1e-6, out, 2.0 * x.double() + y.double(), "float64 2*x+y")


@check("compile")
def _compile():
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.LayerNorm(512),
                                torch.nn.Linear(512, 128)).to(DEV)
    x = torch.randn(64, 256, device=DEV)
    with torch.no_grad():
        ref = model(x)
        compiled = torch.compile(model)
        start = time.time()
        out = compiled(x)
        torch.cuda.synchronize()
    record("torch_compile", 1e-4, out, ref, "the same model in eager mode (fp32, TF32 off)",
           {"compile_seconds": round(time.time() - start, 2)})


@check("nccl")
def _nccl():
    import socket
    import torch.distributed as dist
    if not dist.is_nccl_available():
        return skip("nccl_init", "this torch has no NCCL", "fail")
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%d" % port, rank=0, world_size=1)
    try:
        t = torch.full((1024,), 3.0, device=DEV)
        dist.all_reduce(t)
        torch.cuda.synchronize()
        record("nccl_init", 0.0, t, torch.full((1024,), 3.0, device=DEV, dtype=torch.float64),
               "all_reduce over a world of 1 returns its input")
    finally:
        dist.destroy_process_group()


@check("gds")
def _gds():
    import ctypes
    import glob
    candidates = []
    for base in sys.path:
        candidates += glob.glob(os.path.join(base, "nvidia", "cufile", "lib", "libcufile.so*"))
        candidates += glob.glob(os.path.join(base, "nvidia", "cu1*", "lib", "libcufile.so*"))
    candidates += ["libcufile.so.0", "libcufile.so"]
    lib = None
    for cand in candidates:
        try:
            lib = ctypes.CDLL(cand)
            break
        except OSError:
            continue
    info = {"library": cand if lib else None, "torch_gds": hasattr(torch.cuda, "gds")}
    if lib is None:
        OUT["checks"].append(dict({"name": "gds_cufile", "status": "info", "detail": "libcufile not found"}, **info))
        return

    class Status(ctypes.Structure):
        _fields_ = [("err", ctypes.c_int), ("cu_err", ctypes.c_int)]
    lib.cuFileDriverOpen.restype = Status
    status = lib.cuFileDriverOpen()
    if status.err == 0:
        lib.cuFileDriverClose()
    info["driver_open"] = status.err
    OUT["checks"].append(dict({"name": "gds_cufile", "status": "info",
                               "detail": "cuFile driver opened (GDS usable)" if status.err == 0 else
                               "cuFileDriverOpen returned %d: GPUDirect Storage is not usable here "
                               "(needs nvidia-fs / the open kernel modules); torch falls back to POSIX I/O" % status.err},
                              **info))


# ------------------------------------------------------------ benchmarks ----

def _sampler():
    """The NVML sampler's class, from nvml_sampler.py beside this file: torch_checks.run_script writes both files
    into one directory on the host, and in the collection they are siblings too. Loaded by path, so the script
    needs neither the collection nor a change to sys.path."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nvml_sampler.py")
    spec = importlib.util.spec_from_file_location("sparkforge_nvml_sampler", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Nvml


def bench(func, iters, warmup=3):
    """Median ms per call over timed chunks (see WARM_S/TIME_S); the window and chunk spread go to LAST."""
    done = 0
    start_wall = time.time()
    mark = torch.cuda.Event(enable_timing=True)
    first = torch.cuda.Event(enable_timing=True)
    first.record()
    while True:
        func()
        done += 1
        if done % 4 == 0 or done < 4:
            mark.record()
            mark.synchronize()  # keeps the host within a few calls of the GPU, so wall time means GPU time
            if done >= warmup and time.time() - start_wall >= WARM_S:
                break
    per_call_ms = max(first.elapsed_time(mark) / done, 1e-3)
    chunk = max(1, int(math.ceil(20.0 / per_call_ms)))
    chunks = []
    calls = 0
    t0 = time.time()
    prev_end = None
    while calls < iters or time.time() - t0 < TIME_S or len(chunks) < 3:
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _n in range(chunk):
            func()
        end.record()
        chunks.append((start, end))
        calls += chunk
        if prev_end is not None:
            prev_end.synchronize()  # one chunk stays queued: the GPU never waits for the host
        prev_end = end
    prev_end.synchronize()
    t1 = time.time()
    per = sorted(s.elapsed_time(e) / chunk for s, e in chunks)
    median = statistics.median(per)
    LAST.clear()
    LAST.update({"t0": round(t0, 3), "t1": round(t1, 3), "calls": calls, "chunk_calls": chunk,
                 "chunks": len(chunks), "chunk_spread": round((per[-1] - per[0]) / median, 4) if median else None,
                 "warm_s": round(t0 - start_wall, 2)})
    return median


def add_bench(group, name, ms, flops=None, nbytes=None, kind=None, extra=None):
    item = {"group": group, "name": name, "median_ms": round(ms, 4)}
    if flops:
        item["tflops"] = round(flops / ms / 1e9, 2)
    if nbytes:
        item["gbs"] = round(nbytes / ms / 1e6, 1)
    if kind:
        item["peak_key"] = kind
    if extra:
        item.update(extra)
    if LAST and not math.isnan(ms):
        item["timing"] = dict(LAST)
        if NVML is not None and NVML.info.get("available"):
            item["nvml_samples"] = NVML.window(LAST["t0"], LAST["t1"])
    LAST.clear()
    OUT["benchmarks"].append(item)


def iters(n):
    # The least number of timed calls; the timed window also lasts at least TIME_S.
    return max(3, int(5 * n * SCALE))


def run_benchmarks():
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    n = int(CFG.get("gemm_size", 8192))
    a32 = torch.randn(n, n, device=DEV)
    b32 = torch.randn(n, n, device=DEV)
    for name, dtype, tf32 in (("fp32", torch.float32, False), ("tf32", torch.float32, True),
                              ("fp16", torch.float16, False), ("bf16", torch.bfloat16, False)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a, b = a32.to(dtype), b32.to(dtype)
        add_bench("gemm", "%s %dx%dx%d" % (name, n, n, n), bench(lambda: a @ b, iters(10 if name != "fp32" else 5)),
                  flops=2.0 * n ** 3, kind=name)
        del a, b
    torch.backends.cuda.matmul.allow_tf32 = False
    if cap >= (8, 9) and hasattr(torch, "_scaled_mm"):
        a8 = a32.to(torch.float8_e4m3fn)
        b8 = b32.to(torch.float8_e4m3fn).t().contiguous().t()
        one = torch.tensor(1.0, device=DEV)
        add_bench("gemm", "fp8 %dx%dx%d (_scaled_mm)" % (n, n, n),
                  bench(lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16), iters(10)),
                  flops=2.0 * n ** 3, kind="fp8")
        del a8, b8
    del a32, b32
    for name, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
        a = torch.randn(32, 1024, 1024, device=DEV, dtype=dtype)
        b = torch.randn(32, 1024, 1024, device=DEV, dtype=dtype)
        add_bench("batched_gemm", "%s 32x1024x1024" % name, bench(lambda: torch.bmm(a, b), iters(20)),
                  flops=2.0 * 32 * 1024 ** 3, kind=name)
    torch.backends.cudnn.benchmark = True
    for cin, cout, hw in ((64, 128, 112), (256, 512, 28)):
        x = torch.randn(32, cin, hw, hw, device=DEV, dtype=torch.float16).to(memory_format=torch.channels_last)
        conv = torch.nn.Conv2d(cin, cout, 3, padding=1).to(DEV, torch.float16).to(memory_format=torch.channels_last)
        with torch.no_grad():
            ms = bench(lambda: conv(x), iters(20))
        add_bench("conv2d", "fp16 B=32 %d->%d %dx%d k3" % (cin, cout, hw, hw), ms,
                  flops=2.0 * 32 * cout * hw * hw * cin * 9, kind="fp16")
    bsz, heads, seq, dim = 4, 32, 4096, 128
    q, k, v = (torch.randn(bsz, heads, seq, dim, device=DEV, dtype=torch.bfloat16) for _n in range(3))
    flops = 4.0 * bsz * heads * seq * seq * dim / 2  # causal: half the score matrix
    for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("mem_efficient", SDPBackend.EFFICIENT_ATTENTION),
                          ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        try:
            with sdpa_kernel([backend]):
                ms = bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), iters(10))
            add_bench("sdpa", "%s bf16 B=%d H=%d S=%d D=%d causal" % (name, bsz, heads, seq, dim), ms,
                      flops=flops, kind="bf16", extra={"backend": name})
        except RuntimeError as exc:
            add_bench("sdpa", "%s (unavailable)" % name, float("nan"),
                      extra={"backend": name, "error": str(exc).splitlines()[0][:200]})
    del q, k, v
    x = torch.randn(8, 2048, 4096, device=DEV, dtype=torch.float16)
    ln = torch.nn.LayerNorm(4096).to(DEV, torch.float16)
    with torch.no_grad():
        add_bench("norm", "layernorm fp16 [8,2048,4096]", bench(lambda: ln(x), iters(20)), nbytes=2.0 * x.numel() * 2,
                  kind="mem_bw")
    s = torch.randn(8, 32, 2048, 2048, device=DEV, dtype=torch.float16)
    add_bench("norm", "softmax fp16 [8,32,2048,2048]", bench(lambda: torch.softmax(s, dim=-1), iters(20)),
              nbytes=2.0 * s.numel() * 2, kind="mem_bw")
    del x, s
    size = int(CFG.get("copy_bytes", 1 << 30))
    src = torch.empty(size, dtype=torch.uint8, device=DEV)
    dst = torch.empty_like(src)
    add_bench("memory", "device copy %d MiB" % (size >> 20), bench(lambda: dst.copy_(src), iters(20)),
              nbytes=2.0 * size, kind="mem_bw", extra={"counts": "bytes read + written"})
    del src, dst
    layer = torch.nn.TransformerEncoderLayer(1024, 16, 4096, batch_first=True, dtype=torch.bfloat16, device=DEV)
    enc = torch.nn.TransformerEncoder(layer, 6, enable_nested_tensor=False).eval()
    x = torch.randn(8, 512, 1024, device=DEV, dtype=torch.bfloat16)
    with torch.no_grad():
        ms = bench(lambda: enc(x), iters(10))
    add_bench("model", "transformer encoder 6x d=1024 h=16 bf16 B=8 S=512", ms,
              extra={"sequences_per_s": round(8 / ms * 1e3, 1)})


def more_benchmarks():
    """The rest of seed 003's list, each group on its own so one failure does not stop the others."""
    import torch.nn.functional as F
    errors = OUT.setdefault("benchmark_errors", [])

    def guarded(name, func):
        try:
            func()
        except Exception as exc:
            errors.append("%s: %s: %s" % (name, type(exc).__name__, str(exc).splitlines()[0][:300] if str(exc) else ""))
        torch.cuda.empty_cache()

    def gemm_sweep():
        for n in (1024, 2048, 4096, 16384):
            a = torch.randn(n, n, device=DEV, dtype=torch.float16)
            b = torch.randn(n, n, device=DEV, dtype=torch.float16)
            add_bench("gemm_sweep", "fp16 %dx%dx%d" % (n, n, n), bench(lambda: a @ b, iters(10 if n < 16384 else 5)),
                      flops=2.0 * n ** 3, kind="fp16")
        n = 4096
        a = torch.randn(n, n, device=DEV, dtype=torch.float64)
        add_bench("gemm_sweep", "fp64 %dx%dx%d" % (n, n, n), bench(lambda: a @ a, iters(3)), flops=2.0 * n ** 3,
                  kind="fp64")

    def batched_tf32():
        torch.backends.cuda.matmul.allow_tf32 = True
        a = torch.randn(32, 1024, 1024, device=DEV)
        b = torch.randn(32, 1024, 1024, device=DEV)
        add_bench("batched_gemm", "tf32 32x1024x1024", bench(lambda: torch.bmm(a, b), iters(20)),
                  flops=2.0 * 32 * 1024 ** 3, kind="tf32")
        torch.backends.cuda.matmul.allow_tf32 = False

    def depthwise():
        for ch, hw in ((64, 112), (256, 56), (512, 28)):
            x = torch.randn(32, ch, hw, hw, device=DEV, dtype=torch.float16).to(memory_format=torch.channels_last)
            conv = torch.nn.Conv2d(ch, ch, 3, padding=1, groups=ch).to(DEV, torch.float16).to(
                memory_format=torch.channels_last)
            with torch.no_grad():
                add_bench("conv2d_depthwise", "fp16 B=32 C=%d %dx%d k3" % (ch, hw, hw), bench(lambda: conv(x), iters(20)),
                          nbytes=2.0 * x.numel() * 2, kind="mem_bw")

    def sdpa_default():
        for dtype, name, bsz, heads, seq, dim in ((torch.float16, "fp16", 8, 12, 512, 64),
                                                  (torch.float16, "fp16", 8, 12, 2048, 64),
                                                  (torch.bfloat16, "bf16", 4, 32, 2048, 128)):
            q, k, v = (torch.randn(bsz, heads, seq, dim, device=DEV, dtype=dtype) for _n in range(3))
            add_bench("sdpa_default", "%s B=%d H=%d S=%d D=%d (default dispatch)" % (name, bsz, heads, seq, dim),
                      bench(lambda: F.scaled_dot_product_attention(q, k, v), iters(20)),
                      flops=4.0 * bsz * heads * seq * seq * dim, kind=name)

    def linear():
        for dtype, name, rows, out in ((torch.float16, "fp16", 1, 11008), (torch.float16, "fp16", 128, 4096),
                                       (torch.bfloat16, "bf16", 512, 4096)):
            x = torch.randn(32, rows, 4096, device=DEV, dtype=dtype)
            lin = torch.nn.Linear(4096, out, device=DEV, dtype=dtype)
            with torch.no_grad():
                add_bench("linear", "%s [32,%d,4096]->%d" % (name, rows, out), bench(lambda: lin(x), iters(20)),
                          flops=2.0 * 32 * rows * 4096 * out, kind=name)

    def vector_add():
        n = 256 * 1024 * 1024  # 512 MB of fp16 per operand
        a = torch.randn(n, device=DEV, dtype=torch.float16)
        b = torch.randn(n, device=DEV, dtype=torch.float16)
        c = torch.empty_like(a)
        add_bench("memory", "vector add fp16 3x512 MB", bench(lambda: torch.add(a, b, out=c), iters(20)),
                  nbytes=3.0 * n * 2, kind="mem_bw", extra={"counts": "2 reads + 1 write"})

    def encoder_fp16():
        layer = torch.nn.TransformerEncoderLayer(1024, 16, 4096, batch_first=True, dtype=torch.float16, device=DEV)
        enc = torch.nn.TransformerEncoder(layer, 6, enable_nested_tensor=False).eval()
        for bsz, seq in ((8, 128), (4, 1024), (1, 4096)):
            x = torch.randn(bsz, seq, 1024, device=DEV, dtype=torch.float16)
            with torch.no_grad():
                ms = bench(lambda: enc(x), iters(10))
            add_bench("model", "transformer encoder 6x d=1024 h=16 fp16 B=%d S=%d" % (bsz, seq), ms,
                      extra={"sequences_per_s": round(bsz / ms * 1e3, 1)})

    def resnet50():
        import torchvision
        model = torchvision.models.resnet50(weights=None).to(DEV, torch.float16).to(memory_format=torch.channels_last).eval()
        for bsz in (1, 64):
            x = torch.randn(bsz, 3, 224, 224, device=DEV, dtype=torch.float16).to(memory_format=torch.channels_last)
            with torch.no_grad():
                ms = bench(lambda: model(x), iters(10))
            add_bench("model", "resnet50 fp16 B=%d" % bsz, ms, extra={"images_per_s": round(bsz / ms * 1e3, 1)})

    def compile_speedup():
        model = torch.nn.Sequential(*[m for _n in range(4) for m in (torch.nn.Linear(1024, 1024), torch.nn.GELU(),
                                                                     torch.nn.LayerNorm(1024))]).to(DEV).eval()
        x = torch.randn(8, 1024, device=DEV)
        compiled = torch.compile(model, mode="reduce-overhead")
        with torch.no_grad():
            eager = bench(lambda: model(x), iters(30))
            add_bench("compile", "MLP 4x(Linear+GELU+LayerNorm) d=1024 B=8 eager", eager)
            fast = bench(lambda: compiled(x), iters(30), warmup=5)  # add_bench right after: it takes bench's window
        add_bench("compile", "same, torch.compile mode=reduce-overhead", fast, extra={"speedup": round(eager / fast, 2)})

    def peer_copy():
        if torch.cuda.device_count() < 2:
            return
        size = 1 << 30
        src = torch.empty(size, dtype=torch.uint8, device="cuda:0")
        dst = torch.empty(size, dtype=torch.uint8, device="cuda:1")
        add_bench("multi_gpu", "GPU0 -> GPU1 1 GiB", bench(lambda: dst.copy_(src), iters(10)), nbytes=float(size),
                  extra={"peer_access": torch.cuda.can_device_access_peer(0, 1)})

    for name, func in (("gemm_sweep", gemm_sweep), ("batched_tf32", batched_tf32), ("depthwise", depthwise),
                       ("sdpa_default", sdpa_default), ("linear", linear), ("vector_add", vector_add),
                       ("encoder_fp16", encoder_fp16), ("resnet50", resnet50), ("compile_speedup", compile_speedup),
                       ("peer_copy", peer_copy)):
        guarded(name, func)


def main(argv=None):
    """Run the checks (and the benchmarks) the JSON config in argv[1] asks for; print and return the result."""
    global CFG, OUT, torch, cap, ONLY, SCALE, NVML, WARM_S, TIME_S
    argv = sys.argv if argv is None else argv
    CFG = json.loads(argv[1]) if len(argv) > 1 else {}
    OUT = {"schema": 1, "status": "ok", "python": sys.executable, "python_version": platform.python_version(),
           "host_arch": platform.machine(), "versions": {}, "device": None, "arch_list": [], "warnings": [],
           "checks": [], "benchmarks": [], "started": time.time()}
    try:
        import torch as venv_torch
    except Exception as exc:  # noqa
        OUT["status"] = "no_torch"
        OUT["reason"] = "torch cannot be imported with %s: %s" % (sys.executable, exc)
        emit()
        return OUT
    torch = venv_torch

    V = OUT["versions"]
    V["torch"] = torch.__version__
    V["cuda"] = getattr(torch.version, "cuda", None)
    try:
        V["cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    except Exception:
        V["cudnn"] = None
    try:
        V["cusparselt"] = torch.backends.cusparselt.version() if torch.backends.cusparselt.is_available() else None
    except Exception:
        V["cusparselt"] = None
    try:
        V["nccl"] = ".".join(str(x) for x in torch.cuda.nccl.version())
    except Exception:
        V["nccl"] = None
    try:
        import triton
        V["triton"] = triton.__version__
    except Exception:
        V["triton"] = None
    OUT["torch_lib_dir"] = os.path.join(os.path.dirname(torch.__file__), "lib")

    if not torch.cuda.is_available() or torch.version.cuda is None:
        OUT["status"] = "no_gpu"
        if torch.version.cuda is None:
            OUT["reason"] = "this torch (%s) is a CPU-only build" % torch.__version__
        else:
            OUT["reason"] = "torch %s (CUDA %s) sees no GPU: torch.cuda.device_count() = %d" % (
                torch.__version__, torch.version.cuda, torch.cuda.device_count())
        emit()
        return OUT

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.zeros(1, device="cuda")
        props = torch.cuda.get_device_properties(0)
    OUT["warnings"] = [str(w.message) for w in caught]
    cap = torch.cuda.get_device_capability(0)
    OUT["device"] = {"name": props.name, "capability": "%d.%d" % cap, "sm_count": props.multi_processor_count,
                     "memory_bytes": props.total_memory, "integrated": bool(getattr(props, "is_integrated", False)),
                     "l2_bytes": getattr(props, "L2_cache_size", None), "count": torch.cuda.device_count(),
                     "uuid": ("GPU-%s" % props.uuid) if getattr(props, "uuid", None) else None,
                     "index": CFG.get("gpu_index", 0)}
    OUT["arch_list"] = torch.cuda.get_arch_list()
    try:
        # The driver's CUDA release (13000 = 13.0): the newest PTX ISA it JIT-compiles follows from it (ptx_isa.py).
        import ctypes
        version = ctypes.c_int(0)
        OUT["driver_cuda_version"] = version.value if ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(
            ctypes.byref(version)) == 0 else None
    except (OSError, AttributeError):
        OUT["driver_cuda_version"] = None
    OUT["runtime"] = {"env": dict((k, os.environ.get(k)) for k in (
        "CUDA_MODULE_LOADING", "PYTORCH_CUDA_ALLOC_CONF", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "TRITON_PTXAS_PATH",
        "TRITON_PTXAS_BLACKWELL_PATH", "SPARKFORGE_SDPA_DISABLE") if os.environ.get(k) is not None)}
    if CFG.get("tf32_override_configured"):
        configured = CFG["tf32_override_configured"] + " (configured; unset for the checks)"
        OUT["runtime"]["env"]["TORCH_ALLOW_TF32_CUBLAS_OVERRIDE"] = configured
    for name in ("flash", "mem_efficient", "cudnn", "math"):
        try:
            OUT["runtime"]["sdp_%s_enabled" % name] = bool(getattr(torch.backends.cuda, "%s_sdp_enabled" % name)())
        except Exception:
            pass
    ONLY = set(CFG.get("checks") or [])
    SCALE = float(CFG.get("bench_scale", 1.0))
    WARM_S = float(CFG.get("bench_warm_seconds", 1.0)) * min(1.0, SCALE)
    TIME_S = float(CFG.get("bench_seconds", 1.0)) * SCALE
    LAST.clear()

    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    run_checks()

    if CFG.get("benchmarks", True):
        started = time.time()
        NVML = _sampler()(OUT["device"].get("uuid"), float(CFG.get("nvml_interval", 0.05)))
        OUT["nvml"] = NVML.info
        OUT["bench_method"] = {"warm_s": WARM_S, "min_timed_s": TIME_S, "chunk_ms": 20,
                               "figure": "median over chunks of back-to-back calls between CUDA events"}
        try:
            run_benchmarks()
        except Exception as exc:
            OUT["benchmark_error"] = "%s: %s" % (type(exc).__name__, exc)
            OUT["benchmark_trace"] = traceback.format_exc()[-1500:]
        if CFG.get("extended_benchmarks", True):
            more_benchmarks()
        OUT["benchmark_seconds"] = round(time.time() - started, 1)
        NVML.stop()
        if NVML.error:
            OUT["nvml"]["error"] = NVML.error
    emit()
    return OUT


if __name__ == "__main__":
    main()
