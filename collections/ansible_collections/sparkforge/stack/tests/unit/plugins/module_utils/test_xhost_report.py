"""The cross-host verdict's diagnosis and the fleet summary's pair table, as plain functions.

NCCL's own NCCL_DEBUG=INFO lines (fabric.nccl_net_lines / nccl_transport / diagnose) in the form NCCL
prints them: the NET/IB and NET/Socket "Using" lines, "Using network X", "Assigned NET plugin X to comm" and
the per-channel "Channel .. via NET/Socket/0 | NET/IB/0/GDRDMA | P2P/CUMEM/read | SHM/direct/direct" lines
(formats checked against NCCL's sources and public logs; the lines below are shaped like the logs quoted in
NVIDIA/nccl issues 1053, 1189, 1232, 2057, nccl-tests 185 and oneflow 3586). Then xhost.summarize with two
hosts whose pair is slow - sockets instead of RoCE, one function of a twin port, management-port speed - the
fleet summary's `cross_host` (xhost.cross_host), its markdown (fleet_report.render_markdown), and the module's
summarize mode writing both beside the fleet summary. The NCCL run itself: bench/gpu/run_xhost_2gpu.sh.
"""

import json

from ansible_collections.sparkforge.stack.plugins.module_utils.fabric import fabric, xhost
from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import fleet_report
from ansible_collections.sparkforge.stack.tests.unit.utils.harness import run_module

# A sockets fallback: no RDMA device, NCCL takes the socket transport (NCCL 2.19-2.29 wording).
SOCKETS_LOG = """\
spark-a:4711:4711 [0] NCCL INFO Bootstrap: Using enP7s7:192.168.1.10<0>
spark-a:4711:4711 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so.
spark-a:4711:4711 [0] NCCL INFO NET/IB : No device found.
spark-a:4711:4711 [0] NCCL INFO NET/IB : Using [RO]; OOB enP7s7:192.168.1.10<0>
spark-a:4711:4711 [0] NCCL INFO Failed to initialize NET plugin IB
spark-a:4711:4711 [0] NCCL INFO NET/Socket : Using [0]enP7s7:192.168.1.10<0>
spark-a:4711:4711 [0] NCCL INFO Initialized NET plugin Socket
spark-a:4711:4711 [0] NCCL INFO Assigned NET plugin Socket to comm
spark-a:4711:4711 [0] NCCL INFO Using network Socket
spark-a:4711:4760 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0
spark-a:4711:4760 [0] NCCL INFO Channel 01/0 : 1[0] -> 0[0] [receive] via NET/Socket/0
spark-a:4711:4760 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0
spark-a:4711:4760 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] [send] via NET/Socket/0
spark-a:4711:4760 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 0
spark-a:4711:4760 [0] NCCL INFO NET/Socket : GPU Direct RDMA Disabled for HCA 0 'enP7s7'
"""

# RoCE on one of a DGX Spark's twin functions only (NCCL_IB_HCA named one), GPUDirect RDMA on.
ROCE_ONE_FUNCTION_LOG = """\
spark-b:5120:5120 [0] NCCL INFO NCCL_IB_HCA set to =rocep1s0f1:1
spark-b:5120:5120 [0] NCCL INFO NET/IB : Using [0]rocep1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:192.168.100.11<0>
spark-b:5120:5120 [0] NCCL INFO Initialized NET plugin IB
spark-b:5120:5120 [0] NCCL INFO Assigned NET plugin IB to comm
spark-b:5120:5120 [0] NCCL INFO Using network IB
spark-b:5120:5160 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA
spark-b:5120:5160 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0/GDRDMA
"""

# Both twins in use (what the cluster playbook's NCCL_IB_HCA names).
ROCE_BOTH_LOG = """\
dgx:460770:460842 [0] NCCL INFO NET/IB : Using [0]mlx5_10:1/RoCE [1]mlx5_11:1/RoCE [RO]; OOB enp220s0np0:11.1.128.136<0>
dgx:460770:460842 [0] NCCL INFO Using non-device net plugin version 0
dgx:460770:460842 [0] NCCL INFO Using network IB
dgx:460770:460842 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA
dgx:460770:460842 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] [send] via NET/IB/1/GDRDMA
"""

