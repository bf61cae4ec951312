"""The gather collective: a list of values produced on several ranks and read, as a list, on one
rank. The `comm` pass chooses it with the α-β model against point-to-point receives, `commcheck`
proves orders with gathers deadlock-free, and the emitted torch program equals the plain run."""

from __future__ import annotations

import pickle
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dagc.cluster import Cluster, parse_cluster_spec
from dagc.commtime import timed_makespan
from dagc.cost import fanin_time, gather_time
from dagc.diagnostics import DiagnosticSink
from dagc.ir.core import Graph, Node, Param
from dagc.ir.location import SourceSpan
from dagc.ir.types import Const, Ref, Seq, TaskOptions
from dagc.passes.base import PassContext, PassManager, parse_pipeline
from dagc.passes.commcheck import Op, check_plan, check_programs, plan_communication
from tests.property import examples

KiB = 1 << 10


# ---- cost model -----------------------------------------------------------------------------------
def test_a_gather_saves_latency_from_three_senders_on() -> None:
    cluster = Cluster.uniform(1, 4).with_links(bandwidth=1e9, latency=1e-5)
    n = 4 * KiB
    assert gather_time(cluster, [n] * 3, 0, [1, 2, 3]) == pytest.approx(2 * 1e-5 + 3 * n / 1e9)  # 2 tree rounds
    assert fanin_time(cluster, n, 0, [1, 2, 3]) == pytest.approx(3 * (1e-5 + n / 1e9))
    assert gather_time(cluster, [n] * 2, 0, [1, 2]) == pytest.approx(fanin_time(cluster, n, 0, [1, 2]))
    assert gather_time(cluster, [n, 2 * n], 0, [0, 1]) == pytest.approx(1e-5 + 2 * n / 1e9)  # the root sends nothing


# ---- the comm pass ------------------------------------------------------------------------------------
def list_graph(devices: list[int], at: int, *, also: int | None = None, types: str | None = "torch.Tensor") -> Graph:
    """Values `v{i}` on `devices[i]`; `reader` on device `at` takes them as one list; with `also`,
    a second task on that device reads `v1` alone."""
    graph = Graph("g", module="m", modules={"m": "m.py"}, span=SourceSpan("m.py", 1, 1))
    for i, device in enumerate(devices):
        graph.add_node(Node(f"v{i}", "task", "m:part", (Const(i),), types=(types,), options=TaskOptions(out_size=KiB),
                            span=SourceSpan("m.py", 2 + i, 5), attrs={"partition.device": device}))
    items = tuple(Ref(f"v{i}") for i in range(len(devices)))
    graph.add_node(Node("reader", "task", "m:read", (Seq("list", items), Const(7)), span=SourceSpan("m.py", 9, 5),
                        attrs={"partition.device": at}))
    outs = [Ref("reader")]
    if also is not None:
        graph.add_node(Node("other", "task", "m:one", (Ref("v1"),), span=SourceSpan("m.py", 10, 5),
                            attrs={"partition.device": also}))
        outs.append(Ref("other"))
    graph.returns = Seq("list", tuple(outs))
    return graph


def run_passes(graph: Graph, devices: int, spec: str = "comm,commcheck") -> DiagnosticSink:
    sink = DiagnosticSink()
    PassManager(parse_pipeline(spec)).run(PassContext(cluster=parse_cluster_spec(str(devices)), sink=sink), graph)
    return sink


