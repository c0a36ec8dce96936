"""A send/recv ping-pong between two processes, one GPU each, apart from the xhost play.

The comparison for bench/gpu/run_xhost_2gpu.sh: the same message sizes and round trips as the xhost check,
measured another way - its own launcher (two child processes of this script, each pinned to its GPU with
CUDA_VISIBLE_DEVICES, rendezvous through init_method tcp://), timed with CUDA events on the current stream
(the xhost check times with the host clock), the received buffer checked on both sides. One-direction
bandwidth = 2 x bytes x round trips / seconds (each round trip carries the buffer once each way). Also an
in-place float32 all_reduce (nccl-tests bus bandwidth, world 2: busbw = algbw). The environment (NCCL_*)
passes to both ranks, so a run with NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 measures the same fallback.
With --hostid each rank gets NCCL_HOSTID=<tag>-<rank> (NCCL then treats the ranks as two hosts).

Usage: python pingpong_ref.py --out OUT.json [--sizes 67108864,268435456] [--iters 10] [--backend nccl|gloo]
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
    rank, peer = args.rank, 1 - args.rank
    cuda = args.backend == "nccl"
    if cuda:
        torch.cuda.set_device(0)
    dist.init_process_group(args.backend, init_method="tcp://127.0.0.1:%d" % args.port, rank=rank, world_size=2)
    device = "cuda" if cuda else "cpu"

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def clock():
        """(start, stop) -> seconds: CUDA events on the current stream, or the host clock on the CPU."""
        if cuda:
            events = [torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)]
            return (lambda: events[0].record()), (lambda: (events[1].record(), torch.cuda.synchronize(),
                                                           events[0].elapsed_time(events[1]) / 1e3)[-1])
        holder = []
        return (lambda: holder.append(time.perf_counter())), (lambda: time.perf_counter() - holder[0])

    out = {"rank": rank, "backend": args.backend, "torch": torch.__version__, "pingpong": [], "all_reduce": []}
    if cuda:
        out["device"] = torch.cuda.get_device_name(0)
        out["nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version())
    for size in args.sizes:
        n = size // 4
        mine = torch.full((n,), 7.0 if rank == 0 else -1.0, device=device)
        back = torch.empty(n, device=device)

        def round_trip():
            if rank == 0:
                dist.send(mine, peer)
                dist.recv(back, peer)
            else:
                dist.recv(back, peer)
                dist.send(back, peer)
        round_trip()
        sync()
        start, stop = clock()
        wall = time.perf_counter()
        start()
        for _ in range(args.iters):
            round_trip()
        seconds = stop()
        wall = time.perf_counter() - wall
        exact = bool((back == 7.0).all())
        out["pingpong"].append({"bytes": size, "iters": args.iters, "seconds": round(seconds, 5),
                                "gbs": round(2.0 * size * args.iters / seconds / 1e9, 3),
                                "gbs_host_clock": round(2.0 * size * args.iters / wall / 1e9, 3), "exact": exact})
        buf = torch.ones(n, device=device)
        dist.all_reduce(buf)
        sync()
        start, stop = clock()
        start()
        for _ in range(args.iters):
            dist.all_reduce(buf)
        seconds = stop()
        algbw = size * args.iters / seconds / 1e9
        out["all_reduce"].append({"bytes": size, "iters": args.iters, "seconds": round(seconds, 5),
                                  "algbw_gbs": round(algbw, 3), "busbw_gbs": round(algbw, 3),
                                  "exact": bool((buf == 2.0 ** (args.iters + 1)).all())})
        del mine, back, buf
    dist.barrier()
    dist.destroy_process_group()
    print(json.dumps(out))


def free_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def launch(args):
    """Two children, one per GPU; rank 0's result (and rank 1's exactness) into --out, NCCL's lines beside."""
    port = free_port()
    procs = []
    for rank in (0, 1):
        env = dict(os.environ)
        if args.backend == "nccl":
            env["CUDA_VISIBLE_DEVICES"] = str(args.gpus[rank])
        if args.hostid:
            env["NCCL_HOSTID"] = "%s-%d" % (args.tag, rank)
        cmd = [sys.executable, os.path.abspath(__file__), "--rank", str(rank), "--port", str(port),
               "--sizes", ",".join(str(s) for s in args.sizes), "--iters", str(args.iters), "--backend", args.backend]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                      universal_newlines=True))
    texts, results = [], []
    for proc in procs:
        try:
            text, _ = proc.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            text, _ = proc.communicate()
            text += "\n(killed after %d s)" % args.timeout
        texts.append(text)
        lines = [line for line in text.splitlines() if line.startswith("{")]
        results.append(json.loads(lines[-1]) if lines and proc.returncode == 0 else None)
    report = {"tag": args.tag, "sizes": args.sizes, "iters": args.iters, "backend": args.backend,
              "env": dict((k, v) for k, v in os.environ.items() if k.startswith("NCCL_")),
              "hostid_per_rank": bool(args.hostid), "ok": all(results)}
    if all(results):
        report.update(results[0])
        report.pop("rank", None)
        for row, other in zip(report["pingpong"], results[1]["pingpong"]):
            row["exact"] = row["exact"] and other["exact"]
    else:
        report["error"] = [t.strip().splitlines()[-5:] for t in texts]
    # NCCL's own lines (NCCL_DEBUG=INFO) about the network and the channels, as printed, from both ranks.
    keys = ("NET/", "Using network", "NET plugin", " via ", "NCCL version", "NCCL_HOSTID")
    report["nccl_lines"] = [line for t in texts for line in t.splitlines() if "NCCL INFO" in line
                            and any(k in line for k in keys)][:200]
    with open(args.out, "w") as handle:
        json.dump(report, handle, indent=1)
    print(json.dumps(dict((k, report.get(k)) for k in ("tag", "ok", "pingpong", "all_reduce", "error")), indent=1))
    return 0 if all(results) else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out")
    parser.add_argument("--sizes", default="67108864,268435456",
                        type=lambda text: [int(s) for s in text.split(",") if s])
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--backend", choices=["nccl", "gloo"], default="nccl")
    parser.add_argument("--gpus", default="0,1", type=lambda text: [int(s) for s in text.split(",")])
    parser.add_argument("--hostid", action="store_true", help="NCCL_HOSTID per rank (two hosts to NCCL)")
    parser.add_argument("--tag", default="ref")
    parser.add_argument("--timeout", type=int, default=180)
    parser.add_argument("--rank", type=int, default=None)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    if args.rank is not None:
        rank_main(args)
        return 0
    if not args.out:
        parser.error("--out is needed")
    return launch(args)


if __name__ == "__main__":
    sys.exit(main())
