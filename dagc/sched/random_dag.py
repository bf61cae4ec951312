"""Seeded random task graphs and clusters, for tests and benchmarks."""

from __future__ import annotations

import random

from .loaders import TaskGraph
from .problem import Problem

__all__ = ["random_task_graph", "random_problem"]


def random_task_graph(
    n: int,
    *,
    seed: int = 0,
    max_preds: int = 3,
    window: int = 100,
    work: tuple[float, float] = (1.0, 10.0),
    nbytes: tuple[float, float] = (0.0, 1e8),
) -> TaskGraph:
    """n tasks; task i draws up to `max_preds` predecessors among the `window` tasks before it."""
    rng = random.Random(seed)
    names = [f"t{i}" for i in range(n)]
    costs = [round(rng.uniform(*work), 3) for _ in range(n)]
    preds: list[list[tuple[int, float]]] = []
    for i in range(n):
        k = rng.randint(0, min(max_preds, i))
        chosen = sorted(rng.sample(range(max(0, i - window), i), k)) if k else []
        preds.append([(j, float(int(rng.uniform(*nbytes)))) for j in chosen])
    return TaskGraph(names, costs, preds, source=f"random(n={n}, seed={seed})")


def random_problem(
    n: int,
    devices: int,
    *,
    seed: int = 0,
    nodes: int = 1,
    bandwidth: float = 1e9,
    latency: float = 1e-5,
    inter_bandwidth: float | None = None,
) -> Problem:
    g = random_task_graph(n, seed=seed)
    per_node = max(1, devices // nodes)
    return Problem(
        names=g.names,
        work=g.work,
        preds=g.preds,
        speed=[1.0] * devices,
        node_of=[min(d // per_node, nodes - 1) for d in range(devices)],
        dev_gpus=[1] * devices,
        intra=(latency, bandwidth),
        inter=(latency * 5, inter_bandwidth or bandwidth / 10),
    )
