"""Python API over the sparkforge playbooks, driven through ansible-runner.

Four entry points, each returning a :class:`RunResult` (or a :class:`Report`):

``plan(inventory, ...)``
    Runs ``playbooks/spark.yml`` in check mode with the ``preflight`` tag and the
    extra variable ``sparkforge_plan_only: true``: the preflight role inspects each
    host, publishes the fact ``sparkforge_plan`` (``set_fact``) and fails the host
    when it cannot be provisioned. Each :class:`HostResult` carries ``plan`` (the
    published fact), ``plan_problems`` (the ``sparkforge_problems`` fact: dicts
    with ``check`` and ``message``), ``ready`` (the ``sparkforge_ready`` fact) and
    ``problems`` (those messages plus any other failed task, as strings).
``provision(inventory, ...)``
    Runs the whole playbook (or ``tags``), optionally in check mode.
``verify(inventory, ...)``
    Runs the playbook with the ``verify`` tag only.
``report(run=None, ...)``
    Reads ``reports/<run>/`` (the newest run when none is named).

Every run gets the extra variables ``sparkforge_run_id`` (a sortable id, also the
name of its ``reports/<run>/`` directory) and ``sparkforge_reports_dir``.

Errors are results, not exceptions: a missing inventory or playbook, a playbook
that does not parse, a host that cannot be reached or a task that fails all come
back inside the :class:`RunResult` (``status``, ``error``, per-host ``state`` and
``failures``). Only programming errors (bad argument types) raise.

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
import datetime
import json
import os
import queue
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional

import yaml

#: Repository root when running from a source checkout (src/sparkforge/api.py).
_SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

HOST_STATES = ("ok", "changed", "failed", "unreachable", "skipped")

#: Exit codes used by the CLI, derived from a RunResult (see RunResult.exit_code).
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_FAILED = 2
EXIT_UNREACHABLE = 3
EXIT_USAGE = 4


def project_root(explicit=None):
    """Where ansible.cfg, playbooks/ and reports/ live.

    ``explicit`` wins, then ``$SPARKFORGE_HOME``, then the source checkout this
    module belongs to, then the current directory.
    """
    for candidate in (explicit, os.environ.get("SPARKFORGE_HOME")):
        if candidate:
            return os.path.abspath(candidate)
    if os.path.isfile(os.path.join(_SOURCE_ROOT, "ansible.cfg")):
        return _SOURCE_ROOT
    return os.getcwd()


# --------------------------------------------------------------------------- results


@dataclass
class Failure:
    """One failed task on one host (or the reason a host was unreachable)."""

    task: str
    message: str
    role: Optional[str] = None
    action: Optional[str] = None
    rc: Optional[int] = None
    stderr: Optional[str] = None
    unreachable: bool = False
    rescued: bool = False  # a rescue block handled it and the host went on


@dataclass
class HostResult:
    """What happened on one host."""

    name: str
    state: str = "skipped"
    ok: int = 0
    changed: int = 0
    failed: int = 0
    skipped: int = 0
    rescued: int = 0
    ignored: int = 0
    unreachable: bool = False
    failures: List[Failure] = field(default_factory=list)
    rescued_failures: List[Failure] = field(default_factory=list)
    reports: List[str] = field(default_factory=list)
    wheels: Dict[str, str] = field(default_factory=dict)
    builds: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    plan: Optional[Dict[str, Any]] = None
    plan_problems: List[Dict[str, Any]] = field(default_factory=list)
    ready: Optional[bool] = None

    @property
    def message(self):
        """The first failure message (or unreachable reason), '' when none."""
        return self.failures[0].message if self.failures else ""

    @property
    def problems(self):
        """Everything that stops this host, as strings: the plan's problems, then failures.

        A failure whose message already quotes every plan problem (the preflight's
        "Preflight found N problem(s)" summary) is not repeated.
        """
        found = [p.get("message") or json.dumps(p, sort_keys=True) for p in self.plan_problems]
        for failure in self.failures:
            if found and all(text in failure.message for text in found):
                continue
            text = "%s: %s" % (failure.task, failure.message) if failure.task else failure.message
            if text not in found:
                found.append(text)
        return found

    def to_dict(self):
        data = asdict(self)
        data["problems"] = self.problems
        return data


@dataclass
class RunResult:
    """One ansible-runner run (or the reason it could not start)."""

    action: str
    status: str  # successful | failed | error | canceled | timeout
    rc: int
    hosts: Dict[str, HostResult] = field(default_factory=dict)
    duration_s: float = 0.0
    error: Optional[str] = None
    error_kind: Optional[str] = None  # usage | runner, when status == "error"
    run_id: Optional[str] = None
    playbook: Optional[str] = None
    inventory: Any = None
    limit: Optional[str] = None
    check: bool = False
    tags: Optional[List[str]] = None
    artifacts_dir: Optional[str] = None
    warnings: List[str] = field(default_factory=list)
    stats: Dict[str, Any] = field(default_factory=dict)
    # status and rollback: one row per host, what it runs against the controller's generations.
    generations: List[Dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self):
        """True when the run finished and no host failed or was unreachable."""
        return self.status == "successful" and self.error is None and not self.failed_hosts \
            and not self.unreachable_hosts

    @property
    def failed_hosts(self):
        return sorted(h for h, r in self.hosts.items() if r.state == "failed")

    @property
    def unreachable_hosts(self):
        return sorted(h for h, r in self.hosts.items() if r.state == "unreachable")

    def exit_code(self):
        """0 ok, 2 a host failed, 3 a host was unreachable (wins over 2),
        4 usage/inventory/playbook error, 1 any other error."""
        if self.status == "error":
            return EXIT_USAGE if self.error_kind == "usage" else EXIT_ERROR
        if self.unreachable_hosts:
            return EXIT_UNREACHABLE
        if self.failed_hosts:
            return EXIT_FAILED
        if self.status != "successful" or self.rc != 0:
            return EXIT_ERROR
        return EXIT_OK

    def to_dict(self):
        data = {k: v for k, v in asdict(self).items() if k != "hosts"}
        data["hosts"] = {name: host.to_dict() for name, host in sorted(self.hosts.items())}
        data["ok"] = self.ok
        data["exit_code"] = self.exit_code()
        return data

    def summary(self):
        """``{host: state}``, sorted by host."""
        return {name: self.hosts[name].state for name in sorted(self.hosts)}


@dataclass
class ProgressEvent:
    """A progress event (see the module docstring for the kinds)."""

    kind: str
    host: Optional[str] = None
    play: Optional[str] = None
    task: Optional[str] = None
    role: Optional[str] = None
    action: Optional[str] = None
    state: Optional[str] = None
    message: Optional[str] = None
    build: Optional[Dict[str, Any]] = None
    phase: Optional[str] = None
    percent: Optional[float] = None
    data: Optional[Dict[str, Any]] = None
    counter: Optional[int] = None
    time: float = field(default_factory=time.time)


@dataclass
class Report:
    """The files of one ``reports/<run>/`` directory."""

    run: Optional[str]
    path: Optional[str]
    runs: List[str] = field(default_factory=list)
    files: Dict[str, Any] = field(default_factory=dict)
    hosts: Dict[str, Any] = field(default_factory=dict)
    error: Optional[str] = None

    def to_dict(self):
        return asdict(self)


# ------------------------------------------------------------------- event parsing


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


# ---------------------------------------------------------------------- running


def _run_id():
    """Sortable and unique enough for one controller: local time to the microsecond."""
    return datetime.datetime.now().strftime("%Y%m%dT%H%M%S-%f")


def _load_extravars_file(path):
    with open(path) as handle:
        data = yaml.safe_load(handle)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError("%s does not hold a mapping of variables" % path)
    return data


def parse_extravars(items):
    """Merge ``-e`` style values: ``key=value``, ``@file.yml``/``@file.json``, or a JSON/YAML mapping.

    Raises ValueError with a readable message on a bad item.
    """
    merged = {}
    for item in items or []:
        if isinstance(item, dict):
            merged.update(item)
            continue
        text = str(item).strip()
        if not text:
            continue
        if text.startswith("@"):
            path = os.path.expanduser(text[1:])
            if not os.path.isfile(path):
                raise ValueError("extra-vars file not found: %s" % path)
            merged.update(_load_extravars_file(path))
        elif text.startswith("{"):
            try:
                value = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise ValueError("extra-vars %r is not valid JSON/YAML: %s" % (text, exc))
            if not isinstance(value, dict):
                raise ValueError("extra-vars %r is not a mapping" % text)
            merged.update(value)
        else:
            # ansible-playbook's own key=value splitter: quotes and {{ jinja }} with spaces work.
            from ansible.parsing.splitter import parse_kv

            try:
                pairs = parse_kv(text)
            except Exception as exc:  # ansible raises its own error types for bad quoting
                raise ValueError("extra-vars %r: %s" % (text, exc))
            if "_raw_params" in pairs:
                raise ValueError("extra-vars %r: expected key=value, @file or a JSON mapping"
                                 % pairs["_raw_params"])
            merged.update(pairs)
    return merged


def _error_result(action, message, kind="usage", **fields):
    return RunResult(action=action, status="error", rc=-1, error=message, error_kind=kind, **fields)


def _resolve_inventory(inventory, workdir):
    """Absolute inventory path(s), or an error message.

    Accepts a path (file or directory), a list of paths, or an ansible host list
    string such as ``"spark1,spark2,"`` (written to an inventory file in ``workdir``).
    """
    if inventory is None:
        return None, "no inventory given (pass -i/--inventory with an inventory file)"
    items = list(inventory) if isinstance(inventory, (list, tuple)) else [inventory]
    resolved = []
    for item in items:
        item = os.path.expanduser(str(item))
        if os.path.exists(item):
            resolved.append(os.path.abspath(item))
        elif "," in item and "/" not in item:
            path = os.path.join(workdir, "inventory-hosts.ini")
            with open(path, "w") as handle:
                for name in item.split(","):
                    if name.strip():
                        handle.write(name.strip() + "\n")
            resolved.append(path)
        else:
            return None, "inventory not found: %s (give an inventory file, a directory or 'host1,host2,')" % item
    return (resolved[0] if len(resolved) == 1 else resolved), None


def _playbook_error(lines, stdout_text):
    found = list(lines)
    if not found and stdout_text:
        tail = [ln.strip() for ln in stdout_text.splitlines() if ln.strip()]
        for index, line in enumerate(tail):
            if line.startswith("ERROR!") or line.startswith("[ERROR]"):
                found.append(" ".join(tail[index:index + 4]))
                break
        if not found and tail:
            found.append(" ".join(tail[-4:]))
    return "; ".join(found) if found else None


# ----------------------------------------------------------------------- processes of a run

# Every run's processes carry this variable in their environment, with a value of its own: ansible-runner
# kills ansible-playbook's process group on cancel and timeout, but Ansible's worker processes leave that
# group (os.setsid) and async tasks daemonize, so they would run on (a canceled build, for hours). The
# token finds them all, on this machine, even after they were reparented.
RUN_TOKEN_VAR = "SPARKFORGE_RUN_TOKEN"
_ACTIVE_TOKENS = set()
_ACTIVE_LOCK = threading.Lock()


def run_processes(token):
    """Pids of the processes on this machine whose environment carries RUN_TOKEN_VAR=token (this
    process excluded; zombies too: they hold nothing)."""
    needle = ("%s=%s" % (RUN_TOKEN_VAR, token)).encode()
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:  # no /proc: only ansible-runner's own kill of the process group applies
        return found
    me = os.getpid()
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open("/proc/%s/environ" % name, "rb") as handle:
                if needle not in handle.read().split(b"\0"):
                    continue
            with open("/proc/%s/stat" % name) as handle:
                if handle.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
        except OSError:
            continue
        found.append(int(name))
    return found


def end_run_processes(token, grace=5.0):
    """End every process of the run ``token``: SIGTERM to each one's process group (its own pid when it
    shares ours), SIGKILL to what is left after ``grace`` seconds.  Returns the pids that were alive."""
    import signal

    pids = run_processes(token)
    if not pids:
        return []
    own_group = os.getpgrp()

    def send(sig, pid):
        try:
            group = os.getpgid(pid)
            if group != own_group:
                os.killpg(group, sig)
            else:
                os.kill(pid, sig)
        except OSError:
            pass

    for pid in pids:
        send(signal.SIGTERM, pid)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and run_processes(token):
        time.sleep(0.1)
    for pid in run_processes(token):
        send(signal.SIGKILL, pid)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and run_processes(token):
        time.sleep(0.1)
    return pids


def _end_active_runs():
    """At interpreter exit: end the processes of runs still in flight (a stream nobody finished)."""
    with _ACTIVE_LOCK:
        tokens = list(_ACTIVE_TOKENS)
    for token in tokens:
        end_run_processes(token, grace=2.0)


import atexit  # noqa: E402  (next to the registry it serves)

atexit.register(_end_active_runs)


def run_playbook(action, inventory, playbook=None, limit=None, extravars=None, check=False, diff=False,
                 tags=None, skip_tags=None, on_event=None, project_dir=None, verbosity=0, timeout=None,
                 forks=None, keep_artifacts=False, artifacts_dir=None, envvars=None, cancel_callback=None,
                 run_id=None):
    """Run one playbook through ansible_runner.run; never raises for run-time problems.

    ``playbook`` is a path (absolute, or relative to the project root); the run's
    working directory is the playbook's directory so that a ``library/`` or
    ``roles/`` next to it is found. ``keep_artifacts`` keeps ansible-runner's
    private data dir (events, stdout) and reports it in ``artifacts_dir``.
    """
    started = time.monotonic()
    root = project_root(project_dir)
    playbook = playbook or os.path.join(root, "playbooks", "spark.yml")
    if not os.path.isabs(playbook):
        # Relative to the current directory when it is there, else to the project.
        playbook = os.path.abspath(playbook) if os.path.isfile(playbook) else os.path.join(root, playbook)
    tags = [tags] if isinstance(tags, str) else (list(tags) if tags else None)
    skip_tags = [skip_tags] if isinstance(skip_tags, str) else (list(skip_tags) if skip_tags else None)
    run_id = run_id or _run_id()
    common = dict(run_id=run_id, playbook=playbook, inventory=inventory, limit=limit, check=check, tags=tags)
    try:
        extra = parse_extravars([extravars] if isinstance(extravars, (dict, str)) else extravars)
    except (ValueError, OSError, yaml.YAMLError) as exc:
        return _error_result(action, str(exc), **common)
    if artifacts_dir:
        os.makedirs(artifacts_dir, exist_ok=True)
        workdir = tempfile.mkdtemp(prefix="run-%s-" % run_id, dir=artifacts_dir)
    else:
        workdir = tempfile.mkdtemp(prefix="sparkforge-runner-")
    keep = keep_artifacts or bool(artifacts_dir)
    try:
        inv, problem = _resolve_inventory(inventory, workdir)
        if problem:
            return _error_result(action, problem, **common)
        common["inventory"] = inv
        if not os.path.isfile(playbook):
            return _error_result(action, "playbook not found: %s (run from the sparkforge checkout, or set "
                                         "SPARKFORGE_HOME / --project-dir to it)" % playbook, **common)
        extra.setdefault("sparkforge_run_id", run_id)
        extra.setdefault("sparkforge_reports_dir", os.path.join(root, "reports"))

        env = {
            "ANSIBLE_CONFIG": os.path.join(root, "ansible.cfg"),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
            "ANSIBLE_RETRY_FILES_ENABLED": "0",
            # An inventory that does not parse is an error naming it, with or without the project's ansible.cfg.
            "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "1",
        }
        bindir = os.path.dirname(sys.executable)
        if os.path.exists(os.path.join(bindir, "ansible-playbook")):
            env["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
        if envvars:
            env.update({str(k): str(v) for k, v in envvars.items()})
        token = "%s-%d-%s" % (run_id, os.getpid(), base64.b32encode(os.urandom(5)).decode().lower())
        env[RUN_TOKEN_VAR] = token
        if not os.path.isfile(env["ANSIBLE_CONFIG"]):
            # No ansible.cfg (an installed package run elsewhere): still find the collection.
            del env["ANSIBLE_CONFIG"]
            if os.path.isdir(os.path.join(root, "collections")) and "ANSIBLE_COLLECTIONS_PATH" not in env:
                env["ANSIBLE_COLLECTIONS_PATH"] = os.pathsep.join(
                    [os.path.join(root, "collections")] +
                    [p for p in [os.environ.get("ANSIBLE_COLLECTIONS_PATH")] if p])
        if shutil.which("ansible-playbook", path=env.get("PATH", os.environ.get("PATH"))) is None:
            return _error_result(action, "ansible-playbook not found on PATH (install ansible-core)",
                                 kind="runner", **common)

        cmdline = []
        if check:
            cmdline.append("--check")
        if diff:
            cmdline.append("--diff")
        if forks:
            cmdline.extend(["--forks", str(int(forks))])

        collector = _Collector(on_event)
        kwargs = dict(
            private_data_dir=workdir,
            project_dir=os.path.dirname(playbook),
            playbook=os.path.basename(playbook),
            inventory=inv,
            extravars=extra,
            envvars=env,
            quiet=True,
            event_handler=collector,
            ident="run",
            verbosity=verbosity or None,
            rotate_artifacts=1,
        )
        if limit:
            kwargs["limit"] = limit
        if tags:
            kwargs["tags"] = ",".join(tags)
        if skip_tags:
            kwargs["skip_tags"] = ",".join(skip_tags)
        if cmdline:
            kwargs["cmdline"] = " ".join(cmdline)
        if timeout:
            kwargs["timeout"] = int(timeout)
        if cancel_callback is not None:
            kwargs["cancel_callback"] = cancel_callback

        import ansible_runner  # imported late: `sparkforge report` works without it

        with _ACTIVE_LOCK:
            _ACTIVE_TOKENS.add(token)
        try:
            try:
                runner = ansible_runner.run(**kwargs)
            except Exception as exc:  # ansible-runner refused to start, or a callback raised
                end_run_processes(token)
                return _error_result(action, "ansible-runner failed to start: %s" % exc, kind="runner",
                                     duration_s=round(time.monotonic() - started, 2), **common)
            if runner.status in ("canceled", "timeout"):
                # ansible-runner killed ansible-playbook's group; its workers and async jobs are not in it.
                end_run_processes(token)
        finally:
            with _ACTIVE_LOCK:
                _ACTIVE_TOKENS.discard(token)
        hosts = collector.finish()
        stdout_text = ""
        try:
            handle = runner.stdout
            try:
                stdout_text = handle.read()
            finally:
                handle.close()
        except (OSError, ValueError, AttributeError):
            pass
        result = RunResult(action=action, status=runner.status, rc=runner.rc if runner.rc is not None else -1,
                           hosts=hosts, duration_s=round(time.monotonic() - started, 2),
                           warnings=collector.warnings, stats=collector.stats, generations=collector.generations,
                           artifacts_dir=workdir if keep else None, **common)
        if runner.status in ("canceled", "timeout"):
            result.error = "run %s after %.0fs" % (runner.status, result.duration_s)
        elif runner.rc != 0 and not collector.stats:
            # ansible-playbook stopped before the recap: a parse/inventory/usage problem.
            result.status = "error"
            result.error_kind = "usage"
            result.error = _playbook_error(collector.errors, stdout_text) or \
                "ansible-playbook exited with rc=%s" % runner.rc
        elif not collector.stats.get("processed") and not hosts:
            result.warnings.append("no task ran on any host (limit %s, tags %s)" % (limit, ",".join(tags or [])))
        return result
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)


def plan(inventory, limit=None, extravars=None, playbook=None, tags=("preflight",), on_event=None, **kwargs):
    """Preflight only, in check mode: each host's ``sparkforge_plan`` fact and problems."""
    try:
        extra = parse_extravars([extravars] if isinstance(extravars, (dict, str)) else extravars)
    except (ValueError, OSError, yaml.YAMLError) as exc:
        return _error_result("plan", str(exc), inventory=inventory, limit=limit, check=True)
    extra.setdefault("sparkforge_plan_only", True)
    kwargs.pop("check", None)
    return run_playbook("plan", inventory, playbook=playbook, limit=limit, extravars=extra, check=True,
                        tags=tags, on_event=on_event, **kwargs)


