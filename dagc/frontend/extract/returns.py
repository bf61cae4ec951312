"""`return` inside `if`/`else` of a pipeline body, rewritten into one `return` at the end.

`if c: return a` followed by more statements is the same as `if c: result = a` / `else: <the rest>`, with
`return result` after the branch; the branches (plain branches on compile-time values, or a `cond` region
on a task result) then bind one name in both, as any other assignment in a branch does. Returns inside a
loop are left as they are (and reported where they are met).
"""

from __future__ import annotations

import ast

__all__ = ["RESULT", "lift_returns"]

RESULT = "\0result"  # a name no user code can bind: the value the pipeline returns


def lift_returns(body: list[ast.stmt]) -> list[ast.stmt] | None:
    """`body` with its first `if` that returns rewritten so that the body ends in its only `return`; None
    when no `if` of `body` returns (the body is used as it is)."""
    for index, stmt in enumerate(body):
        if isinstance(stmt, ast.If) and _returns_in(stmt):
            rest = body[index + 1:]
            branch = ast.copy_location(ast.If(stmt.test, _ending(stmt.body, rest, stmt),
                                              _ending(stmt.orelse, rest, stmt)), stmt)
            result = ast.copy_location(ast.Name(RESULT, ast.Load()), stmt)
            return [*body[:index], branch, ast.copy_location(ast.Return(result), stmt)]
    return None


def _returns_in(stmt: ast.If) -> bool:
    """A `return` in a branch of `stmt`, or in a branch of an `if` nested in one (not in a loop)."""
    for block in (stmt.body, stmt.orelse):
        for inner in block:
            if isinstance(inner, ast.Return) or isinstance(inner, ast.If) and _returns_in(inner):
                return True
    return False


def _always_returns(block: list[ast.stmt]) -> bool:
    if not block:
        return False
    last = block[-1]
    if isinstance(last, ast.Return):
        return True
    return isinstance(last, ast.If) and _always_returns(last.body) and _always_returns(last.orelse)


def _ending(block: list[ast.stmt], rest: list[ast.stmt], where: ast.If) -> list[ast.stmt]:
    """One branch, followed by the statements after the `if` when it does not return, ending in an
    assignment of the returned value (None when it falls off the end, as Python returns None)."""
    stmts = block if _always_returns(block) else [*block, *rest]
    stmts = lift_returns(stmts) or stmts
    last = stmts[-1] if stmts else None
    target = ast.Name(RESULT, ast.Store())
    if isinstance(last, ast.Return):
        if isinstance(last.value, ast.Name) and last.value.id == RESULT:
            return stmts[:-1]  # a nested `if` lifted above binds it in each of its branches
        value = last.value if last.value is not None else ast.copy_location(ast.Constant(None), last)
        return [*stmts[:-1], ast.copy_location(ast.Assign([ast.copy_location(target, last)], value), last)]
    anchor = last if last is not None else where
    none = ast.copy_location(ast.Constant(None), anchor)
    return [*stmts, ast.copy_location(ast.Assign([ast.copy_location(target, anchor)], none), anchor)]
