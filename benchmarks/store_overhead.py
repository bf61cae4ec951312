"""What keeping outputs costs: a 4-task chain passing a 256 MiB tensor, with and without a run directory.

Local: the local program with `--run-dir` (every output stored, sealed) against plain Python calling the
pipeline function. Ray: the Ray program (which always keeps a run directory) against the same chain written
by hand with `ray.remote`, on a Ray started once for both. Each pair runs alternately, several times, in
fresh interpreters; the figures are medians and their ratio.

Run: `python -m benchmarks.store_overhead [--quick]`.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["run"]

ROOT = Path(__file__).resolve().parents[1]

CHAIN = '''\
import torch

import dagc


@dagc.task
def make(mib: int) -> torch.Tensor:
    return torch.ones(mib * 2**18)  # float32: `mib` MiB


@dagc.task
def scale(x: torch.Tensor, k: float) -> torch.Tensor:
    return x * k


@dagc.task
def shift(x: torch.Tensor, k: float) -> torch.Tensor:
    return x + k


@dagc.task
def total(x: torch.Tensor) -> float:
    return float(x[:1000].sum())


@dagc.pipeline
def chain(mib: int = 256):
    x = make(mib)
    y = scale(x, 2.0)
    z = shift(y, 1.0)
    return total(z)
'''

PLAIN = '''\
import sys
sys.path.insert(0, {root!r})
from chain import chain
print(chain({mib}))
'''

BY_HAND = '''\
import sys
import ray
import torch
ray.init(address={address!r}, log_to_driver=False)

@ray.remote
def make(mib):
    return torch.ones(mib * 2**18)

@ray.remote
def scale(x, k):
    return x * k

@ray.remote
def shift(x, k):
    return x + k

@ray.remote
def total(x):
    return float(x[:1000].sum())

print(ray.get(total.remote(shift.remote(scale.remote(make.remote({mib}), 2.0), 1.0))))
'''


def _time(command: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, capture_output=True, timeout=600)
    return time.perf_counter() - start


def _pairs(a: list[str], b: list[str], cwd: Path, repeats: int, clean: Path | None = None) -> tuple[float, float]:
    times_a, times_b = [], []
    for _ in range(repeats):
        if clean is not None:
            shutil.rmtree(clean, ignore_errors=True)
        times_a.append(_time(a, cwd))
        times_b.append(_time(b, cwd))
    return statistics.median(times_a), statistics.median(times_b)


def run(quick: bool = False) -> str:
    from dagc.backends import emit
    from dagc.cluster import parse_cluster_spec
    from dagc.driver import compile_file

    mib = 64 if quick else 256
    repeats = 2 if quick else 5
    lines = ["## store_overhead", "",
             f"A 4-task chain passing a {mib} MiB tensor (make → scale → shift → total), medians of {repeats} "
             "alternating runs in fresh interpreters.", "",
             "| engine | dagc, outputs stored | reference | reference is | ratio |", "|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory(prefix="dagc-store-") as tmp:
        root = Path(tmp)
        script = root / "chain.py"
        script.write_text(CHAIN, encoding="utf-8")
        (root / "plain.py").write_text(PLAIN.format(root=str(root), mib=mib), encoding="utf-8")
        local = root / "chain_local.py"
        local.write_text(emit(compile_file(script, params={"mib": mib}), "local", local))
        run_dir = root / "run"
        stored, plain = _pairs([sys.executable, str(local), "--run-dir", str(run_dir)],
                               [sys.executable, str(root / "plain.py")], root, repeats, clean=run_dir)
        lines.append(f"| local | {stored:.2f} s | {plain:.2f} s | plain Python | {stored / plain:.2f}x |")

        import ray

        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=4 * mib * 2**20)
        try:
            address = ray.get_runtime_context().gcs_address
            program = root / "chain_ray.py"
            program.write_text(emit(compile_file(script, params={"mib": mib}, cluster=parse_cluster_spec("1")),
                                    "ray", program))
            (root / "by_hand.py").write_text(BY_HAND.format(address=address, mib=mib), encoding="utf-8")
            stored, by_hand = _pairs([sys.executable, str(program), "--address", address, "--run-dir", str(run_dir)],
                                     [sys.executable, str(root / "by_hand.py")], root, repeats, clean=run_dir)
        finally:
            ray.shutdown()
        lines.append(f"| Ray (1 device) | {stored:.2f} s | {by_hand:.2f} s | `ray.remote` by hand, nothing stored "
                     f"| {stored / by_hand:.2f}x |")
    lines += ["", "Goals: local within 1.10x of plain Python, Ray within 1.15x of the hand-written chain.",
              "Where the time goes, per 256 MiB output: the seal (HMAC-SHA-256, about 0.3 s here) and the write "
              "(0.1 s into warm page cache, up to 0.9 s where the machine first touches fresh pages); pickling "
              "copies nothing (tensor data out of band). The local program writes behind the run, but this chain "
              "computes for about 0.1 s per task, so the three 256 MiB writes are most of what it adds; on Ray "
              "they run on the workers, beside Ray's own object-store copies."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv))
