"""The cost store: what every run measured of every task, read by every compile (docs/scheduling.md, "Learned
costs").

Each task that finishes (its owner's successful attempt, on every backend) appends one line to
`costs.jsonl` in the store (default `.dagc/costs/` in the working directory, where runs go by default;
`--cost-store DIR` or `$DAGC_COST_STORE` names another, to share one between machines or a team):

    {"pipeline": "train", "task": "fit", "code": "9f2c...", "wall": 12.5, "cpu": 24.1, "bytes": 1048576,
     "rss": 734003200, "at": 1796420104.2}

keyed by the pipeline, the task and the digest of its code (dagc.runtime.code: its function and the user's
code it reaches), so that the figures of a task whose code changed are not used for it. `wall` and `cpu` are
seconds, `bytes` the size of its stored output (null where it was not stored), `rss` the process's peak resident
memory while the task ran (`TaskMemory`: its high-water mark is reset as the task starts, on Linux; elsewhere
the process's peak so far, an upper bound), and `memory` how far that peak is above what the process held as
the task started (what the task's `memory=` declares; absent where not measured). A line is one `write` to a file opened for
appending, so concurrent runs never interleave within a line; a line that does not parse (a run killed
mid-write, a damaged file) is skipped, and said once.

The compiler (dagc.learned) takes, per task, the median of its most recent runs whose code is the code it
compiles.

A task inside a fused group or region (a loop's body, a map's items) is recorded under its own name with the
code digest of the unit it runs in, and a map's listing adds a line with its width instead of times:

    {"pipeline": "train", "task": "map", "code": "41ab...", "width": 16, "at": 1796420104.9}
"""

from __future__ import annotations

import contextvars
import json
import os
import resource
import sys
import time
import weakref
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = ["COST_FILE", "CostLog", "RUNNING_UNIT", "TaskMemory", "cost_store_dir", "declared_memory", "peak_rss",
           "read_costs", "record_width"]

COST_FILE = "costs.jsonl"
STORE_VARIABLE = "DAGC_COST_STORE"


def cost_store_dir(explicit: str | os.PathLike[str] | None = None, base: str | os.PathLike[str] | None = None) -> Path:
    """The store: `explicit`, else `$DAGC_COST_STORE`, else `.dagc/costs` in `base` (the working directory)."""
    if explicit is not None:
        return Path(explicit)
    named = os.environ.get(STORE_VARIABLE)
    if named:
        return Path(named)
    return Path(base or ".") / ".dagc" / "costs"


# the cost store and the code digest of the unit (top-level task, fused group or region) now running in this
# context: the tasks inside it and its maps' widths are recorded with that digest
RUNNING_UNIT: contextvars.ContextVar[tuple[CostLog, str | None] | None] = contextvars.ContextVar(
    "dagc_running_unit", default=None)


def record_width(region: str, items: int) -> None:
    """Record that map `region` listed `items` items, in the store of the unit running here (if any)."""
    running = RUNNING_UNIT.get()
    if running is not None:
        running[0].write({"pipeline": running[0].pipeline, "task": region, "code": running[1], "width": items,
                          "at": round(time.time(), 3)})


