"""The sparkforge CLI: real runs of the fixture playbook, output and exit codes."""

import io
import json
import os
import re
import subprocess
import sys

import pytest

import readme
from helpers import REPO, user_env
from sparkforge import cli

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "api")
INVENTORY = os.path.join(FIXTURES, "inventory.yml")
SITE = os.path.join(FIXTURES, "site.yml")
SRC = os.path.join(REPO, "src")


def _run(argv):
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _common(tmp_path):
    work, reports = tmp_path / "work", tmp_path / "reports"
    work.mkdir(exist_ok=True)
    reports.mkdir(exist_ok=True)
    return ["-i", INVENTORY, "--playbook", SITE, "-e", "fixture_workdir=%s" % work,
            "-e", "sparkforge_reports_dir=%s" % reports]


def test_provision_failed_host_exit_2_with_plain_progress(tmp_path):
    code, out, err = _run(["provision", "--plain", "--limit", "good,broken,builder"] + _common(tmp_path))
    assert code == 2, out + err
    lines = out.splitlines()
    assert "TASK Refuse unsupported hosts" in lines
    assert "  broken: FAILED: fixture host broken is not supported: no GPU found" in lines
    assert "  good: changed" in lines
    builds = [ln for ln in lines if ln.startswith("  builder: build fixture ")]
    assert builds[0].startswith("  builder: build fixture configure running 0.0%")
    assert builds[-1].startswith("  builder: build fixture wheel done 100.0%")
    assert any(" compile running 50.0%" in ln for ln in builds)
    assert any(ln.split() == ["broken", "failed", "1", "0", "1", "0"] for ln in lines)
    assert "broken: Refuse unsupported hosts: fixture host broken is not supported: no GPU found" in lines
    assert any(ln.startswith("builder: wheel fixture-0.1-py3-none-any.whl sha256 ") for ln in lines)


def test_provision_json_ok_exit_0(tmp_path):
    code, out, err = _run(["provision", "--json", "--limit", "good", "-t", "install"] + _common(tmp_path))
    assert code == 0, out + err
    data = json.loads(out)
    assert data["ok"] is True and data["exit_code"] == 0 and data["tags"] == ["install"]
    assert data["hosts"]["good"]["state"] == "changed"
    assert data["hosts"]["good"]["reports"]
    # Progress went to stderr, so stdout is only the JSON document.
    assert "TASK Write a marker file" in err
    # And report reads that run back.
    code, out, _ = _run(["report", "--json", "--reports-dir", str(tmp_path / "reports")])
    assert code == 0
    rep = json.loads(out)
    assert rep["run"] == data["run_id"] and rep["hosts"]["good"] == {"host": "good", "state": "provisioned"}
    code, out, _ = _run(["report", "--list", "--reports-dir", str(tmp_path / "reports")])
    assert code == 0 and out.split() == [data["run_id"]]


def test_unreachable_exit_3(tmp_path):
    code, out, _ = _run(["provision", "--json", "-q", "--limit", "gone"] + _common(tmp_path))
    assert code == 3
    host = json.loads(out)["hosts"]["gone"]
    assert host["state"] == "unreachable" and "Connection refused" in host["failures"][0]["message"]


def test_usage_errors_exit_4(tmp_path):
    code, out, _ = _run(["plan", "-i", str(tmp_path / "missing.yml"), "--playbook", SITE])
    assert code == 4
    assert "ERROR: inventory not found: %s" % (tmp_path / "missing.yml") in out
    code, out, _ = _run(["provision", "--json", "-i", INVENTORY, "--playbook", SITE, "-e", "novalue"])
    assert code == 4 and "expected key=value" in json.loads(out)["error"]
    # A rollback target that is not a generation number is refused before any playbook runs.
    for bad in ("0", "-1", "two", "1.5"):
        code, out, _ = _run(["rollback", "--json", "-i", INVENTORY, "--to", bad])
        assert code == 4 and "--to takes a generation number (1, 2, ...), got %r" % bad in json.loads(out)["error"]
    assert _run(["provision", "--no-such-flag"])[0] == 4
    assert _run([])[0] == 4
    code, out, _ = _run(["report", "--reports-dir", str(tmp_path / "empty")])
    assert code == 4 and "no reports under" in out
    # bundle: --out is required, and must be a directory (or not exist yet).
    assert _run(["bundle", "-i", INVENTORY])[0] == 4
    (tmp_path / "afile").write_text("x")
    code, out, _ = _run(["bundle", "--json", "-i", INVENTORY, "--out", str(tmp_path / "afile")])
    assert code == 4 and "exists and is not a directory" in json.loads(out)["error"]


def test_bundle_help_describes_the_command():
    proc = subprocess.run([sys.executable, "-m", "sparkforge.cli", "bundle", "--help"], stdout=subprocess.PIPE,
                          universal_newlines=True, env=dict(os.environ, PYTHONPATH=SRC), timeout=60)
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    for words in ("--out DIR", "manifest.json", "sparkforge_bundle: DIR", "bare git mirrors",
                  "The distribution's own packages are not bundled"):
        assert words in text, words


