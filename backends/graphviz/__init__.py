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

Modules: `model` (what the picture shows: devices, durations, critical path, focus, groups), `labels` (labels,
tooltips, subtitle, legend), `style` (colours, shapes, DOT identifiers), `drawing` (the DOT itself).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dagc.backends.graphviz.drawing import Drawing
from dagc.backends.graphviz.model import (
    COLLAPSE_AUTO,
    FocusError,
    build_model,
    cluster_of_graph,
    critical_path,
    loop_pattern,
)
from dagc.backends.graphviz.style import (
    CRITICAL_COLOUR,
    device_colour,
    device_tint,
    is_device_colour,
    mix_white,
)
from dagc.ir.core import Graph
from dagc.renderer import RenderError, render_dot

__all__ = [
    "to_dot",
    "render",
    "RenderError",
    "FORMATS",
    "critical_path",
    "cluster_of_graph",
    "device_colour",
    "device_tint",
    "is_device_colour",
    "mix_white",
    "loop_pattern",
    "CRITICAL_COLOUR",
    "COLLAPSE_AUTO",
    "FocusError",
]


FORMATS = ("svg", "png", "pdf", "dot")


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
    model = build_model(graph, cluster_of_graph(graph, cluster), cost_model, collapse, focus, depth)
    drawing = Drawing(model, focus)
    drawing.parameters()
    drawing.placed()
    drawing.result()
    drawing.edges()
    if legend if legend is not None else model.partitioned:
        drawing.legend()
    return drawing.dot.source


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
