"""Airflow's branching as dagc's conditional regions: `@task.branch` / `BranchPythonOperator` tasks, and the
trigger rules that decide whether a task runs once some of its upstream tasks were skipped.

A branch task returns a task id (or a list of them, or None); Airflow skips each of its direct downstream tasks
that is not chosen and from which no chosen task leads (`skip_all_except`). A skipped task skips, in turn, the
tasks downstream of it whose trigger rule asks for it (Airflow 3.3's TriggerRuleDep, with no task failing, as a
dagc run stops at a failure):

    all_success (the default)                   runs when every upstream task ran
    none_failed_min_one_success, one_success    runs when at least one upstream task ran
    none_failed, all_done, always               runs

Whether a task runs is thus a formula over what the branch tasks returned. The DAG body, once lowered, has
each task call bound to a name; each branch's choice is read once (`chosen·b = [b] if str(b) == b else ...`),
each task whose formula is not always true is bound under `if <formula>: x = call` `else: x = None`, which
dagc compiles into a `cond` region (a skipped task's XCom reads as None downstream, as in Airflow).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from dagc.frontend.dialects import dotted_name
from dagc.frontend.dialects.rewrite import AFTER, unsupported
from dagc.frontend.modules import ModuleInfo, Project

__all__ = ["TaskMeta", "trigger_rule", "lower_branches"]

_HINT = "docs/dialects.md (Airflow) lists the forms dagc compiles"
_ALL = "all_success"
_ANY = frozenset({"none_failed_min_one_success", "one_success"})
_RUNS = frozenset({"none_failed", "all_done", "always"})
_RULES = frozenset({"all_success", "all_failed", "all_done", "all_done_min_one_success", "all_done_setup_success",
                    "one_success", "one_failed", "one_done", "none_failed", "none_skipped", "always",
                    "none_failed_min_one_success", "all_skipped"})


@dataclass(frozen=True)
class TaskMeta:
    """What branching needs of one Airflow task of the DAG: its id, its trigger rule, whether it branches."""

    task_id: str
    rule: str = _ALL
    branch: bool = False
    known: bool = True  # the id is written as a literal (else a branch cannot be read to choose it)


def trigger_rule(project: Project, info: ModuleInfo, keywords: list[ast.keyword]) -> str:
    """The `trigger_rule=` among `keywords` (a string, or `TriggerRule.NONE_FAILED`): one dagc lowers, else
    reported at its line (and read as the default)."""
    given = next((k.value for k in keywords if k.arg == "trigger_rule"), None)
    if given is None:
        return _ALL
    if isinstance(given, ast.Constant) and isinstance(given.value, str):
        rule = given.value
    elif isinstance(given, ast.Attribute) and (dotted_name(info, given.value) or "").endswith("TriggerRule"):
        rule = given.attr.lower()
    else:
        unsupported(project, info, given, "a `trigger_rule=` dagc cannot read at compile time",
                    f"write the rule itself: `trigger_rule=TriggerRule.NONE_FAILED` or `trigger_rule=\"none_failed\"`; "
                    f"{_HINT}")
        return _ALL
    if rule not in (_ALL, *_ANY, *_RUNS):
        what = "an unknown trigger rule" if rule not in _RULES else "trigger rule"
        unsupported(project, info, given, f"{what} `{rule}`: dagc lowers only rules that depend on skipped upstream "
                    "tasks (a dagc run stops at a failed task)",
                    f"use all_success, none_failed, none_failed_min_one_success, one_success or all_done; {_HINT}")
        return _ALL
    return rule


def _called(value: ast.expr) -> ast.expr:
    """The task call of a bound value, through `dagc.after(call, ...)`."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == AFTER and value.args:
        value = value.args[0]
    return value


def _and(parts: list[ast.expr | bool]) -> ast.expr | bool:
    kept = [p for p in parts if p is not True]
    if any(p is False for p in kept):
        return False
    if not kept:
        return True
    return kept[0] if len(kept) == 1 else ast.BoolOp(ast.And(), kept)  # type: ignore[arg-type]


def _or(parts: list[ast.expr | bool]) -> ast.expr | bool:
    kept = [p for p in parts if p is not False]
    if any(p is True for p in kept):
        return True
    if not kept:
        return False
    return kept[0] if len(kept) == 1 else ast.BoolOp(ast.Or(), kept)  # type: ignore[arg-type]


def _not(part: ast.expr | bool) -> ast.expr | bool:
    return (not part) if isinstance(part, bool) else ast.UnaryOp(ast.Not(), part)


def _name(name: str, store: bool = False) -> ast.Name:
    return ast.Name(name, ast.Store() if store else ast.Load())


