"""The collection runs on ansible-core alone (what `scripts/spark` installs; pyproject's dependencies).

The test environment also has the `ansible` package (molecule's podman connection, ansible-lint), and
ansible-core quietly redirects some `ansible.builtin.*` names to its collections: a name that is not
ansible-core's own then works in the tests and fails on a user's controller ("The lookup plugin
'ansible.builtin.filetree' was not found", seen on the GPU test machine). Every module and lookup the
collection's roles and playbooks name must be ansible-core's own or the collection's.
"""

import glob
import os
import re

import ansible

from helpers import COLLECTION, REPO

CORE = os.path.dirname(os.path.abspath(ansible.__file__))
FILES = sorted(glob.glob(os.path.join(COLLECTION, "roles", "**", "*.yml"), recursive=True)
               + glob.glob(os.path.join(COLLECTION, "playbooks", "*.yml"))
               + glob.glob(os.path.join(REPO, "playbooks", "*.yml")))


def names(pattern):
    found = {}
    for path in FILES:
        with open(path) as handle:
            for name in re.findall(pattern, handle.read()):
                found.setdefault(name, os.path.relpath(path, REPO))
    return found


def test_every_builtin_lookup_is_ansible_cores_own():
    lookups = names(r"""(?:lookup|query)\(\s*['"]ansible\.builtin\.(\w+)['"]""")
    assert lookups, "no lookups found: the pattern is wrong"
    missing = dict((n, f) for n, f in lookups.items()
                   if not os.path.exists(os.path.join(CORE, "plugins", "lookup", n + ".py")))
    assert missing == {}, "not in ansible-core (only reached through a redirect to another collection): %s" % missing


def test_every_builtin_module_is_ansible_cores_own():
    modules = {}
    for path in FILES:
        with open(path) as handle:
            for name in re.findall(r"(?m)^\s*(?:- )?ansible\.builtin\.(\w+):", handle.read()):
                modules.setdefault(name, os.path.relpath(path, REPO))
    assert modules, "no modules found: the pattern is wrong"
    missing = dict((n, f) for n, f in modules.items()
                   if not os.path.exists(os.path.join(CORE, "modules", n + ".py"))
                   and not os.path.exists(os.path.join(CORE, "plugins", "action", n + ".py")))
    assert missing == {}, missing


def test_no_other_collection_is_named():
    other = names(r"\b((?:community|ansible\.posix|containers\.podman|ansible\.utils)\.[\w.]+)")
    assert other == {}, "the collection needs only ansible-core: %s" % other
