"""Learned costs: a pipeline without cost annotations, planned from the 1 s default on its first run and from
what that run measured on the next (dagc.runtime.costs, dagc.learned), against hand-written Ray.

Eight independent tasks of `time.sleep` (so that the ratios mean something on a loaded 2-core machine), one of
them eight times longer than the others, listed first or last, then a fan-in. No task declares `cost=`:

- hand-written Ray: submit every task, gather (2 CPUs): the long task starts when a worker frees up;
- dagc's Ray program on 2 devices, compiled with an empty cost store (every task is taken to take 1 s), then
  compiled again with no flag after that run recorded its tasks (the second run's plan puts the long task
  alone on one device);
- the optimum: the long task alone, the seven short ones on the other device.

Makespans are the runs' own (first task start to last task end: event logs for dagc, the driver's clock
around submit-and-gather for Ray), medians of repeated runs against one warm local Ray per program.

Run: `python -m benchmarks.learned_costs [--quick]`.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

__all__ = ["run"]

SHORT, LONG, COUNT = 0.25, 2.0, 8


def source(long_first: bool) -> str:
    seconds = [LONG] + [SHORT] * (COUNT - 1) if long_first else [SHORT] * (COUNT - 1) + [LONG]
    calls = ", ".join(f"work({i}, {s})" for i, s in enumerate(seconds))
    return textwrap.dedent(f"""\
        import time

        import dagc


        @dagc.task
        def work(i: int, seconds: float) -> int:
            time.sleep(seconds)
            return i


        @dagc.task
        def gather(xs: list) -> int:
            return sum(xs)


        @dagc.pipeline
        def skewed():
            return gather([{calls}])
        """)


def _program(script: Path, store: Path, out: Path) -> Path:
    from dagc.backends import emit
    from dagc.cluster import parse_cluster_spec
    from dagc.driver import compile_file

    graph = compile_file(script, cluster=parse_cluster_spec("2"), backend="ray", cost_store=store)
    out.write_text(emit(graph, "ray", out))
    return out


def _dagc_runs(program: Path, store: Path, tmp: Path, tag: str, reps: int) -> list[float]:
    """The program's makespans over `reps` runs against one warm local Ray (one warm-up run first)."""
    driver = tmp / f"driver_{tag}.py"
    driver.write_text(textwrap.dedent(f"""
        import runpy, sys
        import ray
        sys.path.insert(0, {str(tmp)!r})
        ray.init(address="local", num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False,
                 runtime_env={{"env_vars": {{"PYTHONPATH": {str(tmp)!r}}}}})
        ns = runpy.run_path({str(program)!r}, run_name="dagc_program")
        for i in range({reps + 1}):
            assert ns["main"](["--run-dir", {str(tmp)!r} + f"/run_{tag}_{{i}}", "--cost-store", {str(store)!r}]) == 0
        ray.shutdown()
    """))
    proc = subprocess.run([sys.executable, str(driver)], capture_output=True, text=True, timeout=900, cwd=tmp)
    if proc.returncode != 0:
        raise RuntimeError(f"Ray run failed:\n{proc.stderr[-2000:]}")
    from dagc.profile import load_run

    return [load_run(tmp / f"run_{tag}_{i}").makespan for i in range(1, reps + 1)]


def _hand_written(long_first: bool, reps: int) -> list[float]:
    seconds = [LONG] + [SHORT] * (COUNT - 1) if long_first else [SHORT] * (COUNT - 1) + [LONG]
    code = textwrap.dedent(f"""
        import json, time
        import ray
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)

        @ray.remote
        def work(i, seconds):
            time.sleep(seconds)
            return i

        @ray.remote
        def gather(*xs):
            return sum(xs)

        out = []
        for rep in range({reps + 1}):
            start = time.perf_counter()
            refs = [work.remote(i, s) for i, s in enumerate({seconds!r})]
            ray.get(gather.remote(*refs))
            out.append(time.perf_counter() - start)
        print(json.dumps(out[1:]))
        ray.shutdown()
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"hand-written Ray failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(quick: bool = False) -> str:
    reps = 2 if quick else 4
    optimum = max(LONG, SHORT * (COUNT - 1))
    rows = ["| long task | hand-written Ray | dagc, first run (1 s defaults) | dagc, second run (learned) | "
            "optimum | first / Ray | second / Ray |", "|---|---:|---:|---:|---:|---:|---:|"]
    for long_first in (True, False):
        with tempfile.TemporaryDirectory(prefix="dagc-learned-") as name:
            tmp = Path(name)
            script = tmp / "skewed.py"
            script.write_text(source(long_first))
            store = tmp / "store"
            first = _dagc_runs(_program(script, store, tmp / "skewed_first.py"), store, tmp, "first", reps)
            second_program = _program(script, store, tmp / "skewed_second.py")  # planned from what the runs took
            second = _dagc_runs(second_program, store, tmp, "second", reps)
            ray = _hand_written(long_first, reps)
        f, s, r = statistics.median(first), statistics.median(second), statistics.median(ray)
        rows.append(f"| {'first' if long_first else 'last'} | {r:.2f} s | {f:.2f} s | {s:.2f} s | {optimum:.2f} s | "
                    f"{f / r:.2f} | {s / r:.2f} |")
    return "\n".join([
        f"Eight independent `time.sleep` tasks without `cost=` ({COUNT - 1} of {SHORT} s, one of {LONG} s) and a "
        f"fan-in, on 2 devices (2 CPUs); medians of {reps} runs each against a warm local Ray.", "",
        *rows, "",
        "- first run: every task is a 1 s guess, so the plan spreads them evenly and the long task may share its "
        "device with short ones;",
        "- second run: the same program compiled again, without a flag, after the first runs recorded their tasks "
        "in the cost store.",
    ]) + "\n"


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv))
