"""Which glue nodes are sums of tensors that a reduce collective can compute.

A glue node whose expression is `_i + _j + … (+ …)`, optionally divided by a number (`(_0 + _1 +
_2) / 3`, a mean), each operand a distinct task result whose declared type is a tensor, is a
*sum*. The `comm` pass turns such a sum, when its operands lie on distinct ranks, into a reduce
collective (`comm.reduce` attributes): each rank contributes its operand and the glue's rank gets
the total. What the runtime does when the operands turn out not to be tensors of one dtype and
shape (or not tensors at all) is documented in docs/torch_backend.md: it falls back to gathering
them and evaluating the expression as Python does.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from dagc.ir.core import Graph, Node
from dagc.ir.types import Ref

__all__ = ["GlueSum", "glue_sum", "is_tensor_type"]

_TENSOR = re.compile(r"^(?:torch\.)?Tensor(?:\[.*\])?$")


def is_tensor_type(type_text: str | None) -> bool:
    """A declared type that is a torch tensor (`torch.Tensor`, `Tensor[float32, 8]`)."""
    return bool(type_text) and bool(_TENSOR.match(str(type_text).strip().strip("'\"")))


@dataclass(frozen=True)
class GlueSum:
    """`order`: the operand indices in the order Python adds them; `divisor`: the number the sum is
    divided by afterwards (None: a plain sum)."""

    order: tuple[int, ...]
    divisor: float | None = None


def _addends(expr: ast.expr) -> list[int] | None:
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        left, right = _addends(expr.left), _addends(expr.right)
        if left is None or right is None or not isinstance(expr.right, ast.Name):
            return None  # only a left-to-right chain `((a + b) + c)`: Python's own order
        return left + right
    if isinstance(expr, ast.Name) and expr.id.startswith("_") and expr.id[1:].isdigit():
        return [int(expr.id[1:])]
    return None


def glue_sum(node: Node, graph: Graph) -> GlueSum | None:
    """The sum `node` computes, if it is one of tensor task results (see the module docstring)."""
    if node.op != "glue" or node.kwargs:
        return None
    try:
        body = ast.parse(node.target, mode="eval").body
    except SyntaxError:
        return None
    divisor: float | None = None
    if isinstance(body, ast.BinOp) and isinstance(body.op, ast.Div) and isinstance(body.right, ast.Constant) \
            and isinstance(body.right.value, (int, float)) and not isinstance(body.right.value, bool) \
            and body.right.value != 0:
        divisor, body = float(body.right.value), body.left
    order = _addends(body)
    if order is None or len(order) < 2 or sorted(order) != list(range(len(node.args))):
        return None
    values = []
    for arg in node.args:
        producer = graph.producer(arg.name) if isinstance(arg, Ref) else None
        if producer is None or producer.op == "transfer":
            return None
        values.append(arg.name)
        if not is_tensor_type(producer.types[producer.outputs.index(arg.name)]):
            return None
    if len(set(values)) != len(values):
        return None
    return GlueSum(tuple(order), divisor)
