# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cycles in an import graph, of any length: the layout rules of the collection (module_utils' folders) and of the
checkout (src/) both use it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def strongly_connected(graph):
    """Tarjan's strongly connected components of ``graph`` ({node: iterable of nodes}), each a sorted list: a
    component of more than one node is a cycle, of any length."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for dep in sorted(graph.get(node, ())):
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in on_stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found
