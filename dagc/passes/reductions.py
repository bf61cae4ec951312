"""Which glue nodes are sums of tensors that a reduce collective can compute.

A glue node whose expression is `_i + _j + …` (or `_0[0] + _0[1] + …`: `gs[0] + gs[1] + …` over a
list of task results), optionally divided by a number (`(_0 + _1 + _2) / 3`, a mean), each addend a
distinct task result whose declared type is a tensor, and nothing else read, is a *sum*. So is a
task declared `@dagc.task(reduce="sum")` (or `"mean"`) called on a list of such results
(`task_sum`): the declaration promises that its body adds them up. The `comm` pass turns such a sum, when its operands lie on distinct ranks, into a reduce
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
from dagc.ir.types import Ref, Seq

__all__ = ["GlueSum", "glue_sum", "task_sum", "is_tensor_type"]

_TENSOR = re.compile(r"^(?:torch\.)?Tensor(?:\[.*\])?$")


def is_tensor_type(type_text: str | None) -> bool:
    """A declared type that is a torch tensor (`torch.Tensor`, `Tensor[float32, 8]`)."""
    return bool(type_text) and bool(_TENSOR.match(str(type_text).strip().strip("'\"")))


@dataclass(frozen=True)
class GlueSum:
    """`values`: the task results added, in the order Python adds them; `divisor`: the number the
    sum is divided by afterwards (None: a plain sum)."""

    values: tuple[str, ...]
    divisor: float | None = None


def _leaf(expr: ast.expr, node: Node) -> str | None:
    """The value an addend names: `_i` (a task result) or `_i[k]` (item k of a list operand)."""
    if isinstance(expr, ast.Name) and expr.id.startswith("_") and expr.id[1:].isdigit():
        index = int(expr.id[1:])
        arg = node.args[index] if index < len(node.args) else None
        return arg.name if isinstance(arg, Ref) else None
    if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Constant) and isinstance(expr.slice.value, int):
        outer = _leaf_seq(expr.value, node)
        k = expr.slice.value
        if outer is not None and -len(outer.items) <= k < len(outer.items) and isinstance(outer.items[k], Ref):
            return outer.items[k].name  # type: ignore[union-attr]
    return None


def _leaf_seq(expr: ast.expr, node: Node) -> Seq | None:
    if isinstance(expr, ast.Name) and expr.id.startswith("_") and expr.id[1:].isdigit():
        index = int(expr.id[1:])
        arg = node.args[index] if index < len(node.args) else None
        return arg if isinstance(arg, Seq) else None
    return None


def _addends(expr: ast.expr, node: Node) -> list[str] | None:
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        if isinstance(expr.right, ast.BinOp):
            return None  # only a left-to-right chain `((a + b) + c)`: Python's own order
        left, right = _addends(expr.left, node), _addends(expr.right, node)
        return None if left is None or right is None else left + right
    leaf = _leaf(expr, node)
    return [leaf] if leaf is not None else None


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
    values = _addends(body, node)
    # every value the node reads is added, once: nothing else of it needs moving
    if values is None or len(values) < 2 or len(set(values)) != len(values) \
            or set(values) != set(node.input_values()):
        return None
    for value in values:
        producer = graph.producer(value)
        if producer is None or producer.op == "transfer":
            return None
        if not is_tensor_type(producer.types[producer.outputs.index(value)]):
            return None
    return GlueSum(tuple(values), divisor)


def task_sum(node: Node, graph: Graph) -> GlueSum | None:
    """The sum a task declared `reduce="sum"` / `"mean"` computes over its one list argument, when
    every item is a distinct tensor task result (the frontend has checked the signature: DAGC136)."""
    if node.op != "task" or node.options.reduce is None or node.kwargs or len(node.args) != 1:
        return None
    (arg,) = node.args
    if not isinstance(arg, Seq) or len(arg.items) < 2 or not all(isinstance(i, Ref) for i in arg.items):
        return None
    values = [i.name for i in arg.items]  # type: ignore[union-attr]
    if len(set(values)) != len(values):
        return None
    for value in values:
        producer = graph.producer(value)
        if producer is None or producer.op == "transfer" or \
                not is_tensor_type(producer.types[producer.outputs.index(value)]):
            return None
    return GlueSum(tuple(values), float(len(values)) if node.options.reduce == "mean" else None)
