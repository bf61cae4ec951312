"""The deadlock check: emitted communication orders always pass, hand-made bad ones are rejected."""

from __future__ import annotations

import pickle
import random
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dagc.cluster import parse_cluster_spec
from dagc.diagnostics import DiagnosticSink
from dagc.ir.core import Graph, Node, Param
from dagc.ir.location import SourceSpan
from dagc.ir.types import Const, Ref, TaskOptions
from dagc.passes.base import PassContext, PassManager, parse_pipeline
from dagc.passes.commcheck import (
    DEADLOCK_CODE,
    Op,
    check_plan,
    check_programs,
    plan_communication,
    problems_to_diagnostics,
)
from tests.property import examples


def random_graph(seed: int, n: int, devices: int, *, multi: bool = True, timed: bool = True) -> Graph:
    """A random DAG of `n` tasks placed on `devices` devices (some multi-rank), with a random schedule."""
    rng = random.Random(seed)
    graph = Graph("rand", root=".", module="randmod", modules={"randmod": "randmod.py"},
                  params=[Param("base", Const(1), "int")], span=SourceSpan("rand.py", 1, 1))
    names: list[str] = []
    for i in range(n):
        preds = rng.sample(names, k=min(len(names), rng.randint(0, 3)))
        args = tuple(Ref(p) for p in preds) or (Ref("base"),)
        ranks = 2 if multi and devices >= 2 and rng.random() < 0.15 else 1
        if ranks > 1:
            first = rng.randrange(devices)
            second = rng.choice([d for d in range(devices) if d != first])
            device: object = [first, second]
        else:
            device = rng.randrange(devices)
        attrs: dict[str, object] = {"partition.device": device}
        if timed:
            attrs["schedule.start"] = rng.random() * 10
        name = f"t{i}"
        graph.add_node(Node(name, "task", "randmod:combine", args + (Const(i),), options=TaskOptions(ranks=ranks),
                            span=SourceSpan("rand.py", i + 2, 5), attrs=attrs))
        names.append(name)
    sinks = [name for name in names if not graph.consumers(name)]
    from dagc.ir.types import Seq

    graph.returns = Seq("list", tuple(Ref(s) for s in sinks))
    return graph


def with_comm(graph: Graph, devices: int) -> Graph:
    ctx = PassContext(cluster=parse_cluster_spec(str(devices)), sink=DiagnosticSink())
    PassManager(parse_pipeline("comm,commcheck")).run(ctx, graph)
    return graph


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), n=st.integers(1, 40), devices=st.integers(1, 6),
       comm=st.booleans(), timed=st.booleans())
def test_emitted_orders_never_deadlock(seed: int, n: int, devices: int, comm: bool, timed: bool) -> None:
    graph = random_graph(seed, n, devices, timed=timed)
    if comm:
        graph = with_comm(graph, devices)
    plan = plan_communication(graph)
    assert check_plan(plan) == []
    programs = plan.programs()
    # every cross-rank edge is exactly one send/recv pair, and every consumer's rank holds its inputs
    sends = sorted((op.tag, r) for r, ops in enumerate(programs) for op in ops if op.kind == "send")
    recvs = sorted((op.tag, op.peer) for ops in programs for op in ops if op.kind == "recv")
    assert sends == recvs and len({t for t, _ in sends}) == len(sends)


@settings(max_examples=examples(80), deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(1, 30), devices=st.integers(2, 5), done_seed=st.integers(0, 99))
def test_resumed_runs_drop_whole_steps_and_stay_safe(seed: int, n: int, devices: int, done_seed: int) -> None:
    """A restart skips completed tasks and the messages nobody needs; every rank drops the same steps."""
    pytest.importorskip("torch")
    from dagc.runtime.distributed import plan_steps
    from dagc.runtime.rows import TaskRow

    graph = with_comm(random_graph(seed, n, devices), devices)
    plan = plan_communication(graph)
    rng = random.Random(done_seed)
    tasks = {s.node: TaskRow("fp", ranks=tuple(s.ranks), inputs=tuple(plan.inputs[s.node]),
                             outputs=tuple(plan.outputs[s.node])) for s in plan.steps if s.kind == "run"}
    moves = {s.tag: (s.value, s.out, s.src, s.dst, None) for s in plan.all_moves}
    collectives = {s.tag: ("broadcast", s.value, s.out, s.src, s.ranks, None, None) if s.kind == "bcast" else
                   (s.kind.replace("allreduce", "all_reduce"), plan.operands[s.node], s.out, s.src, s.ranks, None, None)
                   for s in plan.collectives}
    done = {name for name in tasks if rng.random() < 0.5}
    run, load, active = plan_steps(tasks, moves, plan.returns, done, collectives)
    programs = [[op for op in ops if (op.kind in ("run", "coll") and op.node in run | load)
                 or (op.kind in ("send", "recv", "alias", "bcast", "reduce", "allreduce") and op.tag in active)]
                for ops in plan.programs()]
    assert check_programs(programs) == []
    # a loaded task stands in for its inputs: every task that runs has them (data-flow check)
    initial = set(plan.initial)
    held = [set(initial) for _ in programs]
    for r, ops in enumerate(programs):
        for op in ops:
            if op.kind in ("run", "coll"):
                if op.node in run:
                    assert set(plan.inputs[op.node]) <= held[r], (op, r)
                if plan.home[op.node][0] == r:
                    held[r].update(plan.outputs[op.node])
            elif op.kind == "recv":
                held[r].add(op.out)
            elif op.kind == "send":
                assert op.value in held[r]
            elif op.kind == "alias":
                held[r].add(op.out)
            elif op.kind == "bcast":
                assert r != op.peer or op.value in held[r]
                held[r].add(op.out)
            elif op.kind in ("reduce", "allreduce"):
                assert op.value in held[r]
                if op.out is not None:
                    held[r].add(op.out)
    assert set(plan.returns) <= held[0]


