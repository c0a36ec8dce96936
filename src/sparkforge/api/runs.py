"""One playbook run through ansible-runner (:func:`run_playbook`), its ``-e`` values, and
:func:`stream`, which iterates a run's progress events while it happens."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import datetime
import os
import queue
import shutil
import sys
import tempfile
import threading
import time

import yaml

from .events import _Collector
from .processes import _ACTIVE_LOCK, _ACTIVE_TOKENS, RUN_TOKEN_VAR, end_run_processes
from .project import project_root
from .results import RunResult


def _run_id():
    """Sortable and unique enough for one controller: UTC to the microsecond, marked Z (local time would sort
    wrongly across a clock change and differ from the collection's timestamps, which are all UTC)."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S-%fZ")


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
            # A key written twice in a YAML mapping is refused by preflight's own check (yaml_keys), which knows a
            # key overriding a `<<:` merge is valid; ansible-core's check would refuse that (the project's ansible.cfg
            # says the same).
            "ANSIBLE_DUPLICATE_YAML_DICT_KEY": "ignore",
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
