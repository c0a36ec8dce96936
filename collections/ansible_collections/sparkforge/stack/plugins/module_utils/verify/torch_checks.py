# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Kept whole: judging the check script's output and rendering it read the same report dict; the
# renderers (render_markdown..fleet_table) are the natural cut if it grows.
"""torch_verify's logic: run the check script in the venv, judge its output, render reports.

Plain functions; the check script itself is the module_utils torch_check_script (a real Python file,
shipped in the module's payload and written to the host to run with the venv's python).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math
import os
import re
import shutil
import subprocess
import tempfile

from ansible_collections.sparkforge.stack.plugins.module_utils.verify import multi_gpu
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import arch as cuda_arch
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import fatbin
from ansible_collections.sparkforge.stack.plugins.module_utils.verify import gpu_clocks, png_chart
from ansible_collections.sparkforge.stack.plugins.module_utils.verify import nvml_sampler, torch_check_script
from ansible_collections.sparkforge.stack.plugins.module_utils._common.clock import utc_now
from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import atomic_write_text

# The functional check groups: the script's @check functions, in the order they run.
CHECK_GROUPS = torch_check_script.check_groups()
# Statuses that fail the host; "skip" (not applicable here), "unavailable" and "info" do not.
FAILING = ("fail",)


class VerifyError(Exception):
    pass


def script_source(module=torch_check_script):
    """The check script's text (or its sampler's, ``module=nvml_sampler``), read through its module's loader: a
    file on the controller, the payload's zip when Ansible runs the module on a host."""
    loader = getattr(module, "__loader__", None)
    source = loader.get_source(module.__name__) if loader is not None else None
    if not source:
        raise VerifyError("cannot read the check script's source (%s) from the module's payload" % module.__name__)
    return source


def unknown_groups(checks):
    """The names in ``checks`` that are no check group, as the error torch_verify fails with (None when all are)."""
    unknown = [name for name in checks or [] if name not in CHECK_GROUPS]
    if not unknown:
        return None
    return "checks: unknown check group(s) %s (known: %s)" % (
        ", ".join(repr(n) for n in unknown), ", ".join(CHECK_GROUPS))


