"""Idioms real pipelines are written in (tests/idioms/): each compiles, and its programs compute what the plain
run computes; where dagc cannot follow plain Python, one diagnostic says how to write it instead."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from dagc.backends import emit
from dagc.cluster import parse_cluster_spec
from dagc.diagnostics import CompileError
from dagc.driver import compile_file
from dagc.runtime.console import load_console
from tests.conftest import run_dagc
from tests.engines import run_local, run_ray, run_torch
from tests.interpreters import run_python
from tests.plain import plain_result

IDIOMS = Path(__file__).parent / "idioms"


def _diagnostics(script: Path, pipeline: str | None = None) -> list:
    try:
        compile_file(script, pipeline_name=pipeline)
    except CompileError as exc:
        return list(exc.diagnostics)
    return []


# ---- rejected before, now plain Python -----------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 3, 60])
def test_returns_inside_if_else_equal_the_plain_run(tmp_path: Path, n: int) -> None:
    """`return` in `if`/`elif`/`else` on a task result, nested, and in a sub-pipeline: every path taken."""
    script = IDIOMS / "branches.py"
    assert run_local(script, "main", {"n": n}, tmp_path) == plain_result(script, "main", tmp_path, n=n)


@pytest.mark.parametrize("flag", [True, False])
def test_both_branches_returning_is_no_pipeline_that_returns_nothing(tmp_path: Path, flag: bool) -> None:
    script = IDIOMS / "branches.py"
    compilation = compile_file(script, pipeline_name="either", params={"flag": flag}, details=True)
    assert not [w for w in compilation.warnings if w.code == "DAGC115"], compilation.warnings
    assert run_local(script, "either", {"flag": flag}, tmp_path) == plain_result(script, "either", tmp_path,
                                                                                  flag=flag)


def test_a_return_inside_a_loop_is_still_reported(tmp_path: Path) -> None:
    script = tmp_path / "loop_return.py"
    script.write_text("import dagc\n\n\n@dagc.task\ndef f(x: int) -> int:\n    return x\n\n\n@dagc.pipeline\n"
                      "def main() -> int:\n    for i in range(3):\n        if i == 1:\n            return f(i)\n"
                      "    return f(0)\n")
    (found,) = _diagnostics(script)
    assert (found.code, found.span.line) == ("DAGC117", 13)


def test_named_tuple_outputs_of_a_sub_pipeline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(IDIOMS))  # (the result holds a `named_outputs.Split`)
    script = IDIOMS / "named_outputs.py"
    assert run_local(script, "main", {}, tmp_path) == plain_result(script, "main", tmp_path)
    graph = compile_file(script, pipeline_name="main")
    # taken apart where it is read: one builder only, for the value a task receives whole
    assert [n.name for n in graph if n.target == "named_outputs:Split"] == ["prepare.Split"]
    got = run_local(script, "whole", {}, tmp_path)  # returned whole: built by its class
    plain = runpy.run_path(str(script), run_name="plain")["whole"]()
    assert type(got).__name__ == "Split" and got._asdict() == plain._asdict()


def test_draws_and_prints_in_the_pipeline_body(tmp_path: Path) -> None:
    script = IDIOMS / "draws.py"
    compilation = compile_file(script, pipeline_name="main", details=True)
    assert {"random:seed", "random:randint", "numpy:random.seed", "numpy:random.randint"} <= {
        n.target for n in compilation.graph}
    assert not [w for w in compilation.warnings if w.code == "DAGC150"]  # the pipeline seeded before `noisy`
    assert run_local(script, "main", {}, tmp_path) == plain_result(script, "main", tmp_path)
    assert run_local(script, "main", {"seed": 11}, tmp_path) == plain_result(script, "main", tmp_path, seed=11)


@pytest.mark.parametrize("shuffle", ["random.shuffle", "np.random.shuffle"])
def test_a_shuffle_in_place_in_the_pipeline_body_is_reported(tmp_path: Path, shuffle: str) -> None:
    """Plain Python shuffles the pipeline's own list; a node of its own would shuffle a copy of it."""
    script = tmp_path / "shuffled.py"
    script.write_text("import random\n\nimport numpy as np\n\nimport dagc\n\n\n@dagc.task\n"
                      "def first(xs: list) -> int:\n    return xs[0]\n\n\n@dagc.pipeline\n"
                      f"def main(seed: int = 0) -> list:\n    random.seed(seed)\n    xs = [1, 2, 3, 4]\n"
                      f"    {shuffle}(xs)\n    return [first(xs), xs]\n")
    (found,) = _diagnostics(script)
    assert (found.code, found.span.line) == ("DAGC109", 17)
    assert "changes `xs` in place" in found.message and "return xs" in found.hint


