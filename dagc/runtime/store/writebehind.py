"""Writing behind: outputs sealed and written on one background thread, so that the next task starts while
the last one's output goes to disk, with a bound on the bytes in flight."""

from __future__ import annotations

import atexit
import os
import sys
import threading
from collections.abc import Callable


class WriteBehind:
    """Seals and writes outputs on one background thread, so that the next task starts while the last
    one's output goes to disk. At most `limit` bytes are in flight (a submit waits for room); `flush()`
    waits for every write and raises the first one's StorageError, as a synchronous write would have."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.pending = 0
        self.error: BaseException | None = None
        self.cond = threading.Condition()
        self.jobs: list[tuple[int, Callable[[], object]]] = []
        self.thread: threading.Thread | None = None

    def submit(self, nbytes: int, write: Callable[[], object]) -> None:
        with self.cond:
            self._raise()
            while self.pending and self.pending + nbytes > self.limit:
                self.cond.wait()
                self._raise()
            self.pending += nbytes
            self.jobs.append((nbytes, write))
            if self.thread is None:
                self.thread = threading.Thread(target=self._loop, name="dagc-write-behind", daemon=True)
                self.thread.start()
            self.cond.notify_all()

    def flush(self) -> None:
        with self.cond:
            while self.pending:
                self.cond.wait()
            self._raise()

    def _raise(self) -> None:
        if self.error is not None:
            error, self.error = self.error, None
            raise error

    def _loop(self) -> None:
        while True:
            with self.cond:
                while not self.jobs:
                    self.cond.wait()
                nbytes, write = self.jobs.pop(0)
            try:
                write()
            except BaseException as exc:  # noqa: BLE001 - handed to the thread that flushes
                with self.cond:
                    self.error = self.error or exc
            with self.cond:
                self.pending -= nbytes
                self.cond.notify_all()


_write_behind: list[WriteBehind] = []


def write_behind() -> WriteBehind:
    """This process's writer (bounded by `$DAGC_WRITE_BEHIND` bytes in flight, default 1 GiB)."""
    if not _write_behind:
        try:
            limit = int(os.environ.get("DAGC_WRITE_BEHIND", 1 << 30))
        except ValueError:
            limit = 1 << 30
        _write_behind.append(WriteBehind(limit))
        atexit.register(_flush_at_exit)
    return _write_behind[0]


def flush_writes() -> None:
    """Wait for every output written behind; raises the first write's StorageError."""
    if _write_behind:
        _write_behind[0].flush()


def _flush_at_exit() -> None:
    try:
        flush_writes()
    except Exception as exc:  # noqa: BLE001 - the process is ending: say it
        sys.stderr.write(f"dagc: error: {exc}\n")
