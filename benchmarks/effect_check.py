"""What the run-time check of effects costs (dagc.runtime.effectcheck), on the samples and on real-sized data.

Each sample's local program is run in one process with the check (the local default) and without it
(`--no-check-effects`), alternating, several times; the figure is the ratio of the median wall times.
The check walks what each task's arguments reach (tensor version counters, container items), reads
the global generators' states and watches file opens, so its cost grows with the number of objects a
task receives, not with the size of tensors (their version counters are compared); numpy arrays and pandas
objects have none and are compared by content (a BLAKE3 digest of their bytes, pandas' own row hashes),
so a chain passing a 256 MiB array and a DataFrame of a million rows is measured too.

Run: `python -m benchmarks.effect_check [--quick]`.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["run"]

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ["quickstart", "mnist", "stats_flow", "hparam_sweep", "sharded_training", "kfp_training"]

BIG = '''\
import torch

import dagc


@dagc.task
def make(mib: int) -> torch.Tensor:
    return torch.ones(mib * 2**18)  # float32: `mib` MiB


@dagc.task
def scale(x: torch.Tensor, k: float) -> torch.Tensor:
    return x * k


@dagc.task
def bump(x: torch.Tensor) -> None:
    x += 1


@dagc.task
def total(x: torch.Tensor) -> float:
    return float(x[:1000].sum())


@dagc.pipeline
def big(mib: int = 256):
    x = make(mib)
    y = scale(x, 2.0)
    bump(y)
    return total(y)
'''


ARRAYS = '''\
import numpy as np
import pandas as pd

import dagc


@dagc.task
def make(mib: int) -> np.ndarray:
    return np.ones(mib * 2**17)  # float64: `mib` MiB


@dagc.task
def scale(x: np.ndarray, k: float) -> np.ndarray:
    return x * k


@dagc.task
def frame(x: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"a": x[: 2**20], "b": x[: 2**20] * 2})


@dagc.task
def summary(x: np.ndarray, df: pd.DataFrame) -> float:
    return float(x[:1000].sum() + df["b"].mean())


@dagc.pipeline
def arrays(mib: int = 256):
    x = make(mib)
    y = scale(x, 2.0)
    return summary(y, frame(y))
'''


def _program(script: Path, out: Path) -> Path:
    from dagc.backends import emit
    from dagc.driver import compile_file

    graph = compile_file(script)
    out.write_text(emit(graph, "local", out))
    return out


def _time(program: Path, *extra: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, str(program), "--result", str(program.with_suffix(".pkl")), *extra],
                   check=True, capture_output=True, timeout=600)
    return time.perf_counter() - start


def run(quick: bool = False) -> str:
    reps = 3 if quick else 5
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        programs = [(name, _program(ROOT / "samples" / f"{name}.py", Path(tmp) / f"{name}_local.py"))
                    for name in SAMPLES]
        big = Path(tmp) / "big.py"
        big.write_text(BIG, encoding="utf-8")
        programs.append(("256 MiB tensor chain", _program(big, Path(tmp) / "big_local.py")))
        arrays = Path(tmp) / "arrays.py"
        arrays.write_text(ARRAYS, encoding="utf-8")
        programs.append(("256 MiB numpy chain, 1M-row DataFrame", _program(arrays, Path(tmp) / "arrays_local.py")))
        for name, program in programs:
            warm = _time(program)  # (also warms the file cache)
            on, off = [], []
            # a program of a fraction of a second is timed more often: its ratio is otherwise start-up noise
            for _ in range(reps if warm > 0.5 else 4 * reps):
                on.append(_time(program))
                off.append(_time(program, "--no-check-effects"))
            ratio = statistics.median(on) / statistics.median(off)
            rows.append((name, statistics.median(off), statistics.median(on), ratio))
    lines = [
        f"Local programs, each run {reps} times ({4 * reps} for those under half a second) with the check and "
        "without it, alternating (median wall time of the whole process, start-up included).",
        "",
        "| program | without the check | with the check | ratio |",
        "|---|---:|---:|---:|",
    ]
    lines += [f"| {name} | {off:.2f} s | {on:.2f} s | {ratio:.3f} |" for name, off, on, ratio in rows]
    worst = max(r[3] for r in rows)
    lines += ["", f"- worst ratio: {worst:.3f} (target: at most 1.05)."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(run("--quick" in sys.argv))
