"""sparkforge.api driven for real through ansible-runner against the fixture playbook.

tests/fixtures/api/site.yml stands in for playbooks/spark.yml with the same
contract (preflight publishing ``sparkforge_plan``, a polled build reporting its
status dict, wheel hashes, report files, a verify part). Its inventory holds
three local hosts (``good`` changes things, ``broken`` fails preflight with a
known message, ``builder`` runs the polled build) and ``gone``, an ssh host on
127.0.0.1 port 1 that cannot be reached.
"""

import base64
import hashlib
import json
import os
import re
import time

import pytest

from sparkforge import api

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "api")
INVENTORY = os.path.join(FIXTURES, "inventory.yml")
SITE = os.path.join(FIXTURES, "site.yml")


def _vars(tmp):
    work = tmp / "work"
    reports = tmp / "reports"
    work.mkdir(exist_ok=True)
    reports.mkdir(exist_ok=True)
    return {"fixture_workdir": str(work), "sparkforge_reports_dir": str(reports)}


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    """One provision of all four hosts, with every progress event recorded."""
    tmp = tmp_path_factory.mktemp("api-run")
    events = []
    result = api.provision(INVENTORY, playbook=SITE, extravars=_vars(tmp), on_event=events.append)
    return result, events, tmp


def test_run_result_summary(full_run):
    result, _, _ = full_run
    assert result.action == "provision"
    assert result.summary() == {"broken": "failed", "builder": "changed", "gone": "unreachable",
                                "good": "changed"}
    assert result.failed_hosts == ["broken"]
    assert result.unreachable_hosts == ["gone"]
    assert result.status == "failed" and result.rc != 0
    assert result.error is None
    assert not result.ok
    assert result.exit_code() == api.EXIT_UNREACHABLE
    assert result.duration_s > 0
    assert result.run_id and result.playbook == SITE and result.inventory == INVENTORY
    # The run id is UTC, like every timestamp the collection writes, and says so.
    assert re.fullmatch(r"\d{8}T\d{6}-\d{6}Z", result.run_id), result.run_id
    # The whole result is plain data.
    data = json.loads(json.dumps(result.to_dict()))
    assert data["hosts"]["broken"]["state"] == "failed"
    assert data["exit_code"] == 3


def test_changed_host(full_run):
    result, _, tmp = full_run
    good = result.hosts["good"]
    assert good.state == "changed"
    assert good.changed >= 2 and good.ok >= good.changed and good.failed == 0
    assert good.failures == [] and good.message == ""
    assert (tmp / "work" / "good.marker").read_text() == "good %s\n" % result.run_id
    assert good.plan == {"host": "good", "platform_class": "fixture", "builder": False, "problems": []}


def test_failed_task_is_a_per_host_failure(full_run):
    result, _, tmp = full_run
    broken = result.hosts["broken"]
    assert broken.state == "failed" and broken.failed == 1
    assert len(broken.failures) == 1
    failure = broken.failures[0]
    assert failure.task == "Refuse unsupported hosts"
    assert failure.action == "ansible.builtin.fail"
    assert failure.message == "fixture host broken is not supported: no GPU found"
    assert not failure.unreachable
    # The failed host stopped there; the others went on.
    assert not (tmp / "work" / "broken.marker").exists()


def test_unreachable_host(full_run):
    result, _, _ = full_run
    gone = result.hosts["gone"]
    assert gone.state == "unreachable" and gone.unreachable
    assert gone.failures[0].unreachable
    assert gone.failures[0].task == "Write a marker file"
    assert "127.0.0.1 port 1" in gone.message
    assert "Connection refused" in gone.message


