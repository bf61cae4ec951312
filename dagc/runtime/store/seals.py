"""Seals: this user's store key, and the keyed digests that prove a file or a directory was written by this
user's dagc and is unchanged since.

The key is `~/.dagc/store.key` (made on first use, mode 0600), or derived from `$DAGC_STORE_KEY` (the same on
every machine of a cluster whose home directories differ). Digests are keyed BLAKE3. A directory (a task's
state checkpoint) is sealed by a manifest: its files with their digests, and a digest of the manifest itself
(`seal_manifest`); `check_directory` says why such a directory may not be read. Sealed files are in
`dagc.runtime.store.sealed`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import blake3

from dagc.runtime.store.errors import StorageError

_KEY_ENV = "DAGC_STORE_KEY"
_key: list[bytes] = []
_seal_key: list[bytes] = []  # derived from the store key for BLAKE3's keyed mode


def store_key() -> bytes:
    """This user's key for sealing stored outputs: `$DAGC_STORE_KEY` (the same on every machine of a
    cluster whose home directories differ), else `~/.dagc/store.key` (`$DAGC_HOME/store.key`), made on first
    use (mode 0600). A key file that cannot be made or read, is too short, or that others may write (whoever
    can write it can seal a planted pickle) is a StorageError naming it and the fix."""
    if _key:
        return _key[0]
    given = os.environ.get(_KEY_ENV)
    if given:
        key = hashlib.blake2b(given.encode("utf-8"), digest_size=32).digest()
    else:
        key = _key_file(Path(os.environ.get("DAGC_HOME") or Path.home() / ".dagc") / "store.key")
    _key.append(key)
    return key


_ELSEWHERE = "or set DAGC_HOME to a directory only you may write (or DAGC_STORE_KEY to a secret)"


def _key_file(path: Path) -> bytes:
    """The key in `path`, made there when there is none (see `store_key`)."""
    try:
        return _read_key(path)
    except (FileNotFoundError, NotADirectoryError):  # none yet (or a home that is not a directory: said below)
        pass
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:  # O_EXCL: two processes starting at once agree on the one that wins
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(os.urandom(32))
        except FileExistsError:
            pass
    except OSError as exc:
        raise StorageError(f"cannot make the store key {path}: {exc.strerror or exc}; make {path.parent} "
                           f"writable, {_ELSEWHERE}", exc, path) from None
    return _read_key(path)


def _read_key(path: Path) -> bytes:
    """The key in the existing file `path`; FileNotFoundError when there is none."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except (FileNotFoundError, NotADirectoryError):
        raise
    except OSError as exc:
        why = "it is a symbolic link" if path.is_symlink() else exc.strerror or str(exc)
        raise StorageError(f"cannot read the store key {path}: {why}; remove it (dagc makes a new one), "
                           f"{_ELSEWHERE}", exc, path) from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        key = f.read(4096)
    for where, mode in ((path, info.st_mode), (path.parent, path.parent.stat().st_mode)):
        if mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise StorageError(f"the store key {path} can be changed by other users ({where} is writable by "
                               f"{'others' if mode & stat.S_IWOTH else 'its group'}); run `chmod 600 {path}` "
                               f"and `chmod 700 {path.parent}`, then remove the run directories and cache "
                               f"written since if you do not trust them")
    if len(key) < 16:
        raise StorageError(f"the store key {path} is {'empty' if not key else 'too short'} ({len(key)} bytes); "
                           "remove it and dagc makes a new one (outputs sealed with the old key are then made "
                           "again)")
    return key


def mac() -> Any:
    """A keyed hash under this user's key."""
    # keyed BLAKE3: a MAC, 2.5x the speed of HMAC-SHA-256 with SHA extensions here (4.2 against 1.7 GB/s);
    # one thread, since the tasks have the other cores. It releases the GIL while it hashes.
    if not _seal_key:
        _seal_key.append(blake3.blake3(store_key(), derive_key_context="dagc sealed outputs 1").digest())
    return blake3.blake3(key=_seal_key[0])


def digest(parts: Iterable[bytes | memoryview]) -> bytes:
    """The keyed digest of `parts`, one after the other."""
    h = mac()
    for part in parts:
        h.update(part)
    return h.digest()


def directory_digests(directory: Path) -> dict[str, str]:
    """Every file under `directory` (its path relative to it) with its keyed digest."""
    files = {}
    for path in sorted(p for p in directory.rglob("*") if p.is_file() and not p.is_symlink()):
        h = mac()
        with path.open("rb") as f:
            while chunk := f.read(1 << 22):
                h.update(chunk)
        files[path.relative_to(directory).as_posix()] = h.hexdigest()
    return files


def seal_manifest(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """`manifest` (JSON data naming files and their `directory_digests`) with its seal under this user's key."""
    body = {k: v for k, v in manifest.items() if k != "seal"}
    return {**body, "seal": digest([json.dumps(body, sort_keys=True).encode("utf-8")]).hex()}


def is_sealed(data: object) -> bool:
    """Whether JSON `data` carries a valid seal under this user's key (`seal_manifest`)."""
    return isinstance(data, dict) and isinstance(data.get("seal"), str) and hmac.compare_digest(
        seal_manifest(data)["seal"], data["seal"])


def check_directory(directory: Path, manifest: object) -> str | None:
    """Why the files under `directory` may not be read (None: they are exactly the `files` that `manifest`, sealed
    by `seal_manifest` with this user's key, lists, with the same contents): nothing in a run directory is
    unpickled unless it carries a valid seal (a checkpoint's metadata, which torch unpickles)."""
    if not (isinstance(manifest, dict) and isinstance(manifest.get("files"), dict)
            and isinstance(manifest.get("seal"), str)):
        return "it carries no seal (written by an older dagc, or by something else)"
    if not is_sealed(manifest):
        return "its seal does not match (not written by this user's dagc)"
    if not directory.is_dir() or directory.is_symlink() or any(p.is_symlink() for p in directory.rglob("*")):
        return "it is missing or holds a symbolic link"
    files = manifest["files"]
    found = directory_digests(directory)
    if set(found) != set(files):
        return "its files are not those it was sealed with"
    changed = [name for name in files if not hmac.compare_digest(str(files[name]), found[name])]
    if changed:
        return f"`{changed[0]}` changed after it was sealed"
    return None
