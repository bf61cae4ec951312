"""What passes and backends ask of a node, answered in one place (docs/ir.md, "Region nodes").

    members(node)        the tasks a `fused` node runs, in order
    payload_operands(node) the operands a region's payload names: its bodies' yields, a map's initial
                         lists, a loop's `break` (condition and values), decoded
    operands_read(node)  every operand `node` reads: its arguments, its payload, and what the nodes in
                         its bodies and fused members read, recursively
    substitute_node(node, mapping) rename the values `node` reads, in all of those places
                         (`Graph.replace_uses` does it for a graph, keeping its indexes current)
    bodies(node)         the bodies of a `cond` / `loop` / `try` region, by attribute key
    walk(node)           every node inside `node` (members and bodies, nested regions too), depth first
    leaves(node)         the nodes that run user code: `node` itself, or what it holds, recursively
    devices(node)        the devices it is placed on (`partition.device`), () before `partition`
    demand(node)         what it needs of one device: the most any body path needs
    expected_trips(node) trips a loop is planned for: its `region.trips` annotation, else its item count
    expected_width(node) items a map is planned for: its `region.width` annotation, else 1
    independent_items(node) whether a map's items may run apart (its body changes no shared state)
    expected_work(...)   (seconds, flops) it is planned to take: a cond its costlier branch, a loop its
                         body × expected trips, a map its body × expected width, a try its body and
                         finally body

A region runs on the device(s) it is placed on, its bodies one node after another, so its demand is
the element-wise maximum over every node it may run, and its work the sum along the path it takes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from .core import REGION_BODIES, REGION_OPS, Node, region_bodies
from .types import Map, Operand, Ref, Seq

__all__ = ["Demand", "members", "bodies", "walk", "leaves", "devices", "demand", "expected_trips",
           "payload_operands", "operands_read", "substitute", "substitute_node",
           "expected_work", "max_trips", "expected_width", "independent_items", "TRIPS_ATTR", "WIDTH_ATTR", "FLOPS_PER_SECOND"]

# A loop's planned trip count (from `dagc.trips(items, expected=N)`); absent: every item runs.
TRIPS_ATTR = "region.trips"
# A map's planned width (from `dagc.each(items, expected=N)` or `--profile`); absent: one item. The
# real width is known only at run time.
WIDTH_ATTR = "region.width"
# To compare a branch given in seconds with one given in flops (as the fusion pass does): a device of
# speed 1.0 runs 1e12 flops a second (dagc.cluster's default flops rate).
FLOPS_PER_SECOND = 1e12

Work = Callable[[Node], tuple[float, float]]


@dataclass(frozen=True)
class Demand:
    """What a node needs of the device(s) it runs on. `memory` None: not declared."""

    gpus: float = 0.0
    memory: int | None = None
    ranks: int = 1
    cpus: float = 1.0
    resources: tuple[tuple[str, float], ...] = ()  # custom resources (Ray's), sorted by name

    @classmethod
    def of_options(cls, node: Node) -> Demand:
        o = node.options
        return cls(float(o.gpus), o.memory, int(o.ranks), float(o.cpus), tuple(sorted(o.resources)))

    def most(self, other: Demand) -> Demand:
        """The element-wise maximum: enough for either to run (they run one after the other)."""
        memories = [m for m in (self.memory, other.memory) if m is not None]
        resources = dict(self.resources)
        for key, amount in other.resources:
            resources[key] = max(resources.get(key, 0.0), amount)
        return Demand(max(self.gpus, other.gpus), max(memories) if memories else None,
                      max(self.ranks, other.ranks), max(self.cpus, other.cpus), tuple(sorted(resources.items())))


def members(node: Node) -> list[Node]:
    """The tasks of a `fused` node (its body `members`), in the order they run; [] for other ops."""
    return node.bodies.get("members", []) if node.op == "fused" else []


def payload_operands(node: Node) -> list[Operand]:
    """The operands `node`'s region payload names (dagc.ir.payload): each body's yields, a map's initial
    lists, a loop's `break` condition and values ([] for a node that is not a region)."""
    if node.op not in REGION_OPS or node.region is None:
        return []
    return list(node.region.operands())


def operands_read(node: Node) -> Iterator[Operand]:
    """Every operand `node` reads: its arguments, its region payload, the values its typed records name (what
    it mutates, what a reduction sums), and, recursively, what the nodes in its bodies and fused members read
    (values defined inside a region are among them)."""
    yield from node.operands()
    yield from payload_operands(node)
    yield from node.effects.value_refs()
    if node.comm is not None:
        yield from node.comm.value_refs()
    for child in _children(node):
        yield from operands_read(child)


def substitute(operand: Operand, mapping: Mapping[str, str]) -> Operand:
    """`operand` with every `Ref(a)` replaced by `Ref(mapping[a])` where `a` is mapped."""
    if isinstance(operand, Ref):
        return Ref(mapping[operand.name]) if operand.name in mapping else operand
    if isinstance(operand, Seq):
        return Seq(operand.kind, tuple(substitute(item, mapping) for item in operand.items))
    if isinstance(operand, Map):
        return Map(tuple((substitute(k, mapping), substitute(v, mapping)) for k, v in operand.items))
    return operand


