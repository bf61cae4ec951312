"""Which glue nodes are sums of tensors that a reduce collective can compute.

A glue node whose expression is `_i + _j + …` (or `_0[0] + _0[1] + …`: `gs[0] + gs[1] + …` over a
list of task results), or Python's `sum(…)` of a list of task results (`sum(_0)`: `sum(gs)`;
`sum([_0, _1[2]])`: `sum([a, gs[2]])`; `sum(_0)` of a comprehension), optionally divided by a
number (`(_0 + _1 + _2) / 3`, a mean) or, for `sum(xs)`, by `len(xs)`, each addend a distinct task
result whose declared type is a tensor, and nothing else read, is a *sum*. `sum` starts from 0
(`((0 + a) + b) + …`): `GlueSum.start` records it, and the collective adds the 0 too (it turns a
bool tensor into int64 and -0.0 into 0.0, as Python does). So is a
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
    start: int | None = None  # `sum(xs)` adds its operands to 0; `a + b` has no start value


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


def _sum_call_items(expr: ast.expr, node: Node) -> list[str] | None:
    """The values `sum(X)` adds, X a list operand (`_0`) or a list/tuple display of addends."""
    if not (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "sum"
            and len(expr.args) == 1 and not expr.keywords):
        return None
    (items,) = expr.args
    seq = _leaf_seq(items, node)
    if seq is not None:
        refs = [i.name for i in seq.items if isinstance(i, Ref)]
        return refs if len(refs) == len(seq.items) else None
    if isinstance(items, (ast.List, ast.Tuple)):
        leaves = [_leaf(e, node) for e in items.elts]
        return None if any(leaf is None for leaf in leaves) else leaves  # type: ignore[return-value]
    return None


def _divisor(body: ast.expr, node: Node) -> tuple[float | None, ast.expr]:
    """Split `S / n` into (n, S): n a nonzero number, or `len(X)` of the list `S = sum(X)` adds."""
    if not (isinstance(body, ast.BinOp) and isinstance(body.op, ast.Div)):
        return None, body
    right = body.right
    if isinstance(right, ast.Constant) and isinstance(right.value, (int, float)) \
            and not isinstance(right.value, bool) and right.value != 0:
        return float(right.value), body.left
    left = body.left
    if isinstance(right, ast.Call) and isinstance(right.func, ast.Name) and right.func.id == "len" \
            and len(right.args) == 1 and not right.keywords and isinstance(left, ast.Call) \
            and ast.dump(left.args[0] if left.args else left) == ast.dump(right.args[0]):
        items = _sum_call_items(left, node)
        if items:
            return float(len(items)), left
    return None, body


def glue_sum(node: Node, graph: Graph) -> GlueSum | None:
    """The sum `node` computes, if it is one of tensor task results (see the module docstring)."""
    if node.op != "glue" or node.kwargs:
        return None
    try:
        body = ast.parse(node.target, mode="eval").body
    except SyntaxError:
        return None
    divisor, body = _divisor(body, node)
    start: int | None = None
    values = _sum_call_items(body, node)
    if values is not None:
        start = 0  # Python's sum: ((0 + a) + b) + …
    else:
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
    return GlueSum(tuple(values), divisor, start)


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
