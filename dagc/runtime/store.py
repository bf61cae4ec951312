"""The run directory: task outputs persisted by task name and input fingerprint.

    RUN_DIR/
      run.json                       {"format": 1, "pipeline": NAME, "created": ISO time}
      events.jsonl                   the event log (see dagc.runtime.events)
      outputs/TASK/FINGERPRINT.pkl   a task's outputs, pickled: the value for one output,
                                     a tuple for several
      attempts/RUN_ID/TASK.N         empty markers, one per attempt of TASK in run RUN_ID
      result.pkl                     the pipeline's return value, once the run has finished

Every file is written atomically (a temporary file in the same directory, then `os.replace`), so a
process killed mid-write leaves either the whole file or none. A task's *fingerprint* is computed
before it runs, from what determines its output: its target, its constant arguments and the
fingerprints of the values it reads. Equal fingerprints mean "the same computation", so a resumed
run reuses every output whose file exists and recomputes the rest. The run directory must be on a
file system every worker can reach (always so for a local engine).

This module imports nothing from the compiler; emitted programs import it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import quote

__all__ = ["FORMAT", "RunStore", "Cache", "fingerprint", "value_fingerprint", "output_fingerprint", "atomic_write"]

FORMAT = 1
_FP_TAG = "dagc-fingerprint-1"


def fingerprint(target: str, constants: object = None, inputs: Iterable[str] = ()) -> str:
    """Fingerprint of a task: a hash of its target (`module:function`), its constant arguments
    (any value with a deterministic `repr`: IR literals, or the JSON text of its operands) and the
    fingerprints of the values it reads, in order. 32 hex digits."""
    text = repr((_FP_TAG, target, constants, tuple(inputs)))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def value_fingerprint(name: str, value: object) -> str:
    """Fingerprint of a pipeline parameter `name` bound to the literal `value`."""
    return fingerprint(f"param:{name}", value)


def output_fingerprint(task_fingerprint: str, index: int = 0) -> str:
    """Fingerprint of a task's `index`-th output, as its consumers see it."""
    return f"{task_fingerprint}:{index}"


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see the old file, or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _safe(name: str) -> str:
    """A task name as one path component (`train[3]` → `train%5B3%5D`)."""
    quoted = quote(name, safe="")
    return quoted if quoted not in (".", "..") else quoted.replace(".", "%2E")


class RunStore:
    """One run directory. `save`, `load` and `has` address a task's outputs by (task, fingerprint).

    `RunStore(path)` creates the directory (and `run.json`) when needed; `RunStore.open(path)`
    requires an existing run directory (for `--resume`).
    """

    def __init__(self, root: str | os.PathLike[str], pipeline: str | None = None) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        meta = self.root / "run.json"
        if not meta.exists():
            info = {"format": FORMAT, "pipeline": pipeline,
                    "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
            atomic_write(meta, (json.dumps(info, indent=2) + "\n").encode())

    @classmethod
    def open(cls, root: str | os.PathLike[str]) -> RunStore:
        """An existing run directory; `FileNotFoundError` or `ValueError` saying why it is not one."""
        path = Path(root)
        meta = path / "run.json"
        if not meta.is_file():
            raise FileNotFoundError(f"{path} is not a dagc run directory (no run.json)")
        info = json.loads(meta.read_text(encoding="utf-8"))
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
        return json.loads((self.root / "run.json").read_text(encoding="utf-8"))

    # ---- outputs -----------------------------------------------------------------------------
    def has(self, task: str, fp: str) -> bool:
        return self.path(task, fp).is_file()

    def save(self, task: str, fp: str, value: object) -> int:
        """Persist a task's outputs; returns the number of bytes written."""
        buffer = io.BytesIO()
        pickle.dump(value, buffer, protocol=pickle.HIGHEST_PROTOCOL)
        return self.save_bytes(task, fp, buffer.getvalue())

    def save_bytes(self, task: str, fp: str, data: bytes) -> int:
        """Persist a task's already pickled outputs."""
        atomic_write(self.path(task, fp), data)
        return len(data)

    def adopt(self, task: str, fp: str, source: Path) -> None:
        """Record a task's outputs from a file elsewhere (the cache): a hard link when possible."""
        target = self.path(task, fp)
        if target.exists():
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source, target)
        except OSError:
            atomic_write(target, source.read_bytes())

    def load(self, task: str, fp: str) -> Any:
        with self.path(task, fp).open("rb") as f:
            return pickle.load(f)

    def completed(self) -> dict[str, list[str]]:
        """{task (as stored): [fingerprints]} of every stored output."""
        out: dict[str, list[str]] = {}
        base = self.root / "outputs"
        if base.is_dir():
            for task_dir in sorted(base.iterdir()):
                fps = sorted(p.stem for p in task_dir.glob("*.pkl"))
                if fps:
                    out[task_dir.name] = fps
        return out

    # ---- the pipeline's result -----------------------------------------------------------------
    def save_result(self, value: object) -> int:
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        atomic_write(self.result_path, data)
        return len(data)

    def load_result(self) -> Any:
        return pickle.loads(self.result_path.read_bytes())

    # ---- attempts ------------------------------------------------------------------------------
    def next_attempt(self, run_id: str, task: str) -> int:
        """Record one more attempt of `task` in run `run_id`; returns its number (1 for the first).

        Safe against concurrent callers: each attempt claims its own marker file."""
        directory = self.root / "attempts" / _safe(run_id)
        directory.mkdir(parents=True, exist_ok=True)
        attempt = 1
        while True:
            try:
                fd = os.open(directory / f"{_safe(task)}.{attempt}", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                attempt += 1
                continue
            os.close(fd)
            return attempt

    def __repr__(self) -> str:
        return f"RunStore({str(self.root)!r})"


class Cache:
    """A content-addressed cache of task outputs, shared by runs and pipelines: `ROOT/ab/abcd….pkl`
    by fingerprint alone (the fingerprint covers the task's code, inputs and options). Files are
    written atomically, so concurrent runs may share one cache."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def path(self, fp: str) -> Path:
        return self.root / fp[:2] / f"{fp}.pkl"

    def has(self, fp: str) -> bool:
        return self.path(fp).is_file()

    def load(self, fp: str) -> Any:
        with self.path(fp).open("rb") as f:
            return pickle.load(f)

    def save_bytes(self, fp: str, data: bytes) -> int:
        if not self.has(fp):
            atomic_write(self.path(fp), data)
        return len(data)

    def __repr__(self) -> str:
        return f"Cache({str(self.root)!r})"
