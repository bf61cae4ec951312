"""The run directory: task outputs persisted by task name and input fingerprint.

    RUN_DIR/
      run.json                       {"format": 1, "pipeline": NAME, "created": ISO time}
      events.jsonl                   the event log (see dagc.runtime.events)
      outputs/TASK/FINGERPRINT.pkl   a task's outputs, pickled: the value for one output,
                                     a tuple for several
      attempts/RUN_ID/TASK.N         empty markers, one per attempt of TASK in run RUN_ID
      result.pkl                     the pipeline's return value, once the run has finished

Every file is written atomically (a temporary file in the same directory, then `os.replace`), so a
process killed mid-write leaves either the whole file or none, and only its owner may read or write it
(mode 0600). Every stored pickle is *sealed*: a header holds a keyed BLAKE3 digest of the rest, made with
this user's store key (`~/.dagc/store.key`, or `$DAGC_STORE_KEY`). A file whose digest does not match —
damaged, truncated, or written by anyone without the key (a planted pickle) — is never unpickled: the
task that made it runs again (docs/runtime.md, "Integrity and trust"). A task's *fingerprint* is computed
before it runs, from what determines its output: its target, its constant arguments and the
fingerprints of the values it reads. Equal fingerprints mean "the same computation", so a resumed
run reuses every output whose file exists and recomputes the rest. The run directory must be on a
file system every worker can reach (always so for a local engine).

This module imports nothing from the compiler; emitted programs import it.
"""

from __future__ import annotations

import atexit
import ctypes
import errno
import hashlib
import hmac
import io
import json
import os
import pickle
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

import blake3

from dagc.runtime.filetrace import changed, load_trace, save_trace

__all__ = ["FORMAT", "RunStore", "Cache", "DamagedOutput", "StorageError", "fingerprint", "value_fingerprint", "output_fingerprint",
           "atomic_write", "write_sealed", "store_key", "dumps", "dumps_outputs", "Pickled", "Part"]

FORMAT = 1
_FP_TAG = "dagc-fingerprint-1"
_MAGIC = b"DAGC\x04"  # a sealed file: this, a digest of the rest, the rest (see `write_sealed`)
_DIGEST = 32
_ALIGN = 64
_PAGE = 4096  # what O_DIRECT needs aligned: memory, file offsets and lengths
_HEADER = len(_MAGIC) + _DIGEST
_OVERLAP = 1 << 24  # bytes from which a seal is hashed while it is written
_DIRECT_MIN = 1 << 23  # buffers from 8 MiB go from memory to the disk directly (see `_write_buffer`)
_O_DIRECT = getattr(os, "O_DIRECT", 0)  # Linux; elsewhere every write goes through the page cache
_KEY_ENV = "DAGC_STORE_KEY"
_key: list[bytes] = []
_seal_key: list[bytes] = []  # derived from the store key for BLAKE3's keyed mode


class DamagedOutput(Exception):
    """A stored file failed its check; the message names the file and why."""


class StorageError(Exception):
    """The run directory cannot be written (full disk, read-only file system, permissions); the message
    names the path and what to do. The run ends; `--resume` finishes it once the directory is writable."""


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


def _mac() -> Any:
    # keyed BLAKE3: a MAC, 2.5x the speed of HMAC-SHA-256 with SHA extensions here (4.2 against 1.7 GB/s);
    # one thread, since the tasks have the other cores. It releases the GIL while it hashes.
    if not _seal_key:
        _seal_key.append(blake3.blake3(store_key(), derive_key_context="dagc sealed outputs 1").digest())
    return blake3.blake3(key=_seal_key[0])


def _digest(parts: Iterable[bytes | memoryview]) -> bytes:
    h = _mac()
    for part in parts:
        h.update(part)
    return h.digest()


def directory_digests(directory: Path) -> dict[str, str]:
    """Every file under `directory` (its path relative to it) with its keyed digest."""
    files = {}
    for path in sorted(p for p in directory.rglob("*") if p.is_file() and not p.is_symlink()):
        h = _mac()
        with path.open("rb") as f:
            while chunk := f.read(1 << 22):
                h.update(chunk)
        files[path.relative_to(directory).as_posix()] = h.hexdigest()
    return files


