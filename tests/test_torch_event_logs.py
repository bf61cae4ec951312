"""The event log of a torch program is as complete as the local program's: a failed run's log lists the tasks
every rank finished, `skip` events say where the output came from (`source`), and `run_start` says `resume`
only for a resumed run."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.deadlines import scaled
from tests.interpreters import run_python

pytest.importorskip("torch")

from dagc.runtime import read_events  # noqa: E402
from tests.test_backend_torch import _emit  # noqa: E402

pytestmark = pytest.mark.slow

# `second` (rank 0) fails a while after `first` (rank 1), a quick one, has finished (a file or a message between
# them would have the compiler place them on one rank): the while grows with the machine's load (tests.deadlines)
FAILS = """
import time

import dagc


@dagc.task
def first(n: int) -> int:
    return n + 1


@dagc.task
def second(n: int) -> int:
    time.sleep(SLEEP)
    raise ValueError("second fails")


@dagc.pipeline
def p(n: int = 1):
    return second(n), first(n)
"""

TWO = """
import dagc


@dagc.task
def double(n: int) -> int:
    return 2 * n


@dagc.task
def square(n: int) -> int:
    return n * n


@dagc.pipeline
def p(n: int = 3):
    return double(n), square(n)
"""


def _program(tmp_path: Path, source: str) -> Path:
    (tmp_path / "job.py").write_text(textwrap.dedent(source), encoding="utf-8")
    return _emit(tmp_path / "job.py", tmp_path / "out" / "prog_torch.py", 2)


def _run(program: Path, tmp_path: Path, *args: str) -> str:
    proc = run_python([str(program), "--dist-backend", "gloo", *args], capture_output=True, text=True, timeout=300,
                      cwd=tmp_path)
    return f"{proc.returncode}\n{proc.stderr}"


def test_a_failed_run_logs_the_tasks_other_ranks_finished(tmp_path: Path) -> None:
    program = _program(tmp_path, FAILS.replace("SLEEP", f"{scaled(2):.1f}"))
    text = program.read_text()
    assert text.index("rt.task('second'") < text.index("def rank_1") < text.index("rt.task('first'")
    said = _run(program, tmp_path, "--run-dir", str(tmp_path / "run"))
    assert not said.startswith("0\n") and "second fails" in said, said[-3000:]
    events = read_events(tmp_path / "run" / "events.jsonl")
    assert [(e["task"], e["rank"]) for e in events if e["event"] == "end"] == [("first", 1)], events
    assert [(e["task"], e["rank"]) for e in events if e["event"] == "failure"] == [("second", 0)]
    assert len({e["run"] for e in events}) == 1


def test_skip_events_carry_their_source_and_resume_is_said_only_when_resuming(tmp_path: Path) -> None:
    program = _program(tmp_path, TWO)
    cache = str(tmp_path / "cache")
    for run_dir in ("fresh", "again"):
        said = _run(program, tmp_path, "--run-dir", str(tmp_path / run_dir), "--cache", cache)
        assert said.startswith("0\n"), said[-3000:]
    (fresh,) = read_events(tmp_path / "fresh" / "events.jsonl", event="run_start")
    assert fresh["resume"] is False
    (again,) = read_events(tmp_path / "again" / "events.jsonl", event="run_start")
    assert again["resume"] is False  # a new run directory, outputs from the cache: not a resumed run
    skips = read_events(tmp_path / "again" / "events.jsonl", event="skip")
    assert sorted((e["task"], e["source"]) for e in skips) == [("double", "cache"), ("square", "cache")]
    said = _run(program, tmp_path, "--resume", str(tmp_path / "again"))
    assert said.startswith("0\n"), said[-3000:]
    resumed = read_events(tmp_path / "again" / "events.jsonl", event="run_start")[-1]
    assert resumed["resume"] is True
    skips = read_events(tmp_path / "again" / "events.jsonl", event="skip")[2:]
    assert sorted((e["task"], e["source"]) for e in skips) == [("double", "run"), ("square", "run")]
