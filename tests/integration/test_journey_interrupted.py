"""A run survives interruption and company (issue 42, items 5 and 6): the fake-GPU journey on this machine (a
fresh host: no venv; torch from a wheelhouse of stand-in wheels; pytorch and runtime_env) is killed at eleven
points spread over it -- the run lock being taken, inside the venv's making (its directory, its python without
pip, pip half unpacked), inside pip's install of torch, the torch check, the runtime profile, the proof and its
record, the fleet summary, the lock's release -- each kill followed by the next run of the chain, which is killed
at the next point. `--check` after the venv was left half made exits 0, reports the repair, and changes nothing.
The last run is uninterrupted: the venv, the runtime profile, the proof record and the host's state equal those of
an uninterrupted run. That reference run is one of two started together on one host: one is refused, naming the
first's lock, and the other converges.
A kill is SIGKILL to ansible-playbook and every process under it -- its workers run in sessions of their own
(ansible-core's WorkerProcess calls setsid), and the module a worker runs with them: a power loss or `kill -9` of
the whole tree, after which nothing of the run goes on -- the moment its output starts the named task or the named
file appears."""

import glob
import json
import os
import re
import signal
import subprocess
import time

import pytest
import yaml

from ansible_collections.sparkforge.stack.plugins.module_utils.host.venv import pending_path
from helpers import REPO
from test_check_mode_local import BIN, make_host, site_packages, task_status, template_venv  # noqa: F401
from test_result_is_the_plan import TORCH, torch_wheel

pytestmark = pytest.mark.full

COMPONENTS = ["pytorch", "runtime_env"]


def journey_host(root):
    root.mkdir()
    host = make_host(root, None, "wheelhouse", torch=False, venv=False, components=COMPONENTS)
    torch_wheel(host["wheelhouse"], TORCH, "13.0")
    return host


def run_env(host):
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith("PIP_"))
    env.update(ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
               ANSIBLE_LOCAL_TEMP=str(host["root"] / "ansible-tmp"), PYTHONUNBUFFERED="1",
               # A task's banner is printed when it starts (ansible.cfg defers it to its first shown result).
               ANSIBLE_DISPLAY_SKIPPED_HOSTS="1")
    return env


def start(host, *extra):
    """spark.yml in its own process group, its output read line by line."""
    return subprocess.Popen([os.path.join(BIN, "ansible-playbook"), "playbooks/spark.yml", "-i", host["inventory"]]
                            + list(extra), cwd=REPO, env=run_env(host), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, universal_newlines=True, start_new_session=True)


def venv(host):
    return host["prefix"] / "venv"


def pip_unpacked(host):
    return bool(glob.glob(str(venv(host) / "lib" / "python*" / "site-packages" / "pip")))


def pending(host):
    """The PID in the file that says the venv is being made (stack_venv writes it first), or None."""
    try:
        with open(pending_path(str(venv(host)))) as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def making(reached):
    """A condition inside this run's making of the venv: its pending file written by this run (not left by the
    run killed before), then ``reached``."""
    return lambda host, before: pending(host) not in (None, before) and reached(host)


# (name, the task whose start it waits for, a condition (host, the pending file when the task started) or None,
# seconds after the task starts)
POINTS = [
    ("the run lock being taken", "Take the run lock (a second run refuses", None, 0.0),
    ("the venv's directory made", "Create the stack venv", making(lambda h: venv(h).exists()), 0.0),
    ("the venv's python, no pip", "Create the stack venv", making(lambda h: (venv(h) / "bin" / "python").exists()),
     0.0),
    ("pip half unpacked", "Create the stack venv", making(pip_unpacked), 0.0),
    ("inside pip's install of torch", "Install torch from the wheelhouse", None, 0.6),
    ("the torch check", "Check the venv's torch is exactly the planned one", None, 0.0),
    ("the runtime profile", "Write the login-shell script", None, 0.1),
    ("the proof", "Compare what the venv holds with the plan", None, 0.1),
    ("the proof's record", "Record the proof", None, 0.0),
    ("the fleet summary", "Write the fleet summary", None, 0.1),
    ("the lock's release", "Release the run lock of each host", None, 0.0),
]


def children():
    """Parent PID to its children's PIDs, from /proc."""
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/stat" % name) as handle:
                    parent = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (IOError, OSError, ValueError, IndexError):
                continue
            out.setdefault(parent, []).append(int(name))
    return out


