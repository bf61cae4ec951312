"""The dagc IR: a Graph of task nodes, its text and JSON forms, and its verifier.

    from dagc.ir import Graph, Node, Ref, Const, print_graph, parse_graph, dumps, loads, verify
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .core import OPS, Graph, Node, Param
from .location import SourceSpan
from .parser import IRParseError, parse_graph
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

if TYPE_CHECKING:
    from .verifier import verify

__all__ = [
    "Graph",
    "Node",
    "Param",
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
    # The verifier builds dagc.diagnostics objects, and dagc.diagnostics imports this package
    # (for SourceSpan), so the verifier is loaded on first use rather than here.
    if name == "verify":
        from .verifier import verify

        return verify
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