# Two GPUs of one machine: NCCL loads its network (sockets) but the channels go over NVLink / host memory.
ONE_MACHINE_LOG = """\
gpu:900:900 [0] NCCL INFO NET/IB : No device found.
gpu:900:900 [0] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0>
gpu:900:900 [0] NCCL INFO Using network Socket
gpu:900:950 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
gpu:900:950 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM/read
gpu:900:950 [0] NCCL INFO Channel 00 : 1[1] -> 0[0] via SHM/direct/direct
"""

# Captured on the 2-GPU test machine (NCCL 2.28.9, two H100s on NV18, one rank per GPU, NCCL_SOCKET_IFNAME=lo),
# docs/results/gpu-xhost-2gpu-2026-11-26/pingpong-ref.json: first the default run - NCCL initialises its
# network (sockets, no RDMA device) and still connects every channel through P2P/CUMEM over NVLink - then the
# run with NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1, where the channels go through NET/Socket.
H100_NVLINK_RUN = """\
vm:1156:1156 [0] NCCL INFO NCCL version 2.28.9+cuda13.0
vm:1156:1156 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so
vm:1156:1156 [0] NCCL INFO NET/IB : No device found.
vm:1156:1156 [0] NCCL INFO NET/IB : Using [RO]; OOB lo:127.0.0.1<0>
vm:1156:1156 [0] NCCL INFO Failed to initialize NET plugin IB
vm:1156:1156 [0] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0>
vm:1156:1156 [0] NCCL INFO Initialized NET plugin Socket
vm:1156:1156 [0] NCCL INFO Assigned NET plugin Socket to comm
vm:1156:1156 [0] NCCL INFO Using network Socket
vm:1156:1156 [0] NCCL INFO NET/Socket : GPU Direct RDMA Disabled for HCA 0 'lo'
vm:1156:1156 [0] NCCL INFO Channel 00/1 : 0[0] -> 1[1] via P2P/CUMEM
vm:1156:1156 [0] NCCL INFO Channel 01/1 : 0[0] -> 1[1] via P2P/CUMEM
vm:1156:1156 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM
"""
H100_SOCKET_RUN = """\
vm:1693:1693 [0] NCCL INFO NCCL version 2.28.9+cuda13.0
vm:1693:1693 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so
vm:1693:1693 [0] NCCL INFO Failed to initialize NET plugin IB
vm:1693:1693 [0] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0>
vm:1693:1693 [0] NCCL INFO Initialized NET plugin Socket
vm:1693:1693 [0] NCCL INFO Assigned NET plugin Socket to comm
vm:1693:1693 [0] NCCL INFO Using network Socket
vm:1693:1693 [0] NCCL INFO NET/Socket : GPU Direct RDMA Disabled for HCA 0 'lo'
vm:1693:1693 [0] NCCL INFO Channel 00/1 : 0[0] -> 1[1] [send] via NET/Socket/0/Shared
vm:1693:1693 [0] NCCL INFO Channel 01/1 : 0[0] -> 1[1] [send] via NET/Socket/0/Shared
vm:1693:1693 [0] NCCL INFO Channel 00/1 : 1[1] -> 0[0] [receive] via NET/Socket/0/Shared
vm:1693:1693 [0] NCCL INFO Channel 00/0 : 1[1] -> 0[0] [receive] via NET/Socket/0
vm:1693:1693 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0
"""


def test_lines_from_the_h100_runs():
    fast = fabric.nccl_net_lines(H100_NVLINK_RUN)
    assert fast[-1] == "Channel 00/1 : 0[0] -> 1[1] via P2P/CUMEM" and len(fast) == 7
    assert fabric.nccl_transport(fast) == {"transport": "P2P", "devices": [], "sockets": ["lo"], "channels": ["P2P"]}
    socket = fabric.nccl_net_lines(H100_SOCKET_RUN)
    assert [line for line in socket if line.startswith("Channel")] == [
        "Channel 00/1 : 0[0] -> 1[1] [send] via NET/Socket/0/Shared",
        "Channel 00/0 : 1[1] -> 0[0] [receive] via NET/Socket/0"]
    assert fabric.nccl_transport(socket)["transport"] == "Socket"
    # 3.53 GB/s, what the forced run measured, against the GPUs' NVLink (18 x 26.562 GB/s = 3824.9 Gb/s).
    assert fabric.diagnose(3.53, socket, link_gbps=3824.9) == [
        "NCCL used sockets, not RoCE/InfiniBand (NET/Socket on lo): check NCCL_IB_HCA and NCCL_IB_DISABLE"]


