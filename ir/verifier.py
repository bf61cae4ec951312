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

Region nodes (`cond`, `loop`, `map`, `try`; docs/ir.md) are checked inside too: they hold exactly the bodies of their
kind (and no other node holds any), their bodies must be well formed,
every value a body reads must be one of the region's operands, one of its block arguments or an
earlier output of the same body, and names defined inside must not clash with any other value.

Every diagnostic is an error placed at the node's span. `verify` never raises on a bad graph.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from dagc.diagnostics import Diagnostic, Note, Severity

from .core import ALL_OPS, NODE_BODIES, REGION_OPS, Graph, Node
from .location import SourceSpan
from .order import CycleError, topological_order
from .payload import Region
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
    """Indices along one cycle, in data-flow order, starting at the smallest, or None (dagc.ir.order, which
    starts a cycle at the item given first: here the smallest index)."""
    try:
        topological_order(range(len(preds)), preds.__getitem__)  # type: ignore[arg-type]
    except CycleError as exc:
        return list(exc.cycle)
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
    from .serialize import no_gc

    with no_gc():  # linear work on acyclic objects; collections triggered meanwhile only cost time
        return _verify(graph)


def _verify(graph: Graph) -> list[Diagnostic]:
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
    # (the nodes of one task share one frozen options object: checked once; the graph keeps each alive)
    checked_options: dict[int, list[str]] = {}
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
        if node.op not in ALL_OPS:
            _error(out, "DAGC205", f"node `{name}` has unknown op {node.op!r}", span,
                   hint=f"ops are: {', '.join(ALL_OPS)}")
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
            problems = checked_options.get(id(options))
            if problems is None:
                try:
                    problems = options.problems()
                except (TypeError, ValueError) as exc:
                    problems = [f"an option has the wrong type ({exc})"]
                checked_options[id(options)] = problems
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

    # ---- regions -------------------------------------------------------------------------------------
    defined: set[str] = set(producer) | param_names
    for node in nodes:
        if node.op in REGION_OPS:
            _check_region(node, defined, set(index), out)
        elif _stray_bodies(node) is not None:
            _error(out, "DAGC205", f"node `{node.name}`: {_stray_bodies(node)}", _span(node))

    # ---- the graph's own indexes (kept by the nodes' setters; stale only after a write behind them) ---------
    stale = graph.stale_index()
    if stale is not None:
        _error(out, "DAGC205", f"the graph's index of {stale} is out of date: a node was changed behind its "
               "setters (through `node.__dict__`)", graph.span, hint="set node fields as attributes, or call "
               "Graph.invalidate() after such a change")

    # ---- acyclicity and program order --------------------------------------------------------------
    # (a cycle needs an edge from a later node: with none, program order is a topological order)
    cycle = _find_cycle(preds) if late or any(i in edges for i, edges in enumerate(preds)) else None
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


# ---- regions -----------------------------------------------------------------------------------------
def _body(node: Node, key: str, problems: list[str]) -> list[Node] | None:
    body = node.bodies.get(key)
    if not isinstance(body, list) or not all(isinstance(inner, Node) for inner in body):
        problems.append(f"its `{key}` body is missing or is not a list of nodes")
        return None
    return body


def _stray_bodies(node: Node) -> str | None:
    """What is wrong with the set of bodies `node` holds, if anything."""
    expected = NODE_BODIES.get(node.op, ())
    extra = sorted(set(node.bodies) - set(expected))
    if extra:
        what = f"a `{node.op}` region has no" if node.op in REGION_OPS else f"a `{node.op}` node has no"
        return f"{what} `{extra[0]}` body"
    if node.region is not None and node.op not in REGION_OPS:
        return f"a `{node.op}` node has no region payload"
    return None