def test_module_entry_point_plan(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SRC] + [os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-m", "sparkforge.cli", "plan", "--json", "--limit", "good,builder"]
                          + _common(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    assert data["action"] == "plan" and data["check"] is True
    assert data["hosts"]["builder"]["plan"]["platform_class"] == "fixture_builder"
    assert data["hosts"]["good"]["problems"] == []


def test_the_readme_cli_lines_as_written():
    """The guide's "Python API and CLI" (docs/guides/api-cli-ee.md), its first two lines as written, from the
    repository root on this machine (no GPU, no fleet): the example fleet's hosts cannot be reached (exit 3,
    each one named); the default inventory's host (this machine) stops in preflight in check mode (exit 2)."""
    lines = readme.commands("api-cli-ee.md", "## Python API and CLI")
    plan, check = lines[0], lines[1]
    assert plan.startswith(".venv/bin/sparkforge plan -i inventory/examples/fleet") and \
        check == ".venv/bin/sparkforge provision -i inventory --check", lines
    env = user_env(REPO)
    runs = [subprocess.run(["bash", "-c", line], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, timeout=600, check=False) for line in (plan, check)]
    assert runs[0].returncode == 3, runs[0].stdout[-3000:]
    for host in ("spark-01", "spark-02", "gh200-01", "gh200-02"):
        assert host in runs[0].stdout, (host, runs[0].stdout[-3000:])
    assert runs[1].returncode == 2, runs[1].stdout[-3000:]
    assert "Preflight" in runs[1].stdout or "preflight" in runs[1].stdout, runs[1].stdout[-3000:]


def test_the_guides_python_example_as_written():
    """The guide's "From Python" block (docs/guides/api-cli-ee.md) run as written with the venv's python from the
    repository root: the example fleet's four hosts cannot be reached from here, each one is printed
    ``unreachable``, and the result's exit code is the CLI's 3."""
    blocks = re.findall(r"^```python\n(.*?)^```", readme.section("api-cli-ee.md", "### From Python"), re.S | re.M)
    assert len(blocks) == 1, blocks
    proc = subprocess.run([sys.executable, "-c", blocks[0]], cwd=REPO, env=user_env(REPO), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    for host in ("spark-01", "spark-02", "gh200-01", "gh200-02"):
        assert any(line.startswith(host + " unreachable ") for line in proc.stdout.splitlines()), \
            (host, proc.stdout[-3000:])
    assert proc.stdout.splitlines()[-1] == "exit code 3", proc.stdout[-3000:]


def _git_status():
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO,
                          stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout


def _tree(path):
    return sorted((base, sorted(dirs), sorted(files)) for base, dirs, files in os.walk(str(path)))


@pytest.mark.parametrize("argv,message", [
    pytest.param(["versions", "--check", "--since", "bogus"], "--since 'bogus' is not a torch release like 2.9.0",
                 id="V30"),
    pytest.param(["versions", "--timeout", "0"], "--timeout 0.0 is not a number of seconds above 0", id="V31"),
    pytest.param(["versions", "--timeout", "inf"], "--timeout inf is not a number of seconds above 0 (at most 86400)",
                 id="V45"),
    pytest.param(["report", "--run", "/etc/apt"], "run '/etc/apt' is not a run id under", id="V32"),
    pytest.param(["report", "--run", ".."], "run '..' is not a run id under", id="V33"),
    pytest.param(["rollback", "-i", INVENTORY, "--to", "two"], "--to takes a generation number (1, 2, ...), got 'two'",
                 id="V34"),
    pytest.param(["rollback", "-i", INVENTORY, "--to", "1.9"], "--to takes a generation number (1, 2, ...), got '1.9'",
                 id="V35"),
    pytest.param(["bundle", "-i", INVENTORY, "--out", "{tmp}/afile/bundle"],
                 "is a regular file, not a directory: give a directory path", id="V36"),
    pytest.param(["bundle", "-i", INVENTORY, "--out", "/usr"], "--out /usr: '/usr' is a system directory", id="V37"),
    pytest.param(["plan", "-i", "{tmp}/bad.yml"], "Completely failed to parse inventory source {tmp}/bad.yml",
                 id="N20"),
    pytest.param(["status", "-i", "{tmp}/bad.ini"], "Completely failed to parse inventory source {tmp}/bad.ini",
                 id="N22"),
])
def test_every_option_is_checked_before_anything_runs(tmp_path, argv, message):
    """The command line's bad options (docs/bad-inputs.md V30..V37, N20, N22): exit 4 (usage), the message, and
    nothing written: not in the reports dir (a report never reads outside it), not in the checkout."""
    (tmp_path / "afile").write_text("x")
    (tmp_path / "bad.yml").write_text("all:\n  hosts:\n    a: [\n")
    (tmp_path / "bad.ini").write_text("[x\nfoo bar=\n")
    reports = tmp_path / "reports"
    (reports / "20260101T000000-000001").mkdir(parents=True)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    if argv[0] == "report":
        argv += ["--reports-dir", str(reports)]
    before, status = _tree(tmp_path), _git_status()
    code, out, err = _run(argv)
    assert code == 4, out + err
    assert message.replace("{tmp}", str(tmp_path)) in out + err
    # Nothing under /etc/apt was listed, no run started.
    assert "sources.list" not in out and "PLAY [" not in out
    assert _tree(tmp_path) == before and _git_status() == status
