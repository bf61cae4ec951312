"""The words of a picture: node labels and tooltips, region heads, the subtitle, device labels and the legend."""

from __future__ import annotations

import html
from typing import Any

from dagc.backends.graphviz.model import node_devices, node_duration
from dagc.backends.graphviz.style import CRITICAL_COLOUR, CROSS_COLOUR, device_tint, swatch_box, swatch_line
from dagc.ir import regions
from dagc.ir.core import Graph, Node
from dagc.ir.facts import transfer_of
from dagc.ir.types import Seq
from dagc.units import format_duration, format_size


def short_time(seconds: float) -> str:
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


# ---- labels and tooltips -----------------------------------------------------------------------
def placement_text(devices: tuple[int, ...], cluster: Any) -> str:
    if not devices:
        return ""
    names = ", ".join(str(d) for d in devices)
    if len(devices) > 1:
        text = f"devices {names}"
    else:
        text = cluster.device_name(devices[0]) if cluster is not None else f"device {names}"
    if cluster is not None and devices[0] < cluster.n_devices:
        text += f" on {cluster.node_names[cluster.devices[devices[0]].node]}"
    return text


def node_tooltip(node: Node, cost_model: Any, cluster: Any, critical: bool = False) -> str:
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
    estimate = f"estimated {short_time(node_duration(node, cost_model, cluster))}"
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
        move = transfer_of(node)
        parts.append(f"moves {format_size(int(move.bytes or 0))} "
                     f"from device {_end(move.src)} to device {_end(move.dst)}")
    elif opts.out_size is not None or "profile.bytes" in node.attrs:
        parts.append(f"output {format_size(cost_model.value_bytes(node))}")
    if opts.retries:
        parts.append(f"retries={opts.retries}")
    placement = placement_text(node_devices(node), cluster)
    if node.placement.start is not None:
        placement += (f", {short_time(float(node.placement.start))} → "
                      f"{short_time(float(node.placement.finish or 0.0))}")
    if placement:
        parts.append("placement: " + placement.lstrip(", "))
    if critical:
        parts.append("on the critical path")
    return "\n".join(parts)


def _end(devices: int | tuple[int, ...] | None) -> object:
    """A transfer end as the IR prints it (`3`, `[1, 2]`)."""
    return list(devices) if isinstance(devices, tuple) else devices


def node_label(node: Node, cost_model: Any, cluster: Any) -> str:
    title = html.escape(node.name)
    callee = html.escape(node.function or "")
    extra = []
    if node.options.gpus:
        extra.append(f"{node.options.gpus:g} GPU")
    if node.op != "glue" and (node.options.cost is not None or node.options.flops is not None
                              or node.placement.start is not None or "profile.duration" in node.attrs):
        extra.append(short_time(node_duration(node, cost_model, cluster)))
    detail = f'<BR/><FONT POINT-SIZE="9">{html.escape(" · ".join(extra))}</FONT>' if extra else ""
    if callee and callee != title:
        return f'<<B>{title}</B><BR/><FONT POINT-SIZE="10">{callee}</FONT>{detail}>'
    return f"<<B>{title}</B>{detail}>"


def region_head(node: Node) -> str:
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
    items = node.region.iter if node.region is not None else None
    count = len(items.items) if isinstance(items, Seq) else None
    planned = ""
    if count is not None and regions.TRIPS_ATTR in node.attrs:  # `dagc.trips(..., expected=N)`
        planned = f", planned {regions.expected_trips(node):g}"
    return f"<<B>loop</B>{f' ≤ {count} trips{planned}' if count is not None else ''}>"


def subtitle_text(graph: Graph, nodes: list[Node], cluster: Any, visible: set[str] | None, focus: str | None) -> str:
    parts = []
    if visible is not None:
        parts.append(f"neighbourhood of {focus}: {len(nodes)} of {len(graph)} tasks")
    if cluster is not None and any(node_devices(n) for n in nodes):
        parts.append(f"on {cluster.describe()}")
    makespan = graph.attrs.get("schedule.makespan")
    if isinstance(makespan, (int, float)):
        text = f"estimated makespan {short_time(float(makespan))}"
        bound = graph.attrs.get("schedule.lower_bound")
        if isinstance(bound, (int, float)) and bound > 0:
            text += f" (lower bound {short_time(float(bound))})"
        parts.append(text)
    if graph.attrs.get("profile.run"):
        parts.append(f"costs measured in run {graph.attrs['profile.run']}")
    return " · ".join(parts)


def device_label(graph: Graph, device: int, cluster: Any) -> str:
    text = f"<<B>{html.escape(cluster.device_name(device) if cluster is not None else f'device {device}')}</B>"
    detail: list[str] = []
    util = graph.attrs.get("schedule.utilization")
    if isinstance(util, list) and device < len(util):
        detail.append(f"{100 * float(util[device]):.0f}% busy")
    if detail:
        text += f'<FONT POINT-SIZE="9">  {html.escape(" · ".join(detail))}</FONT>'
    return text + ">"


def legend_table(graph: Graph, nodes: list[Node], cluster: Any, collapsed: bool, fused: bool) -> str:
    devices = sorted({d for n in nodes for d in node_devices(n)})
    if cluster is not None and cluster.n_devices <= 32 and len(nodes) == len(graph):
        devices = list(range(cluster.n_devices))
    rows = ['<TR><TD COLSPAN="2" ALIGN="LEFT"><B>legend</B></TD></TR>']
    for d in devices[:12]:
        where = placement_text((d,), cluster)
        rows.append(f'<TR><TD BGCOLOR="{device_tint(d, 0.35)}" WIDTH="28"> </TD>'
                    f'<TD ALIGN="LEFT">{html.escape(where)}</TD></TR>')
    if len(devices) > 12:
        rows.append(f'<TR><TD> </TD><TD ALIGN="LEFT">… {len(devices) - 12} more devices</TD></TR>')
    rows.append(f'<TR><TD>{swatch_line(CROSS_COLOUR, 4)}</TD><TD ALIGN="LEFT">data crossing devices (bytes)</TD></TR>')
    rows.append(f'<TR><TD>{swatch_line(CRITICAL_COLOUR, 4)}</TD><TD ALIGN="LEFT">critical path</TD></TR>')
    rows.append(f'<TR><TD>{swatch_line("#555555", 2, dashed=True)}</TD>'
                '<TD ALIGN="LEFT">loop / region; ordering edge</TD></TR>')
    if fused:
        rows.append(f'<TR><TD>{swatch_box(1)}</TD><TD ALIGN="LEFT">fused group (white box)</TD></TR>')
    if collapsed:
        rows.append(f'<TR><TD>{swatch_box(3)}</TD><TD ALIGN="LEFT">collapsed loop instances</TD></TR>')
    if any(n.op == "transfer" for n in nodes):
        rows.append('<TR><TD>→ d</TD><TD ALIGN="LEFT">transfer to device d</TD></TR>')
    return ('<<TABLE BORDER="1" COLOR="#bbbbbb" CELLBORDER="0" CELLSPACING="2" CELLPADDING="3" BGCOLOR="#ffffff">'
            + "".join(rows) + "</TABLE>>")
