"""Where the project lives: the checkout whose ansible.cfg, playbooks/ and reports/ a run uses."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

#: Repository root when running from a source checkout (src/sparkforge/api/project.py).
_SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def project_root(explicit=None):
    """Where ansible.cfg, playbooks/ and reports/ live.

    ``explicit`` wins, then ``$SPARKFORGE_HOME``, then the source checkout this
    module belongs to, then the current directory.
    """
    for candidate in (explicit, os.environ.get("SPARKFORGE_HOME")):
        if candidate:
            return os.path.abspath(candidate)
    if os.path.isfile(os.path.join(_SOURCE_ROOT, "ansible.cfg")):
        return _SOURCE_ROOT
    return os.getcwd()
