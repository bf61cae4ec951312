"""Measured runs: read a run directory's event log, and compile with its measurements (`--profile`).

`load_run(RUN_DIR)` summarises one run of the event log (by default the latest run that started
a task): per task its start and end, duration, output bytes, attempts, failures with tracebacks,
and where it ran. `apply_profile(graph, run)` puts the measured durations and output sizes in place
of the annotations before the passes run:

- a node whose name the run measured gets `options.cost` = its measured duration (`flops` is
  cleared) and, when the run recorded the size of its stored outputs, `options.out_size` = that
  size; the annotations it had are kept in `attrs["profile.annotated"]`, and `attrs` gets
  `profile.duration` / `profile.bytes`;
- a fused group measured as a whole is split over its members in proportion to their annotated
  costs; members measured one by one are summed into their group;
- inside a `cond` or `loop` region, a measured task gets its mean duration over the times it ran
  (once per trip in a loop), and a loop gets as its planned trips (`region.trips`, see
  dagc.ir.regions) the times its first body task ran per run of the loop; the region gets
  `attrs["profile.trips"]` (loops) and `attrs["profile.duration"]`, the sum of its inner measurements;
- the graph gets `attrs["profile.run"]` (the run's id) and `attrs["profile.dir"]`.

Durations of a task that ran several times (retries) are those of its last successful attempt.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dagc.ir.core import REGION_OPS, Graph, Node, region_bodies
from dagc.ir.regions import TRIPS_ATTR, WIDTH_ATTR, walk
from dagc.ir.regions import members as members_of

__all__ = ["TaskRecord", "MapRecord", "RunRecord", "ProfileError", "load_run", "apply_profile", "profiled_tasks"]


class ProfileError(ValueError):
    """A run directory or its event log could not be used; the message says why."""


@dataclass
class TaskRecord:
    """One task of a run, as its events describe it (times in seconds since the run started)."""

    name: str
    start: float | None = None
    end: float | None = None
    duration: float | None = None
    bytes: int | None = None
    attempts: int = 0
    status: str = "pending"  # ok | failed | skipped | running | pending
    runs: int = 0  # successful ends in this run: once per trip for a task inside a loop region
    total: float = 0.0  # their durations, summed
    failures: list[dict[str, Any]] = field(default_factory=list)  # {error, traceback, attempt, start, end}
    # on a shared Ray cluster (dagc.runtime.admission): runs stopped by a task of higher priority, and the
    # seconds it waited in the cluster's queue
    preemptions: list[dict[str, Any]] = field(default_factory=list)  # {start, end}
    waited: float = 0.0
    energy: float | None = None  # joules its devices' counters rose by, where the machine has counters
    device: Any = None
    host: str | None = None
    pid: int | None = None
    rank: Any = None
    node: Any = None

    @property
    def lane(self) -> str:
        """Where it ran, for a timeline lane: its device, else its host and process."""
        if isinstance(self.device, int) and not isinstance(self.device, bool):
            return f"device {self.device}"
        if self.rank is not None:
            return f"rank {self.rank}"
        if self.device is not None:
            return f"device {self.device}"
        if self.host or self.pid:
            return f"{self.host or '?'} pid {self.pid}"
        return "run"


@dataclass
class MapRecord:
    """A map region's measured width in one run, from its `width` events (one per run of the region:
    a map inside a loop or another map lists its items once per trip or item)."""

    name: str
    items: int = 0  # items listed, over all its runs
    resumed: int = 0  # of them, found finished in the run directory (Ray: per item, on --resume)
    runs: int = 0  # times the region listed its items
    ranks: int = 1  # ranks its items were spread over (torch)

    @property
    def ran(self) -> int:
        """Items run in this run (not resumed)."""
        return self.items - self.resumed

    def describe(self) -> str:
        """E.g. "5 items", "6 items in 3 runs", "1,000 items (400 resumed), over 2 ranks"."""
        text = f"{self.items:,} item{'' if self.items == 1 else 's'}"
        if self.runs > 1:
            text += f" in {self.runs} runs"
        if self.resumed:
            text += f" ({self.resumed:,} resumed)"
        if self.ranks > 1:
            text += f", over {self.ranks} ranks"
        return text


@dataclass
class RunRecord:
    """One run: its id, pipeline, duration, tasks (in order of first start) and run-level failure."""

    run_dir: Path
    run_id: str
    pipeline: str | None = None
    start_ts: float = 0.0
    duration: float | None = None
    status: str = "running"  # ok | failed | running
    error: str | None = None
    tasks: dict[str, TaskRecord] = field(default_factory=dict)
    maps: dict[str, MapRecord] = field(default_factory=dict)  # measured widths, by region name

    @property
    def makespan(self) -> float:
        """Seconds from the first task's start to the last task's end."""
        starts = [t.start for t in self.tasks.values() if t.start is not None]
        ends = [t.end for t in self.tasks.values() if t.end is not None]
        return max(ends) - min(starts) if starts and ends else 0.0

    @property
    def failures(self) -> list[tuple[str, dict[str, Any]]]:
        return [(t.name, f) for t in self.tasks.values() for f in t.failures]

    @property
    def preemptions(self) -> int:
        return sum(len(t.preemptions) for t in self.tasks.values())

    @property
    def queued(self) -> bool:
        """Whether the run admitted its tasks through a shared cluster's queue and any of them waited there."""
        return any(t.preemptions or t.waited for t in self.tasks.values())