def test_sockets_fallback_lines_and_diagnosis():
    lines = fabric.nccl_net_lines(SOCKETS_LOG)
    # One line per transport of the channel lines, the NET lines once each; bootstrap and ring lines left out.
    assert lines == [
        "NET/IB : No device found.",
        "NET/IB : Using [RO]; OOB enP7s7:192.168.1.10<0>",
        "NET/Socket : Using [0]enP7s7:192.168.1.10<0>",
        "Assigned NET plugin Socket to comm",
        "Using network Socket",
        "Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0",
        "NET/Socket : GPU Direct RDMA Disabled for HCA 0 'enP7s7'",
    ]
    net = fabric.nccl_transport(lines)
    assert net == {"transport": "Socket", "devices": [], "sockets": ["enP7s7"], "channels": ["NET/Socket"]}
    why = fabric.diagnose(1.1, lines, link_gbps=200.0)
    assert why == ["NCCL used sockets, not RoCE/InfiniBand (NET/Socket on enP7s7): check NCCL_IB_HCA and "
                   "NCCL_IB_DISABLE"]


def test_roce_on_one_twin_is_single_function_speed():
    lines = fabric.nccl_net_lines(ROCE_ONE_FUNCTION_LOG)
    assert "NET/IB : Using [0]rocep1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:192.168.100.11<0>" in lines
    assert "Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA" in lines
    net = fabric.nccl_transport(lines)
    assert net["transport"] == "IB" and net["devices"] == ["rocep1s0f1:1"] and net["channels"] == ["NET/IB"]
    # 11.5 GB/s = 92 Gb/s on a 200 Gb/s port of two 100 Gb/s functions.
    why = fabric.diagnose(11.5, lines, link_gbps=200.0, per_function_gbps=100.0, functions=2, management_gbps=10.0)
    assert why == [
        "NCCL used rocep1s0f1:1 only - 1 of the port's 2 functions, about 100 Gb/s: NCCL_IB_HCA must name every twin",
        "92.0 Gb/s is at most one function's speed (100 of the port's 200 Gb/s)",
    ]


def test_roce_on_both_twins_needs_no_explanation():
    lines = fabric.nccl_net_lines(ROCE_BOTH_LOG)
    net = fabric.nccl_transport(lines)
    assert net == {"transport": "IB", "devices": ["mlx5_10:1", "mlx5_11:1"], "sockets": [], "channels": ["NET/IB"]}
    # Two channel lines with different "via" (NET/IB/0 and NET/IB/1) are both kept.
    assert [line for line in lines if line.startswith("Channel")] == [
        "Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA",
        "Channel 01/0 : 0[0] -> 1[0] [send] via NET/IB/1/GDRDMA"]
    assert fabric.diagnose(40.0, lines, link_gbps=400.0, per_function_gbps=200.0, functions=2) == []


def test_channels_over_p2p_are_not_called_sockets():
    """"Using network Socket" is printed whether or not a channel uses it; the channels say P2P/SHM."""
    lines = fabric.nccl_net_lines(ONE_MACHINE_LOG)
    assert "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read" in lines
    assert "Channel 00 : 1[1] -> 0[0] via SHM/direct/direct" in lines
    net = fabric.nccl_transport(lines)
    assert net["transport"] == "P2P" and net["channels"] == ["P2P", "SHM"] and net["sockets"] == ["lo"]
    assert fabric.diagnose(100.0, lines, link_gbps=3825.0) == [
        "NCCL connected the ranks through P2P/SHM, within one machine: no network link was measured"]


def test_channel_transport_forms():
    assert fabric.channel_transport("NET/Socket/0") == "NET/Socket"
    assert fabric.channel_transport("NET/IB/3/GDRDMA") == "NET/IB"
    assert fabric.channel_transport("NET/IB/0(1)/GDRDMA(PCI)/Shared") == "NET/IB"
    assert fabric.channel_transport("P2P/direct pointer/read") == "P2P"
    assert fabric.channel_transport("P2P/IPC/read") == "P2P"
    assert fabric.channel_transport("SHM/CE/direct") == "SHM"
    # Old NCCL printed the bus id in hex in the brackets.
    old = "Channel 00 : 0[18000] -> 1[18000] [receive] via NET/Socket/1"
    assert fabric.nccl_net_lines("w:1:2 [0] NCCL INFO " + old) == [old]