def test_a_list_from_three_ranks_is_gathered_onto_its_reader() -> None:
    graph = list_graph([0, 3, 1, 2], 0)
    assert run_passes(graph, 4).diagnostics == []
    transfers = [n for n in graph if n.op == "transfer"]
    assert sorted(n.outputs[0] for n in transfers) == ["v1@0", "v2@0", "v3@0"]
    assert {n.attributes()["transfer.kind"] for n in transfers} == {"gather"}
    assert all(n.attributes()["transfer.gather"] == "reader" and n.attributes()["transfer.group"] == [0, 3, 1, 2] for n in transfers)
    reader = graph.node("reader")
    assert reader.args[0] == Seq("list", (Ref("v0"), Ref("v1@0"), Ref("v2@0"), Ref("v3@0")))
    plan = plan_communication(graph)
    (step,) = plan.collectives
    assert (step.kind, step.node, step.src, step.ranks) == ("gather", "reader", 0, (0, 1, 2, 3))
    assert plan.gathers["reader"] == (("v1", "v1@0", 3), ("v2", "v2@0", 1), ("v3", "v3@0", 2))  # the list's order
    assert plan.moves == []
    ops = {r: [op for op in ops if op.kind == "gather"] for r, ops in enumerate(plan.programs())}
    assert ops[0][0].outs == ("v1@0", "v2@0", "v3@0") and ops[0][0].value is None
    assert [ops[r][0].value for r in (1, 2, 3)] == ["v2", "v3", "v1"] and not any(ops[r][0].outs for r in (1, 2, 3))
    assert graph.attrs["commcheck.collectives"] == 1


@pytest.mark.parametrize(("devices", "at", "also", "spec"), [
    ([0, 1, 2], 0, None, "comm,commcheck"),  # two senders: a gather saves nothing
    ([1, 1, 2, 3], 0, None, "comm,commcheck"),  # two values from one rank
    ([0, 1, 2, 3], 0, 0, "comm,commcheck"),  # v1 is read on the reader's rank by another task too
    ([0, 1, 2, 3], 0, None, "comm{collectives=false},commcheck"),
])
def test_lists_that_stay_messages(devices: list[int], at: int, also: int | None, spec: str) -> None:
    graph = list_graph(devices, at, also=also)
    assert run_passes(graph, 4, spec).diagnostics == []
    assert not any(n.attributes().get("transfer.kind") == "gather" for n in graph)
    assert plan_communication(graph).collectives == []


def test_a_value_also_read_elsewhere_is_gathered_and_sent_on() -> None:
    graph = list_graph([0, 1, 2, 3], 0, also=2)  # v1 read on rank 2 as well: a message there
    run_passes(graph, 4)
    kinds = sorted((n.outputs[0], n.attributes().get("transfer.kind")) for n in graph if n.op == "transfer")
    assert kinds == [("v1@0", "gather"), ("v1@2", None), ("v2@0", "gather"), ("v3@0", "gather")]
    plan = plan_communication(graph)
    assert check_plan(plan) == [] and [s.kind for s in plan.collectives] == ["gather"]
    assert [(m.value, m.dst) for m in plan.moves] == [("v1", 2), ("other", 0)]  # v1 on to rank 2; the result


def test_the_plan_estimate_prices_a_gather_below_its_receives() -> None:
    cluster = Cluster.uniform(1, 4).with_links(bandwidth=1e9, latency=1e-3)  # latency-bound: 1 KiB values
    timed = {}
    for spec in ("comm,commcheck", "comm{collectives=false},commcheck"):
        graph = list_graph([0, 1, 2, 3], 0)
        PassManager(parse_pipeline(f"schedule,{spec}")).run(PassContext(cluster=cluster, sink=DiagnosticSink()), graph)
        timed[spec] = timed_makespan(graph, cluster)
    assert timed["comm,commcheck"] < timed["comm{collectives=false},commcheck"]
    assert timed["comm{collectives=false},commcheck"] - timed["comm,commcheck"] == pytest.approx(1e-3, rel=0.05)


