"""Colours, shapes and DOT identifiers: one colour per device (shared with the timelines), node and edge styles."""

from __future__ import annotations

import colorsys
from functools import lru_cache
from typing import Any

from dagc.backends.graphviz.model import node_devices
from dagc.ir.core import Node
from dagc.units import format_size

# Tableau 10: distinct at a glance, and legible with black text on their tints.
_PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
            "#9c755f", "#bab0ac")


CRITICAL_COLOUR = "#c2185b"


CROSS_COLOUR = "#333333"


EDGE_COLOUR = "#8c8c8c"


# Past 10 devices, each further round of 10 takes the palette again with its lightness and saturation scaled
# and its hue turned (and turned further every four rounds), so that no two devices share a colour:
# (hue turn, lightness factor, saturation factor) per round after the first.
_ROUNDS = ((0.0, 0.62, 1.0), (0.05, 0.8, 1.25), (0.0, 1.25, 0.9), (0.05, 0.5, 1.2))


@lru_cache(maxsize=1024)
def device_colour(device: int) -> str:
    """The colour of device `device` in every picture (graph and timelines): Tableau 10 for the first ten,
    then variations of it (deterministic, distinct from every earlier device's)."""
    round_, index = divmod(device, len(_PALETTE))
    base = _PALETTE[index]
    if round_ == 0:
        return base
    turn, lightness, saturation = _ROUNDS[(round_ - 1) % len(_ROUNDS)]
    turn += 0.13 * ((round_ - 1) // len(_ROUNDS))
    hue, light, sat = colorsys.rgb_to_hls(*(int(base[i:i + 2], 16) / 255 for i in (1, 3, 5)))
    rgb = colorsys.hls_to_rgb((hue + turn) % 1.0, min(0.85, light * lightness), min(1.0, sat * saturation))
    return "#" + "".join(f"{round(max(0.0, min(1.0, c)) * 255):02x}" for c in rgb)


@lru_cache(maxsize=1)
def _device_colours() -> frozenset[str]:
    return frozenset(device_colour(d) for d in range(1024))


def is_device_colour(colour: str) -> bool:
    """Whether `colour` is some device's (of the first 1024)."""
    return colour in _device_colours()


def mix_white(colour: str, amount: float) -> str:
    """`colour` mixed with white: amount 0 → colour, 1 → white."""
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return "#" + "".join(f"{round(c + (255 - c) * amount):02x}" for c in (r, g, b))


def device_tint(device: int, amount: float = 0.6) -> str:
    """A light version of `device_colour` (for fills)."""
    return mix_white(device_colour(device), amount)


def edge_style(e: dict[str, Any], kind: str, collapse: bool) -> dict[str, str]:
    """The attributes of one drawn edge: thick with its bytes when it crosses devices, dashed for
    ordering, magenta on the critical path."""
    attrs: dict[str, str] = {}
    label = e["label"]
    if e["cross"]:
        attrs.update(penwidth="3", color=CROSS_COLOUR)
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


REGION_SHAPES = {"cond": "diamond", "loop": "hexagon", "map": "box3d", "try": "octagon"}


FINALLY_FILL, FINALLY_COLOUR = "#fff4e0", "#b36b00"  # a try's finally body: an exit handler


# Legend swatches are drawn with table cells, not line-drawing characters: the fonts that draw a picture
# (the system's, or graphviz-pure's bundled ones) need not have those glyphs.
def swatch_line(colour: str, thickness: int, dashed: bool = False) -> str:
    """A short horizontal line, solid or dashed, as a one-row table."""
    if dashed:
        cells = "".join(f'<TD BGCOLOR="{colour}" WIDTH="5" HEIGHT="{thickness}" FIXEDSIZE="TRUE"></TD>'
                        f'<TD WIDTH="3" HEIGHT="{thickness}" FIXEDSIZE="TRUE"></TD>' for _ in range(3))
    else:
        cells = f'<TD BGCOLOR="{colour}" WIDTH="24" HEIGHT="{thickness}" FIXEDSIZE="TRUE"></TD>'
    return f'<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="0"><TR>{cells}</TR></TABLE>'


def swatch_box(periphery: int) -> str:
    """A small white box: one border (a fused group) or a thick one (stacked, collapsed instances)."""
    return (f'<TABLE BORDER="{periphery}" COLOR="#555555" CELLBORDER="0" CELLSPACING="0" CELLPADDING="0" '
            f'BGCOLOR="#ffffff"><TR><TD WIDTH="{22 - 2 * periphery}" HEIGHT="{12 - 2 * periphery}" '
            'FIXEDSIZE="TRUE"></TD></TR></TABLE>')


def node_style(node: Node, colour: str | None, critical: bool) -> dict[str, str]:
    attrs: dict[str, str] = {}
    devices = node_devices(node)
    if len(devices) > 1:
        attrs.update(style="striped", fillcolor=":".join(device_tint(d, 0.5) for d in devices),
                     color=device_colour(devices[0]))
    elif colour is not None:
        attrs.update(fillcolor=mix_white(colour, 0.55), color=colour)
    if node.options.side_effects:
        attrs["peripheries"] = "2"
    if critical:
        attrs.update(color=CRITICAL_COLOUR, penwidth="3")
    return attrs
