"""The cost model: how long a task runs on a device, and how long data takes to move.

    task time      = cost / device.speed                      (when the task gives `cost` seconds)
                   = flops / device.flops_rate                (when it gives only `flops`)
                   = DEFAULT_COST / device.speed              (when it gives neither; reported)
                   + the backend's launch overhead (LAUNCH_OVERHEAD)
    transfer time  = 0 on the same device, else link.latency + bytes / link.bandwidth
                     (the intra-node link between devices of one node, the inter-node link otherwise)
    bytes of a value = the producer's `out_size`, or DEFAULT_OUT_SIZE when not given (reported)

`CostModel.defaulted(graph)` lists the tasks that used a default, so that `dagc plan` can say so.
"""

from __future__ import annotations

from dataclasses import dataclass

from dagc.cluster import Cluster, Device
from dagc.ir.core import Graph, Node

__all__ = [
    "LAUNCH_OVERHEAD",
    "DEFAULT_COST",
    "DEFAULT_OUT_SIZE",
    "CostModel",
]

# Seconds an engine spends starting one task, by backend (from the backend registry).
#   local: a function call in one process;  torch: a collective-aware step in a torchrun worker;
#   ray: scheduling a remote task through the Ray core worker.
def _launch_overheads() -> dict[str, float]:
    from dagc.backends import REGISTRY  # the backend registry is where they are declared

    return {name: backend.launch_overhead for name, backend in REGISTRY.items()}


LAUNCH_OVERHEAD: dict[str, float] = _launch_overheads()

# A task that gives neither `cost` nor `flops` is assumed to run this long (seconds at speed 1.0).
DEFAULT_COST = 1.0
# A task that gives no `out_size` is assumed to produce this many bytes (1 MiB): not free to move,
# so that unannotated tasks still prefer to stay near their consumers.
DEFAULT_OUT_SIZE = 1 << 20

# Node kinds that run no user code: no default cost applies to them.
_FREE_OPS = ("glue",)


@dataclass(frozen=True)
class CostModel:
    """Task and transfer times for one backend. Frozen: share one instance freely."""

    backend: str = "local"
    default_cost: float = DEFAULT_COST
    default_out_size: int = DEFAULT_OUT_SIZE
    launch_overhead: float | None = None  # None: LAUNCH_OVERHEAD[backend]

    @property
    def overhead(self) -> float:
        if self.launch_overhead is not None:
            return self.launch_overhead
        return LAUNCH_OVERHEAD.get(self.backend, LAUNCH_OVERHEAD["local"])

    # ---- tasks -------------------------------------------------------------------------------
    def work(self, node: Node) -> tuple[float, float]:
        """(seconds at speed 1.0, flops) of a node's own work; exactly one of them is non-zero
        (or both zero). A node without an estimate gets `default_cost` seconds."""
        opts = node.options
        if node.op == "transfer":
            return 0.0, 0.0
        if opts.cost is not None:
            return float(opts.cost), 0.0
        if opts.flops is not None:
            return 0.0, float(opts.flops)
        if node.op in _FREE_OPS:
            return 0.0, 0.0
        return self.default_cost, 0.0

    def task_time(self, node: Node, device: Device) -> float:
        """Seconds `node` runs on `device`, launch overhead included."""
        seconds, flops = self.work(node)
        return seconds / device.speed + flops / device.flops_rate + self.overhead

    def uses_default_cost(self, node: Node) -> bool:
        return (
            node.op not in _FREE_OPS
            and node.op != "transfer"
            and node.options.cost is None
            and node.options.flops is None
        )

    # ---- data --------------------------------------------------------------------------------
    def value_bytes(self, node: Node) -> int:
        """Bytes of each value `node` produces."""
        if node.options.out_size is not None:
            return node.options.out_size
        if node.op == "transfer" and "transfer.bytes" in node.attrs:
            return int(node.attrs["transfer.bytes"])
        return self.default_out_size

    def uses_default_size(self, node: Node) -> bool:
        return node.options.out_size is None and node.op != "transfer"

    def transfer_time(self, cluster: Cluster, nbytes: float, src: int, dst: int) -> float:
        """Seconds to move `nbytes` from device `src` to device `dst` (0 on the same device)."""
        return cluster.transfer_time(nbytes, src, dst)

    # ---- reporting ---------------------------------------------------------------------------
    def defaulted(self, graph: Graph) -> dict[str, list[str]]:
        """Which tasks used a default: {"cost": [...], "out_size": [...]} (node names, program order).

        `out_size` lists only producers whose value is read by another node."""
        read = {src for src, _, _ in graph.data_edges()}
        return {
            "cost": [n.name for n in graph if self.uses_default_cost(n)],
            "out_size": [n.name for n in graph if n.name in read and self.uses_default_size(n)],
        }