# ---- deadlock freedom with gathers ---------------------------------------------------------------------
def random_list_graph(seed: int, n: int, devices: int) -> Graph:
    """Random tasks, some reading a list of 3-5 earlier results, some glue sums, a few on two ranks."""
    rng = random.Random(seed)
    graph = Graph("rlist", module="m", modules={"m": "m.py"}, params=[Param("base", Const(1), "int")],
                  span=SourceSpan("m.py", 1, 1))
    names: list[str] = []
    for i in range(n):
        preds = rng.sample(names, k=min(len(names), rng.choice([0, 1, 3, 4, 5])))
        device: object = rng.randrange(devices)
        options = TaskOptions()
        if len(preds) >= 3 and rng.random() < 0.3:
            node = Node(f"g{i}", "glue", " + ".join(f"_{j}" for j in range(len(preds))), tuple(Ref(p) for p in preds),
                        types=("torch.Tensor",))
        else:
            args = (Seq("list", tuple(Ref(p) for p in preds)),) if len(preds) >= 3 else \
                tuple(Ref(p) for p in preds) or (Ref("base"),)
            if rng.random() < 0.1 and devices >= 2:
                options = TaskOptions(ranks=2)
                device = rng.sample(range(devices), 2)
            node = Node(f"t{i}", "task", "m:f", args, types=("torch.Tensor",), options=options)
        node.span = SourceSpan("m.py", i + 2, 5)
        node.attrs = {"partition.device": device, "schedule.start": rng.random() * 10}
        graph.add_node(node)
        names.append(node.name)
    graph.returns = Seq("list", tuple(Ref(v) for v in names if not graph.consumers(v)))
    return graph


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), n=st.integers(1, 40), devices=st.integers(3, 6))
def test_plans_with_gathers_reduces_and_broadcasts_never_deadlock(seed: int, n: int, devices: int) -> None:
    graph = random_list_graph(seed, n, devices)
    run_passes(graph, devices)
    plan = plan_communication(graph)
    assert check_plan(plan) == []
    programs = plan.programs()
    for step in plan.collectives:
        members = [r for r, ops in enumerate(programs) if any(op.tag == step.tag for op in ops)]
        assert members == list(step.ranks)
    for name, parts in plan.gathers.items():  # every gathered value is held by its root, read by its reader
        root = plan.home[name][0]
        assert all(graph.node(name).attributes()["partition.device"] == root for _ in parts)
        assert {out for _, out, _ in parts} <= set(plan.inputs[name])
    assert timed_makespan(graph, parse_cluster_spec(str(devices))) > 0


def test_random_list_graphs_do_produce_gathers() -> None:
    kinds = []
    for seed in range(30):
        graph = random_list_graph(seed, 30, 4)
        run_passes(graph, 4)
        kinds += [s.kind for s in plan_communication(graph).collectives]
    assert {"gather", "reduce", "bcast"} <= set(kinds)


def test_a_hand_made_gather_order_that_would_deadlock_is_rejected() -> None:
    # two gathers over ranks 0-2: rank 2 enters the second one first, so each waits on the other
    a = (Op("gather", "ra", None, None, 0, 0, (0, 1, 2), ("x@0", "y@0")), Op("gather", "ra", "x", None, 0, 0, (0, 1, 2)),
         Op("gather", "ra", "y", None, 0, 0, (0, 1, 2)))
    b = (Op("gather", "rb", "p", None, 1, 1, (0, 1, 2)), Op("gather", "rb", None, None, 1, 1, (0, 1, 2), ("p@1", "q@1")),
         Op("gather", "rb", "q", None, 1, 1, (0, 1, 2)))
    problems = check_programs([[a[0], b[0]], [a[1], b[1]], [b[2], a[2]]])
    assert {p.rank for p in problems} == {0, 1, 2}
    assert any("gather `rb` onto rank 1" in p.message for p in problems)
    assert check_programs([[a[0], b[0]], [a[1], b[1]], [a[2], b[2]]]) == []
    # a sender that does not hold its value yet is a data-flow error; the root holds every value after it
    late = check_programs([[a[0], Op("run", "use")], [a[1]], [a[2]]], inputs={"use": ("x@0", "y@0")}, outputs={})
    assert [p.message for p in late] == ["rank 1 gathers `x` before it holds it", "rank 2 gathers `y` before it holds it"]


