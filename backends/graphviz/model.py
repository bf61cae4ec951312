"""What a picture shows before it is drawn: each node's devices and estimated duration, the critical path,
the focus, and the groups (unrolled loops, regions) nodes are gathered into."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from dagc.ir import regions
from dagc.ir.core import Graph, Node

# `collapse="auto"` collapses loop instances when the graph has more tasks than this.
COLLAPSE_AUTO = 60


_INDEX_RE = re.compile(r"\[\d+\]")


class FocusError(ValueError):
    """`focus` names no task of the graph; the message suggests close names."""


def loop_pattern(name: str) -> str | None:
    """`train[3]` → `train[*]`, `shard[2].tokenize` → `shard[*].tokenize`; None without an index."""
    pattern = _INDEX_RE.sub("[*]", name)
    return pattern if pattern != name else None


def cluster_of_graph(graph: Graph, cluster: Any = None) -> Any:
    """`cluster`, else the cluster that `partition` recorded in the graph (`partition.cluster`), else None."""
    if cluster is not None:
        return cluster
    record = graph.attrs.get("partition.cluster")
    if not isinstance(record, dict) or not isinstance(record.get("devices"), list) or not record["devices"]:
        return None
    from dagc.cluster import Cluster, Device

    try:
        devices = tuple(Device(i, int(d["node"]), kind=str(d.get("kind", "gpu")), memory=d.get("memory"),
                               speed=float(d.get("speed", 1.0)), gpus=int(d.get("gpus", 1)))
                        for i, d in enumerate(record["devices"]))
        return Cluster(devices)
    except (KeyError, TypeError, ValueError):
        return None


def node_devices(node: Node) -> tuple[int, ...]:
    return node.devices


# ---- estimates ------------------------------------------------------------------------------------
def node_duration(node: Node, cost_model: Any, cluster: Any) -> float:
    """Estimated seconds of `node`: its scheduled duration, else the cost model's time."""
    start, finish = node.placement.start, node.placement.finish
    if start is not None and finish is not None:
        return max(0.0, float(finish) - float(start))
    seconds, flops = cost_model.work(node)
    devices = node_devices(node)
    if cluster is not None and devices and devices[0] < cluster.n_devices:
        return cost_model.task_time(node, cluster.devices[devices[0]])
    return seconds + flops / 1e12


def _edge_time(graph: Graph, src: Node, dst: Node, cost_model: Any, cluster: Any) -> float:
    a, b = node_devices(src), node_devices(dst)
    if cluster is None or not a or not b or set(a) == set(b) or dst.op == "transfer":
        return 0.0
    if src.op == "transfer":
        return 0.0
    if max(a[0], b[0]) >= cluster.n_devices:
        return 0.0
    return cluster.transfer_time(cost_model.wire_bytes(src), a[0], b[0])


def critical_path(graph: Graph, cost_model: Any = None, cluster: Any = None) -> list[str]:
    """Node names along the longest chain of estimated durations (plus cross-device transfer
    times), first to last. Ties go to the earlier node in program order."""
    if cost_model is None:
        from dagc.cost import CostModel

        cost_model = CostModel()
    order = graph.topological_order()
    if not order:
        return []
    length: dict[str, float] = {}
    back: dict[str, str | None] = {}
    for name in order:
        node = graph.node(name)
        best, via = 0.0, None
        for pred in graph.predecessors(name):
            if pred not in length:
                continue
            value = length[pred] + _edge_time(graph, graph.node(pred), node, cost_model, cluster)
            if value > best + 1e-12:
                best, via = value, pred
        length[name] = best + node_duration(node, cost_model, cluster)
        back[name] = via
    end = max(order, key=lambda n: (length[n], -order.index(n)))
    path: list[str] = []
    cursor: str | None = end
    while cursor is not None:
        path.append(cursor)
        cursor = back[cursor]
    return path[::-1]


# ---- the drawing model ----------------------------------------------------------------------------
@dataclass
class _Group:
    """Instances of one loop pattern on one placement, drawn as one box when collapsed."""

    pattern: str
    members: list[str] = field(default_factory=list)


def natural_key(text: str) -> tuple[object, ...]:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text))


def index_ranges(names: Iterable[str]) -> str:
    """`train[0]`, `train[1]`, `train[2]`, `train[5]` → `0-2, 5` (the first index of each)."""
    values = sorted({int(m.group(1)) for n in names if (m := re.search(r"\[(\d+)\]", n))})
    runs: list[str] = []
    start = prev = None
    for v in [*values, None]:
        if v is not None and prev is not None and v == prev + 1:
            prev = v
            continue
        if start is not None:
            runs.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = v
    text = ", ".join(runs)
    return text if len(text) <= 40 else text[:37] + "…"