def test_wheels_builds_and_reports(full_run):
    result, _, tmp = full_run
    builder = result.hosts["builder"]
    wheel = tmp / "work" / "fixture-0.1-py3-none-any.whl"
    assert builder.wheels == {wheel.name: hashlib.sha256(wheel.read_bytes()).hexdigest()}
    status = builder.builds["fixture"]
    assert status["state"] == "done" and status["phase"] == "wheel"
    assert status["done"] == status["total"] == 4 and status["percent"] == 100.0
    for name in ("good", "builder"):
        host = result.hosts[name]
        expected = str(tmp / "reports" / result.run_id / (name + ".json"))
        assert host.reports == [expected]
        assert json.loads(open(expected).read()) == {"host": name, "state": "provisioned"}


def test_progress_events(full_run):
    result, events, _ = full_run
    kinds = [e.kind for e in events]
    assert kinds[0] == "play" and kinds[-1] == "stats"
    tasks = [e.task for e in events if e.kind == "task"]
    assert tasks[:5] == ["Publish the plan", "Refuse unsupported hosts", "Stop here when only planning",
                         "Write a marker file", "Poll the fixture build"]
    # Host results follow their task start.
    states = {(e.host, e.task): e.state for e in events if e.kind == "host" and e.state != "retry"}
    assert states[("broken", "Refuse unsupported hosts")] == "failed"
    assert states[("gone", "Write a marker file")] == "unreachable"
    assert states[("good", "Write a marker file")] == "changed"
    assert states[("good", "Refuse unsupported hosts")] == "skipped"
    failed = [e for e in events if e.kind == "host" and e.state == "failed"]
    assert failed[0].message == "fixture host broken is not supported: no GPU found"
    # The polled build: one build event per poll, percent rising to 100, one retry per unfinished poll.
    builds = [e for e in events if e.kind == "build"]
    assert [e.percent for e in builds] == [0.0, 25.0, 50.0, 75.0, 100.0]
    assert [e.phase for e in builds] == ["configure", "compile", "compile", "compile", "wheel"]
    assert builds[-1].state == "done" and all(e.state == "running" for e in builds[:-1])
    assert all(e.host == "builder" and e.task == "Poll the fixture build" for e in builds)
    assert builds[-1].build["elapsed_s"] >= builds[0].build["elapsed_s"]
    retries = [e for e in events if e.kind == "host" and e.state == "retry"]
    assert len(retries) == 4 and retries[0].message == "attempt 1 of 7"
    # Events arrive in ansible-runner's order.
    counters = [e.counter for e in events]
    assert counters == sorted(counters)
    assert events[-1].data["dark"] == {"gone": 1}
    assert events[-1].data["failures"] == {"broken": 1}


def test_plan_collects_plan_facts_and_problems(tmp_path):
    events = []
    result = api.plan(INVENTORY, playbook=SITE, limit="good,broken,builder", extravars=_vars(tmp_path),
                      on_event=events.append)
    assert result.action == "plan" and result.check is True and result.tags == ["preflight"]
    assert result.summary() == {"broken": "failed", "builder": "ok", "good": "ok"}
    assert result.hosts["builder"].plan["platform_class"] == "fixture_builder"
    assert result.hosts["builder"].problems == []
    assert result.hosts["broken"].plan_problems == [{"check": None, "message": "no GPU found (fixture)"}]
    assert result.hosts["broken"].problems == [
        "no GPU found (fixture)",
        "Refuse unsupported hosts: fixture host broken is not supported: no GPU found",
    ]
    assert result.exit_code() == api.EXIT_FAILED
    # Planning stops after preflight: nothing written, no install task started.
    assert os.listdir(str(tmp_path / "work")) == []
    assert "Write a marker file" not in [e.task for e in events if e.kind == "task"]


