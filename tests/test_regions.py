"""Loops, branches, comprehensions and glue: the graphs they make, their IR round trips, their runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagc.backends import emit
from dagc.frontend import compile_source
from dagc.ir import verify
from dagc.ir.parser import parse_graph
from dagc.ir.printer import print_graph
from dagc.ir.serialize import dumps, loads
from dagc.ir.types import Const, Ref, Seq
from tests.interpreters import run_python

TASKS = """
import dagc

ITEMS = ["a", "b", "c"]
LRS = {"small": 0.1, "big": 1.0}

@dagc.task
def load(i: int) -> int:
    return i * 10

@dagc.task
def step(x: int, k: int = 1) -> int:
    return x + k

@dagc.task
def total(xs: list[int]) -> int:
    return sum(xs)

@dagc.task
def pair(a, b):
    return (a, b)

@dagc.task
def record(d: dict) -> dict:
    return d
"""


def _compile(write_project, body: str, **params):
    root = write_project({"p.py": TASKS + body})
    result = compile_source(root / "p.py", pipeline_name="p", params=params or None)
    errors = [d for d in result.sink.diagnostics if d.is_error]
    return result.graph, errors, root


def _ok(write_project, body: str, **params):
    graph, errors, root = _compile(write_project, body, **params)
    assert not errors, errors
    assert verify(graph) == []
    text = print_graph(graph)
    assert print_graph(parse_graph(text)) == text
    assert dumps(parse_graph(text)) == dumps(graph) == dumps(loads(dumps(graph)))
    return graph, root


def _run(graph, root: Path, tmp_path: Path) -> str:
    program = tmp_path / "prog.py"
    program.write_text(emit(graph, "local", program))
    proc = run_python([str(program)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lint = run_python(["-m", "ruff", "check", "--isolated", str(program)],
                          capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout
    return proc.stdout.strip()


def _plain(root: Path, name: str = "p", **params) -> str:
    code = f"import runpy; ns = runpy.run_path('p.py', run_name='x'); print(repr(ns[{name!r}](**{params!r})))"
    return run_python(["-c", code], cwd=root, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_range_loop_unrolls_with_indexed_names(write_project, tmp_path) -> None:
    graph, root = _ok(write_project, """
@dagc.pipeline
def p(n: int = 3):
    xs = []
    for i in range(n):
        xs = xs + [step(load(i), k=i)]
    return total(xs)
""", n=4)
    names = [n.name for n in graph]
    assert names[:2] == ["load[0]", "step[0]"] and "step[3]" in names
    assert graph.node("total").args == (Seq("list", tuple(Ref(f"step[{i}]") for i in range(4))),)
    assert _run(graph, root, tmp_path) == _plain(root, n=4) == "66"


def test_comprehensions_enumerate_zip_and_dicts(write_project, tmp_path) -> None:
    graph, root = _ok(write_project, """
@dagc.pipeline
def p():
    loaded = [load(i) for i, _ in enumerate(ITEMS)]
    stepped = {name: step(x) for name, x in zip(ITEMS, loaded)}
    tuned = [step(x, k=int(lr * 10)) for x, lr in zip(loaded, LRS.values())]
    gen = total(step(x) for x in loaded)
    return record({"stepped": stepped, "tuned": tuned, "gen": gen})
""")
    assert {"load[0]", "load[2]", "step[2]", "step[0].1", "total"} <= {n.name for n in graph}
    assert _run(graph, root, tmp_path) == _plain(root)


def test_nested_pipeline_in_loop_gets_hierarchical_names(write_project) -> None:
    graph, _ = _ok(write_project, """
@dagc.pipeline
def shard(i):
    return step(load(i))

@dagc.pipeline
def p():
    return total([shard(i) for i in range(3)])
""")
    assert "shard[2].load" in graph and "shard[2].step" in graph
    assert graph.node("shard[1].step").attrs["frontend.scope"] == "shard[1]"


def test_static_if_is_folded_and_static_break_stops_unrolling(write_project) -> None:
    graph, _ = _ok(write_project, """
@dagc.pipeline
def p(big: bool = False):
    out = []
    for i in range(10):
        if i == 3:
            break
        if big:
            out = out + [load(i * 100)]
        else:
            out = out + [load(i)]
    return total(out)
