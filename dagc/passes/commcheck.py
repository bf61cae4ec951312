"""`commcheck`: prove that the ranks' communication cannot deadlock.

The torch.distributed backend runs one process per device ("rank"). Each rank executes its own
straight-line sequence of operations:

    run(task)                       a single-rank task
    coll(task, group)               a multi-rank task: every rank of `group` enters it together
    send(value, dst, tag)           blocking point-to-point send
    recv(value, src, tag)           blocking point-to-point receive

`plan_communication(graph)` derives those sequences from the partitioned, scheduled graph: it walks
one global order of *steps* (tasks in schedule order; each cross-rank move right where the
consumer's rank first needs the value) and projects it onto the ranks. `check_programs` simulates
the ranks under the strictest semantics — a send completes only when its receiver is at the
matching receive, a collective only when every rank of its group has reached it — and reports
every rank that could block forever, with the wait-for cycle. Any order that passes under those
semantics also completes when sends are buffered. It also checks that every task reads only values
its rank holds at that point.

Because each rank's sequence is a projection of one global order in which each send/recv pair (and
each collective) is one step, the simulation can always perform the next global step: plans built
by `plan_communication` always pass, and so does any plan obtained by dropping whole steps (which is
what a resumed run does when it skips completed tasks). The pass is still run on every emitted
program, so a change that broke this property would be caught at compile time.

Pre: every node has `partition.device` (nodes without one are placed on device 0).
Post: graph unchanged; `graph.attrs["commcheck.ranks"]`, `["commcheck.messages"]` record the plan's size.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from dagc.diagnostics import Diagnostic, Note, Severity
from dagc.ir.core import Graph, Node
from dagc.ir.facts import device_tuple, reduction_of, transfer_of
from dagc.ir.location import SourceSpan
from dagc.ir.order import topological_order
from dagc.passes.base import Pass, PassContext, register

__all__ = [
    "Op",
    "Step",
    "CommPlan",
    "CommProblem",
    "plan_communication",
    "check_programs",
    "check_plan",
    "node_ranks",
    "DEADLOCK_CODE",
    "order_token",
    "is_order_token",
    "priority_order",
    "transfer_source",
    "gather_members",
]

# Diagnostic code for an order that could block (an internal error when the emitter's own order
# fails: it never should).
DEADLOCK_CODE = "DAGC310"




def node_ranks(node: Node) -> tuple[int, ...]:
    """The ranks that execute `node`: its `partition.device` (int or list); a `ranks=N` task placed
    on one device d runs on d … d+N-1; a transfer node belongs to its destination(s)."""
    if node.op == "transfer":
        dst = device_tuple(transfer_of(node).dst)
        if dst:
            return dst
    devices = node.devices or (0,)
    n = max(int(node.options.ranks), 1)
    if n > 1 and len(devices) == 1:
        devices = tuple(range(devices[0], devices[0] + n))
    return devices


@dataclass(frozen=True)
class Op:
    """One operation of one rank's sequence.

    kind: "run" (a single-rank task), "coll" (a multi-rank task; `group` = its ranks),
    "send"/"recv" (`value` moved to/from `peer`, matched by `tag`), "alias" (`out` = `value`
    locally: a transfer whose two ends are the same rank), "bcast" (a broadcast collective over
    `group`: root `peer` gives `value`, every rank of the group holds `out` afterwards), "reduce"
    (a sum over `group`: each rank gives its `value`, root `peer` holds `out` afterwards),
    "allreduce" (the same, and every rank of the group holds `out`), "gather" (each rank of `group`
    but the root `peer` gives its `value`; the root holds `outs` afterwards, one per sender)."""

    kind: str
    node: str
    value: str | None = None
    out: str | None = None
    peer: int | None = None
    tag: int | None = None
    group: tuple[int, ...] = ()
    outs: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.kind == "run":
            return f"run `{self.node}`"
        if self.kind == "coll":
            return f"run multi-rank `{self.node}` on ranks {list(self.group)}"
        if self.kind == "allreduce":
            return f"all-reduce `{self.node}` over ranks {list(self.group)} (tag {self.tag})"
        if self.kind == "reduce":
            return f"reduce `{self.node}` onto rank {self.peer} over ranks {list(self.group)} (tag {self.tag})"
        if self.kind == "gather":
            return f"gather `{self.node}` onto rank {self.peer} over ranks {list(self.group)} (tag {self.tag})"
        if self.kind == "bcast":
            return f"broadcast `{self.value}` from rank {self.peer} over ranks {list(self.group)} (tag {self.tag})"
        if self.kind == "send":
            return f"send `{self.value}` to rank {self.peer} (tag {self.tag})"
        if self.kind == "recv":
            return f"receive `{self.out}` from rank {self.peer} (tag {self.tag})"
        return f"alias `{self.out}` = `{self.value}`"


@dataclass(frozen=True)
class Step:
    """One step of the global order: a task on its ranks, or one point-to-point move.

    For a move, `node` names the transfer node (or the consumer that needed the value, for a move
    the backend adds itself), `value` is read on `src` and `out` is defined on `dst`."""

    kind: str  # "run" | "move" | "bcast" | "reduce" | "allreduce" | "gather" (`ranks` = the group, `src` = its root)
    node: str
    ranks: tuple[int, ...] = ()
    value: str | None = None
    out: str | None = None
    src: int | None = None
    dst: int | None = None
    tag: int | None = None


@dataclass
class CommPlan:
    """The global order of steps and, projected from it, each rank's sequence of operations."""

    world: int
    steps: list[Step]
    home: dict[str, tuple[int, ...]]
    spans: dict[str, SourceSpan] = field(default_factory=dict)
    # values each rank holds before any step: pipeline parameters (constants, on every rank)
    initial: frozenset[str] = frozenset()
    # value -> node reading it: inputs of every task, per task
    inputs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    outputs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    returns: tuple[str, ...] = ()
    operands: dict[str, tuple[tuple[str, int], ...]] = field(default_factory=dict)  # reduce: (value, rank)s
    # gather: (value on its rank, its name on the root, the rank) for each sender, in the list's order
    gathers: dict[str, tuple[tuple[str, str, int], ...]] = field(default_factory=dict)

    def programs(self) -> list[list[Op]]:
        """Each rank's sequence of operations (index = rank)."""
        out: list[list[Op]] = [[] for _ in range(self.world)]
        for step in self.steps:
            if step.kind == "run":
                if len(step.ranks) == 1:
                    out[step.ranks[0]].append(Op("run", step.node))
                else:
                    for r in step.ranks:
                        out[r].append(Op("coll", step.node, group=step.ranks))
            elif step.kind == "bcast":
                for r in step.ranks:
                    out[r].append(Op("bcast", step.node, step.value, step.out, step.src, step.tag, step.ranks))
            elif step.kind in ("reduce", "allreduce"):
                for r in step.ranks:
                    mine = next((v for v, src in self.operands[step.node] if src == r), None)
                    gets = step.kind == "allreduce" or r == step.src
                    out[r].append(Op(step.kind, step.node, mine, step.out if gets else None, step.src,
                                     step.tag, step.ranks))
            elif step.kind == "gather":
                parts = self.gathers[step.node]
                for r in step.ranks:
                    mine = next((v for v, _, src in parts if src == r), None)
                    outs = tuple(out for _, out, _ in parts) if r == step.src else ()
                    out[r].append(Op("gather", step.node, mine, None, step.src, step.tag, step.ranks, outs))
            elif step.src == step.dst:
                assert step.src is not None
                out[step.src].append(Op("alias", step.node, step.value, step.out, tag=step.tag))
            else:
                assert step.src is not None and step.dst is not None
                out[step.src].append(Op("send", step.node, step.value, step.out, step.dst, step.tag))
                out[step.dst].append(Op("recv", step.node, step.value, step.out, step.src, step.tag))
        return out

    @property
    def moves(self) -> list[Step]:
        """The point-to-point messages (moves between two ranks)."""
        return [s for s in self.steps if s.kind == "move" and s.src != s.dst]

    @property
    def collectives(self) -> list[Step]:
        """The collectives (broadcasts, reduces and gathers)."""
        return [s for s in self.steps if s.kind in _COLLECTIVES]

    @property
    def all_moves(self) -> list[Step]:
        """Messages and local aliases (a value already on the rank under another name)."""
        return [s for s in self.steps if s.kind == "move"]


