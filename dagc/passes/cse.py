"""`cse`: merge identical calls of tasks declared `pure=True`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from dagc.ir.core import Graph
from dagc.ir.effects import has_effects, state_cells
from dagc.ir.regions import substitute
from dagc.passes.base import Pass, PassContext, register


@register
@dataclass(frozen=True)
class CommonSubexpressionElimination(Pass):
    """Pre: verified graph. Post: no two nodes of pure tasks (`pure=True`: no effects, the result
    depends only on the arguments) have the same op, target, operands, options, ordering deps and
    output count; uses of a removed duplicate read the kept node. Calls of any other task are kept
    apart: a task without arguments may draw random numbers, read a clock or a file. Nor are two
    calls merged when a task changes either result in place: plain Python has two objects there.
    Each merge is reported as a warning at the call (DAGC153).

    Nodes are visited in topological order so that chains of duplicates collapse in one run.
    """

    name: ClassVar[str] = "cse"
    only_removes: ClassVar[bool] = True

    def apply(self, ctx: PassContext, graph: Graph) -> None:
        if not any(node.op == "task" and node.options.pure for node in graph):
            return  # only calls of pure tasks merge: none here (the common case, a linear scan)
        seen: dict[tuple[object, ...], str] = {}
        mapping: dict[str, str] = {}  # removed output value -> kept output value
        merged: dict[str, str] = {}  # removed node -> kept node (for ordering deps)
        warned: set[object] = set()
        changed = state_cells(graph)  # values some task changes in place: each call's result is its own
        for name in graph.topological_order():
            node = graph.node(name)
            if mapping:
                node.args = tuple(substitute(a, mapping) for a in node.args)
                node.kwargs = tuple((k, substitute(v, mapping)) for k, v in node.kwargs)
            if merged and any(d in merged for d in node.deps):
                graph.set_deps(name, dict.fromkeys(merged.get(d, d) for d in node.deps))
            if node.op != "task" or not node.options.pure or has_effects(node) or changed.intersection(node.outputs):
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
            if node.span not in warned:  # once per call site
                warned.add(node.span)
                ctx.sink.warning("DAGC153", f"`{name}` is merged into `{kept}`: same pure task, same arguments",
                                 node.span, hint="drop pure=True from the task to run every call")
        graph.replace_uses(mapping)  # (also where the loop above did not look: regions, fused members, returns)
