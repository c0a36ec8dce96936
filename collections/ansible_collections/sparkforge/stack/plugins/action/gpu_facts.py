# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of sparkforge.stack.gpu_facts: supplies the manifest's GPU table when the task gives none.

The table's one home is roles/manifest/defaults/main/platforms.yml.  A module runs on the managed host
(AnsiballZ ships only the module and its module_utils), so it cannot read a collection file; this action
plugin runs on the controller, reads the file from the installed collection (plugin_utils/manifest.py) and passes the table as the
module's `platforms` argument, so `ansible HOST -m sparkforge.stack.gpu_facts` works without the manifest
role's variables.  A task that gives `platforms` (the roles pass sparkforge_gpu_platforms) is left as is.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.sparkforge.stack.plugins.plugin_utils import manifest

MANIFEST_PLATFORMS = "platforms.yml"


def manifest_platforms(manifest_dir=None):
    """The manifest's sparkforge_gpu_platforms, read from its one file by the one controller-side reader."""
    try:
        data = manifest.load(manifest_dir, (MANIFEST_PLATFORMS,))
    except manifest.ManifestError as err:
        raise AnsibleActionFail(f"cannot read the manifest's GPU table: {err}") from err
    table = data.get("sparkforge_gpu_platforms")
    if not isinstance(table, dict) or not table:
        raise AnsibleActionFail(f"{MANIFEST_PLATFORMS} in {manifest_dir or manifest.directory()} holds no "
                                "sparkforge_gpu_platforms table")
    return table


class ActionModule(ActionBase):
    """Runs the module with `platforms` defaulted to the manifest's table."""

    _VALID_ARGS = frozenset(("nvidia_smi", "required", "disk_paths", "timeout", "platforms"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        if args.get("platforms") is None:
            args["platforms"] = manifest_platforms()
        result.update(self._execute_module(module_name="sparkforge.stack.gpu_facts", module_args=args,
                                           task_vars=task_vars))
        return result