def priority_order(graph: Graph) -> list[str]:
    """A topological order that follows the schedule: ready nodes by (estimated start, program order)."""
    topo = graph.topological_order()
    index = {name: i for i, name in enumerate(topo)}

    def key(name: str) -> float:
        start = graph.node(name).placement.start
        return float(start) if start is not None else float(index[name])

    return topological_order(topo, lambda name: [p for p in graph.predecessors(name) if p in index], key)


def plan_communication(graph: Graph, world: int | None = None) -> CommPlan:
    """The global order of steps for `graph` and the rank count (at least the devices used)."""
    order = priority_order(graph)
    home = {n.name: node_ranks(n) for n in graph}
    used = [r for ranks in home.values() for r in ranks]
    for n in graph:
        if n.op == "transfer":
            used += list(device_tuple(transfer_of(n).src))
    n_ranks = max([*used, 0]) + 1
    if world is not None:
        if world < n_ranks:
            raise ValueError(f"the partition uses {n_ranks} ranks, more than the {world} given")
        n_ranks = world
    params = frozenset(p.name for p in graph.params)
    holders: dict[str, list[int]] = {}  # value -> ranks holding it, first = where it was produced
    steps: list[Step] = []
    tag = 0

    def have(value: str, rank: int) -> bool:
        return value in params or rank in holders.get(value, ())

    origin: dict[str, str] = {}  # a transfer's output -> the value it copies
    copies: dict[tuple[str, int], str] = {}  # (original value, rank) -> a name it has there

    def root(value: str) -> str:
        while value in origin:
            value = origin[value]
        return value

    def move(node: str, value: str, out: str, src: int, dst: int) -> None:
        nonlocal tag
        steps.append(Step("move", node, value=value, out=out, src=src, dst=dst, tag=tag))
        tag += 1
        original = root(value)
        if out != original and out not in origin:
            origin[out] = original
        copies.setdefault((root(out), dst), out)
        holders.setdefault(out, [])
        if dst not in holders[out]:
            holders[out].append(dst)

    def fetch(node: str, value: str, rank: int) -> None:
        if have(value, rank):
            return
        local = copies.get((root(value), rank))
        if local is not None:  # already here under another name: no second message
            move(node, local, value, rank, rank)
            return
        sources = holders.get(value)
        if not sources:
            raise ValueError(f"`{node}` reads `{value}`, which no rank holds at that point")
        move(node, value, value, sources[0], rank)

    inputs: dict[str, tuple[str, ...]] = {}
    outputs: dict[str, tuple[str, ...]] = {}
    operands: dict[str, tuple[tuple[str, int], ...]] = {}
    gathers: dict[str, tuple[tuple[str, str, int], ...]] = {}
    members = gather_members(graph)
    arrived: dict[str, int] = {}
    for name in order:
        node = graph.node(name)
        gather = transfer_of(node).gather if node.op == "transfer" else None
        if isinstance(gather, str) and gather in members:
            # one collective for all of a gather's transfers, once the last of their values exists
            arrived[gather] = arrived.get(gather, 0) + 1
            if arrived[gather] < len(members[gather]):
                continue
            parts = []
            for member in members[gather]:
                value, out, src = member.input_values()[0], member.outputs[0], transfer_source(member)
                fetch(gather, value, src)
                parts.append((value, out, src))
            target = home[name][0]
            gathers[gather] = tuple(parts)
            steps.append(Step("gather", gather, ranks=tuple(sorted({target, *(p[2] for p in parts)})), src=target,
                              tag=tag))
            tag += 1
            for value, out, _ in parts:
                origin.setdefault(out, root(value))
                holders[out] = [target]
                copies.setdefault((root(out), target), out)
            continue
        reduction = reduction_of(node)
        if reduction is not None and reduction.sources:
            # a sum computed by a reduce collective: each operand stays on its own rank
            sources = reduction.sources
            values = [ref.name for ref in reduction.operands]
            target = home[name][0]
            for value, src in zip(values, sources):
                fetch(name, value, src)
            operands[name] = tuple(zip(values, sources))
            group = tuple(sorted({*sources, target}))
            everywhere = reduction.everywhere
            steps.append(Step("allreduce" if everywhere else "reduce", name, ranks=group, out=node.outputs[0],
                              src=target, tag=tag))
            tag += 1
            holders[node.outputs[0]] = [target, *(r for r in group if r != target and everywhere)]
            for r in holders[node.outputs[0]]:
                copies[(node.outputs[0], r)] = node.outputs[0]
            holders[order_token(name)] = [target]
            continue
        if node.op == "transfer" and node.args:
            (value,) = node.input_values()[:1] or (None,)
            if value is None:
                raise ValueError(f"transfer `{name}` reads no value")
            src_attr = device_tuple(transfer_of(node).src)
            src = src_attr[0] if src_attr else (holders.get(value) or [0])[0]
            fetch(name, value, src)
            if transfer_of(node).kind == "broadcast":
                group = tuple(sorted({src, *home[name]}))
                steps.append(Step("bcast", name, ranks=group, value=value, out=node.outputs[0], src=src, tag=tag))
                tag += 1
                out = node.outputs[0]
                origin.setdefault(out, root(value))
                holders[out] = list(group)
                for r in group:
                    copies.setdefault((root(out), r), out)
                continue
            for dst in home[name]:
                move(name, value, node.outputs[0], src, dst)
            continue
        # an ordering edge from a task on another rank is a message too: an empty one, sent when
        # that task has finished (the waiting rank reads nothing else of it)
        tokens = [order_token(dep) for dep in _order_deps(graph, node)
                  if any(r not in home[dep] for r in home[name])]
        inputs[name] = (*node.input_values(), *tokens)
        outputs[name] = tuple(node.outputs)
        for rank in home[name]:
            for value in inputs[name]:
                if is_order_token(value) and rank in home[token_task(value)]:
                    continue
                fetch(name, value, rank)
        steps.append(Step("run", name, ranks=home[name]))
        for value in node.outputs:
            holders[value] = [home[name][0]]
            copies[(value, home[name][0])] = value
        holders[order_token(name)] = [home[name][0]]
    returns = tuple(dict.fromkeys(graph.output_values()))
    for value in returns:
        fetch("<return>", value, 0)
    return CommPlan(n_ranks, steps, home, {n.name: n.span for n in graph}, params, inputs, outputs, returns,
                    operands, gathers)


