# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Kept whole: at the limit, two scripts held as text (SCRIPT, PROBE) beside the functions that run and
# judge them.
"""Collectives across the hosts of a group: torch.distributed with one process per host.

Rendezvous is a TCPStore on the first host. Every rank first announces itself in the store; the
first host waits for all of them up to a join timeout and, when one is missing, tells the others
which hosts never joined, so the check ends with their names instead of hanging in
init_process_group. Then: an all_reduce checked for the exact sum, and a ping-pong between every
pair of hosts (send/recv) for the bandwidth per pair, in rounds of disjoint pairs (pair_rounds): all
pairs of a round at once, a barrier between rounds, so N hosts take N-1 rounds (N for odd N), not
N(N-1)/2 pair slots.

Plain functions; the xhost_collectives module is the Ansible glue.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import subprocess

from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import fabric
from ansible_collections.sparkforge.stack.plugins.module_utils.fabric.acceptance import (
    group_verdict, judge_collectives, node_verdicts, port_reasons, transport_reasons)

# Runs on every host with the stack's python. argv[1] is the JSON config; the last stdout line
# is the JSON result.
SCRIPT = r'''
import datetime, json, os, socket, sys, time
cfg = json.loads(sys.argv[1])
out = {"rank": cfg["rank"], "host": cfg["hosts"][cfg["rank"]], "status": "ok", "backend": cfg["backend"]}
def done(**kw):
    out.update(kw)
    print(json.dumps(out))
    sys.stdout.flush()
    os._exit(0)
try:
    import torch
    import torch.distributed as dist
except Exception as exc:
    done(status="error", reason="cannot import torch: %s" % exc)
rank, world, hosts = cfg["rank"], len(cfg["hosts"]), cfg["hosts"]
join_timeout = float(cfg["join_timeout"])
out["torch"] = torch.__version__
try:
    store = dist.TCPStore(cfg["master_addr"], int(cfg["master_port"]), None, rank == 0,
                          datetime.timedelta(seconds=join_timeout), wait_for_workers=False)
except Exception as exc:
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
except Exception as exc:
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
pairs = []
# cfg["rounds"]: disjoint pairs per round (pair_rounds); a host is in at most one pair of a round.
for rnd in cfg["rounds"]:
    for a, b in rnd:
        if rank not in (a, b):
            continue
        for size in cfg["sizes"]:
            buf = torch.empty(size // 4, dtype=torch.float32, device=device).fill_(float(a))
            peer = b if rank == a else a
            def once():
                if rank == a:
                    dist.send(buf, peer); dist.recv(buf, peer)
                else:
                    dist.recv(buf, peer); dist.send(buf, peer)
            once(); sync()
            start = time.perf_counter()
            for _ in range(int(cfg["iters"])):
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
            # Freed before the next size: the memory bound (xhost.buffer_bytes) counts one pair buffer at a time.
            del buf, once
            if device == "cuda":
                torch.cuda.empty_cache()
    dist.barrier()
# The collective over every host: all_reduce and all_gather of `size` bytes per rank (all_gather's output is
# world times that), warm-up runs, then the timed ones. Every rank reports its own time per operation and
# whether its result was exact; rank 0 gathers them (xhost.judge_collectives turns them into algbw/busbw).
collectives = []
warmup, citers = int(cfg.get("warmup_iters", 0)), int(cfg.get("collective_iters", 0))
for size in cfg.get("collective_sizes") or []:
    count = size // 4
    for op in ("all_reduce", "all_gather"):
        x = torch.full((count,), float(rank + 1), device=device)
        if op == "all_reduce":
            def step():
                dist.all_reduce(x)
        else:
            # Into one flat output (what nccl-tests times; a list of outputs adds a copy): all_gather_single where
            # torch has it (2.13 deprecates the older name), all_gather_into_tensor before.
            y = torch.zeros(world * count, device=device)
            parts = list(y.chunk(world))
            gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
            def step():
                gather(y, x)
        for _ in range(warmup):
            step()
        sync()
        dist.barrier()
        start = time.perf_counter()
        for _ in range(citers):
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
if rank == 0:
    for a, b in sorted(tuple(p) for rnd in cfg["rounds"] for p in rnd):
        for size in cfg["sizes"]:
            pairs.append(json.loads(store.get("pair/%d/%d/%d" % (a, b, size))))
dist.barrier()
dist.destroy_process_group()
done(checks=checks, pairs=pairs, collectives=collectives, world=world, backend=backend)
'''


class XhostError(Exception):
    pass


def pair_rounds(n):
    """Every pair of n ranks exactly once, in rounds of disjoint pairs (the circle method of a round-robin
    tournament): rank 0 stays put, the others turn one place a round, and round r pairs the i-th place with
    the (m-1-i)-th. n - 1 rounds of n/2 pairs for even n; for odd n a bye rank is added and its partner
    sits the round out, n rounds of (n-1)/2 pairs. Returns [[(a, b), ...], ...] with a < b."""
    if n < 2:
        return []
    m = n + (n % 2)
    places = list(range(m))
    rounds = []
    for dummy in range(m - 1):
        pairs = []
        for i in range(m // 2):
            a, b = places[i], places[m - 1 - i]
            if a < n and b < n:             # rank n (odd n) is the bye
                pairs.append((min(a, b), max(a, b)))
        rounds.append(sorted(pairs))
        places = [places[0], places[-1]] + places[1:-1]
    return rounds


def ring_rounds(n):
    """A ring's pairs: only the cabled neighbours (rank i's port 0 to rank i+1's port 1, the last back to the first),
    in rounds where no node has two cables busy - both ports of a GB10 share its PCIe controllers, so a cable is
    measured with both ends' other cables idle. Even n: two rounds of n/2 cables; odd n: the last cable alone in a
    third round. [[(a, b), ...], ...] with a < b."""
    if n < 3:
        return pair_rounds(n)
    cables = [(i, (i + 1) % n) for i in range(n)]
    rounds = [[c for k, c in enumerate(cables) if k % 2 == 0 and (n % 2 == 0 or k < n - 1)],
              [c for k, c in enumerate(cables) if k % 2 == 1]]
    if n % 2:
        rounds.append([cables[-1]])
    return [sorted((min(a, b), max(a, b)) for a, b in r) for r in rounds]


def rounds_for(n, topology=None):
    """The pair rounds of a topology: a ring's cabled neighbours (ring_rounds), every pair otherwise."""
    return ring_rounds(n) if topology == "ring" else pair_rounds(n)


