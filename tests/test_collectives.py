"""Collectives the `comm` pass chooses (broadcast), their cost model, their deadlock check, and the
emitted torch programs that use them on 4 gloo ranks."""

from __future__ import annotations

import pickle
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dagc.cluster import Cluster, Link, parse_cluster_spec
from dagc.cost import broadcast_time, fanin_time, fanout_time, reduce_time
from dagc.diagnostics import DiagnosticSink
from dagc.ir.core import Graph, Node, Param
from dagc.ir.location import SourceSpan
from dagc.ir.types import Const, Ref, Seq, TaskOptions
from dagc.passes.base import PassContext, PassManager, parse_pipeline
from dagc.passes.commcheck import Op, check_plan, check_programs, plan_communication
from tests.property import examples
from tests.test_commcheck import random_graph

MiB = 1 << 20


# ---- cost model ------------------------------------------------------------------------------------
def test_broadcast_beats_sends_from_three_readers_on() -> None:
    cluster = Cluster.uniform(1, 4).with_links(bandwidth=1e9, latency=1e-5)
    one = 1e-5 + 64 * MiB / 1e9
    assert fanout_time(cluster, 64 * MiB, 0, [1, 2, 3]) == pytest.approx(3 * one)
    assert broadcast_time(cluster, 64 * MiB, 0, [1, 2, 3]) == pytest.approx(2 * one)  # a binomial tree: 2 rounds
    assert broadcast_time(cluster, 64 * MiB, 0, [1, 2]) == pytest.approx(fanout_time(cluster, 64 * MiB, 0, [1, 2]))
    assert broadcast_time(cluster, 64 * MiB, 0, [1]) == fanout_time(cluster, 64 * MiB, 0, [1])
    assert reduce_time(cluster, MiB, 0, [1, 2, 3]) < fanin_time(cluster, MiB, 0, [1, 2, 3])


def test_a_group_across_nodes_is_limited_by_the_inter_node_link() -> None:
    cluster = Cluster.uniform(2, 2, intra=Link(100e9, 1e-6), inter=Link(1e9, 1e-5))
    assert broadcast_time(cluster, MiB, 0, [1, 2, 3]) == pytest.approx(2 * (1e-5 + MiB / 1e9))
    assert broadcast_time(cluster, MiB, 0, [1]) == pytest.approx(1e-6 + MiB / 100e9)


def fan_graph(readers: int, nbytes: int = MiB) -> Graph:
    """`x` on device 0, read by one task on each of devices 1 … readers."""
    graph = Graph("fan", module="m", modules={"m": "m.py"}, params=[Param("n", Const(1), "int")],
                  span=SourceSpan("m.py", 1, 1))
    graph.add_node(Node("x", "task", "m:make", (Ref("n"),), options=TaskOptions(out_size=nbytes),
                        span=SourceSpan("m.py", 2, 5), attrs={"partition.device": 0}))
    for d in range(1, readers + 1):
        graph.add_node(Node(f"use{d}", "task", "m:use", (Ref("x"),), options=TaskOptions(out_size=8),
                            span=SourceSpan("m.py", 3, 5), attrs={"partition.device": d}))
    graph.returns = Seq("list", tuple(Ref(f"use{d}") for d in range(1, readers + 1)))
    return graph


def run_comm(graph: Graph, devices: int, spec: str = "comm,commcheck") -> Graph:
    ctx = PassContext(cluster=parse_cluster_spec(str(devices)), sink=DiagnosticSink())
    PassManager(parse_pipeline(spec)).run(ctx, graph)
    return graph


