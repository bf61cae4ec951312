"""A Metaflow flow's graph, from its steps' `self.next(...)` transitions, as a pipeline body.

Metaflow reads a step's transition from its last statement, `self.next(...)`: one step (linear), several (a
static split, joined later by a step taking `inputs`), or one with `foreach="attr"` (a fan-out over the items of
an artifact). The pipeline body that stands for the flow calls each step's task once, in an order the graph
allows; a foreach becomes a `for` over the items' indices the foreach step returns, which dagc makes a map region:

    start = Flow.start(alpha=alpha)                  # a foreach step also returns its items' indices
    compute_out = []
    for compute_index in start_items:
        compute = Flow.compute(start, compute_index)
        compute_out.append(compute)
    join = Flow.join(compute_out)
    end = Flow.end(join)
    return end

Each statement carries the position of the step it calls (or of the transition it stands for), so diagnostics
about the pipeline point at the user's flow.
"""

from __future__ import annotations

import ast

from dagc.frontend.dialects.metaflow import PARALLEL, FlowParameter, FlowStep
from dagc.frontend.modules import ModuleInfo, Project
from dagc.ir.location import SourceSpan

__all__ = ["read_transition", "synthesize_pipeline"]

_TRANSITIONS = ("self.next(self.b) (linear), self.next(self.a, self.b) (split), "
                'self.next(self.each, foreach="items") (foreach), self.next(self.each, num_parallel=4) (@parallel), '
                'self.next({"a": self.a, "b": self.b}, condition="attr") (switch)')


class _Invalid(Exception):
    """The graph cannot be a pipeline body (reported)."""


def read_transition(project: Project, info: ModuleInfo, step: FlowStep, steps: dict[str, FlowStep]) -> None:
    """Fill `step.transition`, `targets`, `foreach` from the step's last statement (as Metaflow's graph does)."""
    info = step.home or info  # (a step inherited from a class of another module is reported there)
    fn = step.node
    receiver = fn.args.args[0].arg if fn.args.args else "self"
    tail = fn.body[-1]
    call = tail.value if isinstance(tail, ast.Expr) and isinstance(tail.value, ast.Call) else None
    if call is None or not _is_next(call.func, receiver):
        inner = next((n for n in ast.walk(fn) if isinstance(n, ast.Call) and _is_next(n.func, receiver)), None)
        if step.name == "end" and inner is None:
            return
        where = inner if inner is not None else fn
        project.sink.error("DAGC117", f"step `{step.name}` does not end with its transition `{receiver}.next(...)`"
                           if step.name != "end" else "the end step has a transition", info.source.span(where),
                           hint="Metaflow's graph is static: the last statement of every step but `end` is one "
                           f"`{receiver}.next(...)`, not inside an `if` or a loop; forms: {_TRANSITIONS}")
        return
    step.next_call = call
    if step.name == "end":
        project.sink.error("DAGC117", "the end step has a transition", info.source.span(call),
                           hint="`end` is the last step: remove its self.next(...)")
        return
    keywords = {kw.arg: kw for kw in call.keywords}
    if "condition" in keywords or any(isinstance(a, ast.Dict) for a in call.args):
        _read_switch(project, info, step, steps, call, receiver)
        return
    for key, kw in keywords.items():
        if key not in ("foreach", "num_parallel"):
            project.sink.error("DAGC117", f"`{key}=` in a transition is not supported by dagc",
                               info.source.span(kw), hint=f"supported forms: {_TRANSITIONS}")
            return
    targets: list[str] = []
    for arg in call.args:
        if not (isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) and arg.value.id == receiver):
            project.sink.error("DAGC117", f"`{ast.unparse(arg)}` is not a step of this flow",
                               info.source.span(arg), hint=f"name steps as `{receiver}.<step>`; forms: {_TRANSITIONS}")
            return
        if arg.attr not in steps:
            project.sink.error("DAGC117", f"`{arg.attr}` is not a @step of this flow", info.source.span(arg),
                               hint=f"steps: {', '.join(steps)}")
            return
        targets.append(arg.attr)
    if not targets:
        project.sink.error("DAGC117", "the transition names no step", info.source.span(call),
                           hint=f"forms: {_TRANSITIONS}")
        return
    step.targets = tuple(targets)
    if "foreach" in keywords:
        value = keywords["foreach"].value
        if not (isinstance(value, ast.Constant) and isinstance(value.value, str)) or len(targets) != 1:
            project.sink.error("DAGC117", "a foreach names one step and its artifact as a string literal",
                               info.source.span(call), hint='write self.next(self.each, foreach="items")')
            return
        step.transition, step.foreach = "foreach", value.value
        return
    if "num_parallel" in keywords:  # N tasks of a @parallel step: a foreach over N indices, as Metaflow runs it
        target = steps[targets[0]]
        if len(targets) != 1 or "foreach" in keywords or not target.parallel or target.join:
            project.sink.error("DAGC117", "`num_parallel=` names one step decorated with @parallel",
                               info.source.span(keywords["num_parallel"]),
                               hint="write self.next(self.train, num_parallel=4) and decorate `train` with @parallel "
                               "(and @step); the step after it is a join step taking `inputs`")
            return
        step.transition, step.foreach = "foreach", PARALLEL
        return
    step.transition = "split" if len(targets) > 1 else "linear"


