"""Run directories: what `dagc runs` lists and what `dagc gc` removes.

A run directory (dagc.runtime.store) grows with every output it keeps. `dagc runs [DIR]` lists the run
directories under DIR (default `.dagc/runs`): pipeline, creation time, size, and whether the last run in it
finished, failed, is running now (it holds the directory's lock) or stopped unfinished. `dagc gc` removes
the oldest of them by age, count or total size; it never removes one a run holds.

The default run directories a program makes under `.dagc/runs/` (Ray programs always keep one) are bounded
by a policy applied when such a program starts: at most DEFAULT_KEEP of them per working directory
(`$DAGC_KEEP_RUNS` changes it, 0 keeps all), the oldest removed first; a `--run-dir` named by the user is
never removed by it.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from dagc.runtime.events import read_events

__all__ = ["RunInfo", "list_runs", "select_for_removal", "remove_runs", "bound_default_runs", "DEFAULT_KEEP"]


@dataclass
class RunInfo:
    path: Path
    pipeline: str
    created: float  # seconds since the epoch (the directory's run.json)
    size: int  # bytes of every file in it
    status: str  # "finished", "failed", "running", "unfinished", "empty"
    run: str | None  # the id of its last run


def list_runs(root: Path) -> list[RunInfo]:
    """The run directories directly under `root`, oldest first."""
    if not root.is_dir():
        return []
    out = []
    for path in sorted(p for p in root.iterdir() if (p / "run.json").is_file()):
        out.append(_info(path))
    out.sort(key=lambda r: (r.created, str(r.path)))
    return out


def _info(path: Path) -> RunInfo:
    try:
        meta = json.loads((path / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        meta = {}
    created = _created(meta.get("created"), path)
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())
    events = read_events(path / "events.jsonl")
    runs = [e.get("run") for e in events if e.get("event") == "run_start"]
    last = runs[-1] if runs else None
    kinds = {e.get("event") for e in events if e.get("run") == last}
    if _held(path):
        status = "running"
    elif last is None:
        status = "empty"
    else:
        status = "finished" if "run_end" in kinds else "failed" if "run_failed" in kinds else "unfinished"
    return RunInfo(path, str(meta.get("pipeline") or "?"), created, size, status, last)


def _created(text: object, path: Path) -> float:
    if isinstance(text, str):
        try:
            return time.mktime(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S"))
        except ValueError:
            pass
    return path.stat().st_mtime


def _held(path: Path) -> bool:
    """Whether a live process holds the run directory (see RunStore.lock)."""
    import fcntl

    lock = path / ".lock"
    if not lock.exists():
        return False
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:  # a link (planted), or unreadable: never treated as free to remove
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def select_for_removal(runs: list[RunInfo], *, older_than: float | None = None, keep: int | None = None,
                       max_size: int | None = None, now: float | None = None) -> list[RunInfo]:
    """The runs to remove, oldest first: those older than `older_than` seconds, those beyond the newest
    `keep`, then the oldest until the rest take at most `max_size` bytes. Never a running one."""
    now = time.time() if now is None else now
    candidates = [r for r in runs if r.status != "running"]
    chosen: dict[Path, RunInfo] = {}
    if older_than is not None:
        chosen.update((r.path, r) for r in candidates if now - r.created > older_than)
    if keep is not None and len(runs) > keep:
        newest = {r.path for r in runs[len(runs) - keep:]} if keep > 0 else set()
        chosen.update((r.path, r) for r in candidates if r.path not in newest)
    if max_size is not None:
        total = sum(r.size for r in runs if r.path not in chosen)
        for r in candidates:
            if total <= max_size:
                break
            if r.path not in chosen:
                chosen[r.path] = r
                total -= r.size
    return sorted(chosen.values(), key=lambda r: (r.created, str(r.path)))


def remove_runs(runs: list[RunInfo]) -> int:
    """Remove the run directories (each checked again: one a run took meanwhile is kept); bytes freed."""
    freed = 0
    for run in runs:
        if _held(run.path):
            continue
        shutil.rmtree(run.path, ignore_errors=True)
        freed += run.size
    return freed


DEFAULT_KEEP = 20


def bound_default_runs(root: Path) -> None:
    """The policy for the run directories programs make by themselves under `.dagc/runs/`."""
    try:
        keep = int(os.environ.get("DAGC_KEEP_RUNS", DEFAULT_KEEP))
    except ValueError:
        keep = DEFAULT_KEEP
    if keep <= 0:
        return
    runs = [r for r in list_runs(root) if r.path.name != ".gitignore"]
    remove_runs(select_for_removal(runs, keep=max(keep - 1, 0)))  # room for the run about to start
