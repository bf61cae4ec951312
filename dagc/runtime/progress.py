"""The progress display of a run: what is done, what is running and for how long.

On a terminal (drawn with rich's `Live`, redrawn every REFRESH_S seconds while tasks run):

    ━━━━━━━━━━━━━━╸━━━━━━━━━  12/24 tasks  3m05s
      train     2m41s
      evaluate     12s

What the tasks print, and log lines, appear above it (the process's stdout, when it is the same terminal, and
stderr go through the display while it is up; so do the root logger's stream handlers). Anywhere else (a pipe,
a log file, CI) nothing is redrawn and no escape code is written: a run whose tasks keep running writes one
plain line every HEARTBEAT_S seconds (`$DAGC_PROGRESS_INTERVAL`), and a short run writes nothing.

    dagc: 12/24 tasks done after 3m05s; running: train (2m41s), evaluate (12s)

`$DAGC_PROGRESS` chooses: `live`, `plain` or `off` (default: live on a terminal, else plain).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from typing import Any, TextIO

__all__ = ["Progress", "MODE_VARIABLE", "INTERVAL_VARIABLE", "format_elapsed"]

MODE_VARIABLE = "DAGC_PROGRESS"
INTERVAL_VARIABLE = "DAGC_PROGRESS_INTERVAL"
REFRESH_S = 0.2  # how often the terminal display is redrawn
HEARTBEAT_S = 30.0  # how often a plain line says what still runs
SHOWN_RUNNING = 8  # running tasks listed on a terminal; the rest are counted


def format_elapsed(seconds: float) -> str:
    """`4.2s`, `52s`, `3m05s`, `2h03m`."""
    if seconds < 10:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def _mode(stream: TextIO, enabled: bool | None) -> str:
    if enabled is False:
        return "off"
    asked = os.environ.get(MODE_VARIABLE, "").strip().lower()
    if asked in ("live", "plain", "off"):
        return asked
    isatty = getattr(stream, "isatty", None)
    return "live" if (enabled or (isatty is not None and isatty())) else "plain"


def _interval() -> float:
    try:
        value = float(os.environ.get(INTERVAL_VARIABLE, HEARTBEAT_S))
    except ValueError:
        return HEARTBEAT_S
    return value if value > 0 else HEARTBEAT_S


class Progress:
    """Counts finished tasks out of `total` and follows the running ones (`begin`, `advance`); see the module
    docstring for what is drawn where. Safe to call from several threads."""

    def __init__(self, total: int, *, stream: TextIO | None = None, enabled: bool | None = None,
                 label: str = "tasks") -> None:
        self.total = total
        self.done = 0
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.mode = _mode(self.stream, enabled)
        self.enabled = self.mode != "off"
        self._start = time.monotonic()
        self._running: dict[str, float] = {}  # task -> when it began
        self._elsewhere: dict[str, dict[str, float]] = {}  # another process (a torch rank) -> its running tasks
        self._lock = threading.Lock()
        self._live: Any = None
        self._handlers: list[tuple[logging.StreamHandler, Any]] = []
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None

    # ---- what the run reports ----------------------------------------------------------------------------
    def begin(self, name: str) -> None:
        """Task `name` started running."""
        with self._lock:
            self._running.setdefault(name, time.monotonic())
        self._show()

    def advance(self, n: int = 1, name: str | None = None) -> None:
        """`n` more tasks finished (`name`: the one that did, no longer running)."""
        with self._lock:
            self.done += n
            if name is not None:
                self._running.pop(name, None)
        self._show()

    def reach(self, done: int) -> None:
        """Finished tasks counted elsewhere (the other ranks of a torch run)."""
        with self._lock:
            if done <= self.done:
                return
            self.done = done
        self._show()

    def elsewhere(self, source: str, running: dict[str, float]) -> None:
        """The tasks another process (`source`) runs now, with when each began by the wall clock (`time.time()`):
        shown with this process's own, replacing what `source` said before."""
        offset = time.monotonic() - time.time()
        began = {name: float(when) + offset for name, when in running.items()}
        with self._lock:
            if self._elsewhere.get(source) == began:
                return
            self._elsewhere[source] = began
        self._show()

    # ---- what is drawn -----------------------------------------------------------------------------------
    def _show(self) -> None:
        """Start the display on first use (a run that reuses everything quickly may never need a heartbeat)."""
        if self.mode == "live" and self._live is None:
            self._start_live()
        elif self.mode == "plain" and self._heartbeat is None and (self._running or any(self._elsewhere.values())):
            self._heartbeat = threading.Thread(target=self._beat, name="dagc-progress", daemon=True)
            self._heartbeat.start()

    def snapshot(self) -> tuple[int, int, float, list[tuple[str, float]]]:
        """(done, total, elapsed seconds, [(running task, its elapsed seconds), ...] longest first)."""
        now = time.monotonic()
        with self._lock:
            began = dict(self._running)
            for tasks in self._elsewhere.values():
                began.update(tasks)
            running = sorted(((name, max(0.0, now - when)) for name, when in began.items()),
                             key=lambda item: (-item[1], item[0]))
            done = self.done
        return done, max(self.total, done), now - self._start, running  # (a loop's tasks count once per trip)

    def line(self) -> str:
        """The plain line: what is done and what runs."""
        done, total, elapsed, running = self.snapshot()
        text = f"dagc: {done}/{total} {self.label} done after {format_elapsed(elapsed)}"
        if running:
            text += "; running: " + ", ".join(f"{name} ({format_elapsed(s)})" for name, s in running)
        return text

    def _render(self) -> Any:
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        done, total, elapsed, running = self.snapshot()
        head = Table.grid(padding=(0, 2))
        head.add_row(ProgressBar(total=max(total, 1), completed=done if total else 1, width=30),
                     Text(f"{done}/{total} {self.label}"), Text(format_elapsed(elapsed), style="dim"))
        rows: list[Any] = [head]
        if running:
            tasks = Table.grid(padding=(0, 2))
            for name, seconds in running[:SHOWN_RUNNING]:
                tasks.add_row(Text("  " + name, style="bold"), Text(format_elapsed(seconds), justify="right"))
            rows.append(tasks)
            if len(running) > SHOWN_RUNNING:
                rows.append(Text(f"  and {len(running) - SHOWN_RUNNING} more running", style="dim"))
        return Group(*rows)

    def _start_live(self) -> None:
        from rich.console import Console
        from rich.live import Live

        console = Console(file=self.stream, force_terminal=True)
        # what the tasks print goes through the display: stderr when it is drawn there, stdout only when it is
        # the same terminal (a result piped elsewhere stays where it goes)
        ours = self.stream is sys.stderr or self.stream is sys.stdout
        stdout_tty = bool(getattr(sys.stdout, "isatty", None) and sys.stdout.isatty())
        before = sys.stderr
        self._live = Live(console=console, get_renderable=self._render, refresh_per_second=1 / REFRESH_S,
                          redirect_stdout=ours and stdout_tty, redirect_stderr=ours, transient=False)
        self._live.start()
        self._point_logging(before, sys.stderr)

    def _point_logging(self, old: Any, new: Any) -> None:
        """Stream handlers made before the display (a script's logging.basicConfig) hold the terminal's stream:
        their lines go through the display too, while it is up."""
        if old is new:
            return
        for handler in logging.getLogger().handlers:
            if isinstance(handler, logging.StreamHandler) and getattr(handler, "stream", None) is old:
                self._handlers.append((handler, old))
                handler.stream = new

    def _beat(self) -> None:
        interval = _interval()
        while not self._stop.wait(interval):
            if self.snapshot()[3]:
                self.stream.write(self.line() + "\n")
                self.stream.flush()

    def close(self) -> None:
        """The display's last state stays on a terminal; the heartbeat stops."""
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join(timeout=5)
            self._heartbeat = None
        if self._live is not None:
            for handler, stream in self._handlers:
                handler.stream = stream
            self._handlers.clear()
            with self._lock:
                self._running.clear()
                self._elsewhere.clear()
            live, self._live = self._live, None
            live.stop()
        self.enabled = False
        self.mode = "off"

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
