"""Graphviz backend: deterministic DOT text for a graph, and rendering with the `dot` program.

Tasks are boxes (label: name and callable), parameters are ellipses, the pipeline's result is a
double octagon. When the graph is partitioned, tasks are grouped into one cluster per node and one
nested cluster per device, and edges that cross devices are drawn thick with their bytes.
"""

from __future__ import annotations

import html
from pathlib import Path

import graphviz
from dagc.ir.core import Graph, Node

from dagc.units import format_duration, format_size

__all__ = ["to_dot", "render", "RenderError", "FORMATS"]

FORMATS = ("svg", "png", "pdf", "dot")
_PALETTE = ("#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5",
            "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f")


class RenderError(RuntimeError):
    """Rendering failed (e.g. Graphviz's `dot` is not installed); the DOT text is still usable."""


def _param_id(name: str) -> str:
    return f"param.{name}"


def _node_id(name: str) -> str:
    return f"task.{name}"


def _tooltip(node: Node) -> str:
    opts = node.options
    parts = [f"{node.target}", f"at {node.span}"]
    resources = [f"cpus={opts.cpus:g}", f"gpus={opts.gpus:g}"]
    if opts.memory is not None:
        resources.append(f"memory={format_size(opts.memory)}")
    parts.append(", ".join(resources))
    if opts.cost is not None:
        parts.append(f"cost={format_duration(opts.cost)}")
    if opts.out_size is not None:
        parts.append(f"out={format_size(opts.out_size)}")
    device = node.attrs.get("partition.device")
    if device is not None:
        parts.append(f"device={device}")
    return "\n".join(parts)


def _label(node: Node) -> str:
    title = html.escape(node.name)
    callee = html.escape(node.function or node.op)
    extra = []
    if node.options.gpus:
        extra.append(f"{node.options.gpus:g} GPU")
    if node.options.cost is not None:
        extra.append(format_duration(node.options.cost))
    detail = f'<BR/><FONT POINT-SIZE="9">{html.escape(" · ".join(extra))}</FONT>' if extra else ""
    if callee != title:
        return f'<<B>{title}</B><BR/><FONT POINT-SIZE="10">{callee}</FONT>{detail}>'
    return f"<<B>{title}</B>{detail}>"


def _device_of(node: Node) -> object:
    device = node.attrs.get("partition.device")
    return device[0] if isinstance(device, list) and device else device


def to_dot(graph: Graph) -> str:
    """DOT source for `graph`; byte-identical for identical graphs."""
    dot = graphviz.Digraph(
        name=graph.name,
        graph_attr={"rankdir": "TB", "fontname": "Helvetica", "label": f"{graph.name}  ({graph.span.file})",
                    "labelloc": "t", "fontsize": "16", "nodesep": "0.35", "ranksep": "0.5"},
        node_attr={"fontname": "Helvetica", "fontsize": "11", "shape": "box", "style": "rounded,filled",
                   "fillcolor": "#eef3fb", "color": "#4a6fa5"},
        edge_attr={"fontname": "Helvetica", "fontsize": "9", "color": "#555555"},
    )
    for param in graph.params:
        dot.node(_param_id(param.name), label=param.name, shape="ellipse", fillcolor="#ffffff",
                 tooltip=f"parameter at {param.span}")
    devices = sorted({str(_device_of(n)) for n in graph if _device_of(n) is not None}, key=_natural)
    by_device: dict[str, list[Node]] = {}
    for node in graph:
        device = _device_of(node)
        by_device.setdefault(str(device) if device is not None else "", []).append(node)
    for node in by_device.get("", []):
        _add_task(dot, node, None)
    for index, device in enumerate(devices):
        colour = _PALETTE[index % len(_PALETTE)]
        with dot.subgraph(name=f"cluster_device_{device}") as sub:
            sub.attr(label=f"device {device}", style="rounded,filled", fillcolor=colour + "40", color=colour)
            for node in by_device[device]:
                _add_task(sub, node, colour)
    dot.node("result", label="result", shape="doubleoctagon", fillcolor="#ffffff")
    for node in graph:
        for value in node.input_values():
            producer = graph.producer(value)
            source = _node_id(producer.name) if producer is not None else _param_id(value)
            attrs = {}
            if producer is not None and producer.n_outputs > 1:
                attrs["label"] = value.rpartition("#")[2]
            if producer is not None and _device_of(producer) is not None and _device_of(producer) != _device_of(node):
                attrs.update(penwidth="2.5", color="#c0392b")
                if producer.options.out_size is not None:
                    attrs["label"] = format_size(producer.options.out_size)
            dot.edge(source, _node_id(node.name), **attrs)
        for dep in node.deps:
            dot.edge(_node_id(dep), _node_id(node.name), style="dashed", tooltip="ordering")
    for value in dict.fromkeys(graph.output_values()):
        producer = graph.producer(value)
        dot.edge(_node_id(producer.name) if producer else _param_id(value), "result")
    return dot.source


def _add_task(dot: graphviz.Digraph, node: Node, colour: str | None) -> None:
    attrs = {"tooltip": _tooltip(node)}
    if colour is not None:
        attrs["fillcolor"] = colour
    if node.options.side_effects:
        attrs["peripheries"] = "2"
    dot.node(_node_id(node.name), label=_label(node), **attrs)


def _natural(text: str) -> tuple[object, ...]:
    return tuple(int(p) if p.isdigit() else p for p in text.replace("[", ",").replace("]", "").split(","))


def render(dot_source: str, out: Path) -> Path:
    """Write `out` in the format its suffix names (svg, png, pdf or dot)."""
    fmt = out.suffix.lstrip(".").lower()
    if fmt not in FORMATS:
        raise RenderError(f"cannot render {out.name}: use one of .{', .'.join(FORMATS)}")
    out.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "dot":
        out.write_text(dot_source)
        return out
    try:
        data = graphviz.Source(dot_source).pipe(format=fmt)
    except graphviz.ExecutableNotFound:
        raise RenderError(
            "Graphviz's `dot` program is not installed, so the picture cannot be rendered; "
            "install it (Debian/Ubuntu: apt-get install graphviz, macOS: brew install graphviz) "
            "or write a .dot file"
        ) from None
    except graphviz.CalledProcessError as exc:
        raise RenderError(f"`dot` failed: {exc.stderr.decode(errors='replace') if exc.stderr else exc}") from None
    out.write_bytes(data)
    return out
