"""Timelines (Gantt charts): the estimated schedule, and a measured run beside its estimate.

`estimated(graph, cluster)` reads the `schedule` pass's attributes: one lane per device, a bar per
task (coloured by device, outlined in magenta on the critical path), and the transfers between
devices as thin bars in a strip under the receiving device's lane (from the `comm` pass's
`transfer` nodes, else from `schedule.cut_edges` and the cluster's links). `measured(run, graph)`
reads a run's event log (`dagc.profile.load_run`): one lane per device (or rank, or process) the
run used, bars coloured by the device the plan chose, failed attempts hatched in red; a map
region's bar is labelled with its measured width (`map ×5`, from the run's `width` events) and the
chart's note lists every map's width.

Both are drawn into one picture by `to_svg` (hand-written SVG: deterministic, tooltips as
`<title>`, embeddable in HTML) or `render(..., "x.png" | "x.pdf")`, which pins the same shapes in a
Graphviz layout (`neato -n2`) and lets Graphviz draw them (`dagc.renderer`: the system `dot`, else the
pip-installed graphviz-pure, which draws PNG but not PDF); so no library beyond Graphviz is needed. Charts drawn together share one time axis, so the estimate and the run compare
at a glance.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dagc.backends.graphviz import (
    CRITICAL_COLOUR,
    critical_path,
    device_colour,
    is_device_colour,
    mix_white,
)
from dagc.ir.core import Graph
from dagc.ir.facts import device_tuple, transfer_of
from dagc.renderer import RenderError, render_dot
from dagc.units import format_size

__all__ = ["Bar", "Chart", "estimated", "measured", "to_svg", "render", "FORMATS"]

FORMATS = ("svg", "png", "pdf")
_FAILED = "#d62728"
_NEUTRAL = "#9e9e9e"


@dataclass
class Bar:
    lane: str
    name: str
    start: float
    finish: float
    colour: str
    tooltip: str = ""
    kind: str = "task"  # task | transfer | failed | skipped | preempted
    critical: bool = False


@dataclass
class Chart:
    title: str
    lanes: list[str]
    bars: list[Bar] = field(default_factory=list)
    note: str = ""
    legend: list[tuple[str, str]] = field(default_factory=list)  # (colour, label): what a bar's colour means

    @property
    def end(self) -> float:
        return max((b.finish for b in self.bars), default=0.0)


def _short(seconds: float) -> str:
    from dagc.backends.graphviz.labels import short_time as short

    return short(seconds)


def _first(devices: tuple[int, ...]) -> int | None:
    return devices[0] if devices else None


def _encoded(devices: int | tuple[int, ...] | None) -> int | list[int] | None:
    """A transfer end as the IR prints it (`3`, `[1, 2]`)."""
    return list(devices) if isinstance(devices, tuple) else devices


def _lane_name(device: int, cluster: Any) -> str:
    if cluster is not None and device < cluster.n_devices:
        return f"{cluster.device_name(device)} ({cluster.node_names[cluster.devices[device].node]})"
    return f"device {device}"


def estimated(graph: Graph, cluster: Any = None, cost_model: Any = None) -> Chart:
    """The estimated schedule of `graph` (after the `schedule` pass) as a chart."""
    if cost_model is None:
        from dagc.cost import CostModel

        cost_model = CostModel()
    from dagc.backends.graphviz import cluster_of_graph

    cluster = cluster_of_graph(graph, cluster)
    scheduled = [n for n in graph if n.placement.start is not None and n.op != "transfer"]
    if not scheduled:
        raise ValueError(f"pipeline `{graph.name}` has no schedule: compile it with --cluster "
                         "(or a pipeline with the `schedule` pass)")
    used = sorted({d for n in graph for d in n.devices})
    devices = list(range(cluster.n_devices)) if cluster is not None and cluster.n_devices <= 64 else used
    lanes = [_lane_name(d, cluster) for d in devices]
    crit = set(critical_path(graph, cost_model, cluster))
    chart = Chart(f"estimated schedule of `{graph.name}`", lanes)
    makespan = graph.attrs.get("schedule.makespan")
    if isinstance(makespan, (int, float)):
        chart.note = f"makespan {_short(float(makespan))}"
        bound = graph.attrs.get("schedule.lower_bound")
        if isinstance(bound, (int, float)) and bound > 0:
            chart.note += f", lower bound {_short(float(bound))}"
    for node in scheduled:
        start, finish = float(node.placement.start or 0.0), float(node.placement.finish or 0.0)
        for d in node.devices or (0,):
            tip = (f"{node.name}\n{_short(start)} → {_short(finish)} ({_short(finish - start)})\n"
                   f"{_lane_name(d, cluster)}\nat {node.span}")
            chart.bars.append(Bar(_lane_name(d, cluster), node.name, start, finish, device_colour(d), tip,
                                  critical=node.name in crit))
    transfers = [n for n in graph if n.op == "transfer" and n.placement.start is not None]
    if transfers:
        for t in transfers:
            move = transfer_of(t)
            src, dst = _encoded(move.src), _encoded(move.dst)
            start, finish = float(t.placement.start or 0.0), float(t.placement.finish or 0.0)
            nbytes = int(move.bytes or 0)
            dst_d = _first(device_tuple(move.dst)) or 0
            chart.bars.append(Bar(_lane_name(dst_d, cluster), t.name, start, finish,
                                  device_colour(_first(device_tuple(move.src)) or 0),
                                  f"transfer {t.args[0] if t.args else ''}: {format_size(nbytes)}\n"
                                  f"device {src} → device {dst}\n{_short(start)} → {_short(finish)}",
                                  kind="transfer"))
    else:
        for edge in graph.attrs.get("schedule.cut_edges", []) or []:
            try:
                src_name, dst_name, value, nbytes = edge
                src_node, dst_node = graph.node(src_name), graph.node(dst_name)
            except (ValueError, KeyError, TypeError):
                continue
            a, b = _first(src_node.devices), _first(dst_node.devices)
            if a is None or b is None or src_node.placement.finish is None:
                continue
            start = float(src_node.placement.finish)
            seconds = (cluster.transfer_time(nbytes, a, b) if cluster is not None and max(a, b) < cluster.n_devices
                       else 0.0)
            chart.bars.append(Bar(_lane_name(b, cluster), f"{value}@{b}", start, start + seconds, device_colour(a),
                                  f"transfer {value}: {format_size(int(nbytes))}\ndevice {a} → device {b}\n"
                                  f"{_short(start)} → {_short(start + seconds)}", kind="transfer"))
    return chart


def measured(run: Any, graph: Graph | None = None) -> Chart:
    """The run `run` (a `dagc.profile.RunRecord`) as a chart; bars coloured by planned device."""
    planned: dict[str, int] = {}
    if graph is not None:
        for node in graph:
            d = _first(node.devices)
            if d is not None:
                planned[node.name] = d
    lane_order: list[str] = []
    tasks = sorted(run.tasks.values(), key=lambda t: (t.start if t.start is not None else math.inf, t.name))
    for t in tasks:
        if t.lane not in lane_order:
            lane_order.append(t.lane)
    lane_order.sort(key=lambda s: tuple(int(p) if p.isdigit() else p for p in s.replace(":", " ").split()))
    title = f"measured run {run.run_id}" + (f" of `{run.pipeline}`" if run.pipeline else "")
    chart = Chart(title, lane_order)
    chart.note = f"{run.status}, makespan {_short(run.makespan)}"
    maps = getattr(run, "maps", {})
    if maps:  # the widths, also of maps without a bar of their own (the local backend runs them inline)
        chart.note += "; map widths: " + ", ".join(f"{name} ×{m.items}" + (f" ({m.resumed} resumed)" if m.resumed
                                                                           else "") for name, m in maps.items())
    for t in tasks:
        colour = device_colour(planned[t.name]) if t.name in planned else _NEUTRAL
        for f in t.failures:
            chart.bars.append(Bar(t.lane, t.name, float(f["start"]), float(f["end"]), _FAILED,
                                  f"{t.name} attempt {f.get('attempt')} failed\n{f.get('error', '')}", kind="failed"))
        for p in getattr(t, "preemptions", ()):
            chart.bars.append(Bar(t.lane, t.name, float(p["start"]), float(p["end"]), _NEUTRAL,
                                  f"{t.name}: preempted at {_short(float(p['end']))} by a task of higher priority "
                                  "(it ran again later)", kind="preempted"))
        if t.status == "ok" and t.start is not None and t.end is not None:
            tip = f"{t.name}\n{_short(t.start)} → {_short(t.end)} ({_short(t.duration or 0.0)})\n{t.lane}"
            if t.bytes is not None:
                tip += f"\noutput {format_size(t.bytes)}"
            if t.attempts > 1:
                tip += f"\nattempt {t.attempts}"
            if t.name in planned:
                tip += f"\nplanned on device {planned[t.name]}"
            label = t.name
            if t.name in maps:
                tip += f"\nmap: {maps[t.name].describe()}"
                label += f" ×{maps[t.name].items}"
            chart.bars.append(Bar(t.lane, label, t.start, t.end, colour, tip))
        elif t.status == "skipped" and t.start is not None:
            chart.bars.append(Bar(t.lane, t.name, t.start, t.start, _NEUTRAL, f"{t.name}: skipped (output stored)",
                                  kind="skipped"))
    return chart


# ---- drawing ----------------------------------------------------------------------------------------
_LABEL_W = 150
_LANE_H = 26
_STRIP_H = 9
_CHART_GAP = 34
_TOP = 30
# below a chart's lanes: the time labels (baseline 13 px down, descenders to ~16), then legend rows of 18 px
# whose 10 px swatches start 22 px down, clear of the labels
_AXIS_LABEL_BASELINE = 13
_AXIS_H = 22
_LEGEND_ROW = 18


_TIME_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)


def _ticks(end: float, count: int = 8) -> list[float]:
    if end <= 0:
        return [0.0]
    raw = end / count
    if 1 <= raw <= _TIME_STEPS[-1]:
        step = float(next(t for t in _TIME_STEPS if t >= raw))  # whole seconds, minutes, hours
    else:
        step = 10 ** math.floor(math.log10(raw))
        for m in (1, 2, 2.5, 5, 10):
            if raw <= m * step:
                step *= m
                break
    ticks, t = [], 0.0
    while t <= end * 1.0001:
        ticks.append(round(t, 12))
        t += step
    return ticks


def _shapes(charts: list[Chart], width: int) -> tuple[list[tuple[Any, ...]], int]:
    """Primitive shapes of the charts stacked vertically: ("rect", x, y, w, h, fill, stroke, dash,
    tooltip, label), ("line", x1, y1, x2, y2, colour, width, dash), ("text", x, y, text, size, anchor,
    bold, colour). Returns the shapes and the total height."""
    ends = [c.end for c in charts]
    # one time axis for all, unless their lengths differ so much that one would be a sliver
    shared = max(ends, default=0.0) <= 4 * min(ends, default=0.0)
    plot_w = width - _LABEL_W - 20
    shapes: list[tuple[Any, ...]] = []
    y = 10
    for chart in charts:
        end = (max(ends) if shared else chart.end) or 1.0
        scale = plot_w / end
        ticks = _ticks(end)
        has_strip = {b.lane for b in chart.bars if b.kind == "transfer"}
        shapes.append(("text", 10, y + 14, chart.title, 13, "start", True, "#222222"))
        note = chart.note + ("" if shared or len(charts) == 1 else " (own time axis)")
        if note:
            shapes.append(("text", width - 10, y + 14, note, 11, "end", False, "#555555"))
        y += _TOP
        top = y
        lane_y: dict[str, int] = {}
        for lane in chart.lanes:
            lane_y[lane] = y
            y += _LANE_H + (_STRIP_H if lane in has_strip else 0) + 4
        bottom = y
        for i, lane in enumerate(chart.lanes):
            if i % 2 == 0:
                shapes.append(("rect", _LABEL_W, lane_y[lane] - 2, plot_w, _LANE_H + 4 + (
                    _STRIP_H if lane in has_strip else 0), "#f4f4f4", "none", False, "", ""))
            shapes.append(("text", _LABEL_W - 8, lane_y[lane] + _LANE_H / 2 + 4, lane, 11, "end", False, "#333333"))
        for t in ticks:
            x = _LABEL_W + t * scale
            shapes.append(("line", x, top - 4, x, bottom, "#dddddd", 1, False))
            shapes.append(("text", x, bottom + _AXIS_LABEL_BASELINE, _short(t), 10, "middle", False, "#555555"))
        for bar in sorted(chart.bars, key=lambda b: (b.kind != "transfer", b.start, b.name)):
            if bar.lane not in lane_y:
                continue
            x = _LABEL_W + bar.start * scale
            w = max(1.5, (bar.finish - bar.start) * scale)
            if bar.kind == "transfer":
                shapes.append(("rect", x, lane_y[bar.lane] + _LANE_H + 1, w, _STRIP_H - 2, bar.colour, "#333333",
                               False, bar.tooltip, ""))
                continue
            if bar.kind == "skipped":
                shapes.append(("rect", x - 1, lane_y[bar.lane] + 3, 2, _LANE_H - 6, _NEUTRAL, "none", False,
                               bar.tooltip, ""))
                continue
            fill = bar.colour if bar.kind == "failed" else _tint(bar.colour)
            stroke = CRITICAL_COLOUR if bar.critical else ("#7f0000" if bar.kind == "failed" else
                                                           "#555555" if bar.kind == "preempted" else bar.colour)
            label = _fit(bar.name + (" (preempted)" if bar.kind == "preempted" else ""), w)
            shapes.append(("rect", x, lane_y[bar.lane] + 1, w, _LANE_H - 2, fill, stroke,
                           bar.kind in ("failed", "preempted"), bar.tooltip, label))
        row = bottom + _AXIS_H  # the top of the next legend row, clear of the time labels
        if chart.legend:  # one swatch per colour, in a row under the axis
            x = _LABEL_W
            for colour, label in chart.legend:
                shapes.append(("rect", x, row, 14, 10, _tint(colour), colour, False, "", ""))
                shapes.append(("text", x + 20, row + 9, label, 10, "start", False, "#333333"))
                x += 30 + int(len(label) * 6.0)
            row += _LEGEND_ROW
        y = row + _CHART_GAP
    preempted = any(b.kind == "preempted" for c in charts for b in c.bars)
    if preempted or any(b.critical or b.kind == "transfer" for c in charts for b in c.bars):
        x = _LABEL_W
        row = y - _CHART_GAP  # under the last chart's axis and legend
        yl = row + 9
        shapes.append(("rect", x, row, 14, 10, "#ffffff", CRITICAL_COLOUR, False, "", ""))
        shapes.append(("text", x + 20, yl, "critical path", 10, "start", False, "#333333"))
        shapes.append(("rect", x + 110, row + 2, 14, 6, "#bbbbbb", "#333333", False, "", ""))
        shapes.append(("text", x + 130, yl, "transfer (under the receiving lane)", 10, "start", False, "#333333"))
        shapes.append(("rect", x + 340, row, 14, 10, _FAILED, "#7f0000", True, "", ""))
        shapes.append(("text", x + 360, yl, "failed attempt", 10, "start", False, "#333333"))
        if preempted:  # a run a task of higher priority stopped (dagc.runtime.admission)
            shapes.append(("rect", x + 460, row, 14, 10, _tint(_NEUTRAL), "#555555", True, "", ""))
            shapes.append(("text", x + 480, yl, "preempted", 10, "start", False, "#333333"))
        y += _LEGEND_ROW
    return shapes, int(y - _CHART_GAP + 10)


def _tint(colour: str) -> str:
    if is_device_colour(colour):
        return mix_white(colour, 0.45)
    return "#dddddd" if colour == _NEUTRAL else colour


def _fit(text: str, width: float, char_w: float = 6.3) -> str:
    room = int((width - 6) / char_w)
    if room >= len(text):
        return text
    if room >= 4:
        return text[: room - 1] + "…"
    return ""


def to_svg(charts: list[Chart], width: int = 960) -> str:
    """The charts as one standalone SVG document (deterministic text)."""
    shapes, height = _shapes(charts, width)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif" class="dagc-timeline">',
           f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>']
    for s in shapes:
        if s[0] == "rect":
            _, x, y, w, h, fill, stroke, dash, tip, label = s
            extra = ' stroke-dasharray="3,2"' if dash else ""
            sw = "2" if stroke == CRITICAL_COLOUR else "1"
            rect = (f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" rx="2" fill="{fill}" '
                    f'stroke="{stroke}" stroke-width="{sw}"{extra}/>')
            if tip or label:
                out.append("<g>" + (f"<title>{html.escape(tip)}</title>" if tip else "") + rect)
                if label:
                    out.append(f'<text x="{x + 4:.1f}" y="{y + h / 2 + 4:.1f}" font-size="10.5" fill="#111111">'
                               f"{html.escape(label)}</text>")
                out.append("</g>")
            else:
                out.append(rect)
        elif s[0] == "line":
            _, x1, y1, x2, y2, colour, width_, dash = s
            out.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{colour}" '
                       f'stroke-width="{width_}"/>')
        else:
            _, x, y, text, size, anchor, bold, colour = s
            weight = ' font-weight="bold"' if bold else ""
            out.append(f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
                       f'fill="{colour}"{weight}>{html.escape(text)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def to_pinned_dot(charts: list[Chart], width: int = 960) -> str:
    """The same shapes as `to_svg`, as DOT with every position pinned (for `neato -n2`)."""
    shapes, height = _shapes(charts, width)
    lines = ["digraph timeline {",
             f'\tgraph [bgcolor="#ffffff" splines=line outputorder=edgesfirst bb="0,0,{width},{height}" '
             'pad=0 margin=0]',
             '\tnode [fontname="Helvetica" margin=0 fixedsize=true penwidth=1]',
             '\tedge [arrowhead=none]']
    points = 0

    def q(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'

    for k, s in enumerate(shapes):
        if s[0] == "rect":
            _, x, y, w, h, fill, stroke, dash, tip, label = s
            style = "filled,dashed" if dash else "filled"
            colour = "transparent" if stroke == "none" else stroke
            pw = 2 if stroke == CRITICAL_COLOUR else 1
            lines.append(f'\tr{k} [shape=box style="{style}" fillcolor="{fill}" color="{colour}" penwidth={pw} '
                         f'width={w / 72:.4f} height={h / 72:.4f} pos="{x + w / 2:.1f},{height - y - h / 2:.1f}!" '
                         f'label="" tooltip={q(tip)}]')
            if label:
                tw = len(label) * 6.0
                lines.append(f'\tl{k} [shape=plaintext fontsize=10.5 width={tw / 72:.4f} height=0.15 '
                             f'pos="{x + 4 + tw / 2:.1f},{height - y - h / 2:.1f}!" label={q(label)}]')
        elif s[0] == "line":
            _, x1, y1, x2, y2, colour, width_, dash = s
            a, b = f"p{points}", f"p{points + 1}"
            points += 2
            for name, px, py in ((a, x1, y1), (b, x2, y2)):
                lines.append(f'\t{name} [shape=point width=0.01 height=0.01 style=invis pos="{px:.1f},{height - py:.1f}!"]')
            lines.append(f'\t{a} -> {b} [color="{colour}" penwidth={width_}]')
        else:
            _, x, y, text, size, anchor, bold, colour = s
            tw = len(text) * size * (0.68 if bold else 0.6)
            cx = x + tw / 2 if anchor == "start" else x - tw / 2 if anchor == "end" else x
            font = ' fontname="Helvetica-Bold"' if bold else ""
            lines.append(f'\tt{k} [shape=plaintext fontsize={size} fontcolor="{colour}"{font} width={tw / 72:.4f} '
                         f'height={size * 1.2 / 72:.4f} pos="{cx:.1f},{height - y + size * 0.35:.1f}!" label={q(text)}]')
    lines.append("}")
    return "\n".join(lines) + "\n"


def render(charts: list[Chart], out: Path, width: int = 960) -> Path:
    """Write the charts to `out` as .svg (hand-written), .png or .pdf (drawn by Graphviz)."""
    fmt = out.suffix.lstrip(".").lower()
    if fmt not in FORMATS:
        raise RenderError(f"cannot draw a timeline as {out.name}: use one of .{', .'.join(FORMATS)}")
    out.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "svg":
        out.write_text(to_svg(charts, width), encoding="utf-8")
        return out
    out.write_bytes(render_dot(to_pinned_dot(charts, width), fmt, engine="neato", neato_no_op=2, quiet=True))
    return out
