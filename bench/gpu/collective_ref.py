"""all_reduce and all_gather over N processes, one GPU each, apart from the xhost play.

The comparison for bench/gpu/run_xhost_ngpu.sh: the same sizes per rank, warm-up and timed runs as the
xhost check's collective, measured another way: its own launcher (N children of this script, each pinned
to its GPU with CUDA_VISIBLE_DEVICES, rendezvous through init_method tcp://), timed with CUDA events on the
current stream (the xhost check times with the host clock after a synchronize), all_gather through
all_gather_into_tensor into one flat output. Bus bandwidth as nccl-tests defines it (doc/PERFORMANCE.md):
all_reduce busbw = algbw * 2(n-1)/n with algbw = S / t, S the bytes per rank; all_gather busbw =
algbw * (n-1)/n with S the total gathered bytes. The slowest rank's time counts.

Usage: python collective_ref.py --out OUT.json --world N [--sizes 268435456] [--iters 20] [--warmup 5]
       [--backend nccl|gloo]
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import time


def rank_main(args):
    import torch
    import torch.distributed as dist
    rank, world = args.rank, args.world
    cuda = args.backend == "nccl"
    if cuda:
        torch.cuda.set_device(0)
    dist.init_process_group(args.backend, init_method="tcp://127.0.0.1:%d" % args.port, rank=rank,
                            world_size=world)
    device = "cuda" if cuda else "cpu"

    def timed(step):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(args.iters):
                step()
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end) / 1e3 / args.iters
        begun = time.perf_counter()
        for _ in range(args.iters):
            step()
        return (time.perf_counter() - begun) / args.iters

    rows = []
    for size in args.sizes:
        count = size // 4
        x = torch.ones(count, device=device)
        for _ in range(args.warmup):
            dist.all_reduce(x)
        dist.barrier()
        seconds = timed(lambda: dist.all_reduce(x))
        x.fill_(float(rank + 1))
        dist.all_reduce(x)
        exact = bool((x == world * (world + 1) / 2.0).all())
        rows.append({"op": "all_reduce", "bytes": size, "seconds": seconds, "exact": exact})
        x.fill_(float(rank + 1))
        y = torch.zeros(world * count, device=device)
        for _ in range(args.warmup):
            dist.all_gather_into_tensor(y, x)
        dist.barrier()
        seconds = timed(lambda: dist.all_gather_into_tensor(y, x))
        exact = all(bool((part == float(r + 1)).all()) for r, part in enumerate(y.chunk(world)))
        rows.append({"op": "all_gather", "bytes": size, "seconds": seconds, "exact": exact})
        del x, y
        if cuda:
            torch.cuda.empty_cache()
    out = {"rank": rank, "rows": rows, "torch": torch.__version__}
    if cuda:
        out["device"] = torch.cuda.get_device_name(0)
        out["nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version())
    dist.barrier()
    dist.destroy_process_group()
    print(json.dumps(out))


def free_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def bandwidth(op, size, seconds, world):
    """(algbw, busbw) in GB/s, nccl-tests' definitions."""
    if op == "all_reduce":
        algbw = size / seconds / 1e9
        return algbw, algbw * 2.0 * (world - 1) / world
    algbw = size * world / seconds / 1e9
    return algbw, algbw * (world - 1) / world


def launch(args):
    port = free_port()
    procs = []
    for rank in range(args.world):
        env = dict(os.environ)
        if args.backend == "nccl":
            env["CUDA_VISIBLE_DEVICES"] = "0" if args.share_gpu else str(rank)
        if args.share_gpu:
            # Every rank on GPU 0, each its own host to NCCL (as bench/gpu/run_xhost_ngpu.sh's SHARE_GPU).
            env["NCCL_HOSTID"] = "ref-%d" % rank
        cmd = [sys.executable, os.path.abspath(__file__), "--rank", str(rank), "--port", str(port),
               "--world", str(args.world), "--sizes", ",".join(str(s) for s in args.sizes),
               "--iters", str(args.iters), "--warmup", str(args.warmup), "--backend", args.backend]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                      universal_newlines=True))
    results, texts = [], []
    for proc in procs:
        try:
            text, _ = proc.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            text, _ = proc.communicate()
        texts.append(text)
        lines = [line for line in text.splitlines() if line.startswith("{")]
        results.append(json.loads(lines[-1]) if lines and proc.returncode == 0 else None)
    report = {"world": args.world, "sizes": args.sizes, "iters": args.iters, "warmup": args.warmup,
              "backend": args.backend, "ok": all(results), "rows": []}
    if all(results):
        report.update(dict((k, results[0].get(k)) for k in ("torch", "device", "nccl")))
        for i, row in enumerate(results[0]["rows"]):
            seconds = max(r["rows"][i]["seconds"] for r in results)
            algbw, busbw = bandwidth(row["op"], row["bytes"], seconds, args.world)
            report["rows"].append({"op": row["op"], "bytes": row["bytes"], "seconds": round(seconds, 6),
                                   "algbw": round(algbw, 3), "busbw": round(busbw, 3),
                                   "exact": all(r["rows"][i]["exact"] for r in results)})
    else:
        report["error"] = [t.strip().splitlines()[-5:] for t in texts]
    with open(args.out, "w") as handle:
        json.dump(report, handle, indent=1)
    for row in report["rows"]:
        print("independent %s %d MiB/rank x %d ranks: %.6f s, algbw %.3f GB/s, busbw %.3f GB/s, exact %s" % (
            row["op"], row["bytes"] >> 20, args.world, row["seconds"], row["algbw"], row["busbw"], row["exact"]))
    return 0 if report["ok"] else 1


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--rank", type=int)
    parser.add_argument("--port", type=int)
    parser.add_argument("--sizes", default="268435456", type=lambda s: [int(v) for v in s.split(",")])
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--backend", default="nccl", choices=["nccl", "gloo"])
    parser.add_argument("--timeout", type=int, default=300)
    parser.add_argument("--share-gpu", action="store_true",
                        help="every rank on GPU 0 with NCCL_HOSTID=ref-<rank> (NCCL joins them over its network)")
    args = parser.parse_args()
    if args.rank is not None:
        rank_main(args)
        return 0
    return launch(args)


if __name__ == "__main__":
    sys.exit(main())
