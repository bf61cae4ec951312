"""Prefect 3 flows: `@flow` functions are pipelines, `@task` functions are tasks.

A flow body calls its tasks directly, or through futures and fan-outs, which the body is rewritten from
(dagc.frontend.dialects.rewrite):

    y = square.submit(x)            →  y = square(x)                      (a future is its value)
    y.result(), y.wait()            →  y, (nothing)
    ys = square.map(xs, unmapped(k))→  ys = [square(_item, k) for _item in xs]   (a map region)
    [f.result() for f in ys]        →  ys
    wait(futures)                   →  (nothing: the programs wait for every task)
    load(x, wait_for=[y])           →  dagc.after(load(x), y)

Task options dagc has an equivalent for: `retries=`, `timeout_seconds=` (a timeout), `cache_policy=`
(`NO_CACHE` turns the run store's reuse off; a policy keyed on the inputs marks the task pure).
"""

from __future__ import annotations

import ast

from dagc.frontend.dialects import DECORATORS, DecoratorForm, decorator_form, dotted_name
from dagc.frontend.dialects.rewrite import (
    Mapped,
    after,
    bound_names,
    call_of,
    copy_function,
    enable_after,
    fan_out,
    is_function_ref,
    is_scalar,
    scalar_names,
    unsupported,
)
from dagc.frontend.fix_edits import guard_call_fix, plain_def_fix
from dagc.frontend.modules import ModuleInfo, Project, static_option_value
from dagc.frontend.static import NotStatic
from dagc.ir.types import TaskOptions

__all__ = ["task_options", "pipeline_node"]

for _module in ("prefect", "prefect.tasks", "prefect.flows"):
    DECORATORS[f"{_module}.task"] = DecoratorForm("prefect", "task")
    DECORATORS[f"{_module}.flow"] = DecoratorForm("prefect", "pipeline")

_UNMAPPED = {"prefect.unmapped", "prefect.utilities.annotations.unmapped", "prefect.quote",
             "prefect.utilities.annotations.quote", "prefect.utilities.annotations.allow_failure",
             "prefect.allow_failure"}
_WAIT = {"prefect.futures.wait", "prefect.wait"}
_NO_CACHE = {"prefect.cache_policies.NO_CACHE"}
_INPUT_POLICIES = {"prefect.cache_policies.INPUTS"}
_INPUT_KEYS = {"prefect.tasks.task_input_hash"}  # `cache_key_fn=task_input_hash`: Prefect 2's form of INPUTS
_HINT = "docs/dialects.md (Prefect) lists the forms dagc compiles"


def task_options(project: Project, info: ModuleInfo, call: ast.Call | None) -> tuple[TaskOptions, tuple[str, ...]]:
    """The dagc options of `@task(...)`: `retries=`, `timeout_seconds=`, `cache_policy=` (`cache_key_fn=`); the
    others (names, tags, retry delays, result persistence) change nothing in what the task computes."""
    given: dict[str, object] = {}
    for keyword in call.keywords if call is not None else ():
        if keyword.arg in ("retries", "timeout_seconds"):
            try:
                value = static_option_value(keyword.value, info, project)
            except NotStatic:
                value = None
            if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0):
                value = None
            if value is None:
                project.sink.error("DAGC109", f"`{keyword.arg}=` of a Prefect task must be a number known at "
                                   "compile time", info.source.span(keyword.value),
                                   hint=f"write a literal or a module constant: `@task({keyword.arg}=3)`")
                continue
            if keyword.arg == "retries":
                given["retries"] = int(value)
            elif value:
                given["timeout"] = float(value)
        elif keyword.arg == "cache_key_fn" and dotted_name(info, keyword.value) in _INPUT_KEYS:
            given["pure"] = True
        elif keyword.arg == "cache_policy":
            names = {dotted_name(info, e) for e in ast.walk(keyword.value) if isinstance(e, (ast.Name, ast.Attribute))}
            if names & _NO_CACHE:
                given["cache"] = False
            elif names & _INPUT_POLICIES:
                given["pure"] = True
    return TaskOptions(**given), ()  # type: ignore[arg-type]


