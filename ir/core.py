"""The IR graph: task nodes that produce named values, and the values they consume.

A `Graph` holds its nodes in program order (a topological order when the graph is valid). Edges
are derived from the operands that nodes consume and from explicit ordering dependencies, so there
is one source of truth; the graph builds a users index (value → readers) and a waiters index (node →
nodes ordered after it) at their first use, keeps them current as nodes change, and orders nodes with the
one helper of dagc.ir.order.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .facts import FACT_PREFIXES, NO_EFFECTS, UNPLACED, Comm, Effects, Placement, record_attrs, split_attrs
from .location import SourceSpan
from .order import CycleError, topological_order
from .payload import Region
from .types import Operand, TaskOptions, iter_refs

__all__ = ["Node", "Param", "Graph", "OPS", "MODULE_VALUE_ATTR", "DIALECT_ATTR", "KEEP_ATTR", "SCRIPT_ARGUMENTS_ATTR", "REGION_OPS", "ALL_OPS", "REGION_BODIES", "NODE_BODIES", "output_name",
           "region_bodies", "body_names", "clone_node"]

# Node kinds. `task` calls a user function; `fused` runs its members (its body `members`) in order;
# `transfer` moves a value between devices (inserted by the comm pass); `glue` evaluates a small
# expression on task results where its inputs are.
OPS = ("task", "fused", "transfer", "glue")
# A `task` node with this attribute reads a module-level object of the user's (`DEVICE = torch.device(...)`,
# `env = gym.make(...)`) instead of calling it: its target names the object as `module:NAME`, and every
# process that runs it has imported that module, as the plain run did.
MODULE_VALUE_ATTR = "task.module_value"
# A `task` node with this attribute runs a function written for another framework (its value names the
# dialect: "metaflow", "kfp", ...): programs call it through `dagc.runtime.dialects.adapt(dialect, fn)`, which
# unwraps the framework's decorator and gives the function what that framework would (dagc.frontend.dialects).
DIALECT_ATTR = "task.dialect"
# A `task` node its framework always runs (KFP runs every component of a pipeline, once): `dce` keeps it even when
# nothing reads its result. It is stored and reused as any task is (unlike `side_effects=True`).
KEEP_ATTR = "task.keep"
# The graph attribute that describes the argparse parser a pipeline body builds and the values it parsed at
# compile time (dagc.frontend.arguments); programs parse the script's arguments with it again when they start.
SCRIPT_ARGUMENTS_ATTR = "script.arguments"
# Region kinds (docs/ir.md): `cond` runs one of two bodies on a run-time predicate; `loop` runs its
# body at most len(iter) times, leaving early on a run-time value; `map` runs its body once per item of
# a run-time list (data-dependent fan-out), collecting the values it appends; `try` runs its body, then
# its `finally` body whether the body succeeded or failed (then the failure goes on). A region node
# owns its bodies (`Node.bodies`, lists of Nodes in program order), so a pass that does not look
# inside treats a region as one node; dagc.ir.regions answers what is inside.
REGION_OPS = ("cond", "loop", "map", "try")
ALL_OPS = OPS + REGION_OPS
# The bodies each region kind holds, in the order they are printed and walked.
REGION_BODIES: dict[str, tuple[str, ...]] = {"cond": ("then", "else"), "loop": ("body",), "map": ("body",),
                                             "try": ("body", "finally")}
# The bodies every kind of node may hold: a region's, and a fused group's members (which, unlike a
# region's body, read outer values directly: they ran as top-level nodes before they were fused).
NODE_BODIES: dict[str, tuple[str, ...]] = {**REGION_BODIES, "fused": ("members",)}


def region_bodies(node: Node) -> dict[str, list[Node]]:
    """The bodies of a region node by name (`{"then": [...], "else": [...]}`); {} for other ops.

    The lists are the node's own: a pass that edits a body edits the region."""
    return {key: node.bodies.setdefault(key, []) for key in REGION_BODIES.get(node.op, ())}


def body_names(node: Node) -> list[str]:
    """The bodies `node` is written with: its kind's, in order, then any others it holds (sorted)."""
    known = list(NODE_BODIES.get(node.op, ()))
    return known + sorted(key for key in node.bodies if key not in known)


def clone_node(node: Node) -> Node:
    """A copy of `node` that shares nothing mutable with it (attrs and bodies are copied too)."""
    twin = copy.copy(node)
    twin.attrs = copy.deepcopy(node.attrs)
    twin.bodies = {key: [clone_node(inner) for inner in body] for key, body in node.bodies.items()}
    twin.region = None if node.region is None else node.region.copy()
    return twin