@pytest.mark.parametrize(("readers", "broadcasts"), [(1, 0), (2, 0), (3, 1), (5, 1)])
def test_comm_chooses_a_broadcast_when_the_model_says_it_is_faster(readers: int, broadcasts: int) -> None:
    graph = run_comm(fan_graph(readers), readers + 1)
    transfers = [n for n in graph if n.op == "transfer"]
    kinds = [n.attributes().get("transfer.kind") for n in transfers]
    assert kinds.count("broadcast") == broadcasts
    if broadcasts:
        (node,) = transfers
        assert node.outputs == (f"x@{'-'.join(str(d) for d in range(1, readers + 1))}",)
        assert node.attributes()["transfer.dst"] == list(range(1, readers + 1))
        assert all(graph.node(f"use{d}").args == (Ref(node.outputs[0]),) for d in range(1, readers + 1))
        plan = plan_communication(graph)
        assert len(plan.collectives) == 1 and all(m.node == "<return>" for m in plan.moves)
        assert plan.collectives[0].ranks == tuple(range(readers + 1))
    else:
        assert len(transfers) == readers
    assert graph.attrs.get("commcheck.collectives", 0) == broadcasts


def test_collectives_can_be_turned_off() -> None:
    graph = run_comm(fan_graph(3), 4, "comm{collectives=false},commcheck")
    assert [n.attributes().get("transfer.kind") for n in graph if n.op == "transfer"] == [None, None, None]


# ---- deadlock freedom with collectives ---------------------------------------------------------------
@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), n=st.integers(1, 40), devices=st.integers(3, 6), timed=st.booleans())
def test_mixed_orders_of_messages_and_collectives_never_deadlock(seed: int, n: int, devices: int,
                                                                  timed: bool) -> None:
    # a fan-out-heavy random graph: each new task reads up to 4 earlier ones, so values read on
    # three or more devices (broadcasts) are common
    graph = run_comm(random_graph(seed, n, devices, timed=timed), devices)
    plan = plan_communication(graph)
    assert check_plan(plan) == []
    programs = plan.programs()
    for step in plan.collectives:
        # every rank of the group reaches this broadcast, and in the same order relative to the others
        members = [r for r, ops in enumerate(programs) if any(op.kind == "bcast" and op.tag == step.tag for op in ops)]
        assert members == list(step.ranks)
    for a in range(len(programs)):
        for b in range(a + 1, len(programs)):
            shared = lambda ops, other: [op.tag for op in ops if op.kind == "bcast" and other in op.group]  # noqa: E731
            assert shared(programs[a], b) == shared(programs[b], a)


def test_random_graphs_do_produce_broadcasts() -> None:
    found = sum(len(plan_communication(run_comm(random_graph(seed, 30, 5), 5)).collectives) for seed in range(20))
    assert found > 0


def test_a_hand_made_order_of_two_broadcasts_that_would_deadlock_is_rejected() -> None:
    # rank 0 broadcasts `a` then `b`; rank 2 is in both groups but enters `b` first: each group waits on the other
    a = Op("bcast", "ta", "a", "a@", 0, 0, (0, 1, 2))
    b = Op("bcast", "tb", "b", "b@", 1, 1, (0, 1, 2))
    programs = [[Op("run", "a"), a, b], [Op("run", "b"), a, b], [b, a]]
    problems = check_programs(programs)
    assert {p.rank for p in problems} == {0, 1, 2}
    assert any("broadcast `b` from rank 1" in p.message for p in problems)
    assert check_programs([[Op("run", "a"), a, b], [Op("run", "b"), a, b], [a, b]]) == []
    # a broadcast whose root does not hold the value yet is a data-flow error
    late = check_programs([[a], [a], [a]], inputs={}, outputs={})
    assert any("broadcasts `a` before it holds it" in p.message for p in late)


def test_a_rank_missing_from_a_broadcast_blocks_the_others() -> None:
    a = Op("bcast", "ta", "a", "a@", 0, 0, (0, 1, 2))
    problems = check_programs([[a], [a], []])
    assert {p.rank for p in problems} == {0, 1}
    assert "rank 2 has finished" in problems[0].message


