"""The one program lifecycle (dagc.runtime.lifecycle) on the local engine, in this process: options, run
directory, result, reuse, edited code, the failure report; the typed task rows and the one reuse path."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dagc.backends.toolkit import task_row_source
from dagc.runtime import read_events
from dagc.runtime.executor import Executor, TaskSpec
from dagc.runtime.lifecycle import Pipeline
from dagc.runtime.local import run_local
from dagc.runtime.reuse import StoredOutputs
from dagc.runtime.rows import TaskRow
from dagc.runtime.store import Cache, RunStore

FLOW = '''\
def double(x):
    return 2 * x


def fail(x):
    raise ValueError(f"no {x}")
'''


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A pipeline's source tree; the program run here may change sys.argv and sys.path: put back after."""
    (tmp_path / "flow.py").write_text(FLOW, encoding="utf-8")
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "flow", raising=False)
    return tmp_path


def _pipeline(root: Path) -> Pipeline:
    tasks = {"double": TaskRow("d" * 32), "fail": TaskRow("f" * 32, retries=1)}
    return Pipeline("flow", root, (".",), ("flow",), "flow.py", tasks, {}, {"flow": "flow.py"})


def _run(failing: bool = False) -> Callable[[Executor, dict[str, Any]], Any]:
    def run(rt: Executor, modules: dict[str, Any]) -> object:
        flow = modules["flow"]
        value = rt.task("double", flow.double, 21)
        if failing:
            rt.task("fail", flow.fail, value)
        return value
    return run


PROGRAM = """\
import sys
from pathlib import Path

from dagc.runtime.lifecycle import Pipeline
from dagc.runtime.local import run_local
from dagc.runtime.rows import TaskRow

CODE = {code!r}


def run(rt, modules):
    flow = modules["flow"]
    return rt.task("double", flow.double, int(sys.argv[1]) if len(sys.argv) > 1 else 21)


PIPELINE_SPEC = Pipeline("flow", Path(__file__).resolve().parent, (".",), ("flow",), "flow.py",
                         {{"double": TaskRow("d" * 32)}}, CODE, {{"flow": "flow.py"}})

if __name__ == "__main__":
    sys.exit(run_local(PIPELINE_SPEC, run))
"""


def _program(root: Path, code: dict[str, tuple] | None = None) -> Callable[..., subprocess.CompletedProcess]:
    """A program written as the local backend emits one, and how to run it (each run in a process of its own:
    a run holds its run directory until its process ends)."""
    (root / "prog.py").write_text(PROGRAM.format(code=code or {}), encoding="utf-8")

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(root / "prog.py"), *args], cwd=root, capture_output=True,
                              text=True, timeout=120)
    return run


def test_a_run_keeps_its_result_and_a_resumed_run_reuses_it(project: Path) -> None:
    run_dir, result = project / "run", project / "result.pkl"
    program = _program(project)
    first = program("--run-dir", str(run_dir), "--", "5")
    assert first.returncode == 0 and first.stdout.strip() == "10", first.stderr  # the script's arguments
    events = [e["event"] for e in read_events(run_dir / "events.jsonl")]
    assert events[0] == "run_start" and events[-1] == "run_end"

    second = program("--resume", str(run_dir), "--result", str(result), "--", "5")
    assert second.returncode == 0 and second.stdout == "", second.stderr
    assert pickle.loads(result.read_bytes()) == 10
    skips = read_events(run_dir / "events.jsonl", event="skip")
    assert [(e["task"], e["source"]) for e in skips] == [("double", "run")]


def test_a_failed_task_ends_the_run_with_its_frames_and_how_to_finish_it(project: Path,
                                                                       capsys: pytest.CaptureFixture) -> None:
    run_dir = project / "run"
    status = run_local(_pipeline(project), _run(failing=True), ["--run-dir", str(run_dir)])
    err = capsys.readouterr().err
    assert status == 1
    assert "error: task `fail` failed (attempt 2): ValueError: no 42" in err
    assert 'flow.py", line 6, in fail' in err  # the user's own frame, not the runtime's
    assert err.rstrip().endswith(f"finish the run with: --resume {run_dir}")
    failed = read_events(run_dir / "events.jsonl", event="run_failed")
    assert len(failed) == 1 and "no 42" in failed[0]["error"]


