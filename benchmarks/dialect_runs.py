"""A pipeline written for another framework, run by that framework's own local runner and by dagc's programs.

The same fan-out, written once in each framework's idiom: six independent steps of about 1 s of computation each
(a pure-Python loop, calibrated on the machine: compute, not `time.sleep`, so that a runner starting more steps
at once than there are cores gains nothing it would not gain on real work), then a step adding up their results. Metaflow: a `foreach`
and a join; Kubeflow Pipelines: a `dsl.ParallelFor` over a list and `dsl.Collected`; Airflow: a `@task`
`.expand` and a task reading the list; Prefect: `.map` and a task reading the futures.

Each figure is the wall time of one run from a fresh interpreter, as a user starts it: `python flow.py run`
(Metaflow), `kfp.local` with its subprocess runner, `dag.test()` (Airflow, its database created once before),
calling the flow (Prefect, which starts its temporary API server), and dagc's local program and Ray program
(`dagc emit`, on 2 devices; the Ray program connects to a Ray already running, as on a cluster). dagc compiles
the framework's file as it is. Medians of repeated runs.

Run: `python -m benchmarks.dialect_runs [--quick]`.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

__all__ = ["run"]

WIDTH, SECONDS = 6, 2.0
# the step's computation: `LOOPS` is replaced by the count that takes about SECONDS on this machine
BUSY = "sum(i % 7 for i in range(LOOPS))"

SOURCES: dict[str, tuple[str, str]] = {  # framework -> (pipeline name, source)
    "Metaflow": ("FanOutFlow", f"""
        from metaflow import FlowSpec, step


        class FanOutFlow(FlowSpec):
            @step
            def start(self):
                self.items = list(range({WIDTH}))
                self.next(self.work, foreach="items")

            @step
            def work(self):
                busy = {BUSY}
                self.value = self.input * self.input + 0 * busy
                self.next(self.join)

            @step
            def join(self, inputs):
                self.total = sum(i.value for i in inputs)
                self.next(self.end)

            @step
            def end(self):
                print(self.total)


        if __name__ == "__main__":
            FanOutFlow()
        """),
    "Kubeflow Pipelines": ("fanout", f"""
        from kfp import dsl


        @dsl.component
        def work(k: int) -> int:
            busy = {BUSY}
            return k * k + 0 * busy


        @dsl.component
        def total(values: list) -> int:
            return int(sum(values))


        @dsl.pipeline
        def fanout() -> int:
            with dsl.ParallelFor(items=list(range({WIDTH}))) as k:
                squared = work(k=k)
            return total(values=dsl.Collected(squared.output)).output
        """),
    "Airflow": ("fanout", f"""
        import pendulum
        from airflow.sdk import dag, task


        @task
        def work(k: int) -> int:
            busy = {BUSY}
            return k * k + 0 * busy


        @task
        def total(values) -> int:
            return sum(values)


        @dag(schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False)
        def fanout():
            return total(work.expand(k=list(range({WIDTH}))))


        fanout()
        """),
    "Prefect": ("fanout", f"""
        from prefect import flow, task


        @task
        def work(k: int) -> int:
            busy = {BUSY}
            return k * k + 0 * busy


        @task
        def total(values: list) -> int:
            return sum(values)


        @flow
        def fanout() -> int:
            return total(work.map(list(range({WIDTH}))))


        if __name__ == "__main__":
            print(fanout())
        """),
}

# the framework's own run of the file `job.py` in the working directory, as its documentation starts one
OWN_RUN: dict[str, list[str]] = {
    "Metaflow": [sys.executable, "job.py", "--quiet", "run"],
    "Kubeflow Pipelines": [sys.executable, "-c", "from kfp import local; import runpy; "
                           "local.init(runner=local.SubprocessRunner(use_venv=False)); "
                           "runpy.run_path('job.py')['fanout']()"],
    "Airflow": [sys.executable, "-c", "import runpy; assert runpy.run_path('dags/job.py', run_name='dag')"
                "['fanout']().test().state == 'success'"],
    "Prefect": [sys.executable, "job.py"],
}
_AIRFLOW_DB = [sys.executable, "-c", "from airflow.utils.db import upgradedb; upgradedb()"]


def _env(tmp: Path) -> dict[str, str]:
    """Each framework's state kept under `tmp`; no test harness."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "AIRFLOW_", "METAFLOW_"))}
    env.update({"AIRFLOW_HOME": str(tmp / "airflow"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__DAGS_FOLDER": str(tmp / "dags"), "AIRFLOW__CORE__HOSTNAME_CALLABLE": "socket.gethostname",
                "PREFECT_HOME": str(tmp / "prefect"), "METAFLOW_HOME": str(tmp / "metaflow"),
                "USERNAME": "bench"})
    return env


def _wall(command: list[str], tmp: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=tmp, env=env, capture_output=True, text=True, timeout=900)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{command[:3]} failed:\n{proc.stderr[-3000:]}")
    return took


def _emit(script: Path, pipeline: str, backend: str, out: Path) -> None:
    from dagc.backends import emit
    from dagc.cluster import parse_cluster_spec
    from dagc.driver import compile_file

    graph = compile_file(script, pipeline_name=pipeline, backend=backend, cluster=parse_cluster_spec("2"))
    out.write_text(emit(graph, backend, out), encoding="utf-8")


def calibrated_loops() -> int:
    """The loop count of BUSY that takes about SECONDS here."""
    loops = 1_000_000
    start = time.perf_counter()
    eval(BUSY.replace("LOOPS", str(loops)))  # noqa: S307 - a constant expression of this module
    return int(loops * SECONDS / (time.perf_counter() - start))


def _framework(name: str, reps: int, address: str, loops: int) -> tuple[float, float, float]:
    pipeline, source = SOURCES[name]
    source = source.replace("LOOPS", str(loops))
    with tempfile.TemporaryDirectory(prefix="dagc-dialect-") as folder:
        tmp = Path(folder)
        script = tmp / "job.py"
        script.write_text(textwrap.dedent(source), encoding="utf-8")
        env = _env(tmp)
        if name == "Airflow":  # (`dag.test()` finds the DAG in its DAG folder, and needs its database)
            (tmp / "dags").mkdir()
            (tmp / "dags" / "job.py").write_text(script.read_text(encoding="utf-8"), encoding="utf-8")
            _wall(_AIRFLOW_DB, tmp, env)
        _emit(script, pipeline, "local", tmp / "job_local.py")
        _emit(script, pipeline, "ray", tmp / "job_ray.py")
        own, local, on_ray = [], [], []
        for rep in range(reps + 1):  # (the first round warms the file system caches and is not counted)
            times = (_wall(OWN_RUN[name], tmp, env),
                     _wall([sys.executable, "job_local.py", "--run-dir", str(tmp / f"local{rep}")], tmp, env),
                     _wall([sys.executable, "job_ray.py", "--address", address, "--run-dir", str(tmp / f"ray{rep}")],
                           tmp, env))
            if rep:
                own.append(times[0])
                local.append(times[1])
                on_ray.append(times[2])
    return statistics.median(own), statistics.median(local), statistics.median(on_ray)


def run(quick: bool = False) -> str:
    import ray

    reps = 1 if quick else 2
    ray.init(address="local", num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False,
             object_store_memory=200 * 2**20)
    address = ray.get_runtime_context().gcs_address
    loops = calibrated_loops()
    rows = ["| framework | its own local run | dagc, local program | dagc, Ray program | own / dagc Ray |",
            "|---|---:|---:|---:|---:|"]
    try:
        for name in SOURCES:
            own, local, on_ray = _framework(name, reps, address, loops)
            rows.append(f"| {name} | {own:.1f} s | {local:.1f} s | {on_ray:.1f} s | {own / on_ray:.1f}x |")
    finally:
        ray.shutdown()
    return "\n".join([
        "### A framework's own local run vs dagc's programs, from the same file", "",
        f"{WIDTH} independent steps of about {SECONDS:g} s of computation each and a step adding up their results, "
        "written in each "
        f"framework's idiom; wall time of one run from a fresh interpreter, median of {reps} run(s) after a "
        "first one not counted.", "",
        *rows, "",
        "- its own local run: `python flow.py run` (Metaflow), `kfp.local` with `SubprocessRunner`, `dag.test()` "
        "(Airflow, database created beforehand), calling the flow (Prefect, with its temporary API server);",
        "- dagc's programs are compiled from the same file, unchanged; the Ray program runs on 2 devices and "
        "connects to a running Ray (`--address`), as on a cluster; the local program is the reference semantics "
        "and runs one task at a time;",
        "- Metaflow's own run starts each foreach step as a process of its own, all at once; the Ray program's "
        "workers start with the run and each imports the flow's module and Metaflow first, which on six 2 s steps "
        "costs more than the plan saves. The other runners run one step at a time (`kfp.local`, `dag.test()`) or "
        "on threads that share one interpreter lock (Prefect).",
    ]) + "\n"


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv))
