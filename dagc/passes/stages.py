"""`stages`: split a chain of layer tasks into K pipeline stages, exactly.

The tasks, in topological order, are cut into K contiguous, non-empty stages; stage j runs on
device j (mod the device count). A stage's time is the sum of its tasks' times plus the time to
send the activations that cross its end (the bytes of every data edge from this stage or an
earlier one to a later one) to the next stage's device. `split_chain` finds the cut minimising the
slowest stage by dynamic programming over (stage, cut position): exact, O(K·n²).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from dagc.ir.core import Graph
from dagc.passes.base import Pass, PassContext, register
from dagc.passes.partition import cluster_of, cost_model_of

__all__ = ["Stages", "split_chain", "stage_times"]


def stage_times(
    times: Sequence[float], cuts: Sequence[int], boundary: Callable[[int, int], float]
) -> list[float]:
    """Time of each stage for cut positions `cuts` (stage j = times[cuts[j-1]:cuts[j]])."""
    bounds = [0, *cuts, len(times)]
    out = []
    for j in range(len(bounds) - 1):
        a, b = bounds[j], bounds[j + 1]
        t = sum(times[a:b])
        if b < len(times):
            t += boundary(b, j)
        out.append(t)
    return out


def split_chain(
    times: Sequence[float], k: int, boundary: Callable[[int, int], float]
) -> tuple[float, list[int]]:
    """(slowest stage time, cut positions) of the best split of `times` into k contiguous stages.

    `boundary(b, j)` is the transfer time when stage j ends just before task b (b < n).
    """
    n = len(times)
    if not 1 <= k <= n:
        raise ValueError(f"cannot split {n} tasks into {k} non-empty stages")
    prefix = [0.0]
    for t in times:
        prefix.append(prefix[-1] + t)
    inf = float("inf")
    # best[j][b]: slowest of stages 0..j covering tasks [0, b), stage j ending at b
    best = [[inf] * (n + 1) for _ in range(k)]
    arg = [[0] * (n + 1) for _ in range(k)]
    for b in range(1, n + 1):
        best[0][b] = prefix[b] + (boundary(b, 0) if b < n else 0.0)
    for j in range(1, k):
        for b in range(j + 1, n + 1):
            edge = boundary(b, j) if b < n else 0.0
            top, where = inf, j
            for a in range(j, b):
                v = max(best[j - 1][a], prefix[b] - prefix[a] + edge)
                if v < top:
                    top, where = v, a
            best[j][b], arg[j][b] = top, where
    cuts = []
    b = n
    for j in range(k - 1, 0, -1):
        b = arg[j][b]
        cuts.append(b)
    return best[k - 1][n], sorted(cuts)


@register
@dataclass(frozen=True)
class Stages(Pass):
    """Pre: verified graph. Post: every node has `stages.stage` (0..K-1) and `partition.device`
    (its stage's device); the graph has `stages.k`, `stages.bottleneck` (slowest stage, seconds)
    and `stages.times` (per stage). Option `k`: number of stages (0: one per device)."""

    name: ClassVar[str] = "stages"
    k: int = 0

    def apply(self, ctx: PassContext, graph: Graph) -> None:
        cluster = cluster_of(ctx)
        cost = cost_model_of(ctx)
        order = graph.topological_order()
        n = len(order)
        if n == 0:
            return
        k = min(self.k if self.k > 0 else cluster.n_devices, n)
        pos = {name: i for i, name in enumerate(order)}
        device = cluster.devices[0]
        times = [cost.task_time(graph.node(name), device) for name in order]
        # bytes crossing a cut before position b: edges (u, v) with pos[u] < b <= pos[v]
        delta = [0.0] * (n + 1)
        for src, dst, _value in graph.data_edges():
            a, b = pos[src], pos[dst]
            if a < b:
                nbytes = cost.wire_bytes(graph.node(src))
                delta[a + 1] += nbytes
                delta[b + 1] -= nbytes
        crossing = [0.0] * (n + 1)
        run = 0.0
        for b in range(n + 1):
            run += delta[b]
            crossing[b] = run
        D = cluster.n_devices

        def boundary(b: int, j: int) -> float:
            if crossing[b] <= 0:
                return 0.0
            return cluster.transfer_time(crossing[b], j % D, (j + 1) % D)

        bottleneck, cuts = split_chain(times, k, boundary)
        bounds = [0, *cuts, n]
        for j in range(k):
            for name in order[bounds[j] : bounds[j + 1]]:
                node = graph.node(name)
                node.attrs["stages.stage"] = j
                node.placement = node.placement.on((j % D,))
        graph.attrs["stages.k"] = k
        graph.attrs["stages.bottleneck"] = bottleneck
        graph.attrs["stages.times"] = stage_times(times, cuts, boundary)
        ctx.remark(self.name, f"{k} stages, slowest {bottleneck:g}s; cuts before tasks "
                   + ", ".join(f"`{order[c]}`" for c in cuts))
