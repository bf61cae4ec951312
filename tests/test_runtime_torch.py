"""The task executor inside torch.distributed programs (gloo ranks on CPU): retries and attempt
numbers (also of a multi-rank task), sys.exit as a named failure ending with one line, argv."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from tests.interpreters import run_python

pytest.importorskip("torch")

from dagc.runtime import read_events  # noqa: E402
from tests import runtime_projects as projects  # noqa: E402
from tests.test_backend_torch import _emit, launch  # noqa: E402

pytestmark = pytest.mark.slow


def test_torch_retries_and_attempts(tmp_path: Path, write_project) -> None:
    program = _emit(write_project(projects.RETRY) / "retry.py", tmp_path / "out" / "prog_torch.py", 2)
    launch(program, 2, ["--run-dir", str(tmp_path / "run"), "--result", str(tmp_path / "r.pkl")])
    assert pickle.loads((tmp_path / "r.pkl").read_bytes()) == projects.RETRY_RESULT
    retries = read_events(tmp_path / "run" / "events.jsonl", event="retry")
    assert [(e["task"], e["attempt"]) for e in retries] == [("flaky", 2), ("flaky", 3), ("exits", 2)]


def test_torch_multi_rank_task_retries_on_every_rank(tmp_path: Path, write_project) -> None:
    program = _emit(write_project(projects.GANG) / "gang.py", tmp_path / "out" / "prog_torch.py", 2)
    launch(program, 2, ["--run-dir", str(tmp_path / "run"), "--result", str(tmp_path / "r.pkl")])
    assert pickle.loads((tmp_path / "r.pkl").read_bytes()) == projects.GANG_RESULT
    failures = read_events(tmp_path / "run" / "events.jsonl", event="failure")
    assert [(e["task"], e["rank"], e["attempt"]) for e in failures] == [("gang", 1, 1)]


def test_torch_sys_exit_ends_with_one_line_naming_task_rank_attempt(tmp_path: Path, write_project) -> None:
    program = _emit(write_project(projects.EXIT) / "quits.py", tmp_path / "out" / "prog_torch.py", 2)
    proc = run_python([str(program), "--dist-backend", "gloo"], capture_output=True,
                          text=True, timeout=180, cwd=tmp_path)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("dagc: error: task `quits` failed on rank "), proc.stderr[-3000:]
    assert last.endswith("(attempt 1): it called sys.exit(0)")


def test_torch_module_reads_argv_at_import(tmp_path: Path, write_project) -> None:
    program = _emit(write_project(projects.ARGV) / "job.py", tmp_path / "out" / "prog_torch.py", 2)
    launch(program, 2, ["--result", str(tmp_path / "r.pkl"), "--", "--scale", "3"])
    assert pickle.loads((tmp_path / "r.pkl").read_bytes()) == (21, "job.py", os.getcwd())


def test_torch_unpicklable_value_crossing_ranks_names_task_and_type(tmp_path: Path, write_project) -> None:
    program = _emit(write_project(projects.LOCAL_CLASS_FANOUT) / "fanout.py", tmp_path / "out" / "prog_torch.py", 2)
    assert "rt.send(measure" in program.read_text()  # the two readers were placed apart
    proc = run_python([str(program), "--dist-backend", "gloo", "--timeout", "30"],
                          capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("dagc: error: task `measure` failed on rank "), proc.stderr[-3000:]
    assert "(`fanout.Shape`) goes to rank 1 but cannot be pickled" in last and "at module level" in last


def test_torch_result_that_cannot_pickle_is_printed_not_a_failure(tmp_path: Path, write_project) -> None:
    """As on the local and Ray programs: the run directory keeps no copy of such a result, and the
    program prints it (a run without --result)."""
    source = projects.LOCAL_CLASS["shapes.py"].replace("return area(measure(n))", "return measure(n)")
    program = _emit(write_project({"shapes.py": source}) / "shapes.py", tmp_path / "out" / "prog_torch.py", 1)
    proc = run_python([str(program), "--dist-backend", "gloo", "--run-dir", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Shape(rows=3, cols=4)" in proc.stdout
    (end,) = read_events(tmp_path / "run" / "events.jsonl", event="run_end")
    assert end["bytes"] is None


ENDS_ITS_GROUP = '''\
import torch
import torch.distributed as dist
from torch.distributed import destroy_process_group

import dagc


@dagc.task
def train(n: int) -> float:
    value = float(torch.arange(n, dtype=torch.float32).sum())
    if dist.is_initialized():  # accelerate's end_training(), DDP scripts' last line
        dist.destroy_process_group()
    return value


@dagc.task
def evaluate(n: int) -> float:
    if dist.is_initialized():
        destroy_process_group()
    return float(n) / 2


@dagc.task
def report(a: float, b: float) -> dict:
    return {"a": a, "b": b}


@dagc.pipeline
def p(n: int = 5):
    return report(train(n), evaluate(n))
'''


@pytest.mark.slow
def test_user_code_that_destroys_the_default_group_does_not_end_the_run(tmp_path: Path) -> None:
    """The runner defers destroying the default process group to the run's end, on every rank, however the
    user's module imported `destroy_process_group`."""
    import pickle

    from tests.test_backend_torch import launch
    from tests.test_effects import _torch_program

    script = tmp_path / "ends.py"
    script.write_text(ENDS_ITS_GROUP, encoding="utf-8")
    program = _torch_program(script, "p", {}, tmp_path / "ends_torch.py", split=("train", "evaluate"))
    launch(program, 2, ["--result", str(tmp_path / "r.pkl")])
    assert pickle.loads((tmp_path / "r.pkl").read_bytes()) == {"a": 10.0, "b": 2.5}
