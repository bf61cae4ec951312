"""Writing a small annotated script and reading the effects dagc infers for its tasks: what the effects test
modules (tests/test_effects*.py) share."""

from __future__ import annotations

import textwrap
from pathlib import Path

from dagc.diagnostics import DiagnosticSink
from dagc.frontend.effects import EffectAnalyzer, Effects
from dagc.frontend.modules import Project

__all__ = ["HEAD", "HISTORY_TASKS", "_write", "effects_of"]

HEAD = "import random\nimport dagc\n\n"

# One task appends to a module-level list and another reads it: the smallest pair that shares state.
HISTORY_TASKS = """\
HISTORY = []


@dagc.task
def record(x: int) -> None:
    HISTORY.append(x)


@dagc.task
def count() -> int:
    return len(HISTORY)
"""


def _write(tmp_path: Path, source: str, name: str = "m.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


def effects_of(tmp_path: Path, source: str) -> dict[str, Effects]:
    path = _write(tmp_path, HEAD + textwrap.dedent(source))
    project = Project(path, DiagnosticSink())
    info = project.load_entry()
    assert info is not None
    analyzer = EffectAnalyzer(project)
    return {name: analyzer.of_task(task) for name, task in info.tasks.items()}