def _events_path(run_dir: Path) -> Path:
    if run_dir.is_file() and run_dir.suffix == ".jsonl":
        return run_dir
    path = run_dir / "events.jsonl"
    if not path.is_file():
        raise ProfileError(f"{run_dir} has no event log (events.jsonl); give the run directory of a run "
                           "(emitted programs write it with --run-dir)")
    return path


_NUMBER = (int, float)
# the fields a record's reader uses, and the JSON types each may have (None: absent or null)
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "ts": _NUMBER, "duration": _NUMBER, "waited": _NUMBER, "energy": _NUMBER,
    "items": (int,), "resumed": (int,), "ranks": (int,), "attempt": (int,), "bytes": (int,), "pid": (int,),
    "event": (str,), "task": (str,), "pipeline": (str,), "error": (str,), "traceback": (str,), "host": (str,),
}
_TYPE_NAMES = {_NUMBER: "a number", (int,): "an integer", (str,): "a string"}


def _well_typed(path: Path, events: list[dict[str, Any]], skipped: list[int]) -> list[dict[str, Any]]:
    """The records whose fields have the types their readers use; each other one is left out, said in one
    warning naming the file, the line and the field (the line numbers are those of the non-blank lines read)."""
    numbers = _record_lines(path, len(events), skipped)
    kept = []
    for number, event in zip(numbers, events):
        wrong = next((k for k, types in _FIELD_TYPES.items() if event.get(k) is not None
                      and (not isinstance(event[k], types) or isinstance(event[k], bool))), None)
        if wrong is None:
            kept.append(event)
            continue
        sys.stderr.write(f"dagc: warning: {path} line {number}: `{wrong}` is {json.dumps(event[wrong])[:40]}, not "
                         f"{_TYPE_NAMES[_FIELD_TYPES[wrong]]}; the record is skipped\n")
    return kept


def _record_lines(path: Path, count: int, skipped: list[int]) -> list[int]:
    """The line numbers of the `count` records `read_events` read from `path` (every non-blank line it did
    not skip)."""
    left_out = set(skipped)
    try:
        with path.open("rb") as f:
            lines = [n for n, raw in enumerate(f, start=1) if raw.strip() and n not in left_out]
    except OSError:
        lines = []
    return (lines + [0] * count)[:count]


