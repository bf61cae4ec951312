"""Event logging for programs that call task functions directly (the local backend's `--run-dir`).

`Recorder(run_dir, pipeline, calls)` wraps each task function of the loaded modules so that every
call writes `start` and `end` (or `failure`) events to `RUN_DIR/events.jsonl`. `calls` lists the
program's task calls in the order it makes them, as `(target, task name)` pairs; the k-th call of
a target is the k-th task with that target. Calls a task function makes to another task function
are part of the caller and are not counted. The output size recorded (`bytes`) is the length of the
pickled result (None when it cannot be pickled). Used as a context manager it writes `run_start`,
then `run_end` or `run_failed`, and restores the modules' functions on exit.
"""

from __future__ import annotations

import functools
import pickle
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from dagc.runtime.events import EventLog
from dagc.runtime.progress import Progress
from dagc.runtime.store import RunStore

__all__ = ["Recorder"]


class Recorder:
    def __init__(self, run_dir: str | Path, pipeline: str, calls: Sequence[tuple[str, str]]) -> None:
        self.store = RunStore(run_dir, pipeline=pipeline)
        self.events = EventLog(self.store.events_path)
        self.pipeline = pipeline
        self.calls = list(calls)
        self._queues: dict[str, list[str]] = {}
        for target, name in self.calls:
            self._queues.setdefault(target, []).append(name)
        self._depth = 0
        self._saved: list[tuple[object, str, Callable[..., Any]]] = []
        self._start = 0.0
        self.progress = Progress(len(self.calls))

    def instrument(self, modules: dict[str, object]) -> dict[str, object]:
        for target in self._queues:
            module_name, _, function = target.partition(":")
            owner: object = modules.get(module_name)
            *path, name = function.split(".")
            for part in path:  # a task that is a static or class method: `Flow.start`
                owner = getattr(owner, part, None)
            original = getattr(owner, name, None) if owner is not None else None
            if original is None:
                continue
            if path:  # keep the class's own attribute (a staticmethod/classmethod object) to restore it
                raw = vars(owner).get(name, original)
                self._saved.append((owner, name, raw))
                setattr(owner, name, staticmethod(self._wrap(target, original)))
                continue
            self._saved.append((owner, name, original))
            setattr(owner, name, self._wrap(target, original))
        return modules

    def _wrap(self, target: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        queue = self._queues[target]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if self._depth or not queue:
                return fn(*args, **kwargs)
            name = queue.pop(0)
            self.events.start(name)
            self._depth += 1
            begin = time.perf_counter()
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:
                self.events.failure(name, time.perf_counter() - begin, exc, traceback.format_exc())
                raise
            finally:
                self._depth -= 1
            duration = time.perf_counter() - begin
            try:
                nbytes: int | None = len(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
            except Exception:  # noqa: BLE001 - an unpicklable result has no size to report
                nbytes = None
            self.events.end(name, duration, nbytes)
            self.progress.advance(name=name)
            return result

        return wrapper

    def finish(self, result: object) -> object:
        try:
            nbytes = self.store.save_result(result)
        except Exception:  # noqa: BLE001
            nbytes = None
        self.events.write("run_end", duration=round(time.perf_counter() - self._start, 6), bytes=nbytes)
        return result

    def __enter__(self) -> Recorder:
        self._start = time.perf_counter()
        self.events.write("run_start", pipeline=self.pipeline, tasks=len(self.calls), resume=False,
                          run_dir=str(self.store.root))
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.progress.close()
        for module, function, original in self._saved:
            setattr(module, function, original)
        if exc is not None:
            self.events.write("run_failed", error=f"{type(exc).__name__}: {exc}")
