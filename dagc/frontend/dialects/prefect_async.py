"""Async Prefect flows, lowered to the plain flow body dagc compiles: dagc runs independent tasks in parallel
itself, and the runtime adapter (dagc.runtime.dialects.prefect) runs an async task's coroutine to completion.

What Prefect 3 does, and what the body becomes:

    await t(x)                                   →  t(x)           (the task's result)
    await asyncio.gather(t(a), t(b))             →  [t(a), t(b)]   (the list of results)
    await asyncio.gather(*[t(x) for x in xs])    →  [t(x) for x in xs]
    [await t(x) for x in xs]                     →  [t(x) for x in xs]
    cs = [t(x) for x in xs]; await asyncio.gather(*cs)  →  the same, when no other work comes in between
    t.submit(x), t.map(xs) (async flow or not)   →  as in a sync flow: Prefect runs the task in its runner

An async task called without `await` gives a coroutine Prefect does not run until it is awaited (in a sync flow:
never); a coroutine stored and awaited after other work runs after that work; `asyncio.create_task` and the
other asyncio calls schedule work outside the flow's calls; `async for`/`async with` need an event loop in the
flow. Each is reported at its line with the form dagc compiles.
"""

from __future__ import annotations

import ast

from dagc.frontend.dialects import decorator_form, dotted_name
from dagc.frontend.dialects.rewrite import unsupported
from dagc.frontend.modules import ModuleInfo, Project

__all__ = ["AsyncForms", "async_functions", "check_async_generator"]

_HINT = "docs/dialects.md (Prefect) lists the forms dagc compiles"


def async_functions(info: ModuleInfo) -> tuple[set[str], set[str]]:
    """The module's async Prefect tasks, and its other async functions (not tasks, not flows), by name."""
    tasks: set[str] = set()
    plain: set[str] = set()
    for stmt in info.source.tree.body:
        if isinstance(stmt, ast.AsyncFunctionDef):
            forms = [found[0] for d in stmt.decorator_list if (found := decorator_form(info, d)) is not None]
            if any(f.dialect == "prefect" and f.kind == "task" for f in forms):
                tasks.add(stmt.name)
            elif not forms:
                plain.add(stmt.name)
    return tasks, plain


def check_async_generator(project: Project, info: ModuleInfo, fn: ast.FunctionDef | ast.AsyncFunctionDef,
                          what: str) -> None:
    """An async generator task or flow streams its values through Prefect's event loop: reported."""
    own = [n for n in ast.walk(fn) if isinstance(n, (ast.Yield, ast.YieldFrom)) and _owner(fn, n) is fn]
    if isinstance(fn, ast.AsyncFunctionDef) and own:
        project.sink.error("DAGC108", f"async generator {what} `{fn.name}` is not supported", info.source.span(fn),
                           hint=f"return the list of values instead of yielding them one by one; {_HINT}")


def _owner(fn: ast.AST, target: ast.AST) -> ast.AST | None:
    """The innermost function of `fn` (itself included) that contains `target`."""
    def walk(node: ast.AST, owner: ast.AST) -> ast.AST | None:
        for child in ast.iter_child_nodes(node):
            if child is target:
                return owner
            inner = walk(child, child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                         else owner)
            if inner is not None:
                return inner
        return None
    return walk(fn, fn)