def substitute_node(node: Node, mapping: Mapping[str, str]) -> None:
    """Rename the values `node` reads, wherever it names them: its arguments, its region payload, the nodes
    of its bodies and its fused members (which name outer values directly, docs/ir.md)."""
    node.args = tuple(substitute(a, mapping) for a in node.args)
    node.kwargs = tuple((k, substitute(v, mapping)) for k, v in node.kwargs)
    for body in node.bodies.values():
        for inner in body:
            substitute_node(inner, mapping)
    if node.region is not None:
        node.region = node.region.mapped(lambda operand: substitute(operand, mapping))
    if node.effects.mutates:
        node.effects = node.effects.mapped(lambda operand: substitute(operand, mapping))
    if node.comm is not None:
        node.comm = node.comm.mapped(lambda operand: substitute(operand, mapping))


def bodies(node: Node) -> dict[str, list[Node]]:
    """A region's bodies by name: `{"then": [...], "else": [...]}` (cond), `{"body": [...]}` (loop),
    `{"body": [...], "finally": [...]}` (try); {} for other nodes."""
    return region_bodies(node)


def _children(node: Node) -> list[Node]:
    if node.op == "fused":
        return members(node)
    return [inner for body in bodies(node).values() for inner in body]


def walk(node: Node) -> Iterator[Node]:
    """Every node inside `node`, depth first in program order (not `node` itself)."""
    for child in _children(node):
        yield child
        yield from walk(child)


def leaves(node: Node) -> list[Node]:
    """The nodes that run user code for `node`: itself unless it is a fused group or a region."""
    if node.op == "fused" or node.op in REGION_OPS:
        return [leaf for child in _children(node) for leaf in leaves(child)]
    return [node]


def devices(node: Node) -> tuple[int, ...]:
    """The device(s) `partition` placed `node` on; () when it has not run."""
    return node.placement.devices


def demand(node: Node) -> Demand:
    """What `node` needs of a device: its own options, raised to the most any inner node needs."""
    need = Demand.of_options(node)
    if node.op in REGION_OPS or node.op == "fused":  # one process runs them one after another
        for inner in walk(node):
            need = need.most(Demand.of_options(inner))
    return need


def max_trips(node: Node) -> int:
    """Most trips a loop can make: the number of items it iterates over (1 for other nodes)."""
    if node.op != "loop" or node.region is None:
        return 1
    items = node.region.iter
    return len(items.items) if isinstance(items, Seq) else 1


def expected_trips(node: Node) -> float:
    """Trips a loop is planned for: its `region.trips` (capped by its items), else every item."""
    most = max_trips(node)
    declared = node.attrs.get(TRIPS_ATTR)
    if isinstance(declared, (int, float)) and not isinstance(declared, bool) and declared >= 0:
        return float(min(declared, most))
    return float(most)


def expected_width(node: Node) -> float:
    """Items a map is planned for: its `region.width` (an annotation or a profile), else 1."""
    if node.op != "map":
        return 1.0
    declared = node.attrs.get(WIDTH_ATTR)
    if isinstance(declared, (int, float)) and not isinstance(declared, bool) and declared >= 0:
        return float(declared)
    return 1.0


def independent_items(node: Node) -> bool:
    """Whether the items of map `node` may run in separate processes: nothing in its body changes
    state they share (an object from outside the loop, a module-level name, the global random
    generator, files), and no task inside it is multi-rank. Otherwise they run in order in one place."""
    from .effects import node_effects

    if node.op != "map" or any(inner.options.ranks > 1 for inner in walk(node)):
        return False
    e = node_effects(node)
    return not (e.mutates or e.writes or (e.rng and not e.seeded) or e.files == "write")


def _seconds(work: tuple[float, float]) -> float:
    return work[0] + work[1] / FLOPS_PER_SECOND


def _body_work(body: list[Node], own_work: Work) -> tuple[float, float]:
    parts = [expected_work(n, own_work) for n in body]
    return sum(p[0] for p in parts), sum(p[1] for p in parts)


def expected_work(node: Node, own_work: Work) -> tuple[float, float]:
    """(seconds at speed 1.0, flops) `node` is planned to take; `own_work` answers for plain nodes.

    cond: the costlier branch (both are possible; plan for the worse). loop: the body × expected trips.
    map: the body × expected width (the work of every item; how much of it overlaps depends on where
    the backend runs the items, which the plan does not model).
    try: its body and its finally body, one after the other."""
    if node.op not in REGION_OPS:
        return own_work(node)
    found = bodies(node)
    if node.op == "cond":
        branches = [_body_work(found.get(key, []), own_work) for key in REGION_BODIES["cond"]]
        return max(branches, key=_seconds)
    if node.op == "try":  # the body, then the finally body (plan for the body's success)
        parts = [_body_work(found.get(key, []), own_work) for key in REGION_BODIES["try"]]
        return sum(p[0] for p in parts), sum(p[1] for p in parts)
    seconds, flops = _body_work(found.get("body", []), own_work)
    trips = expected_width(node) if node.op == "map" else expected_trips(node)
    return seconds * trips, flops * trips
