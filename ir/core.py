"""The IR graph: task nodes that produce named values, and the values they consume.

A `Graph` holds its nodes in program order (a topological order when the graph is valid). Edges
are derived from the operands that nodes consume and from explicit ordering dependencies, so there
is one source of truth. Adjacency is kept in plain dicts; networkx is imported only for the rare
questions of invalid graphs and tests (a cycle's path, the transitive closure), because importing it
costs more than a whole `dagc check` of a small file.
"""

from __future__ import annotations

import copy
import heapq
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .location import SourceSpan
from .payload import Region
from .types import Operand, TaskOptions, iter_refs

__all__ = ["Node", "Param", "Graph", "OPS", "MODULE_VALUE_ATTR", "SCRIPT_ARGUMENTS_ATTR", "REGION_OPS", "ALL_OPS", "REGION_BODIES", "NODE_BODIES", "output_name",
           "region_bodies", "body_names", "clone_node"]

# Node kinds. `task` calls a user function; `fused` runs its members (its body `members`) in order;
# `transfer` moves a value between devices (inserted by the comm pass); `glue` evaluates a small
# expression on task results where its inputs are.
OPS = ("task", "fused", "transfer", "glue")
# A `task` node with this attribute reads a module-level object of the user's (`DEVICE = torch.device(...)`,
# `env = gym.make(...)`) instead of calling it: its target names the object as `module:NAME`, and every
# process that runs it has imported that module, as the plain run did.
MODULE_VALUE_ATTR = "task.module_value"
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


def output_name(node_name: str, index: int, count: int) -> str:
    """Value name of a node's `index`-th output: `name` for a single output, else `name#index`."""
    return node_name if count == 1 else f"{node_name}#{index}"


