"""`comm`: make every cross-device data movement an explicit `transfer` node."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from dagc.ir.core import Graph, Node
from dagc.ir.types import Ref, TaskOptions
from dagc.passes._rewrite import replace_uses
from dagc.passes.base import Pass, PassContext, register
from dagc.passes.partition import cluster_of, cost_model_of
from dagc.passes.schedule import device_list

__all__ = ["Comm", "TRANSFER_TARGET"]

TRANSFER_TARGET = "dagc.runtime.transfer:transfer"


@register
@dataclass(frozen=True)
class Comm(Pass):
    """Pre: every node has `partition.device` (otherwise the pass changes nothing and says so).
    Post: for each value read on a device other than its producer's (first) device there is one
    node `value@dst` with op `transfer`, args `(Ref(value),)`, output `value@dst`, attrs
    `transfer.src`, `transfer.dst`, `transfer.bytes` (and `partition.device` = dst), the producer's
    span; the consumers on `dst` read `value@dst`. With `schedule.*` attributes present the
    transfer node gets its start (the producer's finish) and finish too."""

    name: ClassVar[str] = "comm"

    def apply(self, ctx: PassContext, graph: Graph) -> None:
        if any("partition.device" not in n.attrs for n in graph):
            ctx.remark(self.name, "graph is not partitioned: no transfers inserted")
            return
        cluster = cluster_of(ctx)
        cost = cost_model_of(ctx)
        home = {n.name: (device_list(n.attrs["partition.device"]) or (0,)) for n in graph}
        # (value, dst) -> consumers
        needed: dict[tuple[str, int], list[str]] = {}
        for src, dst, value in graph.data_edges():
            if graph.node(src).op == "transfer":
                continue
            d_src, d_dst = home[src][0], home[dst][0]
            if d_src != d_dst:
                needed.setdefault((value, d_dst), []).append(dst)
        if not needed:
            return
        inserted: dict[str, list[str]] = {}
        for (value, d_dst), consumers in needed.items():
            producer = graph.producer(value)
            assert producer is not None
            d_src = home[producer.name][0]
            nbytes = int(cost.value_bytes(producer))
            new_value = f"{value}@{d_dst}"
            name = graph.fresh_name(new_value)
            attrs: dict[str, object] = {
                "transfer.src": d_src,
                "transfer.dst": d_dst,
                "transfer.bytes": nbytes,
                "partition.device": d_dst,
            }
            if "schedule.finish" in producer.attrs:
                start = float(producer.attrs["schedule.finish"])
                attrs["schedule.start"] = start
                attrs["schedule.finish"] = start + cluster.transfer_time(nbytes, d_src, d_dst)
            index = producer.outputs.index(value)
            node = Node(
                name=name,
                op="transfer",
                target=TRANSFER_TARGET,
                args=(Ref(value),),
                outputs=(new_value,),
                types=(producer.types[index],),
                options=TaskOptions(out_size=producer.options.out_size),
                span=producer.span,
                attrs=attrs,
            )
            graph.add_node(node)
            inserted.setdefault(producer.name, []).append(name)
            replace_uses(graph, {value: new_value}, only=set(consumers))
        order: list[str] = []
        for n in graph:
            if n.op == "transfer" and n.name in {t for ts in inserted.values() for t in ts}:
                continue
            order.append(n.name)
            order.extend(inserted.get(n.name, ()))
        graph.reorder(order)
        graph.invalidate()
        ctx.remark(self.name, f"inserted {sum(len(v) for v in inserted.values())} transfer(s)")