def _check_region(node: Node, defined: set[str], outer_nodes: set[str], out: list[Diagnostic]) -> None:
    """Structure and scoping of one region node; `defined` collects every value name seen so far."""
    span = _span(node)
    attrs = node.attrs if isinstance(node.attrs, dict) else {}
    problems: list[str] = []
    captured: set[str] = set()
    for operand in node.args:
        captured.update(_refs(operand, []))
    n_out = len(node.outputs)
    single = node.outputs == (node.name,)

    region = node.region if node.region is not None else Region()
    if node.region is None:
        problems.append("it has no payload (what its bodies yield)")

    def yields(label: str, count_ok: bool = True) -> list[Operand] | None:
        if label not in region.yields:
            problems.append(f"its `{label}` body yields nothing (a block ends with `yield`, even an empty one)")
            return None
        ops = list(region.yields[label])
        if count_ok and len(ops) != n_out and not (not ops and single):
            problems.append(f"its `{label}` body yields {len(ops)} values for {n_out} outputs")
        return ops

    stray_args = sorted(set(region.args) - ({"body"} if node.op in ("loop", "map") else set()))
    if stray_args:
        problems.append(f"its `{stray_args[0]}` body takes no block arguments")
    if node.op != "loop" and (region.iter is not None or region.exit is not None):
        problems.append("only a loop has items to iterate over and an early exit")
    if node.op != "map" and region.init:
        problems.append("only a map has initial lists")
    bodies: list[tuple[str, list[Node], set[str], list[Operand], int | None, list[Operand]]] = []
    stray = _stray_bodies(node)
    if stray is not None:
        problems.append(stray)
    if node.op == "cond":
        if not node.args:
            problems.append("a cond node's first operand is its predicate")
        for label in ("then", "else"):
            body = _body(node, label, problems)
            ys = yields(label)
            if body is not None and ys is not None:
                bodies.append((label, body, set(), ys, None, []))
    elif node.op == "map":
        _check_map(node, attrs, region, captured, problems, bodies, yields)
    elif node.op == "try":
        # outputs: the body's yields, then the finally body's; the finally body sees only the region's
        # operands (in Python a value its body would have assigned may be unbound there)
        ys_all: list[Operand] = []
        for label in ("body", "finally"):
            body = _body(node, label, problems)
            ys = yields(label, count_ok=False)
            if body is not None and ys is not None:
                bodies.append((label, body, set(), ys, None, []))
                ys_all += ys
        if len(bodies) == 2 and len(ys_all) != n_out and not (not ys_all and single):
            problems.append(f"the bodies yield {len(ys_all)} values for {n_out} outputs")
    else:
        carried = list(region.args.get("body", ()))
        if len(node.args) < len(carried):
            problems.append(f"a loop with {len(carried)} carried values needs as many initial operands")
        if len(carried) != n_out and not (not carried and single):
            problems.append(f"a loop with {len(carried)} carried values has {n_out} outputs")
        iter_ = region.iter
        if iter_ is None:
            problems.append("it names no items to iterate over (`body over [...]`)")
        else:
            if not isinstance(iter_, Seq):
                problems.append("its items must be a list or tuple operand")
            missing = set(_refs(iter_, [])) - captured
            if missing:
                problems.append(f"its items use `%{sorted(missing)[0]}`, which is not an operand of the loop")
        body = _body(node, "body", problems)
        ys = yields("body", count_ok=False)
        if ys is not None and len(ys) != len(carried):
            problems.append(f"its body yields {len(ys)} values for {len(carried)} carried values")
        exit_ = region.exit
        at: int | None = None
        brk_ops: list[Operand] = []
        if exit_ is not None:
            at = exit_.at
            if body is not None and not 0 <= at <= len(body):
                problems.append(f"its early exit at {at} is outside the body")
            if len(exit_.values) != len(carried):
                problems.append("its early exit needs one value per carried value")
            brk_ops = [exit_.cond, *exit_.values]
        if body is not None and ys is not None:
            bodies.append(("body", body, set(carried), ys, at, brk_ops))
    for problem in problems:
        _error(out, "DAGC205", f"region `{node.name}`: {problem}", span)
    if problems:
        return
    for value in [v for _, _, args, _, _, _ in bodies for v in args]:
        if value in defined:
            _error(out, "DAGC203", f"block argument `%{value}` of region `{node.name}` clashes with another value",
                   span)
        defined.add(value)
    for label, body, block_args, ys, at, brk_ops in bodies:
        visible = captured | block_args
        inner_nodes: set[str] = set()
        for position, inner in enumerate(body):
            if at is not None and position == at:
                _check_uses(node, label, brk_ops, visible, out, "its early exit")
            ispan = _span(inner) or span
            if inner.op not in ALL_OPS:
                _error(out, "DAGC205", f"node `{inner.name}` in region `{node.name}` has unknown op {inner.op!r}",
                       ispan)
            elif inner.op == "task" and not inner.target:
                _error(out, "DAGC205", f"task `{inner.name}` has no target", ispan)
            if not inner.outputs or len(inner.types) != len(inner.outputs):
                _error(out, "DAGC205", f"node `{inner.name}` in region `{node.name}` has malformed outputs", ispan)
            for problem in inner.options.problems():
                _error(out, "DAGC204", f"task `{inner.name}`: {problem}", ispan)
            if ispan is None or ispan.line <= 0:
                _error(out, "DAGC206", f"node `{inner.name}` has no source location", ispan,
                       hint=_MISSING_SPAN_HINT)
            bad: list[str] = []
            for operand in _operands(inner, bad):
                for value in _refs(operand, bad):
                    if value not in visible:
                        _error(out, "DAGC202", f"`{inner.name}` in region `{node.name}` uses `%{value}`, which is "
                               "neither an operand of the region nor produced earlier in its body", ispan,
                               hint="a region lists every outer value its body reads among its operands")
            for problem in bad:
                _error(out, "DAGC205", f"node `{inner.name}` has a malformed operand: {problem}", ispan)
            for dep in inner.deps:
                if dep not in inner_nodes and (dep not in outer_nodes or dep not in node.deps):
                    _error(out, "DAGC202", f"`{inner.name}` in region `{node.name}` must run after `{dep}`, which "
                           "is neither earlier in its body nor a dependency of the region", ispan)
            if inner.op in REGION_OPS:
                _check_region(inner, defined, outer_nodes | inner_nodes, out)
            elif _stray_bodies(inner) is not None:
                _error(out, "DAGC205", f"node `{inner.name}` in region `{node.name}`: {_stray_bodies(inner)}", ispan)
            inner_nodes.add(inner.name)
            for value in inner.outputs:
                if value in defined:
                    _error(out, "DAGC203", f"value `%{value}` in region `{node.name}` has more than one producer",
                           ispan, hint="names inside regions are unique in the whole graph")
                defined.add(value)
                visible.add(value)
        if at is not None and at == len(body):
            _check_uses(node, label, brk_ops, visible, out, "its early exit")
        _check_uses(node, label, ys, visible, out, f"its {label} result")


