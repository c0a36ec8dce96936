# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one UTC timestamp of the collection's records and reports (`2026-11-27T01:02:03Z`).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

UTC_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def utc_now():
    """Now, in UTC, as the records and reports write it."""
    return time.strftime(UTC_FORMAT, time.gmtime())
