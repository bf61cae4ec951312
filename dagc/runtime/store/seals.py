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
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import blake3

from dagc.runtime.store.errors import DamagedOutput

_KEY_ENV = "DAGC_STORE_KEY"
_key: list[bytes] = []
_seal_key: list[bytes] = []  # derived from the store key for BLAKE3's keyed mode


def store_key() -> bytes:
    """This user's key for sealing stored outputs: `$DAGC_STORE_KEY` (the same on every machine of a
    cluster whose home directories differ), else `~/.dagc/store.key`, made on first use (mode 0600)."""
    if _key:
        return _key[0]
    given = os.environ.get(_KEY_ENV)
    if given:
        key = hashlib.blake2b(given.encode("utf-8"), digest_size=32).digest()
    else:
        path = Path(os.environ.get("DAGC_HOME") or Path.home() / ".dagc") / "store.key"
        try:
            key = path.read_bytes()
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            try:  # O_EXCL: two processes starting at once agree on the one that wins
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(os.urandom(32))
            except FileExistsError:
                pass
            key = path.read_bytes()
        if len(key) < 16:
            raise DamagedOutput(f"{path}: the store key is too short; delete it and dagc makes a new one")
    _key.append(key)
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
