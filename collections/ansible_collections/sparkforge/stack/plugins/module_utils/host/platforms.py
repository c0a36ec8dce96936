# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host platform facts: GPUs from nvidia-smi's CSV, CPU from /proc/cpuinfo.

Plain functions over text so that unit tests feed them the real formats.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re

from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import arch

# The fields asked of nvidia-smi, in this order.  `compute_cap` exists since
# driver 510; every driver sparkforge supports (>= 580 for Blackwell) has it.
QUERY_FIELDS = ("index", "name", "compute_cap", "driver_version", "memory.total", "uuid", "pci.bus_id")

# Values nvidia-smi prints when a field has no value on this GPU.  GB10 has no
# dedicated GPU memory (unified LPDDR5x), so memory.total is one of these.
_NO_VALUE = ("[N/A]", "N/A", "[Not Supported]", "Not Supported", "[Unknown Error]", "")

# The class of a GPU that no row of the manifest's sparkforge_gpu_platforms matches.  Which GPU is of which
# class is data: the rows' `class` in roles/manifest/defaults/main/platforms.yml, the only table of it.
GENERIC_CLASS = "generic"
CLASS_NAME = re.compile(r"^[a-z][a-z0-9_]*$")

# Arm CPU part numbers seen on the supported platforms (from the MIDR register).
ARM_CPU_PARTS = {
    "0xd4f": "Neoverse-V2",
    "0xd85": "Cortex-X925",
    "0xd87": "Cortex-A725",
    "0xd8e": "Neoverse-N3",
    "0xd84": "Neoverse-V3",
    "0xd0c": "Neoverse-N1",
    "0xd40": "Neoverse-V1",
}


class FactsError(Exception):
    pass


def _clean_header(name):
    # "memory.total [MiB]" -> "memory.total"
    return re.sub(r"\s*\[[^\]]*\]\s*$", "", name.strip())


def _split_csv_line(line):
    return [cell.strip() for cell in line.split(",")]


def parse_memory_mib(value):
    """'81559 MiB' or '81559' -> 81559; '[N/A]' / '[Not Supported]' -> None."""
    value = value.strip()
    if value in _NO_VALUE:
        return None
    match = re.match(r"^(\d+)(?:\s*MiB)?$", value)
    if not match:
        raise FactsError("cannot read a memory size from nvidia-smi value %r" % value)
    return int(match.group(1))


def _peak_problem(value):
    """Why a datasheet peak is not one (None when it is: a positive finite number, or null for "not given")."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        return "%r is not a positive number (or null where the datasheet gives none)" % (value,)
    return None


def _check_peaks(key, row):
    """The row's dense peaks verify compares its measurements with: mem_bw_gbs and each tflops entry."""
    why = _peak_problem(row.get("mem_bw_gbs"))
    if why:
        raise FactsError("sparkforge_gpu_platforms.%s: mem_bw_gbs %s" % (key, why))
    tflops = row.get("tflops")
    if tflops is None:
        return
    if not isinstance(tflops, dict):
        raise FactsError("sparkforge_gpu_platforms.%s: tflops must be a mapping of precision to TFLOPS "
                         "(fp64, fp32, tf32, fp16, bf16, fp8, fp4), got %r" % (key, tflops))
    for precision in sorted(tflops, key=str):
        why = _peak_problem(tflops[precision])
        if why:
            raise FactsError("sparkforge_gpu_platforms.%s: tflops.%s %s" % (key, precision, why))


def platform_rows(platforms):
    """[(row key, compiled match, class)] of the manifest's ``sparkforge_gpu_platforms``, in its order (the first
    matching row wins); a table that cannot classify is refused, naming the row and what it holds."""
    if not isinstance(platforms, dict) or not platforms:
        raise FactsError("platforms must be the manifest's sparkforge_gpu_platforms (rows with match and class), "
                         "got %r" % (platforms,))
    rows = []
    for key, row in platforms.items():
        row = row if isinstance(row, dict) else {}
        klass = row.get("class")
        if not isinstance(klass, str) or not CLASS_NAME.match(klass):
            raise FactsError("sparkforge_gpu_platforms.%s: class must be a platform class name such as hopper "
                             "(lower case, digits, _), got %r" % (key, klass))
        if not isinstance(row.get("match"), str) or not row["match"]:
            raise FactsError("sparkforge_gpu_platforms.%s: match must be a regular expression on the GPU's name, "
                             "got %r" % (key, row.get("match")))
        _check_peaks(key, row)
        try:
            rows.append((key, re.compile(row["match"], re.IGNORECASE), klass))
        except re.error as exc:
            raise FactsError("sparkforge_gpu_platforms.%s: match %r is not a regular expression: %s"
                             % (key, row["match"], exc))
    return rows


def classify_gpu(name, rows):
    """The class of the first row (platform_rows) whose match finds the GPU's product name, else generic."""
    for _key, pattern, klass in rows:
        if pattern.search(name or ""):
            return klass
    return GENERIC_CLASS


