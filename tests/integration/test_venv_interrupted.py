"""A run killed inside the stack venv's making (SIGKILL to its process group, as Ctrl-C or a lost connection
would end it), then run again: the venv equals an uninterrupted one's (issue 42).  The stack_venv module
run as Ansible runs it, on this machine; each kill point waits for a file the making writes."""

import glob
import json
import os
import signal
import subprocess
import sys
import time

from helpers import COLLECTIONS, MODULES, run_module

from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import LocalSystem
from ansible_collections.sparkforge.stack.plugins.module_utils.host.venv import MARKER, VenvJob, pending_path

PYTHON = sys.executable


def _job(venv):
    return VenvJob({"path": str(venv), "python": PYTHON}, LocalSystem())


def _module_process(args_file, env):
    # Its own process group: SIGKILL reaches python -m venv and ensurepip's pip too, as Ctrl-C would.
    return subprocess.Popen([sys.executable, os.path.join(MODULES, "stack_venv.py"), args_file], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def _distributions(venv):
    return subprocess.check_output([os.path.join(venv, "bin", "python"), "-c",
                                    "import importlib.metadata as m; print(sorted((d.metadata['Name'], d.version) "
                                    "for d in m.distributions()))"], universal_newlines=True)


def test_killed_inside_venv_creation_then_rerun_gives_the_uninterrupted_venv(tmp_path):
    reference = tmp_path / "reference"
    assert _job(reference).run()["action"] == "create"
    expected = _distributions(str(reference))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([COLLECTIONS] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    # Where the kill lands: the venv's directory made, its python linked (ensurepip not yet done), pip half
    # unpacked into site-packages.
    points = {"directory": lambda v: v.exists(),
              "python": lambda v: (v / "bin" / "python").exists(),
              "pip unpacking": lambda v: bool(glob.glob(str(v / "lib" / "python*" / "site-packages" / "pip")))}
    for name, reached in points.items():
        venv = tmp_path / name.replace(" ", "-") / "venv"
        args_file = tmp_path / ("%s.json" % name.replace(" ", "-"))
        args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {"path": str(venv), "python": PYTHON,
                                                                 "_ansible_tmpdir": str(tmp_path)}}))
        proc = _module_process(str(args_file), env)
        while not reached(venv) and proc.poll() is None:
            time.sleep(0.002)
        assert proc.poll() is None, "the module ended before %s was reached" % name
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        assert not (venv / MARKER).exists(), name
        rerun, rc = run_module("stack_venv", {"path": str(venv), "python": PYTHON})
        assert rc == 0 and rerun["action"] in ("create", "remake"), (name, rerun)
        assert _distributions(str(venv)) == expected and (venv / MARKER).exists(), name
        assert not os.path.exists(pending_path(str(venv))), name
