"""Graphviz backend: deterministic DOT text for a graph, and its picture (drawn by `dagc.renderer`:
Graphviz's `dot` when installed, else the pip-installed graphviz-pure).

Tasks are boxes (label: name, callable, estimated time), parameters are ellipses, the pipeline's
result is a double octagon. When the graph is partitioned (`partition.device`), the picture shows
the placement:

- one cluster per cluster node and, nested in it, one filled cluster per device, a colour per
  device (`device_colour`, shared with the timelines); a task on several devices is striped with
  their colours and sits in its node's cluster;
- a fused group (op `fused`) is a box nested in its device, holding its members and their edges;
- instances of an unrolled loop (`train[0]`, `train[1]`, … or `shard[2].tokenize`) on one device
  share a dashed loop cluster, as does a region (a node attribute `region`, with an optional
  `region.kind` such as `loop` or `cond`); with `collapse`, each such group is one stacked box;
- data crossing devices is drawn thick and labelled with its bytes; `transfer` nodes are small
  arrows on the receiving device;
- the critical path (the longest chain of estimated durations plus transfer times; `critical_path`)
  is drawn in magenta;
- a legend explains the colours; each task's tooltip gives its source location, resources,
  estimated cost and placement (device, node, scheduled start and finish).

`focus=TASK` draws only the tasks within `depth` edges of TASK. The DOT text is byte-identical for
identical inputs.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import graphviz

from dagc.ir import regions
from dagc.ir.core import REGION_OPS, Graph, Node
from dagc.renderer import RenderError, render_dot
from dagc.units import format_duration, format_size

__all__ = [
    "to_dot",
    "render",
    "RenderError",
    "FORMATS",
    "critical_path",
    "device_colour",
    "device_tint",
    "loop_pattern",
    "CRITICAL_COLOUR",
    "COLLAPSE_AUTO",
    "FocusError",
]

FORMATS = ("svg", "png", "pdf", "dot")
# Tableau 10: distinct at a glance, and legible with black text on their tints.
_PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
            "#9c755f", "#bab0ac")
CRITICAL_COLOUR = "#c2185b"
_CROSS_COLOUR = "#333333"
_EDGE_COLOUR = "#8c8c8c"
# `collapse="auto"` collapses loop instances when the graph has more tasks than this.
COLLAPSE_AUTO = 60
_INDEX_RE = re.compile(r"\[\d+\]")


class FocusError(ValueError):
    """`focus` names no task of the graph; the message suggests close names."""


def device_colour(device: int) -> str:
    """The colour of device `device` in every picture (graph and timelines)."""
    return _PALETTE[device % len(_PALETTE)]


def _mix(colour: str, amount: float) -> str:
    """`colour` mixed with white: amount 0 → colour, 1 → white."""
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return "#" + "".join(f"{round(c + (255 - c) * amount):02x}" for c in (r, g, b))


def device_tint(device: int, amount: float = 0.6) -> str:
    """A light version of `device_colour` (for fills)."""
    return _mix(device_colour(device), amount)


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


def _devices(node: Node) -> tuple[int, ...]:
    device = node.attrs.get("partition.device")
    if isinstance(device, bool):
        return ()
    if isinstance(device, int):
        return (device,)
    if isinstance(device, (list, tuple)):
        return tuple(d for d in device if isinstance(d, int) and not isinstance(d, bool))
    return ()


def _short(seconds: float) -> str:
    """Three significant digits: 0.01234 → 12.3ms, 27.55 → 27.6s, 150 → 2m30s."""
    if seconds <= 0:
        return "0s"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g}us"
    if seconds < 1:
        return f"{seconds * 1e3:.3g}ms"
    if seconds < 60:
        return f"{seconds:.3g}s"
    return format_duration(round(seconds))


# ---- estimates ------------------------------------------------------------------------------------
def _duration(node: Node, cost_model: Any, cluster: Any) -> float:
    """Estimated seconds of `node`: its scheduled duration, else the cost model's time."""
    if "schedule.start" in node.attrs and "schedule.finish" in node.attrs:
        return max(0.0, float(node.attrs["schedule.finish"]) - float(node.attrs["schedule.start"]))
    seconds, flops = cost_model.work(node)
    devices = _devices(node)
    if cluster is not None and devices and devices[0] < cluster.n_devices:
        return cost_model.task_time(node, cluster.devices[devices[0]])
    return seconds + flops / 1e12