def test_path_parameter_defaults(tmp_path: Path) -> None:
    script = IDIOMS / "paths.py"
    got = run_local(script, "main", {}, tmp_path)
    assert got == plain_result(script, "main", tmp_path)
    assert isinstance(got[-1], Path)


def test_a_path_parameter_given_as_text(tmp_path: Path) -> None:
    """`--param root=other/valid.csv` is the Path plain Python's `main(root=Path("other/valid.csv"))` gets."""
    script = IDIOMS / "paths.py"
    plain = runpy.run_path(str(script), run_name="plain")["main"](root=Path("other/valid.csv"))
    assert run_local(script, "main", {"root": "other/valid.csv"}, tmp_path) == plain


def test_module_level_grids_built_by_comprehensions_and_itertools(tmp_path: Path) -> None:
    script = IDIOMS / "grids.py"
    graph = compile_file(script, pipeline_name="main")
    assert len([n for n in graph if n.target == "grids:score"]) == 2 + 4  # the filtered grid, then product()
    assert run_local(script, "main", {}, tmp_path) == plain_result(script, "main", tmp_path)


def test_a_module_level_iterator_looped_over_twice_is_reported(tmp_path: Path) -> None:
    """Plain Python's second loop over `itertools.product(...)` gets no item: compiling it as a list would not."""
    script = tmp_path / "twice.py"
    script.write_text("import itertools\n\nimport dagc\n\nGRID = itertools.product([1, 2], [3])\n"
                      "ODDS = (n for n in range(5) if n % 2)\n\n\n@dagc.task\ndef mul(a: int, b: int) -> int:\n"
                      "    return a * b\n\n\n@dagc.pipeline\ndef main() -> list:\n"
                      "    first = [mul(a, b) for a, b in GRID]\n    odd = [mul(n, n) for n in ODDS]\n"
                      "    for a, b in GRID:\n        first.append(mul(b, a))\n    return [first, odd]\n")
    (found,) = _diagnostics(script)
    assert (found.code, found.span.line) == ("DAGC116", 18)
    assert "used up" in found.message and "list(" in found.hint


def test_options_given_at_the_call(tmp_path: Path) -> None:
    script = IDIOMS / "call_options.py"
    graph = compile_file(script, pipeline_name="main")
    options = {n.name: n.options for n in graph}
    assert options["triple"].retries == 5
    assert (options["train"].retries, options["train.1"].retries, options["train.1"].cache) == (3, 2, False)
    assert options["train.2"].retries == 0  # the decorator's own options, for a call without any
    assert run_local(script, "main", {}, tmp_path) == plain_result(script, "main", tmp_path)


def test_options_given_at_the_call_keep_each_task_s_own_effects(tmp_path: Path) -> None:
    """Each call's task with its options is its own: a task that draws from the global generator is seen to,
    after a call of another task with the same options."""
    script = tmp_path / "drawn.py"
    script.write_text("import random\n\nimport dagc\n\n\ndef quiet(x: int) -> int:\n    return x + 1\n\n\n"
                      "def noisy(x: int) -> float:\n    return x + random.random()\n\n\n@dagc.pipeline\n"
                      "def main() -> list:\n    out = []\n    for i in range(8):\n"
                      "        out.append(dagc.task(retries=1)(quiet)(i))\n"
                      "        out.append(dagc.task(retries=1)(noisy)(i))\n    return out\n")
    compilation = compile_file(script, pipeline_name="main", details=True)
    drawing = [n.name for n in compilation.graph if n.effects.rng]
    assert len(drawing) == 8 and all(name.startswith("noisy") for name in drawing), drawing
    assert "DAGC150" in [w.code for w in compilation.warnings]


def test_a_task_defined_inside_the_pipeline_gets_one_diagnostic(tmp_path: Path) -> None:
    script = tmp_path / "inner.py"
    script.write_text("import dagc\n\n\n@dagc.pipeline\ndef main(n: int = 4) -> int:\n    k = 3\n\n"
                      "    @dagc.task\n    def sq(x: int) -> int:\n        return x * x + k\n\n    return sq(n)\n")
    (found,) = _diagnostics(script)
    assert (found.code, found.span.line, found.span.col) == ("DAGC108", 9, 5)
    assert "inside pipeline `main`" in found.message
    assert "top level of the module" in found.hint and "`k`" in found.hint


# ---- crashes before ------------------------------------------------------------------------------------
def test_task_parameters_named_like_the_runtimes_own(tmp_path: Path) -> None:
    script = IDIOMS / "keywords.py"
    assert run_local(script, "main", {}, tmp_path) == plain_result(script, "main", tmp_path)