def rank_of(host, hosts):
    if host not in hosts:
        raise XhostError("%s is not in the host list %s" % (host, ", ".join(hosts)))
    return hosts.index(host)


def run_script(python, config, timeout, env=None):
    """Run SCRIPT for this host; (result dict, stderr tail)."""
    child = dict(os.environ)
    child.update(env or {})
    try:
        proc = subprocess.run([python, "-c", SCRIPT, json.dumps(config)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout, env=child,
                              check=False)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "reason": "the check did not end within %d s" % timeout}, ""
    except OSError as exc:
        return {"status": "error", "reason": "cannot run %s: %s" % (python, exc)}, ""
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = proc.stderr.strip().splitlines()[-5:]
        return {"status": "error", "reason": "the check ended (exit %s) without a result: %s"
                % (proc.returncode, " | ".join(tail) or "no output")}, proc.stderr[-2000:]
    result = json.loads(lines[-1])
    # NCCL_DEBUG=INFO: NCCL's own word on the transport it used (NET/IB or NET/Socket).
    result["nccl_net"] = fabric.nccl_net_lines(proc.stdout + "\n" + proc.stderr)
    return result, proc.stderr[-2000:]


def parse_rate(text):
    """Gb/s from an InfiniBand sysfs rate ("400 Gb/sec (4X NDR)") or an ethtool "Speed: 200000Mb/s"."""
    m = re.search(r"(\d+(?:\.\d+)?)\s*Gb/sec", text)
    if m:
        return float(m.group(1))
    m = re.search(r"Speed:\s*(\d+)\s*Mb/s", text)
    if m:
        return int(m.group(1)) / 1000.0
    return None


