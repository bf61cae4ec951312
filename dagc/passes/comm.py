"""`comm`: make every cross-device data movement an explicit `transfer` node."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from dagc.cost import (
    allreduce_time,
    broadcast_time,
    fanin_sizes_time,
    fanin_time,
    fanout_time,
    gather_time,
    reduce_time,
)
from dagc.diagnostics import CompileError, Diagnostic, Severity
from dagc.ir.core import Graph, Node
from dagc.ir.facts import Placement, Reduction, Transfer
from dagc.ir.types import Ref, Seq, TaskOptions
from dagc.passes.base import Pass, PassContext, register
from dagc.passes.partition import cluster_of, cost_model_of
from dagc.passes.reductions import glue_sum, task_sum

__all__ = ["Comm", "TRANSFER_TARGET", "REDUCE_ORDER_CODE"]

# Warning: a sum became a reduce collective, whose floating-point additions may run in another order.
REDUCE_ORDER_CODE = "DAGC311"

TRANSFER_TARGET = "dagc.runtime.transfer:transfer"


def check_state_placement(graph: Graph) -> None:
    """DAGC304 when the tasks that share one piece of state are not on one device (a placement edited by
    hand in saved IR): each device is its own process, so each would change its own copy of the object and
    the run would silently differ from the plain run. `partition` never places them apart."""
    from dagc.ir.effects import state_groups

    diags = []
    for group in state_groups(graph):
        placed = {name: graph.node(name).devices for name in group.nodes if name in graph}
        if len(set(placed.values())) > 1:
            where = ", ".join(f"`{name}` on {list(devices)}" for name, devices in placed.items())
            diags.append(Diagnostic(
                "DAGC304", Severity.ERROR, f"the tasks sharing the state `{group.name}` ({group.why}) are placed on "
                f"different devices: {where}", graph.node(group.nodes[0]).span,
                hint="tasks that share state run in one process: place them on one device (run `partition` "
                "again rather than editing partition.device by hand)"))
    if diags:
        raise CompileError(diags)


@register
@dataclass(frozen=True)
class Comm(Pass):
    """Pre: every node has `partition.device` (otherwise the pass changes nothing and says so).
    Post: for each value read on a device other than its producer's (first) device there is one
    node `value@dst` with op `transfer`, args `(Ref(value),)`, output `value@dst`, attrs
    `transfer.src`, `transfer.dst`, `transfer.bytes` (and `partition.device` = dst), the producer's
    span; the consumers on `dst` read `value@dst`. With `schedule.*` attributes present the
    transfer node gets its start (the producer's finish) and finish too.

    A value read on k > 1 other devices becomes one broadcast instead, when the cost model
    (`dagc.cost.broadcast_time` against `fanout_time`) says it is faster: one node
    `value@d1-d2-…` with `transfer.kind = "broadcast"`, `transfer.dst` and `partition.device` the
    list of readers; the consumers on every reader read that one value.

    A glue sum of tensors on distinct ranks (`a + b + c`, `(a + b + c) / 3`; see
    `dagc.passes.reductions`) becomes a reduce collective onto the glue's rank when the model
    (`reduce_time` against `fanin_time`) says so: the glue node keeps its expression (the local and
    Ray backends still evaluate it) and gets `comm.reduce = "sum"`, `comm.operands` (the values
    added, in Python's order), `comm.sources` (the rank of each), `comm.divisor` (a mean),
    `comm.bytes`, `comm.start` (0 for Python's `sum(xs)`, which adds to 0); its operands are not
    transferred.
    When the sum is read only on ranks of the group, an all-reduce (`comm.reduce = "all"`,
    `comm.holders` = the group) leaves it on all of them, if `allreduce_time` says it beats a
    reduce followed by moving the sum.
    Floating-point sums may then round differently from Python's left-to-right order: a warning
    (DAGC311) at the line says so.

    A list (or tuple) operand of a node whose items are values from k ≥ 2 other ranks, one each,
    that only this node reads on its rank, becomes a gather onto the node's rank when
    `gather_time` beats `fanin_time` (from k = 3 on): each item still gets its own transfer node
    `value@dst`, marked `transfer.kind = "gather"`, `transfer.gather` = the reading node's name (the
    gather's name) and `transfer.group` = the ranks taking part (the root first, then the
    senders in the list's order). `commcheck` makes one collective step of them."""

    name: ClassVar[str] = "comm"
    collectives: bool = True  # comm{collectives=false}: point-to-point messages only

    def apply(self, ctx: PassContext, graph: Graph) -> None:
        if any(not n.placement.placed for n in graph):
            ctx.remark(self.name, "graph is not partitioned: no transfers inserted")
            return
        check_state_placement(graph)
        cluster = cluster_of(ctx)
        cost = cost_model_of(ctx)
        home = {n.name: n.devices or (0,) for n in graph}
        reduced = self._reductions(ctx, graph, home) if self.collectives else set()
        # value -> dst -> consumers (dicts keep first-use order: output is deterministic)
        needed: dict[str, dict[int, list[str]]] = {}
        for src, dst, value in graph.data_edges():
            if graph.node(src).op == "transfer" or dst in reduced:
                continue
            reduction = graph.node(src).comm
            if src in reduced and isinstance(reduction, Reduction) and home[dst][0] in (reduction.holders or ()):
                continue  # an all-reduce leaves the sum on every rank of its group
            d_src, d_dst = home[src][0], home[dst][0]
            if d_src != d_dst:
                needed.setdefault(value, {}).setdefault(d_dst, []).append(dst)
        gathers = self._gathers(ctx, graph, home, needed, reduced) if self.collectives else []
        if not needed and not gathers:
            return
        inserted: dict[str, list[str]] = {}
        broadcasts = 0
        for value, by_dst in needed.items():
            producer = graph.producer(value)
            assert producer is not None
            d_src = home[producer.name][0]
            nbytes = int(cost.wire_bytes(producer))  # compressed values cross the link in fewer bytes
            readers = sorted(by_dst)
            if len(readers) > 1 and self.collectives and broadcast_time(cluster, nbytes, d_src, readers) < \
                    fanout_time(cluster, nbytes, d_src, readers):
                consumers = [c for d in readers for c in by_dst[d]]
                time = broadcast_time(cluster, nbytes, d_src, readers)
                name = self._insert(graph, producer, value, d_src, readers, nbytes, time, consumers)
                inserted.setdefault(producer.name, []).append(name)
                broadcasts += 1
                continue
            for d_dst, consumers in by_dst.items():
                time = cluster.transfer_time(nbytes, d_src, d_dst)
                name = self._insert(graph, producer, value, d_src, [d_dst], nbytes, time, consumers)
                inserted.setdefault(producer.name, []).append(name)
        for reader, root, values, sources in gathers:
            group = [root, *sources]
            sizes = [int(cost.wire_bytes(graph.producer(v))) for v in values]  # type: ignore[arg-type]
            time = gather_time(cluster, sizes, root, sources)
            for value, src, nbytes in zip(values, sources, sizes):
                producer = graph.producer(value)
                assert producer is not None
                name = self._insert(graph, producer, value, src, [root], nbytes, time, [reader])
                moved = graph.node(name)
                moved.comm = replace(moved.comm, kind="gather", gather=reader, group=tuple(group))
                inserted.setdefault(producer.name, []).append(name)
        new = {t for ts in inserted.values() for t in ts}
        order: list[str] = []
        for n in graph:
            if n.name in new:
                continue
            order.append(n.name)
            order.extend(inserted.get(n.name, ()))
        graph.reorder(order)
        total = sum(len(v) for v in inserted.values())
        ctx.remark(self.name, f"inserted {total} transfer(s)" + (f", {broadcasts} of them broadcast(s)"
                                                                 if broadcasts else "")
                   + (f"; {len(gathers)} gather(s)" if gathers else ""))

    @staticmethod
    def _gathers(ctx: PassContext, graph: Graph, home: dict[str, tuple[int, ...]],
                 needed: dict[str, dict[int, list[str]]], reduced: set[str],
                 ) -> list[tuple[str, int, list[str], list[int]]]:
        """(reader, its rank, values, their ranks) of every list operand that a gather brings to its
        reader faster than messages do; their entries leave `needed` (see the class docstring)."""
        cluster, cost = cluster_of(ctx), cost_model_of(ctx)
        out: list[tuple[str, int, list[str], list[int]]] = []
        taken: set[str] = set()
        for node in graph:
            if node.op == "transfer" or node.name in reduced or len(home[node.name]) != 1:
                continue
            root = home[node.name][0]
            for operand in (*node.args, *(v for _, v in node.kwargs)):
                if not isinstance(operand, Seq):
                    continue
                values: list[str] = []
                for item in operand.items:
                    producer = graph.producer(item.name) if isinstance(item, Ref) else None
                    if producer is not None and home[producer.name][0] != root and item.name not in values:
                        values.append(item.name)  # type: ignore[union-attr]
                sources = [home[graph.producer(v).name][0] for v in values]  # type: ignore[union-attr]
                # one value per rank, read on this rank by this node alone, not in another gather
                if len(values) < 2 or len(set(sources)) != len(sources) or taken & set(values) or any(
                        set(needed.get(v, {}).get(root, ())) != {node.name} for v in values):
                    continue
                sizes = [int(cost.wire_bytes(graph.producer(v))) for v in values]  # type: ignore[arg-type]
                if not gather_time(cluster, sizes, root, sources) < fanin_sizes_time(cluster, sizes, root, sources):
                    continue
                for value in values:
                    del needed[value][root]
                    if not needed[value]:
                        del needed[value]
                taken.update(values)
                out.append((node.name, root, values, sources))
                break  # one gather per reader
        return out

    def _reductions(self, ctx: PassContext, graph: Graph, home: dict[str, tuple[int, ...]]) -> set[str]:
        """Mark the glue sums that become reduce collectives; their names."""
        cluster, cost = cluster_of(ctx), cost_model_of(ctx)
        out: set[str] = set()
        for node in graph:
            total = glue_sum(node, graph) or task_sum(node, graph)
            if total is None:
                continue
            producers = [graph.producer(value) for value in total.values]
            sources = [home[p.name][0] for p in producers if p is not None]
            root = home[node.name][0]
            if len(set(sources)) != len(sources) or root not in sources or len(home[node.name]) != 1:
                continue  # one operand per rank, the result where one of them is
            nbytes = max(int(cost.value_bytes(p)) for p in producers if p is not None)
            others = [d for d in sources if d != root]
            if not reduce_time(cluster, nbytes, root, others) < fanin_time(cluster, nbytes, root, others):
                continue
            # (`start`: `sum(xs)` adds the operands to 0, as Python does)
            reduction = Reduction("sum", tuple(Ref(v) for v in total.values), tuple(sources), nbytes,
                                  total.divisor, total.start)
            readers = {home[c][0] for c in graph.consumers(node.outputs[0])} - {root}
            if readers and readers <= set(sources):
                then_move = (broadcast_time if len(readers) > 1 else fanout_time)(cluster, nbytes, root, sorted(readers))
                if allreduce_time(cluster, nbytes, sources) <= reduce_time(cluster, nbytes, root, others) + then_move:
                    # every rank of the group gets the sum
                    reduction = replace(reduction, reduce="all", holders=tuple(sorted(sources)))
            node.comm = reduction
            out.add(node.name)
            ctx.sink.warning(
                REDUCE_ORDER_CODE,
                f"this sum of tensors on ranks {sorted(sources)} becomes "
                + ("an all-reduce collective" if reduction.everywhere
                   else f"a reduce collective onto rank {root}") + ": "
                "floating-point additions may run in another order than Python's left to right, so the "
                "result may differ in the last bits (integer tensors are exact)"
                + (f"; `{node.function}`'s body does not run there: the collective computes what its "
                   f"reduce=\"{node.options.reduce}\" declares" if node.op == "task" else ""),
                node.span,
                hint="to keep Python's order exactly, compile with -p '...,comm{collectives=false},...'",
            )
        if out:
            ctx.remark(self.name, f"{len(out)} sum(s) become reduce collective(s)")
        return out

    @staticmethod
    def _insert(graph: Graph, producer: Node, value: str, d_src: int, readers: list[int], nbytes: int,
                time: float, consumers: list[str]) -> str:
        """Add the transfer of `value` from `d_src` to `readers` (one: a message; several: a broadcast)."""
        new_value = f"{value}@{'-'.join(str(d) for d in readers)}"
        name = graph.fresh_name(new_value)
        dst = readers[0] if len(readers) == 1 else tuple(readers)
        transfer = Transfer("broadcast" if len(readers) > 1 else None, d_src, dst, nbytes)
        placement = Placement(device=dst)
        if producer.placement.finish is not None:
            start = float(producer.placement.finish)
            placement = replace(placement, start=start, finish=start + time)
        index = producer.outputs.index(value)
        graph.add_node(Node(
            name=name,
            op="transfer",
            target=TRANSFER_TARGET,
            args=(Ref(value),),
            outputs=(new_value,),
            types=(producer.types[index],),
            options=TaskOptions(out_size=producer.options.out_size),
            span=producer.span,
            placement=placement,
            comm=transfer,
        ))
        graph.replace_uses({value: new_value}, only=consumers)
        return name
