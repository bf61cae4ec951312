"""What storing an output costs: tensors and arrays are pickled without a copy (protocol 5, their data out of
band), a large seal is hashed while it is written, and a Ray task's output is pickled once, for the run
directory and Ray's object store alike."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from dagc.backends import emit
from dagc.cluster import parse_cluster_spec
from dagc.driver import compile_file
from dagc.runtime.store import DamagedOutput, Part, dumps, dumps_outputs, load_sealed, write_sealed
from tests.interpreters import run_python


def _address(view: memoryview) -> int:
    """Where the memory `view` shows lies."""
    return int(np.frombuffer(view, dtype=np.uint8).ctypes.data)


def test_a_tensor_is_pickled_without_copying_its_data() -> None:
    x = torch.arange(1 << 20, dtype=torch.float32)
    pickled = dumps({"x": x, "also": x.view(1024, 1024)})
    assert len(pickled.stream) < 1024  # the data is not in the stream
    assert len(pickled.buffers) == 1  # one storage, shared by both tensors
    assert _address(pickled.buffers[0]) == x.data_ptr() and pickled.buffers[0].nbytes == x.nbytes
    loaded = pickle.loads(pickled.stream, buffers=pickled.buffers)
    assert torch.equal(loaded["x"], x) and loaded["also"].shape == (1024, 1024)
    assert loaded["x"].untyped_storage().data_ptr() == loaded["also"].untyped_storage().data_ptr()


@pytest.mark.parametrize("make", [
    lambda: torch.arange(12.0).reshape(3, 4).t(),  # not contiguous
    lambda: torch.arange(12.0)[3:],  # an offset into its storage
    lambda: torch.arange(6.0, requires_grad=True),
    lambda: torch.tensor([1 + 2j, 3 - 1j]).conj(),
])
def test_tensors_it_cannot_view_are_pickled_as_torch_does(make) -> None:  # type: ignore[no-untyped-def]
    x = make()
    pickled = dumps(x)
    loaded = pickle.loads(pickled.stream, buffers=pickled.buffers)
    assert torch.equal(loaded.detach().resolve_conj(), x.detach().resolve_conj())
    assert loaded.requires_grad == x.requires_grad


def test_a_large_seal_round_trips_aligned_and_writable_and_catches_a_flipped_byte(tmp_path: Path) -> None:
    x = torch.rand(5 << 20)  # 20 MiB: hashed while written
    y = np.arange(1000, dtype=np.int64)
    path = tmp_path / "out.pkl"
    written = write_sealed(path, dumps((x, y, "tag")))
    assert written == path.stat().st_size and oct(path.stat().st_mode & 0o777) == "0o600"
    lx, ly, tag = load_sealed(path)
    assert torch.equal(lx, x) and np.array_equal(ly, y) and tag == "tag"
    assert lx.data_ptr() % 64 == 0 and ly.ctypes.data % 64 == 0  # aligned where they lie in the file
    lx += 1  # a loaded tensor owns writable memory
    ly[0] = 7
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1  # inside the tensor's data
    path.write_bytes(bytes(data))
    with pytest.raises(DamagedOutput, match="do not match their digest"):
        load_sealed(path)


def _arrays_at_every_phase() -> list[np.ndarray]:
    """Large arrays whose data start at different places within a page (0, 64, 8 and 4095 bytes in), of
    lengths that end mid-page or on a page boundary, and a read-only one."""
    block = np.zeros(40 << 20, dtype=np.uint8)
    base = -block.ctypes.data % 4096
    arrays = []
    for n, (phase, length) in enumerate([(0, 9 << 20), (64, (9 << 20) - 100), (8, 8 << 20), (4095, (8 << 20) + 1)]):
        start = base + n * (10 << 20) + phase
        arrays.append(block[start:start + length])
        arrays[-1][:] = np.random.default_rng(n).integers(0, 256, length, dtype=np.uint8)
    frozen = np.arange(3 << 20, dtype=np.float32)
    frozen.flags.writeable = False
    return arrays + [frozen]


def _accepts_direct_writes(directory: Path) -> bool:
    try:
        os.close(os.open(directory / "probe", os.O_WRONLY | os.O_CREAT | getattr(os, "O_DIRECT", 0)))
    except OSError:
        return False
    return hasattr(os, "O_DIRECT")


def _o_direct(fd: int) -> bool:
    """Whether `fd` is in direct mode now."""
    import fcntl

    return bool(fcntl.fcntl(fd, fcntl.F_GETFL) & getattr(os, "O_DIRECT", 0))


@pytest.mark.parametrize("direct", ["1", "0"])
def test_large_buffers_go_to_the_disk_directly_at_any_alignment(tmp_path: Path, direct: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAGC_DIRECT_IO", direct)
    written_directly: list[int] = []
    real_pwrite = os.pwrite

    def pwrite(fd: int, data: memoryview, offset: int) -> int:
        if _o_direct(fd):
            written_directly.append(len(data))
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", pwrite)
    arrays = _arrays_at_every_phase()
    path = tmp_path / "out.pkl"
    written = write_sealed(path, dumps((arrays, torch.arange(10.0), "tag")))
    assert written == path.stat().st_size
    expect_direct = direct == "1" and _accepts_direct_writes(tmp_path)
    assert bool(written_directly) == expect_direct
    assert all(n % 4096 == 0 for n in written_directly)  # whole pages only
    loaded, small, tag = load_sealed(path)
    assert tag == "tag" and torch.equal(small, torch.arange(10.0))
    for original, back in zip(arrays, loaded):
        assert np.array_equal(back, original)
        assert back.ctypes.data % 4096 == original.ctypes.data % 4096  # aligned as it was
    data = bytearray(path.read_bytes())
    data[-5] ^= 1  # in the last buffer's tail, written through the page cache
    path.write_bytes(bytes(data))
    with pytest.raises(DamagedOutput, match="do not match their digest"):
        load_sealed(path)


def test_a_file_system_that_refuses_direct_writes_gets_them_through_the_page_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    refused: list[int] = []
    real_pwrite = os.pwrite

    def pwrite(fd: int, data: memoryview, offset: int) -> int:
        if _o_direct(fd):
            refused.append(offset)
            raise OSError(22, "Invalid argument")  # EINVAL: what a file system with larger blocks says
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", pwrite)
    x = torch.rand(4 << 20)  # 16 MiB
    path = tmp_path / "out.pkl"
    write_sealed(path, dumps(x))
    if _accepts_direct_writes(tmp_path):
        assert refused and refused[0] % 4096 == 0  # tried at a page boundary, and refused
    assert torch.equal(load_sealed(path), x)


def test_a_file_system_that_refuses_direct_reads_gets_them_through_the_page_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    x = torch.rand(4 << 20)  # 16 MiB
    path = tmp_path / "out.pkl"
    write_sealed(path, dumps(x))
    tried: list[bool] = []

    def preadv(fd: int, buffers: list, offset: int) -> int:
        tried.append(_o_direct(fd))
        raise OSError(22, "Invalid argument")  # EINVAL: what a file system that refuses O_DIRECT says

    monkeypatch.setattr(os, "preadv", preadv)
    assert torch.equal(load_sealed(path), x)
    assert tried == ([True] if _accepts_direct_writes(tmp_path) else [])


def test_a_file_sealed_by_another_version_says_so(tmp_path: Path) -> None:
    from dagc.runtime.store import check_sealed

    path = tmp_path / "out.pkl"
    write_sealed(path, dumps({"a": 1}))
    data = bytearray(path.read_bytes())
    data[4] = 3  # the format before this one
    path.write_bytes(bytes(data))
    assert "another version of dagc (format 3" in (check_sealed(path) or "")
    with pytest.raises(DamagedOutput, match="another version of dagc"):
        load_sealed(path)


def test_a_part_carries_its_pickle_on_without_pickling_or_copying_again() -> None:
    x = torch.arange(1 << 16, dtype=torch.float64)
    stored, parts = dumps_outputs((x, "label", [1, 2]), 3)
    assert len(parts) == 3 and all(isinstance(p, Part) for p in parts)
    buffers: list[pickle.PickleBuffer] = []
    stream = pickle.dumps(parts[0], protocol=5, buffer_callback=buffers.append)
    assert len(stream) < 1024 and len(buffers) == 1
    assert _address(buffers[0].raw()) == x.data_ptr()  # handed on where it lies
    read_only = [memoryview(b.raw()).toreadonly() for b in buffers]  # as an object store gives them
    got = pickle.loads(stream, buffers=read_only)
    assert torch.equal(got, x)
    got += 1  # still a tensor of its own
    assert torch.equal(x, torch.arange(1 << 16, dtype=torch.float64))
    # the stored file holds the outputs as a tuple
    assert pickle.loads(stored.stream, buffers=stored.buffers)[1:] == ("label", [1, 2])
    one, [part] = dumps_outputs(x, 1)
    assert part.pickled is one


COUNTED = '''\
import dagc

COUNT = {count!r}


class Counted:
    """A value that notes each time it is pickled (in the file COUNT)."""

    def __init__(self, payload: list) -> None:
        self.payload = payload

    def __reduce__(self):
        with open(COUNT, "a") as f:
            f.write("pickled\\n")
        return Counted, (self.payload,)


@dagc.task
def make(n: int) -> Counted:
    return Counted(list(range(n)))


@dagc.task
def size(c: Counted) -> int:
    return len(c.payload)


@dagc.pipeline
def counted(n: int = 5):
    return size(make(n))
'''


@pytest.mark.slow
def test_a_ray_tasks_output_is_pickled_once(tmp_path: Path, ray_cluster) -> None:  # type: ignore[no-untyped-def]
    script = tmp_path / "counted.py"
    count = tmp_path / "count.txt"
    script.write_text(COUNTED.format(count=str(count)), encoding="utf-8")
    program = tmp_path / "counted_ray.py"
    program.write_text(emit(compile_file(script, cluster=parse_cluster_spec("1")), "ray", program))
    proc = run_python([str(program), "--address", ray_cluster.address, "--run-dir",
                           str(tmp_path / "run"), "--result", str(tmp_path / "r.pkl")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert pickle.loads((tmp_path / "r.pkl").read_bytes()) == 5
    # once: stored and sent to `size` by the one pickle (Ray's object store takes it as it is)
    assert count.read_text().count("pickled") == 1


RECOMPUTED = '''\
import random
import struct
import time

import dagc


@dagc.task
def blob(n: int) -> bytes:
    return bytes(n)


@dagc.task
def noisy(n: int) -> bytes:
    return random.randbytes(n)  # an unseeded draw: computed again, it would differ


def _header() -> bytes:
    return struct.pack("d", time.time())


@dagc.task
def stamped(n: int) -> bytes:
    return _header() + bytes(n)  # the clock, through a helper: computed again, it would differ


@dagc.task
def size(b: bytes) -> int:
    return len(b)


@dagc.pipeline
def sizes(n: int = 40 * 2**20):
    return size(blob(n)), size(noisy(n)), size(stamped(n))
'''


def test_a_large_output_cheaper_to_compute_again_is_not_stored(tmp_path: Path) -> None:
    """The local program does not store a large output that its task computes the same way again faster
    than it could be stored (here: any, at an assumed store rate of 1 byte/s); `--resume` computes it
    again. An output its task would not compute the same way again (an unseeded draw, the clock read in a
    helper) is stored however cheap, and `--store-all` stores everything."""
    from dagc.runtime.events import read_events

    script = tmp_path / "sizes.py"
    script.write_text(RECOMPUTED, encoding="utf-8")
    program = tmp_path / "sizes_local.py"
    program.write_text(emit(compile_file(script), "local", program))
    env = {**os.environ, "DAGC_STORE_RATE": "1"}

    def run(*args: str) -> tuple:
        out = tmp_path / "result.pkl"
        proc = run_python([str(program), "--result", str(out), *args], capture_output=True, text=True,
                          timeout=120, env=env)
        assert proc.returncode == 0, proc.stderr
        return pickle.loads(out.read_bytes())

    graph = compile_file(script)
    assert "calls `_header`, which calls `time.time()`" in graph.node("stamped").attributes()["effects.varies"]
    n = 40 * 2**20
    run_dir = tmp_path / "run"
    assert run("--run-dir", str(run_dir)) == (n, n, n + 8)
    assert sorted(p.name for p in (run_dir / "outputs").iterdir()) == ["noisy", "size", "size.1", "size.2",
                                                                       "stamped"]
    (event,) = read_events(run_dir / "events.jsonl", event="recomputable")
    assert event["task"] == "blob" and event["bytes"] >= n
    assert run("--resume", str(run_dir)) == (n, n, n + 8)
    last = read_events(run_dir / "events.jsonl")[-1]["run"]
    assert [e["task"] for e in read_events(run_dir / "events.jsonl", run=last, event="start")] == ["blob"]
    every = tmp_path / "every"
    assert run("--run-dir", str(every), "--store-all") == (n, n, n + 8)
    assert sorted(p.name for p in (every / "outputs").iterdir()) == ["blob", "noisy", "size", "size.1", "size.2",
                                                                     "stamped"]