class _Graph:
    """The DAG's tasks and junctions (`EmptyOperator`s) by the names the lowered body binds them to, with their
    upstream tasks (orders `>>` and data)."""

    def __init__(self, body: list[ast.stmt], calls: dict[int, TaskMeta], junctions: dict[str, TaskMeta],
                 edges: list[tuple[str, str]]) -> None:
        self.meta: dict[str, TaskMeta] = dict(junctions)
        self.statement: dict[str, ast.Assign] = {}
        holds: dict[str, list[str]] = {}  # a name bound to a value that is not a task's -> the tasks it holds
        for stmt in body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                meta = calls.get(id(_called(stmt.value)))
                if meta is not None:
                    self.meta[stmt.targets[0].id] = meta
                    self.statement[stmt.targets[0].id] = stmt
                else:  # `outputs = [a, b]`: a task given `outputs` takes a's and b's results
                    holds[stmt.targets[0].id] = [r for n in ast.walk(stmt.value) if isinstance(n, ast.Name)
                                                 for r in ([n.id] if n.id in self.meta else holds.get(n.id, []))]
        self.upstream: dict[str, list[str]] = {n: [] for n in self.meta}
        for up, down in edges:
            if up in self.meta and down in self.meta and up not in self.upstream[down]:
                self.upstream[down].append(up)
        for name, stmt in self.statement.items():
            names = [n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name)]
            for read in (r for n in names for r in ([n] if n in self.meta else holds.get(n, []))):
                if read in self.meta and read != name and read not in self.upstream[name]:
                    self.upstream[name].append(read)
        self.downstream: dict[str, list[str]] = {n: [] for n in self.meta}
        for down, ups in self.upstream.items():
            for up in ups:
                self.downstream[up].append(down)
        self._reached: dict[str, set[str]] = {}  # name -> what `reaches` found from it

    def order(self) -> list[str] | None:
        """The names, each after its upstream ones (ties in the order they were bound); None for a cycle."""
        left = {n: len(ups) for n, ups in self.upstream.items()}
        ready = [n for n in self.meta if left[n] == 0]
        out: list[str] = []
        while ready:
            name = ready.pop(0)
            out.append(name)
            for down in self.downstream[name]:
                left[down] -= 1
                if left[down] == 0:
                    ready.append(down)
        return out if len(out) == len(self.meta) else None

    def reaches(self, start: str) -> set[str]:
        """`start` and every name downstream of it (asked once per branch, downstream task and task below it)."""
        if start in self._reached:
            return self._reached[start]
        seen, stack = {start}, [start]
        while stack:
            for down in self.downstream[stack.pop()]:
                if down not in seen:
                    seen.add(down)
                    stack.append(down)
        self._reached[start] = seen
        return seen


