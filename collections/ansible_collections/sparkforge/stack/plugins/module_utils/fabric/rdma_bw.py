# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each cable's RDMA bandwidth per direction, measured with perftest's ib_write_bw before any NCCL run, then judged
by cable.cable_verdict against the manifest's floor.

perftest (linux-rdma/perftest, src/perftest_parameters.c usage()): a server is `ib_write_bw <options>`, a client the
same options and the server's address; -d/--ib-dev the RDMA device, -i/--ib-port its port, -p/--port the TCP port the
two ends exchange their queue pairs over (default 18515), -D/--duration seconds, -F no CPU-frequency warning,
--report_gbits Gbit/s instead of MiB/s ("MiB=2^20 byte, while Gb=10^9 bits"). The result table
(src/perftest_parameters.h RESULT_FMT_G / REPORT_FMT) is a header
` #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]` and one row per size; a warning
line can sit between them. An RDMA write moves data from the client to the server: the client's row is the
direction client -> server.

A DGX Spark's port is two HCA functions (twins) of about 100 Gb/s each: a direction runs one ib_write_bw per twin at
once (a TCP port each) and the cable's figure is their sum. Cables come from fabric_plan's result: a ring's links
(one per twin), or the two hosts of a direct cable. Each round tests cables that share no node, so a cable runs with
both its ends' other cables idle (both ports of a GB10 share its PCIe controllers). Pure but for run_role()."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import subprocess
import time

from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import cable

HEADER = re.compile(r"#bytes\s+#iterations\s+BW peak\[(Gb|MB|MiB)/sec\]\s+BW average\[(Gb|MB|MiB)/sec\]")
# perftest's MB is 2^20 bytes ("Factor=10^9/(2^20*8)=119.2").
MIB_PER_SEC_IN_GBPS = 2 ** 20 * 8 / 1e9


class RdmaBwError(Exception):
    pass


def parse(text):
    """The first result row of ib_write_bw's table: {"bytes", "iterations", "peak_gbps", "average_gbps"} in Gb/s
    whatever unit the table is in. Raises RdmaBwError when there is no table or no row under it."""
    lines = (text or "").splitlines()
    for i, line in enumerate(lines):
        m = HEADER.search(line)
        if not m:
            continue
        factor = 1.0 if m.group(2) == "Gb" else MIB_PER_SEC_IN_GBPS
        for row in lines[i + 1:]:
            fields = row.split()
            if len(fields) >= 4 and fields[0].isdigit() and fields[1].isdigit():
                try:
                    peak, avg = float(fields[2]), float(fields[3])
                except ValueError:
                    continue
                return {"bytes": int(fields[0]), "iterations": int(fields[1]),
                        "peak_gbps": round(peak * factor, 2), "average_gbps": round(avg * factor, 2)}
            if row.startswith("-") and row.strip("- \t") == "":
                break
        raise RdmaBwError("ib_write_bw printed its table header but no result row")
    tail = " | ".join(x.strip() for x in lines[-3:] if x.strip())
    raise RdmaBwError("no ib_write_bw result table in its output%s" % (": " + tail if tail else ""))


def _port_of(fabric, netdev):
    for port in (fabric or {}).get("ports") or []:
        for fn in port["functions"]:
            if fn.get("netdev") == netdev:
                return port, fn
    return None, None


def _end(fabric, host, netdev, address):
    port, fn = _port_of(fabric, netdev)
    if fn is None:
        return None
    rdma, _sep, ib_port = (fn.get("hca") or "%s:1" % fn["rdma"]).partition(":")
    return {"host": host, "port": port["name"], "netdev": netdev, "rdma": rdma, "ib_port": ib_port or "1",
            "address": (address or "").split("/")[0]}