def test_hand_made_crossed_order_is_rejected() -> None:
    # rank 0 waits for rank 1's value before sending its own; rank 1 does the same: a cycle
    programs = [
        [Op("run", "a"), Op("recv", "b", "b", "b", 1, 1), Op("send", "a", "a", "a", 1, 0)],
        [Op("run", "b"), Op("recv", "a", "a", "a", 0, 0), Op("send", "b", "b", "b", 0, 1)],
    ]
    problems = check_programs(programs)
    assert {p.rank for p in problems} == {0, 1}
    assert problems[0].cycle == (0, 1)
    assert "could block forever" in problems[0].message and "receive `b` from rank 1" in problems[0].message
    diags = problems_to_diagnostics(problems, {"b": SourceSpan("x.py", 3, 5)})
    assert diags[0].code == DEADLOCK_CODE and diags[0].is_error
    assert "wait-for cycle: rank 0 → rank 1 → rank 0" in diags[0].notes[0].message
    # the same messages in the order the emitter chooses pass
    good = [
        [Op("run", "a"), Op("send", "a", "a", "a", 1, 0), Op("recv", "b", "b", "b", 1, 1)],
        [Op("run", "b"), Op("recv", "a", "a", "a", 0, 0), Op("send", "b", "b", "b", 0, 1)],
    ]
    assert check_programs(good) == []


def test_bad_orders_of_a_real_plan_are_rejected() -> None:
    graph = with_comm(random_graph(3, 12, 3, multi=False), 3)
    programs = [list(ops) for ops in plan_communication(graph).programs()]
    # move one rank's first receive after its first send to that peer (if any): could block
    for ops in programs:
        recv_i = next((i for i, op in enumerate(ops) if op.kind == "recv"), None)
        if recv_i is None:
            continue
        peer = ops[recv_i].peer
        send_i = next((i for i, op in enumerate(programs[peer]) if op.kind == "send"
                       and op.tag == ops[recv_i].tag), None)
        assert send_i is not None
        # the sender now first waits to receive something the receiver sends only after its recv
        programs[peer].insert(send_i, Op("recv", "x", "x", "x", programs.index(ops), 999))
        ops.insert(recv_i + 1, Op("send", "x", "x", "x", peer, 999))
        break
    assert check_programs(programs)


def test_collective_needs_every_rank_of_its_group() -> None:
    programs = [[Op("coll", "t", group=(0, 1)), Op("send", "t", "t", "t", 1, 0)],
                [Op("recv", "t", "t", "t", 0, 0), Op("coll", "t", group=(0, 1))]]
    problems = check_programs(programs)
    assert problems and "multi-rank `t`" in problems[0].message


def test_commcheck_pass_reports_the_plan_size() -> None:
    graph = with_comm(random_graph(5, 10, 2, multi=False), 2)
    assert graph.attrs["commcheck.ranks"] == 2
    assert graph.attrs["commcheck.messages"] == len(plan_communication(graph).moves)


RANDMOD = '''
    def combine(*args):
        """Deterministic, order-sensitive value of the inputs (they are ints or tuples)."""
        acc = 17
        for a in args:
            acc = (acc * 31 + (hash(a) if isinstance(a, tuple) else int(a))) % 1_000_003
        return acc
'''


def _evaluate(graph: Graph, combine) -> object:
    values: dict[str, object] = {p.name: p.value.value for p in graph.params}  # type: ignore[union-attr]
    for name in graph.topological_order():
        node = graph.node(name)
        args = [values[a.name] if isinstance(a, Ref) else a.value for a in node.args]  # type: ignore[union-attr]
        values[node.outputs[0]] = args[0] if node.op == "transfer" else combine(*args)
    return [values[r.name] for r in graph.returns.items]  # type: ignore[union-attr]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [11, 12])
def test_random_emitted_programs_run(tmp_path: Path, seed: int) -> None:
    pytest.importorskip("torch")
    from dagc.backends import emit
    from tests.test_backend_torch import launch

    (tmp_path / "randmod.py").write_text(textwrap.dedent(RANDMOD))
    devices = 3
    graph = with_comm(random_graph(seed, 14, devices), devices)
    graph.root = str(tmp_path)
    namespace: dict[str, object] = {}
    exec(textwrap.dedent(RANDMOD), namespace)
    expected = _evaluate(graph, namespace["combine"])
    program = tmp_path / "rand_torch.py"
    program.write_text(emit(graph, "torch", program))
    result = tmp_path / "r.pkl"
    launch(program, graph.attrs["commcheck.ranks"], ["--result", str(result)])
    assert pickle.loads(result.read_bytes()) == expected
