# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""pip isolated from the host's pip configuration: one helper for every pip call of the stack.

A host's pip configuration (pip.conf in /etc, ~/.config/pip, the venv's own pip.conf, and every
``PIP_<OPTION>`` variable in the environment, e.g. a stray ``PIP_FIND_LINKS`` from /etc/environment)
adds package sources nobody planned: a wheelhouse without torch then gives the CPU torch of some other
directory.  pip's own switches (pip's documentation, "Configuration"):

* ``PIP_CONFIG_FILE=os.devnull``: no configuration file is loaded at all (global, user, site);
* ``--isolated``: environment variables and the user's configuration are ignored.

Callers that run pip as an argument list (the roles' command tasks) use :func:`isolated_argv`: the
plan's own pip settings (``triton_pip_env``...) become command-line options, since ``--isolated``
would drop them as environment variables.  Callers that set the process environment themselves
(modules, the bundle) use :func:`isolated_environ`: every ``PIP_*`` of the host dropped, the plan's
kept.  Both take the host's ``PYTHON*`` variables out as well (module_utils/_common/run_env.py, the one
place that says what of the host's environment reaches the venv's python and pip).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shlex

from ansible_collections.sparkforge.stack.plugins.module_utils._common import run_env

# What turns pip's configuration files off (pip reads none when it names os.devnull).
CONFIG_OFF = {"PIP_CONFIG_FILE": os.devnull}

# pip options given as PIP_<NAME> that are switches (no value) or lists (whitespace-separated values).
SWITCHES = frozenset(["no_index", "pre", "no_deps", "no_build_isolation", "no_cache_dir", "require_hashes",
                      "prefer_binary", "no_input", "disable_pip_version_check", "force_reinstall",
                      "ignore_installed", "upgrade", "no_color", "quiet", "verbose"])
LISTS = frozenset(["find_links", "extra_index_url", "trusted_host", "constraint"])
TRUE_WORDS = frozenset(["1", "true", "yes", "on"])
FALSE_WORDS = frozenset(["0", "false", "no", "off", ""])


class PipEnvError(ValueError):
    """A pip setting of the plan has no command-line form."""


def is_pip_variable(name):
    return str(name).startswith("PIP_")


def split_env(plan_env):
    """(pip settings, other variables) of the plan's environment dict (proxies stay environment)."""
    pip, other = {}, {}
    for key, value in (plan_env or {}).items():
        (pip if is_pip_variable(key) else other)[str(key)] = "" if value is None else str(value)
    return pip, other


def options_from_env(pip_settings, variable="the pip environment"):
    """pip command-line options for the plan's ``PIP_<OPTION>`` settings (PIP_CONFIG_FILE excluded:
    it stays an environment variable, the one pip reads even under --isolated)."""
    out = []
    for key in sorted(pip_settings):
        value = pip_settings[key]
        name = key[4:].lower()
        if name == "config_file":
            continue
        flag = "--" + name.replace("_", "-")
        if name in SWITCHES:
            word = value.strip().lower()
            if word in TRUE_WORDS:
                out.append(flag)
            elif word not in FALSE_WORDS:
                raise PipEnvError("%s sets %s=%r: a switch takes 1/true/yes or 0/false/no" % (variable, key, value))
        elif name in LISTS:
            for item in value.split():
                out += [flag, item]
        elif value.strip():
            out += [flag, value.strip()]
    return out


def isolated_argv(python, subcommand, args, plan_env=None, extra_args="", variable="the pip environment"):
    """``python -m pip <subcommand> --isolated <plan's options> <extra_args words> <args>``."""
    pip_settings = split_env(plan_env)[0]
    return ([python, "-m", "pip", subcommand, "--isolated"] + options_from_env(pip_settings, variable)
            + shlex.split(extra_args or "") + list(args))


def task_environment(plan_env=None):
    """The environment of a task that runs the venv's python or pip: the host's PYTHON* variables that
    matter blanked (run_env.task_blanks), the plan's non-pip variables (proxies, build settings), its
    PIP_CONFIG_FILE when it names one, and otherwise pip's configuration files off."""
    pip_settings, other = split_env(plan_env)
    env = run_env.task_blanks()
    env.update(other)
    env["PIP_CONFIG_FILE"] = pip_settings.get("PIP_CONFIG_FILE") or os.devnull
    return env


def isolated_environ(environ, plan_env=None):
    """A copy of ``environ`` without any of the host's PIP_* and PYTHON* variables, with the plan's
    (``plan_env``) and pip's configuration files off unless the plan names a file."""
    return run_env.child_environ(environ, plan_env)[0]


def scrub_process_environ(environ=None):
    """Drop the host's PIP_* and PYTHON* variables from this process's environment (a module, whose
    run_command can add variables but not remove them); the names dropped (run_env.scrub)."""
    return run_env.scrub(environ)