def pipeline_node(project: Project, info: ModuleInfo,
                  fn: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.FunctionDef | ast.AsyncFunctionDef:
    """The flow's body in dagc's forms (the module's own tree is left as written)."""
    if isinstance(fn, ast.AsyncFunctionDef):
        project.sink.error("DAGC108", f"async flow `{fn.name}` is not supported", info.source.span(fn),
                           hint="write the flow and its tasks as plain `def` functions; dagc runs independent "
                           "tasks in parallel without asyncio", fix=plain_def_fix(info.source, fn))
        return fn
    enable_after(info)
    called = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
    for stmt in info.source.tree.body:  # an async task's call gives a coroutine, which no program awaits
        if isinstance(stmt, ast.AsyncFunctionDef) and stmt.name in called and any(
                found[0].dialect == "prefect" for d in stmt.decorator_list
                if (found := decorator_form(info, d)) is not None):
            project.sink.error("DAGC108", f"async task `{stmt.name}` is not supported", info.source.span(stmt),
                               hint="write the task as a plain `def`; dagc runs independent tasks in parallel",
                               fix=plain_def_fix(info.source, stmt))
    _check_module_calls(project, info, fn)
    lowered = copy_function(fn)
    rewriter = _FlowRewriter(project, info, bound_names(fn), scalar_names(fn))
    lowered.body = rewriter.statements(lowered.body)
    return lowered


def _check_module_calls(project: Project, info: ModuleInfo, fn: ast.FunctionDef) -> None:
    """A flow called at the module's top level runs whenever the module is imported, in every process of a
    program (and starts Prefect's server there): reported, with the guard that keeps it to `python script.py`."""
    for stmt in info.source.tree.body:
        if isinstance(stmt, (ast.Expr, ast.Assign)) and isinstance(stmt.value, ast.Call) and isinstance(
                stmt.value.func, ast.Name) and stmt.value.func.id == fn.name:
            project.sink.error("DAGC110", f"flow `{fn.name}` is called at the module's top level: it would run each "
                               "time a program imports the module", info.source.span(stmt.value),
                               hint="call it under `if __name__ == \"__main__\":`, as Prefect's examples do",
                               fix=guard_call_fix(info.source, stmt))


class _FlowRewriter(ast.NodeTransformer):
    """Rewrites Prefect's call forms in a flow body (not inside functions or classes it defines)."""

    def __init__(self, project: Project, info: ModuleInfo, local: set[str], scalars: set[str]) -> None:
        self.project, self.info, self.local, self.scalars = project, info, local, scalars
        self.taken = set(local)

    def statements(self, body: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in body:
            if isinstance(stmt, ast.Expr) and self._drops(stmt.value):
                continue
            new = self.visit(stmt)
            out.extend(new if isinstance(new, list) else [new] if new is not None else [])
        if not out and body:  # a block that only waited: Python needs a statement there
            out.append(ast.copy_location(ast.Pass(), body[0]))
        return out

    def _drops(self, expr: ast.expr) -> bool:
        """A statement that only waits on futures it names (`wait(futures)`, `future.wait()`): dagc's programs
        wait for every task. (`task.submit(x).wait()` still calls the task.)"""
        if not isinstance(expr, ast.Call):
            return False
        if isinstance(expr.func, ast.Attribute) and expr.func.attr == "wait" and isinstance(
                expr.func.value, ast.Name) and expr.func.value.id in self.local and not expr.args:
            return True
        return dotted_name(self.info, expr.func) in _WAIT and all(isinstance(a, ast.Name) for a in expr.args)

    def generic_visit(self, node: ast.AST) -> ast.AST:
        for field, old in ast.iter_fields(node):
            if isinstance(old, list) and old and isinstance(old[0], ast.stmt):
                setattr(node, field, self.statements(old))
            elif isinstance(old, list):
                old[:] = [self.visit(v) if isinstance(v, ast.AST) else v for v in old]
            elif isinstance(old, ast.AST):
                setattr(node, field, self.visit(old))
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        return node  # a helper defined in the flow: its body is not the flow's

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]
    visit_ClassDef = visit_FunctionDef  # type: ignore[assignment]
    visit_Lambda = visit_FunctionDef  # type: ignore[assignment]

    def visit_ListComp(self, node: ast.ListComp) -> ast.AST:
        self.generic_visit(node)
        # `[f.result() for f in futures]` is now `[f for f in futures]`: the futures' values are the list
        (gen,) = node.generators if len(node.generators) == 1 else (None,)
        if gen is not None and not gen.ifs and isinstance(gen.target, ast.Name) and isinstance(node.elt, ast.Name) \
                and node.elt.id == gen.target.id and isinstance(gen.iter, ast.Name):
            return gen.iter
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "map" and is_function_ref(func.value, self.local):
            return self._map(node, func.value)  # its arguments are read before they are rewritten
        self.generic_visit(node)
        if isinstance(node.func, ast.Constant) and node.func.value is None:  # calls what was reported: once
            return node.func
        name = dotted_name(self.info, func)
        if name in _UNMAPPED or name in _WAIT:  # outside `.map`, `unmapped(x)` is x; `wait(fs)` waits on fs
            return node.args[0] if len(node.args) == 1 else node
        if isinstance(func, ast.Attribute):
            receiver, method = func.value, func.attr
            if method in ("result", "wait") and not is_function_ref(receiver, self.local):
                return receiver  # a future's value is the task's result
            if is_function_ref(receiver, self.local):
                if method in ("submit", "fn"):
                    return self._task_call(call_of(receiver, node.args, node.keywords, node))
                if method in ("with_options", "apply_async", "delay", "serve", "deploy", "to_deployment"):
                    return unsupported(self.project, self.info, node,
                                       f"Prefect's `.{method}()` is not supported in a flow dagc compiles",
                                       "set the options in the task's decorator (`@task(retries=2)`) and call the "
                                       f"task directly, `.submit()` or `.map()` it; {_HINT}")
        return self._task_call(node)

    def _task_call(self, node: ast.Call) -> ast.expr:
        """A task call's Prefect-only keywords: `wait_for=` becomes an ordering; `return_state=` is refused."""
        waits: list[ast.expr] = []
        keywords = []
        for keyword in node.keywords:
            if keyword.arg == "wait_for":
                value = keyword.value
                waits.extend(value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value])
            elif keyword.arg == "return_state":
                return unsupported(self.project, self.info, keyword.value,
                                   "`return_state=` is not supported: a dagc task gives its result, not a Prefect "
                                   "state", f"use the result itself; a task that fails stops the run; {_HINT}")
            else:
                keywords.append(keyword)
        node.keywords = keywords
        return after(node, waits, node) if waits else node

    def _map(self, node: ast.Call, task: ast.expr) -> ast.expr:
        """`task.map(xs, unmapped(v), k=ys, c=2)`: one call per item of the iterables, zipped."""
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            return unsupported(self.project, self.info, node, "`.map()` with `*args` or `**kwargs` is not supported",
                               f"name each argument: `task.map(xs, scale=unmapped(2))`; {_HINT}")
        args: list[ast.expr | Mapped] = [self._argument(a) for a in node.args]
        keywords: list[tuple[str, ast.expr | Mapped]] = []
        waits: list[ast.expr] = []
        for keyword in node.keywords:
            assert keyword.arg is not None
            if keyword.arg == "wait_for":
                value = keyword.value
                waits.extend(self.visit(w) for w in (value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]))
            elif keyword.arg in ("return_state", "deferred"):
                return unsupported(self.project, self.info, keyword, f"`.map({keyword.arg}=...)` is not supported",
                                   f"map the task over its items and use the results; {_HINT}")
            else:
                keywords.append((keyword.arg, self._argument(keyword.value)))
        if not any(isinstance(a, Mapped) for a in (*args, *(v for _, v in keywords))):
            return unsupported(self.project, self.info, node, "`.map()` has no argument to map over",
                               f"pass the list of items: `task.map(items)`; {_HINT}")
        return after(fan_out(task, args, keywords, node, self.taken), waits, node)

    def _argument(self, expr: ast.expr) -> ast.expr | Mapped:
        """A `.map()` argument: given whole to every call (`unmapped(x)`, a scalar), or mapped over."""
        if isinstance(expr, ast.Call) and dotted_name(self.info, expr.func) in _UNMAPPED and len(expr.args) == 1:
            return self.visit(expr.args[0])
        if is_scalar(expr, self.info, self.project, self.scalars):
            return expr
        return Mapped(self.visit(expr))
