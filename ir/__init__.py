"""The dagc IR: a Graph of task nodes, its text and JSON forms, and its verifier.

    from dagc.ir import Graph, Node, Ref, Const, print_graph, parse_graph, dumps, loads, verify
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .core import OPS, Graph, Node, Param
    from .facts import Effects, Placement, Reduction, Transfer
    from .location import SourceSpan
    from .parser import IRParseError, parse_graph
    from .payload import Exit, Region
    from .printer import print_graph
    from .serialize import (
        IRFormatError,
        dumps,
        graph_from_json,
        graph_to_json,
        loads,
        node_from_json,
        node_to_json,
    )
    from .types import Const, Map, Operand, Ref, Seq, TaskOptions
    from .verifier import verify

# Each name is loaded from its module on first use: `import dagc.ir.location` (which every
# diagnostic needs) then costs nothing more, and the verifier, which builds dagc.diagnostics objects
# while dagc.diagnostics imports this package, is no import cycle.
_HOMES = {
    **dict.fromkeys(("OPS", "Graph", "Node", "Param"), "core"),
    "SourceSpan": "location",
    **dict.fromkeys(("Effects", "Placement", "Transfer", "Reduction"), "facts"),
    **dict.fromkeys(("Region", "Exit"), "payload"),
    **dict.fromkeys(("IRParseError", "parse_graph"), "parser"),
    "print_graph": "printer",
    **dict.fromkeys(("IRFormatError", "dumps", "graph_from_json", "graph_to_json", "loads", "node_from_json",
                     "node_to_json"), "serialize"),
    **dict.fromkeys(("Const", "Map", "Operand", "Ref", "Seq", "TaskOptions"), "types"),
    "verify": "verifier",
}

__all__ = [
    "Graph",
    "Node",
    "Param",
    "Effects",
    "Placement",
    "Transfer",
    "Reduction",
    "Region",
    "Exit",
    "OPS",
    "Ref",
    "Const",
    "Seq",
    "Map",
    "Operand",
    "SourceSpan",
    "TaskOptions",
    "print_graph",
    "parse_graph",
    "IRParseError",
    "dumps",
    "loads",
    "graph_to_json",
    "graph_from_json",
    "node_to_json",
    "node_from_json",
    "IRFormatError",
    "verify",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
