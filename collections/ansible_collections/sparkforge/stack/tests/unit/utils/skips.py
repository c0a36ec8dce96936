# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A skip that hides a missing proof: in a run where every test must run (``SPARKFORGE_SKIPS_FAIL=1``, which
the full ``scripts/test`` sets on the project's machines: nvcc, a C compiler, cargo, podman and the images are
all there), a skipped test is reported as failed, with its reason. Elsewhere (a laptop, the quick lane) a skip
stays a skip and pytest's ``-ra`` summary lists it with its reason."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

ENV = "SPARKFORGE_SKIPS_FAIL"


def skips_fail():
    return os.environ.get(ENV) == "1"


def skip_as_failure(report):
    """Turn a skipped report into a failed one naming the skip's reason (xfail is left alone)."""
    if not (report.skipped and skips_fail()) or hasattr(report, "wasxfail"):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    report.outcome = "failed"
    report.longrepr = ("skipped in a run where every test must run (%s=1): %s. Install what it needs "
                       "(scripts/setup test) or fix the condition; a skip here hides a proof." % (ENV, reason))
