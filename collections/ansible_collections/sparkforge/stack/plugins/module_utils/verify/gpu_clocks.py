# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the GPU was doing while a benchmark ran, and whether the figure can be trusted.

Plain functions over NVML samples as the check script records them: ``[time, sm_mhz, mem_mhz, power_w,
temp_c, reasons]`` (``reasons`` is NVML's clocks-event/throttle-reason bitmask).  ``summarise`` turns a
benchmark's samples into clocks, power against the limit, temperature and the reasons seen; ``judge``
flags the figure (throttled, power-capped, low for the clock it ran at, unsteady, no clock data), each
flag with its reason; ``side_by_side`` compares verify's figures with an independent measurement.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# NVML's clocks event reasons (nvmlClocksEventReasons / nvmlClocksThrottleReasons): bit, name, severity.
# "power" is the normal state of a GPU at its power limit; "bad" ones mean it is slowed down by heat or
# by the board (a fault or a cooling problem); "idle"/"info" are not about the measurement.
REASONS = (
    (0x1, "gpu_idle", "idle"),
    (0x2, "applications_clocks_setting", "info"),
    (0x4, "sw_power_cap", "power"),
    (0x8, "hw_slowdown", "bad"),
    (0x10, "sync_boost", "info"),
    (0x20, "sw_thermal_slowdown", "bad"),
    (0x40, "hw_thermal_slowdown", "bad"),
    (0x80, "hw_power_brake_slowdown", "bad"),
    (0x100, "display_clock_setting", "info"),
)
SEVERITY = dict((name, sev) for _bit, name, sev in REASONS)

# The judging thresholds, in one place.
THRESHOLDS = {
    # a reason counts when it is set in at least this share of a window's samples
    "reason_share": 0.2,
    # a GEMM or bandwidth figure below this share of the peak scaled to the clock it ran at is "low for its clock"
    "low_for_clock": 0.7,
    # per-chunk times spread (max - min) / median above this: the rate was not steady
    "unsteady_spread": 0.15,
}
# Figures that run near the hardware limit when healthy, so "low for its clock" means something there.
PEAK_BOUND_GROUPS = ("gemm", "memory")


def reason_names(mask):
    """The names of the bits set in an NVML reasons mask, in NVML's order (unknown bits as hex)."""
    mask = int(mask or 0)
    names = [name for bit, name, _sev in REASONS if mask & bit]
    rest = mask & ~sum(bit for bit, _n, _s in REASONS)
    if rest:
        names.append("0x%x" % rest)
    return names


def _median(values):
    values = sorted(values)
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2.0


def summarise(samples, info=None):
    """Clocks, power, temperature and reasons over one window's samples; None when there are none.

    ``info`` is the script's NVML device info (power_limit_w, max_sm_mhz, max_mem_mhz)."""
    info = info or {}
    rows = [s for s in samples or [] if len(s) >= 6 and s[1] is not None]
    if not rows:
        return None
    sm = [r[1] for r in rows]
    mem = [r[2] for r in rows]
    power = [r[3] for r in rows]
    temp = [r[4] for r in rows]
    share = {}
    for row in rows:
        for name in reason_names(row[5]):
            share[name] = share.get(name, 0) + 1
    share = dict((k, round(v / float(len(rows)), 3)) for k, v in share.items())
    out = {"samples": len(rows), "sm_mhz": {"median": _median(sm), "min": min(sm), "max": max(sm)},
           "mem_mhz": _median(mem), "power_w": {"median": round(_median(power), 1), "max": round(max(power), 1)},
           "temp_c": {"median": _median(temp), "max": max(temp)}, "reason_share": share,
           "reasons": sorted((k for k, v in share.items()
                              if v >= THRESHOLDS["reason_share"] and SEVERITY.get(k) != "idle"),
                             key=lambda k: [n for _b, n, _s in REASONS].index(k) if k in SEVERITY else 99)}
    limit = info.get("power_limit_w")
    if limit:
        out["power_limit_w"] = limit
        out["power_pct_of_limit"] = round(100.0 * out["power_w"]["median"] / limit, 1)
    if info.get("max_sm_mhz"):
        out["sm_pct_of_max"] = round(100.0 * out["sm_mhz"]["median"] / info["max_sm_mhz"], 1)
    if info.get("max_mem_mhz") and out["mem_mhz"]:
        out["mem_pct_of_max"] = round(100.0 * out["mem_mhz"] / info["max_mem_mhz"], 1)
    return out


def figure_value(item):
    """(value, unit) of a benchmark item: GB/s for bandwidth figures, TFLOP/s otherwise."""
    if item.get("peak_key") == "mem_bw" or (item.get("gbs") is not None and item.get("tflops") is None):
        return item.get("gbs"), "GB/s"
    return item.get("tflops"), "TFLOP/s"


def clock_scaled_peak(peak, summary, info, peak_key):
    """The peak scaled to the clock the figure ran at (SM clock for compute, memory clock for bandwidth)."""
    if not peak or not summary or not info:
        return None
    if peak_key == "mem_bw":
        top, now = info.get("max_mem_mhz"), summary.get("mem_mhz")
    else:
        top, now = info.get("max_sm_mhz"), summary["sm_mhz"]["median"]
    if not top or not now:
        return None
    return peak * min(1.0, float(now) / top)


def judge(item, summary, info=None, peak=None, nvml_error=None):
    """Flags for one benchmark figure: [{flag, severity (warn|note), detail}].

    throttled (warn): a thermal/hardware slowdown or power brake reason was set in the window.
    power_capped (note): the power limit held the SM clock down: the GPU's sustained rate under its limit.
    low_for_clock (warn): a GEMM/bandwidth figure far below the peak scaled to the clock it ran at, so clocks
    and power do not explain it (software, inputs, other work on the GPU).
    unsteady (warn): per-chunk times spread widely within the window.
    no_clocks (note): no NVML samples, so the figure cannot explain itself."""
    info = info or {}
    flags = []
    value, unit = figure_value(item)
    if summary is None:
        why = nvml_error or ("no sample fell in this figure's window" if info.get("available")
                             else "NVML not available")
        flags.append({"flag": "no_clocks", "severity": "note", "detail": "no NVML samples for this figure (%s)" % why})
    else:
        sm = summary["sm_mhz"]
        top = info.get("max_sm_mhz")
        clock_text = "SM clock median %s MHz%s" % (sm["median"], " of max %s (%.0f%%)" % (top, summary["sm_pct_of_max"])
                                                   if top and "sm_pct_of_max" in summary else "")
        bad = [r for r in summary["reasons"] if SEVERITY.get(r) == "bad" or r.startswith("0x")]
        if bad:
            flags.append({"flag": "throttled", "severity": "warn",
                          "detail": "%s (in %s of the samples); %s, %s C max" % (
                              ", ".join(bad), ", ".join("%.0f%%" % (100 * summary["reason_share"][r]) for r in bad),
                              clock_text, summary["temp_c"]["max"])})
        if "sw_power_cap" in summary["reasons"]:
            flags.append({"flag": "power_capped", "severity": "note",
                          "detail": "%s under the %s W power limit (median draw %s W): the GPU's sustained rate "
                                    "under its power limit, not a fault" % (
                                        clock_text, _num(summary.get("power_limit_w")), summary["power_w"]["median"])})
        scaled = clock_scaled_peak(peak, summary, info, item.get("peak_key"))
        if scaled and value and item.get("group") in PEAK_BOUND_GROUPS:
            ratio = value / scaled
            item_ratio = round(100.0 * ratio, 1)
            if ratio < THRESHOLDS["low_for_clock"]:
                flags.append({"flag": "low_for_clock", "severity": "warn",
                              "detail": "%s %s is %.0f%% of the peak scaled to the clock it ran at (%.0f %s): "
                                        "clocks and power do not explain it" % (_num(value), unit, item_ratio,
                                                                                scaled, unit)})
    spread = (item.get("timing") or {}).get("chunk_spread")
    if spread is not None and spread > THRESHOLDS["unsteady_spread"]:
        flags.append({"flag": "unsteady", "severity": "warn",
                      "detail": "per-chunk times varied by %.0f%% of the median within the window: the rate was "
                                "not steady (clock changes or other work on the GPU)" % (100 * spread)})
    return flags


def _num(value):
    if value is None:
        return "?"
    return ("%.0f" % value) if isinstance(value, float) else str(value)


def annotate(benchmarks, nvml_info, entry=None, peak_for=None):
    """Add ``clocks`` (summarise) and ``flags`` (judge) to every benchmark item; drop the raw samples.

    ``peak_for(entry, peak_key)`` gives the peak of the matched peak-table row."""
    nvml_info = nvml_info or {}
    for item in benchmarks or []:
        if item.get("median_ms") is None or item["median_ms"] != item["median_ms"]:  # NaN: did not run
            continue
        samples = item.pop("nvml_samples", None)
        summary = summarise(samples, nvml_info)
        item["clocks"] = summary
        peak = peak_for(entry, item.get("peak_key")) if peak_for else None
        item["flags"] = judge(item, summary, nvml_info, peak, nvml_info.get("error"))
        if summary and peak and item.get("peak_key"):
            scaled = clock_scaled_peak(peak, summary, nvml_info, item["peak_key"])
            value = figure_value(item)[0]
            if scaled and value:
                item["pct_of_clock_peak"] = round(100.0 * value / scaled, 1)
    return benchmarks


def flag_text(item):
    """One short cell for a report table: the flags' names, warnings first."""
    flags = item.get("flags") or []
    order = sorted(flags, key=lambda f: 0 if f["severity"] == "warn" else 1)
    return ", ".join(("!" if f["severity"] == "warn" else "") + f["flag"] for f in order) or "-"


def clock_text(item):
    """'1395 MHz 698/700 W 61 C' for a report table cell; '-' without samples."""
    c = item.get("clocks")
    if not c:
        return "-"
    power = "%s/%s W" % (_num(c["power_w"]["median"]), _num(c.get("power_limit_w"))) if c.get("power_limit_w") \
        else "%s W" % _num(c["power_w"]["median"])
    return "%s MHz, mem %s MHz, %s, %s C" % (_num(c["sm_mhz"]["median"]), _num(c["mem_mhz"]), power,
                                             _num(c["temp_c"]["max"]))


# ------------------------------------------------------------------------------ side by side --

# figure key -> how to find it among verify's benchmarks
FIGURES = (
    ("gemm_bf16", "GEMM bf16 8192^3"), ("gemm_fp16", "GEMM fp16 8192^3"), ("gemm_tf32", "GEMM tf32 8192^3"),
    ("gemm_fp8", "GEMM fp8 8192^3 (_scaled_mm)"), ("sdpa_flash", "SDPA flash B=4 H=32 S=4096 D=128 causal"),
    ("sdpa_cudnn", "SDPA cuDNN, same shape"), ("copy", "device copy 1 GiB (read + write)"),
)


def verify_figure_key(item):
    """The side-by-side key of a verify benchmark item, or None."""
    group, name = item.get("group"), item.get("name", "")
    if group == "gemm":
        return "gemm_" + name.split()[0]
    if group == "sdpa" and item.get("backend") in ("flash", "cudnn") and item.get("tflops"):
        return "sdpa_" + item["backend"]
    if group == "memory" and name.startswith("device copy"):
        return "copy"
    return None


def side_by_side(verify_benchmarks, plain_figures, threshold=0.95):
    """Rows comparing verify's figures with an independent measurement of the same ones.

    ``plain_figures``: {key: {"value", "unit", "clocks"?, ...}}.  A row meets the bar when verify reaches at
    least ``threshold`` of the independent figure (for a time, ms, it would be the other way round; all figures
    here are rates, higher is better)."""
    by_key = {}
    for item in verify_benchmarks or []:
        key = verify_figure_key(item)
        if key and key not in by_key:
            by_key[key] = item
    rows = []
    for key, label in FIGURES:
        item = by_key.get(key)
        plain = (plain_figures or {}).get(key) or {}
        v_value = figure_value(item)[0] if item else None
        p_value = plain.get("value")
        ratio = round(v_value / p_value, 3) if v_value and p_value else None
        rows.append({"figure": key, "label": label, "unit": "GB/s" if key == "copy" else "TFLOP/s",
                     "verify": v_value, "plain": p_value, "ratio": ratio,
                     "meets": None if ratio is None else ratio >= threshold,
                     "verify_clocks": clock_text(item) if item else "-",
                     "plain_clocks": clock_text(plain) if plain else "-",
                     "verify_flags": flag_text(item) if item else "-",
                     "plain_burst": plain.get("burst_value")})
    return rows


def side_by_side_markdown(rows, threshold=0.95):
    lines = ["| figure | unit | verify | independent | verify / independent | >= %.0f%% | verify clocks | "
             "independent clocks | verify flags | independent, burst after rest (info) |" % (100 * threshold),
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["label"], r["unit"], _fmt1(r["verify"]), _fmt1(r["plain"]),
            "%.3f" % r["ratio"] if r["ratio"] is not None else "-",
            {True: "yes", False: "**no**", None: "-"}[r["meets"]], r["verify_clocks"], r["plain_clocks"],
            r["verify_flags"], _fmt1(r.get("plain_burst"))))
    return "\n".join(lines) + "\n"


def _fmt1(value):
    return "-" if value is None else "%.1f" % value
