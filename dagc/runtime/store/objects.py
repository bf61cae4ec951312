"""Content addressing: sealed objects (task outputs) found by a key, in one directory, each at the path the
directory's layout gives its key. A run directory keys its outputs by (task, fingerprint), the cache by the
fingerprint alone; both keep, check, load, discard and adopt them here."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

from dagc.runtime.filetrace import changed, load_trace, save_trace
from dagc.runtime.store.files import atomic_write, remove
from dagc.runtime.store.pickles import Pickled
from dagc.runtime.store.sealed import check_sealed, load_sealed, write_sealed


class SealedObjects:
    """Sealed objects under one directory: `locate(key)` is where the object of `key` is kept, `describe(key)`
    names it in a warning (what made it)."""

    def __init__(self, locate: Callable[[Any], Path], describe: Callable[[Any], str]) -> None:
        self.locate, self.describe = locate, describe
        self._checked: dict[Hashable, bool] = {}

    def has(self, key: Hashable) -> bool:
        return self.locate(key).is_file()

    def save(self, key: Hashable, data: bytes | Pickled) -> int:
        """Keep `data` (a pickle) sealed as the object of `key`; returns the size of the pickle. OSError when it
        cannot be written."""
        write_sealed(self.locate(key), data)
        return data.size if isinstance(data, Pickled) else len(data)

    def load(self, key: Hashable) -> Any:
        """The object of `key`, unpickled once its seal is checked (DamagedOutput otherwise)."""
        return load_sealed(self.locate(key))

    def check(self, key: Hashable) -> str | None:
        """Why the object of `key` may not be loaded (None: it may); see `check_sealed`."""
        return check_sealed(self.locate(key))

    def usable(self, key: Hashable) -> bool:
        """Whether the object of `key` exists and passes its check; one that fails, or that was computed from a
        file that changed since (dagc.runtime.filetrace), is named in a warning and removed, so that its task
        runs again (checked once per process)."""
        path = self.locate(key)
        if key in self._checked:
            return self._checked[key] and path.is_file()
        if not path.is_file():
            return False
        what = self.describe(key)
        problem = self.check(key)
        if problem is not None:
            sys.stderr.write(f"dagc: warning: the stored output of {what} is not used: {path}: {problem}; "
                             "it is computed again\n")
            self._drop(key)
        elif (read := changed(load_trace(path))) is not None:  # a file it read is not as it was
            sys.stderr.write(f"dagc: {what} read {read}, which changed since its output was stored: it runs again\n")
            self._drop(key)
            problem = "stale"
        self._checked[key] = problem is None
        return problem is None

    def discard(self, key: Hashable) -> None:
        """Remove the object of `key` (it failed its check: its task runs again)."""
        remove(self.locate(key))

    def _drop(self, key: Hashable) -> None:
        try:
            self.discard(key)
        except OSError:  # a read-only directory: the object stays, never used by this process (`_checked`)
            pass

    def adopt(self, key: Hashable, source: Path) -> None:
        """Keep the sealed file at `source` (elsewhere: the cache) as the object of `key`, with the files it
        read: a hard link when possible, else a copy. OSError when it cannot be written."""
        target = self.locate(key)
        if target.exists():
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        save_trace(target, load_trace(source))
        try:
            os.link(source, target)
        except OSError:
            atomic_write(target, source.read_bytes())