def _positive_or_none(value: object) -> bool:
    return value is None or (type(value) is int and value > 0)


def _check_map(node: Node, attrs: dict, region: Region, captured: set[str], problems: list[str], bodies: list,
               yields: Callable[..., list[Operand] | None]) -> None:
    """A map: `region.over` leading operands iterated together, its item names (the body's block
    arguments), a body, and per output an initial list and the list each item appends (its yield)."""
    items = list(region.args.get("body", ()))
    if not items:
        problems.append("its body names no item (`body(%item):`)")
    over = attrs.get("region.over")
    if type(over) is not int or not 1 <= over <= len(node.args):
        problems.append("`region.over` must count the leading operands the map iterates over (at least 1)")
    method = attrs.get("region.method")
    if method is not None and (method not in ("items", "keys", "values") or over != 1):
        problems.append("`region.method` must be null or `items`, `keys` or `values` of the map's one iterable")
    start = attrs.get("region.enumerate")
    if start is not None and type(start) is not int:
        problems.append("`region.enumerate` must be null or the start of the item index")
    for key in ("region.max_items", "region.concurrency"):
        if not _positive_or_none(attrs.get(key)):
            problems.append(f"`{key}` must be null or a positive whole number")
    width = attrs.get("region.width")
    if width is not None and (isinstance(width, bool) or not isinstance(width, (int, float)) or width < 0):
        problems.append("`region.width` must be a number of items, at least 0")
    inits = list(region.init)
    if len(inits) != len(node.outputs) and not (not inits and node.outputs == (node.name,)):
        problems.append(f"it has {len(inits)} initial lists for {len(node.outputs)} outputs")
    missing = {v for o in inits for v in _refs(o, [])} - captured
    if missing:
        problems.append(f"its initial lists use `%{sorted(missing)[0]}`, which is not an operand of the map")
    body = _body(node, "body", problems)
    ys = yields("body")
    if ys is not None and not all(isinstance(y, Seq) and y.kind == "list" for y in ys):
        problems.append("its body yields one list operand per output (the values an item appends)")
    if body is not None and ys is not None:
        bodies.append(("body", body, set(items), ys, None, []))


def _check_uses(node: Node, label: str, operands: list[Operand], visible: set[str], out: list[Diagnostic],
                what: str) -> None:
    for operand in operands:
        for value in _refs(operand, []):
            if value not in visible:
                _error(out, "DAGC202", f"region `{node.name}` uses `%{value}` in {what}, which is not visible there",
                       _span(node))
