"""The scheduler sees inside regions (dagc.ir.regions): a region asks for what its bodies need and
is planned for what they are expected to take; `dagc.trips` plans a loop that leaves early."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagc.backends import emit
from dagc.backends.graphviz import to_dot
from dagc.cluster import parse_cluster_spec
from dagc.cost import CostModel
from dagc.diagnostics import CompileError
from dagc.driver import compile_file
from dagc.frontend import compile_source
from dagc.ir import regions
from dagc.ir.core import Node
from dagc.ir.location import SourceSpan
from dagc.ir.payload import Region
from dagc.ir.types import Const, Ref, Seq, TaskOptions
from tests.interpreters import run_python
from tests.test_backend_local import _plain_result

HEAD = """
    import dagc


    @dagc.task(cost=0.6)
    def train_epoch(m: float) -> float:
        return m / 2


    @dagc.task(cost=0.1)
    def converged(m: float) -> bool:
        return m < 0.01


    @dagc.task(gpus=1, memory="64GiB", cost=5.0)
    def deploy(m: float) -> float:
        return m


    @dagc.task(cost=1.0)
    def archive(m: float) -> float:
        return -m
"""

EARLY_STOP = HEAD + """

    @dagc.pipeline
    def p(m0: float = 1.0):
        m = m0
        for epoch in {items}:
            m = train_epoch(m)
            if converged(m):
                break
        return m
"""

GPU_IN_IF = HEAD + """

    @dagc.pipeline
    def p(m0: float = 1.0):
        m = train_epoch(m0)
        if converged(m):
            m = deploy(m)
        return m
"""

CPU_1GIB = """
[device]
kind = "cpu"
memory = "1GiB"

