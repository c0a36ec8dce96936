# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A shell file of `export NAME=value` lines, rendered from a dict, for /etc/profile.d-style sourcing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.six.moves import shlex_quote

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class EnvFileError(ValueError):
    pass


def render(variables, comment=""):
    """The file's text: the comment's lines as `# ...`, then one `export NAME=value` per variable, in the
    order given.  Values are shell-quoted, so a path with spaces or a `$` stays literal."""
    bad = [name for name in variables if not _NAME.match(str(name))]
    if bad:
        raise EnvFileError("not shell variable names: %s (letters, digits and _, not starting with a digit)"
                           % ", ".join(repr(b) for b in bad))
    for name, value in variables.items():
        if value is None or isinstance(value, (dict, list)):
            raise EnvFileError("%s must be a string or a number, not %r" % (name, value))
        if "\n" in str(value) or "\0" in str(value):
            raise EnvFileError("%s holds a newline or NUL byte, which an export line cannot carry" % name)
    lines = ["# " + line if line else "#" for line in comment.splitlines()]
    lines += ["export %s=%s" % (name, shlex_quote(str(value))) for name, value in variables.items()]
    return "\n".join(lines) + "\n"
