"""The run's records: one run directory, what a run (and every `--resume` of it) keeps there.

    RUN_DIR/
      run.json                       {"format": 1, "pipeline": NAME, "created": ISO time}
      .lock                          who holds the directory: {"run", "pid", "host", "since"}; the lock
                                     itself is on the directory (see `lock`): deleting this file keeps it
      events.jsonl                   the event log (see dagc.runtime.events)
      outputs/TASK/FINGERPRINT.pkl   a task's outputs, sealed: the value for one output, a tuple for several
      outputs/TASK/FINGERPRINT.console.json   what the task printed, sealed (dagc.runtime.console)
      state/TASK/NAME/v<N>/          a task's state checkpoint, version N; `.complete` beside the versions
                                     seals the last whole one (dagc.runtime.context, `seal_manifest`)
      attempts/RUN_ID/TASK.N         empty markers, one per attempt of TASK in run RUN_ID
      result.pkl                     the pipeline's return value, sealed, once the run has finished

Nothing in it is unpickled unless it carries this user's seal (dagc.runtime.store.seals); nothing is written
through a symbolic link planted in it. The run directory must be on a file system every worker can reach
(always so for a local engine).
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from dagc.runtime.store.errors import StorageError, unwritable
from dagc.runtime.store.files import atomic_write, open_no_follow, read_json_object
from dagc.runtime.store.objects import SealedObjects
from dagc.runtime.store.pickles import Pickled, dumps
from dagc.runtime.store.sealed import write_sealed
from dagc.runtime.store.seals import store_key

FORMAT = 1
_RESUME_TODO = "give --resume the directory of a dagc run, or start a new run with another --run-dir"


def _safe(name: str) -> str:
    """A task name as one path component (`train[3]` → `train%5B3%5D`)."""
    quoted = quote(name, safe="")
    return quoted if quoted not in (".", "..") else quoted.replace(".", "%2E")


class RunStore:
    """One run directory. `save`, `load` and `has` address a task's outputs by (task, fingerprint).

    `RunStore(path)` creates the directory (and `run.json`) when needed; `RunStore.open(path)`
    requires an existing run directory (for `--resume`). A directory that cannot be written is a StorageError
    naming the path and what to do.
    """

    def __init__(self, root: str | os.PathLike[str], pipeline: str | None = None) -> None:
        self.root = Path(root)
        self.outputs = SealedObjects(lambda key: self.path(*key), lambda key: f"task `{key[0]}`")
        meta = self.root / "run.json"
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            if not meta.exists():
                info = {"format": FORMAT, "pipeline": pipeline, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
                atomic_write(meta, (json.dumps(info, indent=2) + "\n").encode())
        except OSError as exc:
            where = meta if self.root.is_dir() else self.root
            raise StorageError(unwritable(where, exc), exc, self.root) from None
        store_key()  # a key that cannot be used is said now, before any task runs (a StorageError)

    @classmethod
    def open(cls, root: str | os.PathLike[str]) -> RunStore:
        """An existing run directory; `FileNotFoundError`, `ValueError` or `StorageError` saying why it is not
        one this dagc reads."""
        path = Path(root)
        meta = path / "run.json"
        if not meta.is_file():
            raise FileNotFoundError(f"{path} is not a dagc run directory (no run.json)")
        info = read_json_object(meta, "a dagc run record", _RESUME_TODO)
        if info.get("format") != FORMAT:
            raise ValueError(f"{path}: run directory format {info.get('format')!r}, this dagc reads {FORMAT}")
        return cls(path)

    # ---- layout ------------------------------------------------------------------------------
    @property
    def events_path(self) -> Path:
        return self.root / "events.jsonl"

    @property
    def result_path(self) -> Path:
        return self.root / "result.pkl"

    def path(self, task: str, fp: str) -> Path:
        return self.root / "outputs" / _safe(task) / f"{fp}.pkl"

    def info(self) -> dict[str, Any]:
        """What `run.json` records; a StorageError when it is not a run record."""
        return read_json_object(self.root / "run.json", "a dagc run record", _RESUME_TODO)

    # ---- outputs (dagc.runtime.store.objects) ----------------------------------------------------
    def has(self, task: str, fp: str) -> bool:
        return self.outputs.has((task, fp))

    def save(self, task: str, fp: str, value: object) -> int:
        """Persist a task's outputs; returns the size of their pickle."""
        return self.save_bytes(task, fp, dumps(value))

    def save_bytes(self, task: str, fp: str, data: bytes | Pickled) -> int:
        """Persist a task's already pickled outputs (sealed); returns the size of the pickle."""
        try:
            return self.outputs.save((task, fp), data)
        except OSError as exc:
            raise self._unwritable(self.path(task, fp), exc) from exc

    def check(self, task: str, fp: str) -> str | None:
        """Why a stored output may not be reused (None: it may); see `check_sealed`."""
        return self.outputs.check((task, fp))

    def usable(self, task: str, fp: str) -> bool:
        """Whether a stored output exists and passes its check; one that fails is named in a warning and
        removed, so that its task runs again (checked once per process)."""
        return self.outputs.usable((task, fp))

    def discard(self, task: str, fp: str) -> None:
        """Remove a stored output that failed its check (the task runs again)."""
        self.outputs.discard((task, fp))

    def adopt(self, task: str, fp: str, source: Path) -> None:
        """Record a task's outputs from a file elsewhere (the cache): a hard link when possible (with the files
        it read: dagc.runtime.filetrace)."""
        try:
            self.outputs.adopt((task, fp), source)
        except OSError as exc:
            raise self._unwritable(self.path(task, fp), exc) from exc

    def load(self, task: str, fp: str) -> Any:
        return self.outputs.load((task, fp))

    def completed(self) -> dict[str, list[str]]:
        """{task (as stored): [fingerprints]} of every stored output (a killed writer's temporary files are
        not outputs)."""
        out: dict[str, list[str]] = {}
        base = self.root / "outputs"
        if base.is_dir():
            for task_dir in sorted(base.iterdir()):
                fps = sorted(p.stem for p in task_dir.glob("*.pkl") if not p.name.startswith("."))
                if fps:
                    out[task_dir.name] = fps
        return out

    # ---- the pipeline's result -----------------------------------------------------------------
    def save_result(self, value: object) -> int:
        data = dumps(value)
        try:
            write_sealed(self.result_path, data)
        except OSError as exc:
            raise self._unwritable(self.result_path, exc) from exc
        return data.size

    # ---- one run at a time ---------------------------------------------------------------------
    def lock(self, run_id: str) -> str | None:
        """Hold this run directory for run `run_id` until the process ends; None when held, else who holds
        it (two runs on one directory would both run everything and interleave their logs).

        The lock is on the run directory itself (`hold_directory`): deleting `.lock` does not release it.
        `.lock` only records who holds it, for the message another run gets."""
        import socket

        path = self.root / ".lock"
        held = hold_directory(self.root)
        if held is None:
            return f"{self.root} is in use by {_holder(path)}; wait for it to end, or give another --run-dir"
        try:  # never through a link planted in a shared run directory: the holder's line would truncate its target
            fd = open_no_follow(path, os.O_RDWR | os.O_CREAT)
        except StorageError:
            os.close(held)
            raise
        except OSError as exc:
            os.close(held)
            raise StorageError(unwritable(path, exc), exc, path) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # (what a dagc that locked only this file checks)
        except OSError:  # held by a live process of an older dagc
            os.close(fd)
            os.close(held)
            return f"{self.root} is in use by {_holder(path)}; wait for it to end, or give another --run-dir"
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"run": run_id, "pid": os.getpid(), "host": socket.gethostname(),
                                  "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}).encode("utf-8"), 0)
        self._lock_fd, self._directory_fd = fd, held  # kept open: the lock lasts as long as this process
        return None

    # ---- attempts ------------------------------------------------------------------------------
    def attempts_made(self, run_id: str, task: str) -> int:
        """How many attempts of `task` run `run_id` has recorded so far (`next_attempt`)."""
        directory = self.root / "attempts" / _safe(run_id)
        attempt = 0
        while (directory / f"{_safe(task)}.{attempt + 1}").exists():
            attempt += 1
        return attempt

    def next_attempt(self, run_id: str, task: str) -> int:
        """Record one more attempt of `task` in run `run_id`; returns its number (1 for the first).

        Safe against concurrent callers: each attempt claims its own marker file."""
        directory = self.root / "attempts" / _safe(run_id)
        attempt = 1
        try:
            directory.mkdir(parents=True, exist_ok=True)
            while True:
                try:
                    fd = os.open(directory / f"{_safe(task)}.{attempt}", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                except FileExistsError:
                    attempt += 1
                    continue
                os.close(fd)
                return attempt
        except OSError as exc:
            raise self._unwritable(directory / f"{_safe(task)}.{attempt}", exc) from exc

    def _unwritable(self, path: Path, exc: OSError) -> StorageError:
        if isinstance(exc, StorageError):  # (already one line naming its path: the store key's, say)
            return exc
        return StorageError(unwritable(path, exc, self.root), exc, path)

    def __repr__(self) -> str:
        return f"RunStore({str(self.root)!r})"


def hold_directory(root: Path) -> int | None:
    """Lock the run directory `root` itself for this process (an exclusive `flock` on its own descriptor,
    released only when the process ends or the descriptor is closed); the descriptor, or None when a live
    process holds it. A file system without locks on directories holds nothing back (None is never said
    there: the `.lock` file's own lock still keeps two runs apart)."""
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise StorageError(f"cannot open the run directory {root}: {exc.strerror or exc}; give a run directory "
                           "this user may enter", exc, root) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except OSError:  # (no locks on directories here)
        pass
    return fd


def directory_held(root: Path) -> bool:
    """Whether a live process holds the run directory `root` (`RunStore.lock`), by either of its locks: the
    directory's own, or that of its `.lock` file (held by a dagc that locked only that file). An unreadable
    lock, or one planted as a link, counts as held: never treated as free to remove."""
    try:
        fd = hold_directory(root)
    except StorageError:
        return True
    if fd is None:
        return True
    os.close(fd)
    return lock_file_held(root)


def lock_file_held(root: Path) -> bool:
    """Whether a live process holds the lock of `root`'s `.lock` file (a dagc that locked only that file); an
    unreadable one, or a link, counts as held."""
    lock = root / ".lock"
    try:
        lock_fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(lock_fd)
    return False


def _holder(path: Path) -> str:
    """Who holds the run directory, from its `.lock` record ("run ? (pid ? ...)" for what cannot be read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            holder = json.loads(os.pread(fd, 4096, 0).decode("utf-8") or "{}")
        finally:
            os.close(fd)
    except (OSError, ValueError):
        holder = {}
    if not isinstance(holder, dict):
        holder = {}
    return (f"run {holder.get('run', '?')} (pid {holder.get('pid', '?')} on {holder.get('host', '?')}, "
            f"since {holder.get('since', '?')})")
