"""`dce`: remove tasks that have no effects and whose results reach nothing that is kept."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from dagc.ir.core import KEEP_ATTR, Graph, Node
from dagc.ir.effects import final_writers, has_effects
from dagc.passes.base import Pass, PassContext, register


@register
@dataclass(frozen=True)
class DeadCodeElimination(Pass):
    """Pre: verified graph. Post: every node is an ancestor-or-self (through data and ordering edges)
    of a returned value's producer, of the last node to change the state a returned value belongs
    to, or of a node with effects (dagc.ir.effects: it changes an argument, acts on the world, draws
    from the global RNG, changes module state); nodes with effects are always kept.

    Each removal is reported as a warning at the call (DAGC152), naming the option that keeps it."""

    name: ClassVar[str] = "dce"
    only_removes: ClassVar[bool] = True

    def apply(self, ctx: PassContext, graph: Graph) -> None:
        roots = [n.name for n in graph if has_effects(n) or _kept(n)]
        outputs = graph.output_values()
        for value in outputs:
            producer = graph.producer(value)
            if producer is not None:
                roots.append(producer.name)
        roots.extend(final_writers(graph, outputs))
        live: set[str] = set()
        stack = list(roots)
        while stack:
            name = stack.pop()
            if name in live:
                continue
            live.add(name)
            stack.extend(graph.predecessors(name))
        removed: dict[object, list[str]] = {}  # call site -> tasks removed there (a loop unrolls one call)
        dead = [node for node in graph if node.name not in live]
        # the nodes ordered after a removed one (from the graph's index): their deps on it no longer order anything
        waiting = {w for node in dead for w in graph.waiters(node.name)}
        for node in dead:
            graph.remove_node(node.name)
            ctx.remark(self.name, f"removed `{node.name}` ({node.span}): its result is never used "
                       "and it has no effects", node.name)
            if node.op == "task":
                removed.setdefault(node.span, []).append(node.name)
        told = {d.span for d in ctx.sink.diagnostics if d.code == "DAGC151"}  # the frontend said so already
        for span, names in removed.items():
            if span in told:
                continue
            more = f" (and {len(names) - 1} more calls made here)" if len(names) > 1 else ""
            ctx.sink.warning("DAGC152", f"`{names[0]}` is removed{more}: its result is never used and it has no "
                             "effects", span,  # type: ignore[arg-type]
                             hint="use its result, or mark the task side_effects=True to run it anyway")
        for name in sorted(waiting):
            if name in graph:
                graph.set_deps(name, (dep for dep in graph.node(name).deps if dep in graph))


def _kept(node: Node) -> bool:
    """A node its framework always runs, or a region or fused group holding one (ir.core.KEEP_ATTR)."""
    from dagc.ir.regions import walk

    if node.attrs.get(KEEP_ATTR):
        return True
    return node.op not in ("task", "glue", "transfer") and any(inner.attrs.get(KEEP_ATTR) for inner in walk(node))
