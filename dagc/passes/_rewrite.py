"""Helpers for passes that rewrite value uses."""

from __future__ import annotations

from collections.abc import Mapping

from dagc.ir.core import Graph
from dagc.ir.types import Map, Operand, Ref, Seq


def substitute(operand: Operand, mapping: Mapping[str, str]) -> Operand:
    """`operand` with every `Ref(a)` replaced by `Ref(mapping[a])` where `a` is mapped."""
    if isinstance(operand, Ref):
        return Ref(mapping[operand.name]) if operand.name in mapping else operand
    if isinstance(operand, Seq):
        return Seq(operand.kind, tuple(substitute(item, mapping) for item in operand.items))
    if isinstance(operand, Map):
        return Map(tuple((substitute(k, mapping), substitute(v, mapping)) for k, v in operand.items))
    return operand


def replace_uses(graph: Graph, mapping: Mapping[str, str], only: set[str] | None = None) -> None:
    """Rewrite value uses in every node (or in `only`) and in the graph's returns."""
    if not mapping:
        return
    for node in graph:
        if only is not None and node.name not in only:
            continue
        node.args = tuple(substitute(a, mapping) for a in node.args)
        node.kwargs = tuple((k, substitute(v, mapping)) for k, v in node.kwargs)
    if only is None and graph.returns is not None:
        graph.returns = substitute(graph.returns, mapping)
    graph.invalidate()