def run_script(python, config, timeout, env=None):
    """Run the check script with ``python``; return (parsed JSON, stdout, stderr)."""
    if not os.path.exists(python):
        raise VerifyError("python %s does not exist: give the stack venv's interpreter "
                          "(e.g. /opt/sparkforge/venv/bin/python)" % python)
    # The script and its NVML sampler in one directory: the script loads the sampler from beside itself.
    work = tempfile.mkdtemp(prefix="sparkforge-verify-")
    script = os.path.join(work, "torch_check_script.py")
    try:
        for name, module in ((script, torch_check_script), (os.path.join(work, "nvml_sampler.py"), nvml_sampler)):
            with open(name, "w") as handle:
                handle.write(script_source(module))
        child_env = dict(os.environ)
        child_env.update(env or {})
        # The override makes cuBLAS use TF32 even where torch asks for strict FP32; the checks measure
        # both explicitly, so they run without it and the report says it is configured.
        override = child_env.pop("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", None)
        config = dict(config, tf32_override_configured=override)
        child_env.setdefault("PYTHONUNBUFFERED", "1")
        try:
            proc = subprocess.run([python, script, json.dumps(config)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout, env=child_env,
                                  check=False)
        except subprocess.TimeoutExpired:
            raise VerifyError("the check script did not finish within %ds (raise timeout, or lower bench_scale)"
                              % timeout)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return parse_output(proc.stdout, proc.stderr, proc.returncode), proc.stdout, proc.stderr


def parse_output(stdout, stderr="", returncode=0):
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                break
    raise VerifyError("the check script printed no result (exit %d): %s" % (returncode, (stderr or stdout)[-1500:]))


def match_platform(device_name, platforms):
    """(key, entry) of the first platform row with peak figures whose ``match`` regex finds device_name;
    (None, None) otherwise.  A row without ``tflops`` only classifies GPUs (gpu_facts' class): no peak to use."""
    for key, entry in (platforms or {}).items():
        if "tflops" not in entry:
            continue
        if re.search(entry.get("match", key), device_name or "", re.IGNORECASE):
            return key, entry
    return None, None


def peak_for(entry, peak_key):
    if not entry or not peak_key:
        return None
    if peak_key == "mem_bw":
        return entry.get("mem_bw_gbs")
    return (entry.get("tflops") or {}).get(peak_key)


def arch_coverage(arch_list, capability):
    """Does torch's compiled arch list run on ``capability``? {covers, level, via}."""
    target = cuda_arch.capability(capability)
    best = None
    via = []
    for arch in arch_list:
        try:
            level = fatbin.arch_level(arch, target)
        except cuda_arch.ArchError:
            continue
        if level:
            via.append(arch)
            if best is None or fatbin.VERDICTS.index(level) < fatbin.VERDICTS.index(best):
                best = level
    return {"covers": best is not None, "level": best or "unsupported", "via": via}


def acceptance_summary(result):
    """The part of a torch_acceptance result (or of a build manifest's ``acceptance``) a report keeps."""
    if not result or not result.get("verdict"):
        return None
    return {"version": result.get("version"), "summary": result.get("summary"), "counts": result.get("counts"),
            "verdict": result["verdict"], "log": result.get("log"), "policy": result.get("policy"),
            "suites": [dict((k, s.get(k)) for k in ("name", "k", "state", "counts", "signal", "seconds",
                                                    "failed_tests", "error_tests"))
                       for s in result.get("suites") or []]}


def evaluate(raw, platforms=None, audit=None, host=None, per_gpu=None, collectives=None, acceptance=None):
    """The per-host report: raw results plus peaks, coverage, failures and a verdict.

    ``acceptance`` (a torch_acceptance result) records PyTorch's own tests after a source build; over
    budget it is a failure of the host.

    ``per_gpu`` (multi_gpu.merge_per_gpu) replaces the checks' failures with ones that name the
    GPU; ``collectives`` (multi_gpu.evaluate_collectives) adds its checks' failures."""
    report = dict(raw)
    report["host"] = host
    report["generated"] = utc_now()
    report["audit"] = audit
    failures = []
    status = raw.get("status")
    if status != "ok":
        report.update({"passed": False, "failed_checks": [], "summary": status,
                       "failures": [raw.get("reason") or status], "platform": None})
        return report
    device = raw["device"]
    key, entry = match_platform(device["name"], platforms)
    report["platform"] = {"key": key, "label": entry.get("label") if entry else None,
                          "peaks": ({"tflops": entry.get("tflops"), "mem_bw_gbs": entry.get("mem_bw_gbs")}
                                    if entry else None),
                          "sources": entry.get("sources") if entry else None,
                          "notes": list(entry.get("notes") or []) if entry else []}
    for item in raw.get("benchmarks", []):
        peak = peak_for(entry, item.get("peak_key"))
        value = item.get("gbs") if item.get("peak_key") == "mem_bw" else item.get("tflops")
        item["pct_of_peak"] = round(100.0 * value / peak, 1) if peak and value else None
        if item["pct_of_peak"] is not None:
            item["peak_row"] = key
            item["peak_value"] = peak
    gpu_clocks.annotate(raw.get("benchmarks", []), raw.get("nvml"), entry, peak_for)
    report["physical_limits"] = physical_limits(report["platform"], raw.get("benchmarks", []), raw.get("nvml"))
    coverage = arch_coverage(raw.get("arch_list", []), device["capability"])
    cap_warnings = [w for w in raw.get("warnings", []) if "capability" in w.lower()]
    coverage["capability_warning"] = cap_warnings[0] if cap_warnings else None
    report["arch_coverage"] = coverage
    if not coverage["covers"]:
        failures.append("torch's arch list %s has no code for compute capability %s"
                        % (",".join(raw.get("arch_list", [])), device["capability"]))
    if audit and audit.get("verdict") == "unsupported":
        failures.append("the audit finds libraries without code for %s: %s" % (
            audit.get("target"), ", ".join(l["path"] for l in audit.get("libraries", []) if l["verdict"] == "unsupported"))
            + "".join("; " + line for line in audit.get("ptx_refusals") or []))
    failed = [c for c in raw.get("checks", []) if c.get("status") in FAILING]
    if per_gpu:
        failures += per_gpu["failures"]
        failed_names = sorted(set("GPU %s: %s" % (r["gpu"], r["check"]) for r in per_gpu["rows"]
                                  if r["status"] in FAILING))
        report["per_gpu"] = per_gpu
    else:
        failures += ["%s: %s" % (c["name"], c.get("detail")) for c in failed]
        failed_names = [c["name"] for c in failed]
    if collectives:
        report["collectives"] = collectives
        bad = [c for c in collectives.get("checks", []) if c.get("status") in FAILING]
        failures += ["collective %s across %d GPUs: %s" % (c["name"], collectives.get("world", 0), c.get("detail"))
                     for c in bad]
        failed_names += [c["name"] for c in bad]
    report["acceptance"] = acceptance_summary(acceptance)
    if report["acceptance"] and not report["acceptance"]["verdict"]["within_budget"]:
        v = report["acceptance"]["verdict"]
        failures.append("PyTorch's own tests after the build: %d failures counted, budget %d"
                        % (v["counted_failures"], v["max_failed"]))
        failed_names.append("acceptance")
    report["failed_checks"] = failed_names
    report["failures"] = failures
    report["passed"] = not failures
    rows = per_gpu["rows"] if per_gpu else raw.get("checks", [])
    report["summary"] = "%d/%d checks passed%s" % (
        sum(1 for c in rows if c.get("status") == "pass"), sum(1 for c in rows if c.get("status") in ("pass", "fail")),
        " on %d GPUs" % len(per_gpu["gpus"]) if per_gpu and len(per_gpu["gpus"]) > 1 else "")
    report["derived"] = derived_figures(raw.get("benchmarks", []), raw.get("checks", []))
    return report


def physical_limits(platform, benchmarks, nvml):
    """Why figures sit below the peak on this machine: the peak row's notes, then what the clocks showed."""
    lines = list((platform or {}).get("notes") or [])
    nvml = nvml or {}
    gemm = [b for b in benchmarks if b.get("group") == "gemm" and b.get("clocks")]
    capped = [b for b in gemm if any(f["flag"] == "power_capped" for f in b.get("flags") or [])
              and b.get("peak_key") not in ("fp32", "fp64")]
    if capped:
        low = min(b["clocks"]["sm_mhz"]["median"] for b in capped)
        high = max(b["clocks"]["sm_mhz"]["median"] for b in capped)
        lines.append("measured here: the tensor-core GEMMs ran at the %.0f W power limit with SM clock medians of "
                     "%.0f-%.0f MHz (the maximum is %s MHz), so they run at the sustained rate under the power "
                     "limit, below a peak stated at the boost clock" % (
                         nvml.get("power_limit_w") or 0, low, high, nvml.get("max_sm_mhz")))
    if not nvml.get("available") and benchmarks:
        lines.append("no clock data: %s" % (nvml.get("error") or "NVML was not read (nvidia-ml-py missing?)"))
    return lines


def derived_figures(benchmarks, checks):
    """TF32 speed-up over strict FP32, and the fastest SDPA backend that also passed its check."""
    out = {}
    gemm = dict((b["name"].split()[0], b) for b in benchmarks if b["group"] == "gemm")
    if "fp32" in gemm and "tf32" in gemm and gemm["tf32"]["median_ms"]:
        out["tf32_speedup"] = round(gemm["fp32"]["median_ms"] / gemm["tf32"]["median_ms"], 2)
    passed = set(c["name"][len("sdpa_"):] for c in checks if c["name"].startswith("sdpa_") and c["status"] == "pass")
    timed = [(b["median_ms"], b.get("backend")) for b in benchmarks
             if b["group"] == "sdpa" and b.get("backend") in passed and not math.isnan(b["median_ms"])]
    out["sdpa_fastest_correct"] = min(timed)[1] if timed else None
    speedups = [b["speedup"] for b in benchmarks if b["group"] == "compile" and b.get("speedup")]
    out["compile_speedup"] = speedups[0] if speedups else None
    return out


def _fmt(value, digits=2):
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isnan(value):
            return "n/a"
        return ("%." + str(digits) + "f") % value
    return str(value)


def render_markdown(report):
    lines = ["# sparkforge verify report: %s" % (report.get("host") or "host"), "",
             "Generated %s; result: **%s** (%s)." % (report.get("generated"), "PASS" if report.get("passed") else "FAIL",
                                                     report.get("summary")), ""]
    if report.get("status") != "ok":
        lines += ["No verification ran: %s" % (report.get("reason") or report.get("status")), ""]
        if report.get("versions"):
            lines += ["Versions: %s" % ", ".join("%s %s" % kv for kv in sorted(report["versions"].items())), ""]
        return "\n".join(lines) + "\n"
    dev = report["device"]
    ver = report["versions"]
    plat = report.get("platform") or {}
    cov = report.get("arch_coverage") or {}
    lines += ["## Versions and device", "", "| item | value |", "|---|---|"]
    for key in ("torch", "cuda", "cudnn", "cusparselt", "nccl", "triton"):
        lines.append("| %s | %s |" % (key, _fmt(ver.get(key))))
    lines += ["| device | %s (%s) x%d |" % (dev["name"], plat.get("label") or "no peak table entry", dev.get("count", 1)),
              "| compute capability | %s |" % dev["capability"],
              "| SMs | %s |" % dev["sm_count"],
              "| memory | %.1f GiB%s |" % (dev["memory_bytes"] / 2.0 ** 30, " (unified)" if dev.get("integrated") else ""),
              "| torch arch list | %s |" % " ".join(report.get("arch_list", [])),
              "| arch coverage | %s via %s%s |" % (
                  cov.get("level"), ", ".join(cov.get("via") or []) or "-",
                  "; warning: " + cov["capability_warning"] if cov.get("capability_warning") else "")]
    audit = report.get("audit")
    if audit:
        driver = audit.get("driver") or {}
        lines.append("| audit of torch/lib for %s | %s (%d libraries with GPU code; PTX held to %s)%s |" % (
            audit.get("target"), audit.get("verdict"), len(audit.get("libraries", [])),
            "the driver's ISA %s (CUDA %s)" % (driver["ptx_isa_max"], driver["driver_cuda"])
            if driver.get("ptx_isa_max") else "no driver limit: %s" % (driver.get("note") or "ptx_isa not given"),
            "".join("; " + line for line in audit.get("ptx_refusals") or [])))
    venv = report.get("venv_audit")
    if venv:
        lines.append("| audit of the venv for %s | %s (%d distributions with GPU code, %s s)%s |" % (
            venv.get("target"), venv.get("verdict"), len(venv.get("packages") or {}), venv.get("seconds"),
            "".join("; " + item for item in (venv.get("failures") or []) + (venv.get("notes") or []))))
    lines += ["", "## Functional checks", "", "| check | status | rel. error | tolerance | reference | detail |",
              "|---|---|---|---|---|---|"]
    for check in report.get("checks", []):
        lines.append("| %s | %s | %s | %s | %s | %s |" % (
            check["name"], check["status"].upper() if check["status"] == "fail" else check["status"],
            _fmt(check.get("rel_err"), 6) if check.get("rel_err") is not None else "-",
            ("%g" % check["tolerance"]) if "tolerance" in check else "-", check.get("reference", "-"),
            (check.get("detail") or "").replace("|", "/")))
    method = report.get("bench_method") or {}
    lines += ["", "## Benchmarks", "",
              "Each figure is the steady rate: the operation runs back to back for %s s, then for at least %s s "
              "in chunks of about 20 ms between CUDA events, with no host synchronisation between calls; the "
              "figure is the median chunk. The clocks are NVML's, sampled every %s s during the timed window "
              "(SM clock median, memory clock, power median against the limit, highest temperature). "
              "%% of peak uses the peak table row `%s` (%s); %% at clock scales that peak to the SM clock "
              "(memory clock for bandwidth) the figure ran at." % (
                  _fmt(method.get("warm_s"), 1), _fmt(method.get("min_timed_s"), 1),
                  _fmt((report.get("nvml") or {}).get("interval_s")), plat.get("key") or "none",
                  plat.get("label") or "no row matches this device"), "",
              "| group | benchmark | median ms | TFLOP/s | GB/s | % of peak | % at clock | clocks | flags |",
              "|---|---|---|---|---|---|---|---|---|"]
    for bench in report.get("benchmarks", []):
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            bench["group"], bench["name"], _fmt(bench.get("median_ms"), 3), _fmt(bench.get("tflops"), 1),
            _fmt(bench.get("gbs"), 0), _fmt(bench.get("pct_of_peak"), 1), _fmt(bench.get("pct_of_clock_peak"), 1),
            gpu_clocks.clock_text(bench), gpu_clocks.flag_text(bench)))
    lines += render_flags(report)
    der = report.get("derived") or {}
    lines += ["", "TF32 speed-up over strict FP32 GEMM: %s; fastest SDPA backend that passed its check: %s; "
              "torch.compile speed-up on the small MLP: %s." % (
                  _fmt(der.get("tf32_speedup")) + "x" if der.get("tf32_speedup") else "-",
                  der.get("sdpa_fastest_correct") or "-",
                  _fmt(der.get("compile_speedup")) + "x" if der.get("compile_speedup") else "-")]
    if report.get("benchmark_seconds") is not None:
        lines += ["", "Benchmarks took %.0f s." % report["benchmark_seconds"]]
    if report.get("benchmark_error"):
        lines += ["", "Benchmarks stopped: %s" % report["benchmark_error"]]
    if report.get("benchmark_errors"):
        lines += ["", "Benchmark groups that failed (not checks; they do not fail the host):", ""]
        lines += ["- %s" % err for err in report["benchmark_errors"]]
    lines += multi_gpu.render_markdown(report.get("per_gpu") if len((report.get("per_gpu") or {}).get("gpus", [])) > 1
                                       else None, report.get("collectives"))
    acc = report.get("acceptance")
    if acc:
        v = acc["verdict"]
        lines += ["", "## PyTorch's own tests after the build (acceptance)", "",
                  "torch %s: %s." % (acc.get("version") or "?", acc.get("summary") or ""), "",
                  "| suite | -k | state | passed | failed | errors | skipped | seconds |", "|---|---|---|---|---|---|---|---|"]
        for s in acc["suites"]:
            c = s.get("counts") or {}
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                s["name"], s.get("k") or "-", s["state"] + (" (%s)" % s["signal"] if s.get("signal") else ""),
                c.get("passed", 0), c.get("failed", 0), c.get("errors", 0), c.get("skipped", 0), s.get("seconds")))
        if v["failures"] or v["broken_suites"]:
            lines += ["", "Counted against the budget of %d:" % v["max_failed"], ""]
            lines += ["- %s" % f for f in v["broken_suites"] + v["failures"]]
        if v["excused"]:
            lines += ["", "Excluded by the manifest (not counted):", ""] + ["- %s" % f for f in v["excused"]]
    if report.get("failures"):
        lines += ["", "## Failures", ""] + ["- %s" % f for f in report["failures"]]
    return "\n".join(lines) + "\n"


