# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a run may create something: the one home of the rules that the controller's check of the
variables (plan/validate.py, on the path as given) and each host's check (host/host_paths.py, on the path
resolved there) both apply, so a symlink to /usr or into the checkout is judged by where it leads."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

# A venv, prefix, build, wheel or report path is never one of these directories itself (a venv at /usr
# would be `python3 -m venv /usr`); a path below them is fine (/opt/sparkforge, /srv/wheels).
SYSTEM_DIRS = ("/", "/usr", "/usr/local", "/usr/bin", "/usr/lib", "/usr/share", "/etc", "/bin", "/sbin", "/lib",
               "/lib64", "/var", "/var/lib", "/opt", "/home", "/root", "/boot", "/dev", "/proc", "/sys", "/tmp",
               "/srv", "/mnt", "/media", "/run", "/snap")

# What the controller keeps in the directory ansible-playbook runs in by default (the checkout, run from its
# root): its reports (git-ignored) and the cluster's SSH keys (cluster_ssh_key_dir).
CHECKOUT_WRITABLE = ("reports", ".sparkforge-cluster-keys")


def inside(path, root):
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root + "/")


def normal(path):
    """The path without '.', '..', doubled or trailing slashes (a leading // as /)."""
    path = os.path.normpath(path)
    if path.startswith("//"):
        path = "/" + path.lstrip("/")
    return path


def place_problem(path, protected=()):
    """Why nothing may be created at the absolute ``path`` (None when it may): a system directory itself,
    or inside a protected directory (``protected``: (directory, the parts of it that may be written) pairs)."""
    path = normal(path)
    if path in SYSTEM_DIRS:
        return "is a system directory: give a directory of its own below it, e.g. %s/sparkforge" % path.rstrip("/")
    for root, writable in protected or ():
        if inside(path, root) and not any(inside(path, os.path.join(root, w)) for w in writable):
            return "is inside %s: nothing is created there; give a path outside it" % root
    return None


def resolved_place_problem(path, protected=()):
    """place_problem of where ``path`` leads on this machine (every symlink of it resolved), saying so when
    that differs from the path as written; None when it may be used."""
    if not path or not os.path.isabs(path):
        return None
    real = os.path.realpath(path)
    why = place_problem(real, [(os.path.realpath(root), writable) for root, writable in protected or ()])
    if why is None:
        return None
    if real != normal(path):
        return "resolves to %s (a symlink), which %s" % (real, why)
    return why


def protected_dirs(collection_dir):
    """(directory, writable part) pairs nothing may be created in: the collection, and the checkout it is part of
    (collections/ansible_collections/sparkforge/stack under a directory with ansible.cfg) but its reports/."""
    if not collection_dir:
        return []
    # The real directory: the collection is also reached through <checkout>/playbooks/collections (a link).
    collection_dir = os.path.realpath(collection_dir)
    out = [(collection_dir, ())]
    checkout = collection_dir
    for part in ("stack", "sparkforge", "ansible_collections", "collections"):
        if os.path.basename(checkout) != part:
            return out
        checkout = os.path.dirname(checkout)
    if os.path.isfile(os.path.join(checkout, "ansible.cfg")):
        out.append((checkout, CHECKOUT_WRITABLE))
    return out
