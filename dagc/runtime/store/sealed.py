"""Sealed files: a pickled value with a keyed digest of it, written atomically, loaded only when the digest
matches (a damaged, truncated or planted file is never unpickled).

    MAGIC (b"DAGC\\x04") | digest (32 bytes) | table | pickle stream | buffers

The table holds the number of buffers, the stream's length, and each buffer's offset and length. A large
buffer (tensor or array data) sits at an offset with the same remainder modulo 4096 as its address in memory,
so that it goes to the disk directly and loads aligned as it was (`dagc.runtime.store.direct`); others at a
multiple of 64.
"""

from __future__ import annotations

import hmac
import pickle
import struct
import threading
from pathlib import Path
from typing import Any, BinaryIO

from dagc.runtime.store.direct import DIRECT_MIN, PAGE, address, pwrite_all, read_aligned, write_buffer
from dagc.runtime.store.errors import DamagedOutput
from dagc.runtime.store.files import atomic_write, atomically
from dagc.runtime.store.pickles import Pickled
from dagc.runtime.store.seals import digest, mac

_MAGIC = b"DAGC\x04"  # a sealed file: this, a digest of the rest, the rest
_DIGEST = 32
_ALIGN = 64
_HEADER = len(_MAGIC) + _DIGEST
_OVERLAP = 1 << 24  # bytes from which a seal is hashed while it is written


def _body(payload: bytes | memoryview | Pickled) -> list[tuple[int, bytes | memoryview]]:
    """The parts of a sealed file after its header, each with its offset in the file: the table, the
    stream, then the buffers, with zeros between (see the module's docstring)."""
    pickled = payload if isinstance(payload, Pickled) else Pickled(bytes(payload), [])
    table_at = _HEADER
    at = table_at + 12 + 16 * len(pickled.buffers)
    body: list[tuple[int, bytes | memoryview]] = [(at, pickled.stream)]
    at += len(pickled.stream)
    entries: list[int] = []
    for buffer in pickled.buffers:
        where = address(buffer) if buffer.nbytes >= DIRECT_MIN else None
        pad = (where - at) % PAGE if where is not None else -at % _ALIGN
        if pad:
            body.append((at, bytes(pad)))
        body.append((at + pad, buffer))
        entries += [at + pad, buffer.nbytes]
        at += pad + buffer.nbytes
    table = struct.pack(f"<IQ{len(entries)}Q", len(pickled.buffers), len(pickled.stream), *entries)
    return [(table_at, table), *body]


def write_sealed(path: Path, payload: bytes | memoryview | Pickled) -> int:
    """Write `payload` sealed to `path`, atomically (see `atomic_write`). A large payload is hashed on a
    second thread while it is written (both release the GIL), and its header written last: the seal
    costs the longer of the two, not their sum. Returns the bytes written."""
    body = _body(payload)
    end = body[-1][0] + len(body[-1][1])
    parts = [part for _, part in body]
    if end < _OVERLAP:
        return atomic_write(path, [_MAGIC, digest(parts), *parts])
    digests: list[bytes] = []
    hasher = threading.Thread(target=lambda: digests.append(digest(parts)), name="dagc-seal", daemon=True)
    hasher.start()

    def write(f: BinaryIO) -> None:
        fd = f.fileno()
        try:
            for offset, part in body:
                write_buffer(fd, part, offset)
        finally:
            hasher.join()
        pwrite_all(fd, _MAGIC + digests[0], 0)  # the header last, once the digest is known

    atomically(path, write)
    return end


def _not_sealed(head: bytes | memoryview) -> str | None:
    """Why a file starting with `head` is not a sealed file this dagc reads (None: it may be)."""
    if len(head) >= len(_MAGIC) and bytes(head[:4]) == _MAGIC[:4] and head[4] != _MAGIC[4]:
        return f"sealed by another version of dagc (format {head[4]}, this dagc reads {_MAGIC[4]})"
    if len(head) >= _HEADER and bytes(head[:len(_MAGIC)]) == _MAGIC:
        return None
    return "not a sealed dagc file (damaged, truncated, or written by something else)"


def check_sealed(path: Path) -> str | None:
    """Why the sealed file at `path` may not be loaded (None: it may), reading it in pieces."""
    try:
        with path.open("rb") as f:
            head = f.read(_HEADER)
            if (why := _not_sealed(head)) is not None:
                return why
            h = mac()
            while chunk := f.read(1 << 22):
                h.update(chunk)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if not hmac.compare_digest(h.digest(), head[len(_MAGIC):]):
        return "its contents do not match their digest (damaged, or not written by this user's dagc)"
    return None


def load_sealed(path: Path) -> Any:
    """Unpickle a sealed file after checking it; DamagedOutput when it fails the check. The file is read
    into one writable, page-aligned block and its out-of-band buffers used in place (arrays and tensors
    are views of it, aligned as they were when written)."""
    with path.open("rb") as f:
        view = read_aligned(f)
    size = view.nbytes
    if (why := _not_sealed(view[:_HEADER])) is not None or size < _HEADER + 12:
        raise DamagedOutput(f"{path}: {why or 'truncated'}")
    if not hmac.compare_digest(digest([view[_HEADER:]]), bytes(view[len(_MAGIC):_HEADER])):
        raise DamagedOutput(f"{path}: its contents do not match their digest (damaged, or not written by this "
                            "user's dagc)")
    try:
        count, length = struct.unpack_from("<IQ", view, _HEADER)
        table = struct.unpack_from(f"<{2 * count}Q", view, _HEADER + 12)
    except struct.error:
        raise DamagedOutput(f"{path}: its table does not fit in it (damaged)") from None
    at = _HEADER + 12 + 16 * count + length
    stream = view[at - length:at]
    buffers = []
    for offset, nbytes in zip(table[::2], table[1::2]):
        if offset < at or offset + nbytes > size:
            raise DamagedOutput(f"{path}: its parts overlap or run past its end (damaged)")
        buffers.append(view[offset:offset + nbytes])
        at = offset + nbytes
    if at != size:
        raise DamagedOutput(f"{path}: its parts do not add up to its size (damaged)")
    return pickle.loads(stream, buffers=buffers)
