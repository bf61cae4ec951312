"""The torch backend's transfer path against raw `dist.send`/`dist.recv`, side by side.

Two gloo ranks on this machine move a 64 MB float32 tensor from rank 0 to rank 1, repeatedly, in
three ways, interleaved so that they see the same machine state:

- raw:     `dist.send(t, 1)` / `dist.recv(buffer, 0)` into one buffer reused every time (the upper
           bound), and into a new buffer each time (what receiving a new value costs);
- static:  the emitted program's path for a tensor whose dtype and shape the compiler knows
           (`Tensor[float32, N]`): no header, received into a buffer allocated for it;
- dynamic: the path for any other tensor: a 96-byte header (dtype, shape), then the payload.

Each figure is the median over the repetitions of the receiver's time from a shared barrier to
the end of its receive. Run: `python -m benchmarks.torch_transfer [--quick]`.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

__all__ = ["run"]

os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")  # as the emitted programs do

SIZE = 64 * 2**20  # bytes


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker(out: str, reps: int, nbytes: int) -> None:
    import torch
    import torch.distributed as dist

    from dagc.runtime.distributed import recv_value, send_value, static_buffer

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    n = nbytes // 4
    cpu = torch.device("cpu")
    static = ("float32", (n,))
    tensor = torch.arange(n, dtype=torch.float32) if rank == 0 else None
    buffer = torch.empty(n, dtype=torch.float32)
    times: dict[str, list[float]] = {"raw": [], "fresh": [], "static": [], "dynamic": []}
    for rep in range(reps + 1):  # the first round warms up
        for kind in times:
            # the emitted program allocates a static tensor's buffer before the run starts
            preallocated = static_buffer(static, cpu) if kind == "static" and rank == 1 else None
            dist.barrier()
            start = time.perf_counter()
            if rank == 0:
                if kind in ("raw", "fresh"):
                    dist.send(tensor, 1, tag=1)
                else:
                    send_value(tensor, 1, 1, cpu, static if kind == "static" else None)
            else:
                if kind == "raw":
                    dist.recv(buffer, 0, tag=1)
                    received = buffer
                elif kind == "fresh":
                    received = torch.empty(n, dtype=torch.float32)
                    dist.recv(received, 0, tag=1)
                else:
                    received = recv_value(0, 1, cpu, static if kind == "static" else None, preallocated)
                elapsed = time.perf_counter() - start
                if rep:
                    times[kind].append(elapsed)
                assert received.shape == (n,) and float(received[-1]) == float(n - 1)
    if rank == 1:
        Path(out).write_text(json.dumps(times))
    dist.barrier()
    dist.destroy_process_group()


def measure(reps: int, nbytes: int = SIZE) -> dict[str, list[float]]:
    """Seconds per transfer of `nbytes`, for each way (two ranks launched in-process)."""
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "times.json")
        config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=2, run_id=uuid.uuid4().hex,
                              rdzv_backend="c10d", rdzv_endpoint=f"127.0.0.1:{_free_port()}",
                              max_restarts=0, monitor_interval=0.05, start_method="spawn")
        elastic_launch(config, _worker)(out, reps, nbytes)
        return json.loads(Path(out).read_text())


def run(quick: bool = False) -> str:
    """Markdown table of the measured throughputs (GB/s) and the ratio to raw send/recv."""
    import torch

    reps = 5 if quick else 20
    times = measure(reps)
    raw = statistics.median(times["raw"])
    lines = [
        "### torch backend: transfer path vs raw `dist.send`/`dist.recv`",
        "",
        f"64 MiB float32 tensor, rank 0 → rank 1, gloo on one machine, median of {reps} transfers each, "
        f"interleaved (torch {torch.__version__}, {os.cpu_count()} CPUs).",
        "",
        "| path | median time | throughput | vs raw |",
        "|---|---:|---:|---:|",
    ]
    for kind, label in (("raw", "raw `dist.send`/`dist.recv`, one reused buffer"),
                        ("fresh", "raw `dist.send`/`dist.recv`, a new buffer each time"),
                        ("static", "emitted, static shape (buffer preallocated)"),
                        ("dynamic", "emitted, header + payload (buffer allocated on receipt)")):
        median = statistics.median(times[kind])
        lines.append(f"| {label} | {median * 1e3:.1f} ms | {SIZE / median / 1e9:.2f} GB/s | "
                     f"{raw / median * 100:.0f}% |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv[1:]))
