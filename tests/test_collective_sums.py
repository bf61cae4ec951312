"""Python's `sum(...)` in a pipeline body: glue with plain-Python semantics (start value 0, Python's
order of addition) that the `comm` pass turns into a reduce / all-reduce collective when its
operands are tensors on distinct ranks. The programs of every backend equal the plain run."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from dagc.driver import compile_file
from dagc.ir.core import Graph, Node
from dagc.ir.location import SourceSpan
from dagc.ir.types import Const, Ref, Seq, TaskOptions
from dagc.passes.reductions import glue_sum
from tests.test_collectives import run_comm_with_sink, sum_graph

MB = 1 << 20


# ---- recognising Python's sum ----------------------------------------------------------------------
def list_sum_graph(expr: str, n: int, listed: list[int] | None = None) -> Graph:
    """`p0 … p{n-1}` tensors on ranks 0 … n-1; a glue `expr` on rank 0 reading them as one list
    operand `_0` (the items `listed`, all by default) and, if `expr` names `_1`, `p0` alone."""
    graph = sum_graph("_0", ["torch.Tensor"] * n, list(range(n)), 0)
    node = graph.node("s")
    items = tuple(Ref(f"p{i}") for i in (listed if listed is not None else range(n)))
    node.target, node.args = expr, (Seq("list", items), Ref("p0"))[: 2 if "_1" in expr else 1]
    return graph


@pytest.mark.parametrize(("expr", "listed", "values", "divisor"), [
    ("sum(_0)", None, ("p0", "p1", "p2", "p3"), None),
    ("sum(_0)", [2, 0, 3, 1], ("p2", "p0", "p3", "p1"), None),  # Python's order: the list's
    ("sum(_0) / len(_0)", None, ("p0", "p1", "p2", "p3"), 4.0),
    ("sum(_0) / 4", None, ("p0", "p1", "p2", "p3"), 4.0),
    ("sum([_0[1], _0[0], _0[3], _0[2]])", None, ("p1", "p0", "p3", "p2"), None),
    ("sum((_0[0], _0[1], _0[2], _0[3])) / len((_0[0], _0[1], _0[2], _0[3]))", None, ("p0", "p1", "p2", "p3"), 4.0),
])
def test_python_sums_of_tensor_lists_are_recognised(expr: str, listed: list[int] | None, values: tuple[str, ...],
                                                     divisor: float | None) -> None:
    graph = list_sum_graph(expr, 4, listed)
    total = glue_sum(graph.node("s"), graph)
    assert total is not None and total.values == values and total.divisor == divisor and total.start == 0


@pytest.mark.parametrize("expr", [
    "sum(_0, _1)",  # another start value
    "sum(_0[:2])",  # a slice: not every item read is added
    "sum(_0) / len(_0[:2])",  # divided by something else than the count
    "sum(_0) * 2",
    "max(_0)",
    "sum(_0) + _1",  # p0 added twice
])
def test_other_uses_of_sum_are_not_reductions(expr: str) -> None:
    graph = list_sum_graph(expr, 4)
    assert glue_sum(graph.node("s"), graph) is None


def test_a_plain_chain_has_no_start_value() -> None:
    graph = sum_graph("_0 + _1 + _2", ["torch.Tensor"] * 3, [0, 1, 2], 0)
    total = glue_sum(graph.node("s"), graph)
    assert total is not None and total.start is None


def test_a_list_holding_a_constant_or_an_untyped_value_is_not_a_reduction() -> None:
    graph = list_sum_graph("sum(_0)", 3)
    node = graph.node("s")
    node.args = (Seq("list", (Ref("p0"), Ref("p1"), Const(1))),)
    assert glue_sum(node, graph) is None
    graph = list_sum_graph("sum(_0)", 3)
    graph.add_node(Node("u", "task", "m:untyped", (Const(0),), span=SourceSpan("m.py", 8, 5),
                        options=TaskOptions(out_size=MB), attrs={"partition.device": 3}))
    graph.node("s").args = (Seq("list", (Ref("p0"), Ref("p1"), Ref("u"))),)
    assert glue_sum(graph.node("s"), graph) is None  # a list of lists would concatenate


def test_comm_marks_a_python_sum_as_a_reduce_starting_from_zero() -> None:
    graph = list_sum_graph("sum(_0) / len(_0)", 4)
    sink = run_comm_with_sink(graph, 4)
    attrs = graph.node("s").attributes()
    assert (attrs["comm.reduce"], attrs["comm.start"], attrs["comm.divisor"]) == ("sum", 0, 4.0)
    assert attrs["comm.operands"] == ["p0", "p1", "p2", "p3"] and not any(n.op == "transfer" for n in graph)
    assert [d.code for d in sink.diagnostics] == ["DAGC311"]


# ---- the frontend ----------------------------------------------------------------------------------
SUMS = {
    "sums.py": '''
        import dagc
        import torch


        @dagc.task(cost=10, out_size="256KiB", pure=True)
        def part(k: int) -> torch.Tensor:
            return torch.arange(65536, dtype=torch.float32) % 7 + k  # whole numbers: every order sums exactly


        @dagc.task(cost=10, out_size="1KiB", pure=True)
        def flags(k: int) -> torch.Tensor:
            return torch.arange(8) % (k + 2) == 0  # bool: sum() starts from 0, so Python's total is int64


        @dagc.task(cost=10, out_size="1KiB", pure=True)
        def zeros(k: int) -> torch.Tensor:
            return torch.full((4,), -0.0)  # 0 + -0.0 is 0.0: Python's sum is never -0.0


        @dagc.task(cost=10, out_size="1KiB", pure=True)
        def step(m: torch.Tensor, k: int) -> torch.Tensor:
            return m[:4] * k


        @dagc.pipeline
        def sums(seed: int = 0) -> dict:
            parts = [part(k + seed) for k in range(4)]
            bits = [flags(k) for k in range(4)]
            signed = [zeros(k) for k in range(4)]
            mean = sum(parts) / len(parts)
            return {"total": sum(parts), "reordered": sum([parts[3], parts[1], parts[0], parts[2]]),
                    "steps": [step(mean, k) for k in range(4)], "flags": sum(b for b in bits),
                    "zeros": sum(signed)}
    ''',
}


def test_the_frontend_reads_sums_of_comprehensions_and_generators(tmp_path: Path, write_project) -> None:
    root = write_project({"g.py": '''
        import dagc
        import torch


        @dagc.task(pure=True)
        def part(k: int) -> torch.Tensor:
            return torch.ones(2) * k


        @dagc.pipeline
        def g() -> list:
            return [sum([part(k) for k in range(3)]), sum(part(k) for k in range(3)), max(part(k)[0] for k in range(2)),
                    len([part(k) for k in range(3)])]
    '''})
    graph = compile_file(root / "g.py")
    glue = {n.target for n in graph if n.op == "glue"}
    assert {"sum(_0)", "max(_0)", "len(_0)"} <= glue
    (first, *_) = [n for n in graph if n.op == "glue" and n.target == "sum(_0)"]
    assert [i.name for i in first.args[0].items] == ["part[0]", "part[1]", "part[2]"]  # type: ignore[union-attr]


def test_a_generator_elsewhere_is_still_rejected_at_its_line(tmp_path: Path, write_project) -> None:
    from dagc.frontend import compile_source

    root = write_project({"bad.py": '''
        import dagc
        import torch


        @dagc.task(pure=True)
        def part(k: int) -> torch.Tensor:
            return torch.ones(2) * k


        @dagc.pipeline
        def bad() -> int:
            return len(part(k) for k in range(3))
    '''})
    (diag,) = [d for d in compile_source(root / "bad.py").sink.diagnostics if d.is_error]
    assert diag.code == "DAGC109" and diag.span.line == 12 and "generator" in diag.message  # len(gen): TypeError


# ---- every backend -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ray_address(ray_cluster) -> str:
    return ray_cluster.address


def assert_same(got: object, want: object) -> None:
    """Equal values of equal types; tensors of one dtype, equal elementwise and in the sign of zeros."""
    import torch

    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor) and got.dtype == want.dtype and torch.equal(got, want)
        if want.is_floating_point():
            assert torch.equal(torch.signbit(got), torch.signbit(want))
    elif isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want)
        for key in want:
            assert_same(got[key], want[key])
    elif isinstance(want, (list, tuple)):
        assert type(got) is type(want) and len(got) == len(want)  # type: ignore[arg-type]
        for a, b in zip(got, want):  # type: ignore[call-overload]
            assert_same(a, b)
    else:
        assert got == want


def run_everywhere(root: Path, script: str, pipeline: str, tmp_path: Path, ray_address: str) -> tuple[object, str]:
    """(the plain run's result, the torch program's text), after checking that the local, Ray and
    4-rank torch programs all return what the plain run returns."""
    from tests.test_backend_local import _plain_result
    from tests.test_backend_torch import _emit, _ruff_clean, launch
    from tests.test_runtime import emit_local, run_program

    expected = _plain_result(root / script, pipeline, tmp_path)
    local = emit_local(root, script, tmp_path / "local")
    proc = run_program(local, "--result", str(tmp_path / "local.pkl"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_same(pickle.loads((tmp_path / "local.pkl").read_bytes()), expected)

    from dagc.backends import emit

    ray_program = tmp_path / "ray" / "prog_ray.py"
    ray_program.parent.mkdir(parents=True)
    ray_program.write_text(emit(compile_file(root / script), "ray", ray_program))
    proc = run_program(ray_program, "--address", ray_address, "--result", str(tmp_path / "ray.pkl"), timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_same(pickle.loads((tmp_path / "ray.pkl").read_bytes()), expected)

    program = _emit(root / script, tmp_path / "torch" / "prog_torch.py", 4)
    _ruff_clean(program)
    launch(program, 4, ["--result", str(tmp_path / "torch.pkl")])
    assert_same(pickle.loads((tmp_path / "torch.pkl").read_bytes()), expected)
    return expected, program.read_text()


def collectives_of(text: str) -> dict:
    namespace: dict[str, object] = {}
    exec(text.split("COLLECTIVES = ", 1)[1].split("\n}\n", 1)[0].join(["C = ", "\n}\n"]), namespace)
    return namespace["C"]  # type: ignore[return-value]


@pytest.mark.slow
def test_python_sums_equal_the_plain_run_on_every_backend_and_use_collectives(
        tmp_path: Path, write_project, ray_address: str) -> None:
    import torch

    expected, text = run_everywhere(write_project(SUMS), "sums.py", "sums", tmp_path, ray_address)
    assert expected["flags"].dtype == torch.int64  # type: ignore[index]  # the 0 start promotes bools
    entries = collectives_of(text)
    kinds = sorted(e[0] for e in entries.values())
    assert kinds == ["all_reduce", "reduce", "reduce", "reduce", "reduce"]  # every sum; the mean read everywhere
    assert all(e[7] == 0 and e[4] == (0, 1, 2, 3) for e in entries.values())  # Python's start value, 4 ranks
    assert [e[6] for e in entries.values() if e[0] == "all_reduce"] == [4.0]  # sum(parts) / len(parts)
    reordered = [tuple(v for v, _ in e[1]) for e in entries.values() if e[1][0][0] == "part[3]"]
    assert reordered == [("part[3]", "part[1]", "part[0]", "part[2]")]
    assert text.count("rt.reduce(") == 20 and "sum(" not in text.split("def rank_0", 1)[1]
