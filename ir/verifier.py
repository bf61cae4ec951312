"""Structural invariants of a Graph, checked in linear time after every pass.

    DAGC201  the graph has a cycle (the message gives the path; one note per task on it)
    DAGC202  an input is not bound: a `%ref` naming no parameter and no output, a dep naming no node,
             or a returned value nobody produces
    DAGC203  a value has more than one producer (two nodes, or a node and a parameter, or two
             parameters of one name)
    DAGC204  a task's resources or estimates are invalid (`TaskOptions.problems()`)
    DAGC205  malformed IR: unknown op, task without a target, no outputs, outputs and types of
             different lengths, an output listed twice, a node registered under another name, an
             operand that is not an IR operand, an argument given twice, or program order that is
             not a topological order (a node placed before a value or node it depends on)
    DAGC206  a node has no source location (span line 0)

Every diagnostic is an error placed at the node's span. `verify` never raises on a bad graph.
"""

from __future__ import annotations

from collections.abc import Iterator

from dagc.diagnostics import Diagnostic, Note, Severity

from .core import OPS, Graph, Node
from .location import SourceSpan
from .types import Const, Map, Operand, Ref, Seq, TaskOptions

__all__ = ["verify"]

_SCALARS = (type(None), bool, int, float, str)
_MISSING_SPAN_HINT = (
    "every node must point back at the user's code; a pass that creates a node should give it the "
    "span of the node it replaces"
)


def _error(out: list[Diagnostic], code: str, message: str, span: SourceSpan | None,
           hint: str | None = None, notes: tuple[Note, ...] = ()) -> None:
    out.append(Diagnostic(code, Severity.ERROR, message, span, hint, notes))


def _refs(operand: object, bad: list[str]) -> Iterator[str]:
    """Value names used by `operand`; malformed pieces are described in `bad` and skipped."""
    if isinstance(operand, Ref):
        if isinstance(operand.name, str):
            yield operand.name
        else:
            bad.append(f"reference to a non-string name {operand.name!r}")
    elif isinstance(operand, Const):
        if not isinstance(operand.value, _SCALARS):
            bad.append(f"constant of type {type(operand.value).__name__}")
    elif isinstance(operand, Seq):
        if operand.kind not in ("list", "tuple"):
            bad.append(f"sequence of kind {operand.kind!r}")
        for item in operand.items:
            yield from _refs(item, bad)
    elif isinstance(operand, Map):
        for pair in operand.items:
            if not (isinstance(pair, tuple) and len(pair) == 2):
                bad.append(f"dict item {pair!r} is not a (key, value) pair")
                continue
            yield from _refs(pair[0], bad)
            yield from _refs(pair[1], bad)
    else:
        bad.append(f"{type(operand).__name__} value {operand!r} is not an operand")


def _span(node: Node) -> SourceSpan | None:
    return node.span if isinstance(node.span, SourceSpan) else None


def _operands(node: Node, bad: list[str]) -> Iterator[Operand]:
    yield from node.args
    seen: set[str] = set()
    for item in node.kwargs:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
            bad.append(f"keyword argument {item!r} is not a (name, operand) pair")
            continue
        if item[0] in seen:
            bad.append(f"argument {item[0]!r} is given twice")
        seen.add(item[0])
        yield item[1]


def _find_cycle(preds: list[list[int]]) -> list[int] | None:
    """Indices along one cycle, in data-flow order, or None. Iterative DFS: linear time."""
    n = len(preds)
    color = bytearray(n)  # 0 unvisited, 1 on the current path, 2 done
    where = [0] * n  # position on the current path
    for start in range(n):
        if color[start]:
            continue
        path = [start]
        cursor = [0]
        color[start] = 1
        while path:
            v = path[-1]
            k = cursor[-1]
            edges = preds[v]
            if k < len(edges):
                cursor[-1] = k + 1
                w = edges[k]
                if color[w] == 0:
                    color[w] = 1
                    where[w] = len(path)
                    path.append(w)
                    cursor.append(0)
                elif color[w] == 1:
                    # path[where[w]:] follows "depends on" edges and v depends on w: reverse it
                    loop = path[where[w] :]
                    flow = [loop[0], *reversed(loop[1:])]
                    first = flow.index(min(flow))
                    return flow[first:] + flow[:first]
            else:
                color[v] = 2
                path.pop()
                cursor.pop()
    return None


def _edge_note(graph_nodes: list[Node], src: int, dst: int, params: set[str],
               producer: dict[str, int]) -> Note:
    node, before = graph_nodes[dst], graph_nodes[src]
    for operand in node.operands():
        for name in _refs(operand, []):
            if name not in params and producer.get(name) == src:
                return Note(f"`{node.name}` uses `%{name}` from `{before.name}`", _span(node))
    return Note(f"`{node.name}` runs after `{before.name}`", _span(node))


