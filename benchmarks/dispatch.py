"""Dispatch by priority on Ray: ready tasks take free devices most critical first (dagc.runtime.dispatch), against
Ray's own order (`--dispatch static`) and hand-written Ray.

Shapes of `time.sleep` tasks without `cost=`, on 2 devices (2 CPUs), where a long task's input arrives a moment
after a row of short tasks could start (listed first, as a loop over data sources would list them):

- a late training: a 0.2 s preparation feeding a 1.6 s training, beside six 0.4 s tasks;
- two late trainings: preparations of 0.1 s and 0.3 s feeding trainings of 1.2 s each, beside four 0.3 s tasks;
- skewed, long last: seven 0.25 s tasks and one of 2 s listed last (no late input: priority cannot help more
  than the plan's order already does).

Each dagc program is compiled twice: once with an empty cost store (its runs record what each task took), then
again with no flag, planned from what they measured. The figures are the second program's runs, with
`--dispatch static` and with the default `--dispatch priority`, alternating, against one warm local Ray.
Makespans: first task start to last task end, from the event logs (dagc) and from the times the tasks
return (hand-written Ray), so that both leave out start-up and submission alike. Medians of repeated runs.

Run: `python -m benchmarks.dispatch [--quick]`.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from benchmarks.learned_costs import _program

__all__ = ["run"]

# name -> (preparations and the training each feeds: [(prep seconds, training seconds)], short tasks' seconds)
SHAPES: dict[str, tuple[list[tuple[float, float]], list[float]]] = {
    "a late training": ([(0.2, 1.6)], [0.4] * 6),
    "two late trainings": ([(0.1, 1.2), (0.3, 1.2)], [0.3] * 4),
    "skewed, long last": ([], [0.25] * 7 + [2.0]),
}


def source(chains: list[tuple[float, float]], shorts: list[float]) -> str:
    calls = [f"work({i}, {s})" for i, s in enumerate(shorts)]
    calls += [f"train({t}, prepare({p}))" for p, t in chains]
    return textwrap.dedent(f"""\
        import time

        import dagc


        @dagc.task
        def prepare(seconds: float) -> float:
            time.sleep(seconds)
            return 0.0


        @dagc.task
        def train(seconds: float, base: float) -> int:
            time.sleep(seconds)
            return 100


        @dagc.task
        def work(i: int, seconds: float) -> int:
            time.sleep(seconds)
            return i


        @dagc.task
        def gather(xs: list) -> int:
            return sum(xs)


        @dagc.pipeline
        def shape():
            return gather([{", ".join(calls)}])
        """)


def optimum(chains: list[tuple[float, float]], shorts: list[float]) -> float:
    """A lower bound on two devices: the longest chain, and half the total work."""
    total = sum(p + t for p, t in chains) + sum(shorts)
    return max([p + t for p, t in chains] + shorts + [total / 2])


def _dagc_runs(program: Path, store: Path, tmp: Path, modes: list[str], reps: int) -> dict[str, list[float]]:
    """The program's makespans per `--dispatch` mode, the modes alternating, against one warm local Ray."""
    driver = tmp / "driver.py"
    driver.write_text(textwrap.dedent(f"""
        import runpy, sys
        import ray
        sys.path.insert(0, {str(tmp)!r})
        ray.init(address="local", num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False,
                 runtime_env={{"env_vars": {{"PYTHONPATH": {str(tmp)!r}}}}})
        ns = runpy.run_path({str(program)!r}, run_name="dagc_program")
        for i in range({reps + 1}):
            for mode in {modes!r}:
                argv = ["--run-dir", {str(tmp)!r} + f"/run_{{mode}}_{{i}}", "--cost-store", {str(store)!r},
                        "--dispatch", mode]
                assert ns["main"](argv) == 0
        ray.shutdown()
    """))
    proc = subprocess.run([sys.executable, str(driver)], capture_output=True, text=True, timeout=900, cwd=tmp)
    if proc.returncode != 0:
        raise RuntimeError(f"Ray run failed:\n{proc.stderr[-2000:]}")
    from dagc.profile import load_run

    return {mode: [load_run(tmp / f"run_{mode}_{i}").makespan for i in range(1, reps + 1)] for mode in modes}


def _hand_written(chains: list[tuple[float, float]], shorts: list[float], reps: int) -> list[float]:
    """Hand-written Ray's makespans, measured as dagc's are: first task start to last task end (each task
    returns its value with the earliest start and latest end of its chain)."""
    code = textwrap.dedent(f"""
        import json, time
        import ray
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)

        @ray.remote
        def prepare(seconds):
            start = time.time()
            time.sleep(seconds)
            return 0.0, start, time.time()

        @ray.remote
        def train(seconds, base):
            start = time.time()
            time.sleep(seconds)
            return 100, min(start, base[1]), time.time()

        @ray.remote
        def work(i, seconds):
            start = time.time()
            time.sleep(seconds)
            return i, start, time.time()

        @ray.remote
        def gather(*xs):
            start = time.time()
            return sum(x[0] for x in xs), min([start, *(x[1] for x in xs)]), time.time()

        out = []
        for rep in range({reps + 1}):
            refs = [work.remote(i, s) for i, s in enumerate({shorts!r})]
            refs += [train.remote(t, prepare.remote(p)) for p, t in {chains!r}]
            _, first, last = ray.get(gather.remote(*refs))
            out.append(last - first)
        print(json.dumps(out[1:]))
        ray.shutdown()
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"hand-written Ray failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(quick: bool = False) -> str:
    reps = 3 if quick else 7
    rows = ["| shape | lower bound | hand-written Ray | dagc Ray, `--dispatch static` | dagc Ray, by priority | "
            "static / Ray | priority / Ray | priority / static | slowest run: static | slowest run: by priority |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, (chains, shorts) in SHAPES.items():
        with tempfile.TemporaryDirectory(prefix="dagc-dispatch-") as folder:
            tmp = Path(folder)
            script = tmp / "shape.py"
            script.write_text(source(chains, shorts))
            store = tmp / "store"
            _dagc_runs(_program(script, store, tmp / "first_ray.py"), store, tmp, ["static"], 1)  # (learning)
            runs = _dagc_runs(_program(script, store, tmp / "second_ray.py"), store, tmp, ["static", "priority"],
                              reps)
        static, priority = statistics.median(runs["static"]), statistics.median(runs["priority"])
        ray_s = statistics.median(_hand_written(chains, shorts, reps))
        rows.append(f"| {name} | {optimum(chains, shorts):.2f} s | {ray_s:.2f} s | {static:.2f} s | "
                    f"{priority:.2f} s | {static / ray_s:.2f} | {priority / ray_s:.2f} | {priority / static:.2f} | "
                    f"{max(runs['static']):.2f} s | {max(runs['priority']):.2f} s |")
    return "\n".join([
        f"`time.sleep` tasks without `cost=` on 2 devices (2 CPUs), planned from a first run's measurements; "
        f"medians of {reps} runs each against a warm local Ray, the two dispatch modes alternating.", "",
        *rows, "",
        "- slowest run: Ray's own order varies from run to run (which ready task a freed CPU takes); by priority "
        "it does not;",
        "- lower bound: the longest chain, or half the total work, whichever is larger;",
        "- by priority: the default; ready tasks take free devices in the order of their critical-path rank;",
        "- `--dispatch static`: the same program with every task submitted in the plan's order and started in "
        "Ray's own.",
    ]) + "\n"


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv))
