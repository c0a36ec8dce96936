"""An all_reduce bandwidth measurement independent of torch_verify, for comparison on a multi-GPU host.

Written apart from the verify code on purpose (CUDA events on the current stream rather than host
timers, its own process launch): float32 in-place sum, nccl-tests' bus bandwidth
(busbw = algbw * 2(n-1)/n), the same sizes as verify (8 MiB .. 1 GiB).
Usage: python allreduce_ref.py OUT.json [ITERS]
"""
import json
import os
import sys


def rank_main(rank, world, port, iters, out_path):
    import torch
    import torch.distributed as dist
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world)
    results = []
    size = 8 << 20
    while size <= 1 << 30:
        buf = torch.ones(size // 4, dtype=torch.float32, device="cuda")
        for _ in range(5):
            dist.all_reduce(buf)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            dist.all_reduce(buf)
        end.record()
        torch.cuda.synchronize()
        ms = torch.tensor([start.elapsed_time(end) / iters], device="cuda")
        dist.all_reduce(ms, op=dist.ReduceOp.MAX)
        algbw = size / (ms.item() / 1e3) / 1e9
        results.append({"bytes": size, "ms": round(ms.item(), 4), "algbw_gbs": round(algbw, 1),
                        "busbw_gbs": round(algbw * 2 * (world - 1) / world, 1)})
        del buf
        size *= 2
    if rank == 0:
        with open(out_path, "w") as handle:
            json.dump({"world": world, "iters": iters, "results": results}, handle, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    import socket
    import torch
    import torch.multiprocessing as mp
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    world = torch.cuda.device_count()
    mp.spawn(rank_main, args=(world, port, int(sys.argv[2]) if len(sys.argv) > 2 else 20, sys.argv[1]),
             nprocs=world, join=True)
    with open(sys.argv[1]) as handle:
        print(handle.read())