def transfer_source(node: Node) -> int:
    """The rank a transfer node's value leaves from."""
    src = device_tuple(transfer_of(node).src)
    return src[0] if src else 0


def gather_members(graph: Graph) -> dict[str, list[Node]]:
    """Gather name → its transfer nodes, in the order of the gather's group (`transfer.group`: the
    root, then the senders in the order the reader lists their values)."""
    out: dict[str, list[Node]] = {}
    for node in graph:
        if node.op == "transfer" and transfer_of(node).kind == "gather":
            out.setdefault(str(transfer_of(node).gather), []).append(node)
    for nodes in out.values():
        group = list(transfer_of(nodes[0]).group or ())
        nodes.sort(key=lambda n: group.index(transfer_source(n)) if transfer_source(n) in group else len(group))
    return out


_TOKEN = "!done"
_COLLECTIVES = ("bcast", "reduce", "allreduce", "gather")


def order_token(task: str) -> str:
    """The pseudo-value a task's rank sends to say that the task finished (an ordering edge)."""
    return f"{task}{_TOKEN}"


def is_order_token(value: str | None) -> bool:
    return value is not None and value.endswith(_TOKEN)


def token_task(value: str) -> str:
    return value[: -len(_TOKEN)]


def _order_deps(graph: Graph, node: Node) -> list[str]:
    """Nodes `node` must follow without reading their outputs (a transfer stands for its source)."""
    reads = {p.name for v in node.input_values() if (p := graph.producer(v)) is not None}
    out: dict[str, None] = {}
    todo = list(node.deps)
    seen: set[str] = set()
    while todo:
        dep = todo.pop(0)
        if dep in seen or dep not in graph:
            continue
        seen.add(dep)
        if graph.node(dep).op == "transfer":
            todo.extend(graph.predecessors(dep))
        elif dep not in reads:
            out.setdefault(dep, None)
    return list(out)


