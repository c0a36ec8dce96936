# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The environment of every python and pip that sparkforge runs for the venv: its own, not the host's.

Some of the host's ``PYTHON*`` variables change what a python imports and where pip installs: a ``PYTHONPATH``
naming a directory that holds torch makes pip answer "already satisfied" and an import check find that
torch, not the venv's.  Its ``PIP_*`` variables add package sources and options nobody planned.  The
user's site-packages (``~/.local/lib/pythonX.Y``) is read by every python unless ``PYTHONNOUSERSITE``
is set.  So none of them reaches the venv's python, pip, import checks, proofs or builds:

* a process that starts them (a module, ``LocalSystem``): those ``PYTHON*`` variables (``LEAKS``) and every
  ``PIP_*`` variable removed (:func:`scrub` on the module's own environment, :func:`child_environ` for one
  command), the names removed returned so the plan and the result can say which; the harmless ones
  (``PYTHONDONTWRITEBYTECODE``, ``PYTHONUNBUFFERED``...) pass;
* an Ansible task (``environment:`` can add variables, not remove them): :func:`task_blanks` sets the
  variables that change what python imports or how it runs to the empty string, which CPython reads
  as unset (``_Py_GetEnv``); pip's ``--isolated`` ignores ``PIP_*`` (pip_env.isolated_argv).

Where the host's ``PIP_INDEX_URL`` / ``PIP_EXTRA_INDEX_URL`` / ``PIP_FIND_LINKS`` / ``PIP_PROXY`` is
dropped, the plan's own variables are the one way to give an index or a proxy (pytorch_index_url,
ml_packages_index_url, sparkforge_fleet_pip_env, http(s)_proxy): a host variable never silently
overrides them.  Proxies (``http_proxy``...) are not PIP_ variables and are kept.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

# Every PIP_* variable of the host never reaches the venv's python and pip, nor do the PYTHON* ones of LEAKS.
PIP_PREFIX = "PIP_"
# What sparkforge sets instead: no user site-packages, no pip configuration file.
OWN = {"PYTHONNOUSERSITE": "1", "PIP_CONFIG_FILE": os.devnull}
# The PYTHON* variables a task blanks: what python imports (PATH, HOME, USERBASE, PLATLIBDIR, SAFEPATH,
# EXECUTABLE), code it runs first or after (STARTUP, INSPECT, BREAKPOINT) and how it runs or prints
# (OPTIMIZE drops asserts, WARNINGS=error fails pip, VERBOSE/DEBUG/DEVMODE, IOENCODING).
TASK_BLANKS = ("PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONPLATLIBDIR", "PYTHONSAFEPATH",
               "PYTHONEXECUTABLE", "PYTHONSTARTUP", "PYTHONINSPECT", "PYTHONBREAKPOINT", "PYTHONOPTIMIZE",
               "PYTHONWARNINGS", "PYTHONVERBOSE", "PYTHONDEBUG", "PYTHONDEVMODE", "PYTHONIOENCODING")
LEAKS = frozenset(TASK_BLANKS + ("PYTHONNOUSERSITE",))
# What the plan says to a user whose host sets one of these (the variable that does it the plan's way).
INSTEAD = {
    "PIP_INDEX_URL": "pytorch_index_url / ml_packages_index_url / sparkforge_fleet_pip_env "
                     "(a source build's: pytorch_extra_env, triton_extra_env)",
    "PIP_EXTRA_INDEX_URL": "ml_packages_extra_index_urls / sparkforge_fleet_pip_env",
    "PIP_FIND_LINKS": "sparkforge_wheel_dir / sparkforge_fleet_pip_env (a source build's: pytorch_extra_env)",
    "PIP_PROXY": "https_proxy / http_proxy",
    "PIP_CERT": "sparkforge_fleet_pip_env (PIP_CERT)",
    "PIP_TRUSTED_HOST": "sparkforge_fleet_pip_env (PIP_TRUSTED_HOST)",
}


# The names the plan itself puts into a play's environment (the offline bundle's pip index and configuration:
# fleet/bundle.py's sparkforge_bundle_env), listed in this variable beside them: they are the run's own, not the
# host's, and pass to the modules' commands.
PLAN_ENV = "SPARKFORGE_PLAN_ENV"


def plan_names(environ):
    """The names ``environ``'s PLAN_ENV lists (comma-separated)."""
    return set(n.strip() for n in str(environ.get(PLAN_ENV) or "").split(",") if n.strip())


def is_host_variable(name):
    """Whether ``name`` is one of the host's variables kept from the venv's python and pip."""
    return str(name).startswith(PIP_PREFIX) or str(name) in LEAKS


def _dropping(environ):
    keep = plan_names(environ)
    return [k for k in environ if is_host_variable(k) and k not in keep]


def dropped(environ):
    """Sorted names of ``environ`` that are removed: set, not empty, not the plan's own (PLAN_ENV) and not
    already sparkforge's own value."""
    return sorted(k for k in _dropping(environ) if environ[k] != "" and OWN.get(k) != environ[k])


def _own(environ):
    """sparkforge's own settings, less those the plan set itself (its PIP_CONFIG_FILE wins)."""
    keep = plan_names(environ)
    return dict((k, v) for k, v in OWN.items() if k not in keep)


def child_environ(environ, extra=None):
    """(environment of one command, names dropped): ``environ`` without the host's PIP_* and LEAKS variables,
    with sparkforge's own, then the caller's ``extra`` (a plan's setting wins: it is not the host's)."""
    gone = set(_dropping(environ))
    env = dict((k, v) for k, v in environ.items() if k not in gone)
    env.update(_own(environ))
    env.update(dict((str(k), "" if v is None else str(v)) for k, v in (extra or {}).items()))
    return env, dropped(environ)


def scrub(environ=None):
    """Make ``environ`` (default: this process's, a module's: run_command can add variables to a command's
    environment but not remove them) the run's own, for every command it starts; the names dropped."""
    environ = os.environ if environ is None else environ
    gone = dropped(environ)
    own = _own(environ)
    for key in _dropping(environ):
        del environ[key]
    environ.update(own)
    return gone


def task_blanks():
    """The ``environment:`` of a task that runs the venv's python or pip: the PYTHON* variables that change
    what it imports or how it runs blanked, and sparkforge's own."""
    env = dict((name, "") for name in TASK_BLANKS)
    env.update(OWN)
    return env


def dropped_words(names):
    """One line for the plan: which host variables were left out, and what to set instead where it matters."""
    if not names:
        return ""
    hints = ["%s: set %s" % (n, INSTEAD[n]) for n in names if n in INSTEAD]
    return ("the host's %s %s not passed to the venv's python and pip (sparkforge's runs use only their own "
            "environment)%s" % (", ".join(names), "is" if len(names) == 1 else "are",
                                "; " + "; ".join(hints) if hints else ""))
