# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Generic file helpers of the collection: directories, atomic writes and publishes, sha256
digests, canonical JSON, the tail of a log, /proc/meminfo.

Plain functions, no Ansible imports: every module_utils domain uses them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import errno
import hashlib
import json
import os
import shutil
import tempfile


def makedirs(path, mode=0o755):
    try:
        os.makedirs(path, mode)
    except OSError as exc:
        if exc.errno != errno.EEXIST:
            raise


@contextlib.contextmanager
def atomic_file(path, mode=0o644, prefix=None, suffix=""):
    """A binary handle whose bytes become ``path`` only when the block ends without an error.

    The collection's one atomic write: a temporary file in the same directory (same file system, so the
    rename is atomic), flushed and fsynced, given ``mode``, then renamed over ``path``.  A reader sees the
    old file or the new one, never half; on any failure the old file is untouched and the temporary file
    is removed.  ``prefix``/``suffix`` name the temporary file (default ``.<name>.``) for a sweeper that
    removes ones a killed run left.
    """
    directory = os.path.dirname(path) or "."
    makedirs(directory)
    fd, tmp = tempfile.mkstemp(prefix=prefix or ".%s." % os.path.basename(path), suffix=suffix, dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_bytes(path, data, mode=0o644):
    """Replace ``path`` by ``data`` atomically (see atomic_file), with ``mode``."""
    with atomic_file(path, mode) as handle:
        handle.write(data)


def atomic_write_text(path, text, mode=0o644):
    """Replace ``path`` by ``text`` (UTF-8) atomically (see atomic_file), with ``mode``."""
    atomic_write_bytes(path, text.encode("utf-8"), mode)


# The name beside a file that holds the version a rewrite replaced (env_file): never `*.sh`, so /etc/profile.d
# does not source it.
PREV_SUFFIX = ".sparkforge-prev"


def keep_previous(path, suffix=PREV_SUFFIX):
    """Keep the file at ``path`` as ``path + suffix`` before it is replaced (a rewrite keeps its previous
    version): the file itself, hard-linked (its mode, owner and text as they were; the atomic replace that
    follows gives ``path`` a new inode), or, where a link cannot be made, a copy made 0600 first and then given
    the original's mode and owner (a file holding a token is never readable wider than before). An earlier kept
    version is replaced. Returns the kept path."""
    prev = path + suffix
    # One name, not one per process: one run at a time on a host (the run lock), and a killed run's leftover is
    # replaced by the next, never left to pile up.
    tmp = prev + ".tmp"
    if os.path.lexists(tmp):
        os.unlink(tmp)
    try:
        os.link(path, tmp, follow_symlinks=False)
    except OSError:
        st = os.lstat(path)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as out, open(path, "rb") as inp:
                shutil.copyfileobj(inp, out)
                try:
                    os.fchown(out.fileno(), st.st_uid, st.st_gid)
                except OSError:
                    pass  # not root: the copy stays this user's, 0600 at most
                os.fchmod(out.fileno(), st.st_mode & 0o7777)
        except BaseException:
            os.unlink(tmp)
            raise
    os.replace(tmp, prev)
    return prev


def atomic_publish(src, dest_dir, name=None):
    """Copy ``src`` into ``dest_dir`` so that the final name appears only when whole (mode 0644).

    The temporary name is ``.partial-*.tmp`` (triton_job sweeps those a killed run left).
    """
    final = os.path.join(dest_dir, name or os.path.basename(src))
    with atomic_file(final, 0o644, prefix=".partial-", suffix=".tmp") as out, open(src, "rb") as inp:
        shutil.copyfileobj(inp, out, 1024 * 1024)
    return final


def sha256_file(path, chunk=1024 * 1024):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while True:
            block = handle.read(chunk)
            if not block:
                break
            digest.update(block)
    return digest.hexdigest()


def sha256_paths(paths):
    """One digest over several files (e.g. patch files), order-sensitive."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(os.path.basename(path).encode("utf-8"))
        digest.update(sha256_file(path).encode("ascii"))
    return digest.hexdigest()


def canonical_json(data):
    return json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)


def log_tail(path, lines=40):
    """The last ``lines`` lines of a log file (best effort)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 64 * 1024))
            data = handle.read().decode("utf-8", "replace")
    except (IOError, OSError):
        return ""
    return "\n".join(data.splitlines()[-lines:])


def read_meminfo(path="/proc/meminfo"):
    """Return MemTotal/MemAvailable (bytes) from a meminfo file."""
    values = {}
    with open(path) as handle:
        for line in handle:
            key, dummy, rest = line.partition(":")
            parts = rest.split()
            if parts and parts[0].isdigit():
                factor = 1024 if len(parts) > 1 and parts[1].lower() == "kb" else 1
                values[key.strip()] = int(parts[0]) * factor
    return {
        "total": values.get("MemTotal", 0),
        "available": values.get("MemAvailable", values.get("MemFree", 0)),
    }
