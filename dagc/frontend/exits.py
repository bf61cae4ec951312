"""Syntax-level help for exits in a pipeline body: `try: ... finally: ...` and `continue`.

`finally_reads_of_body` finds the names a `finally` block reads that the `try` body assigns (in
Python such a name may be unbound there, or still hold its old value, depending on where the body
failed); the extractor builds the `try` region (docs/ir.md). `lower_continues` rewrites a loop body
whose `continue` depends on a task result into branches without `continue`.
"""

from __future__ import annotations

import ast

from dagc.ir.types import Map, Operand, Ref, Seq

__all__ = ["finally_reads_of_body", "lower_continues", "rename_refs"]


def rename_refs(operand: Operand, names: dict[str, str]) -> Operand:
    """`operand` with each reference to a value in `names` renamed (a body's value → the `try` region's
    output that carries it out)."""
    if isinstance(operand, Ref):
        return Ref(names.get(operand.name, operand.name))
    if isinstance(operand, Seq):
        return Seq(operand.kind, tuple(rename_refs(item, names) for item in operand.items))
    if isinstance(operand, Map):
        return Map(tuple((rename_refs(k, names), rename_refs(v, names)) for k, v in operand.items))
    return operand


def _stores(stmt: ast.stmt) -> set[str]:
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def finally_reads_of_body(body: list[ast.stmt], finalbody: list[ast.stmt]) -> list[ast.Name]:
    """Reads in `finalbody` of names `body` assigns, unless the finally block assigned them first
    (statement by statement, in order: a statement's reads come before its own stores)."""
    assigned = set().union(*(_stores(s) for s in body)) if body else set()
    rebound: set[str] = set()
    found: list[ast.Name] = []
    for stmt in finalbody:
        for node in ast.walk(stmt):
            if (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
                    and node.id in assigned and node.id not in rebound):
                found.append(node)
        rebound |= _stores(stmt)
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))


def _continues_here(stmts: list[ast.stmt]) -> bool:
    """A `continue` of this loop in `stmts` (through `if` branches, not into nested loops)."""
    for stmt in stmts:
        if isinstance(stmt, ast.Continue):
            return True
        if isinstance(stmt, ast.If) and (_continues_here(stmt.body) or _continues_here(stmt.orelse)):
            return True
    return False


def lower_continues(stmts: list[ast.stmt]) -> tuple[list[ast.stmt], bool]:
    """`stmts` without `continue`: the statements after an `if` whose branch continues move into the
    branches that do not (so `if c: continue` then REST becomes `if c: pass` / `else: REST`), and
    what follows a `continue` is dropped (never reached). Also whether every path ends in a continue.
    A loop on a task result then skips the rest of a trip through an ordinary `cond` region."""
    out: list[ast.stmt] = []
    for index, stmt in enumerate(stmts):
        if isinstance(stmt, ast.Continue):
            return out, True
        if isinstance(stmt, ast.If) and (_continues_here(stmt.body) or _continues_here(stmt.orelse)):
            rest = stmts[index + 1:]
            branches: list[list[ast.stmt]] = []
            always = True
            for branch in (stmt.body, stmt.orelse):
                lowered, exits = lower_continues(branch)
                if not exits:
                    lowered, exits = lower_continues(branch + rest)
                always = always and exits
                branches.append(lowered)
            then = branches[0] or [ast.copy_location(ast.Pass(), stmt)]
            out.append(ast.copy_location(ast.If(stmt.test, then, branches[1]), stmt))
            return out, always
        out.append(stmt)
    return out, False
