"""The cache: task outputs shared by runs and pipelines, by fingerprint alone (`ROOT/ab/abcd….pkl`; the
fingerprint covers the task's code, inputs and options). Its objects are sealed and written atomically
(dagc.runtime.store.objects), so concurrent runs may share one cache. A cache only saves time: one that
cannot be written is said once, in one line naming the path and what to do, and the run goes on without
adding to it."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from dagc.runtime.store.errors import unwritable
from dagc.runtime.store.objects import SealedObjects
from dagc.runtime.store.pickles import Pickled


class Cache:
    """A content-addressed cache of task outputs: `save_bytes`, `load` and `has` address them by fingerprint."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.objects = SealedObjects(self.path, lambda fp: "a task")
        self._broken = False
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self._stop_adding(self.root, exc)

    def path(self, fp: str) -> Path:
        return self.root / fp[:2] / f"{fp}.pkl"

    def has(self, fp: str) -> bool:
        return self.objects.has(fp)

    def load(self, fp: str) -> Any:
        return self.objects.load(fp)

    def check(self, fp: str) -> str | None:
        return self.objects.check(fp)

    def usable(self, fp: str) -> bool:
        return self.objects.usable(fp)

    def discard(self, fp: str) -> None:
        self.objects.discard(fp)

    def save_bytes(self, fp: str, data: bytes | Pickled) -> int:
        """Add an output to the cache; a cache that cannot be written is said once and then left alone
        (it only saves time: the run goes on)."""
        size = data.size if isinstance(data, Pickled) else len(data)
        if self._broken or self.has(fp):
            return size
        try:
            self.objects.save(fp, data)
        except OSError as exc:
            self._stop_adding(self.path(fp), exc)
        return size

    def _stop_adding(self, path: Path, exc: OSError) -> None:
        self._broken = True
        sys.stderr.write(f"dagc: warning: {unwritable(path, exc)}; outputs are no longer added to the cache "
                         f"{self.root}\n")

    def __repr__(self) -> str:
        return f"Cache({str(self.root)!r})"
