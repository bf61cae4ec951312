"""`spread`: give a `map` region whose items are independent several ranks (the torch backend).

A map's width is known only at run time, so its items cannot be nodes of the plan. Instead the
region becomes a multi-rank task: `partition` gives it one device per rank, every rank of it
receives the iterated list (as any multi-rank task receives its inputs, so all agree on the width),
runs the items `i` with `i % ranks == rank` (dagc.runtime.maps.spread_map), and the ranks gather
the results, in item order, on the region's first rank, which holds its outputs. `commcheck` sees
one multi-rank task, whose ranks start and end it together, as for any other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import ClassVar

from dagc.ir.core import Graph
from dagc.ir.regions import WIDTH_ATTR, demand, expected_width, independent_items
from dagc.passes.base import Pass, PassContext, register
from dagc.passes.partition import cluster_of

__all__ = ["SpreadMaps"]


@register
@dataclass(frozen=True)
class SpreadMaps(Pass):
    """Pre: verified graph. Post: every top-level `map` whose items are independent
    (dagc.ir.regions.independent_items) and that touches no state other tasks share
    (dagc.ir.effects.state_groups) has
    `ranks` = the number of devices that can each run its body (at most `ranks`, when given; 0: all; at most
    its expected width, when `dagc.each(..., expected=N)` or a profile gives one).
    Other nodes are unchanged."""

    name: ClassVar[str] = "spread"
    ranks: int = 0

    def apply(self, ctx: PassContext, graph: Graph) -> None:
        from dagc.ir.effects import state_groups

        cluster = cluster_of(ctx)
        # a map that reads or changes state other tasks change runs where that state lives (one process)
        shared = {name for group in state_groups(graph) for name in group.nodes}
        for node in graph:
            if node.op != "map" or node.options.ranks > 1 or node.name in shared or not independent_items(node):
                continue
            need = demand(node)
            fits = [d for d in cluster.devices if d.gpus >= need.gpus
                    and (need.memory is None or d.memory is None or d.memory >= need.memory)]
            width = len(fits) if not self.ranks else min(self.ranks, len(fits))
            if WIDTH_ATTR in node.attrs:  # no more ranks than the items it is expected to have
                width = min(width, max(1, math.ceil(expected_width(node))))
            if width > 1:
                node.options = replace(node.options, ranks=width)
