"""Rewriting a function-based framework's pipeline body into the forms dagc's own pipelines use.

Prefect flows and Airflow TaskFlow DAGs call their tasks as Python calls functions, plus a few call forms of
their own: a future (`.submit()`, `.result()`), a fan-out (`.map(xs)`, `.expand(x=xs)`), an ordering without
data (`wait_for=`, `a >> b`). Each of these has a dagc equivalent the extraction already reads (a plain task
call, a list comprehension over the items, `dagc.after`), so a dialect rewrites its pipeline body once, when
the module is scanned, and the rest of the frontend (regions, maps, effects, diagnostics) is dagc's own. The
rewritten nodes keep the source positions of what they replace, so diagnostics point at the user's code.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterable
from dataclasses import dataclass

from dagc.frontend.modules import Constant, ModuleInfo, Project

__all__ = ["AFTER", "enable_after", "bound_names", "is_function_ref", "call_of", "after", "fan_out", "Mapped",
           "is_scalar", "scalar_names", "unsupported", "copy_function"]

# The name a rewritten body (a Prefect flow's, an Airflow DAG's, a KFP pipeline's) calls for `dagc.after`: not
# a Python identifier, so no user name clashes with it.
AFTER = "dagc·after"


def enable_after(info: ModuleInfo) -> None:
    """Let rewritten bodies of `info` call `dagc.after` by `AFTER`, whether the module imports dagc or not."""
    info.dagc_names.setdefault(AFTER, "after")


def copy_function(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.FunctionDef | ast.AsyncFunctionDef:
    """A deep copy to rewrite: the module's own tree stays as written (code identity, effects read it)."""
    return copy.deepcopy(fn)


def bound_names(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Names the function binds itself (parameters, assignments, loop targets, nested definitions): a call
    on one of these is a call on a value, never on a module-level task."""
    args = fn.args
    names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    names.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
    for node in ast.walk(fn):
        if node is fn:
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
    return names


def is_function_ref(expr: ast.expr, local: set[str]) -> bool:
    """`expr` names a module-level callable (`square`, `tasks.square`), not a value of the body."""
    while isinstance(expr, ast.Attribute):
        expr = expr.value
    return isinstance(expr, ast.Name) and expr.id not in local


def call_of(func: ast.expr, args: list[ast.expr], keywords: list[ast.keyword], where: ast.AST) -> ast.Call:
    """`func(*args, **keywords)`, placed at `where` in the source."""
    return ast.copy_location(ast.Call(func=func, args=args, keywords=keywords), where)


def after(call: ast.expr, prerequisites: Iterable[ast.expr], where: ast.AST) -> ast.expr:
    """`dagc.after(call, *prerequisites)`: `call` runs once the tasks behind the prerequisites have ended."""
    first = list(prerequisites)
    if not first:
        return call
    return call_of(ast.copy_location(ast.Name(AFTER, ast.Load()), where), [call, *first], [], where)


_SCALAR_TYPES = {"int", "float", "str", "bool", "bytes", "None", "complex"}


def scalar_names(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Names of the function that hold one value, not items: parameters annotated with a scalar type (or
    without annotation, defaulting to a scalar literal), and names every assignment of gives a scalar literal."""
    out: set[str] = set()
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    defaults: dict[str, ast.expr] = dict(zip([a.arg for a in positional][len(positional) - len(args.defaults):],
                                             args.defaults))
    defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
    for arg in (*positional, *args.kwonlyargs):
        if arg.annotation is not None:
            parts = {n.id if isinstance(n, ast.Name) else str(n.value) for n in ast.walk(arg.annotation)
                     if isinstance(n, ast.Name) or (isinstance(n, ast.Constant) and n.value is None)}
            if parts and parts <= _SCALAR_TYPES | {"Optional"}:
                out.add(arg.arg)
        elif isinstance(defaults.get(arg.arg), ast.Constant):
            out.add(arg.arg)
    assigned: dict[str, bool] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    assigned[target.id] = assigned.get(target.id, True) and isinstance(node.value, ast.Constant)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            assigned.setdefault(node.id, False)
    # a loop target or augmented assignment also stores the name: `setdefault` above keeps a literal's True
    for node in ast.walk(fn):
        if isinstance(node, (ast.For, ast.comprehension, ast.AugAssign, ast.AnnAssign, ast.NamedExpr)):
            for name in (n for n in ast.walk(node.target) if isinstance(n, ast.Name)):
                assigned[name.id] = False
    return out | {name for name, scalar in assigned.items() if scalar}


def is_scalar(expr: ast.expr, info: ModuleInfo, project: Project, scalars: set[str]) -> bool:
    """`expr` is a value both frameworks pass whole to every mapped call: a number, a string, None, a name of
    the function holding one (`scalar_names`), or a module constant holding one (a framework maps only over
    iterables, strings excepted)."""
    if isinstance(expr, ast.Constant):
        return True
    if isinstance(expr, ast.Name) and expr.id in scalars:
        return True
    if isinstance(expr, ast.Name):
        symbol = project.lookup(info, expr.id)
        if isinstance(symbol, Constant):
            try:
                iter(symbol.value)
            except TypeError:
                return True
            return isinstance(symbol.value, (str, bytes))
    return False


@dataclass(frozen=True)
class Mapped:
    """An argument of a fan-out that is mapped over: each call gets one item of `items`."""

    items: ast.expr


def fan_out(func: ast.expr, args: list[ast.expr | Mapped], keywords: list[tuple[str, ast.expr | Mapped]],
            where: ast.AST, taken: set[str]) -> ast.ListComp:
    """`[func(a, m0, k=m1, c=v) for m0, m1 in zip(xs0, xs1)]` for `args`/`keywords` that are mapped (`Mapped`)
    or given whole to every call: one call per item of the mapped iterables, zipped, as the comprehension
    dagc reads as a map region (or unrolls, over a list known at compile time)."""
    mapped = [a for a in (*args, *(v for _, v in keywords)) if isinstance(a, Mapped)]
    items: dict[int, str] = {}
    for entry in mapped:
        name = f"_item{len(items)}" if len(mapped) > 1 else "_item"
        while name in taken:
            name = "_" + name
        items[id(entry)] = name
        taken.add(name)

    def use(value: ast.expr | Mapped) -> ast.expr:
        if isinstance(value, Mapped):
            return ast.copy_location(ast.Name(items[id(value)], ast.Load()), where)
        return value

    call = call_of(func, [use(a) for a in args], [ast.keyword(arg=k, value=use(v)) for k, v in keywords], where)
    if len(mapped) == 1:
        target: ast.expr = ast.Name(items[id(mapped[0])], ast.Store())
        iterable = mapped[0].items
    else:
        target = ast.Tuple([ast.Name(items[id(m)], ast.Store()) for m in mapped], ast.Store())
        iterable = call_of(ast.copy_location(ast.Name("zip", ast.Load()), where), [m.items for m in mapped], [], where)
    for node in ast.walk(target):
        ast.copy_location(node, where)
    generator = ast.comprehension(target=target, iter=iterable, ifs=[], is_async=0)
    return ast.copy_location(ast.ListComp(elt=call, generators=[generator]), where)


def unsupported(project: Project, info: ModuleInfo, node: ast.AST, message: str, hint: str) -> ast.expr:
    """Report a construct of the framework dagc does not compile, at its line; what stands in its place in
    the rewritten body (`None`) is never reported again (the compile has already failed)."""
    project.sink.error("DAGC108", message, info.source.span(node), hint=hint)
    return ast.copy_location(ast.Constant(None), node)
