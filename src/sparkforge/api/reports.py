"""Reading ``reports/<run>/`` back: the runs there, and one run's files by host."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import yaml

from .project import project_root
from .results import Report


def list_runs(reports_dir=None, project_dir=None):
    """Run ids under the reports directory, oldest first (ids sort by time)."""
    base = reports_dir or os.path.join(project_root(project_dir), "reports")
    if not os.path.isdir(base):
        return []
    return sorted(d for d in os.listdir(base) if os.path.isdir(os.path.join(base, d)) and not d.startswith("."))


def _read_report_file(path):
    lower = path.lower()
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        return {"path": path, "error": str(exc)}
    try:
        if lower.endswith(".json"):
            return json.loads(text)
        if lower.endswith((".yml", ".yaml")):
            return yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        return {"path": path, "error": "unparsable: %s" % exc}
    return text


def report(run=None, reports_dir=None, project_dir=None):
    """Read ``reports/<run>/`` (the newest run when ``run`` is None).

    ``files`` maps each file's path relative to the run directory to its parsed
    content (JSON/YAML) or text. ``hosts`` maps a host name to its data for the
    layouts ``<host>.json|yml`` and ``<host>/<file>`` (a dict of files), and for
    a ``summary.json|yml`` holding a ``hosts`` mapping.
    """
    base = reports_dir or os.path.join(project_root(project_dir), "reports")
    runs = list_runs(base)
    if run is None:
        if not runs:
            return Report(run=None, path=None, runs=[], error="no reports under %s" % base)
        run = runs[-1]
    # A run id is the name of one directory under the reports directory, never a path out of it.
    if not isinstance(run, str) or not run or run in (".", "..") or "/" in run or os.sep in run \
            or run.startswith("."):
        return Report(run=None, path=None, runs=runs,
                      error="run %r is not a run id under %s (runs: %s)"
                            % (run, base, ", ".join(runs[-5:]) if runs else "none"))
    path = os.path.join(base, run)
    if run not in runs:
        return Report(run=run, path=path, runs=runs, error="no report directory %s" % path)
    # A run directory that is a link out of the reports directory is not followed.
    if not os.path.realpath(path).startswith(os.path.realpath(base) + os.sep):
        return Report(run=None, path=None, runs=runs, error="run %r leads out of %s" % (run, base))
    rep = Report(run=run, path=path, runs=runs)
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames.sort()
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, path)
            rep.files[rel] = _read_report_file(full)
    for rel, content in rep.files.items():
        parts = rel.split(os.sep)
        stem, ext = os.path.splitext(parts[-1])
        if len(parts) == 1 and stem in ("summary", "index") and isinstance(content, dict) \
                and isinstance(content.get("hosts"), dict):
            for host, data in content["hosts"].items():
                rep.hosts.setdefault(host, data)
        elif len(parts) == 1 and ext in (".json", ".yml", ".yaml") and stem not in ("summary", "index"):
            rep.hosts[stem] = content
        elif len(parts) == 2:
            entry = rep.hosts.setdefault(parts[0], {})
            if isinstance(entry, dict):
                entry[parts[1]] = content
    return rep