def _read_switch(project: Project, info: ModuleInfo, step: FlowStep, steps: dict[str, FlowStep], call: ast.Call,
                 receiver: str) -> None:
    """`self.next({"a": self.a, "b": self.b}, condition="attr")`: a case per literal key."""
    form = 'self.next({"small": self.fit_small, "large": self.fit_large}, condition="size")'
    condition = next((kw.value for kw in call.keywords if kw.arg == "condition"), None)
    if len(call.args) != 1 or not isinstance(call.args[0], ast.Dict) or len(call.keywords) != 1 \
            or not (isinstance(condition, ast.Constant) and isinstance(condition.value, str)):
        project.sink.error("DAGC117", "a conditional transition maps literal cases to steps and names its artifact "
                           "with a string literal", info.source.span(call), hint=f"write {form}")
        return
    cases: list[object] = []
    targets: list[str] = []
    for key, value in zip(call.args[0].keys, call.args[0].values):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, (str, int, bool))):
            project.sink.error("DAGC117", "a case of a conditional transition is a literal (a string, number or "
                               "bool)", info.source.span(key or value),
                               hint=f"write {form}; cases read from a Config are not supported")
            return
        if not (isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id == receiver
                and value.attr in steps):
            project.sink.error("DAGC117", f"`{ast.unparse(value)}` is not a @step of this flow",
                               info.source.span(value), hint=f"steps: {', '.join(steps)}")
            return
        cases.append(key.value)
        targets.append(value.attr)
    if not targets:
        project.sink.error("DAGC117", "the conditional transition has no case", info.source.span(call),
                           hint=f"write {form}")
        return
    step.transition, step.foreach, step.cases, step.targets = "switch", condition.value, tuple(cases), tuple(targets)


def _is_next(func: ast.expr, receiver: str) -> bool:
    return isinstance(func, ast.Attribute) and func.attr == "next" and isinstance(func.value, ast.Name) \
        and func.value.id == receiver


def synthesize_pipeline(project: Project, info: ModuleInfo, node: ast.ClassDef, steps: dict[str, FlowStep],
                        parameters: list[FlowParameter], failed: bool) -> ast.FunctionDef:
    """The pipeline function standing for the flow (see the module docstring); when the flow's steps have errors
    (`failed`, reported) or its graph has one (reported here), a pipeline that returns None."""
    writer = _Writer(project, info, node, steps)
    body: list[ast.stmt]
    try:
        if "start" not in steps or "end" not in steps:
            missing = "start" if "start" not in steps else "end"
            project.sink.error("DAGC117", f"flow `{node.name}` has no `{missing}` step", _name_span(info, node),
                               hint="a flow begins at a @step named `start` and finishes at a @step named `end`")
            raise _Invalid
        for name in ("start", "end"):
            if steps[name].join:  # (as Metaflow's own check says)
                writer.fail(steps[name].node, f"the {name} step takes `inputs`, as a join step does",
                            "the end step is no join: add a join step before it" if name == "end" else
                            "the start step has nothing to join: write `def start(self):`")
        if failed:
            raise _Invalid
        start_args = [f"{p.attr}={p.attr}" for p in parameters]
        stmts, last, join = writer.chain("start", start_args)
        if join is not None:
            writer.fail(steps[join].node, f"join step `{join}` follows no split", "a step taking `inputs` joins the "
                        "branches of one split or the items of one foreach")
        body = [*stmts, writer.located(ast.Return(ast.Name(last, ast.Load())), steps["end"].node)]
    except _Invalid:
        body = [ast.Return(ast.Constant(None))]
    args = [ast.copy_location(ast.arg(p.attr), p.node) for p in parameters]
    signature = ast.arguments(posonlyargs=[], args=args, vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
                              defaults=[p.default for p in parameters])
    fn = ast.FunctionDef(name=node.name, args=signature, body=body, decorator_list=[], returns=None,
                         type_comment=None, type_params=[])
    ast.copy_location(fn, node)
    fn.end_lineno, fn.end_col_offset = node.end_lineno, node.end_col_offset
    for stmt in fn.body:
        if not hasattr(stmt, "lineno"):
            _locate(stmt, (node.lineno, node.col_offset, node.lineno, node.col_offset + 5))
    return fn


