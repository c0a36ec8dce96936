"""``sparkforge versions``: the PyTorch version data checked against a package index.

Reads the index directly (PEP 691 JSON or PEP 503 HTML; a mirror, a ``file://`` URL or a
directory work too): the torch, triton, torchvision and torchaudio releases and each Linux
wheel's metadata (the ``.metadata`` file, else range reads of the wheel), never a resolver.
Reports the releases the data lacks and every pairing the wheels contradict; ``--check`` exits
1 on either, ``--write`` updates the data files in place (comments and layout kept).

``--checksums`` checks the published sha256 pins instead (checksums.yml): the cuda-keyring digest
in the Packages index of every CUDA repository directory, the cuSPARSELt local-repo .deb in
redistrib_<version>.json, read over https (proxies honoured) from the URLs of the data, so a mirror
works. ``--check`` exits 1 when a pin is missing, ``--write`` adds the missing ones; a pin whose
published digest changed is reported loudly, exits 3 and is never overwritten.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import json
import os
import re

from sparkforge.collection import MANIFEST_REL, manifest_reader
from sparkforge.tooling import pkg_index, torch_versions

DEFAULT_INDEX = "https://pypi.org/simple/"


def add_parser(sub):
    p = sub.add_parser("versions", help="check the PyTorch version data against a package index, or the sha256 "
                       "pins against their published sources (--checksums); --check, --write",
                       description=__doc__.split("\n\n", 1)[1])
    p.add_argument("--index-url", default=os.environ.get("SPARKFORGE_INDEX_URL", DEFAULT_INDEX),
                   help="simple index (PEP 503/691) URL, file:// URL or directory (default %(default)s)")
    p.add_argument("--manifest-dir", help="the manifest's data directory (default: the project's %s)" % MANIFEST_REL)
    p.add_argument("--since", default="2.9.0", help="oldest torch release to survey (default %(default)s)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 when a release is missing or a pairing disagrees")
    mode.add_argument("--write", action="store_true", help="update torch.yml (and triton.yml) from the wheels")
    p.add_argument("--json", action="store_true", help="print the survey and findings as JSON")
    p.add_argument("--cache-dir", default=os.path.join(os.path.expanduser("~"), ".cache", "sparkforge", "metadata"),
                   help="wheel metadata cache, keyed by the wheels' sha256 (default %(default)s)")
    p.add_argument("--timeout", type=_seconds, default=30.0,
                   help="seconds per request, above 0 and at most %d (default %%(default)s)" % MAX_TIMEOUT)
    p.add_argument("--checksums", action="store_true",
                   help="check the sha256 pins of checksums.yml against their published sources instead")
    p.add_argument("--cuda-repo-url", help="with --checksums: the CUDA repository base URL (default: the data's "
                   "sparkforge_cuda_repo_url)")
    p.add_argument("--cusparselt-redist-url", help="with --checksums: where redistrib_<version>.json lives "
                   "(default: the data's sparkforge_cusparselt_redist_url)")
    return p


MAX_TIMEOUT = 86400


def _seconds(text):
    """--timeout's type: ASCII digits only (float() reads a full-width '９' as 9)."""
    if not text.isascii():
        raise argparse.ArgumentTypeError("%r has a non-ASCII character: type the digits 0-9" % text)
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a number of seconds" % text) from None


def _load(path):
    with open(path) as handle:
        return handle.read()


SINCE = re.compile(r"^\d+\.\d+(\.\d+)?$")


