"""Compile time of dagc against Kubeflow Pipelines' compiler, for the same pipeline.

The pipeline is a straight line of N tasks, each reading the previous task's result and the one
before it (`t_i = step(t_{i-1}, t_{i-2}, i)`), written once for dagc (`@dagc.task`/`@dagc.pipeline`)
and once for KFP v2 (`@dsl.component`/`@dsl.pipeline`). dagc's time is its frontend plus `verify`
(reading the file, never running it); KFP's time is loading the module (which runs the pipeline
function to trace it) plus `Compiler().compile` to YAML. Both are also given as a multiple of
CPython's `ast.parse` of the dagc file, measured in the same run.

Needs the `kfp` package, which is not a dagc dependency; without it the section says so.
Run: `python -m benchmarks.kfp_compare [--quick]`.
"""

from __future__ import annotations

import ast
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["run"]


def dagc_source(n: int) -> str:
    lines = ["import dagc", "", "", '@dagc.task(cost="1s", out_size="8B")',
             "def step(a: int, b: int, k: int) -> int:", "    return (a * 31 + b + k) % 1000003", "", "",
             "@dagc.pipeline", "def chain():", "    t0 = step(0, 0, 0)", "    t1 = step(t0, 0, 1)"]
    lines += [f"    t{i} = step(t{i - 1}, t{i - 2}, {i})" for i in range(2, n)]
    lines.append(f"    return t{n - 1}")
    return "\n".join(lines) + "\n"


def kfp_source(n: int) -> str:
    lines = ["from kfp import dsl", "", "", "@dsl.component", "def step(a: int, b: int, k: int) -> int:",
             "    return (a * 31 + b + k) % 1000003", "", "", '@dsl.pipeline(name="chain")', "def chain():",
             "    t0 = step(a=0, b=0, k=0)", "    t1 = step(a=t0.output, b=0, k=1)"]
    lines += [f"    t{i} = step(a=t{i - 1}.output, b=t{i - 2}.output, k={i})" for i in range(2, n)]
    return "\n".join(lines) + "\n"


def _median_time(fn, reps: int) -> float:  # noqa: ANN001
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _kfp_compile(path: Path, out: Path) -> None:
    from kfp import compiler

    spec = importlib.util.spec_from_file_location(f"kfp_chain_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    compiler.Compiler().compile(module.chain, str(out))


def run(quick: bool = False) -> str:
    """The comparison as a markdown section, or a note when kfp is not installed."""
    header = ["### Compile time: dagc vs Kubeflow Pipelines (`kfp`)", ""]
    try:
        import kfp
    except ImportError:
        return "\n".join(header + [
            "*Skipped: the `kfp` package is not installed here (it is not a dagc dependency). Install it "
            "(`pip install kfp`) and rerun `python -m benchmarks --only kfp_compare` to add the comparison.*",
            "",
        ])
    from dagc.driver import compile_file

    sizes = (100, 300) if quick else (100, 1000)
    reps = 1 if quick else 3
    lines = header + [
        f"Straight-line pipelines; kfp {kfp.__version__}; median of {reps} compile(s) each.",
        "",
        "| tasks | `ast.parse` | dagc (frontend + verify) | kfp (trace + compile) | dagc / ast | kfp / ast | "
        "kfp / dagc |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            d_path, k_path = Path(tmp) / f"chain_dagc_{n}.py", Path(tmp) / f"chain_kfp_{n}.py"
            d_path.write_text(dagc_source(n))
            k_path.write_text(kfp_source(n))
            text = d_path.read_text()
            t_ast = _median_time(lambda text=text: ast.parse(text), max(reps, 5))
            t_dagc = _median_time(lambda p=d_path: compile_file(p, passes="verify"), reps)
            t_kfp = _median_time(lambda p=k_path, n=n: _kfp_compile(p, Path(tmp) / f"chain_{n}.yaml"), reps)
            lines.append(f"| {n:,} | {t_ast * 1e3:.1f} ms | {t_dagc:.3f} s | {t_kfp:.3f} s | {t_dagc / t_ast:.1f}x | "
                         f"{t_kfp / t_ast:.0f}x | **{t_kfp / t_dagc:.0f}x** |")
    return "\n".join(lines + [""])


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv[1:]))
