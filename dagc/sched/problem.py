"""The scheduling problem in plain form, independent of the IR, and a schedule of it.

A `Problem` has tasks 0..n-1 (names kept for reports) with their work, the bytes on each edge,
and each task's demands; and devices 0..D-1 with node, speed, memory and GPUs, plus two link
classes. Times:

    duration(i, devices) = max over the devices of  work[i] / speed[d] + flops[i] / flops_rate[d]
                           + overhead
    transfer(bytes, a, b) = 0 if a == b, else latency + bytes / bandwidth of the (intra- or
                           inter-node) link between a and b

A task that needs k devices (`need[i]` > 1) runs on k devices of one node at once. Data for a
task must reach each of its devices: it arrives at device d at
`finish[pred] + min over the pred's devices p of transfer(bytes, p, d)`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dagc.ir.order import CycleError, topological_order

if TYPE_CHECKING:
    from dagc.cluster import Cluster
    from dagc.cost import CostModel
    from dagc.ir.core import Graph, Node

__all__ = ["Problem", "Schedule", "EPS"]

EPS = 1e-9


@dataclass
class Problem:
    names: list[str]
    work: list[float]  # seconds on a device of speed 1.0
    preds: list[list[tuple[int, float]]]  # (predecessor, bytes)
    flops: list[float] | None = None  # FLOPs, run at the device's flops rate
    gpus: list[float] | None = None
    ranks: list[int] | None = None
    memory: list[int | None] | None = None
    priority: list[int] | None = None
    cpus: list[float] | None = None
    resources: list[tuple[tuple[str, float], ...]] | None = None  # custom resources per task
    # devices
    speed: list[float] = field(default_factory=lambda: [1.0])
    node_of: list[int] | None = None
    flops_rate: list[float] | None = None
    dev_memory: list[int | None] | None = None
    dev_gpus: list[int] | None = None
    dev_cpus: list[float | None] | None = None  # the CPUs of the device's node (None: not stated)
    dev_resources: list[tuple[tuple[str, float], ...]] | None = None  # the node's custom resources
    # links: (latency seconds, bandwidth bytes/s); bandwidth inf = free
    intra: tuple[float, float] = (0.0, math.inf)
    inter: tuple[float, float] = (0.0, math.inf)
    overhead: float = 0.0
    enforce: bool = True  # check device memory / GPUs (off for the implicit local cluster)

    def __post_init__(self) -> None:
        n, D = len(self.names), len(self.speed)
        self.n, self.D = n, D
        self.flops = self.flops or [0.0] * n
        self.gpus = self.gpus or [0.0] * n
        self.ranks = self.ranks or [1] * n
        self.memory = self.memory or [None] * n
        self.priority = self.priority or [0] * n
        self.node_of = self.node_of or [0] * D
        self.flops_rate = self.flops_rate or [1e12 * s for s in self.speed]
        self.dev_memory = self.dev_memory or [None] * D
        self.dev_gpus = self.dev_gpus or [1] * D
        self.cpus = self.cpus or [1.0] * n
        self.resources = self.resources or [()] * n
        self.dev_cpus = self.dev_cpus or [None] * D
        self.dev_resources = self.dev_resources or [()] * D
        # custom resources are checked only on a cluster that states some (else nothing is known of them)
        self.dev_offers = [dict(r) for r in self.dev_resources]
        self.check_resources = any(self.dev_resources)
        self.succs: list[list[tuple[int, float]]] = [[] for _ in range(n)]
        for i, ps in enumerate(self.preds):
            for j, b in ps:
                self.succs[j].append((i, b))
        self._prepare()

    # ---- derived data ------------------------------------------------------------------------
    def _prepare(self) -> None:
        n, D = self.n, self.D
        # topological order (smallest index first among the ready) and each task's position in it
        try:
            topo = topological_order(range(n), lambda i: [j for j, _ in self.preds[i]])  # type: ignore[arg-type]
        except CycleError:
            raise ValueError("the task graph has a cycle") from None
        self.topo = topo
        self.pos = [0] * n
        for k, i in enumerate(topo):
            self.pos[i] = k
        # device classes: devices with the same (speed, flops rate) run every task equally long
        classes: dict[tuple[float, float], int] = {}
        self.cls_of = [classes.setdefault((self.speed[d], self.flops_rate[d]), len(classes)) for d in range(D)]
        self.classes = list(classes)
        self.uniform = len(self.classes) == 1
        self.dur = [
            [w / s + f / r + self.overhead for (s, r) in self.classes]
            for w, f in zip(self.work, self.flops)
        ]
        self.nodes = sorted(set(self.node_of))
        self.node_devices = {v: [d for d in range(D) if self.node_of[d] == v] for v in self.nodes}
        self.comm_free = all(b == 0 for ps in self.preds for _, b in ps) and self.intra[0] == 0 and self.inter[0] == 0
        self.comm_free = self.comm_free or D == 1
        # demands → eligible devices
        self.need = [1] * n
        self.eligible: list[tuple[int, ...]] = []
        self.infeasible: list[tuple[int, str]] = []
        all_devices = tuple(range(D))
        for i in range(n):
            if not self.enforce:
                self.eligible.append(all_devices)
                continue
            g = self.gpus[i]
            k = 1
            if g > 0:
                k = max(math.ceil(g - EPS), self.ranks[i], 1)
            elif self.ranks[i] > 1:
                # CPU ranks take one device each where a node has enough, else share the node's devices
                k = min(self.ranks[i], max(len(v) for v in self.node_devices.values()))
            self.need[i] = k
            mem = self.memory[i]
            elig = tuple(
                d
                for d in range(D)
                if (g <= 0 or self.dev_gpus[d] >= 1)
                and (mem is None or self.dev_memory[d] is None or mem <= self.dev_memory[d])
                and self._offers(i, d)
            )
            if k > 1:
                elig = tuple(d for d in elig if sum(1 for e in elig if self.node_of[e] == self.node_of[d]) >= k)
            if not elig:
                self.infeasible.append((i, self._why_not(i, k)))
                elig = all_devices  # keep going; callers report `infeasible`
                self.need[i] = 1
            self.eligible.append(elig)

    def _offers(self, i: int, d: int) -> bool:
        """Whether device `d`'s node has the CPUs and custom resources task `i` needs."""
        cap = self.dev_cpus[d]
        if cap is not None and self.cpus[i] > cap + EPS:
            return False
        return not self.check_resources or all(self.dev_offers[d].get(key, 0.0) >= amount - EPS
                                               for key, amount in self.resources[i])

    def _why_not(self, i: int, k: int) -> str:
        g, mem = self.gpus[i], self.memory[i]
        stated = [c for c in self.dev_cpus if c is not None]
        if stated and len(stated) == self.D and self.cpus[i] > max(stated) + EPS:
            return f"it needs {self.cpus[i]:g} CPU(s) and the largest node has {max(stated):g}"
        if self.check_resources:
            for key, amount in self.resources[i]:
                most = max(offer.get(key, 0.0) for offer in self.dev_offers)
                if most < amount - EPS:
                    have = f"the most a node has is {most:g}" if most > 0 else "no node has it"
                    return f"it needs {amount:g} of the custom resource `{key}` and {have}"
        gpu_devs = [d for d in range(self.D) if self.dev_gpus[d] >= 1]
        if g > 0 and not gpu_devs:
            return f"it needs {g:g} GPU(s) and the cluster has no GPU device"
        if mem is not None:
            fits = [d for d in range(self.D) if self.dev_memory[d] is None or mem <= self.dev_memory[d]]
            if not fits:
                biggest = max((m for m in self.dev_memory if m is not None), default=0)
                return f"it needs {mem} bytes of memory and the largest device has {biggest}"
        if k > 1:
            per_node = max(len(v) for v in self.node_devices.values())
            return f"it needs {k} devices on one node and no node has {k} suitable devices (most: {per_node})"
        return "no device meets its demands"

    # ---- times -------------------------------------------------------------------------------
    def duration(self, i: int, devices: Sequence[int]) -> float:
        row = self.dur[i]
        return max(row[self.cls_of[d]] for d in devices)

    def min_duration(self, i: int) -> float:
        row = self.dur[i]
        return min(row[self.cls_of[d]] for d in self.eligible[i])

    def comm(self, nbytes: float, a: int, b: int) -> float:
        if a == b:
            return 0.0
        lat, bw = self.intra if self.node_of[a] == self.node_of[b] else self.inter
        return lat + nbytes / bw

    def mean_comm_factors(self) -> tuple[float, float]:
        """(mean latency, mean 1/bandwidth) over ordered pairs of distinct devices."""
        D = self.D
        if D < 2:
            return 0.0, 0.0
        same = sum(len(v) * (len(v) - 1) for v in self.node_devices.values())
        total = D * (D - 1)
        cross = total - same
        lat = (same * self.intra[0] + cross * self.inter[0]) / total
        inv = (same / self.intra[1] + cross / self.inter[1]) / total
        return lat, inv

    def edges(self) -> list[tuple[int, int, float]]:
        return [(j, i, b) for i, ps in enumerate(self.preds) for j, b in ps]

    def reversed(self) -> Problem:
        """The same problem with every edge turned around (for backward scheduling)."""
        rev = Problem.__new__(Problem)
        rev.__dict__.update(self.__dict__)
        rev.preds, rev.succs = self.succs, self.preds
        # (the largest index first among the ready: the forward order's mirror)
        topo = topological_order(range(self.n), lambda i: [j for j, _ in rev.preds[i]],  # type: ignore[arg-type]
                                 priority=lambda i: -i)
        rev.topo = topo
        rev.pos = [0] * self.n
        for k, i in enumerate(topo):
            rev.pos[i] = k
        return rev

    # ---- construction from the IR ------------------------------------------------------------
    @classmethod
    def from_graph(cls, graph: Graph, cost_model: CostModel | None = None, cluster: Cluster | None = None) -> Problem:
        """One task per IR node (program order); edge bytes from the producers' `out_size`. A region
        node asks for what its bodies need and takes what they are expected to take (dagc.ir.regions)."""
        from dagc.cluster import Cluster
        from dagc.cost import CostModel
        from dagc.ir.regions import demand

        cost_model = cost_model or CostModel()
        cluster = cluster or Cluster.local()
        nodes = graph.nodes
        index = {node.name: i for i, node in enumerate(nodes)}
        preds: list[list[tuple[int, float]]] = [[] for _ in nodes]
        data: dict[tuple[int, int], float] = {}
        for src, dst, _value in graph.data_edges():
            key = (index[src], index[dst])
            data[key] = data.get(key, 0.0) + cost_model.wire_bytes(graph.node(src))
        for src, dst in graph.edges():
            if src not in index:
                continue
            key = (index[src], index[dst])
            if key not in data:
                data[key] = 0.0
        for (j, i), b in data.items():
            preds[i].append((j, b))
        work, flops = zip(*(cost_model.work(n) for n in nodes)) if nodes else ((), ())
        work, flops = list(work), list(flops)
        demands = [demand(n) for n in nodes]
        ranks = [d.ranks for d in demands]
        for i, k, share in _spread_maps(graph, nodes, demands, cluster):
            ranks[i] = k  # planned as k devices at once, each running its share of the items
            work[i] *= share
            flops[i] *= share
        return cls(
            names=[n.name for n in nodes],
            work=work,
            flops=flops,
            preds=preds,
            gpus=[d.gpus for d in demands],
            ranks=ranks,
            memory=[d.memory for d in demands],
            cpus=[d.cpus for d in demands],
            resources=[d.resources for d in demands],
            priority=[int(n.options.priority) for n in nodes],
            **cls._device_fields(cluster),
            overhead=cost_model.overhead,
        )

    @classmethod
    def _device_fields(cls, cluster: Cluster) -> dict[str, Any]:
        devs = cluster.devices
        return dict(
            speed=[d.speed for d in devs],
            node_of=[d.node for d in devs],
            flops_rate=[d.flops_rate for d in devs],
            dev_memory=[d.memory for d in devs],
            dev_gpus=[d.gpus for d in devs],
            dev_cpus=[d.cpus for d in devs],
            dev_resources=[d.resources for d in devs],
            intra=(cluster.intra.latency, cluster.intra.bandwidth),
            inter=(cluster.inter.latency, cluster.inter.bandwidth),
            enforce=not cluster.implicit,
        )

    @classmethod
    def of_nodes(cls, nodes: Sequence[Node], cluster: Cluster) -> Problem:
        """Independent tasks with the nodes' own demands and no work: which of them fit `cluster`
        (`infeasible`), e.g. to name the task inside a region that makes the region not fit."""
        from dagc.ir.regions import Demand

        demands = [Demand.of_options(n) for n in nodes]
        return cls(names=[n.name for n in nodes], work=[0.0] * len(nodes), preds=[[] for _ in nodes],
                   gpus=[d.gpus for d in demands], ranks=[d.ranks for d in demands],
                   memory=[d.memory for d in demands], cpus=[d.cpus for d in demands],
                   resources=[d.resources for d in demands], **cls._device_fields(cluster))