def verify(graph: Graph) -> list[Diagnostic]:
    """All invariant violations of `graph`, in program order (empty when the graph is valid)."""
    out: list[Diagnostic] = []
    items = list(graph._nodes.items())
    nodes = [node for _, node in items]

    # ---- parameters ----------------------------------------------------------------------------
    params: dict[str, SourceSpan] = {}
    for param in graph.params:
        if param.name in params:
            _error(out, "DAGC203", f"parameter `{param.name}` is declared twice", param.span,
                   notes=(Note("first declared here", params[param.name]),))
        else:
            params[param.name] = param.span
        bad: list[str] = []
        for _ in _refs(param.value, bad):
            pass
        for problem in bad:
            _error(out, "DAGC205", f"parameter `{param.name}` has a malformed value: {problem}", param.span)
    param_names = set(params)

    # ---- nodes: names, ops, outputs, options, spans ------------------------------------------------
    index: dict[str, int] = {}
    producer: dict[str, int] = {}
    names_seen: set[str] = set()
    for i, (key, node) in enumerate(items):
        index[key] = i
        span = _span(node)
        name = node.name
        if key != name:
            _error(out, "DAGC205", f"node `{name}` is registered in the graph under the name `{key}`", span,
                   hint="rename nodes with Graph.replace_node, not by assigning node.name")
        if name in names_seen:
            _error(out, "DAGC205", f"two nodes are named `{name}`", span)
        names_seen.add(name)
        if node.op not in OPS:
            _error(out, "DAGC205", f"node `{name}` has unknown op {node.op!r}", span,
                   hint=f"ops are: {', '.join(OPS)}")
        elif node.op == "task" and not node.target:
            _error(out, "DAGC205", f"task `{name}` has no target", span,
                   hint="a task's target names its function as module:qualname")
        if not node.outputs:
            _error(out, "DAGC205", f"node `{name}` has no outputs", span)
        if len(node.types) != len(node.outputs):
            _error(out, "DAGC205",
                   f"node `{name}` has {len(node.outputs)} outputs but {len(node.types)} types", span,
                   hint="`types` has one entry per output (None when unknown)")
        own: set[str] = set()
        for value in node.outputs:
            if value in own:
                _error(out, "DAGC205", f"node `{name}` lists output `%{value}` twice", span)
                continue
            own.add(value)
            if value in params:
                _error(out, "DAGC203", f"`%{value}` is both a parameter and an output of `{name}`", span,
                       notes=(Note(f"parameter `{value}` is declared here", params[value]),))
            first = producer.get(value)
            if first is None:
                producer[value] = i
            else:
                _error(out, "DAGC203",
                       f"value `%{value}` is produced by both `{nodes[first].name}` and `{name}`", span,
                       notes=(Note(f"first produced by `{nodes[first].name}`", _span(nodes[first])),),
                       hint="every value has exactly one producer; give one of them another name")
        options = node.options
        if not isinstance(options, TaskOptions):
            _error(out, "DAGC204", f"node `{name}` has options of type {type(options).__name__}", span)
        else:
            try:
                problems = options.problems()
            except (TypeError, ValueError) as exc:
                problems = [f"an option has the wrong type ({exc})"]
            for problem in problems:
                _error(out, "DAGC204", f"task `{name}`: {problem}", span)
        if span is None or span.line <= 0:
            _error(out, "DAGC206", f"node `{name}` has no source location", span, hint=_MISSING_SPAN_HINT)

    # ---- inputs and dependencies -----------------------------------------------------------------
    preds: list[list[int]] = [[] for _ in items]
    late: list[tuple[int, str, int]] = []  # (node, what it depends on, producer placed at or after it)
    for i, node in enumerate(nodes):
        span = _span(node)
        name = node.name
        edges = preds[i]
        bad = []
        for operand in _operands(node, bad):
            for value in _refs(operand, bad):
                if value in param_names:
                    continue
                j = producer.get(value)
                if j is None:
                    hint = None
                    if value in index and nodes[index[value]].outputs:
                        outs = ", ".join(f"%{v}" for v in nodes[index[value]].outputs)
                        hint = f"node `{value}` produces {outs}"
                    _error(out, "DAGC202", f"`{name}` uses `%{value}`, which no parameter or node produces",
                           span, hint=hint)
                    continue
                edges.append(j)
                if j > i:
                    late.append((i, f"`%{value}`", j))
        for problem in bad:
            _error(out, "DAGC205", f"node `{name}` has a malformed operand: {problem}", span)
        for dep in node.deps:
            j = index.get(dep) if isinstance(dep, str) else None
            if j is None:
                _error(out, "DAGC202", f"`{name}` must run after `{dep}`, but there is no node `{dep}`", span)
                continue
            edges.append(j)
            if j > i:
                late.append((i, f"node `{dep}`", j))
    if graph.returns is not None:
        bad = []
        for value in _refs(graph.returns, bad):
            if value not in param_names and value not in producer:
                _error(out, "DAGC202", f"the graph returns `%{value}`, which no parameter or node produces",
                       graph.span)
        for problem in bad:
            _error(out, "DAGC205", f"the graph's return value is malformed: {problem}", graph.span)

    # ---- acyclicity and program order --------------------------------------------------------------
    cycle = _find_cycle(preds)
    if cycle is not None:
        path = " -> ".join(f"`{nodes[i].name}`" for i in [*cycle, cycle[0]])
        notes = tuple(
            _edge_note(nodes, cycle[k - 1], cycle[k], param_names, producer) for k in range(len(cycle))
        )
        notes = notes[1:] + notes[:1]  # start with the note on the second task, end on the first
        _error(out, "DAGC201", f"cycle in the graph: {path}", _span(nodes[cycle[0]]),
               hint="a task cannot depend, directly or through other tasks, on its own result",
               notes=notes)
    else:
        for i, what, j in late:
            _error(out, "DAGC205",
                   f"`{nodes[i].name}` depends on {what} of `{nodes[j].name}`, which comes later in "
                   "program order", _span(nodes[i]),
                   hint="nodes are kept in a topological order; use Graph.reorder(graph.topological_order())")
    return out
