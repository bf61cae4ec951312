"""`fuse`: merge tasks to save launch overhead where that costs no (or less) parallelism.

Chains: a task whose only successor is a task whose only predecessor is it; fusing them loses no
parallelism and saves one launch. Tiny siblings (option `siblings`): tasks with the same
predecessors, each at most `tiny` seconds, are merged when the launches saved exceed the
parallelism lost (the sum of their times minus the longest, or nothing when `partition` already
put them on one device). Never fused: tasks on different devices, with different resources
(cpus, gpus, memory, ranks, custom resources) or different `retries`, transfers and glue.
Every fusion and every refusal is explained by a remark.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from dagc.cost import CostModel
from dagc.ir.core import Graph, Node
from dagc.ir.facts import Placement
from dagc.ir.types import Ref
from dagc.passes.base import Pass, PassContext, register
from dagc.passes.partition import cost_model_of

__all__ = ["Fuse", "fusion_groups"]

_FUSIBLE_OPS = ("task", "fused")


def _resources(node: Node) -> tuple[Any, ...]:
    o = node.options
    return (o.cpus, o.gpus, o.memory, o.ranks, tuple(sorted(o.resources)))


def _device(node: Node) -> Any:
    return node.placement.device


def _why_not(a: Node, b: Node) -> str | None:
    if a.op not in _FUSIBLE_OPS or b.op not in _FUSIBLE_OPS:
        return f"`{a.name}` and `{b.name}` are not both tasks"
    if _device(a) != _device(b):
        return f"`{a.name}` and `{b.name}` are on different devices ({_device(a)} and {_device(b)})"
    if _resources(a) != _resources(b):
        return f"`{a.name}` and `{b.name}` ask for different resources"
    if a.options.retries != b.options.retries:
        return f"`{a.name}` and `{b.name}` have different retries ({a.options.retries} and {b.options.retries})"
    return None


def _time(cost: CostModel, node: Node) -> float:
    seconds, flops = cost.work(node)
    return seconds + flops / 1e12


def fusion_groups(graph: Graph, cost: CostModel, *, siblings: bool, tiny: float,
                  remarks: list[tuple[str, str | None]]) -> list[list[str]]:
    """Groups of node names to fuse (each in topological order), with remarks appended."""
    overhead = cost.overhead
    order = graph.topological_order()
    group: dict[str, list[str]] = {name: [name] for name in order}
    # chains
    for name in order:
        preds = graph.predecessors(name)
        if len(preds) != 1:
            continue
        a = preds[0]
        if graph.successors(a) != [name]:
            continue
        why = _why_not(graph.node(a), graph.node(name))
        if why:
            remarks.append((f"not fusing chain `{a}` → `{name}`: {why}", name))
            continue
        if overhead <= 0:
            remarks.append((f"not fusing chain `{a}` → `{name}`: the backend has no launch overhead to save", name))
            continue
        members = group[a]
        members.append(name)
        group[name] = members
        remarks.append(
            (f"fused chain `{a}` → `{name}`: saves one launch ({overhead * 1e6:g}us), loses no parallelism", name)
        )
    units: list[list[str]] = []
    seen: set[int] = set()
    for name in order:
        g = group[name]
        if id(g) not in seen:
            seen.add(id(g))
            units.append(g)
    if not siblings:
        return [u for u in units if len(u) > 1]
    unit_of = {name: k for k, u in enumerate(units) for name in u}
    # tiny siblings: single-node units with the same predecessor units
    buckets: dict[tuple[Any, ...], list[int]] = {}
    for k, u in enumerate(units):
        if len(u) != 1:
            continue
        node = graph.node(u[0])
        if node.op not in _FUSIBLE_OPS or _time(cost, node) > tiny:
            continue
        preds = tuple(sorted({unit_of[p] for p in graph.predecessors(u[0])}))
        if not preds:
            continue
        key = (preds, _device(node), _resources(node), node.options.retries)
        buckets.setdefault(key, []).append(k)
    merged: set[int] = set()
    for key, ks in buckets.items():
        if len(ks) < 2:
            continue
        names = [units[k][0] for k in ks]
        times = [_time(cost, graph.node(n)) for n in names]
        saved = (len(ks) - 1) * overhead
        lost = 0.0 if key[1] is not None else sum(times) - max(times)
        listed = ", ".join(f"`{n}`" for n in names)
        if saved > lost:
            remarks.append((f"fused tiny siblings {listed}: saves {saved * 1e6:g}us of launches, "
                            f"loses {lost * 1e6:g}us of parallelism", names[0]))
            units[ks[0]] = names
            merged.update(ks[1:])
        else:
            remarks.append((f"not fusing tiny siblings {listed}: would save {saved * 1e6:g}us of launches "
                            f"but lose {lost * 1e6:g}us of parallelism", names[0]))
    return [u for k, u in enumerate(units) if k not in merged and len(u) > 1]


@register
@dataclass(frozen=True)
class Fuse(Pass):
    """Pre: verified graph (partitioned or not). Post: each fused group is one node with op
    `fused`, its body `members` = the member nodes (in run order), outputs = member
    values used outside the group or returned, inputs = values the members read from outside;
    the first member's span and options (cost/flops summed); reachability between the remaining
    nodes is unchanged. Options: `siblings` (also fuse tiny siblings), `tiny` (seconds; 0 means
    ten launch overheads)."""

    name: ClassVar[str] = "fuse"
    siblings: bool = True
    tiny: float = 0.0

    def apply(self, ctx: PassContext, graph: Graph) -> None:
        cost = cost_model_of(ctx)
        tiny = self.tiny if self.tiny > 0 else 10 * cost.overhead
        remarks: list[tuple[str, str | None]] = []
        groups = fusion_groups(graph, cost, siblings=self.siblings, tiny=tiny, remarks=remarks)
        for message, node in remarks:
            ctx.remark(self.name, message, node)
        if not groups:
            return
        returned = set(graph.output_values())
        # built once: groups are disjoint, so "read outside the group" does not change as groups fuse
        read_by: dict[str, set[str]] = {}
        for _, consumer, value in graph.data_edges():
            read_by.setdefault(value, set()).add(consumer)
        ordered_after: dict[str, list[str]] = {}  # node -> nodes that list it in their deps
        for node in graph:
            for dep in node.deps:
                ordered_after.setdefault(dep, []).append(node.name)
        fused_into: dict[str, str] = {}  # fused member -> its fused node
        for members in groups:
            nodes = [graph.node(n) for n in members]
            inside = set(members)
            produced = {v for n in nodes for v in n.outputs}
            inputs: dict[str, None] = {}
            deps: dict[str, None] = {}
            for n in nodes:
                for v in n.input_values():
                    if v not in produced:
                        inputs.setdefault(v, None)
                for d in n.deps:
                    if d not in inside:
                        deps.setdefault(d, None)
            outputs: list[str] = []
            types: list[str | None] = []
            for n in nodes:
                for v, t in zip(n.outputs, n.types):
                    if v in returned or any(c not in inside for c in read_by.get(v, ())):
                        outputs.append(v)
                        types.append(t)
            if not outputs:
                outputs, types = list(nodes[-1].outputs), list(nodes[-1].types)
            first = nodes[0]
            costs = [n.options.cost for n in nodes]
            flops = [n.options.flops for n in nodes]
            options = dataclasses.replace(
                first.options,
                cost=sum(costs) if all(c is not None for c in costs) else None,  # type: ignore[arg-type]
                flops=sum(flops) if all(f is not None for f in flops) else None,  # type: ignore[arg-type]
                out_size=max((n.options.out_size for n in nodes if n.options.out_size is not None), default=None),
                side_effects=any(n.options.side_effects for n in nodes),
                priority=max(n.options.priority for n in nodes),
                reads=tuple(dict.fromkeys(r for n in nodes for r in n.options.reads)),
                writes=tuple(dict.fromkeys(w for n in nodes for w in n.options.writes)),
            )
            attrs: dict[str, Any] = {}
            for n in members:
                graph.remove_node(n)
            fused = Node(
                name=graph.fresh_name(f"fused.{first.name}"),
                op="fused",
                target="",
                args=tuple(Ref(v) for v in inputs),
                outputs=tuple(outputs),
                types=tuple(types),
                options=options,
                span=first.span,
                deps=tuple(deps),
                attrs=attrs,
                bodies={"members": nodes},
                placement=Placement(device=first.placement.device),
            )
            graph.add_node(fused)
            # ordering deps on a member now point at the fused node
            for member in members:
                fused_into[member] = fused.name
            for user in {fused_into.get(u, u) for m in members for u in ordered_after.get(m, ())}:
                if user in graph:
                    graph.set_deps(user, dict.fromkeys(fused.name if d in inside else d for d in graph.node(user).deps))
        graph.reorder(graph.topological_order())
