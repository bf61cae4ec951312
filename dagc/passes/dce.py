"""`dce`: remove tasks whose results reach neither a pipeline output nor a side-effecting task."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from dagc.ir.core import Graph
from dagc.passes.base import Pass, PassContext, register


@register
@dataclass(frozen=True)
class DeadCodeElimination(Pass):
    """Pre: verified graph. Post: every node is an ancestor-or-self of a returned value's producer
    or of a node marked `side_effects`; side-effecting nodes are always kept."""

    name: ClassVar[str] = "dce"

    def apply(self, ctx: PassContext, graph: Graph) -> None:
        roots = [n.name for n in graph if n.options.side_effects]
        for value in graph.output_values():
            producer = graph.producer(value)
            if producer is not None:
                roots.append(producer.name)
        live: set[str] = set()
        stack = list(roots)
        while stack:
            name = stack.pop()
            if name in live:
                continue
            live.add(name)
            stack.extend(graph.predecessors(name))
        for node in graph:
            if node.name not in live:
                graph.remove_node(node.name)
                ctx.remark(self.name, f"removed `{node.name}` ({node.span}): its result is never used "
                           "and it is not marked side_effects=True", node.name)
        # ordering deps on removed nodes no longer order anything
        for node in graph:
            if any(dep not in graph for dep in node.deps):
                node.deps = tuple(dep for dep in node.deps if dep in graph)
                graph.invalidate()
