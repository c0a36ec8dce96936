# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one home of CUDA architecture names: parse, normalise, "runs on", torch's and sm_ forms.

Forms: torch's TORCH_CUDA_ARCH_LIST entry ``9.0``, ``12.0a``, ``12.0f+PTX`` and nvcc's ``sm_90``,
``sm_120a``, ``compute_120f`` (``sm_`` is SASS, ``compute_`` PTX).  Every caller (plan validation,
the torch and heavy builds, the fat-binary audit, platforms, verify) reads names through here so a
name one accepts the others accept too.

Binary compatibility: SASS for X.Y runs on X.Z with Z >= Y; an arch-specific ``a`` target runs only on
exactly X.Y; a family-specific ``f`` target runs on the same major family from X.Y on (so, for SASS, the
same set as the plain target, with fewer features); PTX is JIT-compiled for any capability >= X.Y,
except ``a`` PTX (exactly X.Y) and ``f`` PTX (same major, >= X.Y).  Checked against NVIDIA's pages:
the Blackwell Compatibility Guide, "Application Compatibility on Blackwell Architecture"
(https://docs.nvidia.com/cuda/archive/13.0.0/blackwell-compatibility-guide/index.html: a cubin runs on the
same major and a same or higher minor, 8.0 on 8.6 but not 8.6 on 8.0 nor 8.x on 9.0; PTX on any higher
capability), the CUDA Programming Guide's "Feature Set Compiler Targets" (architecture-specific features
are not guaranteed on any other capability) and NVIDIA's blog "NVIDIA Blackwell and NVIDIA CUDA 12.9
Introduce Family-Specific Architecture Features"
(https://developer.nvidia.com/blog/nvidia-blackwell-and-nvidia-cuda-12-9-introduce-family-specific-architecture-features/:
compute_100f code runs on 10.0 and 10.3, not on other majors).  tests/unit/.../test_cuda_arch.py holds
those examples.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# 9.0 / 12.1a / 12.0f+PTX: a compute capability, an optional variant, an optional +PTX.
_DOTTED = re.compile(r"^(\d+)\.(\d+)([af]?)(\+PTX)?$", re.ASCII)
# sm_90 / compute_120f / 121: the last digit is the minor (nvcc's numbering).
_NUMBERED = re.compile(r"^(sm_|compute_)?(\d+)(\d)([af]?)$", re.ASCII)
_SPLIT = re.compile(r"[;,\s]+", re.ASCII)
VARIANTS = ("", "a", "f")


class ArchError(ValueError):
    """A text that is not a CUDA architecture name; the message names it and the accepted forms,
    ``bad`` lists the tokens refused (empty for an empty list)."""

    def __init__(self, message, bad=()):
        super(ArchError, self).__init__(message)
        self.bad = list(bad)


def _entry(major, minor, variant, ptx):
    base = "%d.%d" % (major, minor)
    return {"major": major, "minor": minor, "variant": variant, "ptx": ptx, "base": base,
            "text": "%s%s%s" % (base, variant, "+PTX" if ptx else "")}


def parse_name(name):
    """One torch-form entry '12.0a+PTX' -> {major, minor, variant, ptx, base, text}."""
    match = _DOTTED.match(str(name).strip())
    if not match:
        raise ArchError("'%s' is not a TORCH_CUDA_ARCH_LIST name: use a compute capability like 9.0 or 12.1, "
                        "optionally with an 'a' or 'f' suffix (12.0a) and/or '+PTX' (12.0+PTX)" % name)
    return _entry(int(match.group(1)), int(match.group(2)), match.group(3), bool(match.group(4)))


def parse_list(value, variable="cuda_arch_list", allow_empty=True):
    """'9.0;12.1+PTX' (';', ',' or blanks between; or a list of such) -> entries, in the given order.

    Raises ArchError naming ``variable``, every bad token and the accepted form.
    """
    items = value if isinstance(value, (list, tuple)) else [value]
    tokens = []
    for item in items:
        tokens.extend(t for t in _SPLIT.split(str("" if item is None else item).strip()) if t)
    if not tokens and not allow_empty:
        raise ArchError("%s is empty: a GPU source build needs the architectures to compile for "
                        "(e.g. '12.1' on a DGX Spark, '9.0' on a GH200)" % variable)
    entries, bad = [], []
    for token in tokens:
        try:
            entries.append(parse_name(token))
        except ArchError:
            bad.append(token)
    if bad:
        raise ArchError("%s=%r: %s %s not an architecture like 9.0, 12.1, 12.0a or 12.0+PTX"
                        % (variable, value if isinstance(value, str) else ";".join(map(str, items)),
                           ", ".join(repr(b) for b in bad), "is" if len(bad) == 1 else "are"), bad)
    return entries


def to_torch(entries):
    """Canonical torch list: sorted by capability then variant, duplicates merged ('+PTX' kept if any)."""
    merged = {}
    for entry in entries:
        key = (entry["major"], entry["minor"], entry["variant"])
        merged[key] = merged.get(key, False) or entry["ptx"]
    return ";".join(_entry(k[0], k[1], k[2], ptx)["text"] for k, ptx in sorted(merged.items()))


def parse_sm(name):
    """'sm_121a' -> (12, 1, 'a'); 'compute_90' -> (9, 0, ''); '120' -> (12, 0, '')."""
    match = _NUMBERED.match(str(name).strip())
    if not match:
        raise ArchError("cannot read a CUDA architecture from %r (want sm_90, compute_120f or 121)" % (name,))
    return int(match.group(2)), int(match.group(3)), match.group(4)


def to_sm(entry, prefix="sm"):
    """An entry (or a '12.1' capability) -> 'sm_121' / 'sm_120a' (``prefix`` 'compute' for PTX)."""
    if not isinstance(entry, dict):
        entry = parse_name(entry)
    return "%s_%d%d%s" % (prefix, entry["major"], entry["minor"], entry["variant"])


def from_sm(name):
    """'sm_120a' / 'compute_90' / '121' -> the torch-form entry ('compute_' gives +PTX)."""
    major, minor, variant = parse_sm(name)
    return _entry(major, minor, variant, str(name).strip().startswith("compute_"))


def capability(text):
    """'12.1' / 'sm_121' / '121' -> (12, 1)."""
    text = str(text).strip()
    match = re.match(r"^(\d+)\.(\d+)$", text)
    if match:
        return int(match.group(1)), int(match.group(2))
    return parse_sm(text)[:2]


def sass_runs_on(major, minor, variant, target):
    """SASS for (major, minor, variant) runs on capability ``target`` (major, minor)."""
    if variant == "a":
        return (major, minor) == tuple(target)
    return major == target[0] and minor <= target[1]


def ptx_runs_on(major, minor, variant, target):
    """PTX for (major, minor, variant) can be JIT-compiled for capability ``target``."""
    if variant == "a":
        return (major, minor) == tuple(target)
    if variant == "f":
        return major == target[0] and minor <= target[1]
    return (major, minor) <= tuple(target)


def runs_on(entry, target):
    """Whether a torch-form entry gives a GPU of ``target`` ('12.1' or (12, 1)) code it runs."""
    if not isinstance(entry, dict):
        entry = parse_name(entry)
    have = capability(target) if not isinstance(target, tuple) else target
    args = (entry["major"], entry["minor"], entry["variant"], have)
    return sass_runs_on(*args) or (entry["ptx"] and ptx_runs_on(*args))