def _nested(node: Node) -> Iterator[Node]:
    """Every node inside `node`'s bodies, depth first."""
    for body in node.bodies.values():
        for inner in body:
            yield inner
            yield from _nested(inner)


def _forget(index: dict[str, dict[str, None]], keys: Iterable[str], name: str) -> None:
    """Take node `name` out of `index`'s entries for `keys` (an entry left empty goes)."""
    for key in keys:
        entry = index.get(key)
        if entry is not None:
            entry.pop(name, None)
            if not entry:
                del index[key]


def _fields_read(node: Node) -> tuple[Any, ...]:
    """The field objects the graph's indexes were read from (a write behind the setters replaces one of them)."""
    return (node.args, node.kwargs, node.region, node.deps, node.outputs)


def _names_read(node: Node) -> tuple[str, ...]:
    """Every value name `node` names anywhere (dagc.ir.regions.operands_read), once each; () when an operand is
    malformed (the verifier reports it)."""
    from .regions import operands_read

    try:
        if not node.bodies and node.region is None and not node.effects.mutates \
                and not _names_values(node.comm):  # (the common case: its operands)
            return tuple(node.input_values())
        return tuple(dict.fromkeys(name for operand in operands_read(node) for name in iter_refs(operand)))
    except (TypeError, ValueError, AttributeError):
        return ()


def output_name(node_name: str, index: int, count: int) -> str:
    """Value name of a node's `index`-th output: `name` for a single output, else `name#index`."""
    return node_name if count == 1 else f"{node_name}#{index}"


# the node fields the graph's indexes follow (what it reads, what it makes, what it waits for; what it names
# anywhere inside: its region payload, its bodies, its typed records)
_INDEXED = frozenset({"args", "kwargs", "outputs", "deps", "region", "bodies"})
_RECORDS = frozenset({"effects", "comm"})


def _names_values(record: Any) -> bool:
    return record is not None and bool(getattr(record, "mutates", None) or getattr(record, "operands", None))