def _name_span(info: ModuleInfo, node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> SourceSpan:
    from dagc.frontend.source import name_span

    return name_span(info.source, node)


class _Writer:
    """Writes the pipeline body: each step's call, in an order the transitions allow."""

    def __init__(self, project: Project, info: ModuleInfo, node: ast.ClassDef, steps: dict[str, FlowStep]) -> None:
        self.project, self.info, self.node, self.flow, self.steps = project, info, node, node.name, steps
        self.called: set[str] = set()
        # the steps a class of another module defines, and their transitions: reported in that module
        self.homes = {id(n): s.home for s in steps.values() if s.home is not None for n in (s.node, s.next_call)}

    def fail(self, where: ast.AST, message: str, hint: str) -> None:
        info = self.homes.get(id(where), self.info)
        span = _name_span(info, where) if isinstance(where, (ast.FunctionDef, ast.AsyncFunctionDef)) \
            else info.source.span(where)
        self.project.sink.error("DAGC117", message, span, hint=hint)
        raise _Invalid

    def located(self, stmt: ast.stmt, where: ast.AST) -> ast.stmt:
        """`stmt` with every node placed at `where`: a step's name in its `def`, or a transition (at the flow
        class's name, for a step a class of another module defines)."""
        if id(where) in self.homes:
            where = self.node
        if isinstance(where, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            line = self.info.source.lines[where.lineno - 1].encode("utf-8")  # (ast's columns count bytes)
            col = max(line.find(where.name.encode("utf-8"), where.col_offset), 0)
            _locate(stmt, (where.lineno, col, where.lineno, col + len(where.name.encode("utf-8"))))
        else:
            _locate(stmt, (where.lineno, where.col_offset, where.end_lineno or where.lineno,  # type: ignore[attr-defined]
                           where.end_col_offset or where.col_offset + 1))  # type: ignore[attr-defined]
        return stmt

    def statement(self, text: str, where: ast.AST) -> ast.stmt:
        return self.located(ast.parse(text).body[0], where)

    def call(self, step: FlowStep, args: list[str]) -> tuple[ast.stmt, str]:
        if step.name in self.called:
            self.fail(step.node, f"step `{step.name}` is reached twice", "each step runs once (per item of the "
                      "foreach it is in): join the branches of a split before going on; loops between steps are not "
                      "supported by dagc")
        self.called.add(step.name)
        var = f"_{step.name}"
        outputs = f"{var}, {var}_items" if step.transition == "foreach" else f"{var}, {var}_case" \
            if step.transition == "switch" else var
        return self.statement(f"{outputs} = {self.flow}.{step.name}({', '.join(args)})", step.node), var

    def chain(self, name: str, args: list[str], stop: frozenset[str] = frozenset()
              ) -> tuple[list[ast.stmt], str, str | None]:
        """Statements calling `name` and the steps after it, until `end`, a join of an enclosing split or a step
        in `stop` (where the cases of a switch meet): (statements, the variable of the last step's artifacts,
        that join or step, or None at `end`)."""
        stmts: list[ast.stmt] = []
        if self.steps[name].join or name in stop:  # a branch that goes straight to the join
            return stmts, args[0], name
        while True:
            step = self.steps[name]
            stmt, var = self.call(step, args)
            stmts.append(stmt)
            if step.transition == "end":
                if step.name != "end":  # (its missing transition is reported)
                    raise _Invalid
                return stmts, var, None
            if step.transition == "linear":
                following = self.steps[step.targets[0]]
                if following.join or following.name in stop:
                    return stmts, var, following.name
                name, args = following.name, [var]
                continue
            if step.transition == "split":
                lasts: list[str] = []
                joins: list[str | None] = []
                for target in step.targets:
                    inner, last, join = self.chain(target, [var])
                    stmts.extend(inner)
                    lasts.append(last)
                    joins.append(join)
                    if join is None:  # (before another branch reaches `end` too)
                        self._one_join(step, joins)
                name = self._one_join(step, joins)
                args = [f"[{', '.join(lasts)}]"]
                if name in stop:
                    self.fail(self.steps[name].node, f"join step `{name}` joins the cases of a switch",
                              "a join step joins the branches of one split or the items of one foreach")
                continue
            if step.transition == "switch":
                cases, name, var = self._switch(step, var, stop)
                stmts.extend(cases)
                if self.steps[name].join or name in stop:
                    return stmts, var, name
                args = [var]
                continue
            loop, name = self._foreach(step, var)
            stmts.extend(loop)
            args = [f"_{name}_inputs"]

    def _foreach(self, step: FlowStep, var: str) -> tuple[list[ast.stmt], str]:
        """`collected = []` and the `for` over the items' indices; the join step after it."""
        target = step.targets[0]
        assert step.next_call is not None
        if step.foreach == PARALLEL and not (self.steps[target].transition == "linear"
                                             and self.steps[self.steps[target].targets[0]].join):
            self.fail(step.next_call, f"@parallel step `{target}` does not go straight to a join step",
                      "Metaflow joins a @parallel step's tasks in the step right after it: write "
                      f"`self.next(self.join)` at the end of `{target}`, and `def join(self, inputs)`")
        inner, last, join = self.chain(target, [var, f"_{target}_index"])
        if join is None:
            self.fail(step.next_call, f"the foreach of step `{step.name}` is never joined",
                      "end the steps of each item at a join step (`def join(self, inputs)`)")
        collected = f"_{join}_inputs"
        loop = self.statement(f"for _{target}_index in {var}_items:\n    pass", step.next_call)
        assert isinstance(loop, ast.For)
        loop.body = [*inner, self.statement(f"{collected}.append({last})", step.next_call)]
        return [self.statement(f"{collected} = []", step.next_call), loop], join or ""

    def _switch(self, step: FlowStep, var: str, stop: frozenset[str]) -> tuple[list[ast.stmt], str, str]:
        """`if case == ...: <the case's steps>` for each case (the last one the `else`), each leaving its artifacts
        in one variable: the statements, the step where the cases meet, and that variable."""
        assert step.next_call is not None
        meet = self._meeting_step(step)
        chosen = f"{var}_next"
        branches: list[list[ast.stmt]] = []
        for target in step.targets:
            inner, last, reached = self.chain(target, [var], stop | {meet})
            if reached != meet:
                self.fail(step.next_call, f"the cases of step `{step.name}` do not meet at one step",
                          "every case of a conditional transition leads to the same step")
            branches.append([*inner, self.statement(f"{chosen} = {last}", step.next_call)])
        stmts = branches[-1]
        for case, body in reversed(list(zip(step.cases[:-1], branches[:-1]))):
            test = self.located(ast.parse(f"{var}_case == {case!r}").body[0], step.next_call)
            branch = ast.copy_location(ast.If(test.value, body, stmts), test)  # type: ignore[attr-defined]
            stmts = [branch]
        return stmts, meet, chosen

    def _meeting_step(self, step: FlowStep) -> str:
        """The first step every case of switch `step` reaches (a case may be it)."""
        assert step.next_call is not None
        reach = [self._reachable(t) for t in step.targets]
        if any(step.name in r for r in reach):
            self.fail(step.next_call, f"a case of step `{step.name}` leads back to it",
                      "loops through a conditional transition are not supported by dagc")
        common = set.intersection(*reach)
        meet = next((c for c in common if common <= self._reachable(c)), None)
        if meet is None:
            self.fail(step.next_call, f"the cases of step `{step.name}` do not meet at one step",
                      "every case of a conditional transition leads to the same step")
        return meet  # type: ignore[return-value]

    def _reachable(self, name: str) -> set[str]:
        seen: set[str] = set()
        todo = [name]
        while todo:
            current = todo.pop()
            if current not in seen:
                seen.add(current)
                todo.extend(self.steps[current].targets)
        return seen

    def _one_join(self, step: FlowStep, joins: list[str | None]) -> str:
        assert step.next_call is not None
        found = set(joins)
        if None in found or len(found) != 1:
            self.fail(step.next_call, f"the branches of step `{step.name}` do not meet at one join step",
                      "every branch of a split ends at the same step taking `inputs`")
        return joins[0]  # type: ignore[return-value]


def _locate(tree: ast.AST, where: tuple[int, int, int, int]) -> None:
    for node in ast.walk(tree):
        if "lineno" in node._attributes:
            node.lineno, node.col_offset, node.end_lineno, node.end_col_offset = where  # type: ignore[attr-defined]