def parse_nvidia_smi_csv(text, platforms):
    """Parse ``nvidia-smi --query-gpu=... --format=csv[,nounits]`` output (with its header); ``platforms`` is the
    manifest's sparkforge_gpu_platforms, which classifies each GPU."""
    rows = platform_rows(platforms)
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    header = [_clean_header(cell) for cell in _split_csv_line(lines[0])]
    missing = [field for field in ("index", "name", "compute_cap") if field not in header]
    if missing:
        raise FactsError("nvidia-smi output has no %s column (header was: %s)" % (", ".join(missing), lines[0]))
    gpus = []
    for line in lines[1:]:
        cells = _split_csv_line(line)
        if len(cells) != len(header):
            # A product name never holds a comma in practice; a mismatch means a format we do not know.
            raise FactsError("unexpected nvidia-smi line (expected %d fields): %s" % (len(header), line))
        row = dict(zip(header, cells))
        capability = row["compute_cap"]
        try:
            sm = arch.to_sm(arch.parse_name(capability))
        except arch.ArchError:
            raise FactsError("cannot read a compute capability from %r" % capability)
        gpus.append({
            "index": int(row["index"]),
            "name": row["name"],
            "compute_capability": capability,
            "sm": sm,
            "driver_version": row.get("driver_version") or None,
            "memory_mib": parse_memory_mib(row.get("memory.total", "")),
            "uuid": row.get("uuid") or None,
            "pci_bus_id": row.get("pci.bus_id") or None,
            "platform_class": classify_gpu(row["name"], rows),
        })
    return sorted(gpus, key=lambda gpu: gpu["index"])


def parse_cpuinfo(text):
    """CPU model, core count, SVE/SVE2 and Arm parts from /proc/cpuinfo."""
    processors = 0
    features = set()
    parts = {}
    model = None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip().lower()
        value = value.strip()
        if key == "processor":
            processors += 1
        elif key in ("features", "flags"):
            features.update(value.split())
        elif key == "cpu part":
            name = ARM_CPU_PARTS.get(value.lower(), value.lower())
            parts[name] = parts.get(name, 0) + 1
        elif key == "model name" and model is None:
            model = value
    if model is None and parts:
        model = " + ".join("%dx %s" % (count, name) for name, count in sorted(parts.items()))
    return {
        "cores": processors,
        "model": model,
        "sve": "sve" in features,
        "sve2": "sve2" in features,
        "arm_parts": parts,
    }


def version_tuple(text):
    return tuple(int(part) for part in re.findall(r"\d+", text or ""))


def summarize(gpus, cpu, machine, mem, nvidia_smi_path):
    """The ``ansible_facts.sparkforge`` dict."""
    capabilities = sorted({gpu["compute_capability"] for gpu in gpus}, key=version_tuple)
    classes = sorted({gpu["platform_class"] for gpu in gpus})
    if not gpus:
        platform_class = "none"
    elif len(classes) == 1:
        platform_class = classes[0]
    else:
        platform_class = "mixed"
    drivers = sorted({gpu["driver_version"] for gpu in gpus if gpu["driver_version"]}, key=version_tuple)
    unified = bool(gpus) and all(gpu["memory_mib"] is None for gpu in gpus)
    return {
        "gpus": gpus,
        "gpu_count": len(gpus),
        "compute_capabilities": capabilities,
        "sm_archs": [arch.to_sm(cap) for cap in capabilities],
        "platform_class": platform_class,
        "platform_classes": classes,
        "driver_version": drivers[0] if drivers else None,
        "unified_memory": unified,
        "nvidia_smi": nvidia_smi_path,
        "cpu": {
            "arch": machine,
            "model": cpu["model"],
            "cores": cpu["cores"],
            "sve": cpu["sve"],
            "sve2": cpu["sve2"],
            "arm_parts": cpu["arm_parts"],
        },
        "memory": {
            "total_mib": mem["total"] // (1024 * 1024),
            "available_mib": mem["available"] // (1024 * 1024),
        },
    }


def cuda_distro_keys(distribution, version):
    """The keys of sparkforge_cuda_distro_map tried for a host, most exact first: Ansible reports
    Debian 12 as '12.11' and DGX OS 7 as '7.x', so '<distribution>-<version>' and then
    '<distribution>-<major version>' ('Debian-12')."""
    version = str(version or "")
    keys = ["%s-%s" % (distribution, version)]
    major = version.split(".", 1)[0]
    if major and major != version:
        keys.append("%s-%s" % (distribution, major))
    return keys


def cuda_distro(distribution, version, distro_map):
    """NVIDIA's repository distro name for the host (None when the map has none: no default)."""
    for key in cuda_distro_keys(distribution, version):
        if (distro_map or {}).get(key):
            return distro_map[key]
    return None
