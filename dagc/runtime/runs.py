"""Run directories: what `dagc runs` lists and what `dagc gc` removes.

A run directory (dagc.runtime.store) grows with every output it keeps. `dagc runs [DIR]` lists the run
directories under DIR (default `.dagc/runs`): pipeline, creation time, size, and whether the last run in it
finished, failed, is running now (it holds the directory's lock) or stopped unfinished. `dagc gc` removes
the oldest of them by age, count or total size; it never removes one a run holds (it holds each one's lock
while it removes it), reports as freed only what it removed, and removes the temporary files killed writers
left in the rest. A run directory they cannot read is left out of both, said in one warning.

The default run directories a program makes under `.dagc/runs/` (Ray programs always keep one) are bounded
by a policy applied when such a program starts: at most DEFAULT_KEEP of them per working directory
(`$DAGC_KEEP_RUNS` changes it, 0 keeps all) taking at most DEFAULT_MAX_SIZE bytes together
(`$DAGC_KEEP_RUNS_SIZE`, e.g. `20GiB`; 0 sets no bound), the oldest removed first (the newest finished run
is always kept, whatever its size); a `--run-dir` named by the user is never removed by it.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dagc.runtime.events import read_events
from dagc.runtime.store.errors import StorageError
from dagc.runtime.store.files import read_json_object, remove_orphaned_temporaries
from dagc.runtime.store.records import directory_held, hold_directory, lock_file_held

__all__ = ["RunInfo", "Removal", "list_runs", "select_for_removal", "remove_runs", "remove_orphans",
           "bound_default_runs", "DEFAULT_KEEP"]


@dataclass
class RunInfo:
    path: Path
    pipeline: str
    created: float  # seconds since the epoch (the directory's run.json)
    size: int  # bytes of every file in it
    status: str  # "finished", "failed", "running", "unfinished", "empty"
    run: str | None  # the id of its last run


def list_runs(root: Path, warn: Callable[[str], None] | None = None) -> list[RunInfo]:
    """The run directories directly under `root`, oldest first. One that cannot be read (its run.json of the
    wrong shape, its event log a directory, unreadable files) is left out, said in one line to `warn`
    (default: standard error): the others are listed all the same."""
    say = warn or _warn
    try:
        paths = sorted(p for p in root.iterdir() if (p / "run.json").is_file())
    except OSError:  # (not a directory, or one this user may not list: nothing to list)
        return []
    out = []
    for path in paths:
        try:
            out.append(_info(path))
        except OSError as exc:  # StorageError included: its message already names the file and what to do
            said = str(exc) if isinstance(exc, StorageError) else f"{exc.filename or path}: {exc.strerror or exc}"
            say(f"skipped the run directory {path}, which cannot be read: {said}")
    out.sort(key=lambda r: (r.created, str(r.path)))
    return out


def _warn(message: str) -> None:
    sys.stderr.write(f"dagc: warning: {message}\n")


def _info(path: Path) -> RunInfo:
    meta = read_json_object(path / "run.json", "a dagc run record", "remove the directory, or fix its run.json")
    created = _created(meta.get("created"), path)
    size = _size(path)
    events_path = path / "events.jsonl"
    if events_path.exists() and not events_path.is_file():
        raise StorageError(f"{events_path} is not a file; remove it, or the whole run directory")
    events = read_events(events_path)
    runs = [e.get("run") for e in events if e.get("event") == "run_start"]
    last = runs[-1] if runs else None
    kinds = {e.get("event") for e in events if e.get("run") == last}
    if directory_held(path):
        status = "running"
    elif last is None:
        status = "empty"
    else:
        status = "finished" if "run_end" in kinds else "failed" if "run_failed" in kinds else "unfinished"
    pipeline = meta.get("pipeline")
    return RunInfo(path, pipeline if isinstance(pipeline, str) and pipeline else "?", created, size, status,
                   last if isinstance(last, str) else None if last is None else str(last))


def _size(path: Path) -> int:
    """Bytes of the files under `path` (links not followed); an OSError when part of it cannot be read."""
    total = 0
    for directory, _, files in os.walk(path, onerror=_raise):
        for name in files:
            info = os.lstat(os.path.join(directory, name))
            if stat.S_ISREG(info.st_mode):
                total += info.st_size
    return total


def _raise(exc: OSError) -> None:
    raise exc


def _created(text: object, path: Path) -> float:
    if isinstance(text, str):
        try:
            return time.mktime(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S"))
        except ValueError:
            pass
    return path.stat().st_mtime


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


@dataclass
class Removal:
    """What `remove_runs` did: bytes it freed, one line per directory it could not (wholly) remove, and one
    per directory it kept because a run took it meanwhile."""

    freed: int = 0
    removed: list[Path] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    taken: list[str] = field(default_factory=list)


def remove_runs(runs: list[RunInfo]) -> Removal:
    """Remove the run directories, each while holding its lock (one a run holds, or took meanwhile, is kept:
    no run can take it while it is being removed). Only the bytes actually removed count as freed."""
    done = Removal()
    for run in runs:
        try:
            held = hold_directory(run.path)
        except StorageError as exc:
            done.failed.append(f"cannot remove {run.path}: {exc}")
            continue
        if held is None or lock_file_held(run.path):
            if held is not None:
                os.close(held)
            done.taken.append(f"kept {run.path}: a run started in it meanwhile")
            continue
        problems: list[OSError] = []
        try:
            shutil.rmtree(run.path, onerror=lambda _f, _p, info, found=problems: found.append(info[1]))
        finally:
            os.close(held)
        left = _size_left(run.path)
        done.freed += max(run.size - left, 0) if left is not None else 0  # (unknown: nothing said freed)
        if problems or run.path.exists():
            first = next((p for p in problems if isinstance(p, OSError)), None)
            why = f"{first.filename or run.path}: {first.strerror or first}" if first is not None else "it is still there"
            done.failed.append(f"cannot remove {run.path} ({why}); fix its permissions, then run dagc gc again")
        else:
            done.removed.append(run.path)
    return done


def _size_left(path: Path) -> int | None:
    """Bytes still under `path` (None: what is left cannot be read)."""
    try:
        return _size(path) if path.exists() else 0
    except OSError:
        return None


def remove_orphans(runs: list[RunInfo]) -> int:
    """Remove the temporary files killed writers left in the run directories no run holds; bytes freed."""
    freed = 0
    for run in runs:
        if run.status == "running":
            continue
        for directory, _, files in os.walk(run.path):
            freed += remove_orphaned_temporaries(Path(directory), files)
    return freed


DEFAULT_KEEP = 20
DEFAULT_MAX_SIZE = 5 * 2**30  # 5 GiB: a few runs of a sample that keeps half a gigabyte each


def bound_default_runs(root: Path) -> None:
    """The policy for the run directories programs make by themselves under `.dagc/runs/`."""
    try:
        keep = int(os.environ.get("DAGC_KEEP_RUNS", DEFAULT_KEEP))
    except ValueError:
        keep = DEFAULT_KEEP
    max_size = _size_bound()
    if keep <= 0 and max_size is None:
        return
    runs = [r for r in list_runs(root) if r.path.name != ".gitignore"]
    chosen = select_for_removal(runs, keep=max(keep - 1, 0) if keep > 0 else None,  # room for the run to start
                                max_size=max_size)
    newest = max((r for r in runs if r.status != "running"), key=lambda r: (r.created, str(r.path)), default=None)
    # (the newest finished run stays: the one a user is most likely to resume or read)
    remove_runs([r for r in chosen if newest is None or r.path != newest.path])  # (what it cannot remove stays)


def _size_bound() -> int | None:
    """The total size default run directories may take (`$DAGC_KEEP_RUNS_SIZE`; None: no bound)."""
    text = os.environ.get("DAGC_KEEP_RUNS_SIZE")
    if text is None:
        return DEFAULT_MAX_SIZE
    try:
        from dagc.units import parse_size

        size = parse_size(text.strip())
    except (ValueError, TypeError):
        print(f"dagc: $DAGC_KEEP_RUNS_SIZE={text!r} is not a size (such as 20GiB); using "
              f"{DEFAULT_MAX_SIZE // 2**30}GiB", file=sys.stderr)
        return DEFAULT_MAX_SIZE
    return size if size > 0 else None
