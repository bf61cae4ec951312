"""Exit handlers: `try: ... finally: ...` in a pipeline is a `try` region; its finally tasks run once
whether the body succeeds or fails, then the body's failure goes on, on every backend as in plain
Python."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from dagc.backends import emit
from dagc.cluster import parse_cluster_spec
from dagc.driver import compile_file
from dagc.frontend import compile_source
from dagc.ir import verify
from dagc.ir.parser import parse_graph
from dagc.ir.printer import print_graph
from dagc.ir.serialize import dumps, loads
from dagc.runtime.events import read_events
from tests.engines import each_form_equals
from tests.interpreters import run_python

# Kubeflow's ExitHandler shape: train (and evaluate) under an exit handler that always notifies.
SCRIPT = '''
import dagc


@dagc.task
def prepare(n: int) -> list:
    return list(range(n))


@dagc.task
def train(data: list, fail: bool) -> int:
    if fail:
        raise ValueError("training diverged")
    return sum(data)


@dagc.task
def evaluate(model: int) -> float:
    return model / 2


@dagc.task(side_effects=True)
def notify(log: str, status: str) -> str:
    with open(log, "a") as f:
        f.write(status + "\\n")
    return status


@dagc.pipeline
def exit_handler(log: str = "exit.log", n: int = 5, fail: bool = False):
    data = prepare(n)
    try:
        model = train(data, fail)
        score = evaluate(model)
    finally:
        sent = notify(log, "finished")
    return model, score, sent
'''
PIPELINE = "exit_handler"


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "exits.py"
    path.write_text(SCRIPT, encoding="utf-8")
    return path


def _plain(script: Path, params: dict[str, object]) -> object:
    """The pipeline function's result as plain Python, or `("raised", "Type: message")`."""
    code = (
        "import pickle, runpy, sys\n"
        f"ns = runpy.run_path({str(script)!r}, run_name='plain')\n"
        "try:\n"
        f"    out = ns[{PIPELINE!r}](**{params!r})\n"
        "except Exception as exc:\n"
        "    out = ('raised', f'{type(exc).__name__}: {exc}')\n"
        "sys.stdout.buffer.write(pickle.dumps(out))\n"
    )
    proc = run_python(["-c", code], capture_output=True, check=True, timeout=120)
    return pickle.loads(proc.stdout)


