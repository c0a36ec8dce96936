"""An independent, plain measurement of the figures torch_verify reports, for comparison with it.

Written apart from the verify check script on purpose: its own inputs (drawn directly in the dtype under
test), its own loop and its own NVML reader.  The shapes are verify's: GEMM 8192^3 (tf32, fp16, bf16,
fp8 _scaled_mm), SDPA B=4 H=32 S=4096 D=128 bf16 causal with the flash and cuDNN backends, and a 1 GiB
device copy (bytes read + written).

Two figures per operation:
- value (the one compared): the steady rate.  The operation runs back to back for LOAD_S seconds, then N
  more calls run back to back between ONE pair of CUDA events, N chosen to last about TIMED_S seconds;
  value = work x N / elapsed.
- burst_value (information only), in a second pass after every steady figure: after REST_S seconds of
  idle GPU, 3 warm-up calls and 50 timed calls (an event pair each, median): the short loop the issue
  used, which runs before the power controller has settled and so depends on what the GPU did before.

Usage: python plain_measure.py [OUT.json] [--no-burst]   (prints one JSON document)
"""
import json
import statistics
import sys
import threading
import time

FIGURES = ("gemm_tf32", "gemm_fp16", "gemm_bf16", "gemm_fp8", "sdpa_flash", "sdpa_cudnn", "copy")
LOAD_S, TIMED_S, REST_S = 2.0, 1.5, 3.0


class Sampler(threading.Thread):
    """NVML every 50 ms: [time, sm_mhz, mem_mhz, power_w, temp_c, reasons] (what gpu_clocks.summarise reads)."""

    def __init__(self, uuid=None):
        threading.Thread.__init__(self, daemon=True)
        self.samples, self.info, self.halt = [], {"available": False}, False
        try:
            import pynvml as nv
            nv.nvmlInit()
            self.nv = nv
            self.h = nv.nvmlDeviceGetHandleByUUID(uuid) if uuid else nv.nvmlDeviceGetHandleByIndex(0)
            self.why = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
                nv.nvmlDeviceGetCurrentClocksThrottleReasons
            self.info = {"available": True, "interval_s": 0.05,
                         "power_limit_w": nv.nvmlDeviceGetEnforcedPowerLimit(self.h) / 1000.0,
                         "max_sm_mhz": nv.nvmlDeviceGetMaxClockInfo(self.h, nv.NVML_CLOCK_SM),
                         "max_mem_mhz": nv.nvmlDeviceGetMaxClockInfo(self.h, nv.NVML_CLOCK_MEM)}
        except Exception as exc:  # noqa
            self.info = {"available": False, "error": "%s: %s" % (type(exc).__name__, exc)}

    def run(self):
        if not self.info["available"]:
            return
        nv, h = self.nv, self.h
        while not self.halt:
            self.samples.append([time.time(), nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
                                 nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM), nv.nvmlDeviceGetPowerUsage(h) / 1000.0,
                                 nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU), int(self.why(h))])
            time.sleep(0.05)

    def window(self, t0, t1):
        return [s for s in self.samples if t0 <= s[0] <= t1]


def steady(torch, func):
    """Back to back for LOAD_S s, then N calls between one event pair (about TIMED_S s): (ms per call, t0, t1)."""
    done, t_start = 0, time.time()
    ev = torch.cuda.Event()
    while time.time() - t_start < LOAD_S:
        for _ in range(8):
            func()
        done += 8
        ev.record()
        ev.synchronize()
    per_call_s = (time.time() - t_start) / done
    n = max(10, int(TIMED_S / per_call_s))
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.time()
    start.record()
    for _ in range(n):
        func()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / n, t0, time.time(), n