def load_run(run_dir: str | Path, run: str | None = None) -> RunRecord:
    """The run `run` (default: the latest one that ran a task) of `run_dir`'s event log."""
    from dagc.runtime.events import read_events

    root = Path(run_dir)
    skipped: list[int] = []
    events = _well_typed(_events_path(root), read_events(_events_path(root), skipped=skipped), skipped)
    if skipped:  # said, never a crash: a torn line, bytes that are not UTF-8
        shown = ", ".join(map(str, skipped[:5])) + (", ..." if len(skipped) > 5 else "")
        sys.stderr.write(f"dagc: warning: {len(skipped)} line(s) of {_events_path(root)} could not be read and "
                         f"were skipped (line {shown})\n")
    if not events:
        raise ProfileError(f"the event log of {run_dir} is empty")
    runs: list[str] = []
    for e in events:
        if e.get("run") not in runs:
            runs.append(e.get("run"))
    if run is None:
        ran = [r for r in runs if any(e.get("run") == r and e.get("event") in ("end", "failure") for e in events)]
        if not ran:
            raise ProfileError(f"no run in {run_dir} finished a task")
        run = ran[-1]
    elif run not in runs:
        raise ProfileError(f"no run {run!r} in {run_dir} (runs: {', '.join(map(str, runs))})")
    mine = [e for e in events if e.get("run") == run]
    origin = min(float(e.get("ts", 0.0)) for e in mine)
    record = RunRecord(root if root.is_dir() else root.parent, str(run), start_ts=origin)
    for e in mine:
        kind = e.get("event")
        ts = float(e.get("ts", origin)) - origin
        if kind == "run_start":
            record.pipeline = e.get("pipeline")
            continue
        if kind == "run_end":
            record.status = "ok"
            record.duration = e.get("duration", ts)
            continue
        if kind == "run_failed":
            record.status = "failed"
            record.error = e.get("error")
            record.duration = ts
            continue
        name = e.get("task")
        if not isinstance(name, str):
            continue
        if kind == "width":
            _count_width(record.maps.setdefault(name, MapRecord(name)), e)
            continue
        task = record.tasks.setdefault(name, TaskRecord(name))
        for key in ("device", "host", "pid", "rank", "node"):
            if e.get(key) is not None:
                setattr(task, key, e[key])
        if kind == "start":
            task.attempts = max(task.attempts, int(e.get("attempt", 1) or 1))
            task.start = ts
            task.end = None
            task.status = "running"
        elif kind == "end":
            duration = float(e.get("duration") or 0.0)
            task.end = ts
            task.start = task.start if task.start is not None else ts - duration
            task.duration = duration
            task.runs += 1
            task.total += duration
            task.bytes = e.get("bytes") if isinstance(e.get("bytes"), int) else task.bytes
            joules = e.get("energy")
            if isinstance(joules, (int, float)) and not isinstance(joules, bool) and joules >= 0:
                task.energy = (task.energy or 0.0) + float(joules)  # (every trip of a loop's task)
            task.status = "ok"
        elif kind == "failure":
            duration = float(e.get("duration") or 0.0)
            start = task.start if task.start is not None else ts - duration
            task.failures.append({"error": e.get("error", ""), "traceback": e.get("traceback", ""),
                                  "attempt": task.attempts or 1, "start": start, "end": ts})
            task.end = ts
            task.start = start
            task.status = "failed"
        elif kind == "skip":
            task.status = "skipped"
            task.start = task.end = ts
        elif kind == "preempted":
            task.preemptions.append({"start": task.start if task.start is not None else ts, "end": ts})
            task.start = None
            task.status = "waiting"
        elif kind == "admitted":
            task.waited += float(e.get("waited") or 0.0)
    if record.duration is None and record.status == "running":
        record.duration = max((t.end or 0.0 for t in record.tasks.values()), default=0.0)
    meta = record.run_dir / "run.json"
    if record.pipeline is None and meta.is_file():
        try:
            info = json.loads(meta.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            info = None
        pipeline = info.get("pipeline") if isinstance(info, dict) else None  # (a run.json of the wrong shape)
        record.pipeline = pipeline if isinstance(pipeline, str) else None
    return record


def _count_width(found: MapRecord, event: dict[str, Any]) -> None:
    found.items += int(event.get("items") or 0)
    found.resumed += int(event.get("resumed") or 0)
    found.runs += 1
    found.ranks = max(found.ranks, int(event.get("ranks") or 1))


def profiled_tasks(graph: Graph) -> list[str]:
    """Names of the nodes whose costs came from a profile, in program order."""
    return [n.name for n in graph if "profile.duration" in n.attrs]


def _measure(node: Node, duration: float, nbytes: int | None) -> None:
    opts = node.options
    node.attrs["profile.annotated"] = {"cost": opts.cost, "flops": opts.flops, "out_size": opts.out_size}
    node.attrs["profile.duration"] = round(duration, 6)
    changes: dict[str, Any] = {"cost": max(0.0, float(duration)), "flops": None}
    if nbytes is not None:
        node.attrs["profile.bytes"] = int(nbytes)
        changes["out_size"] = int(nbytes)
    node.options = dataclasses.replace(opts, **changes)


def apply_profile(graph: Graph, run: RunRecord) -> list[str]:
    """Use `run`'s measurements as `graph`'s costs (see the module docstring); returns the names
    of the nodes that got a measured cost, in program order."""

    measured = {name: t for name, t in run.tasks.items() if t.status == "ok" and t.duration is not None}
    for node in graph:
        if node.op == "transfer":
            continue
        if node.op in REGION_OPS:
            _measure_region(node, measured, 1, run.maps)
            continue
        record = measured.get(node.name)
        if record is not None:
            _measure(node, record.duration or 0.0, record.bytes)
            continue
        if node.op == "fused" and members_of(node):
            members = members_of(node)
            got = [measured.get(m.name) for m in members]
            if all(g is not None for g in got):
                sizes = [g.bytes for g in got if g is not None and g.bytes is not None]
                _measure(node, sum(g.duration or 0.0 for g in got if g is not None), max(sizes) if sizes else None)
                for member, g in zip(members, got):
                    if g is not None:
                        _measure(member, g.duration or 0.0, g.bytes)
    # a group measured as a whole, now compiled unfused: split it over its members
    for name, record in measured.items():
        if name in graph or not name.startswith("fused."):
            continue
        # the group's first member gives it its name (`fused.FIRST`)
        first = name[len("fused."):]
        if first not in graph or "profile.duration" in graph.node(first).attrs:
            continue
        chain = [first]
        while True:
            succ = graph.successors(chain[-1])
            if len(succ) != 1 or len(graph.predecessors(succ[0])) != 1 or succ[0] in measured:
                break
            chain.append(succ[0])
        weights = [graph.node(n).options.cost or 1.0 for n in chain]
        total = sum(weights) or 1.0
        for n, w in zip(chain, weights):
            _measure(graph.node(n), (record.duration or 0.0) * w / total, record.bytes if n == chain[-1] else None)
    names = profiled_tasks(graph)
    from dagc.console import logger

    inside = {m.name for n in graph if n.op in REGION_OPS for m in walk(n)}
    unused = sorted(set(measured) - {n.name for n in graph} - {m for n in graph for m in _member_names(n)} - inside)
    if unused:
        logger.debug("profile %s: measured tasks not in the graph: %s", run.run_dir, ", ".join(unused))
    if names:
        graph.attrs["profile.run"] = run.run_id
        graph.attrs["profile.dir"] = str(run.run_dir)
    return names


def _measure_region(node: Node, measured: dict[str, TaskRecord], times: int, widths: dict[str, MapRecord]) -> float:
    """Put the measurements of `node`'s inner tasks in its bodies (mean per run) and, for a loop, its
    measured trips; `times` is how often the region itself ran. Returns the seconds measured inside."""
    seconds = 0.0
    trips: float | None = None
    for body in region_bodies(node).values():
        if node.op == "loop" and body and (first := measured.get(body[0].name)) is not None and first.runs:
            trips = first.runs / times
        if node.op == "map":
            trips = _measured_width(node, body, measured, times, widths)
        inner_times = max(1, round(times * trips)) if trips else times
        for inner in body:
            record = measured.get(inner.name)
            if inner.op in REGION_OPS:
                seconds += _measure_region(inner, measured, inner_times, widths)
            elif record is not None and record.runs:
                _measure(inner, record.total / record.runs, record.bytes)
                seconds += record.total
    if trips is not None:
        key, word = (WIDTH_ATTR, "width") if node.op == "map" else (TRIPS_ATTR, "trips")
        if key in node.attrs:
            node.attrs["profile.annotated"] = {word: node.attrs[key]}
        measured_trips = int(trips) if trips == int(trips) else round(trips, 6)
        node.attrs[f"profile.{word}"] = measured_trips
        node.attrs[key] = measured_trips
    if seconds:
        node.attrs["profile.duration"] = round(seconds / times, 6)
    return seconds


def _measured_width(node: Node, body: list[Node], measured: dict[str, TaskRecord], times: int,
                    widths: dict[str, MapRecord]) -> float | None:
    """Items a map had in the profiled run: its `width` events, else (a log written before them) the
    runs of its first body task, else its items' own records `MAP[i]` (Ray)."""
    if node.name in widths:
        return widths[node.name].items / times
    first = measured.get(body[0].name) if body else None
    if first is not None and first.runs:
        return first.runs / times
    prefix = node.name + "["
    items = [name for name in measured if name.startswith(prefix) and name[len(prefix):-1].isdigit()]
    return len(items) / times if items else None


def _member_names(node: Node) -> list[str]:
    return [m.name for m in members_of(node)]


def describe_profile(graph: Graph) -> str | None:
    """One line saying which costs came from a profile (None when none did)."""
    names = profiled_tasks(graph)
    if not names:
        return None
    rest = [n.name for n in graph if n.op not in ("transfer", "glue") and n.name not in set(names)]
    learned = graph.attrs.get("costs.learned")
    if learned is not None and not graph.attrs.get("profile.run"):  # (dagc.learned)
        runs = learned.get("tasks", {})
        counts = sorted({runs.get(n, 0) for n in names})
        said = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
        text = (f"costs of {len(names)} task(s) learned from earlier runs (median of the last {said} run(s), store "
                f"{learned.get('store')}): {', '.join(names)}")
        if rest:
            text += f"; still guesses (annotations or defaults): {', '.join(rest)}"
        return text
    text = (f"costs of {len(names)} task(s) measured in run {graph.attrs.get('profile.run')} "
            f"({graph.attrs.get('profile.dir')}): {', '.join(names)}")
    if rest:
        text += f"; from annotations: {', '.join(rest)}"
    return text