@dataclass(frozen=True)
class CommProblem:
    """A rank that could block forever (or read a value it does not hold), and why."""

    rank: int
    op: Op
    message: str
    cycle: tuple[int, ...] = ()


def _waits_for(programs: Sequence[Sequence[Op]], pc: Sequence[int], rank: int) -> list[int]:
    if pc[rank] >= len(programs[rank]):
        return []
    op = programs[rank][pc[rank]]
    if op.kind in ("send", "recv"):
        return [op.peer] if op.peer is not None else []
    if op.kind in ("coll", *_COLLECTIVES):
        return [r for r in op.group if r != rank]
    return []


def check_programs(
    programs: Sequence[Sequence[Op]],
    *,
    initial: Iterable[str] = (),
    inputs: dict[str, tuple[str, ...]] | None = None,
    outputs: dict[str, tuple[str, ...]] | None = None,
    home: dict[str, tuple[int, ...]] | None = None,
) -> list[CommProblem]:
    """Simulate every rank's sequence with rendezvous sends; the problems found (empty = safe).

    With `inputs`/`outputs`/`home` given, also check that each task reads only values its rank holds.
    """
    world = len(programs)
    pc = [0] * world
    held: list[set[str]] = [set(initial) for _ in range(world)]
    problems: list[CommProblem] = []

    def execute(rank: int, op: Op) -> None:
        if op.kind in ("run", "coll"):
            if inputs is not None:
                for value in inputs.get(op.node, ()):
                    if value not in held[rank]:
                        problems.append(CommProblem(rank, op, f"rank {rank} runs `{op.node}` before it "
                                                    f"holds its input `{value}`"))
            if outputs is not None:
                produced = outputs.get(op.node, (op.node,))
                if op.kind == "run" or home is None or home.get(op.node, (rank,))[0] == rank:
                    held[rank].update(produced)
                    held[rank].add(order_token(op.node))  # what it sends to ranks that must wait for it
        elif op.kind == "recv" and op.out is not None:
            held[rank].add(op.out)
        elif op.kind == "alias" and op.out is not None:
            held[rank].add(op.out)
        elif op.kind == "bcast":
            if rank == op.peer and inputs is not None and op.value is not None and op.value not in held[rank]:
                problems.append(CommProblem(rank, op, f"rank {rank} broadcasts `{op.value}` before it holds it"))
            if op.out is not None:
                held[rank].add(op.out)
        elif op.kind in ("reduce", "allreduce"):
            if inputs is not None and op.value is not None and op.value not in held[rank]:
                problems.append(CommProblem(rank, op, f"rank {rank} reduces `{op.value}` before it holds it"))
            if op.out is not None:
                held[rank].add(op.out)
        elif op.kind == "gather":
            if inputs is not None and op.value is not None and op.value not in held[rank]:
                problems.append(CommProblem(rank, op, f"rank {rank} gathers `{op.value}` before it holds it"))
            held[rank].update(op.outs)
        elif op.kind == "send" and inputs is not None and op.value is not None and op.value not in held[rank]:
            problems.append(CommProblem(rank, op, f"rank {rank} sends `{op.value}` before it holds it"))
        pc[rank] += 1

    ready = list(range(world))
    while ready:
        progressed = False
        for rank in ready:
            while pc[rank] < len(programs[rank]):
                op = programs[rank][pc[rank]]
                if op.kind in ("run", "alias"):
                    execute(rank, op)
                    progressed = True
                elif op.kind == "send":
                    peer = op.peer
                    if peer is None or not 0 <= peer < world or pc[peer] >= len(programs[peer]):
                        break
                    other = programs[peer][pc[peer]]
                    if other.kind == "recv" and other.peer == rank and other.tag == op.tag:
                        execute(rank, op)
                        execute(peer, other)
                        progressed = True
                    else:
                        break
                elif op.kind in ("coll", *_COLLECTIVES):
                    # a collective completes only when every rank of its group is at the same one
                    group = op.group
                    if all(0 <= g < world and pc[g] < len(programs[g]) and programs[g][pc[g]].kind == op.kind
                           and programs[g][pc[g]].node == op.node and programs[g][pc[g]].group == group
                           for g in group) and rank in group:
                        for g in group:
                            execute(g, programs[g][pc[g]])
                        progressed = True
                    else:
                        break
                else:  # recv: completed by the sender's side
                    break
        if not progressed:
            break
        ready = [r for r in range(world) if pc[r] < len(programs[r])]
    blocked = [r for r in range(world) if pc[r] < len(programs[r])]
    for rank in blocked:
        op = programs[rank][pc[rank]]
        problems.append(CommProblem(rank, op, _blocked_message(programs, pc, rank, op),
                                    _cycle(programs, pc, rank)))
    return problems


