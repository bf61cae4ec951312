"""Airflow's orders between tasks in a DAG body, as dagc's waits without data.

    a >> b, b << a, a >> [b, c]     →  b's call becomes dagc.after(<call>, a)
    chain(a, b, c)                  →  the same, pair by pair
    a >> Label("why") >> b          →  a >> b            (a name on an edge: shown, not computed)
    a >> e >> b  (e an EmptyOperator)  →  b waits for a   (a junction is no task)
"""

from __future__ import annotations

import ast

from dagc.frontend.dialects import dotted_name
from dagc.frontend.dialects.rewrite import AFTER, after, unsupported
from dagc.frontend.modules import ModuleInfo, Project

__all__ = ["LABELS", "Ordering"]

_HINT = "docs/dialects.md (Airflow) lists the forms dagc compiles"
LABELS = {"airflow.sdk.Label", "airflow.utils.edgemodifier.Label", "airflow.sdk.definitions.edges.Label"}
_CHAIN = {"airflow.sdk.chain", "airflow.models.baseoperator.chain", "airflow.sdk.bases.operator.chain"}


class Ordering:
    """`a >> b`, `b << a`, `a >> [b, c]`, `chain(a, b, c)` statements (in the body, or in a `for` loop of it):
    each downstream task's call becomes `dagc.after(call, *upstream)`; a task call written in the chain itself
    is bound to a name first. A junction (a name bound to an `EmptyOperator`) is no task: what is ordered after
    it waits for what is ordered before it."""

    def __init__(self, project: Project, info: ModuleInfo, junctions: set[str]) -> None:
        self.project, self.info, self.junctions = project, info, junctions
        self.count = 0
        self.assigned: dict[str, ast.Assign] = {}
        self.home: dict[int, list[ast.stmt]] = {}  # id(assignment) -> the statement list holding it
        self.before: dict[str, list[str]] = {j: [] for j in junctions}  # junction -> the names ordered before it
        self.after_: dict[str, list[str]] = {j: [] for j in junctions}  # junction -> the names ordered after it
        self.edges: list[tuple[str, str]] = []  # (upstream, downstream) as written, junctions included

    def statements(self, body: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in body:
            groups = self._groups(stmt.value) if isinstance(stmt, ast.Expr) else None
            if groups is None:
                if isinstance(stmt, (ast.For, ast.AsyncFor)):
                    stmt.body = self.statements(stmt.body) or [ast.copy_location(ast.Pass(), stmt)]
                out.append(stmt)
                if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                    self.assigned[stmt.targets[0].id] = stmt
                    self.home[id(stmt)] = out
                continue
            names: list[list[str]] = []
            failed = False
            for group in groups:
                row = []
                for operand in group:
                    if isinstance(operand, ast.Name) and (operand.id in self.assigned or operand.id in self.junctions):
                        row.append(operand.id)
                    elif isinstance(operand, ast.Call):
                        self.count += 1
                        name = f"_ordered{self.count}"
                        bound = ast.copy_location(ast.Assign([ast.copy_location(ast.Name(name, ast.Store()), operand)],
                                                             operand), operand)
                        out.append(bound)
                        self.assigned[name] = bound
                        self.home[id(bound)] = out
                        row.append(name)
                    else:
                        unsupported(self.project, self.info, operand, "an order (`>>`) between what is not the "
                                    "result of a task call in this DAG",
                                    f"order task calls, or names bound to them: `a = extract()` then `a >> b`; {_HINT}")
                        failed = True
                names.append(row)
            if failed:
                continue
            for upstream, downstream in zip(names, names[1:]):
                self.edges.extend((u, d) for u in upstream for d in downstream)
                self._edge(upstream, downstream, set())
        return out

    def _edge(self, upstream: list[str], downstream: list[str], seen: set[str]) -> None:
        """Order each of `downstream` after each of `upstream`, through junctions (`seen`: those passed)."""
        tasks = self._through(upstream, set())
        for name in downstream:
            if name in self.junctions:
                if name in seen:
                    continue  # (a cycle of junctions: Airflow rejects the DAG; nothing more to order)
                self.before[name].extend(upstream)
                self._edge(upstream, self.after_[name], seen | {name})  # what was already ordered after it
            elif tasks:
                self._after(self.assigned[name], tasks)
        for name in upstream:
            if name in self.junctions:
                self.after_[name].extend(downstream)

    def _through(self, names: list[str], seen: set[str]) -> list[str]:
        """`names` with each junction replaced by the tasks ordered before it, in order, each once."""
        out: list[str] = []
        for name in names:
            if name in self.junctions:
                if name not in seen:
                    out.extend(self._through(self.before[name], seen | {name}))
            else:
                out.append(name)
        return list(dict.fromkeys(out))

    def _after(self, stmt: ast.Assign, upstream: list[str]) -> None:
        """Make `stmt`'s task call wait for the tasks bound to `upstream`. An upstream bound after `stmt` (Airflow
        orders regardless of where tasks are written) moves `stmt` after it, when nothing in between reads
        what `stmt` binds or rebinds what it reads."""
        out = self.home[id(stmt)]
        position = out.index(stmt)
        bound_at = {t.id: i for i, s in enumerate(out) if isinstance(s, ast.Assign) for t in s.targets
                    if isinstance(t, ast.Name)}
        last = max((bound_at[u] for u in upstream if bound_at.get(u, -1) > position), default=None)
        if last is not None:
            between = out[position + 1:last + 1]
            reads = {n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name)}
            binds = {t.id for t in stmt.targets if isinstance(t, ast.Name)}
            touched = {n.id for s in between for n in ast.walk(s) if isinstance(n, ast.Name)
                       and (n.id in binds or (n.id in reads and isinstance(n.ctx, ast.Store)))}
            if touched:
                unsupported(self.project, self.info, stmt, f"`{sorted(touched)[0]}` is used between this task and "
                            "a task ordered before it", f"call the upstream task first, then this one; {_HINT}")
                return
            out.remove(stmt)
            out.insert(last, stmt)
        prerequisites = [ast.copy_location(ast.Name(u, ast.Load()), stmt) for u in upstream]
        value = stmt.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == AFTER:
            waited = {a.id for a in value.args[1:] if isinstance(a, ast.Name)}
            value.args.extend(p for p in prerequisites if p.id not in waited)  # (an order repeated in a loop)
        elif isinstance(value, ast.ListComp) and isinstance(value.elt, ast.Call):  # a mapped task: each item waits
            value.elt = after(value.elt, prerequisites, value.elt)
        elif isinstance(value, ast.Call):
            stmt.value = after(value, prerequisites, value)
        else:
            unsupported(self.project, self.info, stmt, "an order (`>>`) to what is not a task call",
                        f"order task calls: `a = extract()` then `a >> b`; {_HINT}")

    def _groups(self, expr: ast.expr) -> list[list[ast.expr]] | None:
        """The operand groups of `a >> [b, c] >> d` (or `<<`, or `chain(...)`) in the order they run; None
        for any other expression."""
        if isinstance(expr, ast.Call) and dotted_name(self.info, expr.func) in _CHAIN:
            return [list(a.elts) if isinstance(a, (ast.List, ast.Tuple)) else [a] for a in expr.args]
        if not (isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.RShift, ast.LShift))):
            return None
        ops: list[ast.expr] = []
        kinds: set[type] = set()
        node: ast.expr = expr
        while isinstance(node, ast.BinOp) and isinstance(node.op, (ast.RShift, ast.LShift)):
            kinds.add(type(node.op))
            ops.append(node.right)
            node = node.left
        ops.append(node)
        ops.reverse()
        if len(kinds) > 1:
            unsupported(self.project, self.info, expr, "`>>` and `<<` mixed in one statement",
                        f"write one direction per statement; {_HINT}")
            return []
        if ast.LShift in kinds:
            ops.reverse()
        ops = [o for o in ops if not (isinstance(o, ast.Call) and dotted_name(self.info, o.func) in LABELS)]
        return [list(o.elts) if isinstance(o, (ast.List, ast.Tuple)) else [o] for o in ops]
