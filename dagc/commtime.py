"""The estimated makespan of a placed, scheduled graph once `comm` has chosen its transfers.

The scheduler (`dagc.sched`) prices every cut edge as its own point-to-point message. After the
`comm` pass a value may instead move once by a broadcast, and a sum may be one reduce or
all-reduce. `timed_makespan(graph)` replays the graph in schedule order with those choices:

    a task        starts when its device is free and its inputs are on it; runs `task_time`
    a message     starts when the value is ready on its source and both ends' links are free
    a broadcast   starts when the value is ready on the root and every member's link is free;
                  takes `broadcast_time`
    a reduce /    starts when every operand is ready and every member's link is free; takes
    all-reduce    `reduce_time` / `allreduce_time`; the sum is ready on the root (on every member)
    a gather      starts when every sender's value is ready and every member's link is free;
                  takes `gather_time`; every value is ready on the root

A device has one link (one message in or out at a time, as on a node's network card), so the
messages into a parameter server queue up. `dagc plan` prints this estimate beside the scheduler's
(docs/cli.md); it is how the plan compares a parameter server with an all-reduce.
"""

from __future__ import annotations

from dagc.cluster import Cluster
from dagc.cost import CostModel, allreduce_time, broadcast_time, gather_time, reduce_time
from dagc.ir.core import Graph
from dagc.ir.facts import device_tuple, reduction_of, transfer_of
from dagc.passes.commcheck import gather_members, node_ranks, priority_order, transfer_source

__all__ = ["timed_makespan"]


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def timed_makespan(graph: Graph, cluster: Cluster, cost: CostModel | None = None) -> float:
    """Seconds from the first task's start to the last one's end (see the module docstring)."""
    cost = cost or CostModel()
    device_free: dict[int, float] = {}
    link_free: dict[int, float] = {}
    ready: dict[tuple[str, int], float] = {}  # (value, device) -> when it is there
    params = {p.name for p in graph.params}
    end = 0.0

    def at(value: str, device: int) -> float:
        if value in params:
            return 0.0
        if (value, device) in ready:
            return ready[(value, device)]
        # read where it is not (a graph without transfers): priced as one message from its first holder
        holders = [(t, d) for (v, d), t in ready.items() if v == value]
        if not holders:
            return 0.0
        t, d = min(holders)
        return t + cluster.transfer_time(cost.default_out_size, d, device)

    members = gather_members(graph)
    arrived: dict[str, int] = {}
    for name in priority_order(graph):
        node = graph.node(name)
        ranks = [r for r in node_ranks(node) if r < cluster.n_devices] or [0]
        move = transfer_of(node)
        gather = move.gather if node.op == "transfer" else None
        if isinstance(gather, str) and gather in members:
            arrived[gather] = arrived.get(gather, 0) + 1
            if arrived[gather] < len(members[gather]):
                continue  # the gather starts with its last value
            parts = [(m.input_values()[0], m.outputs[0], transfer_source(m),
                      float(_or(transfer_of(m).bytes, cost.wire_bytes(m)))) for m in members[gather]]
            group = sorted({ranks[0], *(src for _, _, src, _ in parts)})
            start = max([*(at(v, src) for v, _, src, _ in parts), *(link_free.get(r, 0.0) for r in group)])
            finish = start + gather_time(cluster, [n for *_, n in parts], ranks[0], [src for _, _, src, _ in parts])
            for r in group:
                link_free[r] = finish
            for _, out, _, _ in parts:
                ready[(out, ranks[0])] = finish
            end = max(end, finish)
            continue
        if node.op == "transfer":
            (value,) = node.input_values()[:1]
            src = (device_tuple(move.src) or (ranks[0],))[0]
            nbytes = float(_or(move.bytes, cost.wire_bytes(node)))
            group = sorted({src, *ranks})
            start = max([at(value, src), *(link_free.get(r, 0.0) for r in group)])
            if move.kind == "broadcast":
                finish = start + broadcast_time(cluster, nbytes, src, ranks)
            else:
                finish = start + cluster.transfer_time(nbytes, src, ranks[0])
            for r in group:
                link_free[r] = finish
            for r in ranks:
                ready[(node.outputs[0], r)] = finish
            end = max(end, finish)
            continue
        reduction = reduction_of(node)
        if reduction is not None:
            operands = [ref.name for ref in reduction.operands]
            sources = list(reduction.sources)
            root = ranks[0]
            group = sorted({root, *sources})
            nbytes = float(_or(reduction.bytes, cost.default_out_size))
            start = max([*(at(v, s) for v, s in zip(operands, sources)), *(link_free.get(r, 0.0) for r in group)])
            everywhere = reduction.everywhere
            took = allreduce_time(cluster, nbytes, group) if everywhere else \
                reduce_time(cluster, nbytes, root, [s for s in sources if s != root])
            finish = start + took
            for r in group:
                link_free[r] = finish
                if everywhere or r == root:
                    ready[(node.outputs[0], r)] = finish
            end = max(end, finish)
            continue
        device = ranks[0]
        start = max([device_free.get(r, 0.0) for r in ranks] + [at(v, r) for v in node.input_values() for r in ranks])
        finish = start + cost.task_time(node, cluster.devices[device])
        for r in ranks:
            device_free[r] = finish
        for value in node.outputs:
            ready[(value, device)] = finish
        end = max(end, finish)
    return end
