"""A framework's own run of ported pipelines (Prefect calling its flows, Airflow's `dag.test()`), done once per test
session: every pytest-xdist worker that needs it waits for the first one's result instead of starting the
framework's server again (the same shared cache as tests/plain.py, keyed by the code the run reads)."""

from __future__ import annotations

import fcntl
import hashlib
import os
import pickle
import subprocess
import sys
from pathlib import Path

from tests.plain import CACHE

__all__ = ["framework_run"]


def framework_run(name: str, code: str, scripts: list[Path], env: dict[str, str], tmp: Path) -> dict[str, object]:
    """What `code` (a Python program run in `tmp` with `env`, in a fresh interpreter) pickles to `out.pkl` in its
    working directory; `scripts`: the files it runs, whose text is part of the key."""
    digest = hashlib.sha256(f"{name}\0{code}\0{sorted(env)}".encode())  # (its values: temporary paths)
    for script in scripts:
        digest.update(script.read_bytes())
    if not CACHE:
        return _run(code, env, tmp)
    stored = CACHE[0] / f"{name}-{digest.hexdigest()[:24]}.pkl"
    with open(stored.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not stored.exists():
            stored.write_bytes(pickle.dumps(_run(code, env, tmp)))
    return pickle.loads(stored.read_bytes())  # type: ignore[no-any-return]


def _run(code: str, env: dict[str, str], tmp: Path) -> dict[str, object]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "AIRFLOW_", "AIRFLOW__"))}
    full.update(env)
    proc = subprocess.run([sys.executable, "-c", code], env=full, cwd=tmp, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return pickle.loads((tmp / "out.pkl").read_bytes())  # type: ignore[no-any-return]
