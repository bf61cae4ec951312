"""A NamedTuple of the user's built in a pipeline body from task results: `return Split(train=a, test=b)`.

The value keeps its fields, so that the caller of a sub-pipeline reads `parts.train`, `parts[0]` or unpacks
`train, test = prepare(n)` at compile time, each field staying the task result it is (no task waits for the
others); where the value goes whole (to a task, or as the pipeline's result) one node builds the NamedTuple
with its class where the program runs, as plain Python builds it.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from dagc.frontend.extract.context import Context
from dagc.frontend.extract.values import Dyn, ExtractError, Scope, Value, to_operand
from dagc.frontend.modules import ModuleInfo, Opaque
from dagc.ir.core import Node
from dagc.ir.facts import Effects
from dagc.ir.types import Ref, TaskOptions

__all__ = ["Record", "named_tuple_call", "record_field"]


class Record(Dyn):
    """A NamedTuple instance whose fields are known values. Its operand, the node that builds it whole, is
    made when something reads it whole (a record only taken apart builds nothing)."""

    __slots__ = ("names", "values", "_make", "_built")

    def __init__(self, make: Callable[[], Ref], names: tuple[str, ...], values: tuple[Value, ...]) -> None:
        self.names, self.values, self._make, self._built = names, values, make, None

    @property  # type: ignore[override]
    def operand(self) -> Ref:
        if self._built is None:
            self._built = self._make()
        return self._built


def named_tuple_call(cx: Context, call: ast.Call, scope: Scope, info: ModuleInfo) -> Record | None:
    """The Record `call` builds when it calls a NamedTuple class of the user's; None for any other call."""
    found = _named_tuple_class(cx, call.func, scope, info)
    if found is None:
        return None
    owner, cls = found
    fields = _fields(cls)
    span = info.source.span(call)
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        cx.sink.error("DAGC109", f"`*args`/`**kwargs` in building `{cls.name}` in a pipeline body", span,
                      hint="give each field by itself")
        raise ExtractError
    if len(call.args) > len(fields):
        cx.sink.error("DAGC105", f"`{cls.name}` has {len(fields)} fields but {len(call.args)} values were given",
                      span)
        raise ExtractError
    given: dict[str, Value] = {}
    for (name, _), arg in zip(fields, call.args):
        given[name] = cx.exprs.argument(arg, scope, info)
    for keyword in call.keywords:
        if keyword.arg not in dict(fields) or keyword.arg in given:
            cx.sink.error("DAGC103", f"`{cls.name}` has no field `{keyword.arg}`" if keyword.arg not in dict(fields)
                          else f"`{cls.name}` got field `{keyword.arg}` twice", info.source.span(keyword),
                          hint=f"fields: {', '.join(name for name, _ in fields)}")
            raise ExtractError
        given[keyword.arg] = cx.exprs.argument(keyword.value, scope, info)  # type: ignore[index]
    for name, default in fields:
        if name not in given:
            if default is None:
                cx.sink.error("DAGC104", f"`{cls.name}` is missing field `{name}`", span)
                raise ExtractError
            given[name] = cx.exprs.eval(default, Scope(scope.pipeline, ""), owner)
    names = tuple(name for name, _ in fields)
    values = tuple(given[name] for name in names)
    try:
        kwargs = tuple((name, to_operand(value)) for name, value in zip(names, values))
    except TypeError:
        cx.exprs.not_a_value(call, info)
        raise
    base = scope.prefix + cls.name + scope.suffix
    block = cx.blocks[-1] if cx.blocks else None  # built where its fields are (a region's body, or the top level)

    def make() -> Ref:
        made = cx.node_name(base)
        node = Node(made, "task", f"{owner.name}:{cls.name}", (), kwargs, (made,), (cls.name,),
                    TaskOptions(pure=True), span)
        node.effects = Effects(fresh=True)
        _add_to(cx, block, node)
        cx.modules_used.add(owner.name)
        return Ref(made)

    if block is not None:  # (a region's body is closed by the time a later read would build it: build it now)
        ref = make()
        return Record(lambda: ref, names, values)
    return Record(make, names, values)


def _add_to(cx: Context, block: list[Node] | None, node: Node) -> None:
    """Add `node` to `block`, or at the top level of the graph when `block` is None."""
    saved, cx.blocks = cx.blocks, [block] if block is not None else []
    try:
        cx.add_node(node)
    finally:
        cx.blocks = saved


def record_field(record: Record, key: Any) -> Value | None:
    """`record.name` (a field's name) or `record[i]` (an int index): the field's value; None for another key."""
    if isinstance(key, str) and key in record.names:
        return record.values[record.names.index(key)]
    if isinstance(key, int) and not isinstance(key, bool) and -len(record.values) <= key < len(record.values):
        return record.values[key]
    return None


def _named_tuple_class(cx: Context, func: ast.expr, scope: Scope, info: ModuleInfo
                       ) -> tuple[ModuleInfo, ast.ClassDef] | None:
    if not isinstance(func, ast.Name) or func.id in scope.env:
        return None
    owner, name = cx.exprs.defined_in(info, func.id)
    symbol = owner.symbols.get(name)
    if not (isinstance(symbol, Opaque) and symbol.kind == "class" and isinstance(symbol.node, ast.ClassDef)):
        return None
    cls = symbol.node
    if not any(ast.unparse(base).rpartition(".")[2] == "NamedTuple" for base in cls.bases):
        return None
    return owner, cls


def _fields(cls: ast.ClassDef) -> list[tuple[str, ast.expr | None]]:
    """The fields of a `class X(NamedTuple)`, in order, with their defaults."""
    return [(stmt.target.id, stmt.value) for stmt in cls.body
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)]