def _blocked_message(programs: Sequence[Sequence[Op]], pc: Sequence[int], rank: int, op: Op) -> str:
    def doing(r: int) -> str:
        if not 0 <= r < len(programs):
            return f"rank {r} does not exist"
        if pc[r] >= len(programs[r]):
            return f"rank {r} has finished"
        return f"rank {r} is waiting to {programs[r][pc[r]].describe()}"

    if op.kind in ("send", "recv") and op.peer is not None:
        return f"rank {rank} could block forever waiting to {op.describe()}: {doing(op.peer)}"
    if op.kind in ("coll", *_COLLECTIVES):
        others = "; ".join(doing(r) for r in op.group if r != rank)
        return f"rank {rank} could block forever waiting to {op.describe()}: {others}"
    return f"rank {rank} could block forever at {op.describe()}"


def _cycle(programs: Sequence[Sequence[Op]], pc: Sequence[int], start: int) -> tuple[int, ...]:
    path: list[int] = []
    seen: dict[int, int] = {}
    rank = start
    while rank not in seen:
        seen[rank] = len(path)
        path.append(rank)
        nexts = [r for r in _waits_for(programs, pc, rank) if 0 <= r < len(programs)]
        if not nexts:
            return ()
        rank = nexts[0]
    return tuple(path[seen[rank]:])