def focus_nodes(graph: Graph, task: str, depth: int = 2) -> set[str]:
    """Names of the nodes within `depth` edges (either direction) of `task`."""
    name = _resolve_focus(graph, task)
    seen = {name}
    frontier = [name]
    for _ in range(max(0, depth)):
        nxt = []
        for n in frontier:
            for m in [*graph.predecessors(n), *graph.successors(n)]:
                if m not in seen:
                    seen.add(m)
                    nxt.append(m)
        frontier = nxt
    return seen


def _resolve_focus(graph: Graph, task: str) -> str:
    if task in graph:
        return task
    for node in graph:  # a member of a fused group
        if any(m.name == task for m in regions.members(node)):
            return node.name
    import difflib

    close = difflib.get_close_matches(task, [n.name for n in graph], n=5, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise FocusError(f"no task named {task!r} in pipeline `{graph.name}`{hint}")


@dataclass
class Model:
    """What a picture shows, decided before anything is drawn: the visible nodes, the loop groups, the
    critical path, where each value is drawn and how nodes are placed."""

    graph: Graph
    nodes: list[Node]
    visible: set[str] | None
    collapse: bool
    cost_model: Any
    cluster: Any
    crit: list[str]
    groups: dict[tuple[str, tuple[int, ...]], _Group]
    drawn: dict[str, str]  # value → the id of what draws it
    member_nodes: dict[str, list[Node]]  # fused node → its members
    placements: dict[tuple[int, ...], list[Node]]  # devices → nodes placed there; () = not placed

    @property
    def crit_nodes(self) -> set[str]:
        return set(self.crit)

    @property
    def crit_pairs(self) -> set[tuple[str, str]]:
        return set(zip(self.crit, self.crit[1:]))

    @property
    def group_of(self) -> dict[str, tuple[str, tuple[int, ...]]]:
        return {m: k for k, g in self.groups.items() for m in g.members}

    @property
    def partitioned(self) -> bool:
        return any(node_devices(n) for n in self.nodes)

    def node_of_device(self, d: int) -> int:
        return self.cluster.devices[d].node if self.cluster is not None and d < self.cluster.n_devices else 0


def build_model(graph: Graph, cluster: Any, cost_model: Any, collapse: bool | str, focus: str | None,
           depth: int) -> Model:
    visible = focus_nodes(graph, focus, depth) if focus is not None else None
    nodes = [n for n in graph if visible is None or n.name in visible]
    if collapse == "auto":
        collapse = len(graph) > COLLAPSE_AUTO
    # loop groups: (pattern, placement) → names, in program order
    groups: dict[tuple[str, tuple[int, ...]], _Group] = {}
    for node in nodes:
        pattern = loop_pattern(node.name)
        if pattern is not None and node.op != "transfer":
            groups.setdefault((pattern, node_devices(node)), _Group(pattern)).members.append(node.name)
    groups = {k: g for k, g in groups.items() if len(g.members) > 1}
    group_of = {m: k for k, g in groups.items() for m in g.members}
    drawn: dict[str, str] = {param.name: param_id(param.name) for param in graph.params}
    member_nodes: dict[str, list[Node]] = {}
    for node in nodes:
        if collapse and node.name in group_of:
            gid = group_id(group_of[node.name])
            for value in node.outputs:
                drawn[value] = gid
            continue
        if node.op == "fused":
            members = _members(node)
            member_nodes[node.name] = members
            for member in members:
                for value in member.outputs:
                    drawn[value] = node_id(member.name)
            for value in node.outputs:
                drawn.setdefault(value, node_id(members[-1].name) if members else node_id(node.name))
        else:
            for value in node.outputs:
                drawn[value] = node_id(node.name)
    placements: dict[tuple[int, ...], list[Node]] = {}
    for node in nodes:
        placements.setdefault(node_devices(node), []).append(node)
    return Model(graph, nodes, visible, bool(collapse), cost_model, cluster, critical_path(graph, cost_model, cluster),
                  groups, drawn, member_nodes, placements)


def _members(node: Node) -> list[Node]:
    return regions.members(node)


def param_id(name: str) -> str:
    return f"param.{name}"


def node_id(name: str) -> str:
    return f"task.{name}"


def group_id(key: tuple[str, tuple[int, ...]]) -> str:
    return f"loop.{key[0]}@{','.join(map(str, key[1]))}"


def safe(text: str) -> str:
    return re.sub(r"[^\w]", "_", text)