def _spread_maps(graph: Graph, nodes: Sequence[Node], demands: Sequence[Any], cluster: Cluster,
                 ) -> list[tuple[int, int, float]]:
    """(index, devices, share of its expected work each device runs) for each map whose items are planned
    across devices: one the `spread` pass made multi-rank (torch: item i on rank i % ranks), or one whose
    items are independent and share no state (Ray runs each item as a task of its own), over as many devices
    as fit its body, up to its expected width (`dagc.each(..., expected=N)` or a profile's). Each device runs
    ⌈width / devices⌉ items: that share of the width's work."""
    from dagc.ir.effects import state_groups
    from dagc.ir.regions import expected_width, independent_items

    maps = [i for i, n in enumerate(nodes) if n.op == "map"]
    if not maps:
        return []
    shared: set[str] | None = None
    out = []
    for i in maps:
        node, need = nodes[i], demands[i]
        width = expected_width(node)
        k = node.options.ranks
        if k <= 1:
            if width <= 1 or not independent_items(node):
                continue
            if shared is None:  # (asked once, of the maps that may spread)
                shared = {name for group in state_groups(graph) for name in group.nodes}
            if node.name in shared:
                continue
            fits = sum(1 for d in cluster.devices if d.gpus >= need.gpus
                       and (need.memory is None or d.memory is None or d.memory >= need.memory))
            k = min(fits, math.ceil(width))
            if k <= 1:
                continue
        if width > 0:
            out.append((i, k, math.ceil(width / k) / width))
    return out