def cables(plan, fabrics):
    """[{"name", "a": {host, port}, "b": {host, port}, "twins": [{"a": end, "b": end}]}] from fabric_plan's result and
    each host's fabric facts; an end is {host, port, netdev, rdma, ib_port, address} (the address the far end's
    client reaches it at). A switch has no cable between two nodes: []."""
    out = []
    if plan.get("topology") == "ring":
        for link in plan.get("links") or []:
            a = _end(fabrics.get(link["a"]["host"]), link["a"]["host"], link["a"]["interface"], link["a"]["address"])
            b = _end(fabrics.get(link["b"]["host"]), link["b"]["host"], link["b"]["interface"], link["b"]["address"])
            if a is None or b is None:
                continue
            key = (a["host"], a["port"], b["host"], b["port"])
            found = [c for c in out if c["key"] == key]
            if not found:
                found = [{"key": key, "name": "%s:%s - %s:%s" % key, "a": {"host": a["host"], "port": a["port"]},
                          "b": {"host": b["host"], "port": b["port"]}, "twins": []}]
                out.append(found[0])
            found[0]["twins"].append({"a": a, "b": b})
    elif plan.get("topology") in ("direct", None) and len(plan.get("hosts") or {}) == 2:
        (ha, pa), (hb, pb) = sorted(plan["hosts"].items())
        ends = []
        for host, part in ((ha, pa), (hb, pb)):
            # Only the interface holds an address: its twins' tests exchange their queue pairs over it too.
            names = [part["interface"]] + list(part.get("twins") or [])
            ends.append([_end(fabrics.get(host), host, n, part.get("address")) for n in names])
        twins = [{"a": x, "b": y} for x, y in zip(ends[0], ends[1]) if x is not None and y is not None]
        if twins:
            key = (ha, twins[0]["a"]["port"], hb, twins[0]["b"]["port"])
            out.append({"key": key, "name": "%s:%s - %s:%s" % key, "a": {"host": ha, "port": key[1]},
                        "b": {"host": hb, "port": key[3]}, "twins": twins})
    for c in out:
        del c["key"]
    return out


def direction(client, server):
    return "%s -> %s" % (client, server)


def rounds(cable_list, tcp_port):
    """Each cable's two directions as tests packed into rounds where no node is in two tests. A test is {"cable",
    "direction", "client", "server", "runs": [one per twin: {tcp_port, client_rdma, client_ib_port, server_rdma,
    server_ib_port, address}]}; a round is {"tests", "roles": {host: {"role": server|client, "runs"}}}."""
    tests = []
    for c in cable_list:
        for near, far in (("a", "b"), ("b", "a")):
            runs = [{"tcp_port": tcp_port + k, "client_rdma": t[near]["rdma"], "client_ib_port": t[near]["ib_port"],
                     "server_rdma": t[far]["rdma"], "server_ib_port": t[far]["ib_port"], "address": t[far]["address"]}
                    for k, t in enumerate(c["twins"])]
            tests.append({"cable": c["name"], "direction": direction(c[near]["host"], c[far]["host"]),
                          "client": c[near]["host"], "server": c[far]["host"], "runs": runs})
    out = []
    while tests:
        busy, this, rest = set(), [], []
        for t in tests:
            if t["client"] in busy or t["server"] in busy:
                rest.append(t)
            else:
                busy.update((t["client"], t["server"]))
                this.append(t)
        roles = {}
        for t in this:
            roles[t["server"]] = {"role": "server", "runs": t["runs"], "cable": t["cable"], "direction": t["direction"]}
            roles[t["client"]] = {"role": "client", "runs": t["runs"], "cable": t["cable"], "direction": t["direction"]}
        out.append({"tests": this, "roles": roles})
        tests = rest
    return out


def argv(command, role, run, duration):
    """ib_write_bw's command line for one twin's server or client."""
    side = "server" if role == "server" else "client"
    args = [command, "-d", run["%s_rdma" % side], "-i", str(run["%s_ib_port" % side]), "-p", str(run["tcp_port"]),
            "-D", str(duration), "-F", "--report_gbits"]
    return args + [run["address"]] if role == "client" else args


def _tail(text, lines=8):
    return "\n".join((text or "").strip().splitlines()[-lines:])


def run_role(command, role, runs, duration, connect_timeout, grace=30, clock=time.time, sleep=time.sleep):
    """Run this host's part of a test: one ib_write_bw per twin at once. A client that cannot reach its server yet
    (the server starts in the same round) is retried until connect_timeout; a server is ended when no client came
    within connect_timeout + duration + grace seconds. Returns [{tcp_port, rdma, rc, output, average_gbps, error}]."""
    began = clock()
    # A client retries until connect_timeout; any test is ended once it could have connected and run its duration.
    connect_by, end_by = began + connect_timeout, began + connect_timeout + duration + grace
    procs, outputs = {}, {}

    def start(i):
        procs[i] = subprocess.Popen(argv(command, role, runs[i], duration), stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, universal_newlines=True)

    for i in range(len(runs)):
        start(i)
    pending = set(procs)
    while pending:
        for i in sorted(pending):
            rc = procs[i].poll()
            if rc is None:
                if clock() > end_by:
                    procs[i].kill()
                    out = procs[i].communicate()[0]
                    outputs[i] = (None, "%s\n(no result within %d s: ended)" % (out, end_by - began))
                    pending.discard(i)
                continue
            out = procs[i].communicate()[0]
            if rc != 0 and role == "client" and clock() < connect_by:
                start(i)        # the server was not listening yet
                continue
            outputs[i] = (rc, out)
            pending.discard(i)
        if pending:
            sleep(0.5)
    results = []
    for i, run in enumerate(runs):
        rc, out = outputs[i]
        side = "server" if role == "server" else "client"
        entry = {"tcp_port": run["tcp_port"], "rdma": run["%s_rdma" % side], "rc": rc, "output": _tail(out),
                 "average_gbps": None, "error": None}
        if role == "client":
            try:
                entry["average_gbps"] = parse(out)["average_gbps"] if rc == 0 else None
                if rc != 0:
                    entry["error"] = "ib_write_bw exited %s: %s" % (rc, _tail(out, 2).replace("\n", " | "))
            except RdmaBwError as exc:
                entry["error"] = str(exc)
        results.append(entry)
    return results


