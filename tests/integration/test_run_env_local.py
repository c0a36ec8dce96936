"""The run's environment is its own through Ansible (connection local: the controller's environment reaches the
modules and the commands they run): a PYTHONPATH naming a directory that holds a ``torch`` is seen by a bare
command task, and not by a task with ``pip_task_env`` nor by a module that runs the venv's python
(venv_import_check, which scrubs its process environment).  docs/bad-inputs.md E01."""

import os
import subprocess
import sys
import venv

import pytest

from helpers import REPO

BIN = os.path.dirname(sys.executable)
SEES_TORCH = "import importlib.util as u; print(u.find_spec('torch') is not None)"

PLAYBOOK = """
- name: The run's environment, connection local
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: A bare command task (the host's environment as it is)
      ansible.builtin.command:
        argv: ["{python}", "-c", "{sees}"]
      register: bare
      changed_when: false
    - name: A task with the run's own environment
      ansible.builtin.command:
        argv: ["{python}", "-c", "{sees}"]
      environment: "{{{{ {{}} | sparkforge.stack.pip_task_env }}}}"
      register: own
      changed_when: false
    - name: A module that runs the venv's python
      sparkforge.stack.venv_import_check:
        python: "{python}"
        wheels: [{{name: torch, file: torch-9.9.9-py3-none-any.whl}}]
      register: imports
      failed_when: false
    - name: Say what each saw
      ansible.builtin.debug:
        msg: >-
          bare={{{{ bare.stdout }}}} own={{{{ own.stdout }}}}
          module={{{{ imports.failures | default([]) | join(';') }}}}
"""


@pytest.mark.parametrize("row_id", [pytest.param("E01", id="E01")])
def test_a_pythonpath_holding_torch_reaches_neither_the_tasks_nor_the_modules(tmp_path, row_id):
    venv.create(str(tmp_path / "venv"), with_pip=False)
    python = str(tmp_path / "venv" / "bin" / "python")
    (tmp_path / "stray" / "torch").mkdir(parents=True)
    (tmp_path / "stray" / "torch" / "__init__.py").write_text("__version__ = '9.9.9'\n")
    book = tmp_path / "book.yml"
    book.write_text(PLAYBOOK.format(python=python, sees=SEES_TORCH.replace('"', '\\"')))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PYTHONPATH=str(tmp_path / "stray"), PIP_INDEX_URL="http://stray.invalid/simple",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"))
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), str(book), "-i", "localhost,",
                           "-e", "ansible_python_interpreter=%s" % sys.executable], cwd=REPO, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    # The stand-in torch is there for a task that does nothing about it (the leak this guards against) ...
    assert "bare=True" in proc.stdout, proc.stdout[-3000:]
    # ... and for neither form of the run's own environment.
    assert "own=False" in proc.stdout, proc.stdout[-3000:]
    assert "module=torch does not import" in proc.stdout, proc.stdout[-3000:]
