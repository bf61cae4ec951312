"""Helpers for passes that rewrite value uses."""

from __future__ import annotations

from collections.abc import Mapping

from dagc.ir.core import REGION_OPS, Graph, Node, region_bodies
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


def _substitute_json(data: object, mapping: Mapping[str, str]) -> object:
    from dagc.ir.serialize import operand_from_json, operand_to_json

    return operand_to_json(substitute(operand_from_json(data), mapping))


def _substitute_node(node: Node, mapping: Mapping[str, str]) -> None:
    """Rewrite `node`'s operands and the outer values read inside it: a region's bodies and a fused
    group's members name outer values directly (docs/ir.md)."""
    from dagc.ir.serialize import node_from_json, node_to_json

    node.args = tuple(substitute(a, mapping) for a in node.args)
    node.kwargs = tuple((k, substitute(v, mapping)) for k, v in node.kwargs)
    if node.op == "fused":  # members name the group's outer inputs directly, like region bodies
        members = []
        for item in node.attrs.get("fuse.members") or []:
            member = node_from_json(item)
            _substitute_node(member, mapping)
            members.append(node_to_json(member))
        node.attrs["fuse.members"] = members
        return
    if node.op not in REGION_OPS:
        return
    for body in region_bodies(node).values():
        for inner in body:
            _substitute_node(inner, mapping)
    attrs = dict(node.attrs)
    for key in ("region.then.yield", "region.else.yield", "region.yield", "region.body.yield",
                "region.finally.yield", "region.init"):
        if attrs.get(key):
            attrs[key] = [_substitute_json(o, mapping) for o in attrs[key]]
    brk = attrs.get("region.break")
    if isinstance(brk, dict):
        attrs["region.break"] = {**brk, "cond": _substitute_json(brk["cond"], mapping),
                                 "yield": [_substitute_json(o, mapping) for o in brk["yield"]]}
    node.attrs.update(attrs)


def replace_uses(graph: Graph, mapping: Mapping[str, str], only: set[str] | None = None) -> None:
    """Rewrite value uses in every node (or in `only`), inside region bodies, and in the graph's returns."""
    if not mapping:
        return
    for node in graph:
        if only is not None and node.name not in only:
            continue
        _substitute_node(node, mapping)
    if only is None and graph.returns is not None:
        graph.returns = substitute(graph.returns, mapping)
    graph.invalidate()
