"""Readers for public task-graph benchmarks, producing `Problem`s.

- STG (Standard Task Graph Set): `read_stg(path)` → (names, work, preds); first line is a task
  count that is not reliable, so task lines are read until the `#` trailer. The dummy entry and
  exit tasks are kept, with their cost 0.
- WfCommons wfformat 1.5: `read_wfcommons(path)`; task cost = `runtimeInSeconds`, an edge's bytes
  = the sizes of files the parent writes and the child reads.
- `scale_to_ccr(problem, ccr)`: the same problem with link bandwidth set so that the mean transfer
  time of an edge over the mean task time equals `ccr`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from .problem import Problem

__all__ = ["TaskGraph", "read_stg", "read_wfcommons", "load_task_graph", "make_problem", "scale_to_ccr", "ccr"]


@dataclass
class TaskGraph:
    """A cluster-independent task graph: names, seconds of work, (pred, bytes) lists."""

    names: list[str]
    work: list[float]
    preds: list[list[tuple[int, float]]]
    source: str = ""


def read_stg(path: str) -> TaskGraph:
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    rows: list[list[int]] = []
    for line in lines[1:]:
        text = line.strip()
        if text.startswith("#"):
            break
        if not text:
            continue
        rows.append([int(x) for x in text.split()])
    index = {row[0]: k for k, row in enumerate(rows)}
    names, work, preds = [], [], []
    for row in rows:
        tid, cost, npred = row[0], row[1], row[2]
        ps = row[3 : 3 + npred]
        if len(ps) != npred:
            raise ValueError(f"{path}: task {tid} lists {len(ps)} predecessors, expected {npred}")
        names.append(f"t{tid}")
        work.append(float(cost))
        preds.append([(index[q], 0.0) for q in ps])
    return TaskGraph(names, work, preds, source=path)


def read_wfcommons(path: str) -> TaskGraph:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    wf = data["workflow"]
    spec, execution = wf["specification"], wf.get("execution", {})
    sizes = {f["id"]: float(f.get("sizeInBytes", 0)) for f in spec.get("files", [])}
    runtime = {t["id"]: float(t.get("runtimeInSeconds", 0.0)) for t in execution.get("tasks", [])}
    tasks = spec["tasks"]
    index = {t["id"]: k for k, t in enumerate(tasks)}
    names = [t["id"] for t in tasks]
    work = [runtime.get(t["id"], 0.0) for t in tasks]
    preds: list[list[tuple[int, float]]] = [[] for _ in tasks]
    for k, t in enumerate(tasks):
        inputs = set(t.get("inputFiles", []))
        for parent in t.get("parents", []):
            j = index[parent]
            shared = inputs.intersection(tasks[j].get("outputFiles", []))
            preds[k].append((j, sum(sizes.get(f, 0.0) for f in shared)))
    return TaskGraph(names, work, preds, source=path)


def load_task_graph(path: str) -> TaskGraph:
    return read_stg(path) if path.endswith(".stg") else read_wfcommons(path)


def make_problem(
    graph: TaskGraph,
    devices: int,
    *,
    bandwidth: float = math.inf,
    latency: float = 0.0,
    nodes: int = 1,
) -> Problem:
    """`graph` on `nodes` × `devices // nodes` identical devices, every link alike."""
    per_node = max(1, devices // nodes)
    return Problem(
        names=list(graph.names),
        work=list(graph.work),
        preds=[list(ps) for ps in graph.preds],
        speed=[1.0] * devices,
        node_of=[d // per_node for d in range(devices)],
        dev_gpus=[0] * devices,
        intra=(latency, bandwidth),
        inter=(latency, bandwidth),
    )


def ccr(p: Problem) -> float:
    """Mean edge transfer time (between two distinct devices) over mean task time."""
    edges = [b for ps in p.preds for _, b in ps]
    if not edges or p.n == 0:
        return 0.0
    lat, inv = p.mean_comm_factors()
    mean_comm = sum(lat + b * inv for b in edges) / len(edges)
    mean_task = sum(p.min_duration(i) for i in range(p.n)) / p.n
    return mean_comm / mean_task if mean_task > 0 else math.inf


def scale_to_ccr(graph: TaskGraph, devices: int, target: float, *, nodes: int = 1) -> Problem:
    """A problem whose single link bandwidth gives the wanted CCR (zero latency)."""
    edges = [b for ps in graph.preds for _, b in ps]
    mean_bytes = sum(edges) / len(edges) if edges else 0.0
    mean_task = sum(graph.work) / len(graph.work) if graph.work else 0.0
    if target <= 0 or mean_bytes == 0 or mean_task == 0:
        return make_problem(graph, devices, nodes=nodes)
    bandwidth = mean_bytes / (target * mean_task)
    return make_problem(graph, devices, bandwidth=bandwidth, nodes=nodes)
