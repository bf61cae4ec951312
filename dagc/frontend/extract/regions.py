"""`cond` and `try` regions: an `if` on a run-time value, `try`/`finally`, and what a region's bodies capture
from outside."""

from __future__ import annotations

import ast
from typing import Any

from dagc.frontend.exits import finally_reads_of_body, rename_refs
from dagc.frontend.extract.context import Component
from dagc.frontend.extract.queries import (
    aggregate_effects,
    loop_level_breaks,
    region_defined,
    region_node_names,
)
from dagc.frontend.extract.values import (
    POISON,
    UNSET,
    Dyn,
    ExtractError,
    RuntimeUse,
    Scope,
    Static,
    Value,
    is_runtime,
    ref_name,
    same,
    to_operand,
)
from dagc.frontend.modules import ModuleInfo
from dagc.frontend.static import NotStatic, eval_static
from dagc.ir.core import Node, output_name
from dagc.ir.location import SourceSpan
from dagc.ir.payload import Region
from dagc.ir.types import Const, Operand, Ref, TaskOptions, iter_refs


class Regions(Component):
    """Builds `cond` and `try` region nodes, and closes regions of every kind."""

    def if_statement(self, stmt: ast.If, scope: Scope, info: ModuleInfo) -> None:
        if self.known_false(stmt.test, scope, info):  # `if DEBUG: break` with DEBUG = False: folded first
            self.cx.core.run_block(stmt.orelse, scope, info)
            return
        # `if <cond>: break` directly in the body of a region loop
        if (scope.loop is not None and not scope.unrolling and len(stmt.body) == 1
                and isinstance(stmt.body[0], ast.Break) and not stmt.orelse
                and self.cx.blocks and self.cx.blocks[-1] is scope.loop.block):
            self._loop_break(stmt, scope, info)
            return
        # `if <cond>: <statements>; break`: the statements as a branch, then the exit, on one test
        if (scope.loop is not None and not scope.unrolling and len(stmt.body) > 1
                and isinstance(stmt.body[-1], ast.Break) and not stmt.orelse
                and not loop_level_breaks(stmt.body[:-1])
                and self.cx.blocks and self.cx.blocks[-1] is scope.loop.block and self.cx.glue.needs_glue(stmt.test, scope, info)):
            self._branch_then_break(stmt, scope, info)
            return
        if not self.cx.glue.needs_glue(stmt.test, scope, info):
            taken = stmt.body if self.cx.exprs.static_value(stmt.test, scope, info) else stmt.orelse
            self.cx.core.run_block(taken, scope, info)
            return
        self._cond_region(stmt, scope, info)

    def known_false(self, test: ast.expr, scope: Scope, info: ModuleInfo) -> bool:
        """True when `test` is a compile-time value that is false; never reports anything. `and`
        short-circuits as in Python: `DEBUG and converged(m)` is false when DEBUG is."""
        try:
            return not eval_static(test, self.cx.exprs.static_lookup(scope, info))
        except (NotStatic, RuntimeUse, RecursionError):
            return False

    def _branch_then_break(self, stmt: ast.If, scope: Scope, info: ModuleInfo) -> None:
        held = "\0exit"  # a name no user code can bind: the test, evaluated once
        scope.env[held] = self.cx.exprs.eval(stmt.test, scope, info)
        try:
            test = ast.copy_location(ast.Name(held, ast.Load()), stmt.test)
            branch = ast.copy_location(ast.If(test, stmt.body[:-1], []), stmt)
            self.if_statement(branch, scope, info)
            self._loop_break(ast.copy_location(ast.If(test, [stmt.body[-1]], []), stmt), scope, info)
        finally:
            scope.env.pop(held, None)

    def _loop_break(self, stmt: ast.If, scope: Scope, info: ModuleInfo) -> None:
        loop = scope.loop
        assert loop is not None
        if loop.break_at is not None:
            self.cx.sink.error("DAGC117", "a pipeline loop may exit early at one place only",
                               info.source.span(stmt), hint="combine the conditions: `if a or b: break`")
            raise ExtractError
        value = self.cx.exprs.eval(stmt.test, scope, info)
        cond = to_operand(value) if not isinstance(value, Static) else Const(bool(value.value))
        loop.break_at = len(loop.block)
        loop.break_cond = cond
        loop.break_yield = [self.cx.loops.yield_operand(scope.env.get(var), var, info.source.span(stmt))
                            for var in loop.carried]
        loop.kinds_at_exit.append({var: self.cx.container_kind(scope.env.get(var)) for var in loop.carried})

    def _cond_region(self, stmt: ast.If, scope: Scope, info: ModuleInfo) -> None:
        span = info.source.span(stmt)
        for node, _tests in loop_level_breaks(stmt.body + stmt.orelse):
            self.cx.sink.error("DAGC117", "`break`/`continue` inside a branch on a task result is not supported",
                               info.source.span(node),
                               hint="exit a loop with `if <condition>: break` directly in the loop body")
            raise ExtractError
        self.cx.check_depth(span)
        test = self.cx.exprs.eval(stmt.test, scope, info)
        pred = to_operand(test)
        name = self.cx.node_name(scope.prefix + "cond" + scope.suffix)
        before = dict(scope.env)
        errors = len(self.cx.sink.diagnostics)
        branches = self._run_blocks(name, (("then", stmt.body), ("else", stmt.orelse)), scope, info)
        scope.env.clear()
        scope.env.update(before)
        (then_block, then_env), (else_block, else_env) = branches
        changed: list[str] = []
        for env in (then_env, else_env):
            for var, value in env.items():
                if (var not in before or before[var] != value) and var not in changed:
                    changed.append(var)
        merged: list[str] = []
        then_yield: list[Operand] = []
        else_yield: list[Operand] = []
        failed = len(self.cx.sink.diagnostics) > errors and self.cx.sink.has_errors
        for var in changed:
            a, b = then_env.get(var), else_env.get(var)
            if a is POISON or b is POISON:
                scope.env[var] = POISON
                continue
            if isinstance(a, Static) and isinstance(b, Static) and a == b:
                scope.env[var] = a
                continue
            try:
                then_yield.append(self.cx.loops.yield_operand(a, var, span))
                else_yield.append(self.cx.loops.yield_operand(b, var, span))
            except ExtractError:
                scope.env[var] = POISON
                failed = True
                continue
            merged.append(var)
        if failed:
            for var in merged:
                scope.env[var] = POISON
            raise ExtractError
        payload = Region(yields={"then": tuple(then_yield), "else": tuple(else_yield)})
        captures, deps = self.captures(then_block + else_block, set(), then_yield + else_yield)
        outputs = tuple(output_name(name, i, len(merged)) for i in range(len(merged))) or (name,)
        types = tuple(same(self.cx.types.get(ref_name(a), (None,))[0], self.cx.types.get(ref_name(b), (None,))[0])
                      for a, b in zip(then_yield, else_yield)) or (None,)
        captured = [c for c in captures if not (isinstance(pred, Ref) and pred.name == c)]
        node = Node(name, "cond", "if", (pred, *[Ref(c) for c in captured]), (), outputs, types,
                    self.region_options(then_block + else_block), span, tuple(deps), {},
                    {"then": then_block, "else": else_block}, payload)
        self.close_region(node, then_block + else_block)
        for var, out, t in zip(merged, outputs, types):
            scope.env[var] = Dyn(Ref(out))
            if t is not None:
                self.cx.types[out] = (t, None)
            kind = self.cx.container_kind(then_env.get(var))
            if kind is not None and kind == self.cx.container_kind(else_env.get(var)):
                self.cx.runtime_kinds[out] = kind  # a list (or dict) whichever branch ran

    def _interruptible(self, stmt: ast.Try, scope: Scope, info: ModuleInfo) -> None:
        """`try: <training> except KeyboardInterrupt: print("Exiting from training early")`: the body is the
        pipeline; the handler runs only when someone presses Ctrl-C, which stops a dagc run instead (one
        kept in a run directory goes on with --resume). Said once, at the handler."""
        handler = stmt.handlers[0]
        self.cx.sink.warning(
            "DAGC183", "`except KeyboardInterrupt` does not run in a dagc program: Ctrl-C stops the run instead "
            "of running this handler and going on", info.source.span(handler),
            hint="a run kept in a run directory (`--run-dir DIR`; Ray and torch programs keep one by default) and "
            "stopped goes on with `--resume DIR`, rerunning only what did not finish; to stop training early on "
            "purpose, give the loop an exit (`if converged(m): break`)")
        if stmt.finalbody:
            self.try_statement(ast.copy_location(ast.Try(stmt.body, [], [], stmt.finalbody), stmt), scope, info)
        else:
            self.cx.core.run_block(stmt.body, scope, info)

    def try_statement(self, stmt: ast.Try, scope: Scope, info: ModuleInfo) -> None:
        """`try: BODY finally: CLEANUP` → one `try` region (docs/ir.md): CLEANUP runs whether BODY
        succeeded or failed, then BODY's failure goes on."""
        span = info.source.span(stmt)
        if stmt.handlers and not stmt.orelse and all(_catches_interrupt_only(h) for h in stmt.handlers):
            self._interruptible(stmt, scope, info)
            return
        if stmt.handlers:
            self.cx.sink.error("DAGC180", "`except` is not supported in a pipeline: only `try: ... finally: ...`",
                               info.source.span(stmt.handlers[0]),
                               hint="catch the error inside a task (it can return a fallback value), retry it with "
                               "the task option retries=N, or use `finally:` for cleanup that must run")
            raise ExtractError
        for exit_stmt, _tests in loop_level_breaks(stmt.body + stmt.finalbody):
            self.cx.sink.error("DAGC182", "`break`/`continue` inside `try`/`finally` is not supported in a pipeline",
                               info.source.span(exit_stmt),
                               hint="leave the loop after the `try` statement, or put the loop inside the `try`")
            raise ExtractError
        failed = False
        for read in finally_reads_of_body(stmt.body, stmt.finalbody):
            self.cx.sink.error("DAGC181", f"`finally` reads `{read.id}`, which the `try` body assigns: if the body "
                               "fails it may be unbound or hold its old value", info.source.span(read),
                               hint="in `finally`, use only values defined before the `try`; read the body's "
                               "results after the `try` statement")
            failed = True
        if failed:
            raise ExtractError
        self.cx.check_depth(span)
        name = self.cx.node_name(scope.prefix + "try" + scope.suffix)
        before = dict(scope.env)
        count = len(self.cx.sink.diagnostics)
        blocks, envs = self._run_try_blocks(stmt, name, scope, info)
        scope.env.clear()
        scope.env.update(before)
        errors = len(self.cx.sink.diagnostics) > count and self.cx.sink.has_errors
        # outputs: the values defined inside that the body's names hold (kept on success), then those
        # of the finally block's names (it runs last). A name keeps its structure (a list of results
        # stays a list, so `xs.append(...)` goes on working after the `try`); only the values made
        # inside become outputs.
        yields: list[list[Operand]] = [[], []]
        index: dict[str, int] = {}
        merged: list[tuple[str, Operand]] = []
        for k, env in enumerate(envs):
            inner = {v for n in blocks[k] for v in (*n.outputs, *region_defined(n))}
            for var, value in env.items():
                if k == 0 and var in envs[1]:
                    continue  # assigned in both: the finally block's value is the one that stays
                if value is POISON:
                    scope.env[var] = POISON
                    continue
                if not is_runtime(value):
                    scope.env[var] = value  # a compile-time value: the same after a successful body
                    continue
                try:
                    operand = self.cx.loops.yield_operand(value, var, span)
                except ExtractError:
                    scope.env[var] = POISON
                    errors = True
                    continue
                made = [r for r in iter_refs(operand) if r in inner]
                if not made:
                    scope.env[var] = value  # it holds values from before the `try` only
                    continue
                for ref in made:
                    if ref not in index:
                        index[ref] = sum(len(y) for y in yields)
                        yields[k].append(Ref(ref))
                merged.append((var, operand))
        if errors:
            for var, _ in merged:
                scope.env[var] = POISON
            raise ExtractError
        node = self._try_node(name, span, blocks, yields)
        self.close_region(node, blocks[0] + blocks[1])
        outside = {ref: node.outputs[k] for ref, k in index.items()}
        for out, type_ in zip(node.outputs, node.types):
            if type_ is not None:
                self.cx.types[out] = (type_, None)
        for var, operand in merged:
            scope.env[var] = Dyn(rename_refs(operand, outside))

    def _run_try_blocks(self, stmt: ast.Try, name: str, scope: Scope, info: ModuleInfo,
                        ) -> tuple[list[list[Node]], list[dict[str, Value]]]:
        """The nodes of the body and of the finally block, and the names each changes. Both start from
        the names bound before the `try` (the finally block may run after any failure)."""
        before = dict(scope.env)
        ran = self._run_blocks(name, (("body", stmt.body), ("finally", stmt.finalbody)), scope, info)
        return ([block for block, _ in ran],
                [{k: v for k, v in env.items() if before.get(k, UNSET) is not v} for _, env in ran])

    def _run_blocks(self, name: str, parts: tuple[tuple[str, list[ast.stmt]], ...], scope: Scope,
                    info: ModuleInfo) -> list[tuple[list[Node], dict[str, Value]]]:
        """Each labelled block of a region (a cond's branches, a try's body and finally block), run
        from the names bound before it into nodes named `NAME.LABEL.*`: its nodes and the names bound
        after it. The scope's prefix and loop context are restored; its names are left to the caller."""
        before = dict(scope.env)
        saved = (scope.prefix, scope.suffix, scope.loop, scope.unrolling)
        ran: list[tuple[list[Node], dict[str, Value]]] = []
        try:
            for label, stmts in parts:
                block: list[Node] = []
                scope.env.clear()
                scope.env.update(before)
                scope.prefix, scope.suffix, scope.loop, scope.unrolling = f"{name}.{label}.", "", None, 0
                self.cx.blocks.append(block)
                try:
                    self.cx.core.run_block(stmts, scope, info)
                finally:
                    self.cx.blocks.pop()
                ran.append((block, dict(scope.env)))
        finally:
            scope.prefix, scope.suffix, scope.loop, scope.unrolling = saved
        return ran

    def _try_node(self, name: str, span: SourceSpan, blocks: list[list[Node]],
                  yields: list[list[Operand]]) -> Node:
        """The `try` region node (its bodies built here, in one place)."""
        payload = Region(yields={"body": tuple(yields[0]), "finally": tuple(yields[1])})
        every = yields[0] + yields[1]
        captures, deps = self.captures(blocks[0] + blocks[1], set(), every)
        outputs = tuple(output_name(name, i, len(every)) for i in range(len(every))) or (name,)
        types = tuple(self.cx.types.get(ref_name(y), (None,))[0] if isinstance(y, Ref) else None
                      for y in every) or (None,)
        return Node(name, "try", "try", tuple(Ref(c) for c in captures), (), outputs, types,
                    self.region_options(blocks[0] + blocks[1]), span, tuple(deps), {},
                    {"body": blocks[0], "finally": blocks[1]}, payload)

    def captures(self, body: list[Node], defined: set[str], extra: list[Operand],
                  ) -> tuple[list[str], list[str]]:
        """Outer values and outer nodes that a region body uses (in first-use order)."""
        inner_values = set(defined)
        inner_nodes: set[str] = set()
        for node in body:
            inner_values.update(node.outputs)
            inner_nodes.add(node.name)
            if node.region is not None:  # its block arguments
                inner_values.update(v for args in node.region.args.values() for v in args)
            inner_values.update(region_defined(node))
            inner_nodes.update(region_node_names(node))
        uses: dict[str, None] = {}
        deps: dict[str, None] = {}
        for node in body:
            for v in node.input_values():
                if v not in inner_values:
                    uses.setdefault(v, None)
            for d in node.deps:
                if d not in inner_nodes:
                    deps.setdefault(d, None)
        for operand in extra:
            for v in iter_refs(operand):
                if v not in inner_values:
                    uses.setdefault(v, None)
        return list(uses), list(deps)

    def region_options(self, body: list[Node]) -> Any:

        if any(n.options.side_effects for n in body):
            return TaskOptions(side_effects=True)
        return TaskOptions()

    def close_region(self, node: Node, body: list[Node]) -> None:
        aggregate_effects(node, body)
        for inner in body:
            self.cx.owner[inner.name] = node.name
        for value in node.outputs:
            self.cx.producer[value] = node.name
        self.cx.add_node(node)


def _catches_interrupt_only(handler: ast.ExceptHandler) -> bool:
    """`except KeyboardInterrupt:` (without `as`): the handler of a run someone stops by hand."""
    return isinstance(handler.type, ast.Name) and handler.type.id == "KeyboardInterrupt" and handler.name is None
