"""Static checks of `try: ... finally: ...` in a pipeline body (the `try` region, docs/ir.md).

The extractor builds the region; these helpers only read the syntax: which `except`/`else` clauses
it has, and which names the `finally` block reads that the `try` body assigns (in Python such a
name may be unbound there, or still hold its old value, depending on where the body failed).
"""

from __future__ import annotations

import ast

__all__ = ["finally_reads_of_body"]


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
