"""Start-up: whole processes of `dagc --help` and `dagc check` on a small file, side by side with
`python -c pass` (the interpreter alone) and with importing networkx (what dagc no longer loads to
start), in interleaved rounds so that a slow moment of the machine hits every command alike.

Bytecode is cached, as in any installed package: the processes run with a fresh
PYTHONPYCACHEPREFIX (and without PYTHONDONTWRITEBYTECODE), after one warm-up run of each command.

    python benchmarks/startup.py [--quick]      # prints a markdown section
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SMALL = '''import dagc


@dagc.task(cost="2s", out_size="1MB")
def load(n: int) -> list:
    return list(range(n))


@dagc.task(cost="1s")
def total(xs: list) -> int:
    return sum(xs)


@dagc.pipeline
def small(n: int = 10):
    return total(load(n))
'''
LIMIT = 0.2  # seconds: the start-up the command line promises on the development machine


def _dagc() -> list[str]:
    """The `dagc` console script of this interpreter, as users run it (else `python -m dagc.cli`)."""
    script = Path(sys.executable).parent / "dagc"
    return [str(script)] if script.exists() else [sys.executable, "-m", "dagc.cli"]


def commands(small: Path) -> dict[str, list[str]]:
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -c 'import dagc'": [sys.executable, "-c", "import dagc"],
        "python -c 'import networkx'": [sys.executable, "-c", "import networkx"],
        "dagc --help": [*_dagc(), "--help"],
        "dagc check small.py": [*_dagc(), "check", str(small)],
    }


def measure(rounds: int) -> dict[str, list[float]]:
    """Seconds of each command per round; the commands alternate within every round."""
    with tempfile.TemporaryDirectory(prefix="dagc-startup-") as tmp:
        small = Path(tmp) / "small.py"
        small.write_text(SMALL, encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        cmds = commands(small)
        times: dict[str, list[float]] = {name: [] for name in cmds}
        for name, cmd in cmds.items():  # warm-up: writes the bytecode cache
            proc = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"{name} failed: {proc.stderr[-500:]}")
        names = list(cmds)
        for r in range(rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                start = time.perf_counter()
                subprocess.run(cmds[name], env=env, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                times[name].append(time.perf_counter() - start)
    return times


def run(quick: bool = False) -> str:
    rounds = 10 if quick else 40
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    times = measure(rounds)
    base = statistics.median(times["python -c pass"])
    lines = [
        "## Start-up",
        "",
        f"Whole processes, {rounds} interleaved rounds, bytecode cached; median and fastest run, the median's "
        "ratio to the bare interpreter's, and the time on top of it. Load average when the run began: "
        f"{load:.1f} on {os.cpu_count()} cores (other work on a shared machine slows every row alike; the ratios "
        "and the fastest runs are the steadier figures).",
        "",
        "| command | median | fastest | ratio to `python -c pass` | on top of the interpreter |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, xs in times.items():
        median = statistics.median(xs)
        lines.append(f"| `{name}` | {median * 1e3:.0f} ms | {min(xs) * 1e3:.0f} ms | {median / base:.2f}x | "
                     f"{(median - base) * 1e3:.0f} ms |")
    lines.append("")
    for name in ("dagc --help", "dagc check small.py"):
        median = statistics.median(times[name])
        verdict = "under" if median < LIMIT else "OVER"
        lines.append(f"- `{name}`: median {median * 1e3:.0f} ms, {verdict} the {LIMIT * 1e3:.0f} ms target.")
    lines.append("- networkx, graphviz and tomllib are imported only by the commands that use them "
                 "(tests/test_startup.py checks that `dagc --help` and `dagc check` load none of them).")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(run(quick="--quick" in sys.argv))
