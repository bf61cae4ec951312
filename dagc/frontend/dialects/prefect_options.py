"""Prefect's per-call task options, `t.with_options(retries=2, timeout_seconds=30)(x)`, lowered to dagc's own
per-call form `t.options(retries=2, timeout=30.0)(x)` (dagc.frontend.extract.options), with the values read as
`@task(...)` reads them (dagc.frontend.dialects.prefect.task_options). A name bound to such a task, in the flow
(`fast = t.with_options(...)`) or at the module's top level, stands for the same callee wherever the flow calls
it, `.submit()`s or `.map()`s it."""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable

from dagc.frontend.modules import ModuleInfo, Project
from dagc.ir.types import TaskOptions

__all__ = ["is_with_options", "options_callee", "bound_configurations"]

# Prefect's option -> the dagc options it sets (the others do not change what the task computes)
_DAGC_FIELDS = {"retries": ("retries",), "timeout_seconds": ("timeout",), "cache_policy": ("cache", "pure"),
                "cache_key_fn": ("pure",)}

ReadOptions = Callable[[Project, ModuleInfo, ast.Call | None], tuple[TaskOptions, tuple[str, ...]]]


def is_with_options(expr: ast.expr) -> bool:
    """`expr` is `<something>.with_options(...)` (keywords only, as Prefect takes them)."""
    return isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "with_options" \
        and not expr.args


def options_callee(project: Project, info: ModuleInfo, call: ast.Call, task: ast.expr,
                   read: ReadOptions) -> ast.expr:
    """`task.options(...)` with the dagc options `call` (a `.with_options(...)`) sets, placed at `call`; `task`
    itself when it sets none (`name=`, `tags=`: a flow's too, which is inlined where it is called)."""
    given, _ = read(project, info, call)
    keywords: list[ast.keyword] = []
    for keyword in call.keywords:
        for field in _DAGC_FIELDS.get(keyword.arg or "", ()):
            value = getattr(given, field)
            if field == "timeout" and value is None:
                continue  # `timeout_seconds=0`: no timeout (a value that is not a number is reported already)
            if all(k.arg != field for k in keywords):
                keywords.append(ast.copy_location(ast.keyword(arg=field, value=ast.copy_location(
                    ast.Constant(value), keyword.value)), keyword))
    if not keywords:
        return copy.deepcopy(task)
    func = ast.copy_location(ast.Attribute(value=copy.deepcopy(task), attr="options", ctx=ast.Load()), call)
    return ast.copy_location(ast.Call(func=func, args=[], keywords=keywords), call)


def bound_configurations(info: ModuleInfo, fn: ast.FunctionDef | ast.AsyncFunctionDef
                         ) -> tuple[dict[str, ast.Call], list[ast.stmt]]:
    """Names bound once to `task.with_options(...)` that the flow only calls, `.submit()`s or `.map()`s: the
    `.with_options(...)` call of each, and the flow's statements that bind them (dropped from the body). Module-
    level bindings count for names the flow does not bind itself."""
    found: dict[str, ast.Call] = {}
    statements: list[ast.stmt] = []
    stores: dict[str, int] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            stores[node.id] = stores.get(node.id, 0) + 1
    for stmt in fn.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and is_with_options(stmt.value) and stores.get(stmt.targets[0].id) == 1:
            assert isinstance(stmt.value, ast.Call)
            found[stmt.targets[0].id] = stmt.value
            statements.append(stmt)
    for stmt in info.source.tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and is_with_options(stmt.value) and stmt.targets[0].id not in stores:
            assert isinstance(stmt.value, ast.Call)
            found[stmt.targets[0].id] = stmt.value
    only_called = {name for name in found if _only_called(fn, name)}
    return ({n: c for n, c in found.items() if n in only_called},
            [s for s in statements if isinstance(s, ast.Assign) and s.targets[0].id in only_called])  # type: ignore[union-attr]


def _only_called(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    parents = {id(child): node for node in ast.walk(fn) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load):
            parent = parents.get(id(node))
            if isinstance(parent, ast.Attribute) and parent.attr in ("submit", "map", "fn"):
                node, parent = parent, parents.get(id(parent))  # type: ignore[assignment]
            if not (isinstance(parent, ast.Call) and parent.func is node):
                return False
    return True
