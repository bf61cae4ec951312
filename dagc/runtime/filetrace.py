"""The files a task read, recorded when it runs and checked before its stored output is reused.

A task's fingerprint covers its code, its inputs and the module-level values it reads, but not the files it
opens: their paths are often computed at run time (`os.path.join(root, name)`), and a library the compiler
knows nothing of may open them. So while a task runs, an audit hook records every file it opens for reading
and every directory it lists; when its output is stored, a sidecar (`<output>.files.json`) keeps each one's
size, modification time and, for files up to HASHED_BYTES, a BLAKE3 digest of the content. Before the
output is reused, every entry is checked: unchanged size and time is the fast path; where they differ, the
digest decides (a file written again with the same bytes is unchanged). A changed, added or removed file
makes the output stale: the task runs again, and so does everything downstream of it
(`stale_downstream`), whose stored outputs were computed from the old contents.

Not recorded: the interpreter's own files (the standard library, site-packages, compiled caches), the
user's source files (the code identity covers them: dagc.runtime.code), the run directory and the cache,
`/dev`, `/proc` and `/sys`, and files the task wrote itself.
"""

from __future__ import annotations

import json
import os
import sys
import sysconfig
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from dagc.runtime.rows import TaskRow

__all__ = ["recording", "snapshot", "changed", "save_trace", "load_trace", "trace_path", "stale_downstream",
           "invalidate_stale", "before_reuse", "HASHED_BYTES"]

# files up to this size are hashed when recorded, so that one rewritten with the same bytes is not stale
HASHED_BYTES = 256 * 2**20
SUFFIX = ".files.json"

_local = threading.local()
_installed = False
_SYSTEM = ("/dev/", "/proc/", "/sys/")


@lru_cache(maxsize=1)
def _ignored_roots() -> tuple[str, ...]:
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, *(sysconfig.get_paths().get(k, "") for k in
                                                             ("stdlib", "platstdlib", "purelib", "platlib"))}
    return tuple(sorted(os.path.realpath(r) + os.sep for r in roots if r))


def _audit(event: str, args: tuple) -> None:
    found = getattr(_local, "found", None)
    if found is None:
        return
    if event == "open" and len(args) >= 2:
        path, mode = args[0], args[1]
        flags = args[2] if len(args) > 2 else 0
        if not isinstance(path, (str, bytes, os.PathLike)):
            return  # a file descriptor: opened earlier, by a path recorded then
        writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            mode is None and isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
        name = os.fsdecode(path)
        if writes:
            found.append((name, "write"))
            return
        try:  # as it was when opened: a file changed while the task ran is never taken as read (see snapshot)
            st = os.stat(name)
            found.append((name, "read", (st.st_size, st.st_mtime_ns)))
        except OSError:
            found.append((name, "read"))
    elif event in ("os.listdir", "os.scandir") and args:
        path = args[0]
        if isinstance(path, (str, bytes, os.PathLike)):
            found.append((os.fsdecode(path), "list"))


@contextmanager
def recording() -> Iterator[list[tuple[str, str]]]:
    """Record the files opened and the directories listed on this thread while the block runs:
    (path as given, "read" | "write" | "list")."""
    global _installed
    if not _installed:
        sys.addaudithook(_audit)
        _installed = True
    outer = getattr(_local, "found", None)
    found: list[tuple[str, str]] = []
    _local.found = found
    try:
        yield found
    finally:
        _local.found = outer
        if outer is not None:
            outer.extend(found)  # a task run inside another (a region's): the region read it too


def _digest(path: str) -> str | None:
    try:
        import blake3
    except ImportError:  # pragma: no cover - a dependency of dagc
        return None
    h = blake3.blake3()
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 22):
                h.update(chunk)
    except OSError:
        return None
    return h.hexdigest()[:32]


def _entry(path: str, kind: str) -> dict[str, object] | None:
    try:
        st = os.stat(path)
    except OSError:
        return {"path": path, "kind": kind, "missing": True}
    if kind == "list":
        try:
            names = sorted(os.listdir(path))
        except OSError:
            return None
        import hashlib

        return {"path": path, "kind": "list", "names": hashlib.sha256("\0".join(names).encode()).hexdigest()[:32]}
    if not os.path.isfile(path):
        return None
    entry: dict[str, object] = {"path": path, "kind": "file", "size": st.st_size, "mtime": st.st_mtime_ns}
    if st.st_size <= HASHED_BYTES:
        entry["blake3"] = _digest(path)
    return entry


def snapshot(found: Iterable[tuple[str, str]], ignore: Iterable[str | os.PathLike[str]] = ()) -> list[dict[str, object]]:
    """What the files and directories a task read are now: one entry each, in a stable order (files it
    wrote itself, and the ignored places, left out)."""
    skip = _ignored_roots() + tuple(os.path.realpath(os.fspath(p)) + os.sep for p in ignore)
    written = {os.path.realpath(p[0]) for p in found if p[1] == "write"}
    seen: dict[tuple[str, str], tuple[int, int] | None] = {}
    for path, how, *opened in found:
        if how == "write":
            continue
        real = os.path.realpath(path)
        if real in written or real.startswith(_SYSTEM) or real.startswith(skip) or "__pycache__" in real \
                or real.endswith((".py", ".pyc", ".so", SUFFIX)):
            continue
        seen.setdefault((real, "list" if how == "list" else "file"), opened[0] if opened else None)
    out = []
    for (real, kind), opened in sorted(seen.items()):
        entry = _entry(real, kind)
        if entry is None:
            continue
        if opened is not None and (entry.get("size"), entry.get("mtime")) != opened:
            entry["changed_during"] = True  # written while the task ran: what it read is not what is there now
        out.append(entry)
    return out


