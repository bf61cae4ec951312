"""Pure questions about AST and IR fragments: the names a block binds or grows, its `break`s, what a region
defines; none of them reads the extraction's state."""

from __future__ import annotations

import ast

from dagc.ir.core import Node
from dagc.ir.facts import Effects
from dagc.ir.types import Ref, iter_refs


def assigned_names(body: list[ast.stmt]) -> set[str]:
    """Names a block binds (assignment and loop targets, in nested blocks too). Only statements and
    targets are walked, not every expression: this runs once over bodies of 100k statements."""
    names: set[str] = set()
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Assign):
            stack.extend(node.targets)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            stack.append(node.target)
        elif isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Store):
                names.add(node.id)
        elif isinstance(node, (ast.Tuple, ast.List)):
            stack.extend(node.elts)
        elif isinstance(node, ast.Starred):
            stack.append(node.value)
        elif isinstance(node, ast.Expr):
            if not isinstance(node.value, (ast.Call, ast.Constant, ast.Name)):
                stack.extend(n for n in ast.walk(node.value) if isinstance(n, ast.NamedExpr))
        elif isinstance(node, ast.NamedExpr):
            stack.append(node.target)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            stack.append(node.target)
            stack.extend(node.body)
            stack.extend(node.orelse)
        elif isinstance(node, (ast.While, ast.If)):
            stack.extend(node.body)
            stack.extend(node.orelse)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            stack.extend(item.optional_vars for item in node.items if item.optional_vars is not None)
            stack.extend(node.body)
        elif isinstance(node, ast.Try):
            stack.extend(node.body)
            stack.extend(node.orelse)
            stack.extend(node.finalbody)
            for handler in node.handlers:
                if handler.name:
                    names.add(handler.name)
                stack.extend(handler.body)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def names_in(expr: ast.expr) -> set[str]:
    return {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)}


def target_names(target: ast.expr) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def ordered_stores(body: list[ast.stmt]) -> list[str]:
    out: dict[str, None] = {}
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                out.setdefault(node.id, None)
    return list(out)


def grown_names(body: list[ast.stmt]) -> list[str]:
    """Names changed in place in `body`, in order: `xs` of `xs.append(v)` / `xs.extend(vs)` statements and
    `d` of `d[key] = v` assignments."""
    out: dict[str, None] = {}
    for stmt in body:
        for node in ast.walk(stmt):
            if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
                    and isinstance(node.value.func, ast.Attribute) and node.value.func.attr in ("append", "extend")
                    and isinstance(node.value.func.value, ast.Name)):
                out.setdefault(node.value.func.value.id, None)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                        out.setdefault(target.value.id, None)
    return list(out)


def loop_level_breaks(body: list[ast.stmt]) -> list[tuple[ast.stmt, list[ast.expr]]]:
    """`break`/`continue` statements of this loop (not of nested loops), with the `if` tests above them."""
    found: list[tuple[ast.stmt, list[ast.expr]]] = []

    def visit(stmts: list[ast.stmt], tests: list[ast.expr]) -> None:
        for stmt in stmts:
            if isinstance(stmt, (ast.Break, ast.Continue)):
                found.append((stmt, tests))
            elif isinstance(stmt, ast.If):
                visit(stmt.body, [*tests, stmt.test])
                visit(stmt.orelse, [*tests, stmt.test])
            elif isinstance(stmt, (ast.With, ast.AsyncWith)):
                visit(stmt.body, tests)
            elif isinstance(stmt, ast.Try):
                visit(stmt.body, tests)
                for handler in stmt.handlers:
                    visit(handler.body, tests)
                visit(stmt.orelse, tests)
                visit(stmt.finalbody, tests)

    visit(body, [])
    return found