def _guarded(stmt: ast.stmt, graph: _Graph, ran: dict[str, ast.expr | bool]) -> ast.stmt:
    """`stmt` as it is, or, for `x = <an operation on task results>` (`x = a["key"]`, `x = a + 1`) where a task
    read may be skipped, `if <all read ran>: x = ... else: x = None`: Airflow resolves what a skipped task's
    XCom gives as None, where the operation would fail. A display (`[a, b]`) keeps a skipped task's None."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)) \
            or isinstance(stmt.value, (ast.Name, ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set)):
        return stmt
    reads = {n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name) and n.id in graph.statement}
    runs = _and([ran[r] for r in sorted(reads)])
    if isinstance(runs, bool):
        return stmt
    skipped = ast.Assign([_name(stmt.targets[0].id, store=True)], ast.Constant(None))
    guarded = ast.If(runs, [stmt], [skipped])
    for node in ast.walk(guarded):
        if isinstance(node, (ast.expr, ast.stmt)) and not hasattr(node, "lineno"):
            ast.copy_location(node, stmt)
    return guarded


def _bound(body: list[ast.stmt], calls: dict[int, TaskMeta]) -> list[ast.stmt]:
    """`body` with each task call that is not the whole value of an assignment (`report(x)`, `return join(a, b)`,
    `{"a": a(), ...}`) bound to a name first, in the order Python calls them, so that it can run under a
    condition."""
    out: list[ast.stmt] = []
    for stmt in body:
        if not isinstance(stmt, (ast.Assign, ast.Expr, ast.Return)) or stmt.value is None:
            out.append(stmt)
            continue
        hoist = _Hoist(calls, stmt, len(out))
        whole = _called(stmt.value)
        if isinstance(stmt, ast.Assign) and id(whole) in calls:
            for child in ast.iter_child_nodes(whole):
                hoist.visit(child)
        else:
            stmt.value = hoist.visit(stmt.value)
        out.extend(hoist.bound)
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Name) and hoist.bound):
            out.append(stmt)  # (a task call written as a statement is now its binding)
    return out


class _Hoist(ast.NodeTransformer):
    """Replaces each task call of an expression (innermost first), and each item of a value (`a["key"]`, what a
    skipped task gives reads as None), by a name bound to it before `stmt`."""

    def __init__(self, calls: dict[int, TaskMeta], stmt: ast.stmt, index: int) -> None:
        self.calls, self.stmt, self.index = calls, stmt, index
        self.bound: list[ast.stmt] = []

    def generic_visit(self, node: ast.AST) -> ast.AST:
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)) \
                and id(node) not in self.calls:
            return node  # (a call in a comprehension runs per item: not a task of the DAG's graph)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == AFTER and node.args \
                and id(_called(node)) in self.calls:  # `dagc.after(call, ...)`: the call keeps its wait
            super().generic_visit(_called(node))
        else:
            node = super().generic_visit(node)
        item = isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)  # `a["key"]`: guarded on a
        if isinstance(node, ast.expr) and (id(_called(node)) in self.calls or item):
            name = f"task·{self.index}·{len(self.bound)}"
            target = ast.copy_location(_name(name, store=True), node)
            self.bound.append(ast.copy_location(ast.Assign([target], node), self.stmt))
            return ast.copy_location(_name(name), node)
        return node


def lower_branches(project: Project, info: ModuleInfo, body: list[ast.stmt], calls: dict[int, TaskMeta],
                   junctions: dict[str, TaskMeta], edges: list[tuple[str, str]]) -> list[ast.stmt]:
    """`body` (a lowered DAG body) with each task a branch may skip bound under an `if` on the branches' choices.
    `calls`: the meta of each task call of the body, by id of its call node; `junctions`: the `EmptyOperator`s'
    by name; `edges`: the orders (`>>`, `chain`) between names."""
    if not any(m.branch for m in calls.values()):
        return body
    for stmt in body:
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.Try)) and any(
                id(_called(n)) in calls for n in ast.walk(stmt) if isinstance(n, ast.Call)):
            unsupported(project, info, stmt, "a task made in a loop (or block) of a DAG that branches",
                        f"write each task of a branching DAG in the DAG's body; {_HINT}")
            return body
    body = _bound(body, calls)
    graph = _Graph(body, calls, junctions, edges)
    order = graph.order()
    if order is None:
        return body  # (a cycle: Airflow rejects the DAG, the extraction reports the loop of waits)
    failed = False
    for name, meta in graph.meta.items():
        stmt = graph.statement.get(name)
        if meta.branch and stmt is not None and isinstance(_called(stmt.value), ast.ListComp):
            unsupported(project, info, stmt, "a mapped branch task (`.expand`)",
                        f"branch once, on a task that gathers what the mapped tasks return; {_HINT}")
            failed = True
        if not meta.known and any(graph.meta[u].branch for u in graph.upstream[name]):
            unsupported(project, info, stmt if stmt is not None else body[0], f"the id of `{name}`, a task a branch "
                        "may choose, is not written as a string", f"write `task_id=\"...\"` as a literal; {_HINT}")
            failed = True
    if failed:
        return body
    ran: dict[str, ast.expr | bool] = {}
    flags: dict[str, list[ast.stmt]] = {}  # name -> the statements binding its run flag, before its statement
    for name in order:
        meta = graph.meta[name]
        ups = graph.upstream[name]
        if meta.rule == _ALL:
            runs = _and([ran[u] for u in ups])
        elif meta.rule in _ANY:
            runs = _or([ran[u] for u in ups]) if ups else True
        else:
            runs = True
        for up in (u for u in ups if graph.meta[u].branch):
            reached = [graph.meta[d].task_id for d in graph.downstream[up] if name in graph.reaches(d)]
            kept = _or([ast.Compare(ast.Constant(t), [ast.In()], [_name(f"chosen·{up}")]) for t in reached])
            runs = _and([runs, kept if meta.rule == _ALL else _or([_not(ran[up]), kept])])
        if isinstance(runs, bool) or name not in graph.statement:
            ran[name] = runs
            continue
        flag = f"ran·{name}"
        flags[name] = [ast.Assign([_name(flag, store=True)], runs)]
        ran[name] = _name(flag)
    named = {id(s): n for n, s in graph.statement.items()}
    out: list[ast.stmt] = []
    for stmt in body:
        name = named.get(id(stmt))
        if name is None:
            out.append(_guarded(stmt, graph, ran))
            continue
        made: list[ast.stmt] = list(flags.get(name, []))
        skipped = ast.Assign([_name(name, store=True)], ast.Constant(None))
        runs = ran[name]
        made.append(stmt if runs is True else skipped if runs is False else ast.If(runs, [stmt], [skipped]))
        if graph.meta[name].branch:
            chosen = ast.IfExp(  # what the branch returned, as a list of task ids ([] when it did not run)
                ast.Compare(_name(name), [ast.IsNot()], [ast.Constant(None)]),
                ast.IfExp(ast.Compare(ast.Call(_name("str"), [_name(name)], []), [ast.Eq()], [_name(name)]),
                          ast.List([_name(name)], ast.Load()), ast.Call(_name("list"), [_name(name)], [])),
                ast.List([], ast.Load()))
            made.append(ast.Assign([_name(f"chosen·{name}", store=True)], chosen))
        for new in made:  # (diagnostics about what was made point at the task's statement)
            for node in ast.walk(new):
                if isinstance(node, (ast.expr, ast.stmt)) and not hasattr(node, "lineno"):
                    ast.copy_location(node, stmt)
        out.extend(made)
    return out
