"""Bytes on disk: atomic writes and opens that never follow a link.

A file is written to a temporary file beside it (`.NAME.XXXXXXXX.tmp`, mode 0600), then moved over it
(`os.replace`), so that readers see the old file or the whole new one and a process killed mid-write leaves
at most its temporary file. Readers never look at temporary files. A writer holds a lock on its temporary file
while it writes; the next write of the same entry removes the temporary files no live writer holds (those of
a killed writer), so they do not pile up.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from dagc.runtime.store.errors import StorageError

_TMP = ".tmp"
_RANDOM = 8  # the letters mkstemp puts in a temporary name


def atomic_write(path: Path, data: bytes | memoryview | list[bytes | memoryview]) -> int:
    """Write `data` (or its parts, one after the other) to `path` so that readers see the old file, or
    the whole new one; only the owner may read it (mkstemp's mode 0600). Returns the bytes written."""
    parts = data if isinstance(data, list) else [data]

    def write(f: BinaryIO) -> None:
        for part in parts:
            f.write(part)

    atomically(path, write)
    return sum(len(p) for p in parts)


def atomically(path: Path, write: Callable[[BinaryIO], Any]) -> None:
    """Run `write(file)` on a new temporary file beside `path` (mode 0600), then move it to `path`; then remove
    the temporary files of `path` that a killed writer left."""
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=_TMP, dir=path.parent)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # live: never taken for a killed writer's (`_remove_orphans`)
        except OSError:  # a file system without locks: nothing is removed as an orphan there either
            break
        if os.fstat(fd).st_nlink:
            break
        os.close(fd)  # removed as an orphan before it was locked: a fresh one
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.replace(tmp, path)  # (before the lock is released with the file)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _remove_orphans(path)


def _remove_orphans(path: Path) -> None:
    """Remove this user's temporary files of `path` that no writer holds (its writer was killed)."""
    prefix = f".{path.name}."
    try:
        entries = [e for e in os.scandir(path.parent) if _is_temporary_of(e.name, prefix)]
    except OSError:
        return
    for entry in entries:
        try:
            fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:  # gone already, or a link planted in a shared directory: left alone
            continue
        try:
            if os.fstat(fd).st_uid != os.geteuid():
                continue
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.unlink(entry.path)  # (under the lock: its writer, if it had just made it, makes another)
        except OSError:  # held by a live writer
            pass
        finally:
            os.close(fd)


def remove_orphaned_temporaries(directory: Path, names: list[str]) -> int:
    """Remove, among `names` in `directory`, the temporary files (`.NAME.XXXXXXXX.tmp`) of this user that no
    writer holds (`dagc gc`); bytes freed."""
    freed = 0
    for name in names:
        if not (name.startswith(".") and name.endswith(_TMP)) or "." not in name[1:-len(_TMP)]:
            continue
        entry = name[1:-len(_TMP)].rpartition(".")[0]
        if not entry or not _is_temporary_of(name, f".{entry}."):
            continue
        path = directory / name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            info = os.fstat(fd)
            if info.st_uid != os.geteuid():
                continue
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.unlink(path)
            freed += info.st_size
        except OSError:  # held by a live writer, or not ours to remove
            pass
        finally:
            os.close(fd)
    return freed


def _is_temporary_of(name: str, prefix: str) -> bool:
    """Whether `name` is a temporary file `atomically` made for the entry whose temporaries start with `prefix`
    (mkstemp's eight random letters, digits or underscores between them: not another entry's, `NAME.x`)."""
    middle = name[len(prefix):-len(_TMP)]
    return (name.startswith(prefix) and name.endswith(_TMP) and len(middle) == _RANDOM
            and all(c.isalnum() or c == "_" for c in middle))


def open_no_follow(path: Path, flags: int, mode: int = 0o600) -> int:
    """`os.open(path, flags | O_NOFOLLOW, mode)`; a StorageError naming the path when it is a symbolic link
    (a run directory shared with other users may hold links they planted: dagc never writes through one)."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW, mode)
    except OSError as exc:
        if path.is_symlink():
            raise StorageError(f"{path} is a symbolic link, which dagc never writes through; remove it "
                               "(a run directory holds no links)") from None
        raise exc


def remove(path: Path) -> None:
    """Remove the file at `path`, if there is one."""
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def read_json_object(path: Path, what: str, todo: str) -> dict[str, Any]:
    """The JSON object in the file at `path`; a StorageError saying what it is instead (`what`: what the file
    should be; `todo`: what to do about it), never a traceback for a file of the wrong shape."""
    try:
        data = json.loads(path.read_bytes())
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc.strerror or exc}; {todo}", exc, path) from None
    except ValueError:
        data = ...
    if not isinstance(data, dict):
        found = "not JSON" if data is ... else f"JSON {type(data).__name__}, not an object"
        raise StorageError(f"{path} is not {what} ({found}); {todo}")
    return data
