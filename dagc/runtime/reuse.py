"""Whether a task's output stored earlier may be reused, and loading it: the one path every program takes
(the local program's executor, the Ray driver, each torch rank).

An output is reused from the run directory (`--resume`, or a torch run's own directory after a restart)
or from the `--cache` directory, both addressed by the task's fingerprint. A task of a state group (it
shares objects with other tasks) is reused only when every task of its group is; a group stored as it is
at its end (`final_state`) is read as one pickle, once, so that the objects its tasks share stay shared.
A cached output is adopted into the run directory, so that a resumed run finds it there.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from dagc.runtime.console import load_console, save_console
from dagc.runtime.store import Cache, RunStore

__all__ = ["StoredOutputs", "NEVER_REUSED", "FINAL", "Console"]

# the start of a cache column's reason when a task's stored outputs may not be reused at all, from the run
# directory either (backends/fingerprint.py: a piece of state the pipeline returns)
NEVER_REUSED = "never reused: "
# what the fingerprint of an output stored at its state group's end ends with (`final_state`): only a program
# that stores its group that way reuses it
FINAL = "-final"

Console = list[tuple[str, str]]  # what a task printed: (stream, text) chunks


class StoredOutputs:
    """The stored outputs a run may reuse (see the module docstring).

    specs     task -> its TaskSpec (dagc.runtime.executor), by which reuse is decided
    store     the run directory (None: none)
    cache     the shared cache (None: none)
    resume    outputs in the run directory are reused (`--resume`)
    final_state  state groups stored together as they are at their end
    """

    def __init__(self, specs: Mapping[str, Any], store: RunStore | None = None, cache: Cache | None = None,
                 resume: bool = False, final_state: Iterable[int] = ()) -> None:
        self.specs = dict(specs)
        self.store, self.cache, self.resume = store, cache, resume
        self.final_state = frozenset(final_state)
        self.groups: dict[int, list[Any]] = {}  # state group -> the specs of its tasks
        for spec in self.specs.values():
            if spec.state is not None:
                self.groups.setdefault(spec.state, []).append(spec)
        self.loaded_groups: dict[int, dict[str, tuple[Any, Console]]] = {}

    # ---- deciding ---------------------------------------------------------------------------------------
    def source(self, spec: Any) -> str | None:
        """Where a finished output of `spec` can be had: "run", "cache" or None."""
        if spec.fingerprint is None or (self.cache is None and not (self.resume and self.store is not None)):
            return None
        members = self.groups.get(spec.state, [spec]) if spec.state is not None else [spec]
        if any(m.uncached and m.uncached.startswith(NEVER_REUSED) for m in members):
            return None
        if spec.state is not None and spec.state in self.final_state:
            return self._final_source(spec.state)
        # (every member checked: a damaged or planted file is reported, removed and computed again)
        if self.resume and self.store is not None and all(
                [m.fingerprint and self.store.usable(m.name, m.fingerprint) for m in members]):
            return "run"
        if self.cache is not None and all([m.cache and m.fingerprint and self.cache.usable(m.fingerprint)
                                           for m in members]):
            return "cache"
        return None

    def group_key(self, group: int) -> tuple[str, str] | None:
        """Where a `final_state` group's outputs are stored together: its first task's name (by name) and a
        fingerprint of every task of the group (a change to any of them is a new key), ending in FINAL."""
        members = sorted(self.groups[group], key=lambda m: m.name)  # (every backend lists them in its own order)
        if any(m.fingerprint is None for m in members):
            return None
        digest = hashlib.sha256(repr([(m.name, m.fingerprint) for m in members]).encode("utf-8")).hexdigest()
        return members[0].name, digest[:32] + FINAL

    def _final_source(self, group: int) -> str | None:
        key = self.group_key(group)
        if key is None:
            return None
        name, fp = key
        if self.resume and self.store is not None and self.store.usable(name, fp):
            return "run"
        if self.cache is not None and all(m.cache for m in self.groups[group]) and self.cache.usable(fp):
            return "cache"
        return None

    def final(self, spec: Any) -> bool:
        return spec.state is not None and spec.state in self.final_state

    # ---- loading ----------------------------------------------------------------------------------------
    def output(self, spec: Any, source: str) -> tuple[Any, Console]:
        """The stored output of a finished task and what it printed; one found in the cache is also taken
        into the run directory."""
        if self.final(spec):
            return self.group_outputs(spec.state, source)[spec.name]
        assert spec.fingerprint is not None
        return self._read(spec.name, spec.fingerprint, source)

    def console(self, spec: Any, source: str) -> Console:
        """What a reused task printed, without loading its output where it need not be (a cached one is taken
        into the run directory)."""
        if self.final(spec):
            return self.group_outputs(spec.state, source)[spec.name][1]
        assert spec.fingerprint is not None
        if source == "cache":
            return self.adopt(spec.name, spec.fingerprint)
        assert self.store is not None
        return load_console(self.store.path(spec.name, spec.fingerprint))

    def in_run(self, name: str, fp: str) -> bool:
        """Whether the run directory holds a sound output of `name` under `fp` (an item of a Ray map region,
        stored one by one, is reused by this alone)."""
        return self.store is not None and self.store.usable(name, fp)

    def value(self, name: str, fp: str) -> Any:
        """The output of task `name` stored in the run directory under `fp`, once it was decided reused (and
        one from the cache taken there): what a Ray worker that reads it loads, where it runs."""
        assert self.store is not None
        return self.store.load(name, fp)

    def held_here(self, spec: Any) -> str:
        """Where the output of a task decided reused is now: "run" once taken into the run directory."""
        if self.final(spec):
            key = self.group_key(spec.state)
            return "run" if key is not None and self.store is not None and self.store.has(*key) else "cache"
        return "run" if self.store is not None and self.store.has(spec.name, spec.fingerprint) else "cache"

    def _read(self, name: str, fp: str, source: str) -> tuple[Any, Console]:
        if source == "run":
            assert self.store is not None
            return self.store.load(name, fp), load_console(self.store.path(name, fp))
        assert self.cache is not None
        return self.cache.load(fp), self.adopt(name, fp)

    def adopt(self, name: str, fp: str) -> Console:
        """Take output `fp` of task `name` from the cache into the run directory (a hard link where it can),
        with what the task printed, so that a resumed run finds it there; returns what it printed."""
        assert self.cache is not None
        chunks = load_console(self.cache.path(fp))
        if self.store is not None:
            self.store.adopt(name, fp, self.cache.path(fp))
            save_console(self.store.path(name, fp), chunks)
        return chunks

    def take(self, spec: Any, source: str) -> None:
        """Take a reused output from the cache into the run directory without loading it (a torch rank other
        than its owner then finds it there)."""
        if source != "cache":
            return
        key = self.group_key(spec.state) if self.final(spec) else (spec.name, spec.fingerprint)
        if key is not None and key[1] is not None:
            self.adopt(*key)

    def group_outputs(self, group: int, source: str) -> dict[str, tuple[Any, Console]]:
        """{task: (its output, what it printed)} of a `final_state` group, stored together (loaded once,
        so that the objects its tasks share stay shared)."""
        outputs = self.loaded_groups.get(group)
        if outputs is None:
            key = self.group_key(group)
            assert key is not None
            outputs = self.loaded_groups[group] = self._read(*key, source)[0]
        return outputs
