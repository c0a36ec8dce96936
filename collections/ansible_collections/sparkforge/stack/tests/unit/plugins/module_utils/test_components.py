# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The component list lives once, in validate.COMPONENTS.  Python derives from it (preflight imports it);
YAML cannot import it, so the manifest's default and the plays' gates are checked against it here: a
component added to the tuple without its play (or a play gated on a name the tuple lacks) fails."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

import yaml

from ansible_collections.sparkforge.stack.plugins.module_utils.plan import preflight, validate

COLLECTION = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
GATE = re.compile(r"'(\w+)' in sparkforge_components")


def _load(*parts):
    with open(os.path.join(COLLECTION, *parts)) as handle:
        return yaml.safe_load(handle)


def _tasks(items):
    """Every task of a task list, blocks flattened, in file order."""
    for task in items or []:
        yield task
        for key in ("block", "rescue", "always"):
            yield from _tasks(task.get(key))


def _when(entry):
    when = entry.get("when") or []
    return " and ".join(when) if isinstance(when, list) else str(when)


def _role_name(task):
    for key in ("ansible.builtin.include_role", "ansible.builtin.import_role", "include_role", "import_role"):
        if isinstance(task.get(key), dict):
            return task[key].get("name")
    return None


def _task_file(task):
    for key in ("ansible.builtin.include_tasks", "ansible.builtin.import_tasks", "include_tasks", "import_tasks"):
        value = task.get(key)
        value = value.get("file") if isinstance(value, dict) else value
        if isinstance(value, str) and "{{" not in value:
            return value
    return None


def _role_gates(role, tasks_file, found):
    """The gates of a role's task file, in order, following its static include_tasks/import_tasks."""
    path = os.path.join(COLLECTION, "roles", role, "tasks", tasks_file)
    if not os.path.isfile(path):
        return
    for task in _tasks(_load("roles", role, "tasks", tasks_file)):
        included = _role_name(task)
        for component in GATE.findall(_when(task)):
            found.append((component, included.split(".")[-1] if included else None))
        if _task_file(task):
            _role_gates(role, _task_file(task), found)


def provisioning_gates():
    """(component gated, role it runs or None) in the order spark.yml runs them, through the roles the plays
    list (fleet_build and fleet_install include the component roles)."""
    found = []
    for play in _load("playbooks", "spark.yml"):
        for role in play.get("roles") or []:
            name = role["role"].split(".")[-1]
            for component in GATE.findall(_when(role)):
                found.append((component, name))
            _role_gates(name, "main.yml", found)
    return found


def test_preflight_derives_its_components_from_validate():
    assert preflight.COMPONENTS is validate.COMPONENTS


def test_the_manifest_default_provisions_every_component_in_order(manifest):
    assert manifest["sparkforge_components"] == list(validate.COMPONENTS)


def test_the_plays_gate_each_component_in_the_order_of_the_list():
    gates = provisioning_gates()
    order = []
    for component, _role in gates:
        if component not in order:
            order.append(component)
    assert order == list(validate.COMPONENTS)
    # Each component runs its own role (roles/<component>), under its own gate.
    for component in validate.COMPONENTS:
        assert (component, component) in gates, component
        assert os.path.isdir(os.path.join(COLLECTION, "roles", component)), component


def test_every_gate_in_the_collection_names_a_known_component():
    names = set()
    for base in ("roles", "playbooks"):
        for root, _dirs, files in os.walk(os.path.join(COLLECTION, base)):
            for name in files:
                if name.endswith((".yml", ".yaml")):
                    with open(os.path.join(root, name)) as handle:
                        names.update(GATE.findall(handle.read()))
    assert names and names <= set(validate.COMPONENTS), sorted(names - set(validate.COMPONENTS))