# ---- emitted torch programs on 4 gloo ranks ----------------------------------------------------------
FANOUT = {
    "fan.py": '''
        import dagc
        import torch


        @dagc.task(cost=1, out_size="64KiB", pure=True)
        def make_static(n: int) -> "torch.Tensor[float32, 4096]":
            return torch.arange(4096, dtype=torch.float32) / (n + 6)


        @dagc.task(cost=1, out_size="64KiB", pure=True)
        def make_tensor(n: int) -> torch.Tensor:
            return torch.linspace(-1, 1, n, dtype=torch.float64)


        @dagc.task(cost=1, out_size="64KiB", pure=True)
        def make_dict(n: int) -> dict:
            return {"w": torch.ones(n, 3) / 3, "step": n, "names": ["a", "b"]}


        @dagc.task(cost=10, out_size="1KiB", pure=True)
        def use(s: torch.Tensor, t: torch.Tensor, d: dict, k: int) -> list:
            return [float(s.sum()) * k, float(t[k]), float(d["w"].sum()) + d["step"] + k, d["names"][k % 2]]


        @dagc.pipeline
        def fan(n: int = 1000) -> list:
            s = make_static(n)
            t = make_tensor(n)
            d = make_dict(n)
            return [use(s, t, d, k) for k in range(4)]
    ''',
}


@pytest.mark.slow
def test_torch_program_broadcasts_to_three_readers_and_equals_plain_run(tmp_path: Path, write_project) -> None:
    torch = pytest.importorskip("torch")  # noqa: F841
    from tests.test_backend_local import _plain_result
    from tests.test_backend_torch import _emit, _ruff_clean, launch

    root = write_project(FANOUT)
    expected = _plain_result(root / "fan.py", "fan", tmp_path)
    program = _emit(root / "fan.py", tmp_path / "out" / "fan_torch.py", 4)
    _ruff_clean(program)
    text = program.read_text()
    namespace: dict[str, object] = {}
    exec(text.split("COLLECTIVES = ", 1)[1].split("\n}\n", 1)[0].join(["C = ", "\n}\n"]), namespace)
    collectives = namespace["C"]
    assert sorted(entry[1] for entry in collectives.values()) == ["make_dict", "make_static", "make_tensor"]
    assert all(entry[0] == "broadcast" and entry[4] == (0, 1, 2, 3) for entry in collectives.values())
    assert [entry[5] for entry in collectives.values() if entry[1] == "make_static"] == [("float32", (4096,))]
    assert text.count("rt.broadcast(None, ") == 9 and text.count("rt.broadcast(") == 12  # 3 roots, 9 receivers
    moves = text.split("MOVES = {", 1)[1].split("\n}\n", 1)[0]
    assert "make_" not in moves  # no point-to-point copy of the broadcast values
    result = tmp_path / "result.pkl"
    launch(program, 4, ["--result", str(result)])
    assert pickle.loads(result.read_bytes()) == expected


def test_compressed_values_round_trip_within_the_documented_bound() -> None:
    torch = pytest.importorskip("torch")
    from dagc.runtime.distributed import compress_value, decompress_value

    rng = random.Random(0)
    x = torch.tensor([rng.uniform(-1e3, 1e3) for _ in range(1000)], dtype=torch.float32)
    value = {"x": x, "pair": (x.double(), torch.arange(3)), "items": [x.half(), "text"]}
    back = decompress_value(pickle.loads(pickle.dumps(compress_value(value, "bf16"))))
    assert back["x"].dtype == torch.float32 and back["pair"][0].dtype == torch.float64
    assert torch.equal(back["pair"][1], torch.arange(3)) and back["items"][1] == "text"
    assert torch.equal(back["items"][0], x.half())  # 16-bit tensors travel as they are
    for got, want in ((back["x"], x), (back["pair"][0], x.double())):
        assert ((got - want).abs() <= want.abs() * 2.0**-8).all()  # bf16: relative error at most 2^-8
    fp16 = decompress_value(compress_value(x / 1e3, "fp16"))
    assert ((fp16 - x / 1e3).abs() <= (x / 1e3).abs() * 2.0**-11 + 2.0**-24).all()