def check_plan(plan: CommPlan) -> list[CommProblem]:
    """`check_programs` on the plan's projection, with the data-flow check."""
    return check_programs(plan.programs(), initial=plan.initial, inputs=plan.inputs,
                          outputs=plan.outputs, home=plan.home)


def problems_to_diagnostics(problems: Sequence[CommProblem], spans: dict[str, SourceSpan]) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for problem in problems:
        notes = []
        if problem.cycle:
            ring = " → ".join(f"rank {r}" for r in (*problem.cycle, problem.cycle[0]))
            notes.append(Note(f"wait-for cycle: {ring}"))
        out.append(Diagnostic(
            DEADLOCK_CODE, Severity.ERROR, problem.message, spans.get(problem.op.node),
            "each rank must receive a value in the same relative order as its sender sends it, and enter a "
            "multi-rank task together with the other ranks of its group; emit with "
            "`plan_communication`, whose order is deadlock-free by construction",
            tuple(notes),
        ))
    return out


@register
@dataclass(frozen=True)
class CommCheck(Pass):
    """Pre: a partitioned graph (`partition.device` on each node; missing means device 0).
    Post: graph unchanged; errors (DAGC310) for any rank sequence that could block; records
    `commcheck.ranks` and `commcheck.messages` in the graph's attributes."""

    name: ClassVar[str] = "commcheck"

    def apply(self, ctx: PassContext, graph: Graph) -> None:
        plan = plan_communication(graph)
        for diag in problems_to_diagnostics(check_plan(plan), plan.spans):
            ctx.sink.emit(diag)
        graph.attrs["commcheck.ranks"] = plan.world
        graph.attrs["commcheck.messages"] = len(plan.moves)
        collectives = f", {len(plan.collectives)} collective(s)" if plan.collectives else ""
        if plan.collectives:
            graph.attrs["commcheck.collectives"] = len(plan.collectives)
        ctx.remark(self.name, f"{plan.world} rank(s), {len(plan.moves)} point-to-point message(s){collectives}: "
                   "no deadlock")
