"""The actions the CLI offers: plan, provision, verify, status, rollback and bundle, each one
playbook run with its own variables and checks of its arguments."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import yaml

from sparkforge.collection import COLLECTION_REL, module_utils

from .project import project_root
from .runs import _error_result, parse_extravars, run_playbook


def plan(inventory, limit=None, extravars=None, playbook=None, tags=("preflight",), on_event=None, **kwargs):
    """Preflight only, in check mode: each host's ``sparkforge_plan`` fact and problems."""
    try:
        extra = parse_extravars([extravars] if isinstance(extravars, (dict, str)) else extravars)
    except (ValueError, OSError, yaml.YAMLError) as exc:
        return _error_result("plan", str(exc), inventory=inventory, limit=limit, check=True)
    extra.setdefault("sparkforge_plan_only", True)
    kwargs.pop("check", None)
    return run_playbook("plan", inventory, playbook=playbook, limit=limit, extravars=extra, check=True,
                        tags=tags, on_event=on_event, **kwargs)


def provision(inventory, limit=None, extravars=None, check=False, tags=None, on_event=None, playbook=None,
              **kwargs):
    """Run the whole playbook (or only ``tags``)."""
    return run_playbook("provision", inventory, playbook=playbook, limit=limit, extravars=extravars,
                        check=check, tags=tags, on_event=on_event, **kwargs)


def verify(inventory, limit=None, extravars=None, on_event=None, playbook=None, tags=("verify",), **kwargs):
    """Run the verify part of the playbook (tag ``verify``)."""
    return run_playbook("verify", inventory, playbook=playbook, limit=limit, extravars=extravars,
                        tags=tags, on_event=on_event, **kwargs)


def status(inventory, limit=None, extravars=None, on_event=None, playbook=None, **kwargs):
    """What every host runs, read from the hosts (their generation record and venv), against the
    controller's generations: ``RunResult.generations`` has a row per host with its verdict."""
    kwargs.pop("check", None)
    return run_playbook("status", inventory, playbook=playbook or os.path.join("playbooks", "status.yml"),
                        limit=limit, extravars=extravars, on_event=on_event, **kwargs)


def rollback(inventory, to=None, limit=None, extravars=None, on_event=None, playbook=None, **kwargs):
    """Put hosts back on generation ``to`` of their class (default: each host's previous one).  Every
    target is checked before any host changes; ``RunResult.generations`` is the status after."""
    try:
        extra = parse_extravars([extravars] if isinstance(extravars, (dict, str)) else extravars)
    except (ValueError, OSError, yaml.YAMLError) as exc:
        return _error_result("rollback", str(exc), inventory=inventory, limit=limit)
    if to is not None:
        if not str(to).isdigit() or int(to) < 1:
            return _error_result("rollback", "--to takes a generation number (1, 2, ...), got %r" % (to,),
                                 inventory=inventory, limit=limit)
        extra["sparkforge_rollback_to"] = int(to)
    kwargs.pop("check", None)
    return run_playbook("rollback", inventory, playbook=playbook or os.path.join("playbooks", "rollback.yml"),
                        limit=limit, extravars=extra, on_event=on_event, **kwargs)


def bundle(inventory, out=None, limit=None, extravars=None, on_event=None, playbook=None, **kwargs):
    """Make an offline bundle in ``out`` (a directory on this machine) of everything the inventory's
    plans fetch: playbooks/bundle.yml, each host planned with probing off, then the controller fetches.
    Use it on the air-gapped side with ``sparkforge_bundle: <out>``."""
    try:
        extra = parse_extravars([extravars] if isinstance(extravars, (dict, str)) else extravars)
    except (ValueError, OSError, yaml.YAMLError) as exc:
        return _error_result("bundle", str(exc), inventory=inventory, limit=limit)
    if not out:
        return _error_result("bundle", "--out DIR is required: where the bundle is written", inventory=inventory,
                             limit=limit)
    problem = _out_dir_problem(out, kwargs.get("project_dir"))
    if problem:
        return _error_result("bundle", problem, inventory=inventory, limit=limit)
    out = os.path.abspath(out)
    extra["sparkforge_bundle_out"] = out
    kwargs.pop("check", None)
    return run_playbook("bundle", inventory, playbook=playbook or os.path.join("playbooks", "bundle.yml"),
                        limit=limit, extravars=extra, on_event=on_event, **kwargs)


def _out_dir_problem(out, project_dir=None):
    """Why ``out`` cannot be the bundle directory, or None: it (or a parent) is not a directory, or the
    path rules of the collection's validate module refuse it (a system directory, inside the checkout)."""
    path = os.path.abspath(out)
    if os.path.exists(path) and not os.path.isdir(path):
        return "--out %s exists and is not a directory" % path
    parent = os.path.dirname(path)
    while parent and not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if parent and not os.path.isdir(parent):
        return "--out %s: %s is a regular file, not a directory: give a directory path" % (out, parent)
    root = project_root(project_dir)
    validate = _collection_validate(root)
    if validate is not None:
        collection = os.path.join(root, COLLECTION_REL)
        try:
            validate.check_one("sparkforge_bundle_out", path, {"type": "path"}, validate.protected_dirs(collection))
        except validate.Invalid as exc:
            return "--out %s: %s" % (out, exc)
    return None


def _collection_validate(root):
    """The collection's module_utils/plan/validate (the project's copy), or None where it cannot be imported."""
    return module_utils(root, "plan.validate")
