# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cross-host check's own process, one per host, run by the stack's python (the venv with torch) as
``python -c SOURCE CONFIG_JSON``: xhost.run_script passes this file's source, read through its loader (AnsiballZ
ships module_utils as .py files in its zip, imported by zipimport, so a file beside it could not be opened by path;
the loader's get_source reads it from the zip as from a checkout). argv[1] is the JSON config; the last stdout line
is the JSON result.

Importing it runs nothing and needs no torch (torch is imported by main()); the pure parts are tested directly.

Rendezvous is a TCPStore on the first host. Every rank first announces itself in the store; the first host waits
for all of them up to a join timeout and, when one is missing, tells the others which hosts never joined, so the
check ends with their names instead of hanging in init_process_group. Then: an all_reduce checked for the exact
sum, a ping-pong between every pair of a round (send/recv) for the bandwidth per pair, then the collective over
every host."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import os
import socket
import sys
import time


def main(argv):
    cfg = json.loads(argv[1])
    out = {"rank": cfg["rank"], "host": cfg["hosts"][cfg["rank"]], "status": "ok", "backend": cfg["backend"]}

    def done(**kw):
        out.update(kw)
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
        os._exit(0)

    try:
        import torch
        import torch.distributed as dist
    except Exception as exc:  # pylint: disable=broad-except
        done(status="error", reason="cannot import torch: %s" % exc)
    rank, world, hosts = cfg["rank"], len(cfg["hosts"]), cfg["hosts"]
    join_timeout = float(cfg["join_timeout"])
    out["torch"] = torch.__version__
    try:
        store = dist.TCPStore(cfg["master_addr"], int(cfg["master_port"]), None, rank == 0,
                              datetime.timedelta(seconds=join_timeout), wait_for_workers=False)
    except Exception as exc:  # pylint: disable=broad-except
        done(status="error", reason="rendezvous on %s (%s:%s) did not answer within %d s: %s"
             % (hosts[0], cfg["master_addr"], cfg["master_port"], join_timeout, str(exc).splitlines()[0]))
    store.set("joined/%d" % rank, socket.gethostname())
    if rank == 0:
        deadline = time.time() + join_timeout
        missing = list(range(world))
        while missing and time.time() < deadline:
            missing = [r for r in range(world) if not store.check(["joined/%d" % r])]
            if missing:
                time.sleep(0.2)
        store.set("verdict", json.dumps({"missing": [hosts[r] for r in missing]}))
    try:
        store.wait(["verdict"], datetime.timedelta(seconds=join_timeout + 30))
        verdict = json.loads(store.get("verdict"))
    except Exception as exc:  # pylint: disable=broad-except
        done(status="error", reason="no word from the rendezvous host %s: %s" % (hosts[0], str(exc).splitlines()[0]))
    if rank != 0:
        store.set("ack/%d" % rank, "1")
    elif verdict["missing"]:
        # The store lives in this process: keep it up until every host that joined has read the verdict.
        joined = [r for r in range(world) if hosts[r] not in verdict["missing"] and r != 0]
        deadline = time.time() + 30
        while time.time() < deadline and not all(store.check(["ack/%d" % r]) for r in joined):
            time.sleep(0.2)
    if verdict["missing"]:
        done(status="not_joined", missing=verdict["missing"],
             reason="%s never joined within %d s" % (", ".join(verdict["missing"]), join_timeout))
    backend = cfg["backend"]
    device = "cuda" if backend == "nccl" else "cpu"
    if device == "cuda":
        torch.cuda.set_device(0)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=float(cfg["op_timeout"])))

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    checks = []
    t = torch.full((1024,), float(rank + 1), device=device)
    dist.all_reduce(t)
    sync()
    expect = world * (world + 1) / 2.0
    checks.append({"name": "all_reduce", "status": "pass" if bool((t == expect).all()) else "fail",
                   "detail": "sum over %d hosts: %s, expected %s" % (world, t[0].item(), expect)})
    pair_rounds(cfg, rank, hosts, store, torch, dist, device, sync)
    screened = None
    if cfg.get("screen"):
        def run_round(k, groups):
            # Every rank makes every group, in the same order (torch wants all ranks in new_group), before any
            # collective starts: then the groups of a round run at once.
            made = [dist.new_group(ranks=sorted(g)) for g in groups]
            for i, g in enumerate(groups):
                if rank in g:
                    store.set("screen/%d/%d/%d" % (k, i, rank), json.dumps(
                        group_all_reduce(cfg["screen"], rank, g, made[i], torch, dist, device, sync)))
            dist.barrier()
        screened = screen_rounds(cfg, rank, hosts, store, run_round)
    collectives = collective_over_all(cfg, rank, world, hosts, store, torch, dist, device, sync, expect)
    pairs = []
    if rank == 0:
        for a, b in sorted(tuple(p) for rnd in cfg["rounds"] for p in rnd):
            for size in cfg["sizes"]:
                pairs.append(json.loads(store.get("pair/%d/%d/%d" % (a, b, size))))
    dist.barrier()
    dist.destroy_process_group()
    done(checks=checks, pairs=pairs, collectives=collectives, world=world, backend=backend, screening=screened)