def changed(entries: Iterable[Mapping[str, object]]) -> str | None:
    """The first recorded file or directory that is not as it was (its path), or None."""
    for entry in entries:
        path = str(entry.get("path"))
        if entry.get("changed_during"):
            return path
        now = _entry(path, str(entry.get("kind", "file")))
        if now is None:
            return path
        if entry.get("missing") or now.get("missing"):
            if entry.get("missing") != now.get("missing"):
                return path
            continue
        if entry.get("kind") == "list":
            if now.get("names") != entry.get("names"):
                return path
            continue
        if now.get("size") == entry.get("size") and now.get("mtime") == entry.get("mtime"):
            continue
        if now.get("size") != entry.get("size") or entry.get("blake3") is None \
                or now.get("blake3") != entry.get("blake3"):
            return path
    return None


def trace_path(output: Path) -> Path:
    return output.with_name(output.name + SUFFIX)


def save_trace(output: Path, entries: list[dict[str, object]]) -> None:
    """Keep the entries beside a stored output (nothing when the task read no file)."""
    path = trace_path(output)
    if not entries:
        try:
            path.unlink()
        except OSError:
            pass
        return
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(entries, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass


def load_trace(output: Path) -> list[dict[str, object]]:
    """The entries kept beside a stored output ([] when none: the task read no file, or the trace is unreadable
    and the output is then checked as one of a task that read none)."""
    try:
        data = json.loads(trace_path(output).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [e for e in data if isinstance(e, dict) and isinstance(e.get("path"), str)] if isinstance(data, list) else []


def stale_downstream(stale: Iterable[str], upstream: Mapping[str, Iterable[str]]) -> set[str]:
    """Every task downstream of a stale one (the stale ones included), following `upstream`
    (task -> the tasks whose outputs or state it reads)."""
    users: dict[str, set[str]] = {}
    for task, ups in upstream.items():
        for up in ups:
            users.setdefault(up, set()).add(task)
    out = set(stale)
    todo = list(out)
    while todo:
        for user in users.get(todo.pop(), ()):
            if user not in out:
                out.add(user)
                todo.append(user)
    return out


def invalidate_stale(rows: Mapping[str, TaskRow], upstream: Mapping[str, Iterable[str]], store: object | None,
                     cache: object | None) -> dict[str, str]:
    """Before a run reuses anything: the tasks whose stored outputs read a file that changed since, with
    that file, and every task downstream of one; the stored outputs of the downstream ones are removed
    (from the run directory and the cache), since they were computed from the old contents and their own
    fingerprints do not show it. Returns {task: why} of the stale ones."""
    why: dict[str, str] = {}
    for task, row in rows.items():
        fp = TaskRow.of(row).fingerprint
        if not isinstance(fp, str):
            continue
        for output in _stored_paths(task, fp, store, cache):
            path = changed(load_trace(output))
            if path is not None:
                why[task] = f"`{task}` read {path}, which changed since its output was stored"
                break
    if not why:
        return {}
    for task in sorted(stale_downstream(why, upstream)):
        row = rows.get(task)
        fp = TaskRow.of(row).fingerprint if row is not None else None
        if not isinstance(fp, str):
            continue
        why.setdefault(task, f"it reads the output of a task that reads a changed file ({next(iter(why))})")
        for output in _stored_paths(task, fp, store, cache):
            for path in (output, trace_path(output)):
                try:
                    path.unlink()
                except OSError:
                    pass
    return why


def _stored_paths(task: str, fp: str, store: object | None, cache: object | None) -> list[Path]:
    paths = []
    if store is not None:
        paths.append(store.path(task, fp))  # type: ignore[attr-defined]
    if cache is not None:
        paths.append(cache.path(fp))  # type: ignore[attr-defined]
    return paths


def before_reuse(rows: Mapping[str, TaskRow], code: Mapping[str, tuple], store: object | None, cache: object | None,
                 say: bool = True) -> dict[str, str]:
    """`invalidate_stale` for a program about to reuse outputs (`--resume`: `store`; `--cache`: `cache`), with
    the upstream tasks of its code table (dagc.runtime.code); says in one line which tasks run again."""
    if store is None and cache is None:
        return {}
    upstream = {task: tuple(row[1]) for task, row in code.items()}
    stale = invalidate_stale(rows, upstream, store, cache)
    if stale and say:
        first = next(iter(stale.values()))
        shown = ", ".join(f"`{t}`" for t in sorted(stale)[:6]) + (f" and {len(stale) - 6} more" if len(stale) > 6 else "")
        sys.stderr.write(f"dagc: {first}: {shown} are computed again rather than reused\n")
    return stale