def render_flags(report):
    """The flags' details, and the peak row with its sources and the physical limits."""
    lines = []
    nvml = report.get("nvml") or {}
    flagged = [b for b in report.get("benchmarks", []) if b.get("flags")]
    lines += ["", "### Clocks and flags", ""]
    if nvml.get("available"):
        keys = ("power_limit_w", "max_sm_mhz", "max_mem_mhz", "slowdown_temp_c", "driver")
        lines.append("NVML: power limit %s W, max SM clock %s MHz, max memory clock %s MHz, slowdown temperature "
                     "%s C, driver %s." % tuple(nvml.get(k) for k in keys))
    elif report.get("benchmarks"):
        lines.append("NVML was not available (%s): the figures carry no clocks." % (nvml.get("error") or "not read"))
    lines += ["", "`!` marks a warning: throttled (thermal or hardware slowdown, power brake), low_for_clock (far "
              "below the rate the clock it ran at allows), unsteady (the rate moved during the window). Notes: "
              "power_capped (the power limit set the clock: the GPU's sustained rate, not a fault), no_clocks.", ""]
    warned = [b for b in flagged if any(f["severity"] == "warn" for f in b["flags"])]
    for bench in warned:
        for flag in bench["flags"]:
            if flag["severity"] == "warn":
                lines.append("- **%s**: %s: %s" % (bench["name"], flag["flag"], flag["detail"]))
    notes = {}
    for bench in flagged:
        for flag in bench["flags"]:
            if flag["severity"] == "note":
                notes.setdefault(flag["flag"], []).append(bench["name"])
    for name, benches in sorted(notes.items()):
        shown = ", ".join(benches[:6]) + (", ..." if len(benches) > 6 else "")
        lines.append("- %s on %d figure(s): %s" % (name, len(benches), shown))
    plat = report.get("platform") or {}
    if plat.get("key"):
        lines += ["", "### Peak table row `%s`: %s" % (plat["key"], plat.get("label")), "",
                  "Dense peaks (TFLOP/s): %s; memory %s GB/s." % (
                      ", ".join("%s %s" % (k, v) for k, v in sorted((plat.get("peaks") or {}).get("tflops", {}).items())
                                if v is not None), (plat.get("peaks") or {}).get("mem_bw_gbs"))]
        for what, text in sorted((plat.get("sources") or {}).items()):
            lines.append("- source (%s): %s" % (what, text))
    limits = report.get("physical_limits") or []
    if limits:
        lines += ["", "### Why figures sit below the peak here", ""] + ["- %s" % text for text in limits]
    return lines