def _run_result(host, rank, log, pairs=None, link=200.0, **fabric_figures):
    r = {"rank": rank, "host": host, "status": "ok", "backend": "nccl", "link_gbps": link,
         "link_source": "/sys/class/net/enp1s0f1np1/speed", "nccl_net": fabric.nccl_net_lines(log),
         "checks": [{"name": "all_reduce", "status": "pass", "detail": "sum over 2 hosts: 3.0, expected 3.0"}]}
    if pairs is not None:
        r["pairs"] = pairs
    r.update(fabric_figures)
    return r


def _pairs(gbs_small, gbs_large, a="spark-a", b="spark-b"):
    return [{"a": a, "b": b, "bytes": 67108864, "gbs": gbs_small, "seconds": 1.0, "exact": True},
            {"a": a, "b": b, "bytes": 268435456, "gbs": gbs_large, "seconds": 1.0, "exact": True}]


def test_sockets_pair_fails_with_the_diagnosis_in_cross_host_and_markdown():
    hosts = ["spark-a", "spark-b"]
    results = {"spark-a": _run_result("spark-a", 0, SOCKETS_LOG, _pairs(0.9, 1.1)),
               "spark-b": _run_result("spark-b", 1, SOCKETS_LOG)}
    summary = xhost.summarize(results, hosts, {"spark-a": 200.0, "spark-b": 200.0}, 0.5)
    assert summary["failed_hosts"] == hosts and not summary["passed"]
    pair = summary["judged"]["pairs"][0]
    assert (pair["gbs"], pair["link_gbps"], pair["pct_of_link"], pair["slow"]) == (1.1, 200.0, 4.4, True)
    sockets = ("NCCL used sockets, not RoCE/InfiniBand (NET/Socket on enP7s7): check NCCL_IB_HCA and "
               "NCCL_IB_DISABLE")
    assert pair["diagnosis"] == [sockets]
    assert summary["per_host"]["spark-b"]["diagnosis"] == [sockets]
    # Each host's own NCCL lines stay in the report, as the evidence.
    assert "Using network Socket" in summary["per_host"]["spark-b"]["nccl_net"]

    cross = xhost.cross_host(summary, at="2026-11-26T10:00:00Z", report="/r/xhost.md")
    assert cross["pairs"] == [{"a": "spark-a", "b": "spark-b", "bytes": 268435456, "gbs": 1.1, "link_gbps": 200.0,
                               "pct_of_link": 4.4, "exact": True, "slow": True,
                               "why": "4.4% of the 200 Gb/s link, below 50%", "diagnosis": [sockets]}]
    assert cross["diagnosis"] == {"spark-a": [sockets], "spark-b": [sockets]}
    assert cross["failed_hosts"] == hosts and cross["passed"] is False and cross["missing"] == []

    md = fleet_report.render_markdown({"spark-a": {"state": "provisioned", "class": "spark", "builder": True,
                                                   "builds": ["torch"], "generation": 3, "how": "built"},
                                       "spark-b": {"state": "provisioned"}, "cross_host": cross})
    lines = md.splitlines()
    assert "| spark-a | provisioned | spark | 3 (built) | yes (torch) | - |" in lines
    assert "| spark-b | provisioned | - | - | - | - |" in lines
    assert "| a | b | GB/s | link Gb/s | % of link | slow | why |" in lines
    assert ("| spark-a | spark-b | 1.100 | 200 | 4.4 | SLOW | 4.4% of the 200 Gb/s link, below 50%; " + sockets + " |"
            in lines)
    assert "- **spark-b failed**: " + sockets in lines
    assert lines[lines.index("## Collectives across hosts") + 2].startswith("FAIL: 2 hosts, backend nccl")
    # xhost.md carries the same cell.
    assert "| SLOW | 4.4% of the 200 Gb/s link, below 50%; " + sockets + " |" in xhost.render_markdown(summary)


