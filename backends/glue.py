"""Glue nodes: small expressions on task results, computed by a backend where their inputs are.

A `glue` node's target is a Python expression in which `_0`, `_1`, … stand for the node's
operands (`args[0]`, `args[1]`, …), e.g. `_0 > _1`, `_0['loss']`, `f'{_0:.3f}'`. The frontend
only builds expressions of literals, operators, comparisons, indexing, attribute access,
conditional expressions, f-strings and calls of a few builtins (`len`, `str`, `dict`, …), so
evaluating one calls no user function beyond the protocols of the values themselves.
"""

from __future__ import annotations

import ast
from functools import lru_cache

from dagc.backends.emitter import Names, render_operand
from dagc.ir.core import Node

__all__ = ["glue_source", "glue_expression", "GlueError"]


class GlueError(ValueError):
    """A glue node's expression is not one the frontend produces."""


_ALLOWED = (
    ast.Expression, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Subscript, ast.Slice,
    ast.Attribute, ast.JoinedStr, ast.FormattedValue, ast.Constant, ast.Name, ast.Tuple, ast.List, ast.Dict,
    ast.Load, ast.operator, ast.unaryop, ast.boolop, ast.cmpop, ast.Call, ast.keyword,
)
# the builtins glue may call: the frontend's dagc.frontend.forms.GLUE_CALLS (the backend checks on its own)
_CALLS = frozenset({"len", "str", "int", "float", "bool", "list", "tuple", "dict", "sorted", "min", "max", "sum",
                    "abs", "round", "print"})  # (print: a pipeline body's own, marked effects.io)


@lru_cache(maxsize=1024)
def glue_expression(text: str) -> ast.Expression:
    """The parsed, checked expression of a glue node (placeholders `_N` left in place)."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise GlueError(f"glue expression {text!r} does not parse: {exc.msg}") from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            raise GlueError(f"glue expression {text!r} contains {type(node).__name__}")
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in _CALLS):
            raise GlueError(f"glue expression {text!r} calls something other than a known builtin")
        if isinstance(node, ast.keyword) and node.arg is None:
            raise GlueError(f"glue expression {text!r} passes **kwargs")
        if isinstance(node, ast.Name) and node.id in _CALLS and any(
                isinstance(c, ast.Call) and c.func is node for c in ast.walk(tree)):
            continue
        if isinstance(node, ast.Name) and not (node.id.startswith("_") and node.id[1:].isdigit()):
            raise GlueError(f"glue expression {text!r} names {node.id!r}; only _0, _1, ... are allowed")
        if isinstance(node, ast.Attribute) and node.attr.startswith("__"):
            raise GlueError(f"glue expression {text!r} reads a dunder attribute")
    return tree


class _Substitute(ast.NodeTransformer):
    def __init__(self, node: Node, names: Names) -> None:
        self.node = node
        self.names = names

    def visit_Call(self, call: ast.Call) -> ast.expr:
        call.args = [self.visit(a) for a in call.args]
        call.keywords = [self.visit(k) for k in call.keywords]
        # `tuple(_0)` of a list operand: `(a, b)`, not `tuple([a, b])` (the same value; lint-clean)
        if isinstance(call.func, ast.Name) and call.func.id in ("tuple", "list") and len(call.args) == 1 \
                and not call.keywords and isinstance(call.args[0], (ast.List, ast.Tuple)) \
                and not any(isinstance(e, ast.Starred) for e in call.args[0].elts):
            return (ast.Tuple if call.func.id == "tuple" else ast.List)(call.args[0].elts, ast.Load())
        return call  # the builtin's name is kept; only placeholders are substituted

    def visit_Name(self, name: ast.Name) -> ast.expr:
        index = int(name.id[1:])
        if index >= len(self.node.args):
            raise GlueError(f"glue node `{self.node.name}` uses _{index} but has {len(self.node.args)} operands")
        return ast.parse(render_operand(self.node.args[index], self.names), mode="eval").body


def glue_source(node: Node, names: Names) -> str:
    """Python source computing `node`'s value from the emitted identifiers of its operands."""
    tree = glue_expression(node.target)
    import copy

    out = _Substitute(node, names).visit(copy.deepcopy(tree))
    return ast.unparse(ast.fix_missing_locations(out))
