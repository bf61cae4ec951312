"""Zero-copy file I/O for large buffers (tensor and array data): written from their memory, and read into
page-aligned memory, directly to and from the disk (O_DIRECT) where the file system allows it, without a copy
through the page cache; elsewhere through the page cache as usual."""

from __future__ import annotations

import ctypes
import errno
import os
import sys
from collections.abc import Callable
from typing import BinaryIO

PAGE = 4096  # what O_DIRECT needs aligned: memory, file offsets and lengths
DIRECT_MIN = 1 << 23  # buffers from 8 MiB go from memory to the disk directly (see `write_buffer`)
_O_DIRECT = getattr(os, "O_DIRECT", 0)  # Linux; elsewhere every write goes through the page cache


def address(buffer: memoryview) -> int | None:
    """Where `buffer`'s bytes are in memory (None: not known, so not written directly)."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(buffer))
    except TypeError:  # read-only: numpy tells its address
        numpy = sys.modules.get("numpy")
        if numpy is None or not buffer.nbytes:
            return None
        return int(numpy.frombuffer(buffer, numpy.uint8).ctypes.data)


def pwrite_all(fd: int, data: bytes | memoryview, offset: int) -> bool:
    """Write all of `data` at `offset` (in pieces of at most 1 GiB, as the system call takes)."""
    view = memoryview(data).cast("B")
    while view:
        written = os.pwrite(fd, view[:1 << 30], offset)
        view, offset = view[written:], offset + written
    return True


def directly(fd: int, transfer: Callable[[], bool]) -> bool:
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


def write_buffer(fd: int, data: bytes | memoryview, offset: int) -> None:
    """Write `data` at `offset`; a large buffer's whole pages go directly (`directly`): writing 768 MiB so
    costs 0.03-0.06 s of CPU here, against 0.4-1.8 s through the page cache, CPU that a busy machine's
    tasks would otherwise have lost. The bytes before the first page boundary and after the last, and all
    of them where direct writes are refused, go through the page cache."""
    view = memoryview(data).cast("B")
    head = -offset % PAGE  # the sealed layout put `data` where its memory's page boundaries are the file's
    pages = (view.nbytes - head) // PAGE * PAGE
    middle = view[head:head + pages]
    if view.nbytes < DIRECT_MIN or pages <= 0 or not directly(fd, lambda: pwrite_all(fd, middle, offset + head)):
        pwrite_all(fd, view, offset)
        return
    pwrite_all(fd, view[:head], offset)
    pwrite_all(fd, view[head + pages:], offset + head + pages)


def _read_whole_pages(fd: int, into: memoryview, size: int) -> bool:
    """Read a file's `size` bytes into `into` (whole pages), from its start; False if it ends early."""
    got = 0
    while got < size:
        n = os.preadv(fd, [into[got:]], got)
        if n <= 0:
            return False
        got += n
    return True


def read_aligned(f: BinaryIO) -> memoryview:
    """The whole file `f` (open at its start), read into one writable, page-aligned block."""
    fd = f.fileno()
    size = os.fstat(fd).st_size
    pages = -(-size // PAGE) * PAGE  # a direct read fills whole pages
    block = bytearray(pages + PAGE)
    start = -ctypes.addressof(ctypes.c_char.from_buffer(block)) % PAGE
    view = memoryview(block)[start:start + size]
    # a large file directly into the block its tensors will live in (a written output is not in the
    # page cache anyway, `write_buffer`): loading three 256 MiB outputs so took 0.5-0.7 s of system
    # time here, against 1.2-1.8 s through the page cache
    whole = memoryview(block)[start:start + pages]
    if size < DIRECT_MIN or not directly(fd, lambda: _read_whole_pages(fd, whole, size)):
        f.readinto(view)
    return view
