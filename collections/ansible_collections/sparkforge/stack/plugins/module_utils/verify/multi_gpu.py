# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Verification of every GPU of a host and of the collectives between them.

Plain functions (no Ansible imports) used by ``torch_verify`` and called by the unit tests:

* which GPUs to check (``select_gpus``), the functional checks of each one in its own process
  (``CUDA_VISIBLE_DEVICES``), run in parallel (``run_per_gpu``), and their results merged into one
  row per GPU per check, with failures that name the GPU (``merge_per_gpu``);
* ``COLLECTIVE_SCRIPT``: NCCL all_reduce, all_gather and reduce_scatter across the local GPUs, one
  process per GPU: each checked for the exact expected values, then timed from 8 MiB to 1 GiB;
* bus bandwidth with nccl-tests' definitions (``BUSBW_FACTORS``) against the link peak the host
  reports: NVLink link count x per-link rate (``nvidia-smi nvlink -s``), else the PCIe link.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor

# nccl-tests (doc/PERFORMANCE.md): busbw = algbw * factor, with the message size S being the
# all_reduce buffer, the all_gather *output* and the reduce_scatter *input*.
BUSBW_FACTORS = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / float(n),
    "reduce_scatter": lambda n: (n - 1) / float(n),
}
DEFAULT_SIZES = [8 << 20, 16 << 20, 32 << 20, 64 << 20, 128 << 20, 256 << 20, 512 << 20, 1 << 30]
# PCIe bandwidth per lane and direction after line encoding, GB/s, by generation.
PCIE_LANE_GBS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


class MultiGpuError(Exception):
    pass


def select_gpus(requested, count):
    """The GPU indices to check: ``requested`` ('all', None, [] or a list of indices) among ``count``."""
    if requested in (None, "all", []):
        return list(range(count))
    indices = []
    for item in requested:
        try:
            index = int(item)
        except (TypeError, ValueError):
            raise MultiGpuError("gpus must be 'all' or a list of GPU indices, got %r" % (item,))
        if index < 0 or index >= count:
            raise MultiGpuError("GPU %d does not exist: this host has %d GPU(s) (0-%d)" % (index, count, count - 1))
        if index not in indices:
            indices.append(index)
    return indices


def busbw(op, size_bytes, seconds, world):
    """(algbw, busbw) in GB/s of one ``op`` of ``size_bytes`` that took ``seconds`` over ``world`` ranks."""
    algbw = size_bytes / seconds / 1e9
    return algbw, algbw * BUSBW_FACTORS[op](world)


# ------------------------------------------------------------------ link peak


def parse_nvlink_status(text):
    """{gpu index: [GB/s per active link]} from ``nvidia-smi nvlink -s``; inactive links are left out."""
    out = {}
    current = None
    for line in (text or "").splitlines():
        match = re.match(r"^GPU (\d+):", line.strip())
        if match:
            current = int(match.group(1))
            out[current] = []
            continue
        match = re.match(r"^Link \d+:\s*([\d.]+)\s*GB/s", line.strip())
        if match and current is not None:
            out[current].append(float(match.group(1)))
    return out


def parse_pcie(text):
    """{gpu index: (generation, width)} from ``nvidia-smi --query-gpu=index,pcie.link.gen.current,
    pcie.link.width.current --format=csv,noheader,nounits``."""
    out = {}
    for line in (text or "").splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and all(p.isdigit() for p in parts):
            out[int(parts[0])] = (int(parts[1]), int(parts[2]))
    return out


