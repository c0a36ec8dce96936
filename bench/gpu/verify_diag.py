"""Issue 27's diagnosis: why verify's GEMM figures read lower than a plain loop on the same GPU.

Runs variants, each in its own fresh process, while this (parent) process samples NVML every 20 ms
(SM/memory clock, power against the limit, temperature, throttle reasons), and matches the samples to
each measured window.  Variants: a fresh process measuring plainly (and a sustained 6 s bf16 load);
verify's check script (module_utils torch_check_script.py, its main() run in this process) with no checks, with every
check, and with one check group at a time, each followed by verify's own GEMM benchmark code and then
by the plain measurement in the same process.

Usage: /opt/torch/.venv/bin/python bench/gpu/verify_diag.py OUTDIR [variant ...]
"""
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT_PATH = os.path.join(HERE, "..", "..", "collections", "ansible_collections", "sparkforge", "stack",
                           "plugins", "module_utils", "verify", "torch_check_script.py")
GEMMS = ("gemm_tf32", "gemm_fp16", "gemm_bf16", "gemm_fp8")


# ------------------------------------------------------------------------------------------ child --

def load_script():
    """verify's check script (a plain Python file) as a fresh module, its main() not yet run."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("verify_script", SCRIPT_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def child(spec):
    sys.path.insert(0, HERE)
    import plain_measure
    cfg = spec["script_cfg"]
    sys.argv = ["verify-script", json.dumps(cfg)]
    buf = io.StringIO()
    t0 = time.time()
    with contextlib.redirect_stdout(buf):
        script = load_script()
        script.main(sys.argv)
    # The script's globals: what follows reads its OUT and swaps its bench/add_bench as the script's own code sees them.
    ns = vars(script)
    import torch
    results = {"script_seconds": time.time() - t0, "steps": []}
    out = ns["OUT"]
    results["checks"] = [(c["name"], c["status"]) for c in out["checks"]]
    results["script_gemm"] = [dict(b) for b in out["benchmarks"] if b["group"] == "gemm"]
    windows = []
    orig_bench = ns["bench"]

    def timed_bench(func, iters, warmup=3):
        w0 = time.time()
        ms = orig_bench(func, iters, warmup)
        windows.append((w0, time.time()))
        return ms
    ns["bench"] = timed_bench
    orig_add = ns["add_bench"]

    def add(group, name, ms, **kw):
        orig_add(group, name, ms, **kw)
        if windows:
            out["benchmarks"][-1]["t0"], out["benchmarks"][-1]["t1"] = windows[-1]
    ns["add_bench"] = add
    for step in spec["steps"]:
        s0 = time.time()
        if step == "plain":
            figs = plain_measure.measure(GEMMS)
            results["steps"].append({"step": step, "figures": figs})
        elif step == "plain_all":
            results["steps"].append({"step": step, "figures": plain_measure.measure()})
        elif step in ("script_gemm", "script_gemm_nowarm"):
            # verify's GEMM benchmark code path (its bench(), its inputs), as in run_benchmarks
            n = 8192
            if step == "script_gemm":
                ns["warm_gpu"]()
            a32 = torch.randn(n, n, device="cuda")
            b32 = torch.randn(n, n, device="cuda")
            figs = {}
            for name, dtype, tf32 in (("tf32", torch.float32, True), ("fp16", torch.float16, False),
                                      ("bf16", torch.bfloat16, False)):
                torch.backends.cuda.matmul.allow_tf32 = tf32
                a, b = a32.to(dtype), b32.to(dtype)
                w0 = time.time()
                ms = orig_bench(lambda: a @ b, 50)
                figs["gemm_" + name] = {"median_ms": ms, "value": 2.0 * n ** 3 / ms / 1e9, "t0": w0, "t1": time.time()}
                del a, b
            torch.backends.cuda.matmul.allow_tf32 = False
            a8 = a32.to(torch.float8_e4m3fn)
            b8 = b32.to(torch.float8_e4m3fn).t().contiguous().t()
            one = torch.tensor(1.0, device="cuda")
            w0 = time.time()
            ms = orig_bench(lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16), 50)
            figs["gemm_fp8"] = {"median_ms": ms, "value": 2.0 * n ** 3 / ms / 1e9, "t0": w0, "t1": time.time()}
            del a8, b8, a32, b32
            torch.cuda.empty_cache()
            results["steps"].append({"step": step, "figures": figs})
        elif step == "run_benchmarks":
            del out["benchmarks"][:]
            ns["run_benchmarks"]()
            results["steps"].append({"step": step, "benchmarks": [dict(b) for b in out["benchmarks"]]})
        elif step == "sustain":
            n = 8192
            x = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
            y = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
            chunks = []
            end = time.time() + 6.0
            while time.time() < end:
                st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                w0 = time.time()
                st.record()
                for _ in range(100):
                    x @ y
                en.record()
                en.synchronize()
                ms = st.elapsed_time(en) / 100
                chunks.append({"value": 2.0 * n ** 3 / ms / 1e9, "t0": w0, "t1": time.time()})
            results["steps"].append({"step": step, "chunks": chunks})
        elif step == "empty_cache":
            import gc
            gc.collect()
            torch.cuda.empty_cache()
            results["steps"].append({"step": step})
        results["steps"][-1]["seconds"] = time.time() - s0
        results["steps"][-1]["mem_reserved"] = torch.cuda.memory_reserved()
    print("\nRESULT " + json.dumps(results))


# ----------------------------------------------------------------------------------------- parent --

class Sampler(threading.Thread):
    def __init__(self, interval=0.02):
        threading.Thread.__init__(self, daemon=True)
        import pynvml
        self.nv = pynvml
        pynvml.nvmlInit()
        self.h = pynvml.nvmlDeviceGetHandleByIndex(0)
        self.interval = interval
        self.samples = []
        self.stop = False
        get = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
        self.reasons = get

    def info(self):
        nv, h = self.nv, self.h
        return {"name": nv.nvmlDeviceGetName(h), "power_limit_w": nv.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0,
                "max_sm_mhz": nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM),
                "max_mem_mhz": nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_MEM),
                "driver": nv.nvmlSystemGetDriverVersion()}

    def run(self):
        nv, h = self.nv, self.h
        while not self.stop:
            t = time.time()
            try:
                self.samples.append((t, nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
                                     nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM),
                                     nv.nvmlDeviceGetPowerUsage(h) / 1000.0,
                                     nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU), self.reasons(h)))
            except Exception as exc:  # noqa
                self.samples.append((t, None, None, None, None, str(exc)))
            time.sleep(self.interval)

    def window(self, t0, t1):
        rows = [s for s in self.samples if t0 <= s[0] <= t1 and s[1] is not None]
        if not rows:
            return {"n": 0}
        reasons = 0
        for r in rows:
            reasons |= r[5] & ~0x1
        return {"n": len(rows), "sm_mhz_med": statistics.median(r[1] for r in rows), "sm_mhz_min": min(r[1] for r in rows),
                "mem_mhz": statistics.median(r[2] for r in rows), "power_w_med": statistics.median(r[3] for r in rows),
                "power_w_max": max(r[3] for r in rows), "temp_max": max(r[4] for r in rows), "reasons": hex(reasons)}


ALL = list(load_script().check_groups())  # the check script's groups, in the order they run
VARIANTS = {
    # name: (script config, steps after the script)
    "fresh": ({"checks": ["none"], "benchmarks": False}, ["plain", "script_gemm", "plain", "sustain", "plain"]),
    "script_nochecks": ({"checks": ["none"], "benchmarks": False}, ["run_benchmarks", "plain"]),
    # what verify does (every check, then run_benchmarks), then the plain loop in the same process
    "script_asis": ({"benchmarks": False}, ["run_benchmarks", "plain_all", "empty_cache", "plain"]),
    "only_none": ({"checks": ["none"], "benchmarks": False}, ["script_gemm", "plain"]),
    "allchecks": ({"benchmarks": False}, ["plain", "script_gemm_nowarm", "script_gemm", "plain"]),
}
for _c in ALL[:-1]:
    VARIANTS["only_" + _c] = ({"checks": [_c], "benchmarks": False}, ["script_gemm", "plain"])


def summarise(name, res, sampler):
    lines = []

    def fig_line(label, figs):
        parts = []
        for key in GEMMS + ("sdpa_flash", "sdpa_cudnn", "copy"):
            f = figs.get(key)
            if not f or "value" not in f:
                continue
            w = sampler.window(f["t0"], f["t1"])
            f["nvml"] = w
            parts.append("%s %.0f (%s MHz %s W %s)" % (key[5:] if key.startswith("gemm") else key, f["value"],
                                                    w.get("sm_mhz_med"), w.get("power_w_med"), w.get("reasons")))
        lines.append("  %-22s %s" % (label, "; ".join(parts)))
    for step in res["steps"]:
        if "figures" in step:
            fig_line(step["step"], step["figures"])
        elif step["step"] == "run_benchmarks" or "benchmarks" in step:
            figs = {}
            for b in step["benchmarks"]:
                if "t0" not in b:
                    continue
                if b["group"] == "gemm":
                    figs["gemm_" + b["name"].split()[0]] = {"value": b["tflops"], "t0": b["t0"], "t1": b["t1"]}
                elif b["group"] == "sdpa" and b.get("tflops"):
                    figs["sdpa_" + b["backend"]] = {"value": b["tflops"], "t0": b["t0"], "t1": b["t1"]}
                elif b["name"].startswith("device copy"):
                    figs["copy"] = {"value": b["gbs"], "t0": b["t0"], "t1": b["t1"]}
            fig_line(step["step"], figs)
        elif step["step"] == "sustain":
            vals = []
            for c in step["chunks"]:
                w = sampler.window(c["t0"], c["t1"])
                c["nvml"] = w
                vals.append("%.0f@%s/%sW/%s" % (c["value"], w.get("sm_mhz_med"), w.get("power_w_med"), w.get("reasons")))
            lines.append("  sustain(6s, chunks)    " + " ".join(vals[::max(1, len(vals) // 8)]))
    if res.get("script_gemm"):
        lines.insert(0, "  script's own gemm:     " + "; ".join("%s %.0f" % (b["name"].split()[0], b["tflops"])
                                                                 for b in res["script_gemm"]))
    return "== %s (script %.1f s)\n%s" % (name, res["script_seconds"], "\n".join(lines))


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(json.loads(sys.argv[2]))
        return
    outdir = sys.argv[1]
    names = sys.argv[2:] or list(VARIANTS)
    sampler = Sampler()
    sampler.start()
    info = sampler.info()
    print(json.dumps(info))
    allres = {"info": info, "variants": {}}
    for name in names:
        cfg, steps = VARIANTS[name]
        t0 = time.time()
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child",
                               json.dumps({"script_cfg": cfg, "steps": steps})],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
        if not line:
            print("== %s FAILED rc=%s\n%s" % (name, proc.returncode, proc.stderr[-2000:]))
            continue
        res = json.loads(line[-1][7:])
        # the script's own benchmarks, when it ran them (script_nochecks / script_asis): no windows, so
        # take the whole script run's NVML summary.
        print(summarise(name, res, sampler) + "  [wall %.0f s]" % (time.time() - t0))
        sys.stdout.flush()
        allres["variants"][name] = res
        with open(os.path.join(outdir, "diag.json"), "w") as handle:
            json.dump(allres, handle)
    sampler.stop = True
    with open(os.path.join(outdir, "nvml-samples.json"), "w") as handle:
        json.dump(sampler.samples, handle)


if __name__ == "__main__":
    main()