class AsyncForms(ast.NodeTransformer):
    """The async half of the flow rewriter: awaits, gathers and stored coroutines. The rewriter sets `project`,
    `info` and `configured`, calls `init_async`, and `store_pending`/`check_pending` around each statement."""

    project: Project
    info: ModuleInfo
    configured: dict[str, ast.Call]  # names bound to `task.with_options(...)`
    is_async: bool
    async_tasks: set[str]
    plain_async: set[str]

    def init_async(self, is_async: bool) -> None:
        self.is_async = is_async
        self.async_tasks, self.plain_async = async_functions(self.info)
        self.awaited: set[int] = set()  # the task calls whose coroutine is awaited, gathered or stored
        self.stored: set[int] = set()  # of these, the calls whose coroutine is stored (they run when awaited)
        self.reported: set[str] = set()  # names of stored coroutines already reported (their awaits are not)
        self.pending: dict[str, ast.stmt] = {}  # names holding coroutines not awaited yet -> the storing statement

    def task_name(self, func: ast.expr) -> str | None:
        """The task a callee names (`t`, `t.with_options(...)`, a name bound to that), when it is a name of the
        module."""
        if isinstance(func, ast.Name) and func.id in self.configured:
            func = self.configured[func.id]
        while isinstance(func, ast.Call) and isinstance(func.func, ast.Attribute) and func.func.attr == "with_options":
            func = func.func.value
        return func.id if isinstance(func, ast.Name) else None

    def gives_coroutine(self, call: ast.Call) -> bool:
        return self.task_name(call.func) in self.async_tasks

    def check_unawaited(self, call: ast.Call) -> None:
        """A direct call of an async task whose coroutine nothing awaits: Prefect never runs that task."""
        if not self.gives_coroutine(call) or id(call) in self.awaited:
            return
        name = self.task_name(call.func)
        if self.is_async:
            message = f"the call of async task `{name}` is not awaited: Prefect gives a coroutine and runs the " \
                      "task only when it is awaited"
            hint = f"write `await {ast.unparse(call)}`, or `await asyncio.gather(...)` for several calls"
        else:
            message = f"async task `{name}` is called in a sync flow: Prefect gives a coroutine and never runs " \
                      "the task"
            hint = f"write `{name}.submit(...).result()`, or make the flow `async def` and `await` the call"
        self.project.sink.error("DAGC108", message, self.info.source.span(call), hint=hint)

    # -- statements ------------------------------------------------------------------------------------------

    def store_pending(self, stmt: ast.stmt) -> None:
        """`c = t(x)`, `cs = [t(x) for x in xs]`, `cs = [t(a), t(b)]` in an async flow: coroutines awaited later."""
        if not (self.is_async and isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)):
            return
        value = stmt.value
        calls = [value] if isinstance(value, ast.Call) else [value.elt] if isinstance(value, ast.ListComp) else \
            list(value.elts) if isinstance(value, (ast.List, ast.Tuple)) else []
        if calls and all(isinstance(c, ast.Call) and self.gives_coroutine(c) for c in calls):
            self.awaited.update(id(c) for c in calls)
            self.stored.update(id(c) for c in calls)
            self.pending[stmt.targets[0].id] = stmt

    def check_pending(self, used: set[str], before: set[str], rewritten: list[ast.stmt]) -> None:
        """After a statement (`rewritten`, which read the names `used`): the coroutines pending `before` it that it
        used are awaited (else reported); when it does other work while some stay pending, they would run after
        that work: reported."""
        for name in sorted(before & used & set(self.pending)):
            stored = self.pending.pop(name)
            self.project.sink.error("DAGC108", f"the coroutines in `{name}` are used without `await`",
                                    self.info.source.span(stored), hint=f"write `await asyncio.gather(*{name})` "
                                    f"(or `await {name}` for one call) before using the results; {_HINT}")
        works = any(isinstance(n, ast.Call) and id(n) not in self.stored for s in rewritten for n in ast.walk(s))
        for name in sorted(before & set(self.pending)):
            if works:
                self.report_late(name, "not awaited before other work of the flow: Prefect runs them only when "
                                 "they are awaited, after that work (or never)")

    def report_late(self, name: str, why: str) -> None:
        stored = self.pending.pop(name)
        self.reported.add(name)
        self.project.sink.error("DAGC108", f"the coroutines stored in `{name}` are {why}",
                                self.info.source.span(stored), hint="await the calls where they are made: "
                                f"`{name} = await ...`, or `await asyncio.gather(...)` of them; {_HINT}")

    def finish_pending(self) -> None:
        for name in sorted(self.pending):
            self.report_late(name, "never awaited: Prefect does not run those tasks")

    # -- expressions -----------------------------------------------------------------------------------------

    def visit_Await(self, node: ast.Await) -> ast.AST:
        value = node.value
        if isinstance(value, ast.Name) and (value.id in self.pending or value.id in self.reported):
            self.pending.pop(value.id, None)
            return value
        if not isinstance(value, ast.Call):
            return unsupported(self.project, self.info, node, "only a task call or `asyncio.gather(...)` of task "
                               "calls can be awaited in a flow dagc compiles", f"await the task call itself; {_HINT}")
        if dotted_name(self.info, value.func) == "asyncio.gather":
            return self._gather(value)
        name = self.task_name(value.func)
        if name in self.plain_async or (dotted_name(self.info, value.func) or "").startswith("asyncio."):
            what = f"`{name}`" if name in self.plain_async else f"`{ast.unparse(value.func)}`"
            return unsupported(self.project, self.info, node, f"awaiting {what}, which is not a Prefect task, is "
                               "not supported in a flow dagc compiles",
                               f"make it a `@task` (dagc then runs it as a task), or await it inside a task; {_HINT}")
        self.awaited.add(id(value))
        return self.visit(value)

    def _gather(self, call: ast.Call) -> ast.expr:
        """`asyncio.gather(...)` of task calls: the list of their results."""
        if call.keywords:
            return unsupported(self.project, self.info, call, "`asyncio.gather(...)` with keywords is not supported",
                               f"gather the task calls alone; a task that fails stops the run; {_HINT}")
        if len(call.args) == 1 and isinstance(call.args[0], ast.Starred):
            items = call.args[0].value
            if isinstance(items, ast.Name) and (items.id in self.pending or items.id in self.reported):
                self.pending.pop(items.id, None)
                return items
            if isinstance(items, (ast.ListComp, ast.GeneratorExp)):
                self._mark(items.elt)
                comp = ast.copy_location(ast.ListComp(elt=items.elt, generators=items.generators), items)
                return self.visit(comp)  # type: ignore[no-any-return]
            if isinstance(items, (ast.List, ast.Tuple)):
                return self._gathered(items.elts, call)
            return unsupported(self.project, self.info, call, "`asyncio.gather(*...)` of something other than a "
                               "list of task calls is not supported", f"gather a list of task calls; {_HINT}")
        if any(isinstance(a, ast.Starred) for a in call.args):
            return unsupported(self.project, self.info, call, "`asyncio.gather(...)` mixing `*items` with other "
                               "arguments is not supported", f"gather one list of task calls; {_HINT}")
        return self._gathered(call.args, call)

    def _gathered(self, elts: list[ast.expr], where: ast.AST) -> ast.expr:
        out: list[ast.expr] = []
        for elt in elts:
            if isinstance(elt, ast.Name) and (elt.id in self.pending or elt.id in self.reported):
                self.pending.pop(elt.id, None)
                out.append(elt)
                continue
            self._mark(elt)
            out.append(self.visit(elt))
        return ast.copy_location(ast.List(elts=out, ctx=ast.Load()), where)

    def _mark(self, expr: ast.expr) -> None:
        if isinstance(expr, ast.Call):
            self.awaited.add(id(expr))

    def asyncio_call(self, node: ast.Call) -> ast.expr | None:
        """`asyncio.create_task(...)` and the other asyncio calls outside `await asyncio.gather(...)`: reported."""
        name = dotted_name(self.info, node.func)
        if name is None or not name.startswith("asyncio."):
            return None
        return unsupported(self.project, self.info, node, f"`{name}(...)` is not supported in a flow dagc compiles: "
                           "it schedules work outside the flow's task calls",
                           "await the task calls (`await t(x)`), or `await asyncio.gather(t(a), t(b))` to run them "
                           f"together; dagc runs independent tasks in parallel; {_HINT}")

    def visit_AsyncFor(self, node: ast.AsyncFor) -> ast.AST:
        return self._async_statement(node, "async for")

    def visit_AsyncWith(self, node: ast.AsyncWith) -> ast.AST:
        return self._async_statement(node, "async with")

    def _async_statement(self, node: ast.stmt, what: str) -> ast.AST:
        placeholder = unsupported(self.project, self.info, node, f"`{what}` is not supported in a flow dagc compiles",
                                  f"move it into a task, which may be `async def`; {_HINT}")
        return ast.copy_location(ast.Expr(placeholder), node)