def peak_rss() -> int:
    """This process's peak resident memory in bytes (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024


class TaskMemory:
    """The resident memory of one task, measured in its process at the cost of two small reads: on Linux the
    process's high-water mark (VmHWM) is reset as the task starts (`/proc/self/clear_refs`), so the mark at its
    end is the task's own peak. Where it cannot be reset, the process's peak counts only when it rose while the
    task ran (it then is the task's).

    `peak()` is the process's peak while the task ran; `grown()` how far that is above what the process held
    as the task started (the memory the task itself took, what its `memory=` declares), where not known
    exactly a lower bound: above the process's earlier peak."""

    CLEAR_REFS = "/proc/self/clear_refs"
    STATUS = "/proc/self/status"

    def __init__(self) -> None:
        self.carried = 0  # the peak before a task run inside this one reset the mark (a region's tasks)
        if _MEASURING:
            mark = _high_water_mark(self.STATUS)
            for outer in _MEASURING:
                outer.carried = max(outer.carried, mark or 0)
        self.reset = _reset_high_water_mark(self.CLEAR_REFS)
        start = _high_water_mark(self.STATUS) if self.reset else None  # (just reset: what it holds now)
        self.reset = start is not None
        self.start = start if start is not None else peak_rss()
        _MEASURING.add(self)

    def peak(self) -> int | None:
        """The process's peak in bytes while the task ran (None: not known here)."""
        _MEASURING.discard(self)
        if self.reset:
            mark = _high_water_mark(self.STATUS)
            return None if mark is None else max(mark, self.carried)
        after = peak_rss()
        return after if after > self.start else None

    def grown(self, peak: int | None) -> int | None:
        """How far `peak` (from `peak()`) is above what the process held as the task started."""
        return None if peak is None else max(0, peak - self.start)


# the measurements under way in this process (a task that failed is dropped with its measurement)
_MEASURING: weakref.WeakSet[TaskMemory] = weakref.WeakSet()


def _reset_high_water_mark(path: str) -> bool:
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError:
        return False
    try:
        os.write(fd, b"5")  # 5: reset the peak resident set size only (proc(5))
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _high_water_mark(path: str) -> int | None:
    try:
        with open(path, "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        return None
    return None


def declared_memory(fn: object) -> int | None:
    """The bytes a task's `memory=` declares, read from the options its `@dagc.task` decorator kept on the
    function (None: none declared, or a figure that does not parse: `dagc check` says so)."""
    options = getattr(fn, "__dagc_task__", None)
    if not isinstance(options, dict) or options.get("memory") is None:
        return None
    from dagc.units import UnitError, parse_size

    try:
        declared = parse_size(options["memory"])
    except (UnitError, TypeError, ValueError):
        return None
    return declared if declared > 0 else None


class CostLog:
    """Appends what finished tasks measured to the store; never fails a run (one warning when it cannot)."""

    def __init__(self, root: str | os.PathLike[str], pipeline: str, code: Mapping[str, str]) -> None:
        self.root = Path(root)
        self.pipeline = pipeline
        self.code = dict(code)  # task -> the digest of its code as it is when the run starts
        self.failed = False

    def record(self, task: str, wall: float, cpu: float | None, nbytes: int | None, code: str | None = None,
               energy: float | None = None, rss: int | None = None, memory: int | None = None) -> None:
        """One finished task; `energy`: the joules its devices' counters rose by (dagc.runtime.energy), only
        where the machine has counters; `rss` and `memory`: the process's peak while it ran and how far that is
        above what it held as the task started (`TaskMemory`; without `rss`, the process's peak so far)."""
        line = {"pipeline": self.pipeline, "task": task, "code": code or self.code.get(task),
                "wall": round(wall, 6), "cpu": None if cpu is None else round(cpu, 6),
                "bytes": nbytes, "rss": rss if rss is not None else peak_rss(), "at": round(time.time(), 3)}
        if memory is not None:
            line["memory"] = memory
        if energy is not None:
            line["energy"] = energy
        self.write(line)

    def write(self, line: Mapping[str, Any]) -> None:
        """Append one record (one line, one `write`)."""
        data = (json.dumps(line, separators=(",", ":")) + "\n").encode("utf-8")
        try:
            if not self.root.is_dir():
                self.root.mkdir(parents=True, exist_ok=True)
                if self.root.parent.name == ".dagc" and not (self.root.parent / ".gitignore").exists():
                    # the project's .dagc/, as the programs make it: never in the user's version control
                    (self.root.parent / ".gitignore").write_text("# written by dagc: run directories, caches and "
                                                                 "task costs, never committed\n*\n", encoding="utf-8")
            fd = os.open(self.root / COST_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, data)  # one write of one line: concurrent writers never interleave within it
            finally:
                os.close(fd)
        except OSError as exc:
            if not self.failed:
                self.failed = True
                print(f"dagc: cannot record task costs in {self.root}: {exc.strerror or exc}; the run goes on "
                      "(--cost-store DIR names another store)", file=sys.stderr)

    def __reduce__(self) -> tuple:  # sent to Ray workers with their job
        return (CostLog, (str(self.root), self.pipeline, self.code))


def read_costs(root: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], int]:
    """The records of the store at `root`, oldest first, and how many lines were skipped (damaged)."""
    path = Path(root) / COST_FILE
    try:
        raw = path.read_bytes()
    except OSError:
        return [], 0
    records: list[dict[str, Any]] = []
    skipped = 0
    for line in _lines(raw):
        try:
            record = json.loads(line)
        except ValueError:
            skipped += 1
            continue
        if not (isinstance(record, dict) and isinstance(record.get("task"), str)
                and isinstance(record.get("pipeline"), str)
                and (_number(record.get("wall")) or _number(record.get("width")))):
            skipped += 1
            continue
        records.append(record)
    return records, skipped


def _lines(raw: bytes) -> Iterator[bytes]:
    for line in raw.split(b"\n"):
        if line.strip():
            yield line


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value and value >= 0
