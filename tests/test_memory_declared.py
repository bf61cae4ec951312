"""A task that takes more memory than its `memory=` declares is said once, as a warning and a `memory_exceeded`
event naming the task, the declared and the measured figure, and the cost store keeps the measured figure: on
the local and torch programs."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from dagc.backends import emit
from dagc.driver import compile_file
from dagc.runtime import read_events
from dagc.runtime.costs import TaskMemory, declared_memory
from tests.interpreters import run_python

MIB = 2**20

# `big` holds 300 MiB at once (three times, in a loop unrolled as big[0..2]: said once); `small` stays within its
# figure
SCRIPT = """
import dagc


@dagc.task(memory="100MiB")
def big(n: int) -> int:
    block = b"x" * (n * 2**20)
    return len(block)


@dagc.task(memory="1GiB")
def small(n: int) -> int:
    return len(b"y" * (n * 2**20))


@dagc.pipeline
def p(n: int = 300):
    total = 0
    for _ in range(3):
        total += big(n)
    return total + small(10)
"""


# the same, with `big`'s figure given at the call (`train.options(memory=...)(x)`, as Ray users write it)
PER_CALL = SCRIPT.replace('@dagc.task(memory="100MiB")\ndef big', "@dagc.task\ndef big").replace(
    "total += big(n)", 'total += big.options(memory="100MiB")(n)')


def _emit(tmp_path: Path, backend: str, script: str = SCRIPT) -> Path:
    (tmp_path / "job.py").write_text(textwrap.dedent(script), encoding="utf-8")
    program = tmp_path / "out" / f"prog_{backend}.py"
    program.parent.mkdir(parents=True, exist_ok=True)
    program.write_text(emit(compile_file(tmp_path / "job.py", backend=backend), backend, program))
    return program


def _check(tmp_path: Path, stderr: str) -> None:
    said = [line for line in stderr.splitlines() if "its memory= declares" in line]
    assert len(said) == 1 and said[0].startswith("dagc: warning: task `big[0]` took "), stderr[-3000:]
    assert "100MiB" in said[0]
    (event,) = read_events(tmp_path / "run" / "events.jsonl", event="memory_exceeded")
    assert event["task"] == "big[0]" and event["declared"] == 100 * MIB
    assert 300 * MIB * 0.95 <= event["peak"] < 2 * 300 * MIB
    records = [json.loads(line) for line in (tmp_path / "costs" / "costs.jsonl").read_text().splitlines()]
    big = [r for r in records if r["task"].startswith("big[") and "wall" in r]
    assert len(big) == 3 and all(300 * MIB * 0.95 <= r["memory"] <= r["rss"] for r in big), big


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the per-task peak needs /proc")
@pytest.mark.parametrize("script", [SCRIPT, PER_CALL], ids=["decorator", "per-call"])
def test_local_program_says_and_records_memory_beyond_the_declared(tmp_path: Path, script: str) -> None:
    assert script.count("100MiB") == 1
    program = _emit(tmp_path, "local", script)
    proc = run_python([str(program), "--run-dir", str(tmp_path / "run"), "--cost-store", str(tmp_path / "costs"),
                       "--result", str(tmp_path / "r.json")], capture_output=True, text=True, timeout=300,
                      cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _check(tmp_path, proc.stderr)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the per-task peak needs /proc")
def test_torch_program_says_and_records_memory_beyond_the_declared(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    program = _emit(tmp_path, "torch")
    proc = run_python([str(program), "--dist-backend", "gloo", "--run-dir", str(tmp_path / "run"),
                       "--cost-store", str(tmp_path / "costs")], capture_output=True, text=True, timeout=300,
                      cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _check(tmp_path, proc.stderr)


def test_declared_memory_reads_the_decorator_and_ignores_what_does_not_parse() -> None:
    import dagc

    @dagc.task(memory="2GiB")
    def declared() -> None: ...

    @dagc.task(memory="lots")
    def unreadable() -> None: ...

    @dagc.task(retries=1)
    def undeclared() -> None: ...

    assert declared_memory(declared) == 2 * 1024 * MIB
    assert declared_memory(unreadable) is None and declared_memory(undeclared) is None
    assert declared_memory(print) is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the per-task peak needs /proc")
def test_task_memory_is_the_tasks_own_after_a_larger_one() -> None:
    """The high-water mark is reset per task: a small task after a large one is not charged its peak."""
    first = TaskMemory()
    block = b"z" * (200 * MIB)
    assert first.grown(first.peak()) >= 190 * MIB  # type: ignore[operator]
    del block
    second = TaskMemory()
    assert second.grown(second.peak()) < 50 * MIB  # type: ignore[operator]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the per-task peak needs /proc")
def test_a_region_keeps_the_peak_of_the_tasks_run_inside_it() -> None:
    """A task run inside another (a region's) resets the mark: the outer one still sees the inner's peak."""
    outer = TaskMemory()
    inner = TaskMemory()
    block = b"w" * (200 * MIB)
    del block
    assert inner.grown(inner.peak()) >= 190 * MIB  # type: ignore[operator]
    after = TaskMemory()  # the next task inside: resets the mark again
    after.peak()
    assert outer.grown(outer.peak()) >= 190 * MIB  # type: ignore[operator]
