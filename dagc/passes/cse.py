"""`cse`: merge identical calls of side-effect-free tasks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from dagc.ir.core import Graph
from dagc.passes._rewrite import replace_uses, substitute
from dagc.passes.base import Pass, PassContext, register


@register
@dataclass(frozen=True)
class CommonSubexpressionElimination(Pass):
    """Pre: verified graph. Post: no two side-effect-free nodes have the same op, target, operands,
    options, ordering deps and output count; uses of a removed duplicate read the kept node.

    Nodes are visited in topological order so that chains of duplicates collapse in one run.
    """

    name: ClassVar[str] = "cse"

    def apply(self, ctx: PassContext, graph: Graph) -> None:
        seen: dict[tuple[object, ...], str] = {}
        mapping: dict[str, str] = {}  # removed output value -> kept output value
        merged: dict[str, str] = {}  # removed node -> kept node (for ordering deps)
        for name in graph.topological_order():
            node = graph.node(name)
            if mapping:
                node.args = tuple(substitute(a, mapping) for a in node.args)
                node.kwargs = tuple((k, substitute(v, mapping)) for k, v in node.kwargs)
            if merged and any(d in merged for d in node.deps):
                node.deps = tuple(dict.fromkeys(merged.get(d, d) for d in node.deps))
            if node.options.side_effects or node.op != "task":
                continue
            key = (node.op, node.target, node.args, node.kwargs, node.options, node.deps, node.n_outputs)
            kept = seen.get(key)
            if kept is None:
                seen[key] = name
                continue
            kept_node = graph.node(kept)
            mapping.update(zip(node.outputs, kept_node.outputs))
            merged[name] = kept
            graph.remove_node(name)
            ctx.remark(self.name, f"merged `{name}` ({node.span}) into identical `{kept}` ({kept_node.span})", name)
        replace_uses(graph, mapping)