@dataclass(eq=False, init=False)
class Node:
    """One unit of work.

    `target` names the Python callable as `module:qualname` (for `task`); `args`/`kwargs` are the
    operands as written at the call site; `outputs` names the values produced (a call unpacked into
    several names has several; by convention `name`, or `name#0`, `name#1`, … — see `output_name`),
    with `types` giving each one's declared type when known. `deps` are explicit ordering
    dependencies on other nodes.
    `effects`, `placement` and `comm` are the typed records passes write and read (dagc.ir.facts: what the
    task may do besides computing its result; the device and times `partition` and `schedule` gave it; what a
    transfer moves or a reduction sums); `attrs` holds other pass results under namespaced keys such as
    `stages.stage`. A region node
    (`cond`, `loop`, `map`, `try`) owns its `bodies`: named lists of the nodes it runs (see REGION_BODIES); their
    names and values are unique in the whole graph, and they read outer values only through the
    region's operands. Its `region` is the payload that ties the bodies to the node: what each body
    yields, its block arguments, a loop's items and early exit (dagc.ir.payload). A `fused` node holds
    its members in the body `members`.
    """

    name: str
    op: str
    target: str
    args: tuple[Operand, ...] = ()
    kwargs: tuple[tuple[str, Operand], ...] = ()
    outputs: tuple[str, ...] = ()
    types: tuple[str | None, ...] = ()
    options: TaskOptions = field(default_factory=TaskOptions)
    span: SourceSpan = field(default_factory=lambda: SourceSpan("<unknown>", 0, 0))
    deps: tuple[str, ...] = ()
    attrs: dict[str, Any] = field(default_factory=dict)
    bodies: dict[str, list[Node]] = field(default_factory=dict)
    region: Region | None = None
    effects: Effects = NO_EFFECTS
    placement: Placement = UNPLACED
    comm: Comm | None = None

    def __init__(self, name: str, op: str, target: str, args: tuple[Operand, ...] = (),
                 kwargs: tuple[tuple[str, Operand], ...] = (), outputs: tuple[str, ...] = (),
                 types: tuple[str | None, ...] = (), options: TaskOptions | None = None, span: SourceSpan | None = None,
                 deps: tuple[str, ...] = (), attrs: dict[str, Any] | None = None,
                 bodies: dict[str, list[Node]] | None = None, region: Region | None = None,
                 effects: Effects = NO_EFFECTS, placement: Placement = UNPLACED, comm: Comm | None = None) -> None:
        # written out (not the dataclass's): one dict update instead of a setter call per field, for the
        # tens of thousands of nodes a large pipeline makes
        self.__dict__.update(
            name=name, op=op, target=target, args=args, kwargs=kwargs, outputs=outputs, types=types,
            options=TaskOptions() if options is None else options,
            span=SourceSpan("<unknown>", 0, 0) if span is None else span, deps=deps,
            attrs={} if attrs is None else attrs, bodies={} if bodies is None else bodies, region=region,
            effects=effects, placement=placement, comm=comm)
        self.__post_init__()

    def __setattr__(self, key: str, value: Any) -> None:
        if key in _RECORDS:  # a record re-indexes the node only when it names values (what a task mutates)
            old = self.__dict__.get(key)
            object.__setattr__(self, key, value)
            if _names_values(old) or _names_values(value):
                owner = self.__dict__.get("_owner")
                if owner is not None:
                    owner._reindex(self)
            return
        replaced = self.__dict__.get(key) if key == "outputs" else None  # (the producers it leaves)
        object.__setattr__(self, key, value)
        if key == "attrs":
            self._route_facts()
        elif key in _INDEXED:  # the graph that holds this node keeps its users index current
            owner = self.__dict__.get("_owner")
            if owner is not None:
                owner._reindex(self, replaced)

    def __getstate__(self) -> dict[str, Any]:
        # a copy (or a pickle) belongs to no graph until one adds it
        state = dict(self.__dict__)
        state.pop("_owner", None)
        state.pop("_root", None)
        return state

    def _route_facts(self) -> None:
        """Typed fields given among `attrs` in their text-form spelling (`{"partition.device": 0}`) go to their
        records (raises dagc.ir.facts.FactError for a value of the wrong shape)."""
        if self.attrs and any(key.startswith(FACT_PREFIXES) for key in self.attrs):
            rest, effects, placement, comm = split_attrs(self.attrs)
            object.__setattr__(self, "attrs", rest)
            self.effects = effects if not self.effects else self.effects
            self.placement = placement if not self.placement else self.placement
            self.comm = comm if self.comm is None else self.comm

    def __post_init__(self) -> None:
        self._route_facts()
        if self.region is None and self.op in REGION_BODIES:
            self.region = Region()
        if not self.outputs:
            self.outputs = (self.name,)
        if len(self.types) != len(self.outputs):
            self.types = tuple(self.types[i] if i < len(self.types) else None for i in range(len(self.outputs)))

    def attributes(self) -> dict[str, Any]:
        """Its attributes and typed records together, keyed as the text form prints them
        (`{"partition.device": 0, "effects.rng": "…", "stages.stage": 1}`)."""
        if not self.effects and not self.placement and self.comm is None:
            return dict(self.attrs)
        return {**self.attrs, **record_attrs(self.effects, self.placement, self.comm)}

    @property
    def devices(self) -> tuple[int, ...]:
        """The device(s) `partition` placed this node on; () before it ran."""
        return self.placement.devices

    @property
    def n_outputs(self) -> int:
        return len(self.outputs)

    def operands(self) -> Iterator[Operand]:
        yield from self.args
        for _, value in self.kwargs:
            yield value

    def input_values(self) -> list[str]:
        """Distinct value names this node reads, in first-use order."""
        seen: dict[str, None] = {}
        for operand in self.operands():
            for name in iter_refs(operand):
                seen.setdefault(name, None)
        return list(seen)

    @property
    def module(self) -> str:
        return self.target.partition(":")[0]

    @property
    def function(self) -> str:
        return self.target.partition(":")[2]


@dataclass(eq=False)
class Param:
    """A pipeline parameter with the value it has in this compilation (its default or `--param`)."""

    name: str
    value: Operand
    type: str | None = None
    span: SourceSpan = field(default_factory=lambda: SourceSpan("<unknown>", 0, 0))


