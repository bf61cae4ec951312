"""The cost model: how long a task runs on a device, and how long data takes to move.

    task time      = cost / device.speed                      (when the task gives `cost` seconds)
                   = flops / device.flops_rate                (when it gives only `flops`)
                   = DEFAULT_COST / device.speed              (when it gives neither; reported)
                   + the backend's launch overhead (LAUNCH_OVERHEAD)
    transfer time  = 0 on the same device, else link.latency + bytes / link.bandwidth
                     (the intra-node link between devices of one node, the inter-node link otherwise)
    bytes of a value = the producer's `out_size`, or DEFAULT_OUT_SIZE when not given (reported)
    a region's work  = cond: its costlier branch; loop: its body × expected trips (dagc.ir.regions)

`CostModel.defaulted(graph)` lists the tasks that used a default, so that `dagc plan` can say so.

Collectives (α-β model; α = the link's latency, β = its bandwidth; a group spanning nodes uses the
inter-node link for every step, its slowest):
    fan-out by sends   to k readers   = Σ_i (α_i + n/β_i)      the root's sends go one after another
    broadcast          to k readers   = ⌈log2(k+1)⌉ (α + n/β)   binomial tree (gloo's, NCCL's for small n)
    fan-in by receives from k ranks   = Σ_i (α_i + n/β_i)      the root receives one after another
    reduce             from k ranks   = ⌈log2(k+1)⌉ (α + n/β)   binomial tree
    all-reduce         over p ranks   = min(2(p-1)(α + n/(p β)),  ring: reduce-scatter + all-gather
                                            2⌈log2 p⌉ (α + n/β))   tree: reduce, then broadcast
    gather             from k ranks   = ⌈log2(k+1)⌉ α + Σ_i n_i/β  binomial tree: every byte still crosses
                                                                 the root's link, so only latency is saved
`n` is the bytes on the wire: halved for a value sent compressed to 16 bits (`compress="bf16"`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from dagc.cluster import Cluster, Device, Link
from dagc.ir import regions
from dagc.ir.core import REGION_OPS, Graph, Node
from dagc.ir.facts import Transfer

__all__ = [
    "LAUNCH_OVERHEAD",
    "DEFAULT_COST",
    "DEFAULT_OUT_SIZE",
    "CostModel",
    "COMPRESSED_FACTOR",
    "fanout_time",
    "broadcast_time",
    "fanin_time",
    "fanin_sizes_time",
    "reduce_time",
    "allreduce_time",
    "gather_time",
    "group_link",
]

# Bytes on the wire per byte of a floating value sent compressed (`compress="bf16"` or "fp16": 16 of 32 bits).
COMPRESSED_FACTOR = 0.5

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

    def __post_init__(self) -> None:
        if self.launch_overhead is None and self.backend not in LAUNCH_OVERHEAD:
            # an unknown name would silently get some other backend's overhead
            raise ValueError(f"unknown backend {self.backend!r}; known: {', '.join(sorted(LAUNCH_OVERHEAD))}")

    @property
    def overhead(self) -> float:
        if self.launch_overhead is not None:
            return self.launch_overhead
        return LAUNCH_OVERHEAD[self.backend]

    # ---- tasks -------------------------------------------------------------------------------
    def work(self, node: Node) -> tuple[float, float]:
        """(seconds at speed 1.0, flops) of a node's own work; exactly one of them is non-zero
        (or both zero). A node without an estimate gets `default_cost` seconds; a region node is
        planned from its bodies (`regions.expected_work`), so both may then be non-zero."""
        opts = node.options
        if node.op in REGION_OPS:
            return regions.expected_work(node, self.work)
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
        """Whether `node`'s own estimate is the default (a region answers through its inner nodes)."""
        return (
            node.op not in _FREE_OPS
            and node.op not in REGION_OPS
            and node.op != "transfer"
            and node.options.cost is None
            and node.options.flops is None
        )

    # ---- data --------------------------------------------------------------------------------
    def value_bytes(self, node: Node) -> int:
        """Bytes of each value `node` produces."""
        if node.options.out_size is not None:
            return node.options.out_size
        if node.op == "transfer" and isinstance(node.comm, Transfer) and node.comm.bytes is not None:
            return int(node.comm.bytes)
        return self.default_out_size

    def wire_bytes(self, node: Node) -> int:
        """Bytes that cross a link when `node`'s value moves: `value_bytes`, halved when the task
        sends its floating tensors compressed (`compress="bf16"` / "fp16")."""
        nbytes = self.value_bytes(node)
        return int(nbytes * COMPRESSED_FACTOR) if node.options.compress else nbytes

    def uses_default_size(self, node: Node) -> bool:
        return node.options.out_size is None and node.op != "transfer"

    def transfer_time(self, cluster: Cluster, nbytes: float, src: int, dst: int) -> float:
        """Seconds to move `nbytes` from device `src` to device `dst` (0 on the same device)."""
        return cluster.transfer_time(nbytes, src, dst)

    # ---- reporting ---------------------------------------------------------------------------
    def defaulted(self, graph: Graph) -> dict[str, list[str]]:
        """Which tasks used a default: {"cost": [...], "out_size": [...]} (node names, program order).

        `out_size` lists only producers whose value is read by another node. Nodes inside a region
        are listed by their own names, after the region's place in program order."""
        read = {src for src, _, _ in graph.data_edges()}
        planned = [m for n in graph for m in ([n, *regions.walk(n)] if n.op in REGION_OPS else [n])]
        return {
            "cost": [n.name for n in planned if self.uses_default_cost(n)],
            "out_size": [n.name for n in graph if n.name in read and self.uses_default_size(n)],
        }