def test_management_port_speed_and_a_passing_pair():
    """Three hosts: c's only route to the others is at management-port speed, a - b runs at 80% of its link."""
    hosts = ["spark-a", "spark-b", "spark-c"]
    pairs = (_pairs(19.0, 20.0) + _pairs(0.10, 0.11, "spark-a", "spark-c") + _pairs(0.10, 0.11, "spark-b", "spark-c"))
    results = {"spark-a": _run_result("spark-a", 0, ROCE_BOTH_LOG, pairs, management_gbps=1.0),
               "spark-b": _run_result("spark-b", 1, ROCE_BOTH_LOG, management_gbps=1.0),
               "spark-c": _run_result("spark-c", 2, SOCKETS_LOG, management_gbps=1.0)}
    summary = xhost.summarize(results, hosts, dict((h, 200.0) for h in hosts), 0.5)
    assert summary["failed_hosts"] == ["spark-c"]
    cross = xhost.cross_host(summary)
    by_pair = dict(((p["a"], p["b"]), p) for p in cross["pairs"])
    assert by_pair[("spark-a", "spark-b")]["slow"] is False and by_pair[("spark-a", "spark-b")]["diagnosis"] == []
    assert by_pair[("spark-a", "spark-b")]["pct_of_link"] == 80.0
    mgmt = "0.9 Gb/s is management-port speed (1 Gb/s): the traffic may have gone over the management network; " \
           "check NCCL_SOCKET_IFNAME"
    # a's and b's ends used RoCE, c's end sockets: the pair's diagnosis has both ends' word, each once.
    assert by_pair[("spark-a", "spark-c")]["diagnosis"] == [mgmt, "NCCL used sockets, not RoCE/InfiniBand (NET/Socket "
                                                            "on enP7s7): check NCCL_IB_HCA and NCCL_IB_DISABLE"]
    assert cross["diagnosis"]["spark-c"][1] == mgmt
    lines = fleet_report.cross_host_lines(cross)
    assert "| spark-a | spark-b | 20.000 | 200 | 80.0 | no | - |" in lines
    row = "| spark-b | spark-c | 0.110 | 200 | 0.4 | SLOW | 0.4% of the 200 Gb/s link"
    assert any(line.startswith(row) and mgmt in line for line in lines)


def test_summarize_module_writes_cross_host_and_fleet_markdown(tmp_path):
    fleet_json = tmp_path / "fleet-summary.json"
    fleet_json.write_text(json.dumps({"spark-a": {"state": "provisioned"}, "spark-b": {"state": "provisioned"}}))
    results = {"spark-a": _run_result("spark-a", 0, ROCE_ONE_FUNCTION_LOG, _pairs(11.0, 11.5), per_function_gbps=100.0,
                                      functions=2, management_gbps=10.0),
               "spark-b": _run_result("spark-b", 1, ROCE_ONE_FUNCTION_LOG, per_function_gbps=100.0, functions=2,
                                      management_gbps=10.0)}
    res, rc = run_module("xhost_collectives", {"mode": "summarize", "hosts": ["spark-a", "spark-b"], "results": results,
                                               "report_dir": str(tmp_path), "fleet_summary": str(fleet_json)})
    assert rc == 0 and not res.get("failed"), res
    assert res["failed_hosts"] == ["spark-a", "spark-b"]
    fleet = json.loads(fleet_json.read_text())
    assert fleet["spark-a"] == {"state": "provisioned"}
    cross = fleet["cross_host"]
    assert cross == res["cross_host"]
    one_function = "92.0 Gb/s is at most one function's speed (100 of the port's 200 Gb/s)"
    assert cross["pairs"][0]["slow"] and one_function in cross["pairs"][0]["diagnosis"]
    assert one_function in cross["diagnosis"]["spark-a"]
    md = (tmp_path / "fleet-summary.md").read_text()
    assert res["report_files"]["fleet_summary_markdown"] == str(tmp_path / "fleet-summary.md")
    assert "| spark-a | spark-b | 11.500 | 200 | 46.0 | SLOW |" in md and one_function in md
    assert (tmp_path / "xhost.md").is_file() and json.loads((tmp_path / "xhost.json").read_text())["failed_hosts"]
