"""`schedule`: start and finish times for every task on the devices chosen by `partition`."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from dagc.cost import CostModel
from dagc.diagnostics import CompileError, Diagnostic, Severity
from dagc.ir.core import Graph
from dagc.passes.base import Pass, PassContext, register
from dagc.passes.partition import Partition, build_problem, cluster_of, cost_model_of, recall
from dagc.sched import Problem, Schedule, decode, lower_bound
from dagc.sched.heft import upward_rank

__all__ = ["ScheduleTasks", "annotate", "device_list"]


def device_list(value: object) -> tuple[int, ...] | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return (value,)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, int) and not isinstance(v, bool)
                                                          for v in value):
        return tuple(value)
    return None


@register
@dataclass(frozen=True)
class ScheduleTasks(Pass):
    """Pre: verified graph (runs `partition` first when a node lacks `partition.device`).
    Post: every node's placement has `start`, `finish` (seconds) and `order` (its position on its device;
    printed `schedule.start`, ...); the graph has `schedule.makespan`, `schedule.lower_bound`,
    `schedule.ratio` (makespan / lower bound), `schedule.utilization` (busy fraction per device)
    and `schedule.cut_edges` ([src, dst, value, bytes] for data crossing devices)."""

    name: ClassVar[str] = "schedule"

    def apply(self, ctx: PassContext, graph: Graph) -> None:
        if any(not n.placement.placed for n in graph):
            Partition().apply(ctx, graph)
        cluster = cluster_of(ctx)
        assign: list[tuple[int, ...]] = []
        bad = []
        for node in graph:
            devs = node.devices
            if not devs or any(not (0 <= d < cluster.n_devices) for d in devs):
                bad.append(
                    Diagnostic(
                        "DAGC302",
                        Severity.ERROR,
                        f"task `{node.name}` is placed on device {node.placement.device!r}, "
                        f"which the cluster does not have",
                        node.span,
                        hint=f"the cluster has devices 0..{cluster.n_devices - 1}; run `partition` again",
                    )
                )
                devs = (0,)
            assign.append(devs)
        if bad:
            raise CompileError(bad)
        p = build_problem(ctx, graph)
        s = recall(ctx, graph, assign)
        if s is None:
            n = len(assign)
            tries = [upward_rank(p), [float(n - i) for i in range(n)]]
            s = min((decode(p, keys, assign=assign) for keys in tries), key=lambda x: x.makespan)
        annotate(graph, p, s, cost_model_of(ctx))


def annotate(graph: Graph, p: Problem, s: Schedule, cost_model: CostModel) -> None:
    """Write the schedule attributes (see `ScheduleTasks`) onto `graph`."""
    nodes = graph.nodes
    order: dict[int, int] = {}
    for d, per in enumerate(s.per_device(p.D)):
        for k, i in enumerate(per):
            if s.devices[i][0] == d:
                order[i] = k
    for i, node in enumerate(nodes):
        node.placement = replace(node.placement, start=s.start[i], finish=s.finish[i], order=order.get(i, 0))
    bound = lower_bound(p)
    makespan = s.makespan
    graph.attrs["schedule.makespan"] = makespan
    graph.attrs["schedule.lower_bound"] = bound
    graph.attrs["schedule.ratio"] = makespan / bound if bound > 0 else 1.0
    graph.attrs["schedule.utilization"] = s.utilization(p.D)
    index = {n.name: i for i, n in enumerate(nodes)}
    cut = []
    for src, dst, value in graph.data_edges():
        a, b = index[src], index[dst]
        if set(s.devices[a]) != set(s.devices[b]):
            cut.append([src, dst, value, int(cost_model.wire_bytes(nodes[a]))])
    graph.attrs["schedule.cut_edges"] = cut
