"""What earlier runs observed a task do beyond what its code shows, read back by the next compile.

The run-time check of effects (dagc.runtime.effectcheck) stops a run at a task that changed an argument or drew
from a global generator where the compiler did not see it, and records it in the run's event log
(`effects_violated`: the parameters it changed, the generators it drew from; `effects_observed`: a draw that
no other task depended on). Run directories live under `.dagc/runs/` of the directory the program ran in.
When the same script is compiled again, those records become assumptions: the task is ordered and placed
with what it changed (one process, in order), with a warning that names the run and the declaration that
makes it explicit (DAGC163). A record older than the script's last change is not used: the code it
described may be gone.

Only the newest RUNS_READ run directories are read, and only their events of this script and pipeline.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Observed", "observed_effects", "recent_runs", "RUNS_READ"]

RUNS_READ = 20


@dataclass
class Observed:
    """What runs saw one task (by node name) do: parameters changed in place, generators drawn from."""

    params: set[str] = field(default_factory=set)
    rng: set[str] = field(default_factory=set)
    run_dir: str = ""


def observed_effects(script: Path, pipeline: str, places: list[Path] | None = None) -> dict[str, Observed]:
    """{task: Observed} from the run directories under `.dagc/runs/` of the working directory and of the
    script's directory, for runs of `pipeline` from `script` made after the script was last changed."""
    try:
        script_path = os.path.realpath(script)
        changed = os.stat(script_path).st_mtime
    except OSError:
        return {}
    found: dict[str, Observed] = {}
    for run_dir, _ in _run_dirs(script, places):
        _read(run_dir, script_path, pipeline, changed, found)
    return found


def recent_runs(script: Path, pipeline: str, places: list[Path] | None = None) -> list[Path]:
    """The run directories under `.dagc/runs/` holding a run of `pipeline` from `script` made after the script
    last changed (newest first, at most RUNS_READ)."""
    out = []
    for run_dir, _ in _run_dirs(script, places):
        found: dict[str, Observed] = {}
        marker = _read(run_dir, os.path.realpath(script), pipeline, os.stat(script).st_mtime, found)
        if marker:
            out.append(run_dir)
    return out


def _run_dirs(script: Path, places: list[Path] | None) -> list[tuple[Path, float]]:
    try:
        changed = os.stat(os.path.realpath(script)).st_mtime
    except OSError:
        return []
    roots = places if places is not None else [Path.cwd(), Path(os.path.realpath(script)).parent]
    run_dirs: dict[str, float] = {}
    for root in roots:
        try:
            entries = list(os.scandir(root / ".dagc" / "runs"))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    run_dirs[os.path.realpath(entry.path)] = entry.stat(follow_symlinks=False).st_mtime
            except OSError:
                continue
    ordered = sorted(run_dirs, key=lambda d: (-run_dirs[d], d))[:RUNS_READ]
    return [(Path(d), run_dirs[d]) for d in ordered if run_dirs[d] >= changed]


def _read(run_dir: Path, script: str, pipeline: str, changed: float, found: dict[str, Observed]) -> bool:
    """Add what the runs of `pipeline` from `script` recorded in `run_dir` (a damaged log: what it can read);
    whether it holds such a run."""
    ours: set[str] = set()
    try:
        with open(run_dir / "events.jsonl", encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(event, dict):
                    continue
                kind, run = event.get("event"), event.get("run")
                if kind == "run_start":
                    if event.get("pipeline") == pipeline and event.get("script") == script \
                            and isinstance(event.get("ts"), (int, float)) and event["ts"] >= changed:
                        ours.add(str(run))
                elif kind in ("effects_violated", "effects_observed") and str(run) in ours \
                        and isinstance(event.get("task"), str):
                    entry = found.setdefault(event["task"], Observed(run_dir=str(run_dir)))
                    params = event.get("params") or []
                    rng = event.get("rng") or []
                    entry.params.update(p for p in params if isinstance(p, str))
                    entry.rng.update(r for r in rng if isinstance(r, str))
    except OSError:
        return False
    return bool(ours)
