# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One run of fleet_wheel_install: a host's copies of its class's wheels checked against the
builder's sha256, then the venv brought to exactly those wheels with the host's generation record
moved through installing to installed.

The job has the shape of module_utils/_common/job.py: ``FleetWheelInstallJob(params, system, check_mode)``.
``plan()`` refuses bad input and copies that are not the builder's before anything changes, and
says what would be reinstalled and how the host's generation moves; ``apply(plan)`` writes the
record, makes the venv, runs pip and records the install.  Commands go through the ``system``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import platform
import re

from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import fleet_wheels as fw
from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import generations as gen
from ansible_collections.sparkforge.stack.plugins.module_utils.host.venv import VenvJob
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import Job, JobError, Plan, output_tail
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import wheel_check
from ansible_collections.sparkforge.stack.plugins.module_utils.packages.pip_env import CONFIG_OFF
from ansible_collections.sparkforge.stack.plugins.module_utils._common.clock import utc_now


GOOD = ("verified", "rolled_back")  # states a host passed the gate in


def rollback_target(record, target):
    """(generation, lineage) a failed move to ``target`` goes back to: the one the host ran before, which is
    the record's previous one when the record is already on ``target`` (its gate not passed) or an install
    was interrupted; (None, None) when there is none."""
    on_target = (record.get("lineage"), record.get("generation")) == (target["lineage"], target["number"])
    entry = record if not on_target and record.get("state") in GOOD + ("installed",) else record.get("previous")
    entry = entry or {}
    return entry.get("generation"), entry.get("lineage")


def how_to(record, target, reason):
    """The record's ``how`` for reaching ``target`` ({class, number}) from ``record``."""
    if not record:
        return "first install (generation %d)" % target["number"]
    if record.get("state") == "installing":
        return "repair: the install of generation %s was interrupted" % record.get("generation")
    if record.get("lineage") != target["lineage"]:
        return "%s from generation %s of %s" % (reason, record.get("generation"), record.get("lineage"))
    if record.get("generation") == target["number"]:
        return record.get("how") or reason
    return "%s from generation %s" % (reason, record.get("generation"))


_PYVENV_VERSION = re.compile(r"^version(?:_info)?\s*=\s*(\d+)\.(\d+)", re.M)


def venv_python_version(venv):
    """X.Y of the venv's Python from its pyvenv.cfg (`version`, or uv's `version_info`); None when unknown."""
    try:
        with open(os.path.join(venv, "pyvenv.cfg")) as handle:
            found = _PYVENV_VERSION.search(handle.read())
    except (IOError, OSError):
        return None
    return "%s.%s" % found.groups() if found else None