def link_peak(indices, nvlink, pcie):
    """The per-GPU, per-direction link peak the collectives can reach, and how it was found.

    NVLink when every checked GPU has active links (the slowest GPU's link total), else PCIe (the
    slowest link); None when neither is known.
    """
    if indices and all(nvlink.get(i) for i in indices):
        totals = {i: sum(nvlink[i]) for i in indices}
        slow = min(totals, key=totals.get)
        return {"kind": "nvlink", "gbs": round(totals[slow], 1),
                "detail": "%d NVLink links x %.3f GB/s (GPU %d)" % (len(nvlink[slow]), nvlink[slow][0], slow)}
    if indices and all(i in pcie for i in indices):
        rates = {i: PCIE_LANE_GBS.get(pcie[i][0], 0) * pcie[i][1] for i in indices}
        slow = min(rates, key=rates.get)
        return {"kind": "pcie", "gbs": round(rates[slow], 1),
                "detail": "PCIe gen%d x%d (GPU %d)" % (pcie[slow][0], pcie[slow][1], slow)}
    return None


# --------------------------------------------------------------- per-GPU checks


def run_per_gpu(run_script, python, config, timeout, env, indices, workers=None):
    """Run the functional checks once per GPU, each in its own process that sees only that GPU,
    in parallel (GPUs share no state; the host's CPU cores serve them all).  Returns the raw results
    in ``indices`` order, each with ``gpu_index`` set."""
    def one(index):
        child_env = dict(env or {}, CUDA_VISIBLE_DEVICES=str(index))
        raw = run_script(python, dict(config, benchmarks=False, gpu_index=index), timeout, env=child_env)[0]
        raw["gpu_index"] = index
        return raw
    with ThreadPoolExecutor(max_workers=workers or max(1, len(indices))) as pool:
        return list(pool.map(one, indices))


def inject_failure(raws, spec):
    """Tests only: mark check ``spec['check']`` of GPU ``spec['gpu']`` failed (verify_inject_failure)."""
    if not spec:
        return raws
    for raw in raws:
        if raw.get("gpu_index") != int(spec["gpu"]):
            continue
        for item in raw.get("checks", []):
            if item["name"] == spec.get("check") or (not spec.get("check") and item["status"] == "pass"):
                item["status"] = "fail"
                item["detail"] = "injected failure (verify_inject_failure, for tests only)"
                break
        else:
            raise MultiGpuError("verify_inject_failure: GPU %s has no check %r" % (spec["gpu"], spec.get("check")))
    return raws


def merge_per_gpu(raws):
    """One row per GPU per check, the GPUs' identities, and failures naming the GPU."""
    rows, gpus, failures = [], [], []
    for raw in raws:
        index = raw.get("gpu_index")
        device = raw.get("device") or {}
        gpus.append({"index": index, "uuid": device.get("uuid"), "name": device.get("name"),
                     "capability": device.get("capability"), "status": raw.get("status")})
        if raw.get("status") != "ok":
            failures.append("GPU %s: %s" % (index, raw.get("reason") or raw.get("status")))
            continue
        for item in raw.get("checks", []):
            rows.append({"gpu": index, "uuid": device.get("uuid"), "name": device.get("name"),
                         "check": item["name"], "status": item["status"], "rel_err": item.get("rel_err"),
                         "detail": item.get("detail")})
            if item["status"] == "fail":
                failures.append("GPU %s (%s, %s): %s: %s" % (
                    index, device.get("name"), device.get("uuid"), item["name"], item.get("detail")))
    return {"gpus": gpus, "rows": rows, "failures": failures}


# ------------------------------------------------------------------ collectives