def link_speed(ifname=None, hca=None, sysfs="/sys/class"):
    """(Gb/s, where it was read) of the interface or HCA port the collectives use; (None, why) when unknown."""
    if hca:
        name, port = (hca.split(":", 1) + ["1"])[:2]
        path = os.path.join(sysfs, "infiniband", name, "ports", port, "rate")
        try:
            with open(path) as handle:
                return parse_rate(handle.read()), path
        except (IOError, OSError) as exc:
            return None, "%s: %s" % (path, exc)
    if ifname:
        path = os.path.join(sysfs, "net", ifname, "speed")
        try:
            with open(path) as handle:
                mbs = int(handle.read().strip())
        except (IOError, OSError, ValueError) as exc:
            return None, "%s: %s" % (path, getattr(exc, "strerror", None) or exc)
        if mbs <= 0:
            return None, "%s reports no speed (%d)" % (path, mbs)
        return mbs / 1000.0, path
    return None, "no interface or HCA given"


def check_rate(link_speed_gbps=None, fabric_link_gbps=None, ifname=None, hca=None, sysfs="/sys/class"):
    """(Gb/s, source) each pair and collective of this node is judged against: the user's link_speed_gbps, else the
    fabric port's rated speed (fabric_facts, both functions of the port together), else what sysfs says of the
    interface or HCA the check uses. In a ring that interface is the management port, so the fabric's rate comes
    before it: a 200 Gb/s ring judged against 10 Gb/s would pass on sockets."""
    if link_speed_gbps is not None:
        return link_speed_gbps, "link_speed_gbps"
    if fabric_link_gbps:
        return fabric_link_gbps, "the fabric port's rated speed (fabric_facts port.link_gbps)"
    return link_speed(ifname, hca, sysfs)


def judge(pairs, speeds, min_fraction, min_gbs=None):
    """Per pair, its best bandwidth against the slower NIC of the two (Gb/s -> GB/s); a host fails
    when every pair it is in is below the threshold (with two hosts, both).

    speeds: {host: Gb/s or None}. Returns {"pairs": [...], "slowest": {...}, "failed_hosts": [...]}.
    """
    best = {}
    for p in pairs:
        key = (p["a"], p["b"])
        if key not in best or p["gbs"] > best[key]["gbs"]:
            best[key] = p
    rows, hosts = [], []
    for (a, b), p in sorted(best.items()):
        for h in (a, b):
            if h not in hosts:
                hosts.append(h)
        sa, sb = speeds.get(a), speeds.get(b)
        link = min(s for s in (sa, sb) if s) if (sa or sb) else None
        link_gbs = link / 8.0 if link else None
        fraction = p["gbs"] / link_gbs if link_gbs else None
        reasons = []
        if min_fraction and fraction is not None and fraction < min_fraction:
            reasons.append("%.1f%% of the %g Gb/s link, below %.0f%%" % (100 * fraction, link, 100 * min_fraction))
        if min_gbs and p["gbs"] < min_gbs:
            reasons.append("%.2f GB/s, below %g GB/s" % (p["gbs"], min_gbs))
        rows.append({"a": a, "b": b, "bytes": p["bytes"], "gbs": p["gbs"], "link_gbps": link,
                     "pct_of_link": round(100 * fraction, 1) if fraction is not None else None,
                     "exact": p.get("exact", True), "slow": bool(reasons), "why": "; ".join(reasons) or None})
    failed = []
    for h in hosts:
        mine = [r for r in rows if h in (r["a"], r["b"])]
        if mine and all(r["slow"] or not r["exact"] for r in mine):
            failed.append(h)
    slowest = min(rows, key=lambda r: r["gbs"]) if rows else None
    return {"pairs": rows, "slowest": slowest, "failed_hosts": failed}


