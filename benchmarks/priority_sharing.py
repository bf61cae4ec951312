"""Three pipelines of mixed priority sharing one Ray cluster, with and without the admission queue.

On one local Ray cluster of 2 CPUs (started for the benchmark, so the programs share it with `--address`):

  * `low`  (priority 0): 6 tasks of 2 s, one CPU each — arrives first and fills the cluster;
  * `mid`  (priority 2): 2 parallel tasks of 1.5 s, then a sum — arrives once `low` runs;
  * `high` (priority 5): a chain of 3 tasks of 1 s — arrives right after `mid`.

Each scenario runs twice, side by side: first come, first served (`--no-admission`: Ray queues the tasks
in arrival order), and with the queue (`--admission`, the default on a shared cluster: highest priority
first, preempting lower ones). `high` also runs alone first, for its solo time. Figures: each pipeline's
run time (its `run_start` to `run_end`), `high`'s against its solo time, and the cluster's utilization
(task busy seconds over 2 CPUs × the span from the first arrival to the last finish; preempted runs count as
busy: the work they lost is the cost of preemption). Medians over the repetitions, modes alternating.

The same three pipelines are also planned together (`dagc plan --together`) in priority order and in
arrival order, to compare the estimate with the measurement.
Run: `python -m benchmarks.priority_sharing [--quick]`.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["run"]

SOURCES = {
    "low": ("""
import time

import dagc


@dagc.task(cpus=1, cost="2s")
def crunch(k: int) -> int:
    time.sleep(2.0)
    return k * k


@dagc.task(cpus=1, cost="10ms")
def total(xs: list) -> int:
    return sum(xs)


@dagc.pipeline
def low() -> int:
    return total([crunch(k) for k in range(6)])
"""),
    "mid": ("""
import time

import dagc


@dagc.task(cpus=1, cost="1.5s")
def part(k: int) -> int:
    time.sleep(1.5)
    return k + 1


@dagc.task(cpus=1, cost="10ms")
def total(xs: list) -> int:
    return sum(xs)


@dagc.pipeline(priority=2)
def mid() -> int:
    return total([part(k) for k in range(2)])
"""),
    "high": ("""
import time

import dagc


@dagc.task(cpus=1, cost="1s")
def step(x: int) -> int:
    time.sleep(1.0)
    return x + 1


@dagc.pipeline(priority=5)
def high() -> int:
    x = 0
    for _ in range(3):
        x = step(x)
    return x
"""),
}
# What the queue costs a program of many tiny tasks: run alone on the same cluster, with and without it
OVERHEAD_SOURCES = {
    "chain": ("""
import dagc


@dagc.task(cpus=1, cost="1ms")
def inc(x: int) -> int:
    return x + 1


@dagc.pipeline
def chain() -> int:
    x = 0
    for _ in range(40):
        x = inc(x)
    return x
"""),
    "wide": ("""
import dagc


@dagc.task(cpus=1, cost="1ms")
def part(k: int) -> int:
    return k + 1


@dagc.task(cpus=1, cost="1ms")
def total(xs: list) -> int:
    return sum(xs)


@dagc.pipeline
def wide() -> int:
    return total([part(k) for k in range(40)])
"""),
    "trainer": ("""
import dagc


@dagc.task(cpus=1, cost="1ms")
def init() -> dict:
    return {"w": 0}


@dagc.task(cpus=1, cost="1ms")
def step(model: dict, k: int) -> None:
    model["w"] += k


@dagc.task(cpus=1, cost="1ms")
def read(model: dict) -> int:
    return model["w"]


@dagc.pipeline
def trainer() -> int:
    model = init()
    for k in range(40):
        step(model, k)
    return read(model)
