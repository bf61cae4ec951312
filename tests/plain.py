"""The plain run of a pipeline (its function called as ordinary Python, in a fresh interpreter), the result
every backend is compared with, computed once per test session.

Many modules compare a backend with the plain run of the same sample or port, and each pytest-xdist worker
imports them on its own: without a shared cache, each worker ran the same plain runs again. Results are
kept in a directory all workers of the session share (`CACHE`, set by tests/conftest.py), keyed by the
script's path, the source of every module in its folder and below, the pipeline, its parameters and the
environment; a lock file makes a second worker wait for the first one's run instead of repeating it.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import pickle
import shutil
from pathlib import Path

from tests.interpreters import run_python

__all__ = ["plain_result", "CACHE"]

CACHE: list[Path] = []  # the session's cache directory (empty: results are not kept)


def _key(script: Path, pipeline: str, params: dict[str, object]) -> str:
    # the environment the run gets, but for what pytest sets per worker (a test that changes it runs anew)
    env = sorted((k, v) for k, v in os.environ.items() if not k.startswith("PYTEST_"))
    digest = hashlib.sha256(repr((str(script.resolve()), pipeline, sorted(params.items(), key=repr), env)).encode())
    for module in sorted(script.parent.rglob("*.py")):  # the script and what it may import from beside it
        digest.update(str(module.relative_to(script.parent)).encode() + b"\0" + module.read_bytes())
    return digest.hexdigest()[:32]


def _run(script: Path, pipeline: str, out: Path, params: dict[str, object]) -> None:
    code = (
        "import pickle, runpy, sys\n"
        f"sys.path.insert(0, {str(script.parent)!r})\n"
        f"ns = runpy.run_path({str(script)!r}, run_name='plain')\n"
        # a pipeline method `Flow.run` runs as Python would run it: `Flow().run(...)`
        f"owner, _, method = {pipeline!r}.rpartition('.')\n"
        "fn = getattr(ns[owner](), method) if owner else ns[method]\n"
        f"pickle.dump(fn(**{params!r}), open({str(out)!r}, 'wb'))\n"
    )
    run_python(["-c", code], check=True, timeout=300)


def plain_result(script: Path, pipeline: str, tmp: Path, **params: object) -> object:
    """The pipeline's result as plain Python computes it (`tmp`: where a run that is not cached writes)."""
    if not CACHE:
        _run(script, pipeline, tmp / "plain.pkl", params)
        return pickle.loads((tmp / "plain.pkl").read_bytes())
    stored = CACHE[0] / f"{_key(script, pipeline, params)}.pkl"
    with open(stored.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker running the same plain run: wait for its result
        if not stored.exists():
            _run(script, pipeline, tmp / "plain.pkl", params)
            shutil.move(tmp / "plain.pkl", stored)
    return pickle.loads(stored.read_bytes())
