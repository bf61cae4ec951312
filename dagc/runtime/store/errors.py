"""What the store raises: a stored file that fails its check (`DamagedOutput`), and a directory that cannot
be written or is not a run directory this dagc reads (`StorageError`), each with one line naming the path and
what to do."""

from __future__ import annotations

import errno
import os
from pathlib import Path


class DamagedOutput(Exception):
    """A stored file failed its check; the message names the file and why."""


class StorageError(OSError):
    """The run directory cannot be written (full disk, read-only file system, permissions), or holds what this
    dagc cannot read; the message is one line naming the path and what to do. The run ends; `--resume` finishes
    it once the directory is writable.

    An OSError, so that a caller that handles the file system's own errors handles this one too; `errno`,
    `strerror` and `filename` are those of the failure underneath, when there was one."""

    def __init__(self, message: str, cause: OSError | None = None, path: str | os.PathLike[str] | None = None):
        if cause is not None:
            super().__init__(cause.errno, cause.strerror or str(cause), os.fspath(path or cause.filename or ""))
        else:
            super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple:  # (crosses processes: a Ray task's error) OSError's would lose the message
        return _rebuild, (type(self), self.message, self.errno, self.strerror, self.filename)


def _rebuild(kind: type[StorageError], message: str, number: int | None, why: str | None,
             filename: str | None) -> StorageError:
    cause = OSError(number, why, filename) if number is not None else None
    return kind(message, cause)


def unwritable(path: Path, exc: OSError, run_dir: Path | None = None) -> str:
    """One line: which file could not be written, why, and what to do (a StorageError's own line, which
    already says so)."""
    if isinstance(exc, StorageError):
        return str(exc)
    why = exc.strerror or str(exc)
    todo = {errno.ENOSPC: "free some space", errno.EDQUOT: "free some space (the disk quota is reached)",
            errno.EROFS: "the file system is read-only: give a writable directory",
            errno.EACCES: "fix the directory's permissions", errno.EPERM: "fix the directory's permissions",
            }.get(exc.errno or 0, "fix the directory")
    resume = f", then finish the run with --resume {run_dir}" if run_dir is not None else ""
    return f"cannot write {path}: {why}; {todo}{resume}"

