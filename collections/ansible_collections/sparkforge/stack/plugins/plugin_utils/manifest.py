# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one controller-side reader of the version manifest (roles/manifest/defaults/main/*.yml).

Plays see the manifest as the manifest role's defaults; code on the controller that needs the same data outside a
play (the CLI's ``sparkforge versions`` and ``--checksums``, the unit tests' harness) reads it here, merged as Ansible
merges a ``defaults/main/`` directory: each file's top-level keys, the files in name order.  A key defined in two
files is refused: one place for each fact.  plugin_utils is never sent to a managed host (modules get the data as
arguments), so this may use PyYAML, which the controller's Ansible needs anyway.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os

import yaml

# The manifest's data, relative to the collection's root.
DEFAULTS_REL = os.path.join("roles", "manifest", "defaults", "main")


class ManifestError(Exception):
    """The manifest cannot be read; the message names the file and why."""


def directory(collection_root=None):
    """The manifest's data directory of ``collection_root`` (default: the collection holding this file)."""
    root = collection_root or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.path.join(root, DEFAULTS_REL)


def load(manifest_dir=None, files=None):
    """The merged data of ``manifest_dir`` (default: this collection's), every ``*.yml`` or only ``files`` (names
    in it, e.g. ``("torch.yml",)``).  Raises ManifestError for a missing directory or file, a file that is not a
    mapping, or a key that two files define."""
    manifest_dir = manifest_dir or directory()
    if not os.path.isdir(manifest_dir):
        raise ManifestError("%s: no manifest directory here" % manifest_dir)
    paths = ([os.path.join(manifest_dir, name) for name in files] if files is not None
             else sorted(glob.glob(os.path.join(manifest_dir, "*.yml"))))
    data, where = {}, {}
    for path in paths:
        try:
            with open(path) as handle:
                part = yaml.safe_load(handle)
        except (IOError, OSError) as exc:
            raise ManifestError("%s: cannot read it (%s)" % (path, exc))
        except yaml.YAMLError as exc:
            raise ManifestError("%s is not YAML: %s" % (path, exc))
        if part is None:
            continue
        if not isinstance(part, dict):
            raise ManifestError("%s: the manifest's files are mappings of variables, this one is a %s"
                                % (path, type(part).__name__))
        for key in part:
            if key in where:
                raise ManifestError("%s is defined in both %s and %s: one place for each fact"
                                    % (key, os.path.basename(where[key]), os.path.basename(path)))
            where[key] = path
        data.update(part)
    return data