def run(args, project_root, stdout, stderr):
    """Returns the exit code: 0 agree, 1 findings with --check, 4 bad input, 5 index unreadable."""
    # NaN compares false with both bounds; inf reached the socket as an OverflowError.
    if not 0 < args.timeout <= MAX_TIMEOUT:
        stderr.write("sparkforge versions: --timeout %r is not a number of seconds above 0 (at most %d)\n"
                     % (args.timeout, MAX_TIMEOUT))
        return 4
    if args.checksums:
        from sparkforge import checksums
        return checksums.run(args, project_root, stdout, stderr)
    if not SINCE.match(str(args.since)):
        stderr.write("sparkforge versions: --since %r is not a torch release like 2.9.0\n" % (args.since,))
        return 4
    manifest_dir = args.manifest_dir or os.path.join(project_root, MANIFEST_REL)
    torch_file = os.path.join(manifest_dir, "torch.yml")
    triton_file = os.path.join(manifest_dir, "triton.yml")
    if not os.path.isfile(torch_file):
        stderr.write("sparkforge versions: no torch.yml in %s\n" % manifest_dir)
        return 4
    reader = manifest_reader(project_root)
    if reader is None:
        stderr.write("sparkforge versions: no sparkforge collection in %s to read the manifest with\n" % project_root)
        return 4
    try:
        data = reader.load(manifest_dir, ("torch.yml",)).get("sparkforge_torch_releases") or {}
    except reader.ManifestError as exc:
        stderr.write("sparkforge versions: %s\n" % exc)
        return 4
    text = _load(torch_file)  # the text, kept for --write's edit of it
    index = pkg_index.Index(args.index_url, timeout=args.timeout, cache_dir=args.cache_dir or None)
    try:
        surveyed = torch_versions.survey(index, min_version=args.since)
    except pkg_index.IndexError_ as exc:
        stderr.write("sparkforge versions: cannot read the index: %s\n" % exc)
        return 5
    report = torch_versions.compare(data, surveyed)
    if args.json:
        stdout.write(json.dumps({"survey": surveyed, "report": report}, indent=1, sort_keys=True) + "\n")
    else:
        _print(surveyed, report, data, stdout, pkg_index.PLATFORMS)
    if args.write and (report["missing"] or report["disagreements"]
                       or _stale_wheels(data, surveyed, torch_versions)):
        new_text = torch_versions.update_text(text, data, surveyed, report)
        with open(torch_file + ".tmp", "w") as handle:
            handle.write(new_text)
        # Read back before it replaces the file: an edit that does not parse never reaches the data.
        new_data = reader.load(manifest_dir, ("torch.yml.tmp",))["sparkforge_torch_releases"]
        os.replace(torch_file + ".tmp", torch_file)
        triton_text = _load(triton_file)
        known = reader.load(manifest_dir, ("triton.yml",)).get("sparkforge_triton_releases") or {}
        added = torch_versions.new_tritons(new_data, known)
        if added:
            with open(triton_file + ".tmp", "w") as handle:
                handle.write(torch_versions.add_triton_text(triton_text, added))
            os.replace(triton_file + ".tmp", triton_file)
        stdout.write("wrote %s%s\n" % (torch_file, " and %s (triton %s)" % (triton_file, ", ".join(added))
                                       if added else ""))
        return 0
    if args.check and (report["missing"] or report["disagreements"]):
        return 1
    return 0


def _stale_wheels(data, surveyed, torch_versions):
    return any(version in data and data[version].get("wheels") != torch_versions.wheel_facts(found)
               for version, found in surveyed["releases"].items())


def _print(surveyed, report, data, out, platforms):
    out.write("index %s: %d torch releases surveyed (%d requests)\n"
              % (surveyed["index"], len(surveyed["releases"]), surveyed["requests"]))
    out.write("%-8s %-10s %-12s %-11s %-9s %s\n" % ("torch", "in data", "triton", "torchvision", "torchaudio",
                                                   "wheels (aarch64 / x86_64)"))
    for version, found in surveyed["releases"].items():
        entry = data.get(version) or {}
        plats = []
        for machine in platforms:
            facts = found["platforms"].get(machine)
            if not facts:
                plats.append("%s: none" % machine)
                continue
            cudnn = facts["cuda"].get("nvidia-cudnn-cu13") or facts["cuda"].get("nvidia-cudnn-cu12") or "-"
            plats.append("%s: triton%s cudnn%s py%s" % (machine, facts["triton"] or " -", cudnn,
                                                          facts["requires_python"] or "?"))
        out.write("%-8s %-10s %-12s %-11s %-9s %s\n" % (
            version, "yes" if entry else "MISSING", entry.get("triton", "-"), entry.get("torchvision", "-"),
            entry.get("torchaudio", "-"), "; ".join(plats)))
    if report["missing"]:
        out.write("\nmissing from the data: %s\n" % ", ".join(report["missing"]))
    if report["disagreements"]:
        out.write("\ndisagreements:\n")
        for item in report["disagreements"]:
            where = " [%s%s]" % (item["platform"], ", cp" + "/".join(item["pythons"]) if item["pythons"] else "") \
                if item["platform"] else ""
            out.write("  torch %s %s: data %s, wheels %s%s: %s\n" % (
                item["torch"], item["field"], item["manifest"], item["wheels"], where, item["why"]))
    if report["notes"]:
        out.write("\nnotes:\n")
        for note in report["notes"]:
            out.write("  %s\n" % note)
    if not report["missing"] and not report["disagreements"]:
        out.write("\nthe data agrees with the index\n")