"""),
}
RESULTS = {"low": 55, "mid": 3, "high": 3, "chain": 40, "wide": 820, "trainer": 780}
CPUS = 2


def _events(run_dir: Path) -> list[dict]:
    path = run_dir / "events.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _start(program: Path, address: str, run_dir: Path, mode: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(program), "--address", address, "--run-dir", str(run_dir), mode,
                             "--result", str(run_dir.with_suffix(".pkl"))],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=program.parent,
                            env={**os.environ, "RAY_ADDRESS": ""})


def _finish(proc: subprocess.Popen, name: str, run_dir: Path) -> None:
    import pickle

    out, err = proc.communicate(timeout=600)
    result = run_dir.with_suffix(".pkl")
    if proc.returncode != 0 or pickle.loads(result.read_bytes()) != RESULTS[name]:
        raise RuntimeError(f"{name} failed ({proc.returncode}): {out[-500:]} {err[-2000:]}")


def _wait(predicate, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 300
    while not predicate():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"never happened: {proc.communicate()[1][-2000:]}")
        time.sleep(0.05)


def _scenario(programs: dict[str, Path], address: str, root: Path, mode: str) -> dict[str, float]:
    dirs = {name: root / f"{name}{mode}" for name in ("low", "mid", "high")}
    procs = {"low": _start(programs["low"], address, dirs["low"], mode)}
    _wait(lambda: sum(e["event"] == "start" for e in _events(dirs["low"])) >= CPUS, procs["low"])
    procs["mid"] = _start(programs["mid"], address, dirs["mid"], mode)
    time.sleep(0.5)
    procs["high"] = _start(programs["high"], address, dirs["high"], mode)
    for name, proc in procs.items():
        _finish(proc, name, dirs[name])
    out: dict[str, float] = {}
    first, last, busy, preempted = float("inf"), 0.0, 0.0, 0
    for name, run_dir in dirs.items():
        events = _events(run_dir)
        start = next(e["ts"] for e in events if e["event"] == "run_start")
        end = next(e for e in events if e["event"] == "run_end")
        out[name] = float(end["duration"])
        first, last = min(first, start), max(last, end["ts"])
        began: dict[str, float] = {}
        for e in events:
            if e["event"] == "start":
                began[e["task"]] = e["ts"]
            elif e["event"] in ("end", "preempted") and e["task"] in began:
                busy += e["ts"] - began.pop(e["task"])
                preempted += e["event"] == "preempted"
    out["utilization"] = busy / (CPUS * (last - first))
    out["span"] = last - first
    out["preempted"] = preempted
    return out


def _planned(scripts: dict[str, Path]) -> dict[str, dict[str, float]]:
    from dagc.cluster import parse_cluster_spec
    from dagc.plan_together import plan_together

    files = [str(scripts[n]) for n in ("low", "mid", "high")]
    out = {}
    for label, order in (("first come, first served", [0, 1, 2]), ("by priority", None)):
        result = plan_together(files, parse_cluster_spec(str(CPUS)), "heft", order=order)
        row = {r.pipeline: s.together.makespan for r, s in zip(result.planned, result.shared)}
        row["utilization"] = sum(result.utilization) / len(result.utilization)
        out[label] = row
    return out


def run(quick: bool = False) -> str:
    from ray.cluster_utils import Cluster

    from dagc.backends import emit
    from dagc.driver import compile_file

    reps = 1 if quick else 3
    with tempfile.TemporaryDirectory(prefix="dagc-bench-prio-") as tmp:
        root = Path(tmp)
        scripts, programs = {}, {}
        for name, text in SOURCES.items():
            scripts[name] = root / f"{name}.py"
            scripts[name].write_text(text + f'\n\nif __name__ == "__main__":\n    print({name}())\n')
            programs[name] = root / f"{name}_ray.py"
            programs[name].write_text(emit(compile_file(scripts[name], backend="ray"), "ray", programs[name]))
        planned = _planned(scripts)
        for name, text in OVERHEAD_SOURCES.items():
            scripts[name] = root / f"{name}.py"
            scripts[name].write_text(text)
            programs[name] = root / f"{name}_ray.py"
            programs[name].write_text(emit(compile_file(scripts[name], backend="ray"), "ray", programs[name]))
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": CPUS, "include_dashboard": False,
                                                                "object_store_memory": 100 * 2**20})
        cluster.wait_for_nodes()
        try:
            solo = []
            for k in range(reps):
                proc = _start(programs["high"], cluster.address, root / f"solo{k}", "--admission")
                _finish(proc, "high", root / f"solo{k}")
                solo.append(next(float(e["duration"]) for e in _events(root / f"solo{k}") if e["event"] == "run_end"))
            overhead: dict[tuple[str, str], list[float]] = {}
            for k in range(reps):
                for name in OVERHEAD_SOURCES:
                    for mode in (("--no-admission", "--admission") if k % 2 == 0 else ("--admission", "--no-admission")):
                        run_dir = root / f"{name}{mode}{k}"
                        _finish(_start(programs[name], cluster.address, run_dir, mode), name, run_dir)
                        overhead.setdefault((name, mode), []).append(
                            next(float(e["duration"]) for e in _events(run_dir) if e["event"] == "run_end"))
            runs: dict[str, list[dict[str, float]]] = {"--no-admission": [], "--admission": []}
            for k in range(reps):
                for mode in (("--no-admission", "--admission") if k % 2 == 0 else ("--admission", "--no-admission")):
                    runs[mode].append(_scenario(programs, cluster.address, root / f"rep{k}", mode))
        finally:
            cluster.shutdown()
    solo_time = statistics.median(solo)

    def med(mode: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[mode])

    lines = ["## Priorities on a shared Ray cluster", "",
             f"Three pipelines on one local Ray cluster of {CPUS} CPUs: `low` (priority 0, 6 tasks of 2 s) arrives "
             "first and fills it, then `mid` (priority 2, 2 parallel tasks of 1.5 s and a sum), then `high` "
             "(priority 5, a chain of 3 tasks of 1 s). Run times are each program's `run_start` to `run_end` "
             f"(program start-up included), medians of {reps} repetition(s), the two modes alternating. "
             "Utilization: task busy time over the CPUs × the span from the first arrival to the last finish "
             "(a preempted run counts as busy: its lost work is the price of preemption).", "",
             "| | first come, first served (`--no-admission`) | admission queue (default) |", "|---|---:|---:|"]
    for name in ("high", "mid", "low"):
        lines.append(f"| `{name}` run time | {med('--no-admission', name):.2f} s | {med('--admission', name):.2f} s |")
    lines.append(f"| `high` / its solo time ({solo_time:.2f} s) | {med('--no-admission', 'high') / solo_time:.2f}x | "
                 f"{med('--admission', 'high') / solo_time:.2f}x |")
    lines.append(f"| span, all three | {med('--no-admission', 'span'):.2f} s | {med('--admission', 'span'):.2f} s |")
    lines.append(f"| utilization | {100 * med('--no-admission', 'utilization'):.0f}% | "
                 f"{100 * med('--admission', 'utilization'):.0f}% |")
    lines.append(f"| tasks preempted | {med('--no-admission', 'preempted'):.0f} | {med('--admission', 'preempted'):.0f} |")
    lines += ["", f"What the queue costs a program of tiny tasks, run alone on the same cluster (run times, medians of "
              f"{reps}; the gatekeeper actor starts with the program, the tasks wait for their turn in the queue):", "",
              "| program | `--no-admission` | admission queue | ratio |", "|---|---:|---:|---:|"]
    described = {"chain": "a chain of 40 tasks", "wide": "40 parallel tasks and a sum",
                 "trainer": "40 steps on a model in place (one state group)"}
    for name, what in described.items():
        off, on = (statistics.median(overhead[(name, m)]) for m in ("--no-admission", "--admission"))
        lines.append(f"| {what} | {off:.2f} s | {on:.2f} s | {on / off:.2f}x |")
    lines += ["", "Planned together (`dagc plan --together`, HEFT, estimates from the tasks' `cost=`; arrival at 0):", "",
              "| | `high` | `mid` | `low` | utilization |", "|---|---:|---:|---:|---:|"]
    for label, row in planned.items():
        lines.append(f"| {label} | {row['high']:.2f} s | {row['mid']:.2f} s | {row['low']:.2f} s | "
                     f"{100 * row['utilization']:.0f}% |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv))
