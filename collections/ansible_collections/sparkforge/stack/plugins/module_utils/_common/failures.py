# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A failed command's reason, as one message: what failed, its exit status and the tool's last lines.

Ansible's command module fails with "non-zero return code" and leaves the reason (pip's "No matching
distribution", apt's "Unable to locate package", cmake's or nvcc's error) in the result's stderr.
The roles and the fleet summary put the tail of that output into the failure message instead.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

TAIL_LINES = 8
TAIL_CHARS = 1500
GENERIC = ("non-zero return code", "")


def output_tail(result, lines=TAIL_LINES, chars=TAIL_CHARS):
    """The last ``lines`` non-blank lines of a command result's stderr (stdout when stderr is empty),
    at most ``chars`` characters, joined with " | "."""
    if not isinstance(result, dict):
        return ""
    for key in ("stderr", "stdout"):
        text = result.get(key)
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        if not text or not isinstance(text, str) or not text.strip():
            continue
        kept = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
        joined = " | ".join(kept)
        if len(joined) > chars:
            joined = "..." + joined[-chars:]
        return joined
    return ""


def command_failure(result, what=""):
    """One line for a failed command result: "<what>: exit <rc>: <tool's last lines>".

    A result whose message already says more than the command module's "non-zero return code"
    keeps that message; the tail is added when it is not already in it.
    """
    result = result if isinstance(result, dict) else {}
    parts = []
    if what:
        parts.append(str(what))
    msg = str(result.get("msg") or "").strip()
    rc = result.get("rc")
    if msg and msg not in GENERIC:
        parts.append(msg)
    elif rc is not None:
        parts.append("exit %s" % rc)
    tail = output_tail(result)
    if tail and tail not in msg:
        parts.append(tail)
    return ": ".join(parts) if parts else "failed"