[[nodes]]
name = "box"
devices = 2
"""


def _makespan(root: Path, cluster: str = "1") -> float:
    graph = compile_file(root / "p.py", passes="verify,partition,schedule", cluster=parse_cluster_spec(cluster))
    return float(graph.attrs["schedule.makespan"])


def test_gpu_task_inside_an_if_on_a_cpu_cluster_is_dagc302(tmp_path: Path, write_project) -> None:
    root = write_project({"p.py": GPU_IN_IF, "cluster.toml": CPU_1GIB})
    with pytest.raises(CompileError) as info:
        compile_file(root / "p.py", cluster=parse_cluster_spec(str(root / "cluster.toml")))
    [d] = info.value.diagnostics
    lines = (root / "p.py").read_text().splitlines()
    assert d.code == "DAGC302" and d.span is not None
    assert lines[d.span.line - 1].strip() == "m = deploy(m)"  # the task's own line, not the `if`
    assert "`cond.then.deploy` (inside the `cond` region `cond`)" in d.message
    assert "1 GPU(s)" in d.message and "no GPU device" in d.message and d.hint and "cpu" in d.hint


def test_memory_of_a_task_inside_an_if_is_checked_with_the_numbers(tmp_path: Path, write_project) -> None:
    source = GPU_IN_IF.replace('gpus=1, memory="64GiB"', 'memory="64GiB"')
    root = write_project({"p.py": source, "cluster.toml": CPU_1GIB})
    with pytest.raises(CompileError) as info:
        compile_file(root / "p.py", cluster=parse_cluster_spec(str(root / "cluster.toml")))
    [d] = info.value.diagnostics
    assert d.code == "DAGC302" and f"needs {64 << 30} bytes" in d.message and f"has {1 << 30}" in d.message


def test_region_on_a_gpu_cluster_is_placed_on_a_gpu(write_project) -> None:
    root = write_project({"p.py": GPU_IN_IF})
    graph = compile_file(root / "p.py", passes="verify,partition", cluster=parse_cluster_spec("2"))
    [cond] = [n for n in graph if n.op == "cond"]
    assert regions.demand(cond) == regions.Demand(gpus=1.0, memory=64 << 30, ranks=1, cpus=1.0)
    assert regions.devices(cond) in ((0,), (1,))


def test_cond_is_planned_as_its_costlier_branch(write_project) -> None:
    root = write_project({"p.py": GPU_IN_IF})
    # train_epoch 0.6 s, then the cond: converged is outside it; its then-branch deploys (5 s)
    assert _makespan(root, "2") == pytest.approx(0.6 + 0.1 + 5.0, abs=0.01)


@pytest.mark.parametrize("items,expected", [
    ("range(40)", 40 * (0.6 + 0.1)),                             # every trip, at most
    ("dagc.trips(range(40), expected=10)", 10 * (0.6 + 0.1)),    # the declared expectation
    ("dagc.trips(range(40), expected=400)", 40 * (0.6 + 0.1)),  # capped by the items
])
def test_early_stopping_loop_is_planned_for_its_trips(write_project, items: str, expected: float) -> None:
    root = write_project({"p.py": EARLY_STOP.format(items=items)})
    assert _makespan(root) == pytest.approx(expected, abs=0.01)


def test_trips_hint_is_stored_and_runs_like_plain_python(tmp_path: Path, write_project) -> None:
    root = write_project({"p.py": EARLY_STOP.format(items="dagc.trips(range(40), expected=10)")})
    graph = compile_file(root / "p.py")
    [loop] = [n for n in graph if n.op == "loop"]
    assert loop.attrs[regions.TRIPS_ATTR] == 10 and regions.max_trips(loop) == 40
    assert "≤ 40 trips, planned 10" in to_dot(graph)
    program = tmp_path / "p_local.py"
    program.write_text(emit(graph, "local", program))
    out = run_python([str(program)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == repr(_plain_result(root / "p.py", "p", tmp_path))


def test_profile_gives_a_loop_its_measured_trips(tmp_path: Path, write_project) -> None:
    root = write_project({"p.py": EARLY_STOP.format(items="dagc.trips(range(40), expected=30)")})
    program = tmp_path / "p_local.py"
    program.write_text(emit(compile_file(root / "p.py"), "local", program))
    run_python([str(program), "--run-dir", str(tmp_path / "run")], check=True,
                   capture_output=True)
    graph = compile_file(root / "p.py", profile=tmp_path / "run", passes="verify,partition,schedule")
    [loop] = [n for n in graph if n.op == "loop"]
    # 1.0 halves until below 0.01: 7 trips, whatever the annotation said
    assert loop.attrs[regions.TRIPS_ATTR] == 7 == loop.attrs["profile.trips"]
    assert loop.attrs["profile.annotated"] == {"trips": 30}
    body = regions.bodies(loop)["body"]
    per_trip = sum(n.attrs["profile.duration"] for n in body)
    assert all(n.options.cost == pytest.approx(n.attrs["profile.duration"], abs=1e-6) for n in body)
    assert CostModel().work(loop)[0] == pytest.approx(7 * per_trip, abs=1e-5)
    assert float(graph.attrs["schedule.makespan"]) < 1.0  # measured microseconds, not 7 × 0.7 s planned


@pytest.mark.parametrize("items", ['dagc.trips(range(40), expected="many")', "dagc.trips(range(40))",
                                   "dagc.trips(range(40), expected=-1)"])
def test_bad_trips_hint_is_dagc135(write_project, items: str) -> None:
    root = write_project({"p.py": EARLY_STOP.format(items=items)})
    result = compile_source(root / "p.py")
    found = [(d.code, d.span.line) for d in result.sink.diagnostics if d.is_error and d.span]
    line = next(i for i, text in enumerate((root / "p.py").read_text().splitlines(), 1) if "for epoch" in text)
    assert found == [("DAGC135", line)]


def test_trips_hint_outside_a_loop_is_dagc135(write_project) -> None:
    source = HEAD + "\n\n    @dagc.pipeline\n    def p():\n        xs = dagc.trips([1, 2], expected=1)\n" \
        "        return archive(xs[0])\n"
    root = write_project({"p.py": source})
    codes = [d.code for d in compile_source(root / "p.py").sink.diagnostics if d.is_error]
    assert codes == ["DAGC135"]


# ---- the module on hand-built nodes ------------------------------------------------------------------
SPAN = SourceSpan("r.py", 1, 1)


def _task(name: str, **options: object) -> Node:
    return Node(name, "task", f"r:{name}", options=TaskOptions(**options), span=SPAN)  # type: ignore[arg-type]


def _loop(name: str, body: list[Node], items: int, trips: int | None = None) -> Node:
    attrs: dict[str, object] = {} if trips is None else {regions.TRIPS_ATTR: trips}
    payload = Region(yields={"body": (Ref(f"{name}@i"),)}, args={"body": (f"{name}@i",)},
                     iter=Seq("list", tuple(Const(k) for k in range(items))))
    return Node(name, "loop", "for", (Const(None),), span=SPAN, attrs=attrs, bodies={"body": body}, region=payload)


def test_nested_regions_aggregate_demand_and_work() -> None:
    inner = _loop("inner", [_task("a", cost=2.0, memory=1 << 30), _task("b", flops=3e12)], items=4, trips=2)
    cond = Node("c", "cond", "if", (Ref("x"),), span=SPAN,
                region=Region(yields={"then": (), "else": ()}),
                bodies={"then": [inner], "else": [_task("e", cost=7.0, gpus=2.0)]})
    outer = _loop("outer", [cond, _task("z", ranks=4)], items=3)
    assert [n.name for n in regions.walk(outer)] == ["c", "inner", "a", "b", "e", "z"]
    assert [n.name for n in regions.leaves(outer)] == ["a", "b", "e", "z"]
    assert regions.demand(outer) == regions.Demand(gpus=2.0, memory=1 << 30, ranks=4, cpus=1.0)
    cost = CostModel()
    # inner: 2 trips × (2 s + 3e12 flops) = 4 s + 6e12 flops (10 s at 1e12/s) > else-branch 7 s
    assert cost.work(inner) == (4.0, 6e12) and cost.work(cond) == (4.0, 6e12)
    # outer: 3 trips × (cond + z, which defaults to 1 s)
    assert cost.work(outer) == (3 * (4.0 + 1.0), 3 * 6e12)
    assert [n.name for n in regions.walk(outer) if cost.uses_default_cost(n)] == ["z"]


def test_plain_nodes_answer_for_themselves() -> None:
    t = _task("t", cost=3.0, gpus=1.0, cpus=2.0)
    assert list(regions.walk(t)) == []
    assert regions.leaves(t) == [t] and regions.devices(t) == ()
    assert regions.demand(t) == regions.Demand(gpus=1.0, memory=None, ranks=1, cpus=2.0)
    assert regions.expected_trips(t) == 1.0 and CostModel().work(t) == (3.0, 0.0)
    t.placement = t.placement.on((2, 3))
    assert regions.devices(t) == (2, 3)


def test_try_region_is_planned_as_its_body_then_its_finally_body() -> None:
    region = Node("t", "try", "try", (), span=SPAN, region=Region(yields={"body": (), "finally": ()}),
                  bodies={"body": [_task("train", cost=5.0, gpus=1.0), _task("ev", flops=2e12)],
                          "finally": [_task("notify", cost=0.5, memory=1 << 20)]})
    assert [n.name for n in regions.walk(region)] == ["train", "ev", "notify"]
    assert regions.demand(region) == regions.Demand(gpus=1.0, memory=1 << 20, ranks=1, cpus=1.0)
    assert CostModel().work(region) == (5.5, 2e12)