def kill_tree(pid):
    """SIGKILL pid and its descendants. The tree is first frozen (SIGSTOP, again until no process is new: a stopped
    process starts no child), so no child escapes to init by outliving its killed parent."""
    frozen = set()
    while True:
        tree, todo, found = children(), [pid], []
        while todo:
            current = todo.pop()
            found.append(current)
            todo.extend(tree.get(current, []))
        new = [p for p in found if p not in frozen]
        if not new:
            break
        for each in new:
            try:
                os.kill(each, signal.SIGSTOP)
            except OSError:
                pass
            frozen.add(each)
    for each in frozen:
        try:
            os.kill(each, signal.SIGKILL)
        except OSError:
            pass


def run_killed(host, task, condition, delay):
    """One run, killed at the point; returns its output up to the kill (the kill must have happened)."""
    proc = start(host)
    out, armed = [], None
    for line in proc.stdout:
        out.append(line)
        if armed is None and line.startswith("TASK [") and task in line:
            armed, before = time.monotonic() + delay, pending(host)
        if armed is not None:
            while time.monotonic() < armed and proc.poll() is None:
                time.sleep(0.005)
            if condition is not None:
                while not condition(host, before) and proc.poll() is None:
                    time.sleep(0.001)
            if proc.poll() is None:
                kill_tree(proc.pid)
                proc.wait()
                return "".join(out), True
    proc.wait()
    return "".join(out), False


def state(host):
    """What a run leaves that the next one trusts: the venv's distributions, its marker, the runtime profile
    files, the proof record and the host's fleet state, with the host's own root written <root>."""
    root = str(host["root"])
    site = site_packages(str(venv(host)))
    dists = sorted(os.path.basename(p) for p in glob.glob(os.path.join(site, "*.dist-info")))
    profile = host["root"] / "profile.d" / "sparkforge.sh"
    hook = venv(host) / "bin" / "sparkforge-env.sh"
    with open(host["prefix"] / "provisioned.json") as handle:
        record = handle.read().replace(root, "<root>")
    with open(host["root"] / "fleet-reports" / "fleet-summary.json") as handle:
        summary = json.load(handle)
    entry = summary["hosts"]["localhost"] if "hosts" in summary else summary["localhost"]
    return {"dists": dists, "marker": sorted(os.listdir(str(venv(host)))),
            "profile": profile.read_text().replace(root, "<root>"),
            "hook": hook.read_text().replace(root, "<root>"), "record": json.loads(record),
            "state": entry["state"], "error": entry["error"],
            "lock": os.path.exists(str(host["prefix"] / "venv.lock")),
            "pending": os.path.exists(pending_path(str(venv(host))))}


def test_two_runs_together_then_a_journey_killed_at_eleven_points_converges_to_it(tmp_path):
    # Two runs started together on one host: one holds the lock, the other is refused naming it.
    reference = journey_host(tmp_path / "reference")
    first, second = start(reference), start(reference)
    outs = [p.communicate(timeout=600)[0] for p in (first, second)]
    codes = sorted((p.returncode, o) for p, o in zip((first, second), outs))
    assert codes[0][0] == 0 and codes[1][0] != 0, [(c, o[-2500:]) for c, o in codes]
    refused = codes[1][1]
    assert re.search(r"another run holds the lock \S+venv\.lock: ansible-playbook PID \d+ on \S+, started "
                     r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", refused), refused[-3000:]
    expected = state(reference)
    assert expected["state"] == "provisioned" and not expected["lock"], expected

    host = journey_host(tmp_path / "journey")
    for index, (name, task, condition, delay) in enumerate(POINTS):
        out, killed = run_killed(host, task, condition, delay)
        assert killed, (name, out[-3000:])
        if name == "the venv's python, no pip":
            # --check after a run left the venv half made: exit 0, the repair reported, nothing changed.
            from test_check_mode_local import snapshot, watched
            before = snapshot(*watched(host))
            check = subprocess.run([os.path.join(BIN, "ansible-playbook"), "playbooks/spark.yml", "-i",
                                    host["inventory"], "--check"], cwd=REPO, env=run_env(host),
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                                   timeout=600, check=False)
            assert check.returncode == 0, check.stdout[-3000:]
            assert task_status(check.stdout, "Create the stack venv") == "changed", check.stdout[-3000:]
            assert snapshot(*watched(host)) == before
    final = subprocess.run([os.path.join(BIN, "ansible-playbook"), "playbooks/spark.yml", "-i", host["inventory"]],
                           cwd=REPO, env=run_env(host), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, timeout=600, check=False)
    assert final.returncode == 0, final.stdout[-3000:]
    assert state(host) == expected
    # The inventory is the reference's but for its root: the same plan.
    assert yaml.safe_load(open(host["inventory"]))["all"]["vars"]["sparkforge_components"] == COMPONENTS
