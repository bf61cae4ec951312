"""The partition, schedule, comm, fuse and stages passes on random IR graphs."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dagc.cluster import Cluster, parse_cluster_spec
from dagc.cost import CostModel
from dagc.diagnostics import CompileError
from dagc.ir.core import Graph, Node
from dagc.ir.location import SourceSpan
from dagc.ir.types import Const, Ref, Seq, TaskOptions
from dagc.passes import PassContext, PassManager, parse_pipeline
from dagc.passes.stages import split_chain, stage_times
from dagc.sched import Problem, validate
from dagc.sched.problem import Schedule
from tests.property import examples

SETTINGS = settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def span(i: int) -> SourceSpan:
    return SourceSpan("pipe.py", i + 1, 5)


@st.composite
def graphs(draw, max_nodes: int = 12) -> Graph:
    n = draw(st.integers(1, max_nodes))
    g = Graph("p", module="pipe", span=span(0))
    for i in range(n):
        preds = draw(st.lists(st.integers(0, max(0, i - 1)), max_size=min(3, i), unique=True)) if i else []
        args = tuple(Ref(f"t{j}") for j in preds)
        if len(args) > 1 and draw(st.booleans()):
            args = (Seq("list", args),)
        opts = TaskOptions(
            cost=draw(st.sampled_from([None, 0.0, 1e-6, 1.0, 5.0])),
            out_size=draw(st.sampled_from([None, 0, 10**6])),
            gpus=draw(st.sampled_from([0.0, 0.0, 1.0])),
            retries=draw(st.sampled_from([0, 0, 1])),
        )
        g.add_node(Node(f"t{i}", "task", f"pipe:f{i % 3}", args=args + (Const(i),), options=opts, span=span(i)))
    g.returns = Ref(f"t{n - 1}")
    return g


def run(text: str, graph: Graph, cluster: Cluster | None, backend: str = "local") -> PassContext:
    ctx = PassContext(cluster=cluster, cost_model=CostModel(backend=backend), backend=backend)
    PassManager(parse_pipeline(text)).run(ctx, graph)
    return ctx


CLUSTERS = st.sampled_from([None, "1", "3", "2x2"])


@SETTINGS
@given(graphs(), CLUSTERS, st.sampled_from(["dagc", "heft"]))
def test_partition_schedule_valid(g, spec, algo):
    cluster = parse_cluster_spec(spec)
    run(f"verify,partition{{algo={algo} budget=0.02}},schedule", g, cluster)
    assert g.attrs["partition.algo"] == algo
    p = Problem.from_graph(g, CostModel(), cluster)
    devs = [tuple(d) if isinstance(d, list) else (d,) for d in (n.attributes()["partition.device"] for n in g)]
    s = Schedule(devs, [n.attributes()["schedule.start"] for n in g], [n.attributes()["schedule.finish"] for n in g])
    assert validate(p, s) == []
    assert g.attrs["schedule.makespan"] == pytest.approx(s.makespan)
    assert g.attrs["schedule.makespan"] >= g.attrs["schedule.lower_bound"] - 1e-9
    assert g.attrs["schedule.ratio"] >= 1 - 1e-9
    assert len(g.attrs["schedule.utilization"]) == cluster.n_devices
    for src, dst, value, nbytes in g.attrs["schedule.cut_edges"]:
        assert g.node(src).attributes()["partition.device"] != g.node(dst).attributes()["partition.device"]
        assert value in g.node(src).outputs and nbytes >= 0
    # order = position on the device
    per: dict[int, list[Node]] = {}
    for n in g:
        per.setdefault(devs[g.nodes.index(n)][0], []).append(n)
    for nodes in per.values():
        assert sorted(n.attributes()["schedule.order"] for n in nodes) == list(range(len(nodes)))


@SETTINGS
@given(graphs(), st.integers(0, 2))
def test_partition_deterministic(g, seed):
    cluster = parse_cluster_spec("2x2")
    a, b = g.copy(), g.copy()
    run(f"partition{{seed={seed} budget=0.02}},schedule", a, cluster)
    run(f"partition{{seed={seed} budget=0.02}},schedule", b, cluster)
    assert [n.attrs for n in a] == [n.attrs for n in b]


@SETTINGS
@given(graphs())
def test_comm_makes_transfers_explicit(g):
    cluster = parse_cluster_spec("2x2")
    run("partition{algo=heft},schedule,comm", g, cluster)
    dev = {n.name: n.attributes()["partition.device"] for n in g}
    for src, dst, value in g.data_edges():
        s, d = g.node(src), g.node(dst)
        if s.op == "transfer" and s.attributes().get("transfer.kind") == "broadcast":  # one value to several devices
            targets = s.attributes()["transfer.dst"]
            assert dev[dst] in targets and value.endswith("@" + "-".join(map(str, targets)))
            assert s.args == (Ref(value.rsplit("@", 1)[0]),)
            assert s.attributes()["transfer.src"] == dev[g.producer(s.args[0].name).name] not in targets
        elif s.op == "transfer":
            assert s.attributes()["transfer.dst"] == dev[dst] and value.endswith(f"@{dev[dst]}")
            assert s.args == (Ref(value.rsplit("@", 1)[0]),)
            assert s.attributes()["transfer.src"] == dev[g.producer(s.args[0].name).name]
        else:
            assert dev[src] == dev[dst] or d.op == "transfer"


def test_comm_example():
    g = Graph("p", span=span(0))
    g.add_node(Node("a", "task", "m:a", options=TaskOptions(cost=1.0, out_size=4096), span=span(1)))
    g.add_node(Node("b", "task", "m:b", args=(Ref("a"),), options=TaskOptions(cost=1.0), span=span(2)))
    g.add_node(Node("c", "task", "m:c", args=(Ref("a"), Ref("b")), options=TaskOptions(cost=1.0), span=span(3)))
    g.node("a").placement = g.node("a").placement.on((0,))
    g.node("b").placement = g.node("b").placement.on((1,))
    g.node("c").placement = g.node("c").placement.on((1,))
    run("comm", g, parse_cluster_spec("2"))
    t = g.node("a@1")
    assert t.op == "transfer" and t.outputs == ("a@1",) and t.span == g.node("a").span
    assert t.attributes()["transfer.src"] == 0 and t.attributes()["transfer.dst"] == 1 and t.attributes()["transfer.bytes"] == 4096
    assert g.node("b").args == (Ref("a@1"),) and g.node("c").args == (Ref("a@1"), Ref("b"))
    assert [n.name for n in g] == ["a", "a@1", "b", "c"]


def _groups_of(g: Graph) -> dict[str, str]:
    out = {}
    for n in g:
        if n.op == "fused":
            for m in n.bodies["members"]:
                out[m.name] = n.name
        else:
            out[n.name] = n.name
    return out


@SETTINGS
@given(graphs(), st.sampled_from(["local", "ray"]), st.sampled_from([None, "2"]))
def test_fuse_keeps_reachability(g, backend, spec):
    before = g.copy()
    pipeline = "fuse{tiny=0.01}" if spec is None else "partition{algo=heft},fuse{tiny=0.01}"
    if spec is not None:
        run("partition{algo=heft}", before, parse_cluster_spec(spec), backend=backend)  # placed as `g` is
    ctx = run(pipeline, g, parse_cluster_spec(spec) if spec else None, backend=backend)
    group = _groups_of(g)
    assert set(group) == {n.name for n in before}
    expected = {(group[a], group[b]) for a, b in before.reachability_pairs() if group[a] != group[b]}
    assert g.reachability_pairs() == expected
    for n in g:
        if n.op == "fused":
            members = n.bodies["members"]
            assert len(members) >= 2 and n.span == before.node(members[0].name).span
            olds = [before.node(m.name) for m in members]
            assert len({(o.options.retries, o.options.gpus, o.attributes().get("partition.device")) for o in olds}) == 1
    assert g.output_values() == before.output_values()
    assert all(r.pass_name == "fuse" for r in ctx.remarks)


def test_fuse_chain_remarks_and_refusals():
    g = Graph("p", span=span(0))
    g.add_node(Node("a", "task", "m:a", options=TaskOptions(cost=1.0), span=span(1)))
    g.add_node(Node("b", "task", "m:b", args=(Ref("a"),), options=TaskOptions(cost=1.0), span=span(2)))
    g.add_node(Node("c", "task", "m:c", args=(Ref("b"),), options=TaskOptions(cost=1.0, retries=2), span=span(3)))
    g.returns = Ref("c")
    ctx = run("fuse", g, None)
    assert [n.op for n in g] == ["fused", "task"]
    fused = g.nodes[0]
    assert [m.name for m in fused.bodies["members"]] == ["a", "b"]
    assert fused.outputs == ("b",) and fused.options.cost == 2.0
    assert g.node("c").args == (Ref("b"),)
    text = " | ".join(r.message for r in ctx.remarks)
    assert "fused chain `a` → `b`" in text and "different retries" in text


def test_unplaceable_task_is_dagc302():
    g = Graph("p", span=span(0))
    g.add_node(Node("big", "task", "m:big", options=TaskOptions(gpus=8.0), span=span(4)))
    with pytest.raises(CompileError) as info:
        run("partition", g, parse_cluster_spec("2x4"))
    d = info.value.diagnostics[0]
    assert d.code == "DAGC302" and d.span == span(4) and d.hint and "8 devices on one node" in d.message


def test_multi_gpu_task_gets_device_list():
    g = Graph("p", span=span(0))
    g.add_node(Node("a", "task", "m:a", options=TaskOptions(cost=1.0, gpus=2.0), span=span(1)))
    g.add_node(Node("b", "task", "m:b", args=(Ref("a"),), options=TaskOptions(cost=1.0), span=span(2)))
    run("partition,schedule", g, parse_cluster_spec("2x2"))
    devs = g.node("a").attributes()["partition.device"]
    assert isinstance(devs, list) and len(devs) == 2 and devs[0] // 2 == devs[1] // 2


def brute_force(times, k, boundary):
    n = len(times)
    best = float("inf")
    for cuts in itertools.combinations(range(1, n), k - 1):
        best = min(best, max(stage_times(times, list(cuts), boundary)))
    return best


@settings(max_examples=examples(150), deadline=None)
@given(
    st.lists(st.sampled_from([0.0, 1.0, 2.0, 3.5, 7.0, 10.0]), min_size=1, max_size=9),
    st.integers(1, 5),
    st.lists(st.sampled_from([0.0, 0.5, 4.0]), min_size=10, max_size=10),
)
def test_stages_equal_brute_force(times, k, cut_cost):
    k = min(k, len(times))

    def boundary(b: int, j: int) -> float:
        return cut_cost[b] * (1 + 0.5 * j)

    value, cuts = split_chain(times, k, boundary)
    assert value == pytest.approx(brute_force(times, k, boundary))
    assert len(cuts) == k - 1 and max(stage_times(times, cuts, boundary)) == pytest.approx(value)


def test_stages_pass_on_layer_chain():
    g = Graph("p", span=span(0))
    costs = [4.0, 1.0, 1.0, 1.0, 1.0, 4.0]
    for i, c in enumerate(costs):
        args = (Ref(f"l{i - 1}"),) if i else ()
        g.add_node(Node(f"l{i}", "task", "m:layer", args=args, options=TaskOptions(cost=c, out_size=0), span=span(i)))
    run("stages{k=3}", g, parse_cluster_spec("3"))
    assert [n.attrs["stages.stage"] for n in g] == [0, 1, 1, 1, 1, 2]
    assert [n.attributes()["partition.device"] for n in g] == [0, 1, 1, 1, 1, 2]
    assert g.attrs["stages.bottleneck"] == pytest.approx(4.0 + 4 * CostModel().overhead)


def test_pass_options_are_read_by_their_declared_type() -> None:
    from typing import Literal

    from dagc.passes.base import PassSpecError, _convert, parse_pipeline

    [partition] = parse_pipeline("partition{algo=heft seed=7 budget=1.5}")
    assert (partition.algo, partition.seed, partition.budget) == ("heft", 7, 1.5)
    [fuse] = parse_pipeline("fuse{siblings=off}")
    assert fuse.siblings is False
    for spec, said in (("partition{seed=seven}", "must be int"), ("fuse{siblings=maybe}", "must be true or false"),
                       ("partition{budget=lots}", "must be float")):
        with pytest.raises(PassSpecError, match=said):
            parse_pipeline(spec)
    assert _convert("none", int | None, "p", "k") is None and _convert("3", int | None, "p", "k") == 3
    assert _convert("b", Literal["a", "b"], "p", "k") == "b"
    with pytest.raises(PassSpecError, match="must be one of: a, b"):
        _convert("c", Literal["a", "b"], "p", "k")
    with pytest.raises(PassSpecError, match="cannot be set from text"):
        _convert("1,2", list[int], "odd", "pairs")