def render_markdown(summary):
    lines = ["# Collectives across hosts", "",
             "%d hosts, backend %s; threshold %s of the slower NIC's link speed." % (
                 len(summary.get("hosts", [])), summary.get("backend"),
                 "%.0f%%" % (100 * summary["min_fraction"]) if summary.get("min_fraction") else "none"), ""]
    if summary.get("missing"):
        lines += ["Never joined: %s." % ", ".join(summary["missing"]), ""]
    lines += ["| host | link | status |", "|---|---|---|"]
    for h in summary.get("hosts", []):
        r = summary["per_host"].get(h, {})
        lines.append("| %s | %s | %s |" % (h, "%g Gb/s (%s)" % (r["link_gbps"], r.get("link_source"))
                                           if r.get("link_gbps") else (r.get("link_source") or "-"),
                                           r.get("status")))
    judged = summary.get("judged") or {}
    if judged.get("pairs"):
        lines += ["", "| pair | size | GB/s | link Gb/s | % of link | exact | slow | why |",
                  "|---|---|---|---|---|---|---|---|"]
        for p in judged["pairs"]:
            lines.append("| %s - %s | %d MiB | %.3f | %s | %s | %s | %s | %s |" % (
                p["a"], p["b"], p["bytes"] // 2 ** 20, p["gbs"],
                "%g" % p["link_gbps"] if p.get("link_gbps") else "-",
                p["pct_of_link"] if p["pct_of_link"] is not None else "-", "yes" if p["exact"] else "NO",
                "SLOW" if p.get("slow") else "no", pair_why(p)))
        s = judged["slowest"]
        lines += ["", "Slowest pair: %s - %s, %.3f GB/s%s." % (
            s["a"], s["b"], s["gbs"], " (%s%% of %g Gb/s)" % (s["pct_of_link"], s["link_gbps"])
            if s["pct_of_link"] is not None else "")]
    if summary.get("collectives"):
        lines += ["", "Collective over all %d nodes (nccl-tests' busbw: all_reduce algbw x 2(n-1)/n, all_gather "
                  "algbw x (n-1)/n of the total gathered bytes), against the slowest node's link%s:" % (
                      len(summary.get("hosts", [])), ", threshold %.0f%%" % (100 * summary["min_busbw_fraction"])
                      if summary.get("min_busbw_fraction") else ""), "",
                  "| op | bytes per node | total bytes | s per run | algbw GB/s | busbw GB/s | % of link | exact "
                  "| slow |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for r in summary["collectives"]:
            lines.append("| %s | %d | %d | %.6f | %.3f | %.3f | %s | %s | %s |" % (
                r["op"], r["bytes"], r["total_bytes"], r["seconds"], r["algbw"], r["busbw"],
                r["pct_of_link"] if r["pct_of_link"] is not None else "-",
                "yes" if r["exact"] else "NO (%s)" % ", ".join(r["not_exact_on"]), "SLOW" if r["slow"] else "no"))
    if summary.get("nodes"):
        lines += ["", "| node | verdict | reasons |", "|---|---|---|"]
        for v in summary["nodes"]:
            lines.append("| %s | %s | %s |" % (v["node"], v["verdict"], "; ".join(v["reasons"]) or "-"))
    if summary.get("failed_hosts"):
        lines += ["", "Failed: %s." % ", ".join(summary["failed_hosts"])]
        for h in summary["failed_hosts"]:
            for why in summary["per_host"].get(h, {}).get("diagnosis") or []:
                lines.append("- %s: %s" % (h, why))
    return "\n".join(lines) + "\n"


def pair_why(pair):
    """One cell: why the pair is slow (the threshold it missed), then NCCL's and the fabric's explanation."""
    return "; ".join([pair["why"]] * bool(pair.get("why")) + list(pair.get("diagnosis") or [])) or ""


def diagnose_pair(pair, results):
    """Why one slow pair is slow: fabric.diagnose with each end's NCCL lines and fabric figures, each sentence
    once (the two ends usually say the same)."""
    out = []
    for h in (pair["a"], pair["b"]):
        r = results.get(h) or {}
        for why in fabric.diagnose(pair["gbs"], r.get("nccl_net") or [], pair.get("link_gbps"),
                                   r.get("per_function_gbps"), r.get("functions"), r.get("management_gbps")):
            if why not in out:
                out.append(why)
    return out


def cross_host(summary, at=None, report=None):
    """The fleet summary's `cross_host` entry: every pair against its link (a, b, GB/s, link Gb/s, % of link,
    slow, why and NCCL's diagnosis), the slowest pair, the hosts that failed with each one's diagnosis, the
    hosts that never joined, and whether the group passed."""
    judged = summary.get("judged") or {}
    pairs = [dict((k, p.get(k)) for k in ("a", "b", "bytes", "gbs", "link_gbps", "pct_of_link", "exact", "slow",
                                          "why", "diagnosis")) for p in judged.get("pairs") or []]
    diagnosis = {}
    for h in summary.get("failed_hosts") or []:
        entry = (summary.get("per_host") or {}).get(h) or {}
        diagnosis[h] = list(entry.get("diagnosis") or []) or [entry.get("reason") or entry.get("status") or "failed"]
    return {"at": at, "hosts": list(summary.get("hosts") or []), "backend": summary.get("backend"),
            "min_fraction": summary.get("min_fraction"), "min_gbs": summary.get("min_gbs"),
            "pairs": pairs, "slowest": judged.get("slowest"), "failed_hosts": list(summary.get("failed_hosts") or []),
            "diagnosis": diagnosis, "missing": list(summary.get("missing") or []), "passed": summary.get("passed"),
            "min_busbw_fraction": summary.get("min_busbw_fraction"),
            "collectives": list(summary.get("collectives") or []), "nodes": list(summary.get("nodes") or []),
            "report": report}


def diagnose_host(host, result, pairs):
    """Why a slow host's best pair is slow: NCCL's NET lines (NCCL_DEBUG=INFO) and its fabric's figures
    (per_function_gbps, functions, management_gbps from fabric_facts, when the run was given them)."""
    mine = [p for p in pairs if host in (p["a"], p["b"])]
    if not mine:
        return []
    best = max(mine, key=lambda p: p["gbs"])
    return fabric.diagnose(best["gbs"], result.get("nccl_net") or [], best.get("link_gbps"),
                           result.get("per_function_gbps"), result.get("functions"), result.get("management_gbps"))


def rdma_expected(results, hosts, missing=()):
    """The nodes that ran NCCL with their fabric port's RDMA functions up (expect_rdma from the cluster play): their
    NCCL must have gone over RoCE/InfiniBand."""
    return [h for h in hosts if h not in missing and (results.get(h) or {}).get("expect_rdma")
            and (results.get(h) or {}).get("backend") == "nccl"]


def summarize(results, hosts, speeds, min_fraction, min_gbs=None, min_busbw_fraction=None, rated_gbps=None):
    """Combine every host's run result (keyed by host; a host with none did not run) into the
    group's verdict: which hosts never joined or failed, the pairs judged against the links, the collective over
    all nodes against the slowest node's link, each node's port speed, and the verdict per node (node_verdicts)."""
    per_host, missing, failed = {}, [], []
    for h in hosts:
        r = results.get(h)
        if not r:
            per_host[h] = {"status": "unreachable", "reason": "no result: the host did not run the check"}
            if h not in missing:
                missing.append(h)
            continue
        per_host[h] = {"status": r.get("status"), "reason": r.get("reason"), "link_gbps": speeds.get(h),
                       "link_source": r.get("link_source"), "nccl_net": list(r.get("nccl_net") or [])}
        for m in r.get("missing") or []:
            if m not in missing:
                missing.append(m)
    for h in missing:
        per_host[h]["status"] = "never joined" if per_host[h]["status"] != "unreachable" else "unreachable"
    judged = None
    first = results.get(hosts[0]) if hosts else None
    if first and first.get("status") == "ok":
        judged = judge(first.get("pairs") or [], speeds, min_fraction, min_gbs)
        bad_checks = [c for c in first.get("checks") or [] if c.get("status") != "pass"]
        for p in judged["pairs"]:
            p["diagnosis"] = diagnose_pair(p, results) if p["slow"] else []
        for h in judged["failed_hosts"]:
            per_host[h]["status"] = "slow link"
            per_host[h]["reason"] = "; ".join(sorted(set(p["why"] or "result not exact" for p in judged["pairs"]
                                                         if h in (p["a"], p["b"]))))
            diagnosis = diagnose_host(h, results.get(h) or {}, judged["pairs"])
            if diagnosis:
                per_host[h]["diagnosis"] = diagnosis
                per_host[h]["reason"] += "; " + "; ".join(diagnosis)
        failed += judged["failed_hosts"]
        if bad_checks:
            failed += [h for h in hosts if h not in failed]
            for h in hosts:
                per_host[h]["reason"] = "; ".join(c["detail"] for c in bad_checks)
    for h in hosts:
        status = per_host[h]["status"]
        if status in ("error", "timeout") or h in missing:
            if h not in failed:
                failed.append(h)
    if missing:
        # The others could not run the check: they are not failed, but not checked either.
        for h in hosts:
            if h not in failed and per_host[h]["status"] in ("not_joined", "ok"):
                per_host[h]["status"] = "not checked"
                per_host[h]["reason"] = "waiting for %s" % ", ".join(missing)
    known = [s for s in (speeds.get(h) for h in hosts) if s]
    link = min(known) if known else None
    collectives = judge_collectives(first.get("collectives"), len(hosts), link, min_busbw_fraction) \
        if judged is not None else []
    expected = rdma_expected(results, hosts, missing) if judged is not None else ()
    summary = {"hosts": list(hosts), "per_host": per_host, "missing": missing, "failed_hosts": failed,
               "judged": judged, "min_fraction": min_fraction, "min_gbs": min_gbs,
               "min_busbw_fraction": min_busbw_fraction, "rated_gbps": rated_gbps,
               "collectives": collectives, "collective_link_gbps": link,
               "port": port_reasons(dict((h, speeds.get(h)) for h in hosts), rated_gbps),
               "transport": transport_reasons(dict((h, per_host[h].get("nccl_net")) for h in hosts), expected),
               "backend": (first or {}).get("backend")}
    nodes = node_verdicts(summary)
    for v in nodes:
        per_host[v["node"]]["verdict"] = v["verdict"]
        per_host[v["node"]]["reasons"] = v["reasons"]
        if v["verdict"] == "fail" and v["node"] not in failed:
            failed.append(v["node"])
            per_host[v["node"]]["status"] = "failed"
            per_host[v["node"]]["reason"] = "; ".join(v["reasons"])
    summary["nodes"] = nodes
    summary["verdict"] = group_verdict(nodes)
    summary["passed"] = summary["verdict"]["verdict"] == "pass"
    return summary


# ------------------------------------------------------------------------------------------ parity
# Before any collective: every node must run the same stack. A node with another torch, NCCL or driver (or
# the cluster user under another UID) makes NCCL hang or fail in ways that name no node; compared here first,
# a difference names the node, the item and both values.

PARITY_ITEMS = ("driver", "cuda", "nccl", "torch", "kernel", "user", "uid")
# Read by the stack's python, so they are what a collective would load.
PYTHON_ITEMS = ("cuda", "nccl", "torch")

PROBE = r'''
import json
out = {}
try:
    import torch
    out["torch"] = torch.__version__
    out["cuda"] = torch.version.cuda
    try:
        v = torch.cuda.nccl.version()
        out["nccl"] = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
    except Exception:
        out["nccl"] = None      # a CPU build has no NCCL
except Exception as exc:
    out["error"] = "cannot import torch: %s" % str(exc).splitlines()[0]
print(json.dumps(out))
'''


def driver_version(sysfs="/sys"):
    """The loaded NVIDIA kernel module's version (/sys/module/nvidia/version, e.g. 580.95.05), or None."""
    try:
        with open(os.path.join(sysfs, "module", "nvidia", "version")) as handle:
            return handle.read().strip() or None
    except (IOError, OSError):
        return None


def user_facts(name=None):
    """(user name, uid): of ``name`` when given (the cluster user), else of the user this runs as.
    Raises XhostError when the named user does not exist here."""
    import pwd
    try:
        entry = pwd.getpwnam(name) if name else pwd.getpwuid(os.getuid())
    except KeyError:
        raise XhostError("user %s does not exist on this host" % name)
    return entry.pw_name, entry.pw_uid


def host_facts(python, user=None, sysfs="/sys", timeout=180, probe=True, env=None):
    """This host's parity items: driver (sysfs), kernel (uname), user and uid (passwd), and torch, its CUDA and
    NCCL as the stack's python reports them with the collectives' environment ``env`` (probe=False, or no such
    python: None, with why in "notes")."""
    facts = dict((k, None) for k in PARITY_ITEMS)
    facts["notes"] = []
    facts["driver"] = driver_version(sysfs)
    facts["kernel"] = os.uname()[2]
    try:
        facts["user"], facts["uid"] = user_facts(user)
    except XhostError as exc:
        facts["notes"].append(str(exc))
    if not probe:
        facts["notes"].append("torch, CUDA and NCCL not read")
        return facts
    if not python or not os.path.exists(python):
        facts["notes"].append("no python at %s: torch, CUDA and NCCL not read" % python)
        return facts
    try:
        child = dict(os.environ)
        child.update(env or {})
        proc = subprocess.run([python, "-c", PROBE], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=timeout, check=False, env=child)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        got = json.loads(lines[-1]) if lines else {"error": "no answer from %s (exit %s): %s" % (
            python, proc.returncode, proc.stderr.strip()[-300:])}
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        got = {"error": "%s: %s" % (python, exc)}
    for k in PYTHON_ITEMS:
        facts[k] = got.get(k)
    if got.get("error"):
        facts["notes"].append(got["error"])
    return facts


def _shown(value):
    return "none" if value is None else str(value)


def parity(facts, hosts, skip_unread=False):
    """Every difference between the hosts' parity items (facts: {host: host_facts()}), as sentences naming the
    node, the item and both values: "x3: torch 2.9.1+cpu, where x1 has 2.10.0+cpu". The reference value of an
    item is the one most hosts have (the first host's on a tie), so the odd node is the one named. A host
    without facts (unreachable) is left to the run, which names it as never joined. skip_unread: leave out
    python items a host could not read (check mode on a host whose stack is not installed yet)."""
    out = []
    present = [h for h in hosts if facts.get(h)]
    for item in PARITY_ITEMS:
        values = dict((h, facts[h].get(item)) for h in present)
        if skip_unread and item in PYTHON_ITEMS:
            values = dict((h, v) for h, v in values.items() if v is not None)
        if len(set(_shown(v) for v in values.values())) <= 1:
            continue
        counts = {}
        for h in present:
            if h in values:
                counts[_shown(values[h])] = counts.get(_shown(values[h]), 0) + 1
        top = max(counts.values())
        reference = next(_shown(values[h]) for h in present if h in values and counts[_shown(values[h])] == top)
        holder = next(h for h in present if h in values and _shown(values[h]) == reference)
        for h in present:
            if h in values and _shown(values[h]) != reference:
                out.append("%s: %s %s, where %s has %s" % (h, item, _shown(values[h]), holder, reference))
    return out