@dataclass
class Schedule:
    """Per task: its device(s), start and finish."""

    devices: list[tuple[int, ...]]
    start: list[float]
    finish: list[float]
    algo: str = ""

    @property
    def makespan(self) -> float:
        return max(self.finish, default=0.0)

    def device(self, i: int) -> int:
        return self.devices[i][0]

    def per_device(self, n_devices: int) -> list[list[int]]:
        """Tasks on each device, by start time."""
        out: list[list[int]] = [[] for _ in range(n_devices)]
        for i in sorted(range(len(self.start)), key=lambda t: (self.start[t], self.finish[t], t)):
            for d in self.devices[i]:
                out[d].append(i)
        return out

    def utilization(self, n_devices: int) -> list[float]:
        """Busy fraction of each device over the makespan."""
        span = self.makespan
        busy = [0.0] * n_devices
        for i, devs in enumerate(self.devices):
            for d in devs:
                busy[d] += self.finish[i] - self.start[i]
        return [b / span if span > 0 else 0.0 for b in busy]

    def cut_edges(self, problem: Problem) -> list[tuple[int, int, float]]:
        """Edges whose ends run on different devices: (src, dst, bytes)."""
        return [
            (j, i, b)
            for i, ps in enumerate(problem.preds)
            for j, b in ps
            if set(self.devices[j]) != set(self.devices[i])
        ]