""")
    assert [n.name for n in graph] == ["load[0]", "load[1]", "load[2]", "total"]
    assert graph.node("load[2]").args == (Const(2),)


def test_glue_expressions(write_project, tmp_path) -> None:
    graph, root = _ok(write_project, """
@dagc.pipeline
def p():
    a = load(2)
    b = pair(a, a)
    label = f"value={a:05d} first={b[0]}"
    return record({"sum": a + 1, "neg": -a, "cmp": a >= 20, "idx": b[1], "label": label,
                   "real": a.real, "sel": a if a > 3 else 0})
""")
    glue = [n for n in graph if n.op == "glue"]
    assert {n.target for n in glue} >= {"_0 + 1", "-_0", "_0 >= 20", "_0[1]", "_0.real"}
    assert _run(graph, root, tmp_path) == _plain(root)


def test_if_on_task_result_is_a_cond_region(write_project, tmp_path) -> None:
    body = """
@dagc.pipeline
def p(start: int = 1):
    x = load(start)
    if x > 15:
        y = step(x, k=100)
        z = 1
    elif x > 5:
        y = step(x)
        z = 2
    else:
        y = x
        z = 3
    return pair(y, z)
"""
    for start in (0, 1, 2):
        graph, root = _ok(write_project, body, start=start)
        [cond] = [n for n in graph if n.op == "cond"]
        assert cond.args[0] == Ref("compare")
        assert _run(graph, root, tmp_path) == _plain(root, start=start)


def test_bounded_loop_with_break_is_a_loop_region(write_project, tmp_path) -> None:
    body = """
@dagc.pipeline
def p(limit: int = 35):
    x = load(0)
    history = []
    for epoch in range(10):
        x = step(x, k=epoch)
        history = history + [x]
        if x > limit:
            break
        x = step(x)
    return pair(x, history)
"""
    for limit in (5, 35, 1000):
        graph, root = _ok(write_project, body, limit=limit)
        [loop] = [n for n in graph if n.op == "loop"]
        assert loop.region.exit.at == 3
        assert _run(graph, root, tmp_path) == _plain(root, limit=limit)


def test_nested_regions_round_trip_and_run(write_project, tmp_path) -> None:
    graph, root = _ok(write_project, """
@dagc.pipeline
def p():
    x = load(1)
    for i in range(5):
        if x > 12:
            x = step(x, k=2)
        else:
            x = step(x)
        if x > 20:
            break
    return x
""")
    [loop] = [n for n in graph if n.op == "loop"]
    assert loop.bodies["body"][1].op == "cond"
    assert _run(graph, root, tmp_path) == _plain(root)


def test_passes_treat_a_region_as_one_node(write_project) -> None:
    from dagc.driver import compile_file

    root = write_project({"p.py": TASKS + """
@dagc.pipeline
def p():
    x = load(1)
    if x > 3:
        y = step(x)
    else:
        y = step(x)
    unused = load(1)
    return y
"""})
    graph = compile_file(root / "p.py")
    assert [n.op for n in graph] == ["task", "glue", "cond"]


def test_call_site_after_and_task_after(write_project) -> None:
    graph, _ = _ok(write_project, """
@dagc.task(after=["load"])
def late(x: int) -> int:
    return x

@dagc.pipeline
def p():
    a = load(1)
    b = load(2)
    c = dagc.after(step(a), b)
    return late(c)
""")
    assert graph.node("step").deps == ("load.1",)
    assert graph.node("late").deps == ("load", "load.1")


@pytest.mark.parametrize("code,body", [
    ("DAGC116", "    return {x: step(x) for i in range(2) for x in load(3)}\n"),  # the first `for`: a map (test_maps.py)
    ("DAGC117", "    x = load(1)\n    while x < 3:\n        x = step(x)\n    return x\n"),
    ("DAGC117", "    x = load(1)\n    for i in range(3):\n        if x > 2:\n            break\n"
                "        else:\n            x = step(x)\n    return x\n"),
    ("DAGC117", "    x = load(1)\n    for i in range(3):\n        if x:\n            return x\n    return x\n"),
    ("DAGC119", "    for i in range(10**6):\n        for j in range(10**6):\n            load(i)\n    return 1\n"),
    ("DAGC107", "    x = load(1)\n    return step(repr(x))\n"),
    ("DAGC109", "    x = load(1)\n    return step((lambda: 1) if x else 2)\n"),
    ("DAGC118", "    x = load(1)\n    if x:\n        f = step\n    else:\n        f = load\n    return 1\n"),
    ("DAGC140", "    x = pair(1, 2)\n    return total(load(1))\n"),
])
def test_unsupported_forms_are_diagnosed(write_project, code: str, body: str) -> None:
    _, errors, _ = _compile(write_project, "@dagc.pipeline\ndef p():\n" + body)
    assert code in [e.code for e in errors], errors


def test_type_mismatch_shows_both_locations(write_project) -> None:
    _, errors, _ = _compile(write_project, """