def burst(torch, func):
    """REST_S s of idle, then 3 warm-ups and 50 calls timed one by one: median ms."""
    torch.cuda.synchronize()
    time.sleep(REST_S)
    for _ in range(3):
        func()
    times = []
    for _ in range(50):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        func()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def operations(torch, n=8192, copy_bytes=1 << 30):
    """(key, work per call, unit, setup) where setup() returns the callable; work is FLOP or bytes."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    dev = "cuda"

    def gemm(dtype, tf32):
        def setup():
            torch.backends.cuda.matmul.allow_tf32 = tf32
            a = torch.randn(n, n, device=dev, dtype=dtype)
            b = torch.randn(n, n, device=dev, dtype=dtype)
            return lambda: torch.matmul(a, b)
        return setup

    def fp8():
        a = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn).t()  # column-major, as cuBLASLt wants
        scale = torch.ones((), device=dev)
        return lambda: torch._scaled_mm(a, b, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16)

    def sdpa(backend):
        def setup():
            q, k, v = (torch.randn(4, 32, 4096, 128, device=dev, dtype=torch.bfloat16) for _ in range(3))

            def call():
                with sdpa_kernel([backend]):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=True)
            call()
            return call
        return setup

    def copy():
        src = torch.empty(copy_bytes, dtype=torch.uint8, device=dev)
        dst = torch.empty_like(src)
        return lambda: dst.copy_(src)

    gemm_flop = 2.0 * n ** 3
    sdpa_flop = 4.0 * 4 * 32 * 4096 * 4096 * 128 / 2
    return (("gemm_tf32", gemm_flop, "TFLOP/s", gemm(torch.float32, True)),
            ("gemm_fp16", gemm_flop, "TFLOP/s", gemm(torch.float16, False)),
            ("gemm_bf16", gemm_flop, "TFLOP/s", gemm(torch.bfloat16, False)),
            ("gemm_fp8", gemm_flop, "TFLOP/s", fp8),
            ("sdpa_flash", sdpa_flop, "TFLOP/s", sdpa(SDPBackend.FLASH_ATTENTION)),
            ("sdpa_cudnn", sdpa_flop, "TFLOP/s", sdpa(SDPBackend.CUDNN_ATTENTION)),
            ("copy", 2.0 * copy_bytes, "GB/s", copy))


def measure(with_burst=True, sampler=None):
    """Every steady figure first, back to back (the GPU stays loaded as it is during verify's benchmarks);
    then, when asked, the burst figures, each after REST_S s of idle (a rest lowers the power controller's
    longer averages, so the steady figures must not follow one)."""
    import torch
    out = {}
    ops = operations(torch)
    for key, work, unit, setup in ops:
        scale = 1e9 if unit == "TFLOP/s" else 1e6  # work / ms -> TFLOP/s or GB/s
        try:
            func = setup()
        except (RuntimeError, AttributeError) as exc:
            out[key] = {"error": str(exc).splitlines()[0][:200]}
            continue
        ms, t0, t1, n = steady(torch, func)
        fig = {"value": round(work / ms / scale, 1), "unit": unit, "ms": ms, "calls": n, "t0": t0, "t1": t1}
        if sampler is not None and sampler.info.get("available"):
            fig["nvml_samples"] = sampler.window(t0, t1)
        torch.backends.cuda.matmul.allow_tf32 = False
        out[key] = fig
        del func
        torch.cuda.empty_cache()
    for key, work, unit, setup in ops if with_burst else ():
        if "value" not in out.get(key, {}):
            continue
        func = setup()
        out[key]["burst_value"] = round(work / burst(torch, func) / (1e9 if unit == "TFLOP/s" else 1e6), 1)
        torch.backends.cuda.matmul.allow_tf32 = False
        del func
        torch.cuda.empty_cache()
    return out


def main():
    import torch
    props = torch.cuda.get_device_properties(0)
    uuid = ("GPU-%s" % props.uuid) if getattr(props, "uuid", None) else None
    sampler = Sampler(uuid)
    sampler.start()
    result = {"device": props.name, "torch": torch.__version__, "method": {"load_s": LOAD_S, "timed_s": TIMED_S,
                                                                             "rest_s": REST_S},
              "nvml": sampler.info, "figures": measure("--no-burst" not in sys.argv, sampler)}
    sampler.halt = True
    text = json.dumps(result)
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if args:
        with open(args[0], "w") as handle:
            handle.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