@dataclass(eq=False)
class Node:
    """One unit of work.

    `target` names the Python callable as `module:qualname` (for `task`); `args`/`kwargs` are the
    operands as written at the call site; `outputs` names the values produced (a call unpacked into
    several names has several; by convention `name`, or `name#0`, `name#1`, … — see `output_name`),
    with `types` giving each one's declared type when known. `deps` are explicit ordering
    dependencies on other nodes.
    `attrs` holds pass results under namespaced keys such as `partition.device`. A region node
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

    def __post_init__(self) -> None:
        if self.region is None and self.op in REGION_BODIES:
            self.region = Region()
        if not self.outputs:
            self.outputs = (self.name,)
        if len(self.types) != len(self.outputs):
            self.types = tuple(self.types[i] if i < len(self.types) else None for i in range(len(self.outputs)))

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
    """A compiled pipeline."""

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
        self._adj: dict[str, dict[str, None]] | None = None  # successors of each node, built on demand
        self._succ: dict[str, list[str]] | None = None

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
        self._nodes[node.name] = node
        for value in node.outputs:
            # a second producer is kept out of the map; the verifier reports it
            self._producer.setdefault(value, node.name)
        self._adj = None
        return node

    def remove_node(self, name: str) -> Node:
        node = self._nodes.pop(name)
        for value in node.outputs:
            if self._producer.get(value) == name:
                del self._producer[value]
        self._adj = None
        return node

    def replace_node(self, old: str, new: Node) -> None:
        """Put `new` where `old` was in program order (it may have a different name)."""
        items = list(self._nodes.items())
        self._nodes.clear()
        self._producer.clear()
        for name, node in items:
            self._nodes_add_unchecked(new if name == old else node)
        self._adj = None

    def reorder(self, names: Iterable[str]) -> None:
        """Set the program order to `names`, which must be a permutation of the node names."""
        order = list(names)
        if sorted(order) != sorted(self._nodes):
            raise ValueError("reorder() needs every node exactly once")
        self._nodes = {name: self._nodes[name] for name in order}
        self._adj = None

    def _nodes_add_unchecked(self, node: Node) -> None:
        self._nodes[node.name] = node
        for value in node.outputs:
            self._producer.setdefault(value, node.name)

    def replace_uses(self, mapping: Mapping[str, str], only: Iterable[str] | None = None) -> None:
        """Read `mapping[v]` wherever value `v` is read: in every node (or the nodes named in `only`), in
        region payloads and bodies, in fused members, and (without `only`) in the returns."""
        from .regions import substitute, substitute_node

        if not mapping:
            return
        chosen = None if only is None else set(only)
        for node in self._nodes.values():
            if chosen is None or node.name in chosen:
                substitute_node(node, mapping)
        if chosen is None and self.returns is not None:
            self.returns = substitute(self.returns, mapping)
        self._adj = None  # edges follow the operands

    def set_deps(self, name: str, deps: Iterable[str]) -> None:
        """Set node `name`'s ordering dependencies (keeping the graph's edges current)."""
        self._nodes[name].deps = tuple(deps)
        self._adj = None

    def invalidate(self) -> None:
        """Rebuild the graph's indexes after a node's operands or deps were changed in place, by code that
        does not go through `replace_uses` or `set_deps`."""
        self._adj = None
        self._producer = {}
        for node in self._nodes.values():
            for value in node.outputs:
                self._producer.setdefault(value, node.name)

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
        return self._successor_map()[name]

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

    def consumers(self, value: str) -> list[str]:
        return [n.name for n in self._nodes.values() if value in n.input_values()]

    def _successor_map(self) -> dict[str, list[str]]:
        graph = self._graph()
        if self._succ is None:
            index = {name: i for i, name in enumerate(self._nodes)}
            self._succ = {n: sorted(graph[n], key=index.__getitem__) for n in self._nodes}
        return self._succ

    def _graph(self) -> dict[str, dict[str, None]]:
        """Each node's successors (edges from names that are not nodes are dropped)."""
        if self._adj is None:
            succ: dict[str, dict[str, None]] = {name: {} for name in self._nodes}
            for src, dst in self.edges():
                if src in succ:
                    succ[src][dst] = None
            self._adj = succ
            self._succ = None
        return self._adj

    def _reach(self, start: str, step: Any) -> set[str]:
        seen: set[str] = set()
        stack = list(step(start))
        while stack:
            name = stack.pop()
            if name not in seen:
                seen.add(name)
                stack.extend(step(name))
        return seen

    def topological_order(self) -> list[str]:
        """A topological order that prefers program order among ready nodes (deterministic)."""
        index = {name: i for i, name in enumerate(self._nodes)}
        indegree = {name: 0 for name in self._nodes}
        succs: dict[str, list[str]] = {name: [] for name in self._nodes}
        for src, dst in self.edges():
            if src in index:
                indegree[dst] += 1
                succs[src].append(dst)
        ready = [index[n] for n, d in indegree.items() if d == 0]
        heapq.heapify(ready)
        names = list(self._nodes)
        order: list[str] = []
        while ready:
            name = names[heapq.heappop(ready)]
            order.append(name)
            for succ in succs[name]:
                indegree[succ] -= 1
                if indegree[succ] == 0:
                    heapq.heappush(ready, index[succ])
        if len(order) != len(names):
            raise ValueError("graph has a cycle")
        return order

    def find_cycle(self) -> list[str] | None:
        """Node names along one cycle (first node not repeated), or None if acyclic."""
        try:
            self.topological_order()
            return None
        except ValueError:
            pass
        import networkx as nx  # only for a graph that is invalid anyway

        try:
            cycle = nx.find_cycle(self._digraph())
        except nx.NetworkXNoCycle:
            return None
        return [src for src, _ in cycle]

    def ancestors(self, name: str) -> set[str]:
        if name not in self._nodes:
            raise KeyError(name)
        return self._reach(name, lambda n: [p for p in self.predecessors(n) if p in self._nodes])

    def descendants(self, name: str) -> set[str]:
        graph = self._graph()
        return self._reach(name, graph.__getitem__)

    def reachability_pairs(self) -> set[tuple[str, str]]:
        """All (a, b) with a path a → b; for tests of structure-preserving passes."""
        return {(a, b) for a in self._nodes for b in self.descendants(a)}

    def _digraph(self) -> Any:
        import networkx as nx

        g = nx.DiGraph()
        g.add_nodes_from(self._nodes)
        for src, targets in self._graph().items():
            g.add_edges_from((src, dst) for dst in targets)
        return g

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
