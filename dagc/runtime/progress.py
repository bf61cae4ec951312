"""A one-line progress bar of completed tasks, drawn only on a terminal.

    [##########..........]  12/24 tasks  3.1s  train

When the stream is not a TTY (a log file, CI) nothing is drawn, so logs stay clean.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress"]


class Progress:
    """Counts completed tasks out of `total` and redraws at most ten times a second."""

    WIDTH = 24

    def __init__(self, total: int, *, stream: TextIO | None = None, enabled: bool | None = None,
                 label: str = "tasks") -> None:
        self.total = total
        self.done = 0
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self._start = time.monotonic()
        self._drawn = 0.0
        self._last = ""

    def advance(self, n: int = 1, name: str | None = None) -> None:
        self.done += n
        if name:
            self._last = name
        if self.enabled:
            now = time.monotonic()
            if now - self._drawn >= 0.1 or self.done >= self.total:
                self._drawn = now
                self._draw()

    def reach(self, done: int) -> None:
        """Completed tasks counted elsewhere (the other ranks of a torch run): redraw when it grew."""
        if done > self.done:
            self.advance(done - self.done)

    def _draw(self) -> None:
        total = max(self.total, self.done)  # (a loop's tasks count once per trip)
        filled = self.WIDTH * self.done // total if total else self.WIDTH
        bar = "#" * filled + "." * (self.WIDTH - filled)
        elapsed = time.monotonic() - self._start
        text = f"\r[{bar}] {self.done:>{len(str(total))}}/{total} {self.label}  {elapsed:.1f}s  {self._last}"
        self.stream.write(text[:200].ljust(80) if len(text) < 80 else text[:200])
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self._draw()
            self.stream.write("\n")
            self.stream.flush()
            self.enabled = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
