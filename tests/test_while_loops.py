"""A `while` loop on a task result, bounded by a counter, compiles to a loop region that runs like
the plain Python loop; unbounded forms are diagnostics."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagc.backends import emit
from dagc.driver import compile_file
from dagc.frontend import compile_source
from dagc.ir.types import Const, Seq
from tests.interpreters import run_python
from tests.test_backend_local import _plain_result

BOUNDED = """
    import dagc

    MAX = 5


    @dagc.task
    def step(m: float) -> float:
        return m / 2


    @dagc.task
    def converged(m: float) -> bool:
        return m < 0.1


    @dagc.task
    def pair(a, b):
        return (a, b)


    @dagc.pipeline
    def p(m0: float = 1.0):
        m = step(m0)
        epoch = 0
        while epoch < MAX and not converged(m):
            m = step(m)
            epoch += 1
        return pair(m, epoch)
"""


def test_bounded_while_is_one_loop_region(write_project) -> None:
    root = write_project({"w.py": BOUNDED})
    graph = compile_file(root / "w.py")
    [loop] = [n for n in graph if n.op == "loop"]
    # one trip more than the bound re-checks the test, as `while` does
    assert loop.region.iter == Seq("list", tuple(Const(i) for i in range(6)))
    assert loop.region.exit is not None
    lines = (root / "w.py").read_text().splitlines()
    assert lines[loop.span.line - 1].strip().startswith("while epoch < MAX")  # the `while` statement


@pytest.mark.parametrize("m0", [1.0, 0.001, 1000.0])  # stops in the middle, at once, and by the bound
def test_bounded_while_runs_like_the_plain_loop(tmp_path: Path, write_project, m0: float) -> None:
    root = write_project({"w.py": BOUNDED})
    graph = compile_file(root / "w.py", params={"m0": m0})
    program = tmp_path / "w_local.py"
    program.write_text(emit(graph, "local", program))
    out = run_python([str(program)], capture_output=True, text=True, check=True)
    plain = _plain_result(root / "w.py", "p", tmp_path, m0=m0)
    assert out.stdout.strip() == repr(plain)


@pytest.mark.parametrize("body,line", [
    # no counter bounds the loop
    ("    m = step(m0)\n    while not converged(m):\n        m = step(m)\n    return m\n", 24),
    # a counter test, but the early exit is a `break` inside the body
    ("    m = step(m0)\n    i = 0\n    while i < MAX:\n        m = step(m)\n        if converged(m):\n"
     "            break\n        i += 1\n    return m\n", 25),
])
def test_unbounded_while_forms_are_diagnostics(write_project, body: str, line: int) -> None:
    head = BOUNDED[: BOUNDED.index("    @dagc.pipeline")]
    source = head + "    @dagc.pipeline\n    def p(m0: float = 1.0):\n" + "".join(
        "    " + text + "\n" for text in body.splitlines())
    root = write_project({"w.py": source})
    result = compile_source(root / "w.py")
    found = [(d.code, d.span.line) for d in result.sink.diagnostics if d.is_error and d.span]
    assert found == [("DAGC117", line)]