def measured_direction(results):
    """The direction's Gb/s: the twins' sum, None when any twin's test did not come back (fails safe)."""
    if not results or any(r.get("average_gbps") is None for r in results):
        return None
    return round(sum(r["average_gbps"] for r in results), 2)


def measurements(cable_list, client_results):
    """{cable name: {direction: Gb/s or None}} - every direction of every cable, None when its client's result is
    missing; client_results: [{"cable", "direction", "results"}] as the clients returned them."""
    got = {}
    for r in client_results or []:
        got[(r.get("cable"), r.get("direction"))] = measured_direction(r.get("results"))
    out = {}
    for c in cable_list:
        both = (direction(c["a"]["host"], c["b"]["host"]), direction(c["b"]["host"], c["a"]["host"]))
        out[c["name"]] = dict((d, got.get((c["name"], d))) for d in both)
    return out


def pair_direction(a, b):
    return "%s <-> %s (NCCL pair test)" % (a, b)


def pair_measurements(cable_list, pairs):
    """{cable name: {"a <-> b (NCCL pair test)": Gb/s or None}} for cables ib_write_bw did not measure, from the
    cross-host check's pair rounds (xhost's judged pairs: {a, b, gbs}): the pair's best GB/s over its sizes, x 8. A
    pair round trip sends one way then the other, so its GB/s is one direction's rate. A cable whose pair did not
    run is None (fails safe)."""
    best = {}
    for p in pairs or []:
        key = frozenset((p.get("a"), p.get("b")))
        if p.get("gbs") is not None and (key not in best or p["gbs"] > best[key]):
            best[key] = p["gbs"]
    out = {}
    for c in cable_list:
        gbs = best.get(frozenset((c["a"]["host"], c["b"]["host"])))
        out[c["name"]] = {pair_direction(c["a"]["host"], c["b"]["host"]):
                          round(gbs * 8, 2) if gbs is not None else None}
    return out


def port_measurements(cable_list, measured, host):
    """{port name: {direction: Gb/s}} for the host's ends of the measured cables."""
    out = {}
    for c in cable_list:
        for end in ("a", "b"):
            if c[end]["host"] == host:
                out.setdefault(c[end]["port"], {}).update(measured.get(c["name"]) or {})
    return out


def judge(cable_list, client_results, fabrics, spec, hosts, pair_cables=(), pairs=None):
    """Every host's cabled ports judged by cable.cable_verdict with the bandwidth measured on the cable each one ends:
    ib_write_bw's per direction for cable_list, the NCCL pair test's for pair_cables when pairs is given (the
    cross-host check's judged pairs). A port on no measured cable (a switch's) is judged from sysfs alone. Returns
    {"cables": [{name, measured, tests}], "nodes": {host: cable.node_verdict}, "failed_hosts": [...]}."""
    measured = measurements(cable_list, client_results)
    if pairs is not None:
        measured.update(pair_measurements(pair_cables, pairs))
        cable_list = list(cable_list) + list(pair_cables)
    tests = {}
    for r in client_results or []:
        tests.setdefault(r.get("cable"), []).append({"direction": r.get("direction"), "results": r.get("results")})
    nodes, failed = {}, []
    for host in hosts:
        per_port = port_measurements(cable_list, measured, host)
        ports = [p for p in (fabrics.get(host) or {}).get("ports") or [] if p["cabled"] and not p.get("management")]
        verdicts = [cable.cable_verdict(p, spec, per_port.get(p["name"])) for p in ports]
        nodes[host] = cable.node_verdict(host, verdicts)
        if nodes[host]["verdict"] != "pass":
            failed.append(host)
    return {"cables": [{"name": c["name"], "measured": measured[c["name"]], "tests": tests.get(c["name"], [])}
                       for c in cable_list], "nodes": nodes, "failed_hosts": failed}
