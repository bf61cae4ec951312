"""`partition`: place every task on a device (or on k devices of one node for multi-device tasks).

Options: `algo` — `dagc` (default: HEFT-class list scheduling improved by search) or `heft`
(plain HEFT); `seed` — the search's seed (same seed, same placement); `budget` — seconds of search.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from dagc.cluster import Cluster
from dagc.cost import CostModel
from dagc.diagnostics import CompileError, Diagnostic, Severity
from dagc.ir.core import REGION_OPS, Graph, Node
from dagc.ir.regions import walk
from dagc.passes.base import Pass, PassContext, register
from dagc.sched import ALGORITHMS, DEFAULT_BUDGET, Problem, Schedule, schedule

__all__ = ["Partition", "build_problem", "cluster_of", "cost_model_of", "device_attr"]

_CACHE_KEY = "sched.last"


def cluster_of(ctx: PassContext) -> Cluster:
    return ctx.cluster if ctx.cluster is not None else Cluster.local()


def cost_model_of(ctx: PassContext) -> CostModel:
    return ctx.cost_model if ctx.cost_model is not None else CostModel(backend=ctx.backend)


def build_problem(ctx: PassContext, graph: Graph) -> Problem:
    """The scheduling problem of `graph`; raises CompileError (DAGC302) for tasks that fit no device.

    A region fits no device when a task it may run fits none: that task is reported, at its own line."""
    cluster = cluster_of(ctx)
    p = Problem.from_graph(graph, cost_model_of(ctx), cluster)
    if p.infeasible:
        nodes = graph.nodes
        diags = []
        for i, why in p.infeasible:
            node = nodes[i]
            culprits = _inner_culprits(node, cluster) if node.op in REGION_OPS else []
            for inner, inner_why in culprits or [(node, why)]:
                where = f" (inside the `{node.op}` region `{node.name}`)" if inner is not node else ""
                diags.append(
                    Diagnostic(
                        "DAGC302",
                        Severity.ERROR,
                        f"task `{inner.name}`{where} does not fit on any device: {inner_why}",
                        inner.span,
                        hint=f"the cluster has {cluster.describe()}; lower the task's gpus/memory/ranks "
                        "or describe a bigger cluster (--cluster, docs/cluster.md)",
                    )
                )
        raise CompileError(diags)
    return p


def _inner_culprits(region: Node, cluster: Cluster) -> list[tuple[Node, str]]:
    """The tasks inside `region` that fit no device of `cluster`, each with the reason."""
    inner = [n for n in walk(region) if n.op not in REGION_OPS]
    p = Problem.of_nodes(inner, cluster)
    return [(inner[i], why) for i, why in p.infeasible]


def device_attr(devs: tuple[int, ...]) -> int | list[int]:
    return devs[0] if len(devs) == 1 else list(devs)


def remember(ctx: PassContext, graph: Graph, p: Problem, s: Schedule) -> None:
    """Keep the schedule found while partitioning, for the `schedule` pass that follows."""
    ctx.options[_CACHE_KEY] = (tuple(p.names), tuple(map(tuple, s.devices)), p, s)


def recall(ctx: PassContext, graph: Graph, assign: list[tuple[int, ...]]) -> Schedule | None:
    cached: Any = ctx.options.get(_CACHE_KEY)
    if not cached:
        return None
    names, devices, _p, s = cached
    if names == tuple(n.name for n in graph) and devices == tuple(assign):
        return s
    return None


@register
@dataclass(frozen=True)
class Partition(Pass):
    """Pre: verified graph; `ctx.cluster` (None: one local device). Post: every node has
    `partition.device` (an int, or a list of ints for a task on several devices); the graph has
    `partition.algo`. A task that fits no device is reported as DAGC302."""

    name: ClassVar[str] = "partition"
    algo: str = "dagc"
    seed: int = 0
    budget: float = DEFAULT_BUDGET

    def apply(self, ctx: PassContext, graph: Graph) -> None:
        if self.algo not in ALGORITHMS:
            raise CompileError(
                [
                    Diagnostic(
                        "DAGC303",
                        Severity.ERROR,
                        f"partition: unknown algorithm {self.algo!r}",
                        hint=f"algo is one of: {', '.join(ALGORITHMS)}",
                    )
                ]
            )
        p = build_problem(ctx, graph)
        s = schedule(p, self.algo, seed=self.seed, budget=self.budget)
        if p.D > 1 and pin_state(ctx, graph, p, s):
            s = schedule(p, self.algo, seed=self.seed, budget=self.budget)
        for node, devs in zip(graph.nodes, s.devices):
            node.placement = node.placement.on(devs)
        graph.attrs["partition.algo"] = self.algo
        graph.attrs["partition.cluster"] = cluster_record(ctx.cluster)
        remember(ctx, graph, p, s)


def pin_state(ctx: PassContext, graph: Graph, p: Problem, s: Schedule) -> bool:
    """Hold every node that touches one piece of state (dagc.ir.effects.state_groups) to one device:
    the eligible device where the unconstrained schedule `s` put most of their work. Narrows
    `p.eligible` in place; returns whether anything was pinned. DAGC304 when no device fits them all."""
    from dagc.ir.effects import state_groups

    groups = state_groups(graph)
    if not groups:
        return False
    index = {name: i for i, name in enumerate(p.names)}
    diags = []
    for group in groups:
        members = [index[n] for n in group.nodes if n in index]
        multi = [i for i in members if p.need[i] > 1]
        if multi:
            node = graph.node(p.names[multi[0]])
            diags.append(Diagnostic(
                "DAGC304", Severity.ERROR,
                f"multi-rank task `{node.name}` touches state shared with other tasks (`{group.name}`: {group.why})",
                node.span, hint="each rank of a multi-rank task is its own process; pass it what it needs and have "
                "it return the result (rank 0's value), instead of changing an argument in place"))
            continue
        common = set(range(p.D))
        for i in members:
            common &= set(p.eligible[i])
        if not common:
            node = graph.node(group.nodes[0])
            diags.append(Diagnostic(
                "DAGC304", Severity.ERROR,
                f"no device can run all {len(members)} tasks that share the state `{group.name}` ({group.why})",
                node.span, hint="tasks that share state run in one process; make their gpus/memory fit one device, "
                "or stop sharing the object (return a new value instead of changing an argument)"))
            continue
        load = {d: 0.0 for d in common}
        for i in members:
            for d in s.devices[i]:
                if d in load:
                    load[d] += p.dur[i][p.cls_of[d]]
        device = min(sorted(common), key=lambda d: -load[d])
        for i in members:
            p.eligible[i] = (device,)
        ctx.remark("partition", f"{len(members)} tasks share the state `{group.name}` ({group.why}): all on "
                   f"device {device}", group.nodes[0])
    if diags:
        raise CompileError(diags)
    return True


def cluster_record(cluster: Cluster | None) -> dict[str, object]:
    """The devices a placement refers to, recorded in the IR so that backends can map devices to
    machines without the cluster file: `{"devices": [{"node", "kind", "gpus", "memory", "speed"}]}`."""
    cluster = cluster or Cluster.local()
    return {
        "devices": [
            {"node": d.node, "kind": d.kind, "gpus": d.gpus, "memory": d.memory, "speed": d.speed}
            for d in cluster.devices
        ]
    }