class Graph:
    """A compiled pipeline.

    The graph owns the nodes it holds (each knows its graph) and keeps, for each value, the nodes that read
    it, and for each node, the nodes that wait for it by an ordering dependency (both built when first asked
    for): a node's setters keep them current (as xDSL's operand setters and torch.fx's `args` setter keep
    uses), so `consumers`, `successors` and `replace_uses` never scan the whole graph."""

    def __init__(
        self,
        name: str,
        *,
        root: str = ".",
        module: str = "",
        params: Iterable[Param] = (),
        returns: Operand | None = None,
        modules: dict[str, str] | None = None,
        span: SourceSpan | None = None,
        attrs: dict[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.root = root  # directory that module files are relative to, as the user gave it
        self.module = module  # the entry module, e.g. "quickstart"
        self.params: list[Param] = list(params)
        self.returns = returns
        self.modules: dict[str, str] = dict(modules or {})  # module name -> file relative to root
        self.span = span or SourceSpan("<unknown>", 0, 0)
        self.attrs: dict[str, Any] = dict(attrs or {})
        self._nodes: dict[str, Node] = {}
        self._producer: dict[str, str] = {}  # value name -> node name
        self._users: dict[str, dict[str, None]] = {}  # value name -> the nodes that read it
        self._waiters: dict[str, dict[str, None]] = {}  # node name -> the nodes with an ordering dep on it
        # node name -> (values it names, its deps, its outputs, the field objects they were read from)
        self._indexed: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[Any, ...]]] = {}
        # the users and waiters indexes are built at their first use, in one pass: extraction adds tens of
        # thousands of nodes, and `dagc check` (verify, dce, cse) seldom asks who reads a value
        self._indexes_built = False
        self._position: dict[str, int] = {}  # program order (increasing, not dense)
        self._next_position = 0

    # ---- nodes -------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Node]:
        return iter(list(self._nodes.values()))

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, name: object) -> bool:
        return name in self._nodes

    @property
    def nodes(self) -> list[Node]:
        return list(self._nodes.values())

    def node(self, name: str) -> Node:
        return self._nodes[name]

    def add_node(self, node: Node) -> Node:
        if node.name in self._nodes:
            raise ValueError(f"duplicate node name {node.name!r}")
        self._adopt(node, self._next_position)
        self._next_position += 1
        return node

    def remove_node(self, name: str) -> Node:
        node = self._nodes.pop(name)
        self._unindex(node)
        self._drop_producers(node, node.outputs)
        del self._position[name]
        node.__dict__.pop("_owner", None)
        return node

    def replace_node(self, old: str, new: Node) -> None:
        """Put `new` where `old` was in program order (it may have a different name)."""
        position = self._position[old]
        items = list(self._nodes.items())
        self.remove_node(old)
        self._nodes.clear()
        for name, node in items:
            if name == old:
                self._adopt(new, position)
            else:
                self._nodes[name] = node
        self._rebuild_producers()

    def reorder(self, names: Iterable[str]) -> None:
        """Set the program order to `names`, which must be a permutation of the node names."""
        order = list(names)
        if sorted(order) != sorted(self._nodes):
            raise ValueError("reorder() needs every node exactly once")
        self._nodes = {name: self._nodes[name] for name in order}
        self._position = {name: i for i, name in enumerate(order)}
        self._next_position = len(order)

    def _adopt(self, node: Node, position: int) -> None:
        previous = node.__dict__.get("_owner")
        if previous is not None and previous is not self and node.name in previous._nodes \
                and previous._nodes[node.name] is node:
            raise ValueError(f"node {node.name!r} belongs to another graph (add a copy: dagc.ir.clone_node)")
        self._nodes[node.name] = node
        self._position[node.name] = position
        node.__dict__["_owner"] = self
        self._add_producers(node)
        if self._indexes_built:
            self._index(node)

    def _ensure_indexes(self) -> None:
        if not self._indexes_built:
            self._indexes_built = True
            for node in self._nodes.values():
                self._index(node)

    def _add_producers(self, node: Node) -> None:
        for value in node.outputs:
            # a second producer is kept out of the map; the verifier reports it
            self._producer.setdefault(value, node.name)

    def _drop_producers(self, node: Node, outputs: Iterable[str]) -> None:
        lost = [value for value in outputs if self._producer.get(value) == node.name]
        for value in lost:
            del self._producer[value]
        for value in lost:  # another node that also makes it (an invalid graph) becomes its producer
            for other in self._nodes.values():
                if other is not node and value in other.outputs:
                    self._producer[value] = other.name
                    break

    def _index(self, node: Node) -> None:
        reads = _names_read(node)
        if node.bodies:
            for inner in _nested(node):  # a change inside its bodies re-indexes the node that holds them
                inner.__dict__["_owner"] = self
                inner.__dict__["_root"] = node.name
        for value in reads:
            self._users.setdefault(value, {})[node.name] = None
        for dep in node.deps:
            self._waiters.setdefault(dep, {})[node.name] = None
        self._indexed[node.name] = (reads, tuple(node.deps), _fields_read(node))

    def _unindex(self, node: Node) -> None:
        if self._indexes_built:
            reads, deps, _ = self._indexed.pop(node.name)
            _forget(self._users, reads, node.name)
            _forget(self._waiters, deps, node.name)

    def _reindex(self, node: Node, replaced_outputs: tuple[str, ...] | None = None) -> None:
        """Called by a node's setters: its reads, deps or outputs changed (or those of a node in its bodies);
        `replaced_outputs` are its outputs before a change of them."""
        if self._nodes.get(node.name) is not node:
            root = self._nodes.get(node.__dict__.get("_root", ""))
            if root is None or not any(inner is node for inner in _nested(root)):
                return  # a node this graph no longer holds
            node, replaced_outputs = root, None  # (the outputs of a body's node have no producer entry)
        if replaced_outputs is not None:
            self._drop_producers(node, replaced_outputs)
            self._add_producers(node)
        self._unindex(node)
        if self._indexes_built:
            self._index(node)

    def _rebuild_producers(self) -> None:
        self._producer = {}
        for node in self._nodes.values():
            self._add_producers(node)

    def replace_uses(self, mapping: Mapping[str, str], only: Iterable[str] | None = None) -> None:
        """Read `mapping[v]` wherever value `v` is read: in every node (or the nodes named in `only`), in
        region payloads and bodies, in fused members, in typed records, and (without `only`) in the returns."""
        from .regions import substitute, substitute_node

        if not mapping:
            return
        if only is None:  # the readers, from the users index: no scan of the graph
            self._ensure_indexes()
            readers: dict[str, None] = {}
            for value in mapping:
                readers.update(self._users.get(value, {}))
            chosen: Iterable[str] = sorted(readers, key=self._position.__getitem__)
        else:
            chosen = [name for name in dict.fromkeys(only) if name in self._nodes]
        for name in list(chosen):
            substitute_node(self._nodes[name], mapping)
            self._reindex(self._nodes[name])  # (its bodies changed after its own fields)
        if only is None and self.returns is not None:
            self.returns = substitute(self.returns, mapping)

    def set_deps(self, name: str, deps: Iterable[str]) -> None:
        """Set node `name`'s ordering dependencies."""
        self._nodes[name].deps = tuple(deps)

    def invalidate(self) -> None:
        """Rebuild the graph's indexes from scratch (after a node's fields were changed behind its setters, for
        instance by writing to `node.__dict__`); the users and waiters indexes at their next use."""
        self._users.clear()
        self._waiters.clear()
        self._indexed.clear()
        self._indexes_built = False
        self._rebuild_producers()

    def stale_index(self) -> str | None:
        """What of the graph's indexes disagrees with its nodes (for the verifier), or None. Indexes not built
        yet cannot be stale: they will be built from the nodes as they are then."""
        for value, maker in self._producer.items():
            if value not in getattr(self._nodes.get(maker), "outputs", ()):
                return f"what `{maker}` makes"
        for name, node in self._nodes.items():
            if any(value not in self._producer for value in node.outputs):
                return f"what `{name}` makes"
            if not self._indexes_built:
                continue
            reads, deps, fields = self._indexed.get(name, ((), (), ()))
            now = _fields_read(node)
            if len(now) != len(fields) or any(a is not b for a, b in zip(now, fields)):  # (cheap: by identity)
                if tuple(node.deps) != deps:
                    return f"what `{name}` waits for"
                if _names_read(node) != reads:
                    return f"what `{name}` reads"
            elif (node.bodies or _names_values(node.effects) or _names_values(node.comm)) and _names_read(node) != reads:
                return f"what `{name}` reads"
        return None

    def fresh_name(self, base: str) -> str:
        """A node name not yet used: `base`, else `base.1`, `base.2`, …"""
        if base not in self._nodes and not self.is_param(base):
            return base
        i = 1
        while f"{base}.{i}" in self._nodes or self.is_param(f"{base}.{i}"):
            i += 1
        return f"{base}.{i}"

    # ---- values ------------------------------------------------------------------------------
    def is_param(self, value: str) -> bool:
        return any(p.name == value for p in self.params)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def producer(self, value: str) -> Node | None:
        """The node producing `value`, or None for parameters and unknown names."""
        name = self._producer.get(value)
        return self._nodes[name] if name is not None else None

    def output_values(self) -> list[str]:
        """Value names the pipeline returns, in order."""
        return list(iter_refs(self.returns)) if self.returns is not None else []

    # ---- edges -------------------------------------------------------------------------------
    def predecessors(self, name: str) -> list[str]:
        """Nodes this node depends on (data first, then ordering deps), without repeats."""
        node = self._nodes[name]
        out: dict[str, None] = {}
        for value in node.input_values():
            producer = self._producer.get(value)
            if producer is not None:
                out.setdefault(producer, None)
        for dep in node.deps:
            out.setdefault(dep, None)
        return list(out)

    def successors(self, name: str) -> list[str]:
        """Nodes that depend on this node, in program order."""
        self._ensure_indexes()
        node = self._nodes[name]
        out: dict[str, None] = {}
        for value in node.outputs:
            if self._producer.get(value) == name:
                out.update(dict.fromkeys(user for user in self._users.get(value, {})
                                         if value in self._nodes[user].input_values()))
        out.update(self._waiters.get(name, {}))
        return sorted(out, key=self._position.__getitem__)

    def edges(self) -> list[tuple[str, str]]:
        """(producer, consumer) node pairs, data and ordering edges, deterministic order."""
        return [(p, n.name) for n in self._nodes.values() for p in self.predecessors(n.name)]

    def data_edges(self) -> list[tuple[str, str, str]]:
        """(producer node, consumer node, value) for every value read by a node."""
        out = []
        for node in self._nodes.values():
            for value in node.input_values():
                producer = self._producer.get(value)
                if producer is not None:
                    out.append((producer, node.name, value))
        return out

    def waiters(self, name: str) -> list[str]:
        """The nodes with an ordering dependency on node `name`, in program order (from the waiters index)."""
        self._ensure_indexes()
        return sorted(self._waiters.get(name, {}), key=self._position.__getitem__)

    def consumers(self, value: str) -> list[str]:
        """The nodes that read `value` as an operand, in program order (from the users index)."""
        self._ensure_indexes()
        return sorted((name for name in self._users.get(value, {}) if value in self._nodes[name].input_values()),
                      key=self._position.__getitem__)

    def users(self, value: str) -> list[str]:
        """The nodes that name `value` anywhere (operands, region payload, bodies, typed records), in program
        order: those a renaming of `value` changes."""
        self._ensure_indexes()
        return sorted(self._users.get(value, {}), key=self._position.__getitem__)

    def _reach(self, start: str, step: Any) -> set[str]:
        seen: set[str] = set()
        stack = list(step(start))
        while stack:
            name = stack.pop()
            if name not in seen:
                seen.add(name)
                stack.extend(step(name))
        return seen

    def _node_predecessors(self, name: str) -> list[str]:
        return [p for p in self.predecessors(name) if p in self._nodes]

    def topological_order(self) -> list[str]:
        """A topological order that prefers program order among ready nodes (deterministic); raises
        ValueError when the graph has a cycle."""
        try:
            return topological_order(list(self._nodes), self._node_predecessors)
        except CycleError:
            raise ValueError("graph has a cycle") from None

    def find_cycle(self) -> list[str] | None:
        """Node names along one cycle (first node not repeated), or None if acyclic."""
        try:
            topological_order(list(self._nodes), self._node_predecessors)
            return None
        except CycleError as exc:
            return exc.cycle

    def ancestors(self, name: str) -> set[str]:
        if name not in self._nodes:
            raise KeyError(name)
        return self._reach(name, self._node_predecessors)

    def descendants(self, name: str) -> set[str]:
        return self._reach(name, self.successors)

    def reachability_pairs(self) -> set[tuple[str, str]]:
        """All (a, b) with a path a → b; for tests of structure-preserving passes."""
        return {(a, b) for a in self._nodes for b in self.descendants(a)}

    # ---- misc --------------------------------------------------------------------------------
    def copy(self) -> Graph:
        clone = Graph(
            self.name,
            root=self.root,
            module=self.module,
            params=[copy.copy(p) for p in self.params],
            returns=self.returns,
            modules=self.modules,
            span=self.span,
            attrs=copy.deepcopy(self.attrs),
        )
        for node in self._nodes.values():
            clone.add_node(clone_node(node))
        return clone

    def __repr__(self) -> str:
        return f"<Graph {self.name!r}: {len(self._nodes)} nodes>"
