"""`map` regions: a `for` loop or list comprehension over a run-time list (data-dependent fan-out).

    shards = list_shards(root)
    out = []
    for shard in dagc.each(shards, expected=64, max_items=1000):   # dagc.each is optional
        out.append(preprocess(shard))
    model = train(merge(out))

becomes one `map` node (docs/ir.md, "map"): its body runs once per item of `shards`, each item
appends to the collected lists, and after the loop `out` is the map's output. Items may run in any
order or in parallel, so the body must not carry a value from one item to the next (`acc =
add(acc, x)` is DAGC171) and the collecting list is only appended to inside the body (DAGC172).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from dagc.frontend.extract.context import Component
from dagc.frontend.extract.queries import assigned_names, loop_level_breaks, target_names
from dagc.frontend.extract.values import (
    POISON,
    Dyn,
    ExtractError,
    Scope,
    Static,
    is_task_result,
    known_container,
    to_operand,
)
from dagc.frontend.modules import ModuleInfo
from dagc.ir.core import Node, output_name
from dagc.ir.payload import Region
from dagc.ir.regions import WIDTH_ATTR
from dagc.ir.types import Operand, Ref, Seq

_EACH_OPTIONS = {"expected": 0, "max_items": 1, "concurrency": 1}  # option -> smallest value allowed


_DICT_VIEWS = ("items", "keys", "values")


@dataclass(frozen=True)
class MapSpec:
    """What a `for` iterates over when that is a run-time list: the iterables (zipped), the start of
    an `enumerate`, and the `dagc.each` options."""

    iterables: tuple[ast.expr, ...]
    start: int | None = None
    options: dict[str, int] = field(default_factory=dict)
    method: str | None = None  # "items", "keys" or "values": the loop is over `ITERABLE.method()`


@dataclass(frozen=True)
class MapBound:
    """A name a map body binds, or carries from one item to the next. `carried`: read inside the body
    before the body rebinds it (DAGC171); otherwise read after the loop (DAGC176)."""

    name: str
    region: str
    line: int
    carried: bool = False


def _collected_lists(body: list[ast.stmt]) -> dict[str, list[ast.Name]]:
    """Names the body appends to (`NAME.append(...)` / `NAME.extend(...)`), with every other read of them."""
    appended: dict[str, None] = {}
    receivers: set[int] = set()
    for node in (n for stmt in body for n in ast.walk(stmt)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("append", "extend")
                and isinstance(node.func.value, ast.Name)):
            appended.setdefault(node.func.value.id, None)
            receivers.add(id(node.func.value))
    others: dict[str, list[ast.Name]] = {name: [] for name in appended}
    for node in (n for stmt in body for n in ast.walk(stmt)):
        if isinstance(node, ast.Name) and node.id in others and id(node) not in receivers:
            others[node.id].append(node)
    return others


class Maps(Component):
    """Builds `map` region nodes."""

    def _each_call(self, expr: ast.expr, scope: Scope, info: ModuleInfo) -> bool:
        if not isinstance(expr, ast.Call):
            return False
        func = expr.func
        if isinstance(func, ast.Name) and func.id not in scope.env:
            return info.dagc_names.get(func.id) == "each"
        return (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.attr == "each"
                and func.value.id in info.dagc_modules and func.value.id not in scope.env)

    def _each_options(self, call: ast.Call, scope: Scope, info: ModuleInfo) -> dict[str, int]:

        options: dict[str, int] = {}
        ok = len(call.args) == 1 and not isinstance(call.args[0], ast.Starred)
        for kw in call.keywords:
            if kw.arg not in _EACH_OPTIONS or not ok:
                ok = False
                break
            try:
                value = self.cx.exprs.static_value(kw.value, scope, info)
            except ExtractError:
                value = None
            if not isinstance(value, int) or isinstance(value, bool) or value < _EACH_OPTIONS[kw.arg]:
                ok = False
                break
            options[kw.arg] = value
        if not ok:
            self.cx.sink.error("DAGC170", "dagc.each takes the loop's items and the options `expected=` (items to "
                               "plan for), `max_items=` and `concurrency=`, whole numbers known at compile time",
                               info.source.span(call),
                               hint="write `for shard in dagc.each(shards, expected=64, max_items=1000, concurrency=8):`")
            raise ExtractError
        return options

    def map_spec(self, expr: ast.expr, scope: Scope, info: ModuleInfo) -> tuple[MapSpec | None, ast.expr]:
        """(the map's spec, when `expr` iterates over a run-time list of unknown length; the iterable
        without its `dagc.each` wrapper)."""
        options: dict[str, int] = {}
        if self._each_call(expr, scope, info):
            assert isinstance(expr, ast.Call)
            options = self._each_options(expr, scope, info)
            expr = expr.args[0]
        iterables: list[ast.expr] = [expr]
        start: int | None = None
        if (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in ("enumerate", "zip")
                and expr.func.id not in scope.env and self.cx.project.lookup(info, expr.func.id) is None
                and expr.args and not any(isinstance(a, ast.Starred) for a in expr.args)):
            if expr.func.id == "zip" and not expr.keywords:
                iterables = list(expr.args)
            elif expr.func.id == "enumerate" and len(expr.args) <= 2 and not expr.keywords:
                iterables = [expr.args[0]]
                start = 0
                if len(expr.args) == 2:
                    start = self.cx.exprs.static_value(expr.args[1], scope, info)
                    if not isinstance(start, int) or isinstance(start, bool):
                        return None, expr
        method = None
        only = iterables[0]
        if (len(iterables) == 1 and isinstance(only, ast.Call) and isinstance(only.func, ast.Attribute)
                and only.func.attr in _DICT_VIEWS and not only.args and not only.keywords
                and self._unknown_length(only.func.value, scope, info)):
            # `d.items()` of a run-time dict: the map lists the view's items when it runs, as Python does
            iterables, method = [only.func.value], only.func.attr
        if not any(self._unknown_length(e, scope, info) for e in iterables):
            return None, expr
        return MapSpec(tuple(iterables), start, options, method), expr

    def _unknown_length(self, expr: ast.expr, scope: Scope, info: ModuleInfo) -> bool:
        """True for a run-time value whose length is known only when the pipeline runs (a task's
        result, or glue on one); False for lists of task results built in the pipeline."""

        if isinstance(expr, ast.Name):
            value = scope.env.get(expr.id)
            return is_task_result(value) and known_container(value) is None
        if isinstance(expr, (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.DictComp, ast.SetComp,
                             ast.GeneratorExp, ast.Constant)):
            return False
        if (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and not expr.args
                and expr.func.attr in ("items", "keys", "values") and isinstance(expr.func.value, ast.Name)):
            return self._unknown_length(expr.func.value, scope, info)
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in ("enumerate", "zip"):
            return False  # nested enumerate/zip: the unroller reports what it cannot do
        return self.cx.glue.needs_glue(expr, scope, info)

    def map_region(self, stmt: ast.For, spec: MapSpec, scope: Scope, info: ModuleInfo, *,
                   leak: bool = True) -> None:
        """`for TARGET in <run-time list>: BODY` → one `map` node; names the body appends to are its
        outputs. `leak`: the loop's names stay bound after it (a `for`, not a comprehension)."""

        span = info.source.span(stmt)
        for node, _tests in loop_level_breaks(stmt.body):
            self.cx.sink.error("DAGC174", "a loop over a run-time list cannot `break` or `continue`: its items may "
                               "run in parallel", info.source.span(node),
                               hint="put the rest of the body under `if <condition>:`, or filter the items in a task "
                               "before the loop")
            raise ExtractError
        self.cx.check_depth(span)
        target_vars = self._map_targets(stmt.target, info)
        over: list[Operand] = [to_operand(self.cx.exprs.eval(e, scope, info)) for e in spec.iterables]
        name = self.cx.node_name(scope.prefix + "map" + scope.suffix)
        block_args = [self.cx.reserve(f"{name}@{var}") for var in target_vars]
        collected = _collected_lists(stmt.body)
        collected = {var: uses for var, uses in collected.items()
                     if (known := known_container(scope.env.get(var))) is not None and known[0] == "list"}
        for var, uses in collected.items():
            if uses:
                self.cx.sink.error("DAGC172", f"`{var}` collects the items' results; inside the loop it can only be "
                                   "appended to", info.source.span(uses[0]),
                                   hint=f"use `{var}` after the loop, when every item has run (the items of a map may "
                                   "run in any order)")
                raise ExtractError
        inits = [to_operand(scope.env[var]) for var in collected]
        assigned = (assigned_names(stmt.body) | target_names(stmt.target)) - set(collected)
        saved_env = dict(scope.env)
        for var in assigned:
            if var in scope.env and var not in target_vars:
                scope.env[var] = MapBound(var, name, span.line, carried=True)
        for var, arg in zip(target_vars, block_args):
            scope.env[var] = Dyn(Ref(arg))
        for var in collected:
            scope.env[var] = Static([])
        block: list[Node] = []
        saved = (scope.prefix, scope.suffix, scope.loop, scope.unrolling)
        scope.prefix, scope.suffix, scope.loop, scope.unrolling = name + ".", "", None, 0
        self.cx.blocks.append(block)
        errors = len(self.cx.sink.diagnostics)
        yields: list[Operand] = []
        try:
            self.cx.core.run_block(stmt.body, scope, info)
            for var in collected:
                known = known_container(scope.env.get(var))
                if scope.env.get(var) is POISON:
                    raise ExtractError
                if known is None or known[0] != "list":
                    value = scope.env.get(var)
                    nested = (isinstance(value, Dyn) and isinstance(value.operand, Ref)
                              and any(n.op == "map" and value.operand.name in n.outputs for n in block))
                    if nested:
                        self.cx.sink.error("DAGC173", f"`{var}` is appended to inside a nested loop over a run-time "
                                           "list", span,
                                           hint=f"collect the inner loop's values in a list of its own and append that: "
                                           f"`inner = []`, `for y in ys: inner.append(...)`, then `{var}.append(inner)`")
                    else:
                        self.cx.sink.error("DAGC173", f"`{var}` is appended to under a branch on a task result inside "
                                           "a loop over a run-time list", span,
                                           hint=f"append on every item (`{var}.append(value if ok else None)`) and "
                                           "filter after the loop, in a task")
                    raise ExtractError
                yields.append(Seq("list", tuple(to_operand(v) for v in known[1])))
        except (ExtractError, TypeError):
            self.cx.blocks.pop()
            scope.prefix, scope.suffix, scope.loop, scope.unrolling = saved
            scope.env.clear()
            scope.env.update(saved_env)
            for var in [*assigned, *collected]:
                scope.env[var] = POISON
            raise ExtractError from None
        self.cx.blocks.pop()
        scope.prefix, scope.suffix, scope.loop, scope.unrolling = saved
        if len(self.cx.sink.diagnostics) > errors and self.cx.sink.has_errors:
            scope.env.clear()
            scope.env.update(saved_env)
            for var in [*assigned, *collected]:
                scope.env[var] = POISON
            raise ExtractError
        node = self._map_node(name, stmt, spec, over, block_args, block, inits, yields, span)
        self.cx.regions.close_region(node, block)
        scope.env.clear()
        scope.env.update(saved_env)
        for var, out in zip(collected, node.outputs):
            scope.env[var] = Dyn(Ref(out))
        if leak:
            for var in assigned:
                scope.env[var] = MapBound(var, name, span.line)

    def _map_targets(self, target: ast.expr, info: ModuleInfo) -> list[str]:
        """The block arguments' names: the loop variable, or the names it unpacks each item into."""

        if isinstance(target, ast.Name):
            return [target.id]
        if (isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) >= 2
                and all(isinstance(e, ast.Name) for e in target.elts)):
            names = [e.id for e in target.elts]
            if len(set(names)) == len(names):
                return names
        self.cx.sink.error("DAGC175", "the items of a loop over a run-time list unpack only into plain names",
                           info.source.span(target),
                           hint="write `for shard in shards:`, `for i, shard in enumerate(shards):` or "
                           "`for a, b in zip(xs, ys):`, and unpack further inside the body")
        raise ExtractError

    def _map_node(self, name: str, stmt: ast.For, spec: MapSpec, over: list[Operand], block_args: list[str],
                  body: list[Node], inits: list[Operand], yields: list[Operand], span: Any) -> Node:

        payload = Region(yields={"body": tuple(yields)}, args={"body": tuple(block_args)}, init=tuple(inits))
        attrs: dict[str, Any] = {
            "region.over": len(over),
            "region.enumerate": spec.start,
            "region.max_items": spec.options.get("max_items"),
            "region.concurrency": spec.options.get("concurrency"),
        }
        if spec.method is not None:
            attrs["region.method"] = spec.method
        if "expected" in spec.options:
            attrs[WIDTH_ATTR] = spec.options["expected"]  # planning only (dagc.ir.regions.expected_width)
        captures, deps = self.cx.regions.captures(body, set(block_args), [*inits, *yields])
        outputs = tuple(output_name(name, i, len(yields)) for i in range(len(yields))) or (name,)
        types = tuple("list" for _ in yields) or (None,)
        return Node(name, "map", "for", (*over, *[Ref(c) for c in captures]), (), outputs, types,
                    self.cx.regions.region_options(body), span, tuple(deps), attrs,
                    {"body": body}, payload)

    def map_comprehension(self, expr: ast.ListComp, spec: MapSpec, scope: Scope, info: ModuleInfo) -> Any:
        """`[f(x) for x in <run-time list> ...]`: the `for` loop that appends each element, as a map."""

        first = expr.generators[0]
        if first.ifs:
            self.cx.sink.error("DAGC173", "a comprehension over a run-time list cannot filter its items",
                               info.source.span(first.ifs[0]),
                               hint="compute every item and filter the results in a task after the comprehension")
            raise ExtractError
        collector = f"__dagc_map_{id(expr)}"
        append = ast.Expr(ast.Call(ast.Attribute(ast.Name(collector, ast.Load()), "append", ast.Load()),
                                   [expr.elt], []))
        inner: ast.stmt = append
        for gen in reversed(expr.generators[1:]):
            for cond in reversed(gen.ifs):
                inner = ast.If(cond, [inner], [])
            inner = ast.For(gen.target, gen.iter, [inner], [])
        loop = ast.For(first.target, first.iter, [inner], [])
        for node in ast.walk(loop):
            if not hasattr(node, "lineno") and isinstance(node, (ast.stmt, ast.expr)):
                ast.copy_location(node, expr)
        for node in (loop, append, append.value, append.value.func, append.value.func.value):
            ast.copy_location(node, expr)

        scope.env[collector] = Static([])
        try:
            self.map_region(loop, spec, scope, info, leak=False)
            return self.cx.exprs.name_value(ast.Name(collector, ast.Load()), scope, info)
        finally:
            scope.env.pop(collector, None)

    def map_dict_comprehension(self, expr: ast.DictComp, spec: MapSpec, scope: Scope, info: ModuleInfo) -> Any:
        """`{k: f(v) for k, v in <run-time dict>.items()}`: a map that collects `(key, value)` pairs, then
        `dict(pairs)` (glue), which keeps the keys in item order and a repeated key's last value, as the
        comprehension does (it too evaluates each key before its value)."""
        pair = ast.Tuple([expr.key, expr.value], ast.Load())
        pairs = ast.ListComp(pair, expr.generators)
        call = ast.Call(ast.Name("dict", ast.Load()), [ast.Name(f"__dagc_pairs_{id(expr)}", ast.Load())], [])
        for node in (pair, pairs, call, call.func, call.args[0]):
            ast.copy_location(node, expr)
        scope.env[call.args[0].id] = self.map_comprehension(pairs, spec, scope, info)
        try:
            return self.cx.exprs.eval(call, scope, info)
        finally:
            scope.env.pop(call.args[0].id, None)

    def map_bound_use(self, bound: MapBound, expr: ast.Name, info: ModuleInfo) -> None:

        if bound.carried:
            self.cx.sink.error("DAGC171", f"`{bound.name}` carries a value from one item to the next of the loop over a "
                               f"run-time list at line {bound.line}; its items may run in any order or in parallel",
                               info.source.span(expr),
                               hint=f"collect each item's result (`results.append(...)`) and combine them after the "
                               f"loop in a task, e.g. `{bound.name} = combine({bound.name}, results)`")
        else:
            self.cx.sink.error("DAGC176", f"`{bound.name}` is bound in the loop over a run-time list at line "
                               f"{bound.line}; after the loop it would hold the last item's value, which the map "
                               "does not keep", info.source.span(expr),
                               hint=f"append it to a list in the loop and use the list (`{bound.name}s[-1]` for the "
                               "last item)")
        raise ExtractError