@dagc.task
def name() -> str:
    return "x"

@dagc.task
def opt() -> int | None:
    return None

@dagc.task
def flt(x: float | None, t: "torch.Tensor" = None, xs: list[float] = ()) -> float:
    return 1.0

@dagc.pipeline
def p():
    flt(load(1))
    flt(opt())
    flt(1.0, xs=[load(1), load(2)])
    return flt(name())
""")
    [err] = errors
    assert err.code == "DAGC140" and "str" in err.message and "float | None" in err.message
    assert len(err.notes) == 2 and all(n.span is not None for n in err.notes)


def test_file_dependencies(write_project) -> None:
    files = """
@dagc.task(writes=["{path}"])
def write(path: str) -> None:
    pass

@dagc.task(reads=["{path}"])
def read(path: str) -> int:
    return 1
"""
    graph, errors, _ = _compile(write_project, files + """
@dagc.pipeline
def p(d: str = "out/x"):
    write(f"{d}/a.bin")
    return read(d + "/a.bin")
""")
    assert not errors and graph.node("read").deps == ("write",)
    _, errors, _ = _compile(write_project, files + """
@dagc.pipeline
def p():
    write("o/a")
    write("o/a")
    read("o/b")
    return read("o/c.txt")
""")
    assert sorted(e.code for e in errors) == ["DAGC126", "DAGC127", "DAGC127"]
    _, errors, _ = _compile(write_project, files + """
@dagc.pipeline
def p():
    r = read("o/a")
    write("o/a")
    return r
""")
    assert [e.code for e in errors] == ["DAGC127"]


def test_verifier_checks_region_scoping(write_project) -> None:
    graph, _ = _ok(write_project, """
@dagc.pipeline
def p():
    x = load(1)
    y = load(2)
    if x > 3:
        z = step(y)
    else:
        z = y
    return z
""")
    cond = graph.node("cond")
    cond.args = cond.args[:1]  # forget the captured %load.1
    codes = [d.code for d in verify(graph)]
    assert "DAGC202" in codes


# ---- one place for what a node reads, and renaming it ---------------------------------------------------
def test_operands_read_and_replace_uses_cover_arguments_payload_and_bodies(write_project):
    """A loop that leaves early reads the outer `x` in its argument, its body and its `break`; renaming `x`
    renames it everywhere, and the graph's edges follow without a manual rebuild."""
    from dagc.ir.regions import operands_read, payload_operands
    from dagc.ir.types import iter_refs

    graph, _ = _ok(write_project, """
@dagc.pipeline
def p():
    x = load(1)
    y = load(2)
    acc = step(x)
    for k in range(4):
        acc = step(acc, x)
        if acc > 50:
            break
    return total([acc, y])
""")
    [loop] = [n for n in graph if n.op == "loop"]
    [x_node] = [n for n in graph if n.op == "task" and n.args and n.args[0] == Const(1)]
    [y_node] = [n for n in graph if n.op == "task" and n.args and n.args[0] == Const(2)]
    x, y = x_node.outputs[0], y_node.outputs[0]
    read = {v for o in operands_read(loop) for v in iter_refs(o)}
    assert x in read and payload_operands(loop)  # its body reads the outer x; the break has a condition
    assert loop.name not in graph.successors(y_node.name)
    users_of_x = set(graph.successors(x_node.name))
    graph.replace_uses({x: y})
    after = {v for o in operands_read(loop) for v in iter_refs(o)}
    assert x not in after and y in after
    assert graph.successors(x_node.name) == []  # edges follow at once (no invalidate())
    assert users_of_x <= set(graph.successors(y_node.name))
    assert verify(graph) == []
    graph.set_deps(loop.name, (x_node.name,))
    assert graph.successors(x_node.name) == [loop.name]