def test_edited_code_is_recomputed_and_said_on_resume(project: Path) -> None:
    from dagc.runtime.code import code_digest

    run_dir = project / "run"
    digest = code_digest(("flow:double",), project, {"flow": "flow.py"})
    program = _program(project, {"double": (("flow:double",), (), digest)})
    assert program("--run-dir", str(run_dir)).stdout.strip() == "42"
    (project / "flow.py").write_text(FLOW.replace("2 * x", "3 * x"), encoding="utf-8")
    resumed = program("--resume", str(run_dir))
    assert resumed.returncode == 0 and resumed.stdout.strip() == "63"  # computed again, not reused
    assert "code changed since this program was emitted: `double`" in resumed.stderr
    changed = read_events(run_dir / "events.jsonl", event="code_changed")
    assert [e["tasks"] for e in changed] == [["double"]]


def test_bad_options_are_a_usage_error(project: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exit_:
        run_local(_pipeline(project), _run(), ["--resume", str(project / "nowhere"), "--run-dir", "x"])
    assert exit_.value.code == 2 and "--resume RUN_DIR already names the run directory" in capsys.readouterr().err


# ---- typed rows ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("row", [
    ("a" * 32, 0, None, True, None, (("x",), (), False, False, (), (), True)),
    ("b" * 32, 2, 1.5, "declared cache=False", 3, None, 4),
    TaskRow("c" * 32, ranks=(0, 1), inputs=("v",), outputs=("w#0", "w#1")),
])
def test_a_row_is_written_as_the_constructor_call_that_makes_it(row: tuple) -> None:
    text = task_row_source(row)
    assert text.startswith(f"TaskRow({row[0]!r}") and ", retries=0" not in text and "cache=True" not in text
    assert eval(text, {"TaskRow": TaskRow}) == TaskRow.of(row)


def test_a_plain_tuple_and_its_typed_row_make_the_same_spec() -> None:
    plain = ("e" * 32, 1, 2.0, "why not", 0, None, 2)
    assert TaskSpec.from_row("t", plain) == TaskSpec.from_row("t", TaskRow.of(plain))
    assert TaskSpec.from_row("t", plain).uncached == "why not"


# ---- one reuse path -----------------------------------------------------------------------------------
def test_a_state_group_is_reused_only_whole(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run")
    rows = {"make": TaskRow("1" * 32, state=0), "train": TaskRow("2" * 32, state=0), "alone": TaskRow("3" * 32)}
    specs = {name: TaskSpec.from_row(name, row) for name, row in rows.items()}
    ex = Executor(rows, store=store)
    for name in ("make", "alone"):
        ex.save(specs[name], name.upper())
    ex.flush()
    stored = StoredOutputs(specs, store, resume=True)
    assert stored.source(specs["alone"]) == "run" and stored.output(specs["alone"], "run")[0] == "ALONE"
    assert stored.source(specs["make"]) is None  # its group's `train` is not stored
    assert StoredOutputs(specs, store, resume=False).source(specs["alone"]) is None  # not resumed: not reused


def test_a_cached_output_is_taken_into_the_run_directory(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    spec = TaskSpec.from_row("t", TaskRow("4" * 32))
    Executor({"t": TaskRow("4" * 32)}, cache=cache).save(spec, [1, 2])
    store = RunStore(tmp_path / "run")
    stored = StoredOutputs({"t": spec}, store, cache)
    assert stored.source(spec) == "cache"
    stored.take(spec, "cache")
    assert stored.held_here(spec) == "run" and store.load("t", spec.fingerprint) == [1, 2]
    assert os.path.exists(store.path("t", spec.fingerprint))