# ---- collectives ---------------------------------------------------------------------------------
def group_link(cluster: Cluster, root: int, members: Sequence[int]) -> Link:
    """The link a collective over `root` and `members` is limited by: the slowest one it crosses."""
    links = [link for m in members if (link := cluster.link(root, m)) is not None]
    if any(link == cluster.inter for link in links) or any(
            cluster.link(a, b) == cluster.inter for a in members for b in members if a < b):
        return cluster.inter
    return cluster.intra


def _tree_steps(ranks: int) -> int:
    return max(1, math.ceil(math.log2(ranks))) if ranks > 1 else 0


def fanout_time(cluster: Cluster, nbytes: float, root: int, readers: Sequence[int]) -> float:
    """Seconds for `root` to send `nbytes` to each reader in turn (point-to-point)."""
    return sum(cluster.transfer_time(nbytes, root, r) for r in readers if r != root)


def broadcast_time(cluster: Cluster, nbytes: float, root: int, readers: Sequence[int]) -> float:
    """Seconds for a binomial-tree broadcast of `nbytes` from `root` to `readers`."""
    others = sorted({r for r in readers if r != root})
    if not others:
        return 0.0
    return _tree_steps(len(others) + 1) * group_link(cluster, root, others).time(nbytes)


def fanin_time(cluster: Cluster, nbytes: float, root: int, senders: Sequence[int]) -> float:
    """Seconds for `root` to receive `nbytes` from each sender in turn (point-to-point)."""
    return sum(cluster.transfer_time(nbytes, s, root) for s in senders if s != root)


def fanin_sizes_time(cluster: Cluster, sizes: Sequence[float], root: int, senders: Sequence[int]) -> float:
    """Seconds for `root` to receive `sizes[i]` bytes from `senders[i]` in turn (point-to-point)."""
    return sum(cluster.transfer_time(n, s, root) for n, s in zip(sizes, senders) if s != root)


def reduce_time(cluster: Cluster, nbytes: float, root: int, senders: Sequence[int]) -> float:
    """Seconds for a binomial-tree reduce of `nbytes` from `senders` onto `root`."""
    return broadcast_time(cluster, nbytes, root, senders)


def allreduce_time(cluster: Cluster, nbytes: float, ranks: Sequence[int]) -> float:
    """Seconds for an all-reduce of `nbytes` over `ranks`: the faster of a ring and a tree."""
    group = sorted(set(ranks))
    p = len(group)
    if p < 2:
        return 0.0
    link = group_link(cluster, group[0], group[1:])
    ring = 2 * (p - 1) * link.time(nbytes / p)
    return min(ring, 2 * _tree_steps(p) * link.time(nbytes))


def gather_time(cluster: Cluster, sizes: Sequence[float], root: int, senders: Sequence[int]) -> float:
    """Seconds for a binomial-tree gather onto `root` of `sizes[i]` bytes from `senders[i]`: the
    tree's ⌈log₂ p⌉ latencies, and every byte crossing the root's link once (Σ n/β). Against
    `fanin_time` (p−1 latencies and the same bytes) it saves latency only: from 3 senders on."""
    others = [(n, s) for n, s in zip(sizes, senders) if s != root]
    if not others:
        return 0.0
    link = group_link(cluster, root, [s for _, s in others])
    return _tree_steps(len(others) + 1) * link.latency + sum(n for n, _ in others) / link.bandwidth