# ---- the emitted torch program on 4 gloo ranks ----------------------------------------------------------
GATHER = {
    "gat.py": '''
        import dagc
        import torch


        @dagc.task(cost=10, out_size="64KiB", pure=True)
        def shard(k: int) -> "torch.Tensor[float32, 16]":
            return torch.arange(16, dtype=torch.float32) * k  # statically shaped: gathered into buffers


        @dagc.task(cost=10, out_size="1KiB", pure=True)
        def stats(k: int) -> dict:
            return {"k": k, "name": f"w{k}", "t": torch.ones(k + 1)}  # any object: gathered pickled


        @dagc.task(cost=10, out_size="1KiB", pure=True, compress="bf16")
        def noisy(k: int) -> "torch.Tensor[float64, 5]":
            return torch.linspace(0, 1, 5, dtype=torch.float64) / 3 + k  # static and narrowed: bf16 buffers


        @dagc.task(cost=1, pure=True)
        def concat(parts: list[torch.Tensor]) -> torch.Tensor:
            return torch.cat(parts)


        @dagc.task(cost=1, pure=True)
        def names(infos: list[dict]) -> list:
            return [(i["name"], i["t"].numel()) for i in infos]


        @dagc.task(cost=1, pure=True)
        def stack(xs: tuple) -> torch.Tensor:
            return torch.stack(list(xs))


        @dagc.pipeline
        def gat(seed: int = 0) -> dict:
            parts = [shard(k + seed) for k in range(4)]
            infos = [stats(k) for k in range(4)]
            rough = [noisy(k) for k in range(4)]
            return {"cat": concat(parts), "names": names(infos[::-1]), "stack": stack(tuple(rough))}
    ''',
}


@pytest.mark.slow
def test_torch_program_gathers_and_equals_plain_run(tmp_path: Path, write_project) -> None:
    torch = pytest.importorskip("torch")
    from tests.test_backend_local import _plain_result
    from tests.test_backend_torch import _emit, _ruff_clean, launch
    from tests.test_collective_sums import assert_same, collectives_of

    root = write_project(GATHER)
    expected = _plain_result(root / "gat.py", "gat", tmp_path)
    program = _emit(root / "gat.py", tmp_path / "out" / "gat_torch.py", 4)
    _ruff_clean(program)
    text = program.read_text()
    entries = collectives_of(text)
    assert sorted(e[0] for e in entries.values()) == ["gather"] * 3  # each list: one gather, no receives
    statics = sorted(str(e[5]) for e in entries.values())
    assert statics == ["('float32', (16,))", "('float64', (5,))", "None"]  # tensors into buffers; dicts pickled
    namespace: dict[str, object] = {}
    exec(text.split("COMPRESS = ", 1)[1].split("\n", 1)[0].join(["C = ", "\n"]), namespace)
    assert list(namespace["C"].values()) == ["bf16"]  # type: ignore[attr-defined]
    moves = text.split("MOVES = {", 1)[1].split("\n}\n", 1)[0]
    assert "shard" not in moves and "stats" not in moves and "noisy" not in moves
    assert text.count("rt.gather(None, ") == 3 and text.count("rt.gather(") == 12
    result = tmp_path / "result.pkl"
    launch(program, 4, ["--result", str(result)])
    got = pickle.loads(result.read_bytes())
    assert_same(got["cat"], expected["cat"])
    assert got["names"] == expected["names"] == [("w3", 4), ("w2", 3), ("w1", 2), ("w0", 1)]
    stacked, plain = got["stack"], expected["stack"]
    assert stacked.dtype == plain.dtype == torch.float64
    assert ((stacked - plain).abs() <= plain.abs() * 2.0**-8).all()  # bf16 on the wire: relative error ≤ 2^-8
    assert not torch.equal(stacked, plain)  # it did compress


def test_a_resumed_run_keeps_or_drops_a_gather_whole() -> None:
    pytest.importorskip("torch")
    from dagc.runtime.distributed import plan_steps
    from dagc.runtime.rows import TaskRow

    tasks = {f"v{r}": TaskRow(f"fp{r}", ranks=(r,), outputs=(f"v{r}",)) for r in (1, 2, 3)}
    tasks["reader"] = TaskRow("fpr", ranks=(0,), inputs=("v1@0", "v2@0", "v3@0"), outputs=("reader",))
    collectives = {0: ("gather", (("v1", 1), ("v2", 2), ("v3", 3)), ("v1@0", "v2@0", "v3@0"), 0, (0, 1, 2, 3),
                       None, None, None)}
    run, load, active = plan_steps(tasks, {}, ("reader",), {"v2"}, collectives)
    assert active == {0} and run == {"v1", "v3", "reader"} and load == {"v2"}  # v2 stored: loaded to be sent
    run, load, active = plan_steps(tasks, {}, ("reader",), {"reader", "v1"}, collectives)
    assert active == set() and run == {"v2", "v3"} and load == {"reader"}  # the reader is done: no gather