# ---- sums become reduce collectives ------------------------------------------------------------------
def sum_graph(expr: str, types: list[str | None], devices: list[int], at: int, nbytes: int = MiB) -> Graph:
    graph = Graph("sums", module="m", modules={"m": "m.py"}, span=SourceSpan("m.py", 1, 1))
    for i, (type_text, device) in enumerate(zip(types, devices)):
        graph.add_node(Node(f"p{i}", "task", "m:part", (Const(i),), types=(type_text,),
                            options=TaskOptions(out_size=nbytes), span=SourceSpan("m.py", 2 + i, 5),
                            attrs={"partition.device": device}))
    graph.add_node(Node("s", "glue", expr, tuple(Ref(f"p{i}") for i in range(len(types))),
                        span=SourceSpan("m.py", 9, 9), attrs={"partition.device": at}))
    graph.returns = Ref("s")
    return graph


@pytest.mark.parametrize(("expr", "order", "divisor"), [
    ("_0 + _1 + _2", (0, 1, 2), None),
    ("_2 + _0 + _1", (2, 0, 1), None),
    ("(_0 + _1 + _2 + _3) / 4", (0, 1, 2, 3), 4.0),
])
def test_glue_sums_of_tensors_are_recognised(expr: str, order: tuple[int, ...], divisor: float | None) -> None:
    from dagc.passes.reductions import glue_sum

    n = len(order)
    graph = sum_graph(expr, ["torch.Tensor"] * n, list(range(n)), 0)
    total = glue_sum(graph.node("s"), graph)
    assert total is not None and total.values == tuple(f"p{i}" for i in order) and total.divisor == divisor


def test_a_sum_of_list_items_is_recognised() -> None:
    from dagc.passes.reductions import glue_sum

    graph = sum_graph("_0 + _1 + _2", ["torch.Tensor"] * 3, [0, 1, 2], 0)
    node = graph.node("s")
    node.target, node.args = "_0[0] + _0[2] + _0[1]", (Seq("list", (Ref("p0"), Ref("p1"), Ref("p2"))),)
    total = glue_sum(node, graph)
    assert total is not None and total.values == ("p0", "p2", "p1")
    node.target = "_0[0] + _0[1]"  # p2 is read but not added: it would have to move too
    assert glue_sum(node, graph) is None


@pytest.mark.parametrize(("expr", "types"), [
    ("_0 + _1 + _2", ["torch.Tensor", "int", "torch.Tensor"]),  # an int: Python adds it, a reduce could not
    ("_0 + _1 + _2", ["torch.Tensor", None, "torch.Tensor"]),  # undeclared: could be a list (concatenation)
    ("_0 + (_1 + _2)", ["torch.Tensor"] * 3),  # not Python's left-to-right chain
    ("_0 + _1 * 2", ["torch.Tensor"] * 2),
    ("_0 - _1 - _2", ["torch.Tensor"] * 3),
])
def test_other_expressions_are_not_sums(expr: str, types: list[str | None]) -> None:
    from dagc.passes.reductions import glue_sum

    graph = sum_graph(expr, types, list(range(len(types))), 0)
    assert glue_sum(graph.node("s"), graph) is None


def run_comm_with_sink(graph: Graph, devices: int, spec: str = "comm,commcheck") -> DiagnosticSink:
    sink = DiagnosticSink()
    PassManager(parse_pipeline(spec)).run(PassContext(cluster=parse_cluster_spec(str(devices)), sink=sink), graph)
    return sink


def test_a_sum_over_four_ranks_becomes_one_reduce_with_a_warning_at_its_line() -> None:
    graph = sum_graph("_0 + _1 + _2 + _3", ["torch.Tensor"] * 4, [0, 1, 2, 3], 2)
    sink = run_comm_with_sink(graph, 4)
    node = graph.node("s")
    assert node.attributes()["comm.reduce"] == "sum" and node.attributes()["comm.sources"] == [0, 1, 2, 3]
    assert not any(n.op == "transfer" for n in graph)
    (warning,) = sink.diagnostics
    assert warning.code == "DAGC311" and not warning.is_error and warning.span == SourceSpan("m.py", 9, 9)
    plan = plan_communication(graph)
    (step,) = plan.collectives
    assert (step.kind, step.src, step.ranks, step.out) == ("reduce", 2, (0, 1, 2, 3), "s")
    ops = [op for ops in plan.programs() for op in ops if op.kind == "reduce"]
    assert sorted((op.value, op.out) for op in ops) == [("p0", None), ("p1", None), ("p2", "s"), ("p3", None)]


