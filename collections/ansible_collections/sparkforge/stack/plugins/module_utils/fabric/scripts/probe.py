# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parity's probe, run by the stack's python as ``python -c SOURCE`` (parity.host_facts passes this file's source,
read through its loader as scripts/collectives.py is): torch's version, its CUDA and NCCL, one JSON line on stdout.
Importing it runs nothing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import sys


def main():
    out = {}
    try:
        import torch
        out["torch"] = torch.__version__
        out["cuda"] = torch.version.cuda
        try:
            v = torch.cuda.nccl.version()
            out["nccl"] = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
        except Exception:  # pylint: disable=broad-except
            out["nccl"] = None      # a CPU build has no NCCL
    except Exception as exc:  # pylint: disable=broad-except
        out["error"] = "cannot import torch: %s" % str(exc).splitlines()[0]
    sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
