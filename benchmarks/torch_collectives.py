"""Collectives the compiler chooses against the point-to-point messages they replace, side by side.

Four gloo ranks on this machine, interleaved rounds so that every way sees the same machine state:

- fan-out:  a 64 MiB float32 tensor on rank 0 read on ranks 1, 2, 3: three `send_value`s (what the
            `comm` pass emitted before) against one `broadcast_value` (what it emits now);
- fan-in:   a 4-way sum of 16 MiB float32 tensors onto rank 0: three receives and the additions on
            rank 0 against one `dist.reduce` (the form of a reduction collective);
- bf16:     the 64 MiB tensor sent to one rank in float32 against `compress="bf16"` (half the bytes;
            cast on both ends).

Times are medians over the rounds, from a shared barrier to the end of the slowest rank's part
(a barrier after the operation; it costs every way the same). "Root sends" is what rank 0 wrote to
its sockets (`wchar` in /proc/self/io: gloo writes with writev), so it is measured, not modelled.
Run: `python -m benchmarks.torch_collectives [--quick]`.
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

SIZE = 64 * 2**20  # bytes broadcast
SUM_SIZE = 16 * 2**20  # bytes of each summand


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _written() -> int:
    try:
        for line in Path("/proc/self/io").read_text().splitlines():
            if line.startswith("wchar:"):
                return int(line.split()[1])
    except OSError:
        pass
    return -1


def _worker(out: str, reps: int) -> None:
    import torch
    import torch.distributed as dist

    from dagc.runtime.distributed import broadcast_value, recv_value, send_value, static_buffer

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    group = dist.new_group(list(range(world)))  # made once, up front, as the emitted programs do
    cpu = torch.device("cpu")
    n = SIZE // 4
    static = ("float32", (n,))
    tensor = torch.arange(n, dtype=torch.float32) / 3 if rank == 0 else None
    part = torch.full((SUM_SIZE // 4,), float(rank + 1))
    kinds = ("sends", "broadcast", "receives", "reduce", "fp32", "bf16")
    times: dict[str, list[float]] = {k: [] for k in kinds}
    sent: dict[str, list[int]] = {k: [] for k in kinds}
    for rep in range(reps + 1):  # the first round warms up
        for kind in kinds:
            # the emitted program allocates static tensors' buffers (in the wire's dtype) before the run
            wire = ("bfloat16", static[1]) if kind == "bf16" else static
            buffers = [static_buffer(wire, cpu)] if rank else []
            dist.barrier()
            before = _written()
            start = time.perf_counter()
            if kind == "sends":
                if rank == 0:
                    for dst in range(1, world):
                        send_value(tensor, dst, 1, cpu, static)
                else:
                    got = recv_value(0, 1, cpu, static, buffers[0])
            elif kind == "broadcast":
                got = broadcast_value(tensor, 0, group, cpu, static, out=buffers[0] if rank else None)
            elif kind == "receives":
                if rank == 0:
                    total = part.clone()
                    received = torch.empty_like(part)  # one buffer, reused: as a reduce does
                    for src in range(1, world):
                        total += recv_value(src, 2, cpu, ("float32", tuple(part.shape)), received)
                else:
                    send_value(part, 0, 2, cpu, ("float32", tuple(part.shape)))
            elif kind == "reduce":
                total = part.clone()
                dist.reduce(total, 0, group=group)
            elif rank in (0, 1):  # point-to-point, fp32 against bf16 on the wire
                compress = "bf16" if kind == "bf16" else None
                if rank == 0:
                    send_value(tensor, 1, 3, cpu, static, compress)
                else:
                    got = recv_value(0, 3, cpu, static, buffers[0], compress)
            written = _written() - before
            dist.barrier()
            elapsed = time.perf_counter() - start
            if rep:
                times[kind].append(elapsed)
                sent[kind].append(written)
            if rank == 0 and kind in ("receives", "reduce"):
                assert float(total[0]) == world * (world + 1) / 2
            if rank == 1 and kind in ("sends", "broadcast", "fp32"):
                assert float(got[-1]) == float(tensor_last(n))
    if rank == 0:
        Path(out).write_text(json.dumps({"times": times, "sent": sent}))
    dist.barrier()
    dist.destroy_process_group()


def tensor_last(n: int) -> float:
    import torch

    return float(torch.tensor(n - 1, dtype=torch.float32) / 3)


def measure(reps: int) -> dict[str, dict[str, list[float]]]:
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "times.json")
        config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=4, run_id=uuid.uuid4().hex,
                              rdzv_backend="c10d", rdzv_endpoint=f"127.0.0.1:{_free_port()}",
                              max_restarts=0, monitor_interval=0.05, start_method="spawn")
        elastic_launch(config, _worker)(out, reps)
        return json.loads(Path(out).read_text())


def _mib(nbytes: float) -> str:
    return f"{nbytes / 2**20:.0f} MiB" if nbytes >= 0 else "n/a"


def run(quick: bool = False) -> str:
    """Markdown table: each pair's median time, the root's bytes, and the speed-up."""
    import torch

    reps = 5 if quick else 15
    data = measure(reps)
    times, sent = data["times"], data["sent"]
    lines = [
        "### torch backend: collectives vs point-to-point, and bf16 transfer",
        "",
        f"4 gloo ranks on one machine, median of {reps} interleaved rounds (torch {torch.__version__}, "
        f"{os.cpu_count()} CPUs); \"root sends\" is measured (bytes rank 0 wrote to its sockets).",
        "",
        "| what | point-to-point | root sends | collective / compressed | root sends | speed-up |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for a, b, label in (("sends", "broadcast", "64 MiB to 3 readers: 3 sends vs broadcast"),
                        ("receives", "reduce", "4-way sum of 16 MiB: 3 receives + adds vs reduce"),
                        ("fp32", "bf16", "64 MiB float32 to 1 reader: fp32 vs bf16 on the wire")):
        ta, tb = statistics.median(times[a]), statistics.median(times[b])
        sa, sb = statistics.median(sent[a]), statistics.median(sent[b])
        lines.append(f"| {label} | {ta * 1e3:.1f} ms | {_mib(sa)} | {tb * 1e3:.1f} ms | {_mib(sb)} | "
                     f"{ta / tb:.2f}× |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv[1:]))
