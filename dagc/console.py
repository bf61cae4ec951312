"""Console output of the command line: verbosity (`-v`, `-q`) and a status line for long work.

Verbosity follows the usual conventions: the default shows warnings and what a command wrote;
`-q` shows errors only; `-v` adds what each step did and how long it took; `-vv` adds debugging
detail. Messages go through the `dagc` logger to stderr, one line each, without decoration.

`status(...)` draws a one-line, self-updating status (`compiling quickstart: pass 3/5 partition
4.2s`) on stderr, only when stderr is a terminal, only at the default verbosity or above, and only
once the work has taken longer than `delay` seconds, so short commands and logs stay clean.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

__all__ = ["setup_logging", "logger", "note", "status", "verbosity", "NOTE"]

logger = logging.getLogger("dagc")
NOTE = 25  # between INFO and WARNING: what a command wrote; hidden by -q
logging.addLevelName(NOTE, "NOTE")
_state = {"verbosity": 0}


def verbosity() -> int:
    """-1 quiet, 0 default, 1 verbose, 2 debug."""
    return _state["verbosity"]


def setup_logging(verbose: int = 0, quiet: int = 0, stream: TextIO | None = None) -> int:
    """Configure the `dagc` logger from the counts of -v and -q; returns the verbosity."""
    level_of = {-1: logging.ERROR, 0: NOTE, 1: logging.INFO, 2: logging.DEBUG}
    value = max(-1, min(2, verbose - quiet))
    _state["verbosity"] = value
    logger.setLevel(level_of[value])
    logger.propagate = False
    for handler in list(logger.handlers):
        if getattr(handler, "_dagc", False):
            logger.removeHandler(handler)
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler._dagc = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    return value


def note(message: str, *args: object) -> None:
    """A line saying what a command did (e.g. which file it wrote); shown unless -q."""
    logger.log(NOTE, message, *args)


@contextmanager
def status(describe: Callable[[], str], *, stream: TextIO | None = None, delay: float = 1.0,
           interval: float = 0.2, enabled: bool | None = None) -> Iterator[None]:
    """Redraw `describe()` (plus the elapsed time) on one line while the block runs; see the module
    docstring for when anything is drawn. The line is erased at the end."""
    out = stream if stream is not None else sys.stderr
    if enabled is None:
        isatty = getattr(out, "isatty", None)
        enabled = bool(isatty and isatty()) and verbosity() >= 0
    if not enabled:
        yield
        return
    done = threading.Event()
    start = time.monotonic()
    drawn = [0]

    def draw() -> None:
        if done.wait(delay):
            return
        while not done.is_set():
            text = f"{describe()}  {time.monotonic() - start:.1f}s"[:150]
            out.write("\r" + text.ljust(drawn[0]))
            out.flush()
            drawn[0] = max(drawn[0], len(text))
            done.wait(interval)

    thread = threading.Thread(target=draw, name="dagc-status", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        if drawn[0]:
            out.write("\r" + " " * drawn[0] + "\r")
            out.flush()
