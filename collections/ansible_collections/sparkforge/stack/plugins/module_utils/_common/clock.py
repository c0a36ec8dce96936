# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one UTC timestamp of the collection's records, reports and logs (`2026-11-27T01:02:03Z`), and the
same instant in a file name (`20261127T010203Z`, no colons).  Nothing else formats a time: a layout test
(tests/unit/plugins/module_utils/test_one_timestamp.py) keeps it so.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

UTC_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
FILE_FORMAT = "%Y%m%dT%H%M%SZ"


def utc_now(epoch=None):
    """Now (or the time.time() value ``epoch``), in UTC, as the records and reports write it."""
    return time.strftime(UTC_FORMAT, time.gmtime(epoch))


def utc_file_stamp(epoch=None):
    """utc_now's instant as part of a file name (a log per run)."""
    return time.strftime(FILE_FORMAT, time.gmtime(epoch))
