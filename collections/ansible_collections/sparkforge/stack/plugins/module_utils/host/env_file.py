# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A shell file of `export NAME=value` lines, rendered from a dict, for /etc/profile.d-style sourcing, and
whose it is.

Every such file sparkforge writes starts with the line ``MANAGED`` (``# managed by sparkforge``, then how its
previous version is kept): a file at the path whose first line is not that (nor the first line an earlier
version wrote, ``LEGACY``) is the user's, and is never replaced, chowned or chmodded unless adopted. Each
rewrite of a file keeps the version it replaces as ``<path>.sparkforge-prev`` (files.keep_previous: the old
file itself, its mode and owner kept; a name /etc/profile.d's ``*.sh`` does not source).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import stat

from ansible.module_utils.six.moves import shlex_quote

from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import (
    PREV_SUFFIX,
    atomic_write_text,
    keep_previous,
)

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# The first line of every file this module renders: what makes a file at the path sparkforge's own.
MANAGED = "# managed by sparkforge"
HEADER = MANAGED + ": a rewrite keeps the version it replaces beside it, as <name>" + PREV_SUFFIX
# First lines earlier versions wrote (runtime_env's template: "# <ansible_managed> (sparkforge.stack.runtime_env)";
# the triton role's env_file comment): their files are sparkforge's own too.
LEGACY = (re.compile(r"^# .*\(sparkforge\.stack\.runtime_env\)\s*$"),
          re.compile(r"^# Written by sparkforge \(role sparkforge\.stack\.[a-z_]+\)"))


class EnvFileError(ValueError):
    pass


def render(variables, comment=""):
    """The file's text: ``HEADER``, the comment's lines as `# ...`, then one `export NAME=value` per variable, in
    the order given.  Values are shell-quoted, so a path with spaces or a `$` stays literal."""
    bad = [name for name in variables if not _NAME.match(str(name))]
    if bad:
        raise EnvFileError("not shell variable names: %s (letters, digits and _, not starting with a digit)"
                           % ", ".join(repr(b) for b in bad))
    for name, value in variables.items():
        if value is None or isinstance(value, (dict, list)):
            raise EnvFileError("%s must be a string or a number, not %r" % (name, value))
        if "\n" in str(value) or "\0" in str(value):
            raise EnvFileError("%s holds a newline or NUL byte, which an export line cannot carry" % name)
    lines = [HEADER] + ["# " + line if line else "#" for line in comment.splitlines()]
    lines += ["export %s=%s" % (name, shlex_quote(str(value))) for name, value in variables.items()]
    return "\n".join(lines) + "\n"


def is_managed(text):
    """Whether ``text`` is a file sparkforge wrote (its first line)."""
    first = text.split("\n", 1)[0]
    return first.startswith(MANAGED) or any(p.match(first) for p in LEGACY)


def _first_line(path):
    with open(path, "rb") as handle:
        return handle.readline(4096).decode("utf-8", "replace")


def ownership(path):
    """(state, words) for the file at ``path``: ``absent``, ``ours`` (its first line is sparkforge's), ``user``
    (anything else: another first line, a symlink, a file that cannot be read) or ``dir``. Reads only the
    first line: the words never carry the file's text (it may hold a token)."""
    if not os.path.lexists(path):
        return "absent", "nothing at %s" % path
    if os.path.isdir(path) and not os.path.islink(path):
        return "dir", "%s is a directory" % path
    st = os.lstat(path)
    what = "mode %04o, owner uid %d, %d bytes" % (stat.S_IMODE(st.st_mode), st.st_uid, st.st_size)
    if os.path.islink(path):
        return "user", "%s is a symlink sparkforge did not make (to %s)" % (path, os.readlink(path))
    if not stat.S_ISREG(st.st_mode):
        return "user", "%s is not a regular file (%s)" % (path, what)
    try:
        first = _first_line(path)
    except (IOError, OSError) as exc:
        return "user", "%s cannot be read (%s; %s)" % (path, exc.strerror, what)
    if is_managed(first):
        return "ours", "sparkforge's file %s" % path
    return "user", "%s is a file sparkforge did not make (its first line is not %r; %s)" % (path, MANAGED, what)


def refusal(variable, path, adopt_variable=""):
    """The message refusing the file at ``path`` (None when it is absent or sparkforge's own). ``adopt_variable``
    empty: the file cannot be adopted (only moved away or pointed elsewhere)."""
    state, words = ownership(path)
    if state != "user":
        return None
    how = ("adopt it (set %s: true: the file as it is now is kept as %s%s, with its mode and owner, and rewritten "
           "with sparkforge's exports), or " % (adopt_variable, path, PREV_SUFFIX)) if adopt_variable else \
        "move it away, or "
    return "%s=%s: %s: nothing was changed. Either %sset %s to another path" % (variable, path, words, how, variable)


def plan_write(path, text, adopt=False, variable="path", adopt_variable=""):
    """What writing ``text`` at ``path`` changes: dict(state, found, changed, kept, before) (``before``: the diff's
    text, never a user's file's own). EnvFileError, before any change, for a directory or a file that is not
    sparkforge's and not adopted."""
    state, found = ownership(path)
    if state == "dir":
        raise EnvFileError("%s=%s is a directory, not a file: nothing written" % (variable, path))
    if state == "user" and not adopt:
        raise EnvFileError(refusal(variable, path, adopt_variable))
    before = None
    if state == "ours":
        with open(path) as handle:
            before = handle.read()
    changed = before != text
    kept = path + PREV_SUFFIX if changed and state != "absent" else ""
    # The user's file may hold a token: its text is never put in the diff.
    shown = before if before is not None else (
        "" if state == "absent" else "(%s: not shown; kept as %s)\n" % (found, kept))
    return dict(state=state, found=found, changed=changed, kept=kept, before=shown)


def write(path, text, plan):
    """Make ``plan_write``'s change: the version replaced kept first, then ``text`` written atomically (0600: the
    caller gives the file its mode, never wider than asked meanwhile; the directory made when missing)."""
    if plan["kept"]:
        keep_previous(path)
    atomic_write_text(path, text, 0o600)
