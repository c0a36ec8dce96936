# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixes to a PyTorch source tree: exact-text edits and patch files, each checked before it is applied, and
the record of what was applied (``.sparkforge-applied.json`` in the tree) so a rerun applies nothing twice.

Which fixes a build needs is torch_build.py's (select_fixes, from the release's traps); this file applies
the chosen ones.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import hashlib
import json
import os
import re
import subprocess

from ansible_collections.sparkforge.stack.plugins.module_utils.build.build_common import JobError
from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import (
    atomic_write_text, canonical_json, sha256_file)


class FixError(JobError):
    """A fix or patch does not apply (message names the file and the hunk)."""


def fix_fingerprint(definition):
    return hashlib.sha256(canonical_json(definition).encode("utf-8")).hexdigest()


def _edit_targets(src, pattern):
    if os.path.isabs(pattern) or ".." in pattern.split("/"):
        raise FixError("edit path %r must be relative to the source tree" % pattern)
    matches = sorted(p for p in glob.glob(os.path.join(src, pattern)) if os.path.isfile(p))
    return matches


def check_edit(src, edit, fix_name="edit"):
    """Verify an exact-text edit applies; return [(path, occurrences)]."""
    pattern = edit["files"]
    old, new = edit["old"], edit["new"]
    count = str(edit.get("count", "once"))
    if count not in ("once", "all"):
        raise FixError("%s: count must be 'once' or 'all', got %r" % (fix_name, count))
    targets = _edit_targets(src, pattern)
    if not targets:
        raise FixError("%s: no file matches %s in %s" % (fix_name, pattern, src))
    plan = []
    for path in targets:
        with open(path) as handle:
            text = handle.read()
        found = text.count(old)
        rel = os.path.relpath(path, src)
        if count == "once" and found != 1:
            raise FixError("%s: %s must contain the text %r exactly once, found %d time(s)"
                           % (fix_name, rel, old, found))
        if count == "all" and found < 1:
            state = " (the fixed text is already there: the source is not the expected release)" \
                if new in text else ""
            raise FixError("%s: %s does not contain the text %r%s" % (fix_name, rel, old, state))
        plan.append((path, found))
    return plan


def apply_edit(src, edit, fix_name="edit"):
    """Apply an exact-text edit after checking every target (all or nothing)."""
    plan = check_edit(src, edit, fix_name)
    for path, _found in plan:
        with open(path) as handle:
            text = handle.read()
        # Aside and renamed: a run killed here leaves the old text or the new, never half a file; the
        # source file's mode goes with it (an executable script stays one).
        atomic_write_text(path, text.replace(edit["old"], edit["new"]), os.stat(path).st_mode & 0o7777)
    return [os.path.relpath(p, src) for p, _f in plan]


def _git_apply(src, patch, check_only, reverse=False):
    cmd = ["git", "apply", "--verbose"]
    if check_only:
        cmd.append("--check")
    if reverse:
        cmd.append("--reverse")
    cmd.append(os.path.abspath(patch))
    proc = subprocess.Popen(cmd, cwd=src, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = proc.communicate()[0].decode("utf-8", "replace")
    return proc.returncode, out


def patch_failure_detail(output, patch=None):
    """Name the file and hunk git apply could not place ('patch failed: FILE:LINE')."""
    hunks = {}
    if patch and os.path.isfile(patch):
        current = None
        with open(patch, errors="replace") as handle:
            for line in handle:
                if line.startswith("+++ "):
                    current = line[4:].strip().split("\t")[0]
                    if current.startswith("b/"):
                        current = current[2:]
                match = re.match(r"^(@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@)", line)
                if match and current:
                    hunks[(current, match.group(2))] = match.group(1)
    found = []
    for match in re.finditer(r"patch failed: (.+):(\d+)", output):
        path, line = match.group(1), match.group(2)
        hunk = hunks.get((path, line), "at line %s" % line)
        found.append("file %s, hunk %s" % (path, hunk))
    if found:
        return "; ".join(found)
    lines = [line.strip() for line in output.splitlines() if line.startswith("error:")]
    return "; ".join(lines) or output.strip()


def check_patch(src, patch, name=None):
    if not os.path.isfile(patch):
        raise FixError("patch file %s does not exist" % patch)
    code, out = _git_apply(src, patch, check_only=True)
    if code != 0:
        raise FixError("patch %s does not apply to %s: %s" % (name or patch, src, patch_failure_detail(out, patch)))
    return out


def apply_patch(src, patch, name=None):
    check_patch(src, patch, name)
    code, out = _git_apply(src, patch, check_only=False)
    if code != 0:
        raise FixError("patch %s failed to apply: %s" % (name or patch, patch_failure_detail(out, patch)))
    return out


MARKER = ".sparkforge-applied.json"


def read_applied(src):
    try:
        with open(os.path.join(src, MARKER)) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError):
        return {}


def _write_applied(src, applied):
    # A half-written marker would read as "nothing applied" and the next run would apply the fixes twice.
    atomic_write_text(os.path.join(src, MARKER), json.dumps(applied, indent=1, sort_keys=True))


def apply_all(src, fix_names, fixes, user_patches, check_only=False):
    """Apply the named fixes then the user's patch files, each once.

    The marker file in the source root remembers what is applied (with a
    fingerprint), so a resumed build does not apply anything twice.  Returns a
    list of {'name', 'kind', 'state': 'applied'|'already'|'would apply', 'files'}.
    """
    applied = read_applied(src)
    report = []
    for name in fix_names:
        definition = fixes[name]
        key = "fix:" + name
        fingerprint = fix_fingerprint(definition)
        if applied.get(key) == fingerprint:
            report.append({"name": name, "kind": "fix", "state": "already", "files": []})
            continue
        if key in applied:
            raise FixError("fix %s was applied to %s in another form; start from a clean source tree "
                           "(remove it or use force with a fresh build_dir)" % (name, src))
        files = []
        for edit in definition.get("edits") or []:
            plan = check_edit(src, edit, name)
            files.extend(os.path.relpath(p, src) for p, _f in plan)
        for patch in definition.get("patches") or []:
            check_patch(src, patch, "%s (%s)" % (name, patch))
        if not check_only:
            for edit in definition.get("edits") or []:
                apply_edit(src, edit, name)
            for patch in definition.get("patches") or []:
                apply_patch(src, patch, "%s (%s)" % (name, patch))
            applied[key] = fingerprint
            _write_applied(src, applied)
        report.append({"name": name, "kind": "fix", "state": "would apply" if check_only else "applied",
                       "files": files})
    for patch in user_patches or []:
        key = "patch:" + os.path.basename(patch)
        digest = sha256_file(patch) if os.path.isfile(patch) else None
        if digest and applied.get(key) == digest:
            report.append({"name": patch, "kind": "patch", "state": "already", "files": []})
            continue
        check_patch(src, patch)
        if not check_only:
            apply_patch(src, patch)
            applied[key] = digest
            _write_applied(src, applied)
        report.append({"name": patch, "kind": "patch", "state": "would apply" if check_only else "applied",
                       "files": []})
    return report
