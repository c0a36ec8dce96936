# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Programs the cross-host check runs with the stack's python (``python -c SOURCE``), kept as real Python files."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def source_of(module):
    """A script module's source text, through the loader that imported it: a checkout's file, or the AnsiballZ zip
    (zipimport) on a remote host, where no file of that path exists to open."""
    text = module.__loader__.get_source(module.__name__)
    if not text:
        raise ImportError("no source for %s from its loader" % module.__name__)
    return text