def chart_bars(report):
    """(label, % of peak, colour group) per benchmark with a peak; a flagged figure gets the warning colour."""
    bars = []
    groups = {}
    for bench in report.get("benchmarks", []):
        if not bench.get("peak_key"):
            continue
        group = groups.setdefault(bench["group"], len(groups))
        clocks = bench.get("clocks")
        label = bench["name"][:40]
        if clocks:
            label += " / %.0f MHz %.0f W" % (clocks["sm_mhz"]["median"], clocks["power_w"]["median"])
        warn = [f["flag"] for f in bench.get("flags") or [] if f["severity"] == "warn"]
        if warn:
            label += " WARN " + ",".join(warn)
            group = WARN_GROUP
        elif any(f["flag"] == "power_capped" for f in bench.get("flags") or []):
            label += " (power cap)"
        bars.append((label, bench.get("pct_of_peak"), group))
    return bars


WARN_GROUP = -3  # black bars with matplotlib; png_chart.PALETTE[3] (red) in the built-in writer


def render_png(report, path):
    """A bar chart of % of peak per benchmark: matplotlib when importable, else the built-in writer."""
    bars = chart_bars(report)
    if not bars:
        bars = [("no benchmarks (%s)" % report.get("status"), None, 0)]
    title = "%s %s: %% of peak (row %s)\nlabels: SM clock and power during each figure; WARN = flagged" % (
        report.get("host") or "", (report.get("device") or {}).get("name", ""),
        (report.get("platform") or {}).get("key") or "none")
    try:
        import matplotlib  # pylint: disable=import-error

        matplotlib.use("Agg")
        from matplotlib import pyplot  # pylint: disable=import-error
    except ImportError:
        png_chart.bar_chart(path, title, bars)
        return "builtin"
    fig, axis = pyplot.subplots(figsize=(10, 0.32 * len(bars) + 1.2))
    labels = [b[0] for b in bars]
    values = [b[1] if b[1] is not None else 0 for b in bars]
    colors = ["black" if b[2] == WARN_GROUP else "C%d" % (b[2] % 10) for b in bars]
    axis.barh(range(len(bars)), values, color=colors)
    axis.set_yticks(range(len(bars)))
    axis.set_yticklabels(labels, fontsize=8)
    axis.invert_yaxis()
    axis.set_xlabel("% of platform peak")
    axis.set_title(title)
    for index, item in enumerate(bars):
        axis.text(values[index], index, " %s" % ("n/a" if item[1] is None else "%.0f%%" % item[1]), va="center",
                  fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    pyplot.close(fig)
    return "matplotlib"


def report_paths(directory, basename="verify"):
    """Where write_reports puts the JSON, Markdown and PNG report (check mode names them too)."""
    return {"json": os.path.join(directory, basename + ".json"), "markdown": os.path.join(directory, basename + ".md"),
            "png": os.path.join(directory, basename + ".png")}


def write_reports(report, directory, basename="verify"):
    """Write <basename>.json/.md/.png into directory; return the paths and the PNG renderer used."""
    if not os.path.isdir(directory):
        os.makedirs(directory)
    paths = report_paths(directory, basename)
    for key, text in (("json", json.dumps(report, indent=1, sort_keys=True) + "\n"),
                      ("markdown", render_markdown(report))):
        atomic_write_text(paths[key], text)
    renderer = render_png(report, paths["png"])
    if (report.get("collectives") or {}).get("bandwidth"):
        paths["collectives_png"] = os.path.join(directory, basename + "-collectives.png")
        render_collectives_png(report, paths["collectives_png"])
    return paths, renderer


def render_collectives_png(report, path):
    """Bus bandwidth against message size, one line per collective (bars without matplotlib)."""
    coll = report["collectives"]
    rows = [r for r in coll["bandwidth"] if not r.get("error")]
    title = "%s: NCCL bus bandwidth, %d GPUs" % (report.get("host") or "", coll["world"])
    try:
        import matplotlib  # pylint: disable=import-error

        matplotlib.use("Agg")
        from matplotlib import pyplot  # pylint: disable=import-error
    except ImportError:
        png_chart.bar_chart(path, title + " (GB/s)", [("%s %s" % (r["op"], multi_gpu.size_label(r["bytes"])),
                                                       r["busbw_gbs"], i % 3) for i, r in enumerate(rows)], unit=" GB/s")
        return "builtin"
    fig, axis = pyplot.subplots(figsize=(8, 4.5))
    for op in ("all_reduce", "all_gather", "reduce_scatter"):
        points = [(r["bytes"], r["busbw_gbs"]) for r in rows if r["op"] == op]
        if points:
            axis.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=op)
    peak = coll.get("link_peak")
    if peak:
        axis.axhline(peak["gbs"], linestyle="--", color="grey", label="link peak %.0f GB/s" % peak["gbs"])
    axis.set_xscale("log", base=2)
    sizes = sorted(set(r["bytes"] for r in rows))
    axis.set_xticks(sizes)
    axis.set_xticklabels([multi_gpu.size_label(s) for s in sizes], rotation=30, fontsize=8)
    axis.set_ylabel("bus bandwidth GB/s")
    axis.set_title(title)
    axis.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    pyplot.close(fig)
    return "matplotlib"