def test_verify_runs_only_the_verify_part(tmp_path):
    extra = _vars(tmp_path)
    first = api.provision(INVENTORY, playbook=SITE, limit="good", extravars=extra, tags=["install"])
    assert first.summary() == {"good": "changed"} and first.ok and first.exit_code() == 0
    events = []
    result = api.verify(INVENTORY, playbook=SITE, limit="good", extravars=extra, on_event=events.append)
    assert result.action == "verify" and result.tags == ["verify"]
    assert result.summary() == {"good": "changed"}  # it writes this run's report
    tasks = [e.task for e in events if e.kind == "task"]
    assert "Verify the marker" in tasks and "Write a marker file" not in tasks
    assert result.hosts["good"].reports == [str(tmp_path / "reports" / result.run_id / "good.json")]
    # report() reads the run back.
    rep = api.report(reports_dir=str(tmp_path / "reports"))
    assert rep.error is None
    assert rep.runs == sorted([first.run_id, result.run_id]) and rep.run == rep.runs[-1]
    assert rep.hosts == {"good": {"host": "good", "state": "provisioned"}}
    older = api.report(run=first.run_id, reports_dir=str(tmp_path / "reports"))
    assert older.files == {"good.json": {"host": "good", "state": "provisioned"}}
    missing = api.report(run="no-such-run", reports_dir=str(tmp_path / "reports"))
    assert "no report directory" in missing.error


def test_stream_iterates_events_while_running(tmp_path):
    run = api.stream(api.provision, INVENTORY, playbook=SITE, limit="builder", extravars=_vars(tmp_path),
                     tags=["install"])
    events = list(run)
    assert run.result is not None and run.result.summary() == {"builder": "changed"}
    assert [e.percent for e in events if e.kind == "build"] == [0.0, 25.0, 50.0, 75.0, 100.0]
    assert run.result.hosts["builder"].wheels


def test_missing_inventory_is_a_result():
    result = api.provision("/nonexistent/inventory.yml", playbook=SITE)
    assert result.status == "error" and result.error_kind == "usage"
    assert "inventory not found: /nonexistent/inventory.yml" in result.error
    assert result.hosts == {} and result.exit_code() == api.EXIT_USAGE
    assert api.plan(None, playbook=SITE).error.startswith("no inventory given")


def test_missing_playbook_and_bad_extravars_are_results(tmp_path):
    result = api.provision(INVENTORY, playbook=str(tmp_path / "nope.yml"))
    assert result.status == "error" and "playbook not found" in result.error
    result = api.provision(INVENTORY, playbook=SITE, extravars=["@" + str(tmp_path / "missing.yml")])
    assert result.status == "error" and "extra-vars file not found" in result.error
    assert result.exit_code() == api.EXIT_USAGE


def test_unparsable_playbook_is_a_result():
    result = api.provision(INVENTORY, playbook=os.path.join(FIXTURES, "unparsable.yml"), limit="good")
    assert result.status == "error" and result.exit_code() == api.EXIT_USAGE
    assert result.rc != 0 and result.hosts == {}
    assert "conflicting action statements: ansible.builtin.debug, ansible.builtin.command" in result.error


def test_host_list_inventory(tmp_path):
    extra = dict(_vars(tmp_path), ansible_connection="local")
    result = api.plan("alpha,beta,", playbook=SITE, extravars=extra)
    assert result.summary() == {"alpha": "ok", "beta": "ok"}
    assert result.hosts["alpha"].plan["host"] == "alpha"


def test_parse_extravars(tmp_path):
    path = tmp_path / "vars.yml"
    path.write_text("torch_arch_list: ['12.1']\nserial: 2\n")
    merged = api.parse_extravars(["a=1 b='two words'", "@" + str(path), '{"c": {"d": true}}', {"e": 5},
                                  "py={{ ansible_playbook_python }}"])
    assert merged == {"a": "1", "b": "two words", "torch_arch_list": ["12.1"], "serial": 2,
                      "c": {"d": True}, "e": 5, "py": "{{ ansible_playbook_python }}"}
    with pytest.raises(ValueError, match="expected key=value"):
        api.parse_extravars(["novalue"])
    with pytest.raises(ValueError, match="expected key=value"):
        api.parse_extravars(["a=1 =x"])


