# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One timestamp format: only _common/clock.py formats a time (utc_now, utc_file_stamp). A module or a
module_util that called strftime, isoformat or datetime.now itself would write local time without a zone,
or another layout, into a record a reader compares with the others."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import os
import re

from ansible_collections.sparkforge.stack.plugins.module_utils._common import clock

HERE = os.path.dirname(os.path.abspath(__file__))
PLUGINS = os.path.normpath(os.path.join(HERE, "..", "..", "..", "..", "plugins"))
CLOCK = os.path.join(PLUGINS, "module_utils", "_common", "clock.py")
FORMATTERS = ("strftime", "isoformat", "utcnow", "ctime", "asctime")


def python_files():
    for sub in ("modules", "module_utils"):
        for top, dirs, files in os.walk(os.path.join(PLUGINS, sub)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py"):
                    yield os.path.join(top, name)


def time_formatting(path):
    """'line: call' for each call in ``path`` that formats a time or reads datetime's clock."""
    with open(path) as handle:
        tree = ast.parse(handle.read(), path)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        attr, owner = node.func.attr, node.func.value
        owner_name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
        if attr in FORMATTERS or (attr in ("now", "today") and owner_name in ("datetime", "date")):
            found.append("%d: .%s()" % (node.lineno, attr))
    return found


def test_only_the_clock_formats_a_time():
    files = list(python_files())
    assert CLOCK in files and len(files) > 50, "the plugins were not found under %s" % PLUGINS
    offenders = {}
    for path in files:
        if path != CLOCK:
            calls = time_formatting(path)
            if calls:
                offenders[os.path.relpath(path, PLUGINS)] = calls
    assert offenders == {}, "format times with _common/clock.py (utc_now, utc_file_stamp): %s" % offenders


def test_the_rule_sees_what_it_forbids(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import datetime, time\n"
                   "a = time.strftime('%Y')\n"
                   "b = datetime.datetime.now()\n"
                   "c = datetime.datetime.now(datetime.timezone.utc).isoformat()\n"
                   "d = time.time()\n")
    assert time_formatting(str(bad)) == ["2: .strftime()", "3: .now()", "4: .isoformat()", "4: .now()"]


def test_the_clock_writes_utc_with_its_zone():
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", clock.utc_now())
    assert clock.utc_now(1764360000) == "2025-11-28T20:00:00Z"
    assert clock.utc_file_stamp(1764360000) == "20251128T200000Z"
