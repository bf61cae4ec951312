"""Retention: `dagc runs` lists run directories, `dagc gc` removes old ones, and the run directories
programs make by themselves are bounded."""

from __future__ import annotations

import json
import os
from pathlib import Path

from dagc.runtime.events import EventLog
from dagc.runtime.runs import bound_default_runs, list_runs, select_for_removal
from dagc.runtime.store import RunStore
from tests.conftest import run_dagc


def _make(root: Path, name: str, created: str, status: str, size: int = 1000) -> Path:
    store = RunStore(root / name, pipeline="p")
    meta = json.loads((store.root / "run.json").read_text())
    meta["created"] = created
    (store.root / "run.json").write_text(json.dumps(meta))
    log = EventLog(store.events_path, f"run-{name}")
    log.write("run_start", pipeline="p")
    if status == "finished":
        log.write("run_end", duration=1.0)
    elif status == "failed":
        log.write("run_failed", error="x")
    store.save_bytes("t", "fp", b"\0" * size)
    return store.root


def test_runs_lists_and_gc_removes_oldest_first(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    _make(root, "a", "2026-01-01T00:00:00+0000", "finished", 5000)
    _make(root, "b", "2026-02-01T00:00:00+0000", "failed", 5000)
    _make(root, "c", "2026-03-01T00:00:00+0000", "unfinished", 5000)
    held = RunStore(_make(root, "d", "2026-01-15T00:00:00+0000", "unfinished", 5000))
    assert held.lock("live") is None  # a live run holds "d"
    runs = list_runs(root)
    assert [r.path.name for r in runs] == ["a", "d", "b", "c"]
    assert [r.status for r in runs] == ["finished", "running", "failed", "unfinished"]
    proc = run_dagc("runs", str(root))
    assert proc.returncode == 0 and "4 run directories" in proc.stdout and "running" in proc.stdout
    assert [r.path.name for r in select_for_removal(runs, keep=1)] == ["a", "b"]  # never the running one
    total = sum(r.size for r in runs)
    assert [r.path.name for r in select_for_removal(runs, max_size=total - 1)] == ["a"]
    proc = run_dagc("gc", str(root), "--keep", "1", "--dry-run")
    assert proc.returncode == 0 and (root / "a").exists() and "would remove" in proc.stdout
    proc = run_dagc("gc", str(root), "--keep", "1")
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in root.iterdir()) == ["c", "d"]
    assert run_dagc("gc", str(root)).returncode == 2  # nothing said: nothing removed


def test_default_run_directories_are_bounded(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "runs"
    for i in range(6):
        _make(root, f"p-{i}", f"2026-01-0{i + 1}T00:00:00+0000", "finished")
    monkeypatch.setenv("DAGC_KEEP_RUNS", "3")
    bound_default_runs(root)
    assert sorted(p.name for p in root.iterdir()) == ["p-4", "p-5"]  # and the run about to start makes 3
    monkeypatch.setenv("DAGC_KEEP_RUNS", "0")
    bound_default_runs(root)
    assert len(os.listdir(root)) == 2


def test_default_run_directories_are_bounded_in_size(tmp_path: Path, monkeypatch) -> None:
    """Runs of a pipeline that keeps large outputs: the oldest go until the rest fit the size bound; the newest
    finished run stays even when it alone is over it."""
    root = tmp_path / "runs"
    for i in range(4):
        _make(root, f"p-{i}", f"2026-01-0{i + 1}T00:00:00+0000", "finished")
        (root / f"p-{i}" / "blob").write_bytes(b"x" * 4096)
    largest = max(r.size for r in list_runs(root))
    monkeypatch.setenv("DAGC_KEEP_RUNS_SIZE", str(int(largest * 2.5)))  # two runs fit, not three
    bound_default_runs(root)
    assert sorted(p.name for p in root.iterdir()) == ["p-2", "p-3"]
    monkeypatch.setenv("DAGC_KEEP_RUNS_SIZE", "1KiB")
    bound_default_runs(root)
    assert sorted(p.name for p in root.iterdir()) == ["p-3"]
    monkeypatch.setenv("DAGC_KEEP_RUNS_SIZE", "0")
    bound_default_runs(root)
    assert sorted(p.name for p in root.iterdir()) == ["p-3"]