def fleet_table(reports):
    """A Markdown summary over several hosts' reports (dicts as written by write_reports)."""
    lines = ["| host | device | cc | torch | result | failed | bf16 TFLOP/s | fp8 TFLOP/s | copy GB/s | fastest SDPA "
             "| GPUs | all_reduce 1 GiB busbw |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for rep in sorted(reports, key=lambda r: r.get("host") or ""):
        dev = rep.get("device") or {}
        gemm = dict((b["name"].split()[0], b) for b in rep.get("benchmarks", []) if b["group"] == "gemm")
        copy = [b for b in rep.get("benchmarks", []) if b["group"] == "memory"]
        coll = rep.get("collectives") or {}
        big = [r for r in coll.get("bandwidth", []) if r.get("op") == "all_reduce" and r.get("busbw_gbs")]
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            rep.get("host"), dev.get("name", "-"), dev.get("capability", "-"), (rep.get("versions") or {}).get("torch", "-"),
            "PASS" if rep.get("passed") else "FAIL (%s)" % rep.get("summary"), ", ".join(rep.get("failed_checks") or []) or "-",
            _fmt(gemm.get("bf16", {}).get("tflops"), 1), _fmt(gemm.get("fp8", {}).get("tflops"), 1),
            _fmt(copy[0].get("gbs"), 0) if copy else "-", (rep.get("derived") or {}).get("sdpa_fastest_correct") or "-",
            len((rep.get("per_gpu") or {}).get("gpus", [])) or dev.get("count", "-"),
            "%s GB/s" % max(big, key=lambda r: r["bytes"])["busbw_gbs"] if big else coll.get("skipped") and "n/a" or "-"))
    return "\n".join(lines) + "\n"