@pytest.mark.parametrize(("devices", "at", "spec"), [
    ([0, 0, 1, 2], 0, "comm,commcheck"),  # two operands on one rank
    ([1, 2, 3], 0, "comm,commcheck"),  # the sum's rank holds no operand
    ([0, 1], 0, "comm,commcheck"),  # one message: a reduce is no faster
    ([0, 1, 2, 3], 0, "comm{collectives=false},commcheck"),
])
def test_sums_that_stay_messages(devices: list[int], at: int, spec: str) -> None:
    graph = sum_graph("+".join(f"_{i}" for i in range(len(devices))), ["torch.Tensor"] * len(devices), devices, at)
    sink = run_comm_with_sink(graph, 4, spec)
    assert "comm.reduce" not in graph.node("s").attributes() and sink.diagnostics == []
    assert plan_communication(graph).collectives == []


def random_sum_graph(seed: int, n: int, devices: int) -> Graph:
    """Random tensor tasks and glue sums of three or four of them, placed at random."""
    rng = random.Random(seed)
    graph = Graph("rsum", module="m", modules={"m": "m.py"}, params=[Param("base", Const(1), "int")],
                  span=SourceSpan("m.py", 1, 1))
    names: list[str] = []
    for i in range(n):
        k = rng.choice([0, 0, 1, 3, 4])
        preds = rng.sample(names, k=min(len(names), k))
        if len(preds) >= 3:
            node = Node(f"g{i}", "glue", " + ".join(f"_{j}" for j in range(len(preds))),
                        tuple(Ref(p) for p in preds), types=("torch.Tensor",))
        else:
            node = Node(f"t{i}", "task", "m:f", tuple(Ref(p) for p in preds) or (Ref("base"),), types=("torch.Tensor",))
        node.span = SourceSpan("m.py", i + 2, 5)
        node.attrs = {"partition.device": rng.randrange(devices), "schedule.start": rng.random() * 10}
        graph.add_node(node)
        names.append(node.name)
    graph.returns = Seq("list", tuple(Ref(v) for v in names if not graph.consumers(v)))
    return graph


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), n=st.integers(1, 40), devices=st.integers(3, 6))
def test_plans_with_reduces_and_broadcasts_never_deadlock(seed: int, n: int, devices: int) -> None:
    graph = random_sum_graph(seed, n, devices)
    run_comm_with_sink(graph, devices)
    plan = plan_communication(graph)
    assert check_plan(plan) == []
    for step in plan.collectives:
        members = [r for r, ops in enumerate(plan.programs()) if any(op.tag == step.tag for op in ops)]
        assert members == list(step.ranks)


def test_random_sum_graphs_do_produce_reduces() -> None:
    kinds = []
    for seed in range(30):
        graph = random_sum_graph(seed, 30, 4)
        run_comm_with_sink(graph, 4)
        kinds += [s.kind for s in plan_communication(graph).collectives]
    assert "reduce" in kinds and "bcast" in kinds


def test_a_hand_made_reduce_order_that_would_deadlock_is_rejected() -> None:
    # ranks 0 and 1 meet in a reduce, then in a broadcast; rank 1 enters them the other way round
    red = Op("reduce", "s", "p", "s", 0, 0, (0, 1))
    bc = Op("bcast", "x@1", "x", "x@1", 0, 1, (0, 1))
    problems = check_programs([[red, bc], [bc, red]])
    assert {p.rank for p in problems} == {0, 1} and problems[0].cycle == (0, 1)
    assert "reduce `s` onto rank 0" in problems[0].message
    assert check_programs([[red, bc], [red, bc]]) == []