def seal_manifest(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """`manifest` (JSON data naming files and their `directory_digests`) with its seal under this user's key."""
    body = {k: v for k, v in manifest.items() if k != "seal"}
    return {**body, "seal": _digest([json.dumps(body, sort_keys=True).encode("utf-8")]).hex()}


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


def content_digest(value: object) -> str | None:
    """A digest of what `value` holds (its pickle, tensor and array data included, not copied); None when it does
    not pickle. Equal digests, equal content; a set of strings may pickle in another order in another process,
    which only costs a reuse."""
    try:
        pickled = dumps(value)
    except Exception:  # noqa: BLE001 - anything that does not pickle has no content key
        return None
    h = blake3.blake3(pickled.stream)
    for buffer in pickled.buffers:
        h.update(buffer)
    return h.hexdigest()[:32]


class Pickled:
    """A value pickled with protocol 5: the pickle stream, and the large buffers (tensor and array data)
    kept out of it, by reference, not copied. Written as one sealed file by `write_sealed`."""

    def __init__(self, stream: bytes, buffers: list[memoryview]) -> None:
        self.stream, self.buffers = stream, buffers

    @property
    def size(self) -> int:
        return len(self.stream) + sum(b.nbytes for b in self.buffers)


def dumps(value: object) -> Pickled:
    """`value` pickled, its tensors' and arrays' data out of band (no copy); see `Pickled`."""
    buffers: list[memoryview] = []
    stream = io.BytesIO()
    _Pickler(stream, protocol=5, buffer_callback=lambda b: buffers.append(b.raw())).dump(value)
    return Pickled(stream.getvalue(), buffers)


class Part:
    """A value already pickled by `dumps`, carried as it is: pickling a Part writes its stream and hands
    its buffers on out of band (protocol 5), so the value is neither pickled again nor copied; unpickling
    gives back the value itself. A Ray task returns its stored output as a Part, so the one pickling serves
    both the run directory and Ray's object store."""

    __slots__ = ("pickled",)

    def __init__(self, pickled: Pickled) -> None:
        self.pickled = pickled

    def __reduce__(self) -> tuple:
        return _load_part, (self.pickled.stream, *(pickle.PickleBuffer(b) for b in self.pickled.buffers))


def _load_part(stream: bytes, *buffers: Any) -> Any:
    return pickle.loads(stream, buffers=buffers)


def dumps_outputs(value: object, outputs: int) -> tuple[Pickled, list[Part]]:
    """A task's outputs pickled once: what the store writes, and one Part per output. Several outputs
    (a tuple of `outputs` values) are stored as a tuple of their Parts, which loads as the tuple."""
    if outputs > 1 and isinstance(value, tuple) and len(value) == outputs:
        parts = [Part(dumps(v)) for v in value]
        return dumps(tuple(parts)), parts
    pickled = dumps(value)
    return pickled, [Part(pickled)]


class _Pickler(pickle.Pickler):
    """Pickles a plain, contiguous CPU tensor as the bytes of its storage, a numpy array over its memory
    (which protocol 5 keeps out of band), instead of torch's own copy of the storage; tensors sharing one
    storage share it again when loaded. Anything else as pickle does."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._arrays: dict[tuple[int, int], Any] = {}

    def reducer_override(self, obj: Any) -> Any:
        torch = sys.modules.get("torch")
        if torch is None or type(obj) is not torch.Tensor:
            return NotImplemented
        try:
            storage = obj.untyped_storage()
            if not (obj.device.type == "cpu" and obj.layout == torch.strided and not obj.requires_grad
                    and obj.is_contiguous() and obj.storage_offset() == 0 and not obj.is_conj()
                    and not obj.is_neg() and storage.nbytes() == obj.numel() * obj.element_size()):
                return NotImplemented
            key = (storage.data_ptr(), storage.nbytes())
            array = self._arrays.get(key)
            if array is None:
                array = self._arrays[key] = obj.reshape(-1).view(torch.uint8).numpy()
        except (TypeError, RuntimeError, ValueError):  # a dtype without bytes view (quantized, ...): as torch does
            return NotImplemented
        return _tensor_from_bytes, (array, str(obj.dtype).removeprefix("torch."), tuple(obj.shape))


def _tensor_from_bytes(array: Any, dtype: str, shape: tuple[int, ...]) -> Any:
    import torch

    if not array.flags.writeable:  # a tensor owns writable memory
        array = array.copy()
    return torch.from_numpy(array).view(getattr(torch, dtype)).reshape(shape)


def _address(buffer: memoryview) -> int | None:
    """Where `buffer`'s bytes are in memory (None: not known, so not written directly)."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(buffer))
    except TypeError:  # read-only: numpy tells its address
        numpy = sys.modules.get("numpy")
        if numpy is None or not buffer.nbytes:
            return None
        return int(numpy.frombuffer(buffer, numpy.uint8).ctypes.data)


def _body(payload: bytes | memoryview | Pickled) -> list[tuple[int, bytes | memoryview]]:
    """The parts of a sealed file after its header, each with its offset in the file: a table (the number
    of buffers, the stream's length, each buffer's offset and length), the stream, then the buffers,
    with zeros between. A large buffer sits at an offset with the same remainder modulo 4096 as its
    address in memory, so that its pages can go to the disk directly (`_write_buffer`) and a loaded
    buffer has the alignment it had (`load_sealed` reads into a page-aligned block); others at a multiple
    of 64."""
    pickled = payload if isinstance(payload, Pickled) else Pickled(bytes(payload), [])
    table_at = _HEADER
    at = table_at + 12 + 16 * len(pickled.buffers)
    body: list[tuple[int, bytes | memoryview]] = [(at, pickled.stream)]
    at += len(pickled.stream)
    entries: list[int] = []
    for buffer in pickled.buffers:
        address = _address(buffer) if buffer.nbytes >= _DIRECT_MIN else None
        pad = (address - at) % _PAGE if address is not None else -at % _ALIGN
        if pad:
            body.append((at, bytes(pad)))
        body.append((at + pad, buffer))
        entries += [at + pad, buffer.nbytes]
        at += pad + buffer.nbytes
    table = struct.pack(f"<IQ{len(entries)}Q", len(pickled.buffers), len(pickled.stream), *entries)
    return [(table_at, table), *body]


def _pwrite(fd: int, data: bytes | memoryview, offset: int) -> bool:
    view = memoryview(data).cast("B")
    while view:
        written = os.pwrite(fd, view[:1 << 30], offset)
        view, offset = view[written:], offset + written
    return True


def _directly(fd: int, transfer: Callable[[], bool]) -> bool:
    """Run `transfer` (a read or write at page-aligned offsets into page-aligned memory) with O_DIRECT set
    on `fd`: the bytes go between the disk and the tensor's memory without a copy through the page cache.
    Returns what `transfer` returns, or False where it could not run so (not Linux, `DAGC_DIRECT_IO=0`, a
    file system that refuses O_DIRECT): the caller then does it through the page cache."""
    if not _O_DIRECT or os.environ.get("DAGC_DIRECT_IO", "1") == "0":
        return False
    import fcntl  # (POSIX: where O_DIRECT is)

    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    try:
        fcntl.fcntl(fd, fcntl.F_SETFL, flags | _O_DIRECT)
    except OSError:  # a file system without direct I/O
        return False
    try:
        return transfer()
    except OSError as exc:
        if exc.errno != errno.EINVAL:  # EINVAL: these bytes cannot go directly here
            raise
        return False
    finally:
        fcntl.fcntl(fd, fcntl.F_SETFL, flags)


def _write_buffer(fd: int, data: bytes | memoryview, offset: int) -> None:
    """Write `data` at `offset`; a large buffer's whole pages go directly (`_directly`): writing 768 MiB so
    costs 0.03-0.06 s of CPU here, against 0.4-1.8 s through the page cache, CPU that a busy machine's
    tasks would otherwise have lost. The bytes before the first page boundary and after the last, and all
    of them where direct writes are refused, go through the page cache."""
    view = memoryview(data).cast("B")
    head = -offset % _PAGE  # `_body` placed `data` so that its memory's page boundaries are the file's
    pages = (view.nbytes - head) // _PAGE * _PAGE
    middle = view[head:head + pages]
    if view.nbytes < _DIRECT_MIN or pages <= 0 or not _directly(fd, lambda: _pwrite(fd, middle, offset + head)):
        _pwrite(fd, view, offset)
        return
    _pwrite(fd, view[:head], offset)
    _pwrite(fd, view[head + pages:], offset + head + pages)


def write_sealed(path: Path, payload: bytes | memoryview | Pickled) -> int:
    """Write `payload` sealed to `path`, atomically (see `atomic_write`). A large payload is hashed on a
    second thread while it is written (both release the GIL), and its header written last: the seal
    costs the longer of the two, not their sum. Returns the bytes written."""
    body = _body(payload)
    end = body[-1][0] + len(body[-1][1])
    parts = [part for _, part in body]
    if end < _OVERLAP:
        return atomic_write(path, [_MAGIC, _digest(parts), *parts])
    digest: list[bytes] = []
    hasher = threading.Thread(target=lambda: digest.append(_digest(parts)), name="dagc-seal", daemon=True)
    hasher.start()

    def write(f: Any) -> None:
        fd = f.fileno()
        try:
            for offset, part in body:
                _write_buffer(fd, part, offset)
        finally:
            hasher.join()
        _pwrite(fd, _MAGIC + digest[0], 0)  # the header last, once the digest is known

    _atomically(path, write)
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
            h = _mac()
            while chunk := f.read(1 << 22):
                h.update(chunk)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if not hmac.compare_digest(h.digest(), head[len(_MAGIC):]):
        return "its contents do not match their digest (damaged, or not written by this user's dagc)"
    return None


def _read_whole_pages(fd: int, into: memoryview, size: int) -> bool:
    """Read a file's `size` bytes into `into` (whole pages), from its start; False if it ends early."""
    got = 0
    while got < size:
        n = os.preadv(fd, [into[got:]], got)
        if n <= 0:
            return False
        got += n
    return True


def load_sealed(path: Path) -> Any:
    """Unpickle a sealed file after checking it; DamagedOutput when it fails the check. The file is read
    into one writable, page-aligned block and its out-of-band buffers used in place (arrays and tensors
    are views of it, aligned as they were when written)."""
    with path.open("rb") as f:
        size = os.fstat(f.fileno()).st_size
        pages = -(-size // _PAGE) * _PAGE  # a direct read fills whole pages
        block = bytearray(pages + _PAGE)
        start = -ctypes.addressof(ctypes.c_char.from_buffer(block)) % _PAGE
        view = memoryview(block)[start:start + size]
        # a large file directly into the block its tensors will live in (a written output is not in the
        # page cache anyway, `_write_buffer`): loading three 256 MiB outputs so took 0.5-0.7 s of system
        # time here, against 1.2-1.8 s through the page cache
        whole = memoryview(block)[start:start + pages]
        if size < _DIRECT_MIN or not _directly(f.fileno(), lambda: _read_whole_pages(f.fileno(), whole, size)):
            f.readinto(view)
    if (why := _not_sealed(view[:_HEADER])) is not None or size < _HEADER + 12:
        raise DamagedOutput(f"{path}: {why or 'truncated'}")
    if not hmac.compare_digest(_digest([view[_HEADER:]]), bytes(view[len(_MAGIC):_HEADER])):
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


def atomic_write(path: Path, data: bytes | memoryview | list[bytes | memoryview]) -> int:
    """Write `data` (or its parts, one after the other) to `path` so that readers see the old file, or
    the whole new one; only the owner may read it (mkstemp's mode 0600). Returns the bytes written."""
    parts = data if isinstance(data, list) else [data]

    def write(f: Any) -> None:
        for part in parts:
            f.write(part)

    _atomically(path, write)
    return sum(len(p) for p in parts)


def _atomically(path: Path, write: Any) -> None:
    """Run `write(file)` on a new temporary file beside `path` (mode 0600), then move it to `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def unwritable(path: Path, exc: OSError, run_dir: Path | None = None) -> str:
    """One line: which file could not be written, why, and what to do."""
    why = exc.strerror or str(exc)
    todo = {errno.ENOSPC: "free some space", errno.EDQUOT: "free some space (the disk quota is reached)",
            errno.EROFS: "the file system is read-only: give a writable directory",
            errno.EACCES: "fix the directory's permissions", errno.EPERM: "fix the directory's permissions",
            }.get(exc.errno or 0, "fix the directory")
    resume = f", then finish the run with --resume {run_dir}" if run_dir is not None else ""
    return f"cannot write {path}: {why}; {todo}{resume}"


def _usable(owner: object, key: object, path: Path, what: str, check: Any, discard: Any) -> bool:
    checked: dict[object, bool] = owner.__dict__.setdefault("_checked", {})
    if key in checked:
        return checked[key] and path.is_file()
    if not path.is_file():
        return False
    problem = check()
    if problem is not None:
        sys.stderr.write(f"dagc: warning: the stored output of {what} is not used: {path}: {problem}; "
                         "it is computed again\n")
        discard()
    elif (read := changed(load_trace(path))) is not None:  # a file it read is not as it was
        sys.stderr.write(f"dagc: {what} read {read}, which changed since its output was stored: it runs again\n")
        discard()
        problem = "stale"
    checked[key] = problem is None
    return problem is None


# ---- writing behind ------------------------------------------------------------------------------
class WriteBehind:
    """Seals and writes outputs on one background thread, so that the next task starts while the last
    one's output goes to disk. At most `limit` bytes are in flight (a submit waits for room); `flush()`
    waits for every write and raises the first one's StorageError, as a synchronous write would have."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.pending = 0
        self.error: BaseException | None = None
        self.cond = threading.Condition()
        self.jobs: list[tuple[int, Any]] = []
        self.thread: threading.Thread | None = None

    def submit(self, nbytes: int, write: Any) -> None:
        with self.cond:
            self._raise()
            while self.pending and self.pending + nbytes > self.limit:
                self.cond.wait()
                self._raise()
            self.pending += nbytes
            self.jobs.append((nbytes, write))
            if self.thread is None:
                self.thread = threading.Thread(target=self._loop, name="dagc-write-behind", daemon=True)
                self.thread.start()
            self.cond.notify_all()

    def flush(self) -> None:
        with self.cond:
            while self.pending:
                self.cond.wait()
            self._raise()

    def _raise(self) -> None:
        if self.error is not None:
            error, self.error = self.error, None
            raise error

    def _loop(self) -> None:
        while True:
            with self.cond:
                while not self.jobs:
                    self.cond.wait()
                nbytes, write = self.jobs.pop(0)
            try:
                write()
            except BaseException as exc:  # noqa: BLE001 - handed to the thread that flushes
                with self.cond:
                    self.error = self.error or exc
            with self.cond:
                self.pending -= nbytes
                self.cond.notify_all()


_write_behind: list[WriteBehind] = []


def write_behind() -> WriteBehind:
    """This process's writer (bounded by `$DAGC_WRITE_BEHIND` bytes in flight, default 1 GiB)."""
    if not _write_behind:
        try:
            limit = int(os.environ.get("DAGC_WRITE_BEHIND", 1 << 30))
        except ValueError:
            limit = 1 << 30
        _write_behind.append(WriteBehind(limit))
        atexit.register(_flush_at_exit)
    return _write_behind[0]


def flush_writes() -> None:
    """Wait for every output written behind; raises the first write's StorageError."""
    if _write_behind:
        _write_behind[0].flush()


def _flush_at_exit() -> None:
    try:
        flush_writes()
    except Exception as exc:  # noqa: BLE001 - the process is ending: say it
        sys.stderr.write(f"dagc: error: {exc}\n")


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
        """Persist a task's outputs; returns the size of their pickle."""
        return self.save_bytes(task, fp, dumps(value))

    def save_bytes(self, task: str, fp: str, data: bytes | Pickled) -> int:
        """Persist a task's already pickled outputs (sealed); returns the size of the pickle."""
        try:
            write_sealed(self.path(task, fp), data)
        except OSError as exc:
            raise StorageError(unwritable(self.path(task, fp), exc, self.root)) from exc
        return data.size if isinstance(data, Pickled) else len(data)

    def check(self, task: str, fp: str) -> str | None:
        """Why a stored output may not be reused (None: it may); see `check_sealed`."""
        return check_sealed(self.path(task, fp))

    def usable(self, task: str, fp: str) -> bool:
        """Whether a stored output exists and passes its check; one that fails is named in a warning and
        removed, so that its task runs again (checked once per process)."""
        return _usable(self, (task, fp), self.path(task, fp), f"task `{task}`", lambda: self.check(task, fp),
                       lambda: self.discard(task, fp))

    def discard(self, task: str, fp: str) -> None:
        """Remove a stored output that failed its check (the task runs again)."""
        try:
            self.path(task, fp).unlink()
        except FileNotFoundError:
            pass

    def adopt(self, task: str, fp: str, source: Path) -> None:
        """Record a task's outputs from a file elsewhere (the cache): a hard link when possible (with the files
        it read: dagc.runtime.filetrace)."""
        target = self.path(task, fp)
        if target.exists():
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        save_trace(target, load_trace(source))
        try:
            os.link(source, target)
        except OSError:
            atomic_write(target, source.read_bytes())

    def load(self, task: str, fp: str) -> Any:
        return load_sealed(self.path(task, fp))

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
        data = dumps(value)
        try:
            write_sealed(self.result_path, data)
        except OSError as exc:
            raise StorageError(unwritable(self.result_path, exc, self.root)) from exc
        return data.size

    # ---- one run at a time ---------------------------------------------------------------------
    def lock(self, run_id: str) -> str | None:
        """Hold this run directory for run `run_id` until the process ends; None when held, else who holds
        it (two runs on one directory would both run everything and interleave their logs)."""
        import fcntl
        import socket

        path = self.root / ".lock"
        try:  # never through a link planted in a shared run directory: the holder's line would truncate its target
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            if path.is_symlink():
                raise StorageError(f"{path} is a symbolic link, which dagc never writes through; remove it "
                                   "(a run directory holds no links)") from None
            raise exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held by a live process (a lock dies with its process)
            try:
                holder = json.loads(os.pread(fd, 4096, 0).decode("utf-8") or "{}")
            except ValueError:
                holder = {}
            os.close(fd)
            who = (f"run {holder.get('run', '?')} (pid {holder.get('pid', '?')} on {holder.get('host', '?')}, "
                   f"since {holder.get('since', '?')})")
            return f"{self.root} is in use by {who}; wait for it to end, or give another --run-dir"
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"run": run_id, "pid": os.getpid(), "host": socket.gethostname(),
                                  "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}).encode("utf-8"), 0)
        self._lock_fd = fd  # kept open: the lock lasts as long as this process
        return None

    # ---- attempts ------------------------------------------------------------------------------
    def attempts_made(self, run_id: str, task: str) -> int:
        """How many attempts of `task` run `run_id` has recorded so far (`next_attempt`)."""
        directory = self.root / "attempts" / _safe(run_id)
        attempt = 0
        while (directory / f"{_safe(task)}.{attempt + 1}").exists():
            attempt += 1
        return attempt

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
        return load_sealed(self.path(fp))

    def check(self, fp: str) -> str | None:
        return check_sealed(self.path(fp))

    def usable(self, fp: str) -> bool:
        return _usable(self, fp, self.path(fp), "a task", lambda: self.check(fp), lambda: self.discard(fp))

    def discard(self, fp: str) -> None:
        try:
            self.path(fp).unlink()
        except FileNotFoundError:
            pass

    def save_bytes(self, fp: str, data: bytes | Pickled) -> int:
        """Add an output to the cache; a cache that cannot be written is said once and then left alone
        (it only saves time: the run goes on)."""
        size = data.size if isinstance(data, Pickled) else len(data)
        if self.__dict__.get("_broken") or self.has(fp):
            return size
        try:
            write_sealed(self.path(fp), data)
        except OSError as exc:
            self._broken = True
            sys.stderr.write(f"dagc: warning: {unwritable(self.path(fp), exc)}; outputs are no longer added to "
                             f"the cache {self.root}\n")
        return size

    def __repr__(self) -> str:
        return f"Cache({str(self.root)!r})"
