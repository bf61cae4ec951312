"""Scratch directories outside pytest's own (which only their owner may enter), for tests that run a process as
another user."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def outside_base(prefix: str) -> Iterator[Path]:
    """A new directory that an unprivileged user may enter, removed afterwards whatever modes tests left in it."""
    base = Path(tempfile.mkdtemp(prefix=prefix))
    base.chmod(0o755)
    try:
        yield base
    finally:
        for path in [base, *base.rglob("*")]:
            if path.is_dir() and not path.is_symlink():
                path.chmod(0o755)
        shutil.rmtree(base)
