"""ansible-runner's events read into results: failure messages, build status, wheels and reports.

:class:`_Collector` is the event handler of every run; it fills each host's :class:`HostResult`
and hands :class:`ProgressEvent` s to the run's ``on_event``.

Progress
--------
Pass ``on_event=callable`` to any run, or iterate ``stream(provision, inventory,
...)``: both deliver :class:`ProgressEvent` objects, in order:

* ``kind="play"``: a play starts (``play``).
* ``kind="task"``: a task starts (``task``, ``role``, ``action``).
* ``kind="host"``: a host finished a task; ``state`` is one of ``ok``,
  ``changed``, ``failed``, ``unreachable``, ``skipped``, ``retry`` (an ``until``
  loop polls again); ``message`` holds the failure or unreachable message.
* ``kind="build"``: a long build reported progress (``build`` holds the status
  dict, see below; ``percent``, ``phase`` are copied onto the event).
* ``kind="stats"``: the play recap (``data`` holds ansible's per-host counters).

Build status contract
---------------------
Long builds write a JSON status file (``build_common.StatusFile``) and the roles
poll it (``async_status`` with ``until``/``retries``, a ``slurp``, or a module that
reads it). Any task result -- ``runner_on_ok``, ``runner_retry`` (each poll of an
``until`` loop), ``runner_on_async_poll``, ``runner_on_failed``, and every item of
a loop -- is scanned for a *build status dict*:

* the value of the result key ``build_status`` or ``status_file`` when it is a dict;
* or, for ``ansible.builtin.slurp`` of a ``*.json`` file, the decoded content.

A build status dict is a JSON object with at least ``phase`` (str, e.g.
``"configure"``, ``"compile"``, ``"wheel"``) and ``state`` (``"running"``,
``"done"``, ``"failed"``), and optionally ``build`` (name of the artifact, e.g.
``"triton"``), ``done`` and ``total`` (work units, e.g. ninja edges), ``percent``
(0-100, computed from done/total when absent), ``elapsed_s`` (seconds since the
build started), ``message`` and ``log`` (path of the build log on the host).
Each one found becomes a ``kind="build"`` event, and the last one per
``(host, build)`` is kept in ``HostResult.builds``.

Results contract for roles
--------------------------
* A task result key ``wheel_sha256`` is collected into ``HostResult.wheels``:
  a dict ``{wheel file name: sha256}`` is merged as is; a string is stored under
  the result's ``wheel`` (or ``path``/``dest``) base name.
* A task result key ``report_path`` (str) or ``report_paths`` (list) is collected
  into ``HostResult.reports``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import json
import os

from .results import Failure, HostResult, ProgressEvent


def _text(value, limit=2000):
    if value is None:
        return None
    if not isinstance(value, str):
        value = json.dumps(value, default=str) if isinstance(value, (dict, list)) else str(value)
    value = value.strip()
    if len(value) > limit:
        value = "..." + value[-limit:]
    return value


def _failure_message(res):
    """A readable one-paragraph message from a failed task result."""
    if not isinstance(res, dict):
        return _text(res) or "task failed"
    msg = res.get("msg") or res.get("message") or res.get("reason")
    items = res.get("results")
    if isinstance(items, list):
        failed = [i for i in items if isinstance(i, dict) and i.get("failed")]
        if failed:
            parts = []
            for item in failed:
                label = item.get("item", item.get("_ansible_item_label"))
                parts.append("%s: %s" % (_text(label, 200), _failure_message(item)))
            msg = "; ".join(parts) if not msg or msg.startswith("One or more items failed") else \
                msg + ": " + "; ".join(parts)
    if not msg:
        msg = "task failed"
    msg = _text(msg)
    if isinstance(res.get("rc"), int) and res.get("rc") != 0:
        tail = _text(res.get("stderr") or res.get("module_stderr") or res.get("stdout")
                     or res.get("module_stdout"), 500)
        if tail and tail not in msg:
            msg = "%s (rc=%s): %s" % (msg, res["rc"], tail)
        elif not tail:
            msg = "%s (rc=%s)" % (msg, res["rc"])
    return msg


def _problem_dicts(items):
    """Preflight problems as ``{"check": ..., "message": ...}`` dicts (strings become messages)."""
    return [dict(item) if isinstance(item, dict) else {"check": None, "message": str(item)} for item in items]


def _iter_results(res):
    """The result itself and every loop item result inside it."""
    if not isinstance(res, dict):
        return
    yield res
    items = res.get("results")
    if isinstance(items, list):
        for item in items:
            if isinstance(item, dict):
                yield item


def _looks_like_status(value):
    return isinstance(value, dict) and "phase" in value and "state" in value


def extract_build_status(res):
    """Build status dicts found in one task result (see the module docstring)."""
    found = []
    for item in _iter_results(res):
        for key in ("build_status", "status_file"):
            value = item.get(key)
            if _looks_like_status(value):
                found.append(dict(value))
        source = item.get("source")
        content = item.get("content")
        if isinstance(content, str) and isinstance(source, str) and source.endswith(".json") \
                and item.get("encoding") == "base64":
            try:
                value = json.loads(base64.b64decode(content).decode("utf-8"))
            except (ValueError, UnicodeDecodeError):
                value = None
            if _looks_like_status(value):
                found.append(value)
    for status in found:
        if status.get("percent") is None and status.get("total"):
            try:
                status["percent"] = round(100.0 * float(status.get("done") or 0) / float(status["total"]), 1)
            except (TypeError, ValueError):
                pass
    return found


def extract_wheels(res):
    wheels = {}
    for item in _iter_results(res):
        value = item.get("wheel_sha256")
        if isinstance(value, dict):
            wheels.update({str(k): str(v) for k, v in value.items()})
        elif isinstance(value, str) and value:
            name = item.get("wheel") or item.get("path") or item.get("dest") or "wheel"
            wheels[os.path.basename(str(name))] = value
    return wheels


def extract_reports(res):
    paths = []
    for item in _iter_results(res):
        single = item.get("report_path")
        if isinstance(single, str) and single:
            paths.append(single)
        many = item.get("report_paths")
        if isinstance(many, list):
            paths.extend(str(p) for p in many if p)
    return paths


class _Collector:
    """Turns ansible-runner events into HostResults and ProgressEvents."""

    def __init__(self, on_event=None):
        self.on_event = on_event
        self.hosts = {}
        self.stats = {}
        self.errors = []
        self.warnings = []
        self.current_task = {}
        self.generations = []

    def host(self, name):
        if name not in self.hosts:
            self.hosts[name] = HostResult(name=name)
        return self.hosts[name]

    def emit(self, event):
        if self.on_event is None:
            return
        try:
            self.on_event(event)
        except Exception as exc:  # a broken display must not break the run
            self.warnings.append("progress callback raised %s: %s" % (type(exc).__name__, exc))

    def __call__(self, raw):
        try:
            self.handle(raw)
        except Exception as exc:  # never let parsing stop ansible-runner
            self.warnings.append("could not parse event %s: %s" % (raw.get("event"), exc))
        return True

    def handle(self, raw):
        kind = raw.get("event")
        data = raw.get("event_data") or {}
        counter = raw.get("counter")
        host = data.get("host")
        task = data.get("task") or data.get("name")
        role = data.get("role") or None
        action = data.get("task_action") or data.get("resolved_action")
        res = data.get("res")

        if kind == "playbook_on_play_start":
            self.emit(ProgressEvent("play", play=data.get("play") or data.get("name"), counter=counter))
        elif kind in ("playbook_on_task_start", "playbook_on_handler_task_start"):
            self.emit(ProgressEvent("task", play=data.get("play"), task=task, role=role, action=action,
                                    counter=counter))
        elif kind in ("runner_on_ok", "runner_on_failed", "runner_on_unreachable", "runner_on_skipped",
                      "runner_retry", "runner_on_async_poll", "runner_on_async_failed",
                      "runner_on_async_ok"):
            if not host:
                return
            result = self.host(host)
            # A failed host leaves the play: any later result means a rescue block caught the failure.
            for failure in result.failures:
                if not failure.unreachable:
                    failure.rescued = True
            if isinstance(res, dict):
                for status in extract_build_status(res):
                    key = str(status.get("build") or task or "build")
                    result.builds[key] = status
                    percent = status.get("percent")
                    self.emit(ProgressEvent("build", host=host, task=task, role=role, action=action,
                                            state=status.get("state"), phase=status.get("phase"),
                                            percent=percent, message=status.get("message"),
                                            build=status, counter=counter))
            if kind == "runner_retry":
                self.emit(ProgressEvent("host", host=host, task=task, role=role, action=action,
                                        state="retry", counter=counter,
                                        message="attempt %s of %s" % (
                                            (res or {}).get("attempts"), (res or {}).get("retries"))))
                return
            if kind == "runner_on_async_poll":
                return
            if kind in ("runner_on_ok", "runner_on_async_ok") and isinstance(res, dict):
                if str(action or "").endswith("fleet_status") and isinstance(res.get("rows"), list):
                    self.generations = res["rows"]
                result.wheels.update(extract_wheels(res))
                for path in extract_reports(res):
                    if path not in result.reports:
                        result.reports.append(path)
                facts = res.get("ansible_facts")
                if isinstance(facts, dict) and isinstance(facts.get("sparkforge_plan"), dict):
                    result.plan = facts["sparkforge_plan"]
                    if isinstance(result.plan.get("problems"), list):
                        result.plan_problems = _problem_dicts(result.plan["problems"])
                elif isinstance(res.get("sparkforge_plan"), dict):
                    result.plan = res["sparkforge_plan"]
                if isinstance(facts, dict) and isinstance(facts.get("sparkforge_problems"), list):
                    result.plan_problems = _problem_dicts(facts["sparkforge_problems"])
                if isinstance(facts, dict) and "sparkforge_ready" in facts:
                    result.ready = bool(facts["sparkforge_ready"])
                state = "changed" if res.get("changed") else "ok"
                self.emit(ProgressEvent("host", host=host, task=task, role=role, action=action,
                                        state=state, counter=counter))
            elif kind in ("runner_on_failed", "runner_on_async_failed"):
                message = _failure_message(res)
                if data.get("ignore_errors"):
                    self.emit(ProgressEvent("host", host=host, task=task, role=role, action=action,
                                            state="ok", message="ignored: " + message, counter=counter))
                    return
                rc = res.get("rc") if isinstance(res, dict) and isinstance(res.get("rc"), int) else None
                stderr = _text(res.get("stderr"), 2000) if isinstance(res, dict) else None
                result.failures.append(Failure(task=task or "", message=message, role=role, action=action,
                                               rc=rc, stderr=stderr or None))
                self.emit(ProgressEvent("host", host=host, task=task, role=role, action=action,
                                        state="failed", message=message, counter=counter))
            elif kind == "runner_on_unreachable":
                message = _failure_message(res) if res else "host unreachable"
                result.unreachable = True
                result.failures.append(Failure(task=task or "", message=message, role=role, action=action,
                                               unreachable=True))
                self.emit(ProgressEvent("host", host=host, task=task, role=role, action=action,
                                        state="unreachable", message=message, counter=counter))
            elif kind == "runner_on_skipped":
                self.emit(ProgressEvent("host", host=host, task=task, role=role, action=action,
                                        state="skipped", counter=counter))
        elif kind == "playbook_on_stats":
            self.stats = {k: data.get(k) or {} for k in
                          ("ok", "changed", "failures", "dark", "skipped", "rescued", "ignored", "processed")}
            self.emit(ProgressEvent("stats", data=self.stats, counter=counter))
        elif kind in ("error", "verbose", "warning", "deprecated"):
            stdout = raw.get("stdout") or ""
            for line in stdout.splitlines():
                clean = line.strip()
                if clean.startswith("ERROR!") or clean.startswith("[ERROR]"):
                    self.errors.append(clean)
                elif clean.startswith("[WARNING]"):
                    self.warnings.append(clean)

    def finish(self):
        """Per-host counters and state from the recap (or from events if none came)."""
        stats = self.stats
        for name in set().union(*(set(v) for v in stats.values())) if stats else ():
            result = self.host(name)
            result.ok = int(stats.get("ok", {}).get(name, 0))
            result.changed = int(stats.get("changed", {}).get(name, 0))
            result.failed = int(stats.get("failures", {}).get(name, 0))
            result.skipped = int(stats.get("skipped", {}).get(name, 0))
            result.rescued = int(stats.get("rescued", {}).get(name, 0))
            result.ignored = int(stats.get("ignored", {}).get(name, 0))
            if stats.get("dark", {}).get(name):
                result.unreachable = True
        for result in self.hosts.values():
            real_failures = [f for f in result.failures if not f.unreachable and not f.rescued]
            if result.unreachable:
                result.state = "unreachable"
            elif result.failed or (not stats and real_failures):
                result.state = "failed"
            elif result.changed:
                result.state = "changed"
            elif result.ok:
                result.state = "ok"
            else:
                result.state = "skipped"
            if not result.failed and real_failures and not stats:
                result.failed = len(real_failures)
            # Failures that a rescue block handled are not the host's failures.
            result.rescued_failures = [f for f in result.failures if f.rescued]
            result.failures = [f for f in result.failures if not f.rescued]
        return self.hosts