def stored_names(stmt: ast.stmt) -> list[str]:
    """Every name `stmt` binds: assignment targets, and the names of nested defs, classes and imports."""
    names: list[str] = []
    for n in ast.walk(stmt):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.append(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names.extend((a.asname or a.name).split(".")[0] for a in n.names if a.name != "*")
        elif isinstance(n, ast.ExceptHandler) and n.name:
            names.append(n.name)
    return names


# builtins that consume a generator argument whole, in order: given the list of its items instead,
# they return the same (`sum(g(k) for k in ks)` is `sum([g(k) for k in ks])`)
_CONSUME_ITERABLE = frozenset({"sum", "min", "max", "sorted", "list", "tuple"})


def generator_as_list(call: ast.Call, arg: ast.expr) -> ast.expr:
    """`arg` of a glue builtin `call`, a generator expression that it consumes whole made a list
    comprehension (which the pipeline unrolls); any other argument as it is."""
    if isinstance(arg, ast.GeneratorExp) and isinstance(call.func, ast.Name) and call.func.id in _CONSUME_ITERABLE:
        return ast.copy_location(ast.ListComp(arg.elt, arg.generators), arg)
    return arg


def aggregate_effects(node: Node, body: list[Node]) -> None:
    """A region's effects: those of its bodies, on the values it reads from outside (a value carried
    into a loop stands for the outer value it starts from)."""
    from dagc.ir.effects import node_effects

    inner = region_defined(node) | {o for n in body for o in n.outputs}
    carried = list(node.region.args.get("body", ())) if node.op == "loop" and node.region is not None else []
    start = {c: list(iter_refs(node.args[i])) for i, c in enumerate(carried) if i < len(node.args)}
    if node.op == "map":  # changing an item changes the list it came from
        over = [v for operand in node.args[: node.attrs.get("region.over", 1)] for v in iter_refs(operand)]
        start.update({item: over for item in (node.region.args.get("body", ()) if node.region else ())})
    mutates: dict[str, None] = {}
    writes: dict[str, None] = {}
    reads: dict[str, None] = {}
    io = rng = files = output = None
    seeded = True
    for n in body:
        eff = node_effects(n)
        output = output or eff.output
        files = "write" if "write" in (files, eff.files) else files or eff.files
        seeded = seeded and (eff.seeded or not eff.rng)
        for value in eff.mutates:
            for outer in start.get(value, [value]):
                if outer not in inner:
                    mutates.setdefault(outer, None)
        writes.update(dict.fromkeys(eff.writes))
        reads.update(dict.fromkeys(eff.reads))
        io = io or eff.io
        rng = rng or eff.rng
    node.effects = Effects(mutates=tuple(Ref(v) for v in mutates), io=io, rng=rng, seeded=bool(rng) and seeded,
                           writes=tuple(sorted(writes)), reads=tuple(sorted(reads)), files=files, output=output)


TRY_STATEMENTS = (ast.Try, ast.TryStar) if hasattr(ast, "TryStar") else (ast.Try,)


def region_defined(node: Node) -> set[str]:
    """Every value defined inside a region node's bodies (recursively), inner block arguments included."""
    from dagc.ir.regions import walk

    out: set[str] = set()
    for inner in walk(node):
        out.update(inner.outputs)
        if inner.region is not None:  # its block arguments
            out.update(v for args in inner.region.args.values() for v in args)
    return out


def region_node_names(node: Node) -> set[str]:
    from dagc.ir.regions import walk

    return {inner.name for inner in walk(node)}


def split_types(returns: str | None, n_outputs: int) -> tuple[str | None, ...]:
    if n_outputs == 1:
        return (returns,)
    if returns is not None:
        try:
            expr = ast.parse(returns, mode="eval").body
        except SyntaxError:
            expr = None
        if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Name) and expr.value.id in ("tuple", "Tuple"):
            elts = expr.slice.elts if isinstance(expr.slice, ast.Tuple) else [expr.slice]
            if len(elts) == n_outputs and not any(isinstance(e, ast.Constant) and e.value is Ellipsis for e in elts):
                return tuple(ast.unparse(e) for e in elts)
    return (None,) * n_outputs