COLLECTIVE_SCRIPT = r'''
import datetime, json, os, sys, time, traceback

CFG = json.loads(sys.argv[1])
OPS = ("all_reduce", "all_gather", "reduce_scatter")


def worker(rank, world, result_path):
    import torch
    import torch.distributed as dist
    backend = CFG.get("backend", "nccl")
    if backend == "nccl":
        torch.cuda.set_device(rank)
        dev = torch.device("cuda", rank)
        sync = lambda: torch.cuda.synchronize(dev)  # noqa: E731
    else:
        dev = torch.device("cpu")
        sync = lambda: None  # noqa: E731
    dist.init_process_group(backend, init_method="tcp://127.0.0.1:%d" % CFG["port"], rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=CFG.get("timeout", 300)))
    out = {"checks": [], "bandwidth": []}
    tri = world * (world + 1) // 2
    n = 1 << 18
    # Exactness: small integers are exact in float32, so every element must equal its expectation.
    try:
        x = torch.full((n,), float(rank + 1), device=dev)
        dist.all_reduce(x)
        ok_ar = bool((x == float(tri)).all())
        inp = torch.full((n,), float(rank + 1), device=dev)
        gathered = torch.empty(n * world, device=dev)
        dist.all_gather_into_tensor(gathered, inp)
        want = torch.arange(1, world + 1, device=dev, dtype=torch.float32).repeat_interleave(n)
        ok_ag = bool((gathered == want).all())
        src = (torch.arange(1, world + 1, device=dev, dtype=torch.float32).repeat_interleave(n)) * float(rank + 1)
        part = torch.empty(n, device=dev)
        dist.reduce_scatter_tensor(part, src)
        ok_rs = bool((part == float((rank + 1) * tri)).all())
        flags = torch.tensor([ok_ar, ok_ag, ok_rs], dtype=torch.int32, device=dev)
        dist.all_reduce(flags, op=dist.ReduceOp.MIN)
        for op, flag in zip(OPS, flags.tolist()):
            out["checks"].append({"name": "nccl_%s" % op, "status": "pass" if flag else "fail",
                                  "detail": "exact on every rank" if flag else "a rank got wrong values",
                                  "world": world})
    except Exception as exc:  # noqa
        out["checks"].append({"name": "nccl_collectives", "status": "fail", "detail": "%s: %s" % (type(exc).__name__, exc),
                              "trace": traceback.format_exc()[-1500:]})
    iters, warmup = int(CFG.get("iters", 20)), int(CFG.get("warmup", 5))
    for size in CFG["sizes"]:
        elems = size // 4
        for op in OPS:
            try:
                if op == "all_reduce":
                    a = torch.ones(elems, device=dev)
                    call = lambda: dist.all_reduce(a)  # noqa: E731
                elif op == "all_gather":
                    a = torch.ones(elems // world, device=dev)
                    b = torch.empty((elems // world) * world, device=dev)
                    call = lambda: dist.all_gather_into_tensor(b, a)  # noqa: E731
                else:
                    a = torch.ones((elems // world) * world, device=dev)
                    b = torch.empty(elems // world, device=dev)
                    call = lambda: dist.reduce_scatter_tensor(b, a)  # noqa: E731
                for _ in range(warmup):
                    call()
                sync()
                dist.barrier()
                start = time.perf_counter()
                for _ in range(iters):
                    call()
                sync()
                took = torch.tensor([(time.perf_counter() - start) / iters], dtype=torch.float64, device=dev)
                dist.all_reduce(took, op=dist.ReduceOp.MAX)
                out["bandwidth"].append({"op": op, "bytes": (elems // world) * world * 4 if op != "all_reduce"
                                         else elems * 4, "seconds": float(took.item())})
                del a
            except Exception as exc:  # noqa
                out["bandwidth"].append({"op": op, "bytes": size, "error": "%s: %s" % (type(exc).__name__, exc)})
    if rank == 0:
        with open(result_path, "w") as handle:
            json.dump(out, handle)
    dist.destroy_process_group()


if __name__ == "__main__":
    import torch.multiprocessing as mp
    result = sys.argv[2]
    mp.spawn(worker, args=(CFG["world"], result), nprocs=CFG["world"], join=True)
    print("COLLECTIVES_DONE")
'''


def _free_port():
    import socket
    sock = socket.socket()
    try:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
    finally:
        sock.close()