# ---- reduces and compression on 4 gloo ranks ---------------------------------------------------------
REDUCE = {
    "red.py": '''
        import dagc
        import torch


        @dagc.task(cost=10, out_size="256KiB", pure=True)
        def part(k: int) -> torch.Tensor:
            return torch.arange(65536, dtype=torch.float32) % 7 + k  # whole numbers: every order sums exactly


        @dagc.task(cost=10, out_size="256KiB", pure=True)
        def odd(k: int) -> torch.Tensor:
            return torch.ones(4, 1) * k if k % 2 else torch.ones(4) * k  # shapes Python broadcasts


        @dagc.task(cost=10, out_size="1MiB", pure=True, compress="bf16")
        def weights(seed: int) -> dict:
            gen = torch.Generator().manual_seed(seed)
            return {"w": torch.randn(1000, generator=gen), "pair": (torch.randn(10, dtype=torch.float64, generator=gen), 3)}


        @dagc.task(cost=10, out_size="1KiB", pure=True)
        def scale(w: dict, k: int) -> list:
            return [w["w"] * k, w["pair"][0] * k, w["pair"][1] + k]


        @dagc.task(reduce="mean", pure=True)
        def average(parts: list[torch.Tensor]) -> torch.Tensor:
            return sum(parts) / len(parts)


        @dagc.pipeline
        def red(seed: int = 0) -> dict:
            a, b, c, d = part(0), part(1), part(2), part(3)
            w, x, y, z = odd(0), odd(1), odd(2), odd(3)
            params = weights(seed)
            return {"total": a + b + c + d, "mean": (a + b + c + d) / 4, "mixed": w + x + y + z,
                    "averaged": average([a, b, c, d]), "scaled": [scale(params, k) for k in range(4)]}
    ''',
}


@pytest.mark.slow
def test_torch_program_reduces_and_compresses_and_equals_plain_run(tmp_path: Path, write_project) -> None:
    torch = pytest.importorskip("torch")
    from tests.test_backend_local import _plain_result
    from tests.test_backend_torch import _emit, _ruff_clean, launch

    root = write_project(REDUCE)
    expected = _plain_result(root / "red.py", "red", tmp_path)
    program = _emit(root / "red.py", tmp_path / "out" / "red_torch.py", 4)
    _ruff_clean(program)
    text = program.read_text()
    namespace: dict[str, object] = {}
    exec(text.split("COLLECTIVES = ", 1)[1].split("\nRETURNS", 1)[0].join(["C = ", "\n"]), namespace)
    kinds = sorted(entry[0] for entry in namespace["C"].values())  # type: ignore[attr-defined]
    assert kinds.count("reduce") == 4 and text.count("rt.reduce(") == 16
    assert [e[6] for e in namespace["C"].values() if e[0] == "reduce"].count(4.0) == 2  # type: ignore[attr-defined]
    assert "rt.task('average'" not in text  # the declared reduction runs as the collective
    assert set(namespace["COMPRESS"].values()) == {"bf16"}  # type: ignore[attr-defined]
    result = tmp_path / "result.pkl"
    launch(program, 4, ["--result", str(result)])
    got = pickle.loads(result.read_bytes())
    for key in ("total", "mean", "mixed", "averaged"):
        assert got[key].dtype == expected[key].dtype and torch.equal(got[key], expected[key]), key
    for k, (mine, plain) in enumerate(zip(got["scaled"], expected["scaled"])):
        assert mine[2] == plain[2]
        for a, b in ((mine[0], plain[0]), (mine[1], plain[1])):
            assert a.dtype == b.dtype
            if k == 0 or torch.equal(a, b):
                continue  # the task on the producer's rank reads the value itself, not a copy
            assert ((a - b).abs() <= b.abs() * 2.0**-8).all()  # bf16 on the wire: relative error ≤ 2^-8
    assert any(not torch.equal(m[0], p[0]) for m, p in zip(got["scaled"], expected["scaled"]))  # it did compress


