"""What running a task through dagc's executor costs, per task, side by side with calling it bare.

A chain of tiny tasks (`step(x, k)`, about a microsecond of work each) is emitted and run:

* local: the emitted program (`main(argv)` in this process) without a run directory, with one
  (`--run-dir`: every output pickled and stored, start/end events), and with a cache as well; against
  the same chain of plain function calls (what a local program did before it had an executor);
* Ray: the emitted program (a run directory is always kept) against a hand-written chain of
  `@ray.remote` tasks, in one local Ray of 2 CPUs started once for both.

Each figure is the median of `reps` runs, divided by the number of tasks.
Run: `python -m benchmarks.executor_overhead [--quick]`.
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["run"]


def _source(n: int) -> str:
    lines = ["import dagc", "", "", "@dagc.task", "def step(x: int, k: int) -> int:",
             "    return (x * 31 + k) % 1000003", "", "", "@dagc.pipeline", "def chain():", "    v = step(1, 0)"]
    lines += [f"    v = step(v, {k})" for k in range(1, n)]
    lines.append("    return v")
    return "\n".join(lines) + "\n"


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _median(fn, reps: int) -> float:
    fn()  # warm up
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _plain_chain(n: int, tmp: Path) -> float:
    sys.path.insert(0, str(tmp))
    import chain_source as m  # noqa: PLC0415 - the user's module, as the bare baseline calls it

    v = m.step(1, 0)
    for k in range(1, n):
        v = m.step(v, k)
    return v


def run(quick: bool = False) -> str:
    from dagc.backends import emit
    from dagc.driver import compile_file

    n_local, n_ray, reps = (500, 100, 3) if quick else (2000, 300, 5)
    tmp = Path(tempfile.mkdtemp(prefix="dagc-exec-bench-"))
    rows: list[tuple[str, str, float, float]] = []

    (tmp / "chain_source.py").write_text(_source(n_local))
    graph = compile_file(tmp / "chain_source.py")
    local_path = tmp / "chain_local.py"
    local_path.write_text(emit(graph, "local", local_path))
    local = _load(local_path, "chain_local_program")
    counter = iter(range(10**6))

    def local_run(*extra: str) -> None:
        out = tmp / "out.pkl"
        args = [a.replace("{i}", str(next(counter))) for a in extra]
        assert local.main([*args, "--result", str(out)]) == 0

    bare = _median(lambda: _plain_chain(n_local, tmp), reps)
    rows.append(("local", "plain function calls", bare, 1.0))
    for label, extra in [("emitted program, no run directory", ()),
                         ("emitted program, --run-dir (outputs stored, events)", ("--run-dir", str(tmp / "runs" / "{i}"))),
                         ("emitted program, --run-dir and --cache", ("--run-dir", str(tmp / "runs" / "c{i}"),
                                                                     "--cache", str(tmp / "cache{i}")))]:
        try:
            seconds = _median(lambda extra=extra: local_run(*extra), reps)
        except SystemExit:  # an option this version's programs do not take
            continue
        rows.append(("local", label, seconds, seconds / bare))
    local_rows = rows[:]

    import ray

    (tmp / "ray_chain.py").write_text(_source(n_ray))
    graph = compile_file(tmp / "ray_chain.py", backend="ray")
    ray_path = tmp / "chain_ray.py"
    ray_path.write_text(emit(graph, "ray", ray_path))
    program = _load(ray_path, "chain_ray")  # by its file name: workers may import it
    sys.path.insert(0, str(tmp))
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             object_store_memory=80 * 2**20, runtime_env={"env_vars": {"PYTHONPATH": str(tmp)}})
    try:
        @ray.remote(num_cpus=1)
        def step(x: int, k: int) -> int:
            return (x * 31 + k) % 1000003

        def hand() -> None:
            v = step.remote(1, 0)
            for k in range(1, n_ray):
                v = step.remote(v, k)
            ray.get(v)

        def emitted() -> None:
            out = tmp / "ray.pkl"
            assert program.main(["--run-dir", str(tmp / "rayruns" / str(next(counter))), "--result", str(out)]) == 0

        raw = _median(hand, reps)
        mine = _median(emitted, reps)
    finally:
        ray.shutdown()
    ray_rows = [("Ray", "hand-written @ray.remote chain", raw, 1.0),
                ("Ray", "emitted program (run directory, events)", mine, mine / raw)]

    lines = ["## Executor overhead per task", "",
             f"A chain of tiny tasks: {n_local} on the local backend, {n_ray} on Ray (a local Ray of 2 CPUs). "
             f"Median of {reps} runs; per task = wall time / tasks.", "",
             "| backend | how the tasks run | wall time | per task | × bare |", "|---|---|---:|---:|---:|"]
    for backend, label, seconds, ratio in local_rows:
        lines.append(f"| {backend} | {label} | {seconds * 1e3:.1f} ms | {seconds / n_local * 1e6:.1f} µs | "
                     f"{ratio:.1f} |")
    for backend, label, seconds, ratio in ray_rows:
        lines.append(f"| {backend} | {label} | {seconds * 1e3:.0f} ms | {seconds / n_ray * 1e3:.2f} ms | "
                     f"{ratio:.2f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv))
