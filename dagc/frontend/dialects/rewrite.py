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

from dagc.frontend.modules import Constant, ModuleInfo, Project

__all__ = ["AFTER", "enable_after", "bound_names", "is_function_ref", "call_of", "after", "fan_out",
           "is_scalar", "unsupported", "copy_function"]

# The name a rewritten body calls for `dagc.after` (no user code can bind it: it is not an identifier a module
# would define at its top level, and the rewrite only writes it into bodies it made).
AFTER = "__dagc_after__"


def enable_after(info: ModuleInfo) -> None:
    """Let rewritten bodies of `info` call `dagc.after` by `AFTER`, whether the module imports dagc or not."""
    info.dagc_names[AFTER] = "after"


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


def is_scalar(expr: ast.expr, info: ModuleInfo, project: Project) -> bool:
    """`expr` is a value both frameworks pass whole to every mapped call: a number, a string, None, or a
    module constant holding one (a framework maps only over iterables, strings excepted)."""
    if isinstance(expr, ast.Constant):
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


def fan_out(func: ast.expr, mapped: list[tuple[str | None, ast.expr]], fixed_args: list[ast.expr],
            fixed_keywords: list[ast.keyword], where: ast.AST, taken: set[str]) -> ast.ListComp:
    """`[func(*fixed_args, m0, ..., **fixed_keywords, k=m1) for m0, m1 in zip(xs0, xs1)]`: one call per item
    of the mapped iterables (positional ones follow the fixed positional arguments, keyword ones by name),
    the comprehension dagc reads as a map region (or unrolls, over a list known at compile time)."""
    items: list[str] = []
    for _ in mapped:
        name = f"_item{len(items)}" if len(mapped) > 1 else "_item"
        while name in taken:
            name = "_" + name
        items.append(name)
        taken.add(name)
    args = list(fixed_args)
    keywords = list(fixed_keywords)
    for (keyword, _), item in zip(mapped, items):
        use = ast.copy_location(ast.Name(item, ast.Load()), where)
        if keyword is None:
            args.append(use)
        else:
            keywords.append(ast.keyword(arg=keyword, value=use))
    if len(mapped) == 1:
        target: ast.expr = ast.Name(items[0], ast.Store())
        iterable = mapped[0][1]
    else:
        target = ast.Tuple([ast.Name(i, ast.Store()) for i in items], ast.Store())
        iterable = call_of(ast.copy_location(ast.Name("zip", ast.Load()), where), [e for _, e in mapped], [], where)
    ast.copy_location(target, where)
    for node in ast.walk(target):
        ast.copy_location(node, where)
    generator = ast.comprehension(target=target, iter=iterable, ifs=[], is_async=0)
    return ast.copy_location(ast.ListComp(elt=call_of(func, args, keywords, where), generators=[generator]), where)


def unsupported(project: Project, info: ModuleInfo, node: ast.AST, message: str, hint: str) -> ast.expr:
    """Report a construct of the framework dagc does not compile, at its line; what stands in its place in
    the rewritten body (`None`) is never reported again (the compile has already failed)."""
    project.sink.error("DAGC108", message, info.source.span(node), hint=hint)
    return ast.copy_location(ast.Constant(None), node)
