"""The event log: one JSON object per line (JSONL), appended by the driver and by the workers.

Every record has

    ts      seconds since the epoch (float)          time   the same, ISO 8601 in UTC
    run     the id of the run that wrote it           event  what happened (below)
    pid     the writing process                       host   its host name

Task events also have `task` (the IR node name) and, where known, `node` (the engine's node id,
e.g. Ray's), `device` (a device index or a device string such as "cuda:0"), `rank` and `attempt`:

    start     a task began running                    attempt
    end       a task finished                         duration (s), bytes (size of its stored outputs)
    failure   a task raised                           duration, error, traceback
    retry     a task began again after a failure      attempt (2 for the first retry)
    skip      a task was not run: its outputs were found in the run directory   fingerprint
    width     a map region listed its items (once per run of the region)   items, resumed (items
              whose results were found in the run directory), ranks (ranks the items were spread over)

Run events: `run_start` (pipeline, tasks, resume), `run_end` (duration, bytes of the result) and
`run_failed` (error). A line is written with one `write()` on a file opened with O_APPEND, so
lines from concurrent processes never interleave.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["EventLog", "EventTail", "read_events", "new_run_id"]

TASK_EVENTS = ("start", "end", "failure", "retry", "skip", "width")
RUN_EVENTS = ("run_start", "run_end", "run_failed")


def new_run_id() -> str:
    """A short id, unique per run: the start time and 6 random hex digits."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


class EventLog:
    """Appends events to a JSONL file. Cheap to create and to pickle (it holds only the path)."""

    def __init__(self, path: str | os.PathLike[str], run_id: str | None = None) -> None:
        self.path = Path(path)
        self.run_id = run_id or new_run_id()
        self._checked_end = False
        self._broken = False

    def write(self, event: str, task: str | None = None, **fields: Any) -> dict[str, Any]:
        now = time.time()
        record: dict[str, Any] = {
            "ts": now,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e3):03d}Z",
            "run": self.run_id,
            "event": event,
        }
        if task is not None:
            record["task"] = task
        record.update(fields)
        if event == "run_start" and "script" not in record and sys.argv and sys.argv[0]:
            # the user's script (every program sets sys.argv[0] to it): the next compile of that script reads
            # what the run observed (dagc.frontend.observed)
            record["script"] = os.path.abspath(sys.argv[0])
        record.setdefault("pid", os.getpid())
        record.setdefault("host", socket.gethostname())
        line = (json.dumps(record, default=str, sort_keys=False) + "\n").encode("utf-8")
        try:
            self._append(line)
        except OSError as exc:  # a full disk, a read-only directory: said once, the run goes on without a log
            if not self._broken:
                self._broken = True
                sys.stderr.write(f"dagc: warning: cannot write the event log {self.path}: {exc.strerror or exc}; "
                                 "events are no longer recorded\n")
        return record

    def _append(self, line: bytes) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # the owner's only (it holds errors), and never through a link planted in a shared run directory: that
        # would append to whatever file the link names
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            if not self._checked_end:  # a torn last line (a writer killed mid-line) must not swallow this one
                self._checked_end = True
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    line = b"\n" + line
            os.write(fd, line)
        finally:
            os.close(fd)

    # ---- task events ----------------------------------------------------------------------------
    def start(self, task: str, attempt: int = 1, **where: Any) -> dict[str, Any]:
        if attempt > 1:
            self.write("retry", task, attempt=attempt, **where)
        return self.write("start", task, attempt=attempt, **where)

    def end(self, task: str, duration: float, nbytes: int | None, **where: Any) -> dict[str, Any]:
        return self.write("end", task, duration=round(duration, 6), bytes=nbytes, **where)

    def failure(self, task: str, duration: float, error: BaseException, traceback: str,
                **where: Any) -> dict[str, Any]:
        return self.write("failure", task, duration=round(duration, 6),
                          error=f"{type(error).__name__}: {error}", traceback=traceback, **where)

    def skip(self, task: str, fingerprint: str, **fields: Any) -> dict[str, Any]:
        return self.write("skip", task, fingerprint=fingerprint, **fields)

    def __repr__(self) -> str:
        return f"EventLog({str(self.path)!r}, run_id={self.run_id!r})"


def read_events(path: str | os.PathLike[str], *, run: str | None = None, event: str | None = None,
                skipped: list[int] | None = None) -> list[dict[str, Any]]:
    """The records of an event log, in file order; optionally only one run's or one kind's. A line that
    is not a JSON object (torn by a writer killed mid-line, bytes that are not UTF-8) is skipped, and its
    number appended to `skipped` when given."""
    return list(_iter(Path(path), run, event, skipped if skipped is not None else []))


class EventTail:
    """The records one run appended to an event log since the last call: how a Ray driver follows what its
    workers record (which tasks started) without reading the whole log each time. A line still being written
    waits for the next call."""

    def __init__(self, path: str | os.PathLike[str], run: str) -> None:
        self.path, self.run = Path(path), run
        self._offset = 0
        self._partial = b""

    def new(self) -> list[dict[str, Any]]:
        try:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                data = f.read()
        except OSError:  # not made yet, or unreadable: nothing new to follow
            return []
        self._offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        out = []
        for raw in lines:
            try:
                record = json.loads(raw.decode("utf-8"))
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("run") == self.run:
                out.append(record)
        return out


def _iter(path: Path, run: str | None, event: str | None, skipped: list[int]) -> Iterator[dict[str, Any]]:
    if not path.exists():
        return
    with path.open("rb") as f:
        for number, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode("utf-8"))
            except ValueError:  # UnicodeDecodeError included
                skipped.append(number)
                continue
            if not isinstance(record, dict):
                skipped.append(number)
                continue
            if (run is None or record.get("run") == run) and (event is None or record.get("event") == event):
                yield record