def _edge_time(graph: Graph, src: Node, dst: Node, cost_model: Any, cluster: Any) -> float:
    a, b = _devices(src), _devices(dst)
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
        length[name] = best + _duration(node, cost_model, cluster)
        back[name] = via
    end = max(order, key=lambda n: (length[n], -order.index(n)))
    path: list[str] = []
    cursor: str | None = end
    while cursor is not None:
        path.append(cursor)
        cursor = back[cursor]
    return path[::-1]


# ---- labels and tooltips -----------------------------------------------------------------------
def _where(devices: tuple[int, ...], cluster: Any) -> str:
    if not devices:
        return ""
    names = ", ".join(str(d) for d in devices)
    text = f"device {names}" if len(devices) == 1 else f"devices {names}"
    if cluster is not None and devices[0] < cluster.n_devices:
        text += f" on {cluster.node_names[cluster.devices[devices[0]].node]}"
    return text


def _tooltip(node: Node, cost_model: Any, cluster: Any, critical: bool = False) -> str:
    opts = node.options
    head = node.target if node.op == "task" else f"{node.op} {node.name}"
    parts = [head, f"at {node.span}"]
    resources = [f"cpus={opts.cpus:g}", f"gpus={opts.gpus:g}"]
    if opts.memory is not None:
        resources.append(f"memory={format_size(opts.memory)}")
    if opts.ranks != 1:
        resources.append(f"ranks={opts.ranks}")
    resources.extend(f"{k}={v:g}" for k, v in opts.resources)
    parts.append("resources: " + ", ".join(resources))
    estimate = f"estimated {_short(_duration(node, cost_model, cluster))}"
    if "profile.duration" in node.attrs:
        estimate += " (measured)"
    elif cost_model.uses_default_cost(node):
        estimate += " (default: no cost given)"
    elif opts.cost is not None:
        estimate += f" (cost={format_duration(opts.cost)})"
    elif opts.flops is not None:
        estimate += f" (flops={opts.flops:g})"
    parts.append(estimate)
    if node.op == "transfer":
        parts.append(f"moves {format_size(int(node.attrs.get('transfer.bytes', 0)))} "
                     f"from device {node.attrs.get('transfer.src')} to device {node.attrs.get('transfer.dst')}")
    elif opts.out_size is not None or "profile.bytes" in node.attrs:
        parts.append(f"output {format_size(cost_model.value_bytes(node))}")
    if opts.retries:
        parts.append(f"retries={opts.retries}")
    placement = _where(_devices(node), cluster)
    if "schedule.start" in node.attrs:
        placement += (f", {_short(float(node.attrs['schedule.start']))} → "
                      f"{_short(float(node.attrs['schedule.finish']))}")
    if placement:
        parts.append("placement: " + placement.lstrip(", "))
    if critical:
        parts.append("on the critical path")
    return "\n".join(parts)


def _label(node: Node, cost_model: Any, cluster: Any) -> str:
    title = html.escape(node.name)
    callee = html.escape(node.function or "")
    extra = []
    if node.options.gpus:
        extra.append(f"{node.options.gpus:g} GPU")
    if node.op != "glue" and (node.options.cost is not None or node.options.flops is not None
                              or "schedule.start" in node.attrs or "profile.duration" in node.attrs):
        extra.append(_short(_duration(node, cost_model, cluster)))
    detail = f'<BR/><FONT POINT-SIZE="9">{html.escape(" · ".join(extra))}</FONT>' if extra else ""
    if callee and callee != title:
        return f'<<B>{title}</B><BR/><FONT POINT-SIZE="10">{callee}</FONT>{detail}>'
    return f"<<B>{title}</B>{detail}>"


# ---- the drawing model ----------------------------------------------------------------------------
@dataclass
class _Group:
    """Instances of one loop pattern on one placement, drawn as one box when collapsed."""

    pattern: str
    members: list[str] = field(default_factory=list)


def _natural(text: str) -> tuple[object, ...]:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text))


