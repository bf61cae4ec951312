"""Drawing the model as DOT: clusters per cluster node and device, groups, nodes, edges, legend."""

from __future__ import annotations

import html
from typing import Any

import graphviz

from dagc.backends.graphviz.labels import (
    device_label,
    legend_table,
    node_label,
    node_tooltip,
    placement_text,
    region_head,
    short_time,
    subtitle_text,
)
from dagc.backends.graphviz.model import (
    Model,
    group_id,
    index_ranges,
    natural_key,
    node_devices,
    node_duration,
    node_id,
    param_id,
    safe,
)
from dagc.backends.graphviz.style import (
    CRITICAL_COLOUR,
    EDGE_COLOUR,
    FINALLY_COLOUR,
    FINALLY_FILL,
    REGION_SHAPES,
    device_colour,
    device_tint,
    edge_style,
    node_style,
)
from dagc.ir import regions
from dagc.ir.core import REGION_OPS, Node
from dagc.ir.facts import Placement, transfer_of


class Drawing:
    """The DOT picture of a `Model`, drawn section by section: parameters, the placement tree (nodes,
    devices, their tasks, loops, regions, fused groups), the result, the edges, the legend."""

    def __init__(self, model: Model, focus: str | None) -> None:
        self.m = model
        self.crit_nodes, self.crit_pairs, self.group_of = model.crit_nodes, model.crit_pairs, model.group_of
        self.emitted_groups: set[tuple[str, tuple[int, ...]]] = set()
        graph = model.graph
        title = f"{graph.name}  ({graph.span.file})"
        subtitle = subtitle_text(graph, model.nodes, model.cluster, model.visible, focus)
        label = f"<<B>{html.escape(title)}</B>{'<BR/>' + html.escape(subtitle) if subtitle else ''}>"
        self.dot = graphviz.Digraph(
            name=graph.name,
            graph_attr={"rankdir": "TB", "fontname": "Helvetica", "label": label, "labelloc": "t", "fontsize": "14",
                        "nodesep": "0.3", "ranksep": "0.45", "newrank": "true", "compound": "true"},
            node_attr={"fontname": "Helvetica", "fontsize": "11", "shape": "box", "style": "rounded,filled",
                       "fillcolor": "#eef3fb", "color": "#4a6fa5"},
            edge_attr={"fontname": "Helvetica", "fontsize": "9", "color": EDGE_COLOUR, "arrowsize": "0.7"},
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
                self.dot.node(param_id(param.name), label=param.name, shape="ellipse", style="filled",
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
                        sub.attr(label=device_label(m.graph, device, m.cluster), style="rounded,filled",
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
                            edge(m.drawn[value], node_id(member.name), "data")
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
                src = m.drawn.get(value, param_id(value))
                dst = m.drawn[node.outputs[0]] if in_group else node_id(reader.name)
                if producer is None:
                    edge(src, dst, "data")
                    continue
                cross = bool(node_devices(producer) and node_devices(node) and set(node_devices(producer)) != set(node_devices(node)))
                label = value.rpartition("#")[2] if producer.n_outputs > 1 and not cross else ""
                edge(src, dst, "data", nbytes=int(m.cost_model.wire_bytes(producer)) if cross else 0, label=label,
                     critical=(producer.name, node.name) in self.crit_pairs, cross=cross)
            for dep in node.deps:
                if dep in names:
                    dep_node = graph.node(dep)
                    edge(m.drawn[dep_node.outputs[0]], m.drawn[node.outputs[0]] if in_group else node_id(node.name),
                         "order", critical=(dep, node.name) in self.crit_pairs)
        if self.has_result:
            for value in dict.fromkeys(graph.output_values()):
                producer = graph.producer(value)
                if producer is None or producer.name in names:
                    edge(m.drawn.get(value, param_id(value)), "result", "data", critical=producer is not None
                         and producer.name == (m.crit[-1] if m.crit else None))
        for (src, dst, kind), e in edges.items():
            self.dot.edge(src, dst, **edge_style(e, kind, m.collapse))

    def legend(self) -> None:
        m = self.m
        self.dot.node("legend", label=legend_table(m.graph, m.nodes, m.cluster, m.collapse and bool(m.groups),
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
        for scope, members in sorted(scopes.items(), key=lambda kv: natural_key(kv[0])):
            with sub.subgraph(name=f"cluster_pipeline_{safe(scope)}") as box:
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
            with sub.subgraph(name=f"cluster_loop_{safe(key[0])}_{safe(str(key[1]))}") as loop:
                loop.attr(label=f"loop {key[0]}", style="dashed,rounded", color="#555555", fontsize="10",
                          fontcolor="#555555")
                for node in members:
                    self.add_node(loop, node, colour)
        for region, members in sorted(regions_of.items(), key=lambda kv: natural_key(kv[0])):
            kind = members[0].attrs.get("region.kind", "region")
            with sub.subgraph(name=f"cluster_region_{safe(region)}") as reg:
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
            with sub.subgraph(name=f"cluster_fused_{safe(node.name)}") as box:
                box.attr(label=f"{node.name}  ({len(members)} tasks)", style="rounded,filled",
                         fillcolor="#ffffff", color=CRITICAL_COLOUR if critical else "#333333",
                         penwidth="2.5" if critical else "1.2", fontsize="10",
                         tooltip=node_tooltip(node, m.cost_model, m.cluster, critical))
                for member in members:
                    if not member.placement.placed:  # drawn in its group's colour
                        member.placement = Placement(device=node.placement.device)
                    box.node(node_id(member.name), label=node_label(member, m.cost_model, None),
                             tooltip=node_tooltip(member, m.cost_model, None) + f"\nmember of {node.name}",
                             **node_style(member, colour, False))
            return
        attrs = node_style(node, colour, critical)
        if node.op == "transfer":
            attrs.update(shape="cds", style="filled", fontsize="9", height="0.3")
            dst = transfer_of(node).dst
            label = f"→ {'?' if dst is None else list(dst) if isinstance(dst, tuple) else dst}"
            sub.node(node_id(node.name), label=label, tooltip=node_tooltip(node, m.cost_model, m.cluster, critical),
                     **attrs)
            return
        sub.node(node_id(node.name), label=node_label(node, m.cost_model, m.cluster),
                 tooltip=node_tooltip(node, m.cost_model, m.cluster, critical), **attrs)

    def add_region(self, sub: graphviz.Digraph, node: Node, colour: str | None, critical: bool) -> None:
        """A `cond`, `loop`, `map` or `try` region: a dashed box holding its bodies (a map: a solid border
        and a stacked head with its expected width); edges meet at its head node. A try's finally body is a
        shaded box of its own, marked as running on success or failure."""
        m = self.m
        with sub.subgraph(name=f"cluster_region_{safe(node.name)}") as box:
            box.attr(label=f"{node.op} {node.name}", style="dashed,rounded", color=CRITICAL_COLOUR if critical
                     else "#555555", fontsize="10", fontcolor="#555555")
            if node.op == "map":  # a solid border: the body runs once per item, maybe at once
                box.attr(label=f"map {node.name}: one body per item", style="rounded")
            head = node_style(node, colour, critical)
            head.update(shape=REGION_SHAPES.get(node.op, "hexagon"), style="filled,dashed", fontsize="9")
            box.node(node_id(node.name), label=region_head(node), tooltip=node_tooltip(node, m.cost_model, m.cluster,
                                                                                        critical), **head)
            for key, body in regions.bodies(node).items():
                if not body:
                    continue
                with box.subgraph(name=f"cluster_region_{safe(node.name)}_{safe(key)}") as part:
                    if key == "finally":
                        part.attr(label="finally: runs on success or failure", style="dashed,rounded,filled",
                                  fillcolor=FINALLY_FILL, color=FINALLY_COLOUR, fontsize="9", fontcolor=FINALLY_COLOUR)
                    else:
                        part.attr(label=key, style="dashed,rounded", color="#999999",
                                  fontsize="9", fontcolor="#777777")
                    made: dict[str, str] = {}
                    for member in body:
                        mid = f"region.{node.name}.{key}.{member.name}"
                        part.node(mid, label=node_label(member, m.cost_model, None), fontsize="10",
                                  tooltip=node_tooltip(member, m.cost_model, None) + f"\nin {node.op} {node.name}",
                                  **node_style(member, colour, False))
                        for value in member.input_values():
                            if value in made:
                                part.edge(made[value], mid)
                        for value in member.outputs:
                            made[value] = mid
                # declared in the region's box, not the body's, so the head stays outside the body
                box.edge(node_id(node.name), f"region.{node.name}.{key}.{body[0].name}", style="dotted",
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
        total = sum(node_duration(n, m.cost_model, m.cluster) for n in members)
        names = [n.name for n in members]
        critical = any(n in self.crit_nodes for n in names)
        title = html.escape(key[0])
        callee = html.escape(members[0].function or members[0].op)
        label = (f'<<B>{title}</B> ×{len(members)}<BR/><FONT POINT-SIZE="10">{callee}</FONT>'
                 f'<BR/><FONT POINT-SIZE="9">[{html.escape(index_ranges(names))}] · {short_time(total)} in all</FONT>>')
        tooltip = (f"{len(members)} loop instances of {key[0]}{' on ' + placement_text(key[1], m.cluster) if key[1] else ''}"
                   f"\nat {members[0].span}\nestimated {short_time(total)} in all\n" + ", ".join(names[:12])
                   + (", …" if len(names) > 12 else ""))
        attrs = node_style(members[0], colour, critical)
        attrs.update(shape="box3d", style="filled,dashed")
        sub.node(group_id(key), label=label, tooltip=tooltip, **attrs)
