#!/usr/bin/env python3
"""Compare sparkforge's fat binary reader with NVIDIA's cuobjdump on real libraries, and time both.

    python3 bench/audit_vs_cuobjdump.py --cuobjdump /usr/local/cuda/bin/cuobjdump \
        --out docs/results/arch-audit-torch.json LIB [LIB ...]

For each library: ``cuobjdump --list-elf`` and ``--list-ptx`` (each timed), the
audit with headers only (``kernels=False``) and with kernel counts, the
listings side by side, and whether they agree (same names, same counts).
Timings are the median of --repeat runs (wall clock, file in page cache after
the first run).
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "collections"))

from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import arch as cuda_arch  # noqa: E402
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import fatbin  # noqa: E402


def timed(func, repeat):
    times = []
    value = None
    for _ in range(repeat):
        start = time.perf_counter()
        value = func()
        times.append(time.perf_counter() - start)
    return value, statistics.median(times), times


def run_cuobjdump(binary, flag, path):
    proc = subprocess.run([binary, flag, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    return {"rc": proc.returncode, "names": fatbin.parse_cuobjdump_list(proc.stdout),
            "lines": len(proc.stdout.splitlines()), "stderr": proc.stderr.strip()[-300:]}


def counts(names):
    out = {}
    for name in names:
        out[name] = out.get(name, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: cuda_arch.parse_sm(kv[0])))


def compare(path, cuobjdump, repeat, target):
    elf, t_elf, _ = timed(lambda: run_cuobjdump(cuobjdump, "--list-elf", path), repeat)
    ptx, t_ptx, _ = timed(lambda: run_cuobjdump(cuobjdump, "--list-ptx", path), repeat)
    quick, t_quick, _ = timed(lambda: fatbin.audit(path, target=target, kernels=False), repeat)
    full, t_full, _ = timed(lambda: fatbin.audit(path, target=target, kernels=True), max(1, min(repeat, 2)))
    lib = full["libraries"][0] if full["libraries"] else {"cuobjdump_elf": [], "cuobjdump_ptx": [], "sass": [],
                                                          "ptx": [], "kernels": {}, "verdict": None}
    qlib = quick["libraries"][0] if quick["libraries"] else {"cuobjdump_elf": [], "cuobjdump_ptx": []}
    return {
        "library": path,
        "size_bytes": os.path.getsize(path),
        "target": target,
        "cuobjdump": {"elf": counts(elf["names"]), "ptx": counts(ptx["names"]), "rc_elf": elf["rc"],
                      "rc_ptx": ptx["rc"], "stderr": elf["stderr"] or ptx["stderr"],
                      "seconds_list_elf": t_elf, "seconds_list_ptx": t_ptx, "seconds_both": t_elf + t_ptx},
        "sparkforge": {"elf": counts(lib["cuobjdump_elf"]), "ptx": counts(lib["cuobjdump_ptx"]),
                       "sass": lib["sass"], "ptx_archs": lib["ptx"], "kernels": lib["kernels"],
                       "verdict": lib["verdict"], "via": lib.get("via"),
                       "compressed_entries": lib.get("compressed_entries"), "zstd_decoder": full["zstd_decoder"],
                       "seconds_headers_only": t_quick, "seconds_with_kernel_counts": t_full},
        "agree_elf": sorted(elf["names"]) == lib["cuobjdump_elf"] == qlib["cuobjdump_elf"],
        "agree_ptx": sorted(ptx["names"]) == lib["cuobjdump_ptx"] == qlib["cuobjdump_ptx"],
        "speed_ratio_headers_only": (t_elf + t_ptx) / t_quick if t_quick else None,
        "speed_ratio_with_kernels": (t_elf + t_ptx) / t_full if t_full else None,
    }


def markdown(results, command):
    lines = ["Command: `%s`" % command, "", "Date: %s, host %s (%s), Python %s" % (
        time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), platform.node(), platform.machine(),
        platform.python_version()), ""]
    for res in results:
        cu = res["cuobjdump"]
        sf = res["sparkforge"]
        lines += ["### `%s` (%.1f MB)" % (res["library"], res["size_bytes"] / 1e6), "",
                  "| arch | cuobjdump --list-elf | sparkforge (cuobjdump names) | sparkforge arch | kernels |",
                  "|---|---|---|---|---|"]
        names = sorted(set(cu["elf"]) | set(sf["elf"]), key=cuda_arch.parse_sm)
        for name in names:
            ours = [a for a in sf["sass"] if cuda_arch.parse_sm(a)[:2] == cuda_arch.parse_sm(name)[:2]
                    and (a.endswith("a") == name.endswith("a"))]
            kern = ", ".join("%s: %s" % (a, sf["kernels"].get(a)) for a in ours)
            lines.append("| %s | %s | %s | %s | %s |" % (name, cu["elf"].get(name, 0), sf["elf"].get(name, 0),
                                                          ", ".join(ours), kern))
        lines += ["", "| PTX | cuobjdump --list-ptx | sparkforge |", "|---|---|---|"]
        for name in sorted(set(cu["ptx"]) | set(sf["ptx"]), key=cuda_arch.parse_sm) or ["(none)"]:
            lines.append("| %s | %s | %s |" % (name, cu["ptx"].get(name, 0), sf["ptx"].get(name, 0)))
        lines += ["", "Agreement: ELF %s, PTX %s. Verdict for %s: %s (via %s)." % (
            "yes" if res["agree_elf"] else "NO", "yes" if res["agree_ptx"] else "NO", res["target"], sf["verdict"],
            ", ".join(sf["via"] or [])), "",
            "| timing (median) | ms |", "|---|---|",
            "| cuobjdump --list-elf + --list-ptx | %.1f |" % (1e3 * cu["seconds_both"]),
            "| sparkforge audit, headers only | %.1f |" % (1e3 * sf["seconds_headers_only"]),
            "| sparkforge audit, with kernel counts | %.1f |" % (1e3 * sf["seconds_with_kernel_counts"]),
            "", "Speed ratio cuobjdump / sparkforge: %.2fx (headers only), %.2fx (with kernel counts)." % (
                res["speed_ratio_headers_only"] or 0, res["speed_ratio_with_kernels"] or 0), ""]
        if cu["stderr"]:
            lines += ["cuobjdump said: `%s`" % cu["stderr"].replace("\n", " "), ""]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("libraries", nargs="+")
    parser.add_argument("--cuobjdump", default="/usr/local/cuda/bin/cuobjdump")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--target", default="9.0")
    parser.add_argument("--out", help="write JSON here and Markdown beside it (.md)")
    args = parser.parse_args()
    command = " ".join(["python3", "bench/audit_vs_cuobjdump.py"] + sys.argv[1:])
    results = [compare(path, args.cuobjdump, args.repeat, args.target) for path in args.libraries]
    text = markdown(results, command)
    print(text)
    if args.out:
        with open(args.out, "w") as handle:
            json.dump({"command": command, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "results": results}, handle, indent=1, sort_keys=True)
        with open(os.path.splitext(args.out)[0] + ".md", "w") as handle:
            handle.write(text + "\n")
    return 0 if all(r["agree_elf"] and r["agree_ptx"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