def test_a_sum_read_on_every_rank_of_its_group_becomes_an_all_reduce() -> None:
    graph = sum_graph("_0 + _1 + _2 + _3", ["torch.Tensor"] * 4, [0, 1, 2, 3], 0)
    for d in range(4):
        graph.add_node(Node(f"step{d}", "task", "m:step", (Ref("s"),), span=SourceSpan("m.py", 10, 5),
                            attrs={"partition.device": d}))
    graph.returns = Seq("list", tuple(Ref(f"step{d}") for d in range(4)))
    sink = run_comm_with_sink(graph, 4)
    assert graph.node("s").attributes()["comm.reduce"] == "all" and "all-reduce" in sink.diagnostics[0].message
    assert not any(n.op == "transfer" for n in graph)  # no broadcast of the sum afterwards
    plan = plan_communication(graph)
    assert [s.kind for s in plan.collectives] == ["allreduce"]
    assert all(any(op.kind == "allreduce" and op.out == "s" for op in ops) for ops in plan.programs())
    # read on a rank outside the group: a reduce, then the sum moves
    graph = sum_graph("_0 + _1 + _2 + _3", ["torch.Tensor"] * 4, [0, 1, 2, 3], 0)
    graph.add_node(Node("far", "task", "m:step", (Ref("s"),), span=SourceSpan("m.py", 10, 5),
                        attrs={"partition.device": 4}))
    graph.returns = Ref("far")
    run_comm_with_sink(graph, 5)
    assert graph.node("s").attributes()["comm.reduce"] == "sum"
    assert [n.attributes()["transfer.dst"] for n in graph if n.op == "transfer"] == [4]


def test_a_task_declared_a_reduction_becomes_a_reduce() -> None:
    graph = sum_graph("_0 + _1 + _2 + _3", ["torch.Tensor"] * 4, [0, 1, 2, 3], 2)
    graph.remove_node("s")
    graph.add_node(Node("s", "task", "m:average", (Seq("list", tuple(Ref(f"p{i}") for i in range(4))),),
                        options=TaskOptions(reduce="mean"), span=SourceSpan("m.py", 9, 9),
                        attrs={"partition.device": 2}))
    sink = run_comm_with_sink(graph, 4)
    node = graph.node("s")
    assert node.attributes()["comm.reduce"] == "sum" and node.attributes()["comm.divisor"] == 4.0
    assert node.attributes()["comm.operands"] == ["p0", "p1", "p2", "p3"]
    assert "`average`'s body does not run there" in sink.diagnostics[0].message
    assert [s.kind for s in plan_communication(graph).collectives] == ["reduce"]
    undeclared = sum_graph("_0", ["torch.Tensor"], [0], 0)  # the same call without reduce= stays a task
    undeclared.remove_node("s")
    undeclared.add_node(Node("s", "task", "m:average", (Seq("list", (Ref("p0"),)),), attrs={"partition.device": 0}))
    from dagc.passes.reductions import task_sum

    assert task_sum(undeclared.node("s"), undeclared) is None


def test_reduction_declarations_are_checked_statically(tmp_path: Path) -> None:
    from dagc.frontend import compile_source

    good = tmp_path / "good.py"
    good.write_text("import dagc\nimport torch\n\n\n@dagc.task(reduce='sum')\n"
                    "def total(parts: list[torch.Tensor]) -> torch.Tensor:\n    return sum(parts)\n")
    assert [d.code for d in compile_source(good).sink.diagnostics] == ["DAGC003"]  # no pipeline: nothing else
    for signature in ("def total(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:",
                      "def total(parts: list) -> torch.Tensor:", "def total(parts: list[torch.Tensor]):"):
        bad = tmp_path / "bad.py"
        bad.write_text(f"import dagc\nimport torch\n\n\n@dagc.task(reduce='sum')\n{signature}\n    return 0\n")
        (diag,) = [d for d in compile_source(bad).sink.diagnostics if d.code != "DAGC003"]
        assert diag.code == "DAGC136" and diag.span.line == 6 and "list[torch.Tensor]" in diag.hint
    wrong = tmp_path / "wrong.py"
    wrong.write_text("import dagc\n\n\n@dagc.task(reduce='max')\ndef f(x):\n    return x\n")
    assert [d.code for d in compile_source(wrong).sink.diagnostics if d.code != "DAGC003"] == ["DAGC121"]