def test_a_package_re_exporting_a_task_under_its_submodules_name(tmp_path: Path) -> None:
    script = IDIOMS / "reexport" / "flow.py"
    assert run_local(script, "main", {}, tmp_path) == plain_result(script, "main", tmp_path)
    program = emit(compile_file(script, pipeline_name="main"), "ray", tmp_path / "ray.py")
    assert "importlib.import_module('steps.loader')" in program


# ---- silent before -------------------------------------------------------------------------------------
def test_a_pipeline_called_at_module_level_runs_once_in_the_local_program(tmp_path: Path) -> None:
    script = IDIOMS / "module_call.py"
    program = tmp_path / "local.py"
    program.write_text(emit(compile_file(script, pipeline_name="main"), "local", program))
    proc = run_python([str(program), "--result", str(tmp_path / "r.pkl")], capture_output=True, text=True,
                      timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("double ran") == 1, proc.stdout
    assert run_local(script, "main", {}, tmp_path) == plain_result(script, "main", tmp_path)


def test_check_of_a_whole_file_checks_a_sub_pipeline_through_its_caller(tmp_path: Path) -> None:
    script = IDIOMS / "named_outputs.py"  # `prepare(n)` takes `n` from `main`
    proc = run_dagc("check", str(script))
    assert proc.returncode == 0, proc.stderr
    assert "DAGC005" not in proc.stderr and "pipeline `main`" in proc.stderr
    lonely = tmp_path / "lonely.py"  # a pipeline nobody calls still needs its parameters
    lonely.write_text("import dagc\n\n\n@dagc.task\ndef f(x: int) -> int:\n    return x\n\n\n@dagc.pipeline\n"
                      "def main(n: int) -> int:\n    return f(n)\n")
    proc = run_dagc("check", str(lonely))
    assert proc.returncode == 1 and "DAGC005" in proc.stderr


# ---- on Ray and torch ----------------------------------------------------------------------------------
ENGINE_CASES = ["draws", "paths", "keywords", "named_outputs", "call_options", "grids"]


@pytest.mark.slow
@pytest.mark.parametrize("idiom", ENGINE_CASES)
def test_idioms_on_ray_and_torch_equal_the_plain_run(tmp_path: Path, ray_cluster, idiom: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(IDIOMS))  # (a result may hold a class of the script's)
    script = IDIOMS / f"{idiom}.py"
    plain = plain_result(script, "main", tmp_path)
    assert run_ray(script, "main", {}, tmp_path, ray_cluster.address) == plain
    assert run_torch(script, "main", {}, tmp_path) == plain


@pytest.mark.slow
def test_a_package_re_exporting_a_task_on_ray(tmp_path: Path, ray_cluster) -> None:
    script = IDIOMS / "reexport" / "flow.py"
    assert run_ray(script, "main", {}, tmp_path, ray_cluster.address) == plain_result(script, "main", tmp_path)


@pytest.mark.slow
def test_a_pipeline_called_at_module_level_runs_once_on_ray_and_torch(tmp_path: Path, ray_cluster,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    script = IDIOMS / "module_call.py"
    graph = compile_file(script, pipeline_name="main", cluster=parse_cluster_spec("2"))
    program = tmp_path / "ray.py"
    program.write_text(emit(graph, "ray", program))
    proc = run_python([str(program), "--address", ray_cluster.address, "--result", str(tmp_path / "ray.pkl"),
                       "--run-dir", str(tmp_path / "run")], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # what the task printed, as its worker recorded it beside its output (Ray forwards a worker's lines to the
    # driver's terminal in its own time, so the terminal may not have them yet when the driver ends)
    printed = "".join(text for path in sorted((tmp_path / "run").rglob("*.console.json"))
                      for _, text in load_console(path.with_name(path.name.replace(".console.json", ".pkl"))))
    assert printed.count("double ran") == 1, printed
    assert run_torch(script, "main", {}, tmp_path, args=("--run-dir", str(tmp_path / "torch-run"))) == 4
    printed = "".join(text for path in sorted((tmp_path / "torch-run").rglob("*.console.json"))
                      for _, text in load_console(path.with_name(path.name.replace(".console.json", ".pkl"))))
    assert printed.count("double ran") == 1, printed


@pytest.mark.slow
def test_a_script_a_task_starts_runs_its_own_pipeline_on_every_backend(tmp_path: Path, ray_cluster) -> None:
    """What marks a program's process (its pipelines called at module level do nothing there) does not pass to
    the processes its tasks start: a dagc script run by a task runs its pipeline, as under the plain run."""
    script = IDIOMS / "nested_script.py"
    plain = plain_result(script, "main", tmp_path)
    assert plain == "double ran"
    assert run_local(script, "main", {}, tmp_path) == plain
    assert run_ray(script, "main", {}, tmp_path, ray_cluster.address) == plain
    assert run_torch(script, "main", {}, tmp_path) == plain