def _ruff_clean(path: Path) -> None:
    proc = run_python(["-m", "ruff", "check", "--isolated", str(path)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _params(tmp: Path, fail: bool) -> dict[str, object]:
    return {"log": str(tmp / "exit.log"), "fail": fail}


def _cleanups(tmp: Path) -> list[str]:
    path = tmp / "exit.log"
    return path.read_text().splitlines() if path.exists() else []


def _check(outcome: object, plain: object, stderr: str, tmp: Path) -> None:
    """`outcome` is the program's result (None when it failed): it equals the plain run's, or the run
    failed with the plain run's error; either way the cleanup ran exactly once."""
    if isinstance(plain, tuple) and plain[0] == "raised":
        assert outcome is None
        assert plain[1] in stderr, stderr[-3000:]
    else:
        assert outcome == plain
    assert _cleanups(tmp) == ["finished"]


# ---- the IR -----------------------------------------------------------------------------------------------
def test_try_finally_is_a_try_region_that_round_trips(script: Path) -> None:
    result = compile_source(script, pipeline_name=PIPELINE)
    assert not [d for d in result.sink.diagnostics if d.is_error]
    graph = result.graph
    assert verify(graph) == []
    (region,) = [n for n in graph if n.op == "try"]
    assert region.args[0].name == "prepare" and region.outputs == ("try#0", "try#1", "try#2")
    assert [n.name for n in region.bodies["body"]] == ["try.body.train", "try.body.evaluate"]
    assert [n.name for n in region.bodies["finally"]] == ["try.finally.notify"]
    text = print_graph(graph)
    assert "  body:\n" in text and "  finally:\n" in text
    assert print_graph(parse_graph(text)) == text
    assert dumps(parse_graph(text)) == dumps(graph) == dumps(loads(dumps(graph)))


def test_finally_may_not_read_what_the_body_assigns(tmp_path: Path) -> None:
    bad = SCRIPT.replace('sent = notify(log, "finished")', "sent = notify(log, str(model))")
    (tmp_path / "bad.py").write_text(bad, encoding="utf-8")
    result = compile_source(tmp_path / "bad.py", pipeline_name=PIPELINE)
    (diag,) = [d for d in result.sink.diagnostics if d.is_error]
    assert diag.code == "DAGC181" and "`model`" in diag.message
    line = bad.splitlines().index('        sent = notify(log, str(model))') + 1
    assert (diag.span.line, diag.span.col) == (line, bad.splitlines()[line - 1].index("model") + 1)
    assert "before the `try`" in (diag.hint or "")


@pytest.mark.parametrize("clause,code", [
    ("    except ValueError:\n        model = 0\n", "DAGC180"),
])
def test_except_is_a_diagnostic_at_its_clause(tmp_path: Path, clause: str, code: str) -> None:
    text = SCRIPT.replace("    finally:\n", clause + "    finally:\n")
    (tmp_path / "bad.py").write_text(text, encoding="utf-8")
    result = compile_source(tmp_path / "bad.py", pipeline_name=PIPELINE)
    (diag,) = [d for d in result.sink.diagnostics if d.is_error]
    assert diag.code == code
    assert diag.span.line == text.splitlines().index(clause.splitlines()[0]) + 1
    assert "retries=N" in (diag.hint or "")


# ---- runs ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fail", [False, True], ids=["success", "failure"])
def test_plain_run_is_what_the_pipeline_says(script: Path, tmp_path: Path, fail: bool) -> None:
    plain = _plain(script, _params(tmp_path, fail))
    assert plain == (("raised", "ValueError: training diverged") if fail else (10, 5.0, "finished"))
    assert _cleanups(tmp_path) == ["finished"]


def _local_outcome(script: Path, tmp_path: Path, fail: bool, *extra: str) -> tuple[object, str]:
    graph = compile_file(script, pipeline_name=PIPELINE, params=_params(tmp_path, fail))
    program = tmp_path / "exits_local.py"
    program.write_text(emit(graph, "local", program))
    _ruff_clean(program)
    result = tmp_path / "r.pkl"
    proc = run_python([str(program), "--result", str(result), *extra],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert (proc.returncode != 0) == fail, proc.stderr[-3000:]
    return (None if fail else pickle.loads(result.read_bytes())), proc.stderr


@pytest.mark.parametrize("fail", [False, True], ids=["success", "failure"])
def test_local_runs_finally_once_and_propagates_the_failure(script: Path, tmp_path: Path, fail: bool) -> None:
    plain_dir = tmp_path / "plain"
    plain_dir.mkdir()
    plain = _plain(script, _params(plain_dir, fail))
    outcome, stderr = _local_outcome(script, tmp_path, fail)
    _check(outcome, plain, stderr, tmp_path)




@pytest.mark.slow
@pytest.mark.parametrize("fail", [False, True], ids=["success", "failure"])
def test_ray_on_two_devices_runs_finally_once(script: Path, tmp_path: Path, ray_cluster, fail: bool) -> None:
    plain_dir = tmp_path / "plain"
    plain_dir.mkdir()
    plain = _plain(script, _params(plain_dir, fail))
    graph = compile_file(script, pipeline_name=PIPELINE, params=_params(tmp_path, fail),
                         cluster=parse_cluster_spec("2"))
    program = tmp_path / "exits_ray.py"
    program.write_text(emit(graph, "ray", program))
    _ruff_clean(program)
    result = tmp_path / "r.pkl"
    proc = run_python([str(program), "--address", ray_cluster.address, "--result",
                           str(result), "--run-dir", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert (proc.returncode != 0) == fail, proc.stderr[-3000:]
    _check(None if fail else pickle.loads(result.read_bytes()), plain, proc.stderr, tmp_path)


def _torch_program(script: Path, params: dict[str, object], out: Path) -> Path:
    from dagc.backends.torch import REQUIRED_PASSES

    graph = compile_file(script, pipeline_name=PIPELINE, params=params, passes=REQUIRED_PASSES,
                         cluster=parse_cluster_spec("2"), backend="torch")
    out.write_text(emit(graph, "torch", out))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("fail", [False, True], ids=["success", "failure"])
def test_torch_on_two_ranks_runs_finally_once(script: Path, tmp_path: Path, fail: bool) -> None:
    from tests.test_backend_torch import launch

    plain_dir = tmp_path / "plain"
    plain_dir.mkdir()
    plain = _plain(script, _params(plain_dir, fail))
    program = _torch_program(script, _params(tmp_path, fail), tmp_path / "exits_torch.py")
    _ruff_clean(program)
    result = tmp_path / "r.pkl"
    if not fail:
        launch(program, 2, ["--result", str(result)])
        _check(pickle.loads(result.read_bytes()), plain, "", tmp_path)
        return
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    with pytest.raises(ChildFailedError):  # the rank failed; the event log says why
        launch(program, 2, ["--result", str(result), "--run-dir", str(tmp_path / "run")])
    failures = read_events(tmp_path / "run" / "events.jsonl", event="failure")
    _check(None, plain, " ".join(e["error"] for e in failures), tmp_path)


# ---- resume ---------------------------------------------------------------------------------------------------
RESUMABLE = '''
import os

import dagc


@dagc.task(side_effects=True)
def count(path: str, x: int) -> int:
    with open(path, "a") as f:
        f.write("ran\\n")
    return x + 1


@dagc.task
def risky(x: int, flag: str) -> int:
    if os.path.exists(flag):
        raise RuntimeError("flag is up")
    return x * 10


@dagc.task(side_effects=True)
def cleanup(path: str) -> None:
    with open(path, "a") as f:
        f.write("cleanup\\n")


@dagc.pipeline
def resumable(dir: str = ".", x: int = 1):
    try:
        a = count(dir + "/count.log", x)
        b = risky(a, dir + "/flag")
    finally:
        cleanup(dir + "/exit.log")
    return b
'''


def test_local_resume_reruns_only_the_unfinished_body_tasks_and_the_finally(tmp_path: Path) -> None:
    """After a failure in the body, --resume takes the body tasks that finished from the run
    directory, runs the rest, and runs the finally tasks again (they belong to every run)."""
    script = tmp_path / "resumable.py"
    script.write_text(RESUMABLE, encoding="utf-8")
    graph = compile_file(script, pipeline_name="resumable", params={"dir": str(tmp_path)})
    program = tmp_path / "resumable_local.py"
    program.write_text(emit(graph, "local", program))
    _ruff_clean(program)
    (tmp_path / "flag").write_text("")
    run = [sys.executable, str(program), "--result", str(tmp_path / "r.pkl")]
    first = subprocess.run([*run, "--run-dir", str(tmp_path / "run")], capture_output=True, text=True,
                           timeout=120, cwd=tmp_path)
    assert first.returncode != 0 and "RuntimeError: flag is up" in first.stderr
    assert (tmp_path / "count.log").read_text().splitlines() == ["ran"]
    assert (tmp_path / "exit.log").read_text().splitlines() == ["cleanup"]
    (tmp_path / "flag").unlink()
    second = subprocess.run([*run, "--resume", str(tmp_path / "run")], capture_output=True, text=True,
                            timeout=120, cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    assert pickle.loads((tmp_path / "r.pkl").read_bytes()) == 20
    assert (tmp_path / "count.log").read_text().splitlines() == ["ran"]  # not run again
    assert (tmp_path / "exit.log").read_text().splitlines() == ["cleanup", "cleanup"]
    skipped = {e["task"] for e in read_events(tmp_path / "run" / "events.jsonl", event="skip", run=None)}
    assert skipped == {"try.body.count"}


# ---- `continue` on a task result in a loop ----------------------------------------------------------------
CONTINUES = '''
import dagc


@dagc.task
def step(m: int, i: int) -> int:
    return m + i


@dagc.task
def done(m: int) -> bool:
    return m % 3 == 0


@dagc.task
def extra(m: int) -> int:
    return m * 2


@dagc.task
def converged(m: int) -> bool:
    return m > 100


@dagc.pipeline
def skip_rest(n: int = 6):
    m = 1
    for i in range(n):
        m = step(m, i)
        if done(m):
            continue
        m = extra(m)
    return m


@dagc.pipeline
def skip_and_stop(n: int = 9):
    m = 1
    for i in range(n):
        m = step(m, i)
        if converged(m):
            break
        if done(m):
            continue
        m = extra(m)
    return m


@dagc.pipeline
def skip_in_branches(n: int = 7):
    m = 1
    seen = []
    for i in range(n):
        m = step(m, i)
        if done(m):
            m = extra(m)
            continue
        elif m > 20:
            seen = seen + [m]
            continue
        m = step(m, 1)
    return m, seen


# every form above in one pipeline, so that Ray runs them all in one program
@dagc.pipeline
def every_continue():
    return {"skip_rest": skip_rest(), "skip_and_stop": skip_and_stop(), "skip_in_branches": skip_in_branches()}
'''
CONTINUE_PIPELINES = ["skip_rest", "skip_and_stop", "skip_in_branches"]


@pytest.fixture(scope="module")
def continues(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    """The script and, per pipeline, its plain-Python result."""
    root = tmp_path_factory.mktemp("continues")
    script = root / "continues.py"
    script.write_text(CONTINUES, encoding="utf-8")
    plain = {}
    for name in CONTINUE_PIPELINES:
        code = (f"import pickle, runpy, sys\nns = runpy.run_path({str(script)!r}, run_name='plain')\n"
                f"sys.stdout.buffer.write(pickle.dumps(ns[{name!r}]()))\n")
        plain[name] = pickle.loads(run_python(["-c", code], capture_output=True, check=True,
                                                  timeout=60).stdout)
    return script, plain


def test_continue_forms_compile_to_branches(continues) -> None:
    script, plain = continues
    assert plain == {"skip_rest": 70, "skip_and_stop": 159, "skip_in_branches": (144, [28])}
    graph = compile_file(script, pipeline_name="skip_and_stop", passes="verify")
    (loop,) = [n for n in graph if n.op == "loop"]
    body = [n.op for n in loop.bodies["body"]]
    assert body == ["task", "task", "task", "cond"] and loop.region.exit.at == 2
    text = print_graph(graph)
    assert print_graph(parse_graph(text)) == text


@pytest.mark.parametrize("name", CONTINUE_PIPELINES)
def test_continue_local_equals_plain_run(tmp_path: Path, continues, name: str) -> None:
    script, plain = continues
    graph = compile_file(script, pipeline_name=name)
    program = tmp_path / f"{name}_local.py"
    program.write_text(emit(graph, "local", program))
    _ruff_clean(program)
    run_python([str(program), "--result", str(tmp_path / "r.pkl")], check=True, timeout=120)
    assert pickle.loads((tmp_path / "r.pkl").read_bytes()) == plain[name]


@pytest.mark.slow
def test_continue_ray_on_two_devices_equals_plain_run(tmp_path: Path, continues, ray_cluster) -> None:
    """Every form in one Ray program (`every_continue`), each form's result compared with its plain run."""
    script, plain = continues
    graph = compile_file(script, pipeline_name="every_continue", cluster=parse_cluster_spec("2"))
    program = tmp_path / "every_continue_ray.py"
    program.write_text(emit(graph, "ray", program))
    _ruff_clean(program)
    proc = run_python([str(program), "--address", ray_cluster.address, "--result",
                       str(tmp_path / "r.pkl")], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    each_form_equals(pickle.loads((tmp_path / "r.pkl").read_bytes()),
                     {name: plain[name] for name in CONTINUE_PIPELINES}, CONTINUE_PIPELINES)


@pytest.mark.slow
@pytest.mark.parametrize("name", CONTINUE_PIPELINES)
def test_continue_torch_on_two_ranks_equals_plain_run(tmp_path: Path, continues, name: str) -> None:
    from tests.test_backend_torch import launch

    script, plain = continues
    program = tmp_path / f"{name}_torch.py"
    from dagc.backends.torch import REQUIRED_PASSES

    graph = compile_file(script, pipeline_name=name, passes=REQUIRED_PASSES, cluster=parse_cluster_spec("2"),
                         backend="torch")
    program.write_text(emit(graph, "torch", program))
    _ruff_clean(program)
    launch(program, 2, ["--result", str(tmp_path / "r.pkl")])
    assert pickle.loads((tmp_path / "r.pkl").read_bytes()) == plain[name]


def test_picture_marks_the_finally_body(script: Path) -> None:
    from dagc.backends.graphviz import to_dot

    dot = to_dot(compile_file(script, pipeline_name=PIPELINE))
    assert "cluster_region_try_finally" in dot and "finally: runs on success or failure" in dot
    assert "shape=octagon" in dot and 'label="then, always"' in dot
    assert dot == to_dot(compile_file(script, pipeline_name=PIPELINE))


# ---- a try region on several torch ranks --------------------------------------------------------------------
MULTI_RANK = '''
import torch

import dagc


@dagc.task
def prepare(n: int) -> int:
    return n


@dagc.task(ranks=2)
def fit(n: int, fail: bool) -> float:
    ctx = dagc.context()
    if fail:  # on every rank, as a bug in the training code would
        raise ValueError("training diverged")
    t = torch.tensor([float(n)])
    if ctx.world_size > 1:
        torch.distributed.all_reduce(t, group=ctx.group)
        t = t / ctx.world_size
    return float(t.item())


@dagc.task(side_effects=True)
def notify(log: str, status: str) -> str:
    with open(log, "a") as f:
        f.write(status + "\\n")
    return status


@dagc.pipeline
def exit_handler(log: str = "exit.log", n: int = 5, fail: bool = False):
    data = prepare(n)
    try:
        model = fit(data, fail)
    finally:
        sent = notify(log, "finished")
    return model, sent
'''


@pytest.mark.slow
@pytest.mark.parametrize("fail", [False, True], ids=["success", "failure"])
def test_torch_try_around_a_multi_rank_task_notifies_once(tmp_path: Path, fail: bool) -> None:
    """The region runs on both ranks (its body is a 2-rank task): every rank reaches the finally block
    in the same order, the notice that acts on the world runs once (on the region's first rank), and
    a failure fails the job with the original error."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    from tests.test_backend_torch import launch

    script = tmp_path / "multi.py"
    script.write_text(MULTI_RANK, encoding="utf-8")
    plain_dir = tmp_path / "plain"
    plain_dir.mkdir()
    plain = _plain(script, _params(plain_dir, fail))
    program = _torch_program(script, _params(tmp_path, fail), tmp_path / "multi_torch.py")
    _ruff_clean(program)
    assert "if rt.rank == 0:  # try.finally.notify acts on the world" in program.read_text()
    result = tmp_path / "r.pkl"
    argv = ["--result", str(result), "--run-dir", str(tmp_path / "run")]
    if not fail:
        launch(program, 2, argv)
        _check(pickle.loads(result.read_bytes()), plain, "", tmp_path)
        return
    with pytest.raises(ChildFailedError):
        launch(program, 2, argv)
    failures = read_events(tmp_path / "run" / "events.jsonl", event="failure")
    _check(None, plain, " ".join(e["error"] for e in failures), tmp_path)


# ---- try forms: in loops, nested, around branches -----------------------------------------------------------
FORMS = '''
import dagc


@dagc.task
def step(m: int, i: int) -> int:
    return m + i


@dagc.task
def big(m: int) -> bool:
    return m > 12


@dagc.task(side_effects=True)
def log(tag: str, i: int) -> str:
    return f"{tag}{i}"


@dagc.pipeline
def in_loop_region(n: int = 8):
    m = 1
    for i in range(n):
        try:
            m = step(m, i)
        finally:
            note = log("t", i)
        if big(m):
            break
    return m, note


@dagc.pipeline
def unrolled(n: int = 3):
    m = 1
    notes = []
    for i in range(n):
        try:
            m = step(m, i)
        finally:
            notes.append(log("u", i))
    return m, notes


@dagc.pipeline
def nested(x: int = 2):
    status = "start"
    try:
        a = step(x, 1)
        try:
            b = step(a, 2)
            status = "inner done"
        finally:
            c = log("inner", x)
        if big(b):
            d = step(b, 100)
        else:
            d = step(b, -100)
    finally:
        e = log("outer", x)
    return a, b, c, d, e, status
'''


@pytest.mark.parametrize("name", ["in_loop_region", "unrolled", "nested"])
def test_try_forms_local_equals_plain_run(tmp_path: Path, name: str) -> None:
    script = tmp_path / "forms.py"
    script.write_text(FORMS, encoding="utf-8")
    code = (f"import pickle, runpy, sys\nns = runpy.run_path({str(script)!r}, run_name='plain')\n"
            f"sys.stdout.buffer.write(pickle.dumps(ns[{name!r}]()))\n")
    plain = pickle.loads(run_python(["-c", code], capture_output=True, check=True,
                                        timeout=60).stdout)
    result = compile_source(script, pipeline_name=name)
    assert not [d for d in result.sink.diagnostics if d.is_error]
    text = print_graph(result.graph)
    assert print_graph(parse_graph(text)) == text and verify(result.graph) == []
    graph = compile_file(script, pipeline_name=name)
    program = tmp_path / f"{name}_local.py"
    program.write_text(emit(graph, "local", program))
    _ruff_clean(program)
    run_python([str(program), "--result", str(tmp_path / "r.pkl")], check=True, timeout=120)
    assert pickle.loads((tmp_path / "r.pkl").read_bytes()) == plain


@pytest.mark.parametrize("body,code,at", [
    ("    try:\n        m = step(1, 2)\n        return m\n    finally:\n        log('x', 1)\n", "DAGC117", 3),
    ("    m = 1\n    for i in range(3):\n        try:\n            m = step(m, i)\n            if big(m):\n"
     "                break\n        finally:\n            log('x', i)\n    return m\n", "DAGC182", 6),
    ("    try:\n        m = step(1, 2)\n    except ValueError:\n        m = 0\n    return m\n", "DAGC180", 3),
])
def test_unsupported_try_forms_are_diagnosed_at_the_line(tmp_path: Path, body: str, code: str, at: int) -> None:
    head = FORMS.split("@dagc.pipeline")[0]
    text = head + "@dagc.pipeline\ndef p():\n" + body
    (tmp_path / "bad.py").write_text(text, encoding="utf-8")
    result = compile_source(tmp_path / "bad.py", pipeline_name="p")
    errors = [d for d in result.sink.diagnostics if d.is_error]
    assert [d.code for d in errors] == [code]
    assert errors[0].span.line == len(head.splitlines()) + 2 + at  # `at`: the line in the body
    assert errors[0].hint


@pytest.mark.slow
def test_ray_resume_reruns_only_the_unfinished_body_tasks_and_the_finally(tmp_path: Path, ray_cluster) -> None:
    """On Ray the try region is one task; the tasks of its body are stored one by one all the same."""
    script = tmp_path / "resumable.py"
    script.write_text(RESUMABLE, encoding="utf-8")
    graph = compile_file(script, pipeline_name="resumable", params={"dir": str(tmp_path)},
                         cluster=parse_cluster_spec("2"))
    program = tmp_path / "resumable_ray.py"
    program.write_text(emit(graph, "ray", program))
    _ruff_clean(program)
    (tmp_path / "flag").write_text("")
    run = [sys.executable, str(program), "--address", ray_cluster.address, "--result", str(tmp_path / "r.pkl")]
    first = subprocess.run([*run, "--run-dir", str(tmp_path / "run")], capture_output=True, text=True,
                           timeout=300, cwd=tmp_path)
    assert first.returncode != 0 and "RuntimeError: flag is up" in first.stderr, first.stderr[-3000:]
    assert (tmp_path / "exit.log").read_text().splitlines() == ["cleanup"]
    (tmp_path / "flag").unlink()
    second = subprocess.run([*run, "--resume", str(tmp_path / "run")], capture_output=True, text=True,
                            timeout=300, cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    assert pickle.loads((tmp_path / "r.pkl").read_bytes()) == 20
    assert (tmp_path / "count.log").read_text().splitlines() == ["ran"]  # not run again
    assert (tmp_path / "exit.log").read_text().splitlines() == ["cleanup", "cleanup"]
    skipped = {e["task"] for e in read_events(tmp_path / "run" / "events.jsonl", event="skip", run=None)}
    assert skipped == {"try.body.count"}


def test_a_static_continue_in_a_loop_region_is_a_branch_too(tmp_path: Path) -> None:
    """`if i == 2: continue` in a loop that is a region (it breaks on a task result): the index is a
    run-time value there, so the rest of the trip becomes a branch like a task-result continue."""
    script = tmp_path / "c.py"
    script.write_text(CONTINUES.split("@dagc.pipeline")[0] + '''@dagc.pipeline
def p(n: int = 9):
    m = 1
    for i in range(n):
        m = step(m, i)
        if converged(m):
            break
        if i == 2:
            continue
        m = extra(m)
    return m
''', encoding="utf-8")
    code = (f"import runpy\nns = runpy.run_path({str(script)!r}, run_name='plain')\nprint(ns['p']())\n")
    plain = run_python(["-c", code], capture_output=True, text=True, check=True).stdout
    graph = compile_file(script, pipeline_name="p")
    assert [n.op for n in graph] == ["loop"]
    program = tmp_path / "c_local.py"
    program.write_text(emit(graph, "local", program))
    _ruff_clean(program)
    run_python([str(program), "--result", str(tmp_path / "r.pkl")], check=True, timeout=120)
    assert repr(pickle.loads((tmp_path / "r.pkl").read_bytes())) == plain.strip() == "120"