def run_collectives(python, indices, timeout, env=None, sizes=None, iters=20, backend="nccl"):
    """Run COLLECTIVE_SCRIPT over the GPUs ``indices`` (one process each); returns its raw JSON."""
    handle = tempfile.NamedTemporaryFile("w", prefix="sparkforge-nccl-", suffix=".py", delete=False)
    result = handle.name + ".json"
    config = {"world": len(indices), "port": _free_port(), "sizes": sizes or DEFAULT_SIZES, "iters": iters,
              "backend": backend, "timeout": timeout}
    child_env = dict(os.environ)
    child_env.update(env or {})
    child_env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in indices)
    try:
        with handle:
            handle.write(COLLECTIVE_SCRIPT)
        try:
            proc = subprocess.run([python, handle.name, json.dumps(config), result], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout, env=child_env,
                                  check=False)
        except subprocess.TimeoutExpired:
            raise MultiGpuError("the collectives did not finish within %ds" % timeout)
        if proc.returncode != 0 or not os.path.exists(result):
            raise MultiGpuError("the collectives failed (exit %d): %s" % (proc.returncode, (proc.stderr or proc.stdout)[-1500:]))
        with open(result) as fh:
            return json.load(fh)
    finally:
        for path in (handle.name, result):
            if os.path.exists(path):
                os.unlink(path)


def evaluate_collectives(raw, world, peak):
    """Bandwidth rows (algbw, busbw, % of link peak) and the collective checks."""
    rows = []
    for item in raw.get("bandwidth", []):
        if item.get("error"):
            rows.append({"op": item["op"], "bytes": item["bytes"], "error": item["error"]})
            continue
        algbw, bus = busbw(item["op"], item["bytes"], item["seconds"], world)
        rows.append({"op": item["op"], "bytes": item["bytes"], "ms": round(item["seconds"] * 1e3, 3),
                     "algbw_gbs": round(algbw, 1), "busbw_gbs": round(bus, 1),
                     "pct_of_link_peak": round(100.0 * bus / peak["gbs"], 1) if peak and peak.get("gbs") else None})
    return {"world": world, "checks": raw.get("checks", []), "bandwidth": rows, "link_peak": peak}


def size_label(nbytes):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= div and nbytes % div == 0:
            return "%d %s" % (nbytes // div, unit)
    return "%d B" % nbytes


def render_markdown(per_gpu, collectives):
    """The per-GPU matrix and the collective tables, as Markdown lines."""
    lines = []
    if per_gpu:
        checks = []
        for row in per_gpu["rows"]:
            if row["check"] not in checks:
                checks.append(row["check"])
        status = dict(((r["gpu"], r["check"]), r["status"]) for r in per_gpu["rows"])
        lines += ["", "## Every GPU", "", "| GPU | UUID | name | " + " | ".join(checks) + " |",
                  "|---|---|---|" + "---|" * len(checks)]
        for gpu in per_gpu["gpus"]:
            cells = [(status.get((gpu["index"], c)) or "-") for c in checks]
            lines.append("| %s | %s | %s | %s |" % (
                gpu["index"], gpu.get("uuid") or "-", gpu.get("name") or "-",
                " | ".join(c.upper() if c == "fail" else c for c in cells)))
    if collectives:
        lines += ["", "## Collectives across the host's GPUs", ""]
        if collectives.get("skipped"):
            lines.append("Skipped: %s." % collectives["skipped"])
            return lines
        peak = collectives.get("link_peak")
        lines.append("World of %d GPUs; link peak %s." % (
            collectives["world"], "%.1f GB/s per GPU and direction (%s)" % (peak["gbs"], peak["detail"]) if peak
            else "unknown"))
        lines += ["", "| check | status | detail |", "|---|---|---|"]
        lines += ["| %s | %s | %s |" % (c["name"], c["status"], c.get("detail")) for c in collectives["checks"]]
        lines += ["", "| op | size | time ms | algbw GB/s | busbw GB/s | % of link peak |", "|---|---|---|---|---|---|"]
        for row in collectives["bandwidth"]:
            if row.get("error"):
                lines.append("| %s | %s | error: %s | | | |" % (row["op"], size_label(row["bytes"]), row["error"]))
            else:
                lines.append("| %s | %s | %s | %s | %s | %s |" % (
                    row["op"], size_label(row["bytes"]), row["ms"], row["algbw_gbs"], row["busbw_gbs"],
                    row["pct_of_link_peak"] if row["pct_of_link_peak"] is not None else "-"))
    return lines
