"""What a run returns: :class:`RunResult` with a :class:`HostResult` per host (their :class:`Failure` s),
the :class:`ProgressEvent` s delivered while it runs, a :class:`Report` read back, and the CLI's exit codes."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional

HOST_STATES = ("ok", "changed", "failed", "unreachable", "skipped")

#: Exit codes used by the CLI, derived from a RunResult (see RunResult.exit_code).
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_FAILED = 2
EXIT_UNREACHABLE = 3
EXIT_USAGE = 4


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
    """A progress event (the kinds are listed in :mod:`sparkforge.api.events`)."""

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