def pair_rounds(cfg, rank, hosts, store, torch, dist, device, sync):
    """cfg["rounds"]: disjoint pairs per round (rounds.pair_rounds); a host is in at most one pair of a round. The
    lower rank of a pair writes its bandwidth into the store; a barrier ends each round."""
    for rnd in cfg["rounds"]:
        for a, b in rnd:
            if rank not in (a, b):
                continue
            for size in cfg["sizes"]:
                buf = torch.empty(size // 4, dtype=torch.float32, device=device).fill_(float(a))
                peer = b if rank == a else a

                def once(buf=buf, peer=peer, a=a):
                    if rank == a:
                        dist.send(buf, peer)
                        dist.recv(buf, peer)
                    else:
                        dist.recv(buf, peer)
                        dist.send(buf, peer)
                once()
                sync()
                start = time.perf_counter()
                for dummy in range(int(cfg["iters"])):
                    once()
                sync()
                seconds = time.perf_counter() - start
                ok = bool((buf == float(a)).all())
                if rank == a:
                    # Each round trip moves the buffer once in each direction.
                    gbs = 2.0 * size * int(cfg["iters"]) / seconds / 1e9
                    store.set("pair/%d/%d/%d" % (a, b, size), json.dumps(
                        {"a": hosts[a], "b": hosts[b], "bytes": size, "gbs": round(gbs, 3),
                         "seconds": round(seconds, 4), "exact": ok}))
                # Freed before the next size: the memory bound (acceptance.buffer_bytes) counts one pair buffer at
                # a time.
                del buf, once
                if device == "cuda":
                    torch.cuda.empty_cache()
        dist.barrier()


def group_all_reduce(spec, rank, group, made, torch, dist, device, sync):
    """One group's part of a screening round: all_reduce of spec["size"] bytes per rank over the group, warm-up runs
    then the timed ones; this rank's seconds per run, and whether a last run from fresh inputs summed exactly."""
    x = torch.full((int(spec["size"]) // 4,), float(rank + 1), device=device)
    for dummy in range(int(spec["warmup"])):
        dist.all_reduce(x, group=made)
    sync()
    dist.barrier(group=made)
    start = time.perf_counter()
    for dummy in range(int(spec["iters"])):
        dist.all_reduce(x, group=made)
    sync()
    seconds = (time.perf_counter() - start) / int(spec["iters"])
    x.fill_(float(rank + 1))
    dist.all_reduce(x, group=made)
    sync()
    ok = bool((x == float(sum(r + 1 for r in group))).all())
    del x
    if device == "cuda":
        torch.cuda.empty_cache()
    return {"seconds": seconds, "exact": ok}


def screen_rounds(cfg, rank, hosts, store, run_round):
    """The grouped search, on every rank: each publishes its link rate; rank 0 runs screening.screen (its source is
    cfg["screen"]["source"], the module's own file) and returns the report, the others follow the rounds it
    publishes until it says done. run_round(k, groups) runs round k's group collectives on this rank and returns
    when every rank has (a barrier)."""
    spec = cfg["screen"]
    store.set("link/%d" % rank, json.dumps(cfg.get("link_gbps")))
    if rank != 0:
        k = 0
        while True:
            key = "screen/round/%d" % k
            store.wait([key], datetime.timedelta(seconds=float(cfg["op_timeout"]) * 4))
            said = json.loads(store.get(key))
            if said.get("done"):
                return None
            run_round(k, said["groups"])
            k += 1
    return coordinate(spec, hosts, store, run_round)


def coordinate(spec, hosts, store, run_round):
    """Rank 0: screening.screen over the ranks, each round published to the store, run, then judged from what every
    member wrote (judge_group). The report: rounds used against the round-robin's, each group's row, and the bad
    nodes by name with why."""
    screening = {}
    exec(compile(spec["source"], "screening.py", "exec"), screening)  # pylint: disable=exec-used
    measured = []

    def measure(groups):
        # The search works on names (its reasons name the buddy); the round goes out as ranks.
        k, ranks = len(measured), [[hosts.index(h) for h in g] for g in groups]
        store.set("screen/round/%d" % k, json.dumps({"groups": ranks}))
        run_round(k, ranks)
        rows = [judge_group(store, k, i, g, hosts, spec) for i, g in enumerate(ranks)]
        measured.append(rows)
        return [r["passed"] for r in rows]

    try:
        found = screening["screen"](list(hosts), measure, int(spec["min_nodes"]))
    finally:
        # The others stop following, whatever happened here.
        store.set("screen/round/%d" % len(measured), json.dumps({"done": True}))
    rows = [r for rnd in measured for r in rnd]
    bad = {}
    for h, why in found["bad"].items():
        last = [row for row in rows if h in row["group"] and row["passed"] is not True]
        bad[h] = why + ("; %s" % last[-1]["why"] if last and last[-1]["why"] else "")
    n = len(hosts)
    return {"mode": found["mode"], "rounds": len(found["rounds"]), "round_robin_rounds": n - 1 + n % 2,
            "groups": rows, "bad": bad, "healthy": list(found["healthy"])}


def judge_group(store, k, i, group, hosts, spec):
    """Group i of round k: its all_reduce's busbw (nccl-tests: algbw x 2(n-1)/n, the slowest member's time) against
    spec["min_busbw_fraction"] of the slowest member's link. passed: True, False, or None when a member's measurement
    or link rate is missing - a missing measurement never clears a node."""
    names = [hosts[r] for r in group]
    row = {"round": k, "group": names, "busbw": None, "link_gbps": None, "pct_of_link": None, "passed": None,
           "why": None}
    got, links = {}, []
    for r in group:
        key = "screen/%d/%d/%d" % (k, i, r)
        if store.check([key]):
            got[r] = json.loads(store.get(key))
        links.append(json.loads(store.get("link/%d" % r)) if store.check(["link/%d" % r]) else None)
    lost = [hosts[r] for r in group if r not in got]
    if lost:
        row["why"] = "no measurement came back from %s" % ", ".join(lost)
        return row
    n, seconds = len(group), max(v["seconds"] for v in got.values())
    if seconds <= 0:
        row["why"] = "no time measured"
        return row
    busbw = round(float(spec["size"]) / seconds / 1e9 * 2.0 * (n - 1) / n, 3)
    row["busbw"] = busbw
    wrong = [hosts[r] for r in group if not got[r]["exact"]]
    if wrong:
        row["passed"], row["why"] = False, "result not exact on %s" % ", ".join(wrong)
        return row
    if not all(links):
        row["why"] = "no link rate from %s to judge against" % ", ".join(
            hosts[r] for r, s in zip(group, links) if not s)
        return row
    link = min(links)
    fraction = busbw / (link / 8.0)
    row["link_gbps"], row["pct_of_link"] = link, round(100 * fraction, 1)
    row["passed"] = fraction >= float(spec["min_busbw_fraction"])
    if not row["passed"]:
        row["why"] = "all_reduce over %s: busbw %.3f GB/s, %.1f%% of the %g Gb/s link, below %.0f%%" % (
            ", ".join(names), busbw, 100 * fraction, link, 100 * float(spec["min_busbw_fraction"]))
    return row


def collective_over_all(cfg, rank, world, hosts, store, torch, dist, device, sync, expect):
    """all_reduce and all_gather of `size` bytes per rank (all_gather's output is world times that), warm-up runs,
    then the timed ones. Every rank reports its own time per operation and whether its result was exact; rank 0
    gathers them (acceptance.judge_collectives turns them into algbw/busbw)."""
    collectives = []
    warmup, citers = int(cfg.get("warmup_iters", 0)), int(cfg.get("collective_iters", 0))
    for size in cfg.get("collective_sizes") or []:
        count = size // 4
        for op in ("all_reduce", "all_gather"):
            x = torch.full((count,), float(rank + 1), device=device)
            parts = None
            if op == "all_reduce":
                def step(x=x):
                    dist.all_reduce(x)
            else:
                # Into one flat output (what nccl-tests times; a list of outputs adds a copy): all_gather_single
                # where torch has it (2.13 deprecates the older name), all_gather_into_tensor before.
                y = torch.zeros(world * count, device=device)
                parts = list(y.chunk(world))
                gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

                def step(x=x, y=y, gather=gather):
                    gather(y, x)
            for dummy in range(warmup):
                step()
            sync()
            dist.barrier()
            start = time.perf_counter()
            for dummy in range(citers):
                step()
            sync()
            seconds = (time.perf_counter() - start) / citers
            if op == "all_reduce":
                # In place, the timed runs summed sums: one more from fresh inputs is the one checked exactly.
                x.fill_(float(rank + 1))
                dist.all_reduce(x)
                sync()
                ok = bool((x == expect).all())
            else:
                # The input is untouched: the last timed run's output must hold every rank's r + 1.
                ok = all(bool((parts[r] == float(r + 1)).all()) for r in range(world))
                del y, parts, gather
            del x, step
            if device == "cuda":
                torch.cuda.empty_cache()
            store.set("coll/%s/%d/%d" % (op, size, rank), json.dumps({"seconds": seconds, "exact": ok}))
            dist.barrier()
            if rank == 0:
                got = [json.loads(store.get("coll/%s/%d/%d" % (op, size, r))) for r in range(world)]
                collectives.append({"op": op, "bytes": size, "iters": citers, "warmup": warmup,
                                    "seconds": dict((hosts[r], got[r]["seconds"]) for r in range(world)),
                                    "exact": dict((hosts[r], got[r]["exact"]) for r in range(world))})
    return collectives


if __name__ == "__main__":
    main(sys.argv)
