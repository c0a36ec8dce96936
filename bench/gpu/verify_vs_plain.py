"""Issue 27's side-by-side table: verify's figures (its report JSON) against the independent plain
measurement (plain_measure.py's JSON) of the same figures on the same GPU, with the ratio.

Usage: python verify_vs_plain.py VERIFY.json PLAIN.json OUTBASE ["device line"]
Writes OUTBASE.md and OUTBASE.json; prints the Markdown.  The comparison logic and the clock summaries
are the collection's (module_utils/verify/gpu_clocks.py: side_by_side, summarise), loaded from this checkout.
"""
import importlib.util
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
GPU_CLOCKS = os.path.join(HERE, "..", "..", "collections", "ansible_collections", "sparkforge", "stack", "plugins",
                          "module_utils", "verify", "gpu_clocks.py")
BAR = 0.95


def load_gpu_clocks():
    spec = importlib.util.spec_from_file_location("gpu_clocks", GPU_CLOCKS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    verify_path, plain_path, outbase = sys.argv[1:4]
    device_line = sys.argv[4] if len(sys.argv) > 4 else ""
    gc = load_gpu_clocks()
    with open(verify_path) as handle:
        verify = json.load(handle)
    with open(plain_path) as handle:
        plain = json.load(handle)
    for fig in plain["figures"].values():
        if "value" in fig:
            fig["clocks"] = gc.summarise(fig.pop("nvml_samples", None), plain.get("nvml"))
    rows = gc.side_by_side(verify.get("benchmarks", []), plain["figures"], threshold=BAR)
    compared = [r for r in rows if r["ratio"] is not None]
    verdict = all(r["meets"] for r in compared) and len(compared) == len(rows)
    lines = ["# verify against an independent measurement, same GPU, same run", "",
             "Device: %s (verify: %s, torch %s; independent: %s)." % (
                 device_line or "-", (verify.get("device") or {}).get("name"), (verify.get("versions") or {}).get("torch"),
                 plain.get("device")), "",
             "verify: the playbook's report (%s); its figures are steady rates (see the report's Benchmarks section). "
             "Independent: bench/gpu/plain_measure.py in its own process right after the playbook: %s s back to "
             "back, then about %s s of calls between one CUDA event pair. The last column is the same independent "
             "code as a short loop (3 warm-ups + 50 calls timed one by one) after %s s of idle GPU: the burst "
             "figure, for information." % (verify.get("generated"), plain["method"]["load_s"],
                                            plain["method"]["timed_s"], plain["method"]["rest_s"]), "",
             gc.side_by_side_markdown(rows, threshold=BAR),
             "Result: %s (%d of %d figures compared, bar %.0f%%)." % (
                 "every figure meets the bar" if verdict else "NOT every figure meets the bar", len(compared), len(rows),
                 100 * BAR)]
    text = "\n".join(lines) + "\n"
    with open(outbase + ".md", "w") as handle:
        handle.write(text)
    with open(outbase + ".json", "w") as handle:
        json.dump({"device": device_line, "rows": rows, "meets_bar": verdict, "bar": BAR, "plain": plain,
                   "verify_nvml": verify.get("nvml"), "verify_bench_method": verify.get("bench_method")}, handle,
                  indent=1, sort_keys=True)
    print(text)
    return 0 if verdict else 2


if __name__ == "__main__":
    sys.exit(main())
