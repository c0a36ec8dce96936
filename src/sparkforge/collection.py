"""The one door from the sparkforge package to the project's collection (issue 55, item 3).

The CLI reads the collection's Python code in three places: ``sparkforge versions --checksums`` reads .deb names and
Packages stanzas with module_utils/cuda/cusparselt.py (through sparkforge/tooling/checksums.py), ``sparkforge
bundle`` checks ``--out`` with module_utils/plan/validate.py's path rules, and ``sparkforge versions`` (both forms)
reads the version manifest's data with plugin_utils/manifest.py (``manifest_reader``), the one reader of it. Both go through ``importable``
(or ``module_utils``, which calls it), never through sys.path: an import finder, first on ``sys.meta_path``, answers
for the ``ansible_collections.sparkforge`` namespace from the project's own checkout (the copy whose roles the run
uses, wherever else one is installed), and for ``ansible_collections`` itself only where no other is importable
(``ansible`` from PyPI installs one). Everything else is imported as before.

The paths of the collection inside a checkout are here too, one place for each: ``COLLECTION_REL``,
``MANIFEST_REL`` (the version manifest's data).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib
import importlib.abc
import importlib.machinery
import os
import sys

COLLECTIONS_REL = "collections"
COLLECTION_REL = os.path.join(COLLECTIONS_REL, "ansible_collections", "sparkforge", "stack")
MANIFEST_REL = os.path.join(COLLECTION_REL, "roles", "manifest", "defaults", "main")
NAMESPACE = "ansible_collections.sparkforge"


class _ProjectCollection(importlib.abc.MetaPathFinder):
    """Finds ``ansible_collections.sparkforge`` in one checkout's collections/ directory."""

    def __init__(self, collections):
        self.collections = collections

    def find_spec(self, fullname, path=None, target=None):
        if fullname == NAMESPACE:
            inside = os.path.join(self.collections, "ansible_collections")
            return importlib.machinery.PathFinder.find_spec(fullname, [inside])
        if fullname == "ansible_collections" and importlib.machinery.PathFinder.find_spec(fullname) is None:
            return importlib.machinery.PathFinder.find_spec(fullname, [self.collections])
        return None


def importable(project_root):
    """Make ``ansible_collections.sparkforge.stack`` importable from the checkout at ``project_root`` (once per
    process: the first checkout asked for is the one imported). Returns the collection's directory, or None when
    the checkout has none."""
    collections = os.path.join(project_root, COLLECTIONS_REL)
    if not os.path.isdir(os.path.join(project_root, COLLECTION_REL)):
        return None
    if not any(isinstance(f, _ProjectCollection) for f in sys.meta_path):
        sys.meta_path.insert(0, _ProjectCollection(collections))
    return os.path.join(project_root, COLLECTION_REL)


def module_utils(project_root, name, kind="module_utils"):
    """The collection's ``plugins.module_utils.<name>`` (e.g. ``plan.validate``; ``kind`` "plugin_utils" for the
    controller-side helpers, e.g. ``manifest``) from the checkout at ``project_root``, or None where it cannot be
    imported (no collection there, a module missing)."""
    if importable(project_root) is None:
        return None
    try:
        return importlib.import_module("%s.stack.plugins.%s.%s" % (NAMESPACE, kind, name))
    except ImportError:
        return None


def manifest_reader(project_root):
    """plugin_utils/manifest.py, the one reader of the version manifest on the controller, from the checkout at
    ``project_root`` (None where the checkout has no collection)."""
    return module_utils(project_root, "manifest", kind="plugin_utils")