def _indices(names: Iterable[str]) -> str:
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
        if any(m.get("name") == task for m in node.attrs.get("fuse.members", []) if isinstance(m, dict)):
            return node.name
    import difflib

    close = difflib.get_close_matches(task, [n.name for n in graph], n=5, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise FocusError(f"no task named {task!r} in pipeline `{graph.name}`{hint}")


@dataclass
class _Model:
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
        return any(_devices(n) for n in self.nodes)

    def node_of_device(self, d: int) -> int:
        return self.cluster.devices[d].node if self.cluster is not None and d < self.cluster.n_devices else 0


def _model(graph: Graph, cluster: Any, cost_model: Any, collapse: bool | str, focus: str | None,
           depth: int) -> _Model:
    visible = focus_nodes(graph, focus, depth) if focus is not None else None
    nodes = [n for n in graph if visible is None or n.name in visible]
    if collapse == "auto":
        collapse = len(graph) > COLLAPSE_AUTO
    # loop groups: (pattern, placement) → names, in program order
    groups: dict[tuple[str, tuple[int, ...]], _Group] = {}
    for node in nodes:
        pattern = loop_pattern(node.name)
        if pattern is not None and node.op != "transfer":
            groups.setdefault((pattern, _devices(node)), _Group(pattern)).members.append(node.name)
    groups = {k: g for k, g in groups.items() if len(g.members) > 1}
    group_of = {m: k for k, g in groups.items() for m in g.members}
    drawn: dict[str, str] = {param.name: _param_id(param.name) for param in graph.params}
    member_nodes: dict[str, list[Node]] = {}
    for node in nodes:
        if collapse and node.name in group_of:
            gid = _group_id(group_of[node.name])
            for value in node.outputs:
                drawn[value] = gid
            continue
        if node.op == "fused":
            members = _members(node)
            member_nodes[node.name] = members
            for member in members:
                for value in member.outputs:
                    drawn[value] = _node_id(member.name)
            for value in node.outputs:
                drawn.setdefault(value, _node_id(members[-1].name) if members else _node_id(node.name))
        else:
            for value in node.outputs:
                drawn[value] = _node_id(node.name)
    placements: dict[tuple[int, ...], list[Node]] = {}
    for node in nodes:
        placements.setdefault(_devices(node), []).append(node)
    return _Model(graph, nodes, visible, bool(collapse), cost_model, cluster, critical_path(graph, cost_model, cluster),
                  groups, drawn, member_nodes, placements)


def to_dot(
    graph: Graph,
    *,
    cluster: Any = None,
    cost_model: Any = None,
    collapse: bool | str = "auto",
    focus: str | None = None,
    depth: int = 2,
    legend: bool | None = None,
) -> str:
    """DOT source for `graph`; byte-identical for identical inputs.

    `cluster` (a `dagc.cluster.Cluster`) names the nodes that devices belong to; without it all
    devices are drawn in one group. `collapse`: True, False or "auto" (collapse loop instances
    when the graph has more than `COLLAPSE_AUTO` tasks). `focus`: draw only the neighbourhood of
    this task, `depth` edges deep. `legend`: draw the legend (default: when partitioned)."""
    if cost_model is None:
        from dagc.cost import CostModel

        cost_model = CostModel()
    model = _model(graph, cluster_of_graph(graph, cluster), cost_model, collapse, focus, depth)
    drawing = _Drawing(model, focus)
    drawing.parameters()
    drawing.placed()
    drawing.result()
    drawing.edges()
    if legend if legend is not None else model.partitioned:
        drawing.legend()
    return drawing.dot.source


class _Drawing:
    """The DOT picture of a `_Model`, drawn section by section: parameters, the placement tree (nodes,
    devices, their tasks, loops, regions, fused groups), the result, the edges, the legend."""

    def __init__(self, model: _Model, focus: str | None) -> None:
        self.m = model
        self.crit_nodes, self.crit_pairs, self.group_of = model.crit_nodes, model.crit_pairs, model.group_of
        self.emitted_groups: set[tuple[str, tuple[int, ...]]] = set()
        graph = model.graph
        title = f"{graph.name}  ({graph.span.file})"
        subtitle = _subtitle(graph, model.nodes, model.cluster, model.visible, focus)
        label = f"<<B>{html.escape(title)}</B>{'<BR/>' + html.escape(subtitle) if subtitle else ''}>"
        self.dot = graphviz.Digraph(
            name=graph.name,
            graph_attr={"rankdir": "TB", "fontname": "Helvetica", "label": label, "labelloc": "t", "fontsize": "14",
                        "nodesep": "0.3", "ranksep": "0.45", "newrank": "true", "compound": "true"},
            node_attr={"fontname": "Helvetica", "fontsize": "11", "shape": "box", "style": "rounded,filled",
                       "fillcolor": "#eef3fb", "color": "#4a6fa5"},
            edge_attr={"fontname": "Helvetica", "fontsize": "9", "color": _EDGE_COLOUR, "arrowsize": "0.7"},
        )
        self.has_result = model.visible is None or any(
            v in model.drawn and graph.producer(v) is not None and graph.producer(v).name in model.visible
            for v in graph.output_values())

    # ---- sections ------------------------------------------------------------------------------------
    def parameters(self) -> None:
        m = self.m
        used_params = {v for n in m.nodes for v in n.input_values() if m.graph.is_param(v)}
        for param in m.graph.params:
            if m.visible is None or param.name in used_params:
                self.dot.node(_param_id(param.name), label=param.name, shape="ellipse", style="filled",
                              fillcolor="#ffffff", color="#777777", tooltip=f"parameter {param.name} at {param.span}")

    def placed(self) -> None:
        """The nodes, in the placement tree: unplaced ones first, then cluster node → device → tasks."""
        m, dot = self.m, self.dot
        for node in m.placements.get((), []):
            self.add_items(dot, [node], None)
        if not m.partitioned:
            return
        single = sorted({d for p in m.placements for d in p})
        if m.cluster is not None and m.cluster.n_devices <= 32 and m.visible is None:
            single = list(range(m.cluster.n_devices))  # idle devices too: the whole cluster
        for machine in sorted({m.node_of_device(d) for d in single}):
            name = m.cluster.node_names[machine] if m.cluster is not None else ""
            with dot.subgraph(name=f"cluster_node_{machine}") as box:
                box.attr(label=f"<<B>{html.escape(name or 'devices')}</B>>", style="rounded", color="#9e9e9e",
                         fontsize="12", margin="12", bgcolor="#fafafa")
                for placement in sorted((p for p in m.placements if len(p) > 1 and m.node_of_device(p[0]) == machine),
                                        key=lambda p: p):
                    self.add_items(box, m.placements[placement], None)
                for device in [d for d in single if m.node_of_device(d) == machine]:
                    items = m.placements.get((device,), [])
                    with box.subgraph(name=f"cluster_device_{device}") as sub:
                        sub.attr(label=_device_label(m.graph, device, m.cluster), style="rounded,filled",
                                 fillcolor=device_tint(device, 0.85), color=device_colour(device), penwidth="1.5",
                                 fontsize="11", fontcolor="#222222")
                        if not items:
                            sub.node(f"empty.{device}", label="idle", shape="plaintext", style="", fontsize="9",
                                     fontcolor="#888888")
                        self.add_items(sub, items, device_colour(device))

    def result(self) -> None:
        if self.has_result:
            self.dot.node("result", label="result", shape="doubleoctagon", style="filled", fillcolor="#ffffff",
                          color="#555555")

    def edges(self) -> None:
        """Data and ordering edges, one per drawn pair (collapsed groups sum their bytes)."""
        m, graph = self.m, self.m.graph
        edges: dict[tuple[str, str, str], dict[str, Any]] = {}

        def edge(src: str, dst: str, kind: str, *, nbytes: int = 0, label: str = "", critical: bool = False,
                 cross: bool = False) -> None:
            if src == dst:
                return
            entry = edges.setdefault((src, dst, kind), {"count": 0, "bytes": 0, "label": label, "critical": False,
                                                        "cross": False})
            entry["count"] += 1
            if label and label not in entry["label"].split(", "):
                entry["label"] = f"{entry['label']}, {label}" if entry["label"] else label
            entry["bytes"] += nbytes
            entry["critical"] |= critical
            entry["cross"] |= cross

        names = {n.name for n in m.nodes}
        for node in m.nodes:
            inner: list[tuple[Node, str]] = []  # (reader, value)
            if node.name in m.member_nodes:
                produced: set[str] = set()
                for member in m.member_nodes[node.name]:
                    for value in member.input_values():
                        if value in produced:
                            edge(m.drawn[value], _node_id(member.name), "data")
                        else:
                            inner.append((member, value))
                    produced.update(member.outputs)
            else:
                inner = [(node, value) for value in node.input_values()]
            in_group = m.collapse and node.name in self.group_of
            for reader, value in inner:
                producer = graph.producer(value)
                if producer is not None and producer.name not in names:
                    continue
                if producer is None and value not in m.drawn:
                    continue
                src = m.drawn.get(value, _param_id(value))
                dst = m.drawn[node.outputs[0]] if in_group else _node_id(reader.name)
                if producer is None:
                    edge(src, dst, "data")
                    continue
                cross = bool(_devices(producer) and _devices(node) and set(_devices(producer)) != set(_devices(node)))
                label = value.rpartition("#")[2] if producer.n_outputs > 1 and not cross else ""
                edge(src, dst, "data", nbytes=int(m.cost_model.wire_bytes(producer)) if cross else 0, label=label,
                     critical=(producer.name, node.name) in self.crit_pairs, cross=cross)
            for dep in node.deps:
                if dep in names:
                    dep_node = graph.node(dep)
                    edge(m.drawn[dep_node.outputs[0]], m.drawn[node.outputs[0]] if in_group else _node_id(node.name),
                         "order", critical=(dep, node.name) in self.crit_pairs)
        if self.has_result:
            for value in dict.fromkeys(graph.output_values()):
                producer = graph.producer(value)
                if producer is None or producer.name in names:
                    edge(m.drawn.get(value, _param_id(value)), "result", "data", critical=producer is not None
                         and producer.name == (m.crit[-1] if m.crit else None))
        for (src, dst, kind), e in edges.items():
            self.dot.edge(src, dst, **_edge_style(e, kind, m.collapse))

    def legend(self) -> None:
        m = self.m
        self.dot.node("legend", label=_legend(m.graph, m.nodes, m.cluster, m.collapse and bool(m.groups),
                                              bool(m.member_nodes)), shape="plaintext", style="", margin="0")

    # ---- what a section draws ------------------------------------------------------------------------
    def add_items(self, sub: graphviz.Digraph, items: list[Node], colour: str | None) -> None:
        """Nodes placed together: loose ones, then inlined pipelines, loops and regions as boxes."""
        loops: dict[tuple[str, tuple[int, ...]], list[Node]] = {}
        regions_of: dict[str, list[Node]] = {}
        scopes: dict[str, list[Node]] = {}  # inlined pipelines
        for node in items:
            key = self.group_of.get(node.name)
            if key is not None:
                loops.setdefault(key, []).append(node)
            elif isinstance(node.attrs.get("region"), str):
                regions_of.setdefault(node.attrs["region"], []).append(node)
            elif isinstance(node.attrs.get("frontend.scope"), str):
                scopes.setdefault(node.attrs["frontend.scope"], []).append(node)
            else:
                self.add_node(sub, node, colour)
        for scope, members in sorted(scopes.items(), key=lambda kv: _natural(kv[0])):
            with sub.subgraph(name=f"cluster_pipeline_{_safe(scope)}") as box:
                box.attr(label=f"pipeline {scope}", style="rounded", color="#8a8a8a", fontsize="10",
                         fontcolor="#555555", tooltip=f"inlined pipeline {scope}")
                for node in members:
                    self.add_node(box, node, colour)
        for key, members in loops.items():
            if self.m.collapse:
                if key not in self.emitted_groups:
                    self.emitted_groups.add(key)
                    self.add_group(sub, key, members, colour)
                continue
            with sub.subgraph(name=f"cluster_loop_{_safe(key[0])}_{_safe(str(key[1]))}") as loop:
                loop.attr(label=f"loop {key[0]}", style="dashed,rounded", color="#555555", fontsize="10",
                          fontcolor="#555555")
                for node in members:
                    self.add_node(loop, node, colour)
        for region, members in sorted(regions_of.items(), key=lambda kv: _natural(kv[0])):
            kind = members[0].attrs.get("region.kind", "region")
            with sub.subgraph(name=f"cluster_region_{_safe(region)}") as reg:
                reg.attr(label=f"{kind} {region}", style="dashed,rounded", color="#555555", fontsize="10",
                         fontcolor="#555555")
                for node in members:
                    self.add_node(reg, node, colour)

    def add_node(self, sub: graphviz.Digraph, node: Node, colour: str | None) -> None:
        m = self.m
        critical = node.name in self.crit_nodes
        if node.op in REGION_OPS:
            self.add_region(sub, node, colour, critical)
            return
        if node.op == "fused" and node.name in m.member_nodes:
            members = m.member_nodes[node.name]
            with sub.subgraph(name=f"cluster_fused_{_safe(node.name)}") as box:
                box.attr(label=f"{node.name}  ({len(members)} tasks)", style="rounded,filled",
                         fillcolor="#ffffff", color=CRITICAL_COLOUR if critical else "#333333",
                         penwidth="2.5" if critical else "1.2", fontsize="10",
                         tooltip=_tooltip(node, m.cost_model, m.cluster, critical))
                for member in members:
                    member.attrs.setdefault("partition.device", node.attrs.get("partition.device"))
                    box.node(_node_id(member.name), label=_label(member, m.cost_model, None),
                             tooltip=_tooltip(member, m.cost_model, None) + f"\nmember of {node.name}",
                             **_node_style(member, colour, False))
            return
        attrs = _node_style(node, colour, critical)
        if node.op == "transfer":
            attrs.update(shape="cds", style="filled", fontsize="9", height="0.3")
            label = f"→ {node.attrs.get('transfer.dst', '?')}"
            sub.node(_node_id(node.name), label=label, tooltip=_tooltip(node, m.cost_model, m.cluster, critical),
                     **attrs)
            return
        sub.node(_node_id(node.name), label=_label(node, m.cost_model, m.cluster),
                 tooltip=_tooltip(node, m.cost_model, m.cluster, critical), **attrs)

    def add_region(self, sub: graphviz.Digraph, node: Node, colour: str | None, critical: bool) -> None:
        """A `cond`, `loop`, `map` or `try` region: a dashed box holding its bodies (a map: a solid border
        and a stacked head with its expected width); edges meet at its head node. A try's finally body is a
        shaded box of its own, marked as running on success or failure."""
        m = self.m
        with sub.subgraph(name=f"cluster_region_{_safe(node.name)}") as box:
            box.attr(label=f"{node.op} {node.name}", style="dashed,rounded", color=CRITICAL_COLOUR if critical
                     else "#555555", fontsize="10", fontcolor="#555555")
            if node.op == "map":  # a solid border: the body runs once per item, maybe at once
                box.attr(label=f"map {node.name}: one body per item", style="rounded")
            head = _node_style(node, colour, critical)
            head.update(shape=_REGION_SHAPES.get(node.op, "hexagon"), style="filled,dashed", fontsize="9")
            box.node(_node_id(node.name), label=_region_head(node), tooltip=_tooltip(node, m.cost_model, m.cluster,
                                                                                        critical), **head)
            for key, body in regions.bodies(node).items():
                if not body:
                    continue
                with box.subgraph(name=f"cluster_region_{_safe(node.name)}_{_safe(key)}") as part:
                    if key == "finally":
                        part.attr(label="finally: runs on success or failure", style="dashed,rounded,filled",
                                  fillcolor=FINALLY_FILL, color=FINALLY_COLOUR, fontsize="9", fontcolor=FINALLY_COLOUR)
                    else:
                        part.attr(label=key, style="dashed,rounded", color="#999999",
                                  fontsize="9", fontcolor="#777777")
                    made: dict[str, str] = {}
                    for member in body:
                        mid = f"region.{node.name}.{key}.{member.name}"
                        part.node(mid, label=_label(member, m.cost_model, None), fontsize="10",
                                  tooltip=_tooltip(member, m.cost_model, None) + f"\nin {node.op} {node.name}",
                                  **_node_style(member, colour, False))
                        for value in member.input_values():
                            if value in made:
                                part.edge(made[value], mid)
                        for value in member.outputs:
                            made[value] = mid
                # declared in the region's box, not the body's, so the head stays outside the body
                box.edge(_node_id(node.name), f"region.{node.name}.{key}.{body[0].name}", style="dotted",
                         arrowhead="none")
            if node.op == "try":  # the finally body runs after the body, whatever it did
                found = regions.bodies(node)
                body, cleanup = found["body"], found["finally"]
                if body and cleanup:
                    box.edge(f"region.{node.name}.body.{body[-1].name}",
                             f"region.{node.name}.finally.{cleanup[0].name}", style="dashed",
                             color=FINALLY_COLOUR, fontcolor=FINALLY_COLOUR, fontsize="9", label="then, always")

    def add_group(self, sub: graphviz.Digraph, key: tuple[str, tuple[int, ...]], members: list[Node],
                  colour: str | None) -> None:
        """Collapsed loop instances: one stacked box."""
        m = self.m
        total = sum(_duration(n, m.cost_model, m.cluster) for n in members)
        names = [n.name for n in members]
        critical = any(n in self.crit_nodes for n in names)
        title = html.escape(key[0])
        callee = html.escape(members[0].function or members[0].op)
        label = (f'<<B>{title}</B> ×{len(members)}<BR/><FONT POINT-SIZE="10">{callee}</FONT>'
                 f'<BR/><FONT POINT-SIZE="9">[{html.escape(_indices(names))}] · {_short(total)} in all</FONT>>')
        tooltip = (f"{len(members)} loop instances of {key[0]}{' on ' + _where(key[1], m.cluster) if key[1] else ''}"
                   f"\nat {members[0].span}\nestimated {_short(total)} in all\n" + ", ".join(names[:12])
                   + (", …" if len(names) > 12 else ""))
        attrs = _node_style(members[0], colour, critical)
        attrs.update(shape="box3d", style="filled,dashed")
        sub.node(_group_id(key), label=label, tooltip=tooltip, **attrs)


def _edge_style(e: dict[str, Any], kind: str, collapse: bool) -> dict[str, str]:
    """The attributes of one drawn edge: thick with its bytes when it crosses devices, dashed for
    ordering, magenta on the critical path."""
    attrs: dict[str, str] = {}
    label = e["label"]
    if e["cross"]:
        attrs.update(penwidth="3", color=_CROSS_COLOUR)
        label = format_size(e["bytes"]) + (f" ({e['count']}×)" if e["count"] > 1 else "")
        attrs["fontname"] = "Helvetica-Bold"
        attrs["tooltip"] = f"{format_size(e['bytes'])} cross devices"
    elif e["count"] > 1 and collapse:
        label = f"{e['count']}×"
    if kind == "order":
        attrs.update(style="dashed", tooltip="ordering")
    if e["critical"]:
        attrs["color"] = CRITICAL_COLOUR
        attrs["penwidth"] = "4" if e["cross"] else "2.5"
    if label:
        attrs["label"] = label
    return attrs


_REGION_SHAPES = {"cond": "diamond", "loop": "hexagon", "map": "box3d", "try": "octagon"}
FINALLY_FILL, FINALLY_COLOUR = "#fff4e0", "#b36b00"  # a try's finally body: an exit handler


def _region_head(node: Node) -> str:
    if node.op == "cond":
        from dagc.ir.printer import format_operand

        pred = format_operand(node.args[0]) if node.args else "?"
        return f"<<B>if</B> {html.escape(pred)}>"
    if node.op == "try":
        return "<<B>try</B> / finally>"
    if node.op == "map":
        from dagc.ir.printer import format_operand

        over = ", ".join(format_operand(a) for a in node.args[: node.attrs.get("region.over", 1)])
        if node.attrs.get("region.method"):
            over += f".{node.attrs['region.method']}()"
        word = "measured" if "profile.width" in node.attrs else "expected"
        width = (f"×{regions.expected_width(node):g} {word}" if regions.WIDTH_ATTR in node.attrs
                 else "width known at run time")
        return f"<<B>for each</B> of {html.escape(over)}<BR/>{width}>"
    trips = node.attrs.get("region.iter")
    items = next((v for v in trips.values() if isinstance(v, list)), None) if isinstance(trips, dict) else None
    count = len(items) if items is not None else None
    planned = ""
    if count is not None and regions.TRIPS_ATTR in node.attrs:  # `dagc.trips(..., expected=N)`
        planned = f", planned {regions.expected_trips(node):g}"
    return f"<<B>loop</B>{f' ≤ {count} trips{planned}' if count is not None else ''}>"


def _subtitle(graph: Graph, nodes: list[Node], cluster: Any, visible: set[str] | None, focus: str | None) -> str:
    parts = []
    if visible is not None:
        parts.append(f"neighbourhood of {focus}: {len(nodes)} of {len(graph)} tasks")
    if cluster is not None and any(_devices(n) for n in nodes):
        parts.append(f"on {cluster.describe()}")
    makespan = graph.attrs.get("schedule.makespan")
    if isinstance(makespan, (int, float)):
        text = f"estimated makespan {_short(float(makespan))}"
        bound = graph.attrs.get("schedule.lower_bound")
        if isinstance(bound, (int, float)) and bound > 0:
            text += f" (lower bound {_short(float(bound))})"
        parts.append(text)
    if graph.attrs.get("profile.run"):
        parts.append(f"costs measured in run {graph.attrs['profile.run']}")
    return " · ".join(parts)


def _device_label(graph: Graph, device: int, cluster: Any) -> str:
    text = f"<<B>device {device}</B>"
    detail = []
    if cluster is not None and device < cluster.n_devices:
        detail.append(cluster.devices[device].kind)
    util = graph.attrs.get("schedule.utilization")
    if isinstance(util, list) and device < len(util):
        detail.append(f"{100 * float(util[device]):.0f}% busy")
    if detail:
        text += f'<FONT POINT-SIZE="9">  {html.escape(" · ".join(detail))}</FONT>'
    return text + ">"


def _legend(graph: Graph, nodes: list[Node], cluster: Any, collapsed: bool, fused: bool) -> str:
    devices = sorted({d for n in nodes for d in _devices(n)})
    if cluster is not None and cluster.n_devices <= 32 and len(nodes) == len(graph):
        devices = list(range(cluster.n_devices))
    rows = ['<TR><TD COLSPAN="2" ALIGN="LEFT"><B>legend</B></TD></TR>']
    for d in devices[:12]:
        where = _where((d,), cluster)
        rows.append(f'<TR><TD BGCOLOR="{device_tint(d, 0.35)}" WIDTH="28"> </TD>'
                    f'<TD ALIGN="LEFT">{html.escape(where)}</TD></TR>')
    if len(devices) > 12:
        rows.append(f'<TR><TD> </TD><TD ALIGN="LEFT">… {len(devices) - 12} more devices</TD></TR>')
    rows.append(f'<TR><TD>{_swatch_line(_CROSS_COLOUR, 4)}</TD><TD ALIGN="LEFT">data crossing devices (bytes)</TD></TR>')
    rows.append(f'<TR><TD>{_swatch_line(CRITICAL_COLOUR, 4)}</TD><TD ALIGN="LEFT">critical path</TD></TR>')
    rows.append(f'<TR><TD>{_swatch_line("#555555", 2, dashed=True)}</TD>'
                '<TD ALIGN="LEFT">loop / region; ordering edge</TD></TR>')
    if fused:
        rows.append(f'<TR><TD>{_swatch_box(1)}</TD><TD ALIGN="LEFT">fused group (white box)</TD></TR>')
    if collapsed:
        rows.append(f'<TR><TD>{_swatch_box(3)}</TD><TD ALIGN="LEFT">collapsed loop instances</TD></TR>')
    if any(n.op == "transfer" for n in nodes):
        rows.append('<TR><TD>→ d</TD><TD ALIGN="LEFT">transfer to device d</TD></TR>')
    return ('<<TABLE BORDER="1" COLOR="#bbbbbb" CELLBORDER="0" CELLSPACING="2" CELLPADDING="3" BGCOLOR="#ffffff">'
            + "".join(rows) + "</TABLE>>")


# Legend swatches are drawn with table cells, not line-drawing characters: the fonts that draw a picture
# (the system's, or graphviz-pure's bundled ones) need not have those glyphs.
def _swatch_line(colour: str, thickness: int, dashed: bool = False) -> str:
    """A short horizontal line, solid or dashed, as a one-row table."""
    if dashed:
        cells = "".join(f'<TD BGCOLOR="{colour}" WIDTH="5" HEIGHT="{thickness}" FIXEDSIZE="TRUE"></TD>'
                        f'<TD WIDTH="3" HEIGHT="{thickness}" FIXEDSIZE="TRUE"></TD>' for _ in range(3))
    else:
        cells = f'<TD BGCOLOR="{colour}" WIDTH="24" HEIGHT="{thickness}" FIXEDSIZE="TRUE"></TD>'
    return f'<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="0"><TR>{cells}</TR></TABLE>'


def _swatch_box(periphery: int) -> str:
    """A small white box: one border (a fused group) or a thick one (stacked, collapsed instances)."""
    return (f'<TABLE BORDER="{periphery}" COLOR="#555555" CELLBORDER="0" CELLSPACING="0" CELLPADDING="0" '
            f'BGCOLOR="#ffffff"><TR><TD WIDTH="{22 - 2 * periphery}" HEIGHT="{12 - 2 * periphery}" '
            'FIXEDSIZE="TRUE"></TD></TR></TABLE>')


def _node_style(node: Node, colour: str | None, critical: bool) -> dict[str, str]:
    attrs: dict[str, str] = {}
    devices = _devices(node)
    if len(devices) > 1:
        attrs.update(style="striped", fillcolor=":".join(device_tint(d, 0.5) for d in devices),
                     color=device_colour(devices[0]))
    elif colour is not None:
        attrs.update(fillcolor=_mix(colour, 0.55), color=colour)
    if node.options.side_effects:
        attrs["peripheries"] = "2"
    if critical:
        attrs.update(color=CRITICAL_COLOUR, penwidth="3")
    return attrs


def _members(node: Node) -> list[Node]:
    return regions.members(node)


def _param_id(name: str) -> str:
    return f"param.{name}"


def _node_id(name: str) -> str:
    return f"task.{name}"


def _group_id(key: tuple[str, tuple[int, ...]]) -> str:
    return f"loop.{key[0]}@{','.join(map(str, key[1]))}"


def _safe(text: str) -> str:
    return re.sub(r"[^\w]", "_", text)


def render(dot_source: str, out: Path) -> Path:
    """Write `out` in the format its suffix names (svg, png, pdf or dot)."""
    fmt = out.suffix.lstrip(".").lower()
    if fmt not in FORMATS:
        raise RenderError(f"cannot render {out.name}: use one of .{', .'.join(FORMATS)}")
    out.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "dot":
        out.write_text(dot_source)
        return out
    out.write_bytes(render_dot(dot_source, fmt))
    return out