def provision(inventory, limit=None, extravars=None, check=False, tags=None, on_event=None, playbook=None,
              **kwargs):
    """Run the whole playbook (or only ``tags``)."""
    return run_playbook("provision", inventory, playbook=playbook, limit=limit, extravars=extravars,
                        check=check, tags=tags, on_event=on_event, **kwargs)


def verify(inventory, limit=None, extravars=None, on_event=None, playbook=None, tags=("verify",), **kwargs):
    """Run the verify part of the playbook (tag ``verify``)."""
    return run_playbook("verify", inventory, playbook=playbook, limit=limit, extravars=extravars,
                        tags=tags, on_event=on_event, **kwargs)


def status(inventory, limit=None, extravars=None, on_event=None, playbook=None, **kwargs):
    """What every host runs, read from the hosts (their generation record and venv), against the
    controller's generations: ``RunResult.generations`` has a row per host with its verdict."""
    kwargs.pop("check", None)
    return run_playbook("status", inventory, playbook=playbook or os.path.join("playbooks", "status.yml"),
                        limit=limit, extravars=extravars, on_event=on_event, **kwargs)


def rollback(inventory, to=None, limit=None, extravars=None, on_event=None, playbook=None, **kwargs):
    """Put hosts back on generation ``to`` of their class (default: each host's previous one).  Every
    target is checked before any host changes; ``RunResult.generations`` is the status after."""
    try:
        extra = parse_extravars([extravars] if isinstance(extravars, (dict, str)) else extravars)
    except (ValueError, OSError, yaml.YAMLError) as exc:
        return _error_result("rollback", str(exc), inventory=inventory, limit=limit)
    if to is not None:
        if not str(to).isdigit() or int(to) < 1:
            return _error_result("rollback", "--to takes a generation number (1, 2, ...), got %r" % (to,),
                                 inventory=inventory, limit=limit)
        extra["sparkforge_rollback_to"] = int(to)
    kwargs.pop("check", None)
    return run_playbook("rollback", inventory, playbook=playbook or os.path.join("playbooks", "rollback.yml"),
                        limit=limit, extravars=extra, on_event=on_event, **kwargs)


