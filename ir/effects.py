"""Effects of IR nodes, and the state they share: the one place passes and backends ask about them.

The frontend records on each node what its task may do besides computing its result, in its typed
record `Node.effects` (dagc.ir.facts.Effects; docs/ir.md, "Effects and state"), whose fields print as:
  effects.mutates  value names the node may change in place (its arguments, as in plain Python)
  effects.io       why it may act on the world (prints, writes files, calls code dagc does not know)
  effects.rng      why it draws from (or seeds) a global random number generator
  effects.seeded   it seeds that generator itself, so its draws do not depend on earlier tasks
  effects.writes   module-level names it may change (`module.NAME`)
  effects.reads    module-level names it reads that some task may change
  effects.drawn    module-level names it reads that hold random numbers drawn at import with no seed
                   (`module.NAME: why`): every process draws its own, so the tasks reading one share a process
  effects.files    "read" or "write": it reads or writes files (ordering only, see below)
  effects.output   why it prints or logs (print, logging, warnings, progress bars, metric writers): an
                   output channel, kept by dce but never state, never ordered, never a reason not to cache
  effects.rng_advances  true: its draws advance the generator, but what it computes does not depend on them
  effects.fresh    true: every `return` of its body gives a new object, sharing nothing with its arguments
  effects.fresh_items  per item of the tuple every `return` gives: whether it is new (applies when the call
                   unpacks it into as many outputs)
  effects.varies   why its output may differ when it runs again on the same inputs (it reads the clock, the
                   process id, a fresh UUID): no effect (nothing is ordered, placed or kept by it), only a
                   reason for the local program to store the output rather than compute it again
A node with none of these (and a task declared `pure=True`) has no effects.

State: values that may share objects form alias classes (a node's result may share objects with
any of its inputs, unless it is of a scalar type or the task is declared `pure=True`). A class that something
mutates is *state*; the global RNG and each mutated module-level name are state too. Every node
that touches a piece of state runs in the one process that holds it, in program order: the
frontend adds the ordering edges (read after write, write after read, write after write), the
partitioner keeps the touching nodes on one device, and each backend runs them in one process.

Files are ordered, not placed: a node that writes files follows every earlier node that read or
wrote files, and a reader follows the last earlier writer (a checkpoint saved by one task and
loaded by a later one), wherever they run. Readers stay free to run in parallel. Where every file a
node touches is known at its call (`effects.paths`: {"read": [...], "write": [...]}), only nodes that may
touch one of those files are ordered with it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .core import Graph, Node
from .facts import FilePaths

__all__ = ["NodeEffects", "node_effects", "has_effects", "StateGroup", "state_groups", "state_cells", "order_by_effects",
           "final_writers", "changed_after_made", "RNG_CELL", "state_touches",
           "is_immutable_type", "immutable_values"]

RNG_CELL = "rng:global"
_SCALARS = frozenset({"int", "float", "str", "bool", "None", "bytes", "complex", "frozenset", "range", "Path",
                      "pathlib.Path", "PurePath", "pathlib.PurePath", "PosixPath", "pathlib.PosixPath", "datetime",
                      "datetime.datetime", "date", "datetime.date", "timedelta", "datetime.timedelta", "Decimal",
                      "decimal.Decimal", "Fraction", "fractions.Fraction", "torch.device", "torch.dtype",
                      "torch.Size", "Literal"})


@dataclass(frozen=True)
class NodeEffects:
    mutates: tuple[str, ...] = ()
    io: str | None = None
    rng: str | None = None
    writes: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()
    seeded: bool = False
    files: str | None = None  # "read" | "write"
    output: str | None = None  # prints or logs: kept, but not state
    # its draws only advance the generator: what it computes does not depend on them (SVC's fit)
    advances: bool = False
    drawn: tuple[str, ...] = ()  # `module.NAME: why` (effects.drawn)

    @property
    def depends_on_rng(self) -> bool:
        """It draws without seeding first, and what it computes depends on what it draws."""
        return bool(self.rng) and not self.seeded and not self.advances

    @property
    def any(self) -> bool:
        # a task that seeds the generator itself matters to later unseeded draws only, which are
        # ordered after it (and kept) by the state analysis
        return bool(self.mutates or self.io or (self.rng and not self.seeded) or self.writes or self.output)


def _members(node: Node) -> list[Node]:
    from .regions import members

    return members(node)


_NONE = NodeEffects()


def node_effects(node: Node) -> NodeEffects:
    """The effects a node records (a fused group: the union of its members')."""
    if node.op != "fused":  # one node: its record as it is
        e = node.effects
        declared = node.options.side_effects
        if not e and not declared:
            return _NONE  # the common case, asked of every node by several passes: keep it cheap
        views = e.__dict__.get("_views")  # (the record is frozen: its view never changes)
        if views is None:
            views = e.__dict__["_views"] = {}
        view = views.get(declared)
        if view is None:
            view = views[declared] = NodeEffects(
                e.mutated, e.io or ("declared side_effects=True" if declared else None), e.rng, e.writes, e.reads,
                bool(e.rng) and e.seeded, e.files, e.output, bool(e.rng) and e.rng_advances, e.drawn)
        return view
    nodes = [node, *_members(node)]
    mutates: dict[str, None] = {}
    writes: dict[str, None] = {}
    reads: dict[str, None] = {}
    drawn: dict[str, None] = {}
    io = rng = files = output = None
    seeded = advances = True
    for n in nodes:
        e = n.effects
        advances = advances and (e.rng_advances or not e.rng)
        output = output or e.output
        files = "write" if "write" in (files, e.files) else files or e.files
        seeded = seeded and (e.seeded or not e.rng)
        mutates.update(dict.fromkeys(e.mutated))
        writes.update(dict.fromkeys(e.writes))
        reads.update(dict.fromkeys(e.reads))
        drawn.update(dict.fromkeys(e.drawn))
        io = io or e.io or ("declared side_effects=True" if n.options.side_effects else None)
        rng = rng or e.rng
    return NodeEffects(tuple(mutates), io, rng, tuple(writes), tuple(reads), bool(rng) and seeded, files, output,
                       bool(rng) and advances, tuple(drawn))


def has_effects(node: Node) -> bool:
    """Whether removing or merging `node` could change what the program computes or does."""
    return node_effects(node).any


def is_immutable_type(type_text: str | None) -> bool:
    """A type whose values cannot change in place, whoever holds them: numbers, strings, bytes, `None`,
    `Path`, dates, devices, and built of those only: `Literal[...]` (always), `Optional[X]`, `X | None`,
    `Union[...]`, `tuple[...]` (`tuple[()]`, `tuple[X, ...]`), `frozenset[...]`, `Annotated[X, ...]`; a
    bare `tuple` says nothing of its items (no), a bare `frozenset` holds hashable items (yes). A quoted
    annotation is read as its text. The one predicate the frontend's effect analysis and the state
    analysis here share."""
    if not type_text:
        return False
    text = type_text.replace(" ", "").strip("'\"")
    for prefix in ("typing.", "t."):
        if text.startswith(prefix):
            text = text[len(prefix):]
    if text in _SCALARS:
        return True
    parts = _split_top(text, "|")
    if len(parts) > 1:
        return all(is_immutable_type(p) for p in parts)
    if not text.endswith("]"):
        return False
    head, _, inner = text[:-1].partition("[")
    if head == "Literal":
        return True
    if head == "Annotated":
        return is_immutable_type(_split_top(inner)[0])
    if head in ("tuple", "Tuple"):
        return inner == "()" or all(p == "..." or is_immutable_type(p) for p in _split_top(inner))
    if head in ("Optional", "Union", "frozenset", "FrozenSet"):
        return all(is_immutable_type(p) for p in _split_top(inner))
    return False


def _split_top(text: str, sep: str = ",") -> list[str]:
    """`text` split at `sep` outside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "["
        depth -= ch == "]"
        if ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


_is_scalar = is_immutable_type


def immutable_values(graph: Graph) -> set[str]:
    """The values of `graph` that cannot change in place: parameters of an immutable type or literal value,
    and task outputs of an immutable type (`-> str`). Reading one shares no state."""
    from .types import Const

    out = {p.name for p in graph.params if is_immutable_type(p.type) or (
        isinstance(p.value, Const) and _immutable_literal(p.value.value))}
    for node in graph:
        out.update(o for o, t in zip(node.outputs, node.types) if is_immutable_type(t))
    return out


def _immutable_literal(value: object) -> bool:
    if isinstance(value, tuple):
        return all(_immutable_literal(v) for v in value)
    return isinstance(value, (int, float, complex, str, bytes, bool, type(None), frozenset))


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        parent = self.parent.setdefault(x, x)
        while parent != x:
            grand = self.parent[parent]
            self.parent[x] = grand
            x, parent = parent, grand
        return x

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            # keep the smaller name as the root: deterministic whatever the order of unions
            if rb < ra:
                ra, rb = rb, ra
            self.parent[rb] = ra


@dataclass
class StateGroup:
    """One piece of state and everything that touches it. `name` is its first value in program order
    (or `rng:global`, `global:module.NAME`); `nodes` in program order; `why` names a mutating node
    and its reason, for messages."""

    name: str
    cells: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    why: str = ""


def _cells(node: Node, effects: NodeEffects, rng_shared: bool,
           immutable: set[str] | frozenset[str] = frozenset()) -> tuple[list[str], list[str], list[str]]:
    """(value cells the node reads, non-scalar value cells it produces, implicit cells it touches).
    The global RNG is shared state only when some task draws from it without seeding it first; a value that
    cannot change (`immutable`: an int parameter, a `-> str` result) is no cell: reading it links nothing."""
    inputs = [v for v in node.input_values() if v not in immutable]
    # a pure task's result is a new object (`pure=True` promises it shares nothing with its arguments)
    fresh = node.op == "transfer" or (node.op == "task" and node.options.pure)
    outputs = [] if fresh else [o for o, t in zip(node.outputs, node.types) if not _is_scalar(t)]
    implicit = [f"global:{name}" for name in (*effects.writes, *effects.reads)]
    implicit += [f"drawn:{entry.partition(': ')[0]}" for entry in effects.drawn]
    if effects.rng and rng_shared:
        implicit.append(RNG_CELL)
    return inputs, outputs, implicit


@dataclass
class _Analysis:
    cells: _UnionFind
    stateful: set[str]
    effects: dict[str, NodeEffects]
    reasons: dict[str, str]
    rng_shared: bool
    immutable: set[str] = field(default_factory=set)

    def touched(self, node: Node) -> list[str]:
        inputs, outputs, implicit = _cells(node, self.effects[node.name], self.rng_shared, self.immutable)
        found: dict[str, None] = {}
        for cell in (*inputs, *outputs, *implicit):
            root = self.cells.find(cell)
            if root in self.stateful:
                found.setdefault(root, None)
        return list(found)


def _analysis(graph: Graph) -> _Analysis:
    cells = _UnionFind()
    effects = {n.name: node_effects(n) for n in graph}
    # the generator is state when some task's result depends on its draws; those that only advance it (or seed
    # it) are then ordered with them
    rng_shared = any(e.depends_on_rng for e in effects.values())
    # a module-level value drawn at import is one object in the plain run, one per process here: state once two
    # nodes read it
    drawn_by: dict[str, list[str]] = {}
    drawn_why: dict[str, str] = {}
    for name, e in effects.items():
        for entry in e.drawn:
            cell, _, reason = entry.partition(": ")
            drawn_by.setdefault(cell, []).append(name)
            drawn_why.setdefault(cell, reason)
    shared_draws = {cell: readers for cell, readers in drawn_by.items() if len(readers) > 1}
    if not rng_shared and not shared_draws and not any(e.mutates or e.writes for e in effects.values()):
        return _Analysis(cells, set(), effects, {}, rng_shared)  # no state: nothing to group
    mutated: set[str] = set()
    why: dict[str, str] = {}
    immutable = immutable_values(graph)
    for node in graph:
        eff = effects[node.name]
        inputs, outputs, implicit = _cells(node, eff, rng_shared, immutable)
        # (a task the frontend found returns new objects only, `effects.fresh`: its outputs are cells of their own,
        # touched by it as their maker, but share none with its inputs)
        fresh = node.op == "task" and node.effects.fresh
        # (or, unpacked into as many outputs as the tuple it returns has items, those of them that are new)
        items = node.effects.fresh_items if node.op == "task" else None
        fresh_outputs = [node.outputs[k] for k, new in enumerate(items) if new] \
            if items is not None and len(items) == len(node.outputs) > 1 else []
        for out in fresh_outputs[1:]:  # new objects of one call may share among themselves (a model, its optimizer)
            cells.union(out, fresh_outputs[0])
        for out in outputs:
            cells.find(out)
            if node.op == "transfer" or fresh or out in fresh_outputs:
                continue
            for value in inputs:
                cells.union(out, value)
        for value in inputs:
            cells.find(value)
        for cell in implicit:
            cells.find(cell)
        for value in eff.mutates:
            mutated.add(value)
            why.setdefault(value, f"`{node.name}` may change it ({node.span})")
        if eff.rng and rng_shared:
            mutated.add(RNG_CELL)
            why.setdefault(RNG_CELL, f"`{node.name}` {eff.rng} ({node.span})")
        for name in eff.writes:
            mutated.add(f"global:{name}")
            why.setdefault(f"global:{name}", f"`{node.name}` changes `{name}` ({node.span})")
    for cell, readers in shared_draws.items():
        mutated.add(f"drawn:{cell}")
        why.setdefault(f"drawn:{cell}", f"{drawn_why[cell]}: each process would draw its own, so "
                       f"{', '.join(f'`{r}`' for r in readers)}, which read it, run in one (set a seed before it, "
                       "or make it in a task and pass it)")
    stateful = {cells.find(c) for c in mutated}
    reasons: dict[str, str] = {}
    for cell, text in sorted(why.items()):
        reasons.setdefault(cells.find(cell), text)
    return _Analysis(cells, stateful, effects, reasons, rng_shared, immutable)


def state_touches(graph: Graph) -> dict[str, list[str]]:
    """node -> the pieces of state it touches (their cells' roots, as `StateGroup.cells` names them)."""
    analysis = _analysis(graph)
    if not analysis.stateful:
        return {}
    out = {}
    for node in graph:
        if node.op != "transfer":
            found = analysis.touched(node)
            if found:
                out[node.name] = found
    return out


def state_groups(graph: Graph) -> list[StateGroup]:
    """The pieces of state of `graph` that must each live in one process, merged where one node
    touches several (it can run in only one process). Deterministic order: by first node."""
    analysis = _analysis(graph)
    if not analysis.stateful:
        return []
    reasons = analysis.reasons
    groups = _UnionFind()
    touching: dict[str, list[str]] = {}
    for node in graph:
        if node.op == "transfer":
            continue
        roots = analysis.touched(node)
        for root in roots:
            groups.union(roots[0], root)
        if roots:
            touching[node.name] = roots
    by_group: dict[str, StateGroup] = {}
    order: list[str] = []
    for node in graph:
        roots = touching.get(node.name)
        if not roots:
            continue
        key = groups.find(roots[0])
        group = by_group.get(key)
        if group is None:
            group = by_group[key] = StateGroup(name="")
            order.append(key)
        group.nodes.append(node.name)
        for root in roots:
            if root not in group.cells:
                group.cells.append(root)
                if not group.why:
                    group.why = reasons.get(root, "")
    out = []
    for key in order:
        group = by_group[key]
        group.name = group.cells[0]
        out.append(group)
    return out


def order_by_effects(graph: Graph) -> int:
    """Add the ordering edges that keep program order among the nodes touching each piece of state
    and among the nodes that touch files (read after write, write after read, write after write).
    Returns how many edges it added."""
    analysis = _analysis(graph)
    added = _order_files(graph, analysis.effects)
    if not analysis.stateful:
        return added
    cells, effects = analysis.cells, analysis.effects
    last_writer: dict[str, str] = {}
    readers: dict[str, list[str]] = {}
    for node in graph:
        if node.op == "transfer":
            continue
        eff = effects[node.name]
        roots = analysis.touched(node)
        if not roots:
            continue
        written = {cells.find(v) for v in eff.mutates}
        written |= {cells.find(f"global:{n}") for n in eff.writes}
        if eff.rng and analysis.rng_shared:
            written.add(cells.find(RNG_CELL))
        needed: dict[str, None] = {}
        for root in roots:
            if root in last_writer:
                needed.setdefault(last_writer[root], None)
            if root in written:
                needed.update(dict.fromkeys(readers.get(root, ())))
        for root in roots:
            if root in written:
                last_writer[root] = node.name
                readers[root] = []
            else:
                readers.setdefault(root, []).append(node.name)
        have = set(node.deps) | set(graph.predecessors(node.name))
        new = [d for d in needed if d != node.name and d not in have]
        if new:
            graph.set_deps(node.name, (*node.deps, *new))
            added += len(new)
    return added


def _order_files(graph: Graph, effects: dict[str, NodeEffects]) -> int:
    """Program order among the nodes that read or write files (they may name the same file). A node
    whose files are all known (`effects.paths`) is ordered only after nodes that may touch one of them:
    tasks writing statically different paths stay independent."""
    history: list[tuple[str, str, FilePaths | None]] = []  # (node, mode, paths) in program order
    added = 0
    for node in graph:
        mode = effects[node.name].files
        if mode is None or node.op == "transfer":
            continue
        paths = node.effects.paths if node.op == "task" else None
        needed = _file_predecessors(history, mode, paths)
        history.append((node.name, mode, paths))
        have = set(node.deps) | set(graph.predecessors(node.name))
        new = [d for d in needed if d != node.name and d not in have]
        if new:
            graph.set_deps(node.name, (*node.deps, *new))
            added += len(new)
    return added


def _file_predecessors(history: list[tuple[str, str, FilePaths | None]], mode: str,
                       paths: FilePaths | None) -> list[str]:
    """The earlier nodes a file access must follow: for a writer, every reader since the last
    conflicting write (and that write); for a reader, the last conflicting write."""
    needed: dict[str, None] = {}
    readers_since = False
    mine_written = None if paths is None else list(paths.write)
    mine_all = None if paths is None else [*paths.read, *paths.write]
    for name, other_mode, other in reversed(history):
        other_written = None if other is None else list(other.write)
        other_all = None if other is None else [*other.read, *other.write]
        if other_mode == "write" and _overlap(mine_all, other_written):
            needed.setdefault(name, None)
            if other is None or (mine_all is not None and set(mine_all) <= set(other_written or ())):
                # an earlier write of all these files: everything before it is ordered already, and a
                # reader found since follows it (so this write needs no edge of its own)
                if readers_since:
                    needed.pop(name, None)
                break
            continue
        if mode == "write" and _overlap(mine_written, other_all):
            needed.setdefault(name, None)  # a reader of the files this write changes
            readers_since = True
    return list(reversed(needed))


def _overlap(a: list[str] | None, b: list[str] | None) -> bool:
    """Whether two lists of files may name the same file (None: not known, so they may)."""
    if a is None or b is None:
        return True
    return any(_same_file(x, y) for x in a for y in b)


def _same_file(a: str, b: str) -> bool:
    """`a` and `b` may name one file, or one is a directory holding the other; a relative and an
    absolute path with the same last part may too (the working directory is not known here)."""
    if a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/"):
        return True
    if a.startswith("/") != b.startswith("/"):
        return a.rsplit("/", 1)[-1] == b.rsplit("/", 1)[-1]
    return False


def final_writers(graph: Graph, values: Iterable[str]) -> list[str]:
    """The last node (in program order) to change the state that any of `values` belongs to: reading
    those values at the end (the pipeline's result) must see that node's changes."""
    analysis = _analysis(graph)
    cells = analysis.cells
    wanted = {cells.find(v) for v in values} & analysis.stateful
    if not wanted:
        return []
    last: dict[str, str] = {}
    for node in graph:
        for value in analysis.effects[node.name].mutates:
            root = cells.find(value)
            if root in wanted:
                last[root] = node.name
    return sorted(set(last.values()))


def changed_after_made(graph: Graph, values: Iterable[str]) -> dict[str, str]:
    """Those of `values` that a node may change in place after the node that made them finished (a
    pipeline parameter: any node that changes it), each with the first such node. A stored output holds
    its value as it was when its task finished: for these, it is not what the pipeline ends with."""
    analysis = _analysis(graph)
    cells = analysis.cells
    wanted = {v: cells.find(v) for v in values}
    wanted = {v: root for v, root in wanted.items() if root in analysis.stateful}
    if not wanted:
        return {}
    made = {v for v in wanted if graph.producer(v) is None}  # values made so far, in program order (parameters)
    out: dict[str, str] = {}
    for node in graph:
        changed = {cells.find(v) for v in analysis.effects[node.name].mutates}
        for value, root in wanted.items():
            if value not in out and value in made and root in changed:
                out[value] = node.name
        made.update(node.outputs)
    return out


def state_cell_groups(graph: Graph) -> dict[str, int]:
    """Value name → the index (in `state_groups` order) of the piece of state it belongs to."""
    analysis = _analysis(graph)
    if not analysis.stateful:
        return {}
    index = {root: k for k, group in enumerate(state_groups(graph)) for root in group.cells}
    values = {v for n in graph for v in (*n.input_values(), *n.outputs)}
    found = {v: index.get(analysis.cells.find(v)) for v in sorted(values)}
    return {v: k for v, k in found.items() if k is not None}


def state_cells(graph: Graph) -> set[str]:
    """Value names that belong to a piece of state (they stay in the process holding it)."""
    analysis = _analysis(graph)
    if not analysis.stateful:
        return set()
    values = {v for n in graph for v in (*n.input_values(), *n.outputs)}
    return {v for v in values if analysis.cells.find(v) in analysis.stateful}
