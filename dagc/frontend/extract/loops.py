"""Loops: `for` over a compile-time iterable (unrolled, or a `loop` region when it may leave early),
bounded `while` loops, and the budget that keeps unrolling finite."""

from __future__ import annotations

import ast
from typing import Any

from dagc.frontend.exits import lower_continues
from dagc.frontend.extract.context import MAX_UNROLL, MAX_WHILE, Component
from dagc.frontend.extract.queries import (
    assigned_names,
    grown_names,
    loop_level_breaks,
    names_in,
    ordered_stores,
    target_names,
)
from dagc.frontend.extract.values import (
    POISON,
    BreakSignal,
    ContinueSignal,
    Dyn,
    ExtractError,
    LoopContext,
    Scope,
    Static,
    Value,
    is_task_result,
    to_operand,
    value_of,
)
from dagc.frontend.modules import ModuleInfo
from dagc.frontend.static import NotStatic, StaticIterator, iterate_static
from dagc.ir.core import Node, output_name
from dagc.ir.location import SourceSpan
from dagc.ir.payload import Exit, Region
from dagc.ir.regions import TRIPS_ATTR
from dagc.ir.types import Const, Map, Operand, Ref, Seq


class Loops(Component):
    """Unrolls loops or makes `loop` regions of them."""

    def _iter_values(self, expr: ast.expr, scope: Scope, info: ModuleInfo, what: str) -> list[Value] | None:
        """Items of a list/tuple/dict whose length is known at compile time even though its items are
        task results (`for m in models`, `enumerate(models)`, `zip(models, CONFIGS)`), else None."""
        if isinstance(expr, ast.Name) and is_task_result(scope.env.get(expr.id)):
            value = scope.env[expr.id]
            if isinstance(value, tuple):
                return list(value)
            operand = value.operand
            if isinstance(operand, Seq):
                return [value_of(i) for i in operand.items]
            if isinstance(operand, Map):
                return [value_of(k) for k, _ in operand.items]
            return None
        if (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and not expr.args
                and expr.func.attr in ("items", "keys", "values") and isinstance(expr.func.value, ast.Name)):
            value = scope.env.get(expr.func.value.id)
            if isinstance(value, Dyn) and isinstance(value.operand, Map):
                pairs = [(value_of(k), value_of(v)) for k, v in value.operand.items]
                if expr.func.attr == "items":
                    return [tuple(p) for p in pairs]
                return [p[0] if expr.func.attr == "keys" else p[1] for p in pairs]
            return None
        if (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in ("enumerate", "zip")
                and expr.func.id not in scope.env and not expr.keywords
                and self.cx.project.lookup(info, expr.func.id) is None and expr.args
                and not any(isinstance(a, ast.Starred) for a in expr.args)
                and self.cx.glue.needs_glue(expr, scope, info)):
            if expr.func.id == "enumerate":
                items = self.loop_items(expr.args[0], scope, info, what)
                start = self.cx.exprs.static_value(expr.args[1], scope, info) if len(expr.args) > 1 else 0
                if len(expr.args) > 2 or not isinstance(start, int):
                    return None
                return [(Static(start + k), v) for k, v in enumerate(items)]
            columns = [self.loop_items(a, scope, info, what) for a in expr.args]
            return [tuple(row) for row in zip(*columns)]
        return None

    def loop_items(self, expr: ast.expr, scope: Scope, info: ModuleInfo, what: str) -> list[Value]:
        found = self._iter_values(expr, scope, info, what)
        if found is not None:
            return found
        return [Static(v) for v in self._static_items(expr, scope, info, what)]

    def _static_items(self, expr: ast.expr, scope: Scope, info: ModuleInfo, what: str) -> list[Any]:
        if self.cx.glue.needs_glue(expr, scope, info):
            self.cx.sink.error("DAGC116", f"{what} iterates over a task result, which is not known at compile time",
                               info.source.span(expr),
                               hint="iterate over a range, a literal list/dict, a module constant or a pipeline "
                               "parameter (or a list of task results built in the pipeline); a `for` loop, a list or a "
                               "dict comprehension over a task result runs once per item (a map)")
            raise ExtractError
        value = self.cx.exprs.static_value(expr, scope, info)
        if isinstance(value, StaticIterator):
            self.use_up(value, expr, info, what)
        try:
            return iterate_static(expr, value)
        except NotStatic as exc:
            self.cx.sink.error("DAGC116", f"{what} cannot iterate over this value at compile time: {exc.reason}",
                               info.source.span(expr),
                               hint="iterate over a range, a literal list/tuple/dict, enumerate() or zip() of them")
            raise ExtractError from None

    def use_up(self, iterator: StaticIterator, expr: ast.expr, info: ModuleInfo, what: str) -> None:
        """An iterator bound to a name gives its items to the first loop (or task) that takes it only, as in
        plain Python."""
        if id(iterator) in self.cx.used_iterators:
            self.cx.sink.error(
                "DAGC116", f"{what} iterates over `{ast.unparse(expr)}`, an iterator an earlier loop (or task) has "
                "used up: plain Python's would get no item", info.source.span(expr),
                hint=f"build a list once (`{ast.unparse(expr)} = list(...)`) to loop over its items more than once")
            raise ExtractError
        self.cx.used_iterators[id(iterator)] = iterator

    def for_loop(self, stmt: ast.For, scope: Scope, info: ModuleInfo) -> None:
        span = info.source.span(stmt)
        if stmt.orelse:
            self.cx.sink.error("DAGC117", "`for ... else` is not supported in a pipeline", span,
                               hint="use a flag, or restructure the loop")
            raise ExtractError
        iter_expr, trips = self._trips_hint(stmt.iter, scope, info)
        spec, iter_expr = self.cx.maps.map_spec(iter_expr, scope, info)
        if spec is not None:  # over a run-time list: a `map` region (maps.py)
            self.cx.maps.map_region(stmt, spec, scope, info)
            return
        counted = self._counted(iter_expr, scope, info)
        if counted is not None:
            self._count_loop(stmt, *counted, scope, info)
            return
        items = self.loop_items(iter_expr, scope, info, "this `for` loop")
        stmt = self._without_dynamic_continue(stmt, scope, info)
        assigned = assigned_names(stmt.body)
        exits = [(node, tests) for node, tests in loop_level_breaks(stmt.body)  # constant-false exits fold away
                 if not any(not (names_in(t) & assigned) and self.cx.regions.known_false(t, scope, info) for t in tests)]
        if exits and self._exits_are_dynamic(exits, stmt, scope, info):
            self._loop_region(stmt, items, scope, info, trips)
            return
        self._unroll(stmt, stmt.target, items, stmt.body, scope, info)

    def _without_dynamic_continue(self, stmt: ast.For, scope: Scope, info: ModuleInfo) -> ast.For:
        """`stmt` itself, or, when a `continue` in it depends on a task result, the same loop with the
        rest of each trip under the branch that does not continue (`lower_continues`)."""
        exits = loop_level_breaks(stmt.body)
        # lowered when a `continue` depends on a task result, or when the loop is a region anyway (a
        # `break` on a task result): a region's body has no `continue` of its own
        if not any(isinstance(node, ast.Continue) for node, _ in exits) or not self._exits_are_dynamic(
                exits, stmt, scope, info):
            return stmt
        body, _ = lower_continues(stmt.body)
        return ast.copy_location(ast.For(stmt.target, stmt.iter, body or [ast.copy_location(ast.Pass(), stmt)],
                                         stmt.orelse, stmt.type_comment), stmt)

    def _trips_hint(self, expr: ast.expr, scope: Scope, info: ModuleInfo) -> tuple[ast.expr, int | None]:
        """`dagc.trips(ITEMS, expected=N)` → (ITEMS, N); any other loop iterable → (it, None).
        The hint only plans a loop region; an unrolled loop runs every item anyway."""
        if not isinstance(expr, ast.Call):
            return expr, None
        func = expr.func
        if isinstance(func, ast.Name) and func.id not in scope.env:
            named = info.dagc_names.get(func.id) == "trips"
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            named = (func.attr == "trips" and func.value.id in info.dagc_modules
                     and func.value.id not in scope.env)
        else:
            named = False
        if not named:
            return expr, None
        expected: Any = None
        if (len(expr.args) == 1 and not isinstance(expr.args[0], ast.Starred) and len(expr.keywords) == 1
                and expr.keywords[0].arg == "expected"):
            try:
                expected = self.cx.exprs.static_value(expr.keywords[0].value, scope, info)
            except ExtractError:
                expected = None
        if not isinstance(expected, int) or isinstance(expected, bool) or expected < 0:
            self.cx.sink.error("DAGC135", "dagc.trips takes the loop's items and `expected=`, a whole number of "
                               "trips known at compile time", info.source.span(expr),
                               hint="write `for epoch in dagc.trips(range(40), expected=12):`")
            raise ExtractError
        return expr.args[0], expected

    def _exits_are_dynamic(self, exits: list[tuple[ast.stmt, list[ast.expr]]], stmt: ast.For,
                           scope: Scope, info: ModuleInfo) -> bool:
        """A `break` depends on run-time values when a test above it reads a task result or a name the
        loop body assigns (other than the loop variable)."""
        assigned = self._bound_at_run_time(stmt.body, scope) - target_names(stmt.target)
        for _, tests in exits:
            for test in tests:
                for node in ast.walk(test):
                    if isinstance(node, ast.Name) and (
                        node.id in assigned or is_task_result(scope.env.get(node.id))
                    ):
                        return True
                    if isinstance(node, ast.Call) and self.cx.glue.is_task_callee(node.func, scope, info):
                        return True
        return False

    def _bound_at_run_time(self, body: list[ast.stmt], scope: Scope) -> set[str]:
        """Names `body` may bind to a value known only at run time. A name the body only ever sets from
        constants and other compile-time names (`it += 1`, `lr = LR * 0.5`) stays known at compile time,
        so an exit tested on it (nanoGPT's `if iter_num > max_iters: break`) is decided when unrolling."""
        sources: dict[str, list[ast.expr | None]] = {}
        for node in ast.walk(ast.Module(body=body, type_ignores=[])):
            if isinstance(node, ast.Assign):
                simple = len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                for target in node.targets:
                    for name in target_names(target):
                        sources.setdefault(name, []).append(node.value if simple else None)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name):
                sources.setdefault(node.target.id, []).append(node.value)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                for name in target_names(node.target):
                    sources.setdefault(name, []).append(None)
            elif isinstance(node, ast.NamedExpr):
                sources.setdefault(node.target.id, []).append(None)
        for name in assigned_names(body) - set(sources):  # any other binding: not followed
            sources[name] = [None]

        def run_time(expr: ast.expr | None, known: set[str]) -> bool:
            if expr is None:
                return True
            for node in ast.walk(expr):
                if isinstance(node, (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.Lambda)):
                    return True
                if isinstance(node, ast.Name) and (node.id in known or is_task_result(scope.env.get(node.id))):
                    return True
            return False

        dynamic: set[str] = set()
        changed = True
        while changed:
            changed = False
            for name, values in sources.items():
                if name not in dynamic and any(run_time(v, dynamic) for v in values):
                    dynamic.add(name)
                    changed = True
        return dynamic

    def _counted(self, expr: ast.expr, scope: Scope, info: ModuleInfo) -> tuple[Any, Any] | None:
        """`itertools.count(START, STEP)` (or `count(...)` imported from itertools) with compile-time
        arguments: (START, STEP); None for any other iterable."""
        if not isinstance(expr, ast.Call) or expr.keywords and any(k.arg not in ("start", "step")
                                                                     for k in expr.keywords):
            return None
        func = expr.func
        from dagc.frontend.modules import ImportedModule, ImportedName

        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.attr == "count" \
                and func.value.id not in scope.env:
            symbol = self.cx.project.lookup(info, func.value.id)
            if not (isinstance(symbol, ImportedModule) and symbol.module == "itertools"):
                return None
        elif isinstance(func, ast.Name) and func.id not in scope.env:
            symbol = self.cx.project.lookup(info, func.id)
            if not (isinstance(symbol, ImportedName) and symbol.module == "itertools" and symbol.name == "count"):
                return None
        else:
            return None
        values = [self.cx.exprs.static_value(a, scope, info) for a in expr.args]
        named = {k.arg: self.cx.exprs.static_value(k.value, scope, info) for k in expr.keywords}
        start = values[0] if values else named.get("start", 0)
        step = values[1] if len(values) > 1 else named.get("step", 1)
        if len(values) > 2 or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (start, step)):
            return None
        return start, step

    def _count_loop(self, stmt: ast.For, start: Any, step: Any, scope: Scope, info: ModuleInfo) -> None:
        """`for i in itertools.count(1): ...; if <compile-time test>: break`, unrolled until the break."""
        exits = loop_level_breaks(stmt.body)
        if exits and self._exits_are_dynamic(exits, stmt, scope, info):
            bounded = self._count_budget(stmt, start, step, scope, info)
            if bounded is not None:  # `if i_episode >= MAX_EPISODES: break` beside a run-time exit: a bounded loop
                self.for_loop(bounded, scope, info)
                return
        if not exits or self._exits_are_dynamic(exits, stmt, scope, info):
            self.cx.sink.error(
                "DAGC117", "a loop over `itertools.count()` needs an exit dagc can decide at compile time"
                if not exits else "a loop over `itertools.count()` that exits on a task result has no bound",
                info.source.span(stmt.iter),
                hint=f"bound it: `for {ast.unparse(stmt.target)} in range({start!r}, MAX + {start!r}):` "
                "(and `if <condition>: break` inside), or `while i < MAX and not <condition>:`")
            raise ExtractError
        span = info.source.span(stmt)

        def items():  # type: ignore[no-untyped-def]
            k = 0
            while True:
                if k >= MAX_WHILE:
                    self.cx.sink.error("DAGC119", f"this loop did not reach its `break` within {MAX_WHILE} "
                                       "iterations at compile time", span,
                                       hint=f"bound it with `range({start!r}, MAX)`")
                    raise ExtractError
                yield Static(start + k * step)
                k += 1

        self._unroll_items(stmt.target, items(), stmt.body, scope, info, span)  # type: ignore[arg-type]

    def _count_budget(self, stmt: ast.For, start: Any, step: Any, scope: Scope, info: ModuleInfo) -> ast.For | None:
        """`for i in count(START): ...` whose body ends with `if <test of i and constants>: break`: the same loop
        over `range(START, LAST + STEP, STEP)` without that test, LAST the first `i` it stops at (the last trip
        runs the whole body, then the loop ends, as the `break` ended it); None when there is no such budget
        within MAX_WHILE trips."""
        if not isinstance(stmt.target, ast.Name) or not isinstance(start, int) or not isinstance(step, int) \
                or step <= 0:
            return None
        var = stmt.target.id
        assigned = self._bound_at_run_time(stmt.body, scope) | assigned_names(stmt.body)
        for test_stmt in stmt.body[-1:]:
            if not (isinstance(test_stmt, ast.If) and not test_stmt.orelse and len(test_stmt.body) == 1
                    and isinstance(test_stmt.body[0], ast.Break)):
                continue
            names = names_in(test_stmt.test)
            if var not in names or names & (assigned - {var}) or self.cx.glue.needs_glue(test_stmt.test, scope, info):
                continue
            saved = scope.env.get(var)
            try:
                for k in range(MAX_WHILE):
                    scope.env[var] = Static(start + k * step)
                    try:
                        stops = bool(self.cx.exprs.static_value(test_stmt.test, scope, info))
                    except ExtractError:
                        return None
                    if stops:
                        last = start + k * step
                        iter_ = ast.Call(ast.Name("range", ast.Load()),
                                         [ast.Constant(start), ast.Constant(last + step), ast.Constant(step)], [])
                        for node in (iter_, iter_.func, *iter_.args):
                            ast.copy_location(node, stmt.iter)
                        return ast.copy_location(ast.For(stmt.target, iter_, stmt.body[:-1], [], None), stmt)
            finally:
                if saved is None:
                    scope.env.pop(var, None)
                else:
                    scope.env[var] = saved
        return None

    def _unroll(self, stmt: ast.stmt, target: ast.expr, items: list[Value], body: list[ast.stmt],
                scope: Scope, info: ModuleInfo) -> None:
        span = info.source.span(stmt)
        if self.cx.factor * len(items) > MAX_UNROLL:
            self.cx.budget = -1
            self.cx.spend(span)
            raise ExtractError
        self.cx.factor *= max(len(items), 1)
        try:
            self._unroll_items(target, items, body, scope, info, span)
        finally:
            self.cx.factor //= max(len(items), 1)

    def _unroll_items(self, target: ast.expr, items: list[Value], body: list[ast.stmt], scope: Scope,
                      info: ModuleInfo, span: SourceSpan) -> None:
        outer_suffix = scope.suffix
        scope.unrolling += 1
        saved_loop, scope.loop = scope.loop, None
        try:
            for k, item in enumerate(items):
                if not self.cx.spend(span):
                    break
                errors = len(self.cx.sink.diagnostics)
                scope.suffix = f"{outer_suffix}[{k}]"
                self.cx.core.assign(target, item, scope, info)
                try:
                    self.cx.core.run_block(body, scope, info)
                except ContinueSignal:
                    pass
                except BreakSignal:
                    break
                if len(self.cx.sink.diagnostics) > errors and self.cx.sink.has_errors:
                    break  # report a mistake once, not once per iteration
        finally:
            scope.suffix = outer_suffix
            scope.unrolling -= 1
            scope.loop = saved_loop

    def while_loop(self, stmt: ast.While, scope: Scope, info: ModuleInfo) -> None:
        span = info.source.span(stmt)
        if stmt.orelse:
            self.cx.sink.error("DAGC117", "`while ... else` is not supported in a pipeline", span,
                               hint="use a flag, or restructure the loop")
            raise ExtractError
        dynamic_exit = bool(loop_level_breaks(stmt.body)) and self._exits_are_dynamic(
            loop_level_breaks(stmt.body), ast.For(ast.Name("_", ast.Store()), ast.List([], ast.Load()),
                                                  stmt.body, []), scope, info)
        if dynamic_exit:
            # one early exit per loop region: the `while` test is that exit
            self.cx.sink.error("DAGC117", "a `while` loop can exit early on a task result only through its test",
                               info.source.span(stmt),
                               hint="move the condition into the test: `while i < MAX and not <condition>: ...; "
                               "i += 1`, or write `for i in range(MAX): ...; if <condition>: break`")
            raise ExtractError
        if self.cx.glue.needs_glue(stmt.test, scope, info):
            bounded = self._bounded_while(stmt, scope, info)
            if bounded is not None:
                self.for_loop(bounded, scope, info)
                return
        outer_suffix = scope.suffix
        scope.unrolling += 1
        saved_loop, scope.loop = scope.loop, None
        try:
            k = 0
            while True:
                if self.cx.glue.needs_glue(stmt.test, scope, info):
                    self.cx.sink.error(
                        "DAGC117", "`while` on a task result has no bound on its number of iterations",
                        info.source.span(stmt.test),
                        hint="bound it with a counter: `while step < MAX_STEPS and <condition>: ...; step += 1`, "
                        "or write `for step in range(MAX_STEPS): ...; if <condition>: break`")
                    raise ExtractError
                if not self.cx.exprs.static_value(stmt.test, scope, info):
                    break
                if k >= MAX_WHILE:
                    self.cx.sink.error("DAGC119", f"this `while` loop did not end within {MAX_WHILE} iterations "
                                       "at compile time", span, hint="bound it with `for _ in range(N)`")
                    raise ExtractError
                if not self.cx.spend(span):
                    break
                errors = len(self.cx.sink.diagnostics)
                scope.suffix = f"{outer_suffix}[{k}]"
                k += 1
                try:
                    self.cx.core.run_block(stmt.body, scope, info)
                except ContinueSignal:
                    pass
                except BreakSignal:
                    break
                if len(self.cx.sink.diagnostics) > errors and self.cx.sink.has_errors:
                    break
        finally:
            scope.suffix = outer_suffix
            scope.unrolling -= 1
            scope.loop = saved_loop

    def _bounded_while(self, stmt: ast.While, scope: Scope, info: ModuleInfo) -> ast.For | None:
        """A `while` whose test bounds a counter, `while i < N and <condition>:` (or `i <= N`), and whose
        body ends with `i += 1`, rewritten as the equivalent bounded `for`:

            for i in range(i0, last + 2):       # one extra trip re-checks the test, as `while` does
                if not (<the while test>): break
                <body without the increment>

        so that `i` ends where the `while` would leave it. None when the loop has no such counter."""
        tests = stmt.test.values if isinstance(stmt.test, ast.BoolOp) and isinstance(stmt.test.op, ast.And) \
            else [stmt.test]
        body = stmt.body
        last_stmt = body[-1] if body else None
        if not (isinstance(last_stmt, ast.AugAssign) and isinstance(last_stmt.target, ast.Name)
                and isinstance(last_stmt.op, ast.Add) and isinstance(last_stmt.value, ast.Constant)
                and last_stmt.value.value == 1 and not isinstance(last_stmt.value.value, bool)):
            return None
        counter = last_stmt.target.id
        if counter in assigned_names(body[:-1]):
            return None
        start = scope.env.get(counter)
        if not (isinstance(start, Static) and isinstance(start.value, int) and not isinstance(start.value, bool)):
            return None
        last: int | None = None
        for test in tests:
            if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name)
                    and test.left.id == counter and isinstance(test.ops[0], (ast.Lt, ast.LtE))
                    and not self.cx.glue.needs_glue(test.comparators[0], scope, info)):
                bound = self.cx.exprs.static_value(test.comparators[0], scope, info)
                if isinstance(bound, int) and not isinstance(bound, bool):
                    candidate = bound - 1 if isinstance(test.ops[0], ast.Lt) else bound
                    last = candidate if last is None else min(last, candidate)
        if last is None:
            return None
        stop = max(last + 2, start.value)
        check = ast.If(ast.UnaryOp(ast.Not(), stmt.test), [ast.Break()], [])
        loop = ast.For(
            target=ast.Name(counter, ast.Store()),
            iter=ast.Call(ast.Name("range", ast.Load()), [ast.Constant(start.value), ast.Constant(stop)], []),
            body=[check, *body[:-1]],
            orelse=[],
        )
        for node in (check, check.test, check.body[0], loop.iter, *loop.iter.args, loop.iter.func):
            ast.copy_location(node, stmt.test)
        ast.copy_location(loop.target, last_stmt.target)
        ast.copy_location(loop, stmt)
        return loop

    def _loop_region(self, stmt: ast.For, items: list[Value], scope: Scope, info: ModuleInfo,
                     trips: int | None = None) -> None:
        """`for x in STATIC: ...; if <task result>: break` → one `loop` node (see docs/ir.md)."""
        span = info.source.span(stmt)
        if not isinstance(stmt.target, ast.Name):
            self.cx.sink.error("DAGC117", "a loop that exits early on a task result needs a single loop variable",
                               info.source.span(stmt.target),
                               hint="write `for i in ...:` and index inside the body")
            raise ExtractError
        for node, _tests in loop_level_breaks(stmt.body):
            if isinstance(node, ast.Continue):
                self.cx.sink.error("DAGC117", "`continue` on a task result is not supported in a pipeline loop",
                                   info.source.span(node),
                                   hint="put the rest of the loop body under `if not <condition>:` instead")
                raise ExtractError
        self.cx.check_depth(span)
        try:
            iter_operand = Seq("list", tuple(to_operand(v) for v in items))
        except TypeError:
            self.cx.sink.error("DAGC116", "the items of a loop that exits early must be literals",
                               info.source.span(stmt.iter))
            raise ExtractError from None
        name = self.cx.node_name(scope.prefix + "loop" + scope.suffix)
        index_var = stmt.target.id
        stores = ordered_stores(stmt.body)
        grown = [n for n in grown_names(stmt.body) if n not in stores and self.cx.container_kind(scope.env.get(n))]
        carried = [n for n in [*stores, *grown] if n != index_var]
        carried = [index_var, *carried]
        kinds = {var: self.cx.container_kind(scope.env.get(var)) for var in carried}
        inits: list[Operand] = []
        block_args: list[str] = []
        for var in carried:
            current = scope.env.get(var)
            if var == index_var or current is None or current is POISON:
                inits.append(Const(None))
            else:
                try:
                    inits.append(to_operand(current))
                except TypeError:
                    self.cx.sink.error("DAGC118", f"`{var}` is reassigned in a loop but holds something that is not "
                                       "a value", span, hint="bind loop variables to task results or literals")
                    raise ExtractError from None
            arg = self.cx.reserve(f"{name}@{var}")
            block_args.append(arg)
            if kinds[var] is not None:
                self.cx.runtime_kinds[arg] = kinds[var]  # type: ignore[assignment]
        saved_env = dict(scope.env)
        for var, arg in zip(carried, block_args):
            scope.env[var] = Dyn(Ref(arg))
        context = LoopContext(name, carried)
        saved = (scope.prefix, scope.suffix, scope.loop, scope.unrolling)
        scope.prefix, scope.suffix, scope.loop, scope.unrolling = name + ".", "", context, 0
        self.cx.blocks.append(context.block)
        errors = len(self.cx.sink.diagnostics)
        try:
            self.cx.core.run_block(stmt.body, scope, info)
            context.kinds_at_exit.append({var: self.cx.container_kind(scope.env.get(var)) for var in carried})
            yields = [self.yield_operand(scope.env.get(var), var, span) for var in carried]
        finally:
            self.cx.blocks.pop()
            scope.prefix, scope.suffix, scope.loop, scope.unrolling = saved
        if len(self.cx.sink.diagnostics) > errors and self.cx.sink.has_errors:
            scope.env.clear()
            scope.env.update(saved_env)
            for var in carried:
                scope.env[var] = POISON
            raise ExtractError
        body = context.block
        exit_ = None if context.break_at is None else Exit(context.break_at, context.break_cond,
                                                             tuple(context.break_yield or []))
        payload = Region(yields={"body": tuple(yields)}, args={"body": tuple(block_args)}, iter=iter_operand,
                         exit=exit_)
        attrs: dict[str, Any] = {}
        if trips is not None:
            attrs[TRIPS_ATTR] = trips  # planning only (dagc.ir.regions.expected_trips)
        extra = [iter_operand, *yields, *(context.break_yield or [])]
        if context.break_cond is not None:
            extra.append(context.break_cond)
        captures, deps = self.cx.regions.captures(body, set(block_args), extra)
        outputs = tuple(output_name(name, i, len(carried)) for i in range(len(carried)))
        node = Node(name, "loop", "for", (*inits, *[Ref(c) for c in captures]), (), outputs,
                    (None,) * len(outputs), self.cx.regions.region_options(body), span, tuple(deps), attrs,
                    {"body": body}, payload)
        self.cx.regions.close_region(node, body)
        scope.env.clear()
        scope.env.update(saved_env)
        for var, out in zip(carried, outputs):
            scope.env[var] = Dyn(Ref(out))
            exits = {at_exit[var] for at_exit in context.kinds_at_exit}
            if len(exits) == 1 and kinds[var] in exits:  # the same kind of container however the loop ends
                self.cx.runtime_kinds[out] = kinds[var]  # type: ignore[assignment]

    def yield_operand(self, value: Value, var: str, span: SourceSpan) -> Operand:
        if value is None:
            return Const(None)
        if value is POISON:
            raise ExtractError
        try:
            return to_operand(value)
        except TypeError:
            self.cx.sink.error("DAGC118", f"`{var}` is bound to something that is not a value inside a loop or "
                               "branch on a task result", span,
                               hint="bind names in loops and branches to task results or literals only")
            raise ExtractError from None