def bundle(inventory, out=None, limit=None, extravars=None, on_event=None, playbook=None, **kwargs):
    """Make an offline bundle in ``out`` (a directory on this machine) of everything the inventory's
    plans fetch: playbooks/bundle.yml, each host planned with probing off, then the controller fetches.
    Use it on the air-gapped side with ``sparkforge_bundle: <out>``."""
    try:
        extra = parse_extravars([extravars] if isinstance(extravars, (dict, str)) else extravars)
    except (ValueError, OSError, yaml.YAMLError) as exc:
        return _error_result("bundle", str(exc), inventory=inventory, limit=limit)
    if not out:
        return _error_result("bundle", "--out DIR is required: where the bundle is written", inventory=inventory,
                             limit=limit)
    problem = _out_dir_problem(out, kwargs.get("project_dir"))
    if problem:
        return _error_result("bundle", problem, inventory=inventory, limit=limit)
    out = os.path.abspath(out)
    extra["sparkforge_bundle_out"] = out
    kwargs.pop("check", None)
    return run_playbook("bundle", inventory, playbook=playbook or os.path.join("playbooks", "bundle.yml"),
                        limit=limit, extravars=extra, on_event=on_event, **kwargs)


def _out_dir_problem(out, project_dir=None):
    """Why ``out`` cannot be the bundle directory, or None: it (or a parent) is not a directory, or the
    path rules of the collection's validate module refuse it (a system directory, inside the checkout)."""
    path = os.path.abspath(out)
    if os.path.exists(path) and not os.path.isdir(path):
        return "--out %s exists and is not a directory" % path
    parent = os.path.dirname(path)
    while parent and not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if parent and not os.path.isdir(parent):
        return "--out %s: %s is a regular file, not a directory: give a directory path" % (out, parent)
    root = project_root(project_dir)
    validate = _collection_validate(root)
    if validate is not None:
        collection = os.path.join(root, "collections", "ansible_collections", "sparkforge", "stack")
        try:
            validate.check_one("sparkforge_bundle_out", path, {"type": "path"}, validate.protected_dirs(collection))
        except validate.Invalid as exc:
            return "--out %s: %s" % (out, exc)
    return None


