"""A task's console output, recorded while it runs and replayed when its stored output is reused.

Printing and logging are output channels, not state (docs/ir.md, "Effects and state"): a task that
prints stays cacheable. So that a task taken from the run directory or the cache still shows what it
printed, the executor records what it wrote to `sys.stdout` and `sys.stderr` (and what the root
logger's stream handlers wrote there) next to its stored output, and writes it out again, under a line
saying it is replayed, when the output is reused.

    with Recording() as rec:
        value = fn()
    save(rec.chunks)            # [(stream, text), ...]
    replay(chunks, "train", "the cache")
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any, TextIO

__all__ = ["Recording", "replay", "save_console", "load_console", "console_path"]

# a task printing more than this keeps only the start (the rest is on the console of the run that ran it)
LIMIT = 1 << 20


class _Tee:
    """Writes through to `stream` and keeps a copy."""

    def __init__(self, stream: TextIO, name: str, chunks: list[tuple[str, str]], size: list[int]) -> None:
        self._stream, self._name, self._chunks, self._size = stream, name, chunks, size

    def write(self, text: str) -> int:
        if text and self._size[0] < LIMIT:
            self._chunks.append((self._name, text))
            self._size[0] += len(text)
        return self._stream.write(text)

    def flush(self) -> None:
        self._stream.flush()

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, ...
        return getattr(self._stream, name)


class Recording:
    """Record the console output of the code run inside the `with` block (this thread's streams)."""

    def __init__(self) -> None:
        self.chunks: list[tuple[str, str]] = []
        self._size = [0]
        self._saved: list[tuple[Any, TextIO]] = []

    def __enter__(self) -> Recording:
        self._out, self._err = sys.stdout, sys.stderr
        tee_out = _Tee(self._out, "stdout", self.chunks, self._size)
        tee_err = _Tee(self._err, "stderr", self.chunks, self._size)
        sys.stdout, sys.stderr = tee_out, tee_err  # type: ignore[assignment]
        # logging's stream handlers hold the stream they were made with: point them at the tees too
        for handler in logging.getLogger().handlers:
            stream = getattr(handler, "stream", None)
            if isinstance(handler, logging.StreamHandler) and stream in (self._out, self._err):
                self._saved.append((handler, stream))
                handler.stream = tee_out if stream is self._out else tee_err
        return self

    def __exit__(self, *exc: object) -> None:
        sys.stdout, sys.stderr = self._out, self._err
        for handler, stream in self._saved:
            handler.stream = stream


def console_path(output: Path) -> Path:
    """Where the console output of the stored output at `output` (`….pkl`) is kept."""
    return output.with_suffix(".console.json")


def save_console(output: Path, chunks: list[tuple[str, str]]) -> None:
    """Keep what a task printed beside its output, sealed with the store key (it is written to the terminal
    again when the output is reused: from anyone else, its escape sequences could drive the terminal)."""
    if not chunks:
        return
    from dagc.runtime.store import atomic_write, seal_manifest

    atomic_write(console_path(output), json.dumps(seal_manifest({"chunks": chunks})).encode("utf-8"))


def load_console(output: Path) -> list[tuple[str, str]]:
    """What the task that stored `output` printed; nothing when the record is missing, of the wrong shape, or
    does not carry this user's seal."""
    from dagc.runtime.store import is_sealed

    try:
        data = json.loads(console_path(output).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not (isinstance(data, dict) and isinstance(data.get("chunks"), list) and is_sealed(data)):
        return []
    return [(s, t) for s, t in (c for c in data["chunks"] if isinstance(c, list) and len(c) == 2)
            if s in ("stdout", "stderr") and isinstance(t, str)]


def replay(chunks: list[tuple[str, str]], task: str, source: str) -> None:
    """Write a reused task's recorded output again, under a line that says so."""
    if not chunks:
        return
    sys.stderr.write(f"dagc: task `{task}` reused from {source}; its output, replayed:\n")
    sys.stderr.flush()
    for stream, text in chunks:
        target = sys.stdout if stream == "stdout" else sys.stderr
        target.write(text)
        target.flush()
