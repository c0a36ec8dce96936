"""Python API over the sparkforge playbooks, driven through ansible-runner.

The entry points, each returning a :class:`RunResult` (``report`` a :class:`Report`):

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
``status(inventory, ...)``, ``rollback(inventory, to=None, ...)``, ``bundle(inventory, out=..., ...)``
    A fleet's generations, a return to one, an offline bundle (``playbooks/status.yml``,
    ``rollback.yml``, ``bundle.yml``).
``run_playbook(action, inventory, playbook=..., ...)``
    Any playbook, with the same results (the CLI's ``cluster``).
``report(run=None, ...)``
    Reads ``reports/<run>/`` (the newest run when none is named).

Every run gets the extra variables ``sparkforge_run_id`` (a sortable id, also the
name of its ``reports/<run>/`` directory) and ``sparkforge_reports_dir``.

Errors are results, not exceptions: a missing inventory or playbook, a playbook
that does not parse, a host that cannot be reached or a task that fails all come
back inside the :class:`RunResult` (``status``, ``error``, per-host ``state`` and
``failures``). Only programming errors (bad argument types) raise.

Progress: pass ``on_event=callable`` to any run, or iterate ``stream(provision, inventory, ...)``;
the event kinds, the build status contract and the results contract for roles are in
:mod:`sparkforge.api.events`.

Modules (import from ``sparkforge.api``; the names below are its public API, ``__all__``):

``results``    RunResult, HostResult, Failure, ProgressEvent, Report, HOST_STATES, EXIT_* codes
``events``     extract_build_status, extract_wheels, extract_reports (and the runs' event handler)
``runs``       run_playbook, parse_extravars, RunStream, stream
``actions``    plan, provision, verify, status, rollback, bundle
``processes``  RUN_TOKEN_VAR, run_processes, end_run_processes (a run's processes, ended at cancel and exit)
``reports``    report, list_runs
``project``    project_root
``environment`` run_environment, argv_problems, PROTECTIONS, RUN_DIR_VAR, UTF8_LOCALE (the run's environment
               and command line, for the CLI and scripts/spark)
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from .actions import bundle, plan, provision, rollback, status, verify
from .environment import PROTECTIONS, RUN_DIR_VAR, UTF8_LOCALE, argv_problems, run_environment
from .events import extract_build_status, extract_reports, extract_wheels
from .processes import RUN_TOKEN_VAR, end_run_processes, run_processes
from .project import project_root
from .reports import list_runs, report
from .results import (EXIT_ERROR, EXIT_FAILED, EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE, HOST_STATES, Failure,
                      HostResult, ProgressEvent, Report, RunResult)
from .runs import RunStream, parse_extravars, run_playbook, stream

__all__ = [
    # results
    "EXIT_ERROR", "EXIT_FAILED", "EXIT_OK", "EXIT_UNREACHABLE", "EXIT_USAGE", "HOST_STATES",
    "Failure", "HostResult", "ProgressEvent", "Report", "RunResult",
    # events
    "extract_build_status", "extract_reports", "extract_wheels",
    # runs
    "RunStream", "parse_extravars", "run_playbook", "stream",
    # actions
    "bundle", "plan", "provision", "rollback", "status", "verify",
    # processes
    "RUN_TOKEN_VAR", "end_run_processes", "run_processes",
    # reports
    "list_runs", "report",
    # project
    "project_root",
    # environment
    "PROTECTIONS", "RUN_DIR_VAR", "UTF8_LOCALE", "argv_problems", "run_environment",
]