def _collection_validate(root):
    """The collection's module_utils/validate (the project's copy), or None where it cannot be imported."""
    collections = os.path.join(root, "collections")
    if os.path.isdir(collections) and collections not in sys.path:
        sys.path.insert(0, collections)
    try:
        from ansible_collections.sparkforge.stack.plugins.module_utils import validate
    except ImportError:
        return None
    return validate


class RunStream:
    """Iterate the ProgressEvents of a run while it happens; ``result`` holds the RunResult after.

    ``for event in stream(provision, "inventory.yml"): ...`` -- the run happens
    in a worker thread; ``cancel()`` asks ansible-runner to stop it.
    """

    _DONE = object()

    def __init__(self, func, *args, **kwargs):
        self._func = func
        self._args = args
        self._kwargs = kwargs
        self._queue = queue.Queue()
        self._cancel = threading.Event()
        self._thread = None
        self.result = None
        self.exception = None

    def cancel(self):
        self._cancel.set()

    def _work(self):
        try:
            self.result = self._func(*self._args, on_event=self._queue.put,
                                     cancel_callback=self._cancel.is_set, **self._kwargs)
        except BaseException as exc:  # handed to the iterating thread
            self.exception = exc
        finally:
            self._queue.put(self._DONE)

    def __iter__(self):
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="sparkforge-run", daemon=True)
            self._thread.start()
        while True:
            item = self._queue.get()
            if item is self._DONE:
                break
            yield item
        self._thread.join()
        if self.exception is not None:
            raise self.exception


def stream(func, *args, **kwargs):
    """A RunStream over ``func`` (plan, provision or verify) called with these arguments."""
    return RunStream(func, *args, **kwargs)


# ----------------------------------------------------------------------- reports


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