class FleetWheelInstallJob(Job):
    """params: fleet_wheel_install's options; system: module_utils/_common/job.py's seam."""

    def plan(self):
        p = self.params
        target = p["generation"]
        if target is not None:
            try:
                target = dict(target, number=int(str(target.get("number"))))
            except ValueError:
                target = dict(target, number=None)
            if not target.get("lineage") or not target.get("class") or target["number"] is None \
                    or target["number"] < 1:
                raise JobError("generation needs lineage, class and number (a whole number from 1), got %r"
                               % (p["generation"],))
        # Whose the record's path is, before anything changes (check mode too): never a file of the user's.
        why = gen.host_refusal(p["host_record"]) if p["host_record"] else None
        if why:
            raise JobError(why)
        host_before = gen.read_host(p["host_record"]) if p["host_record"] else None
        extra = {}
        if host_before is not None:
            extra = dict(host_generation=host_before, partial=host_before.get("state") == "installing")
        if target is not None:
            extra["how"] = how_to(host_before, target, target.get("reason") or "upgrade")
            # Moving: another generation, or this one not yet through the gate.
            extra["upgrading"] = (host_before.get("generation"), host_before.get("lineage")) != (
                target["number"], target["lineage"]) or host_before.get("state") not in GOOD
            extra["rollback_to"], extra["rollback_lineage"] = rollback_target(host_before, target) \
                if extra["upgrading"] else (None, None)
        incomplete = [w for w in p["wheels"] if not all(w.get(k) for k in ("name", "file", "sha256"))]
        if incomplete:
            raise JobError("wheel entries need name, file and sha256: %s" % incomplete)
        hashes = fw.HashCache(p["wheel_dir"], rehash=p["rehash"], write=not self.check_mode)
        bad = fw.check_copies(p["wheel_dir"], p["wheels"], hashes)
        hashes.save()
        record_path = os.path.join(p["venv"], fw.RECORD_NAME)
        before = fw.read_record(record_path)
        if bad and p["copies"] == "report":
            # No wheel_sha256 here: the host does not hold these wheels yet (the API reads it as installed).
            return Plan([], dict(changed=False, to_copy=[b[0] for b in bad], installed=before, reinstalled=[],
                                 **extra))
        if bad:
            raise JobError("the class's wheels on this host are not the builder's, nothing installed: %s"
                           % "; ".join("%s %s" % item for item in bad), mismatches=[b[0] for b in bad])
        todo = fw.to_install(p["wheels"], before)
        self.refuse_uninstallable(todo)
        after = dict((w["name"], w["sha256"]) for w in p["wheels"])
        # The host record changes when the host holds another generation, or the last install was interrupted.
        record_moves = target is not None and (
            host_before.get("generation") != target["number"] or host_before.get("state") in ("installing", "failed")
            or host_before.get("lineage") != target["lineage"])
        result = dict(changed=bool(todo) or before != after or record_moves, to_copy=[], installed=after,
                      reinstalled=[w["name"] for w in todo],
                      wheel_sha256=dict((w["file"], w["sha256"]) for w in p["wheels"]),
                      diff=dict(before=before, after=after, before_header=record_path, after_header=record_path),
                      **extra)
        changes = ["reinstall %s: not what the venv's record holds" % w["file"] for w in todo]
        if before != after and not todo:
            changes.append("record %s: the venv's record differs from the class's wheels" % record_path)
        if record_moves:
            changes.append("move the host record %s to generation %s of %s: %s"
                           % (p["host_record"], target["number"], target["lineage"], extra["how"]))
        state = {"target": target, "host_before": host_before, "todo": todo, "after": after,
                 "record_path": record_path, "record_moves": record_moves, "how": extra.get("how")}
        return Plan(changes, result, state)

    def python_version(self):
        """X.Y of the Python the wheels go into: the venv's, or (no venv yet) the one it will be made with."""
        found = venv_python_version(self.params["venv"])
        if found or os.path.exists(os.path.join(self.params["venv"], "bin", "python")):
            return found
        rc, out, _err = self.system.run([self.params["python"], "-c",
                                         "import sys; print('%d.%d' % sys.version_info[:2])"])
        out = (out or "").strip()
        return out if rc == 0 and re.match(r"^\d+\.\d+$", out) else None

    def refuse_uninstallable(self, todo):
        """The checks the local wheelhouse gets in preflight (packages/wheel_check.py: the Python and platform tags
        against this host, manylinux's glibc, METADATA's name, version and local tag against the file name), on
        each of the class's wheels this host would install; JobError naming each wheel and why, before anything
        is installed (check mode too)."""
        if not todo:
            return
        version, machine, glibc = self.python_version(), platform.machine(), wheel_check.host_glibc()
        bad = []
        for wheel in todo:
            path = os.path.join(self.params["wheel_dir"], wheel["file"])
            why = wheel_check.install_problem(path, version, machine, glibc)
            if why:
                bad.append((wheel["file"], "%s %s" % (path, why)))
        if bad:
            raise JobError("the class's wheels cannot be installed on this host (Python %s, %s, glibc %s), nothing "
                           "installed: %s" % (version or "not known", machine, glibc or "not known",
                                              "; ".join(b[1] for b in bad)), uninstallable=[b[0] for b in bad])

    def apply(self, plan):
        p, state = self.params, plan.state
        target, todo, after, how = state["target"], state["todo"], state["after"], state["how"]
        now = utc_now()
        if state["record_moves"]:
            gen.write_host(p["host_record"], gen.host_transition(state["host_before"], target, "installing", how, now,
                                                                 after))
        python = os.path.join(p["venv"], "bin", "python")
        if not os.path.exists(python):
            # Made as the stack venv is made (host/venv.py: pending file, then the completion marker), so that the
            # next run knows it as sparkforge's own and preflight does not refuse it as the user's (issue 52).
            VenvJob(dict(path=p["venv"], python=p["python"]), self.system, False).run()
        if todo:
            rc, out, err = self.system.run(fw.install_argv(python, p["wheel_dir"], todo, p["pip_extra_args"]),
                                           dict(CONFIG_OFF))
            if rc != 0:
                tail = "\n".join((err or out).strip().splitlines()[-15:])
                files = ", ".join(w["file"] for w in todo)
                raise JobError("pip could not install %s (exit %d):\n%s" % (files, rc, tail),
                               tail=output_tail(out, err), stdout=out, stderr=err)
        fw.write_record(state["record_path"], after)
        if state["record_moves"]:
            written = gen.read_host(p["host_record"])
            gen.write_host(p["host_record"], gen.host_transition(written, target, "installed", how, now, after))
        return plan.result

    def report(self, plan, diff):
        return self.with_venv_state(plan.result)

    def applied(self, result, plan, diff):
        return self.with_venv_state(result)

    def with_venv_state(self, result):
        """What the venv now holds of ``venv_state`` (one process), for the roles after the install."""
        names = self.params["venv_state"]
        if names:
            python = os.path.join(self.params["venv"], "bin", "python")
            result["venv_state"] = fw.read_venv_state(self.system.run, python, names)
        return result