def test_build_status_from_a_slurped_status_file():
    status = {"build": "torch", "phase": "compile", "done": 450, "total": 1000, "state": "running",
              "elapsed_s": 12.5}
    res = {"changed": False, "encoding": "base64", "source": "/var/cache/sparkforge/torch/status.json",
           "content": base64.b64encode(json.dumps(status).encode()).decode()}
    found = api.extract_build_status(res)
    assert found == [dict(status, percent=45.0)]
    assert api.extract_build_status({"results": [{"build_status": status}, {"status_file": "/x.json"}]}) == \
        [dict(status, percent=45.0)]


def test_rescued_and_ignored_failures_do_not_count():
    events = []
    result = api.provision(INVENTORY, playbook=os.path.join(FIXTURES, "rescue.yml"), on_event=events.append)
    good = result.hosts["good"]
    assert result.summary() == {"good": "ok"} and result.exit_code() == 0
    assert good.failures == [] and good.rescued == 1 and good.ignored == 1
    assert [(f.task, f.rc, f.rescued) for f in good.rescued_failures] == [("Fail inside the block", 1, True)]
    ignored = [e for e in events if e.kind == "host" and e.task == "Fail but carry on"]
    assert ignored[0].state == "ok" and ignored[0].message.startswith("ignored: ")


def test_command_failure_message_has_rc_and_stderr():
    result = api.provision(INVENTORY, playbook=os.path.join(FIXTURES, "rescue.yml"),
                           extravars={"fail_for_real": True})
    failure = result.hosts["good"].failures[0]
    assert result.summary() == {"good": "failed"} and result.exit_code() == api.EXIT_FAILED
    assert failure.task == "Fail for real after a command error" and failure.rc == 2
    assert failure.message.startswith("non-zero return code (rc=2): ")
    assert "/nonexistent-sparkforge-path" in failure.message and "No such file" in failure.stderr


def test_limit_matching_no_host_is_a_usage_error():
    result = api.provision(INVENTORY, playbook=SITE, limit="no-such-host")
    assert result.status == "error" and result.exit_code() == api.EXIT_USAGE
    assert "no hosts to target" in result.error
    assert any("no-such-host" in w for w in result.warnings)


def _ansible_processes():
    """(pid, run id) of the processes on this machine whose command line names ansible-playbook or a
    module of a run, with the run id of their sparkforge token."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % name, "rb") as handle:
                env = dict(line.split(b"=", 1) for line in handle.read().split(b"\0") if b"=" in line)
        except OSError:
            continue
        token = env.get(api.RUN_TOKEN_VAR.encode())
        if token and int(name) != os.getpid():
            found.append((int(name), token.decode().rsplit("-", 2)[0]))
    return found


def test_stream_cancel_stops_the_run(tmp_path):
    # A build of 200 polls (minutes): only a working cancel ends this test quickly.
    run = api.stream(api.provision, INVENTORY, playbook=SITE, limit="builder", tags=["install"],
                     extravars=dict(_vars(tmp_path), fixture_build_steps=200))
    started = time.monotonic()
    seen = []
    for event in run:
        seen.append(event)
        if event.kind == "build":
            run.cancel()
    assert run.result.status == "canceled"
    assert "canceled" in run.result.error
    assert run.result.exit_code() == api.EXIT_ERROR
    assert seen[-1].kind != "stats"  # no recap: the playbook did not get to its end
    assert [e.percent for e in seen if e.kind == "build"][-1] < 50.0
    assert time.monotonic() - started < 60
    # Nothing of the run is left: not ansible-playbook, not its worker (in a session of its own), not the
    # module it was running.
    leftover = [p for p in _ansible_processes() if p[1] == run.result.run_id]
    assert leftover == [], "processes of the canceled run are still alive: %s" % leftover


def test_timeout_ends_every_process_of_the_run(tmp_path):
    run = api.stream(api.provision, INVENTORY, playbook=SITE, limit="builder", tags=["install"],
                     extravars=dict(_vars(tmp_path), fixture_build_steps=200), timeout=4)
    list(run)
    assert run.result.status == "timeout", run.result.status
    leftover = [p for p in _ansible_processes() if p[1] == run.result.run_id]
    assert leftover == [], leftover
