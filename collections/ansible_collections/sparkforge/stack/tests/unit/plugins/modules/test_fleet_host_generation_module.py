# -*- coding: utf-8 -*-
"""fleet_host_generation (issue 52): a file at the record's path that sparkforge did not write is never marked
(written over), in check mode too; a read returns no record and says why; sparkforge's record is marked."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import generations as gen
from ansible_collections.sparkforge.stack.tests.unit.utils.harness import run_module


def test_a_users_file_at_the_record_path_is_never_marked(tmp_path):
    path = tmp_path / "generation.json"
    text = json.dumps({"generation": 3, "state": "installed", "mine": True})
    path.write_text(text)
    for check in (True, False):
        res, rc = run_module("fleet_host_generation", {"record": str(path), "state": "failed", "generation": 3},
                             check_mode=check)
        assert rc != 0 and res["msg"].startswith("sparkforge_host_generation_file=%s: %s is a file sparkforge did "
                                                 "not write" % (path, path)), ("O17", res)
        assert "Move it away" in res["msg"] and path.read_text() == text
    res, rc = run_module("fleet_host_generation", {"record": str(path)})
    assert rc == 0 and res["record"] == {} and res["foreign"].startswith("sparkforge_host_generation_file="), res
    # Moved away: sparkforge's own record (written by this version) is marked.
    path.unlink()
    gen.write_host(str(path), gen.host_transition({}, {"lineage": "L", "class": "c", "number": 3}, "installed",
                                                  "first", "t"))
    res, rc = run_module("fleet_host_generation", {"record": str(path), "state": "verified", "generation": 3})
    assert rc == 0 and res["changed"] and gen.read_host(str(path))["state"] == "verified", res
