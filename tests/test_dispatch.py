"""Dispatch by priority on Ray (dagc.runtime.dispatch): ready tasks take free devices most critical first.

The pipeline: four short tasks listed first, and a short preparation feeding a long training. Each short task
waits (up to a patience) until the training has started, so a run that starts short tasks on both devices first
makes the training wait: Ray's own order may do that, dispatch by priority must not. The order is read from the
run's event log; nothing here depends on how fast the machine is."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

from dagc.backends import emit
from dagc.backends.ray import critical_path_ranks
from dagc.cluster import parse_cluster_spec
from dagc.driver import compile_file
from tests.interpreters import run_python

SCRIPT = """
import os
import time

import dagc


def _training_started() -> bool:
    return os.path.isdir(os.environ["DAGC_TEST_MARK"])


@dagc.task(cost="0.1s")
def prepare(n: int) -> int:
    return n


@dagc.task(cost="5s", pure=True)  # (its mark is no effect the run must keep in order)
def train(base: int) -> int:
    os.mkdir(os.environ["DAGC_TEST_MARK"])
    return base + 100


@dagc.task(cost="1s", pure=True)
def work(i: int) -> int:
    end = time.monotonic() + float(os.environ["DAGC_TEST_PATIENCE"])
    while not _training_started() and time.monotonic() < end:
        time.sleep(0.02)
    return i


@dagc.task
def gather(xs: list) -> int:
    return sum(xs)


@dagc.pipeline
def shape():
    return gather([work(1), work(2), work(3), work(4), train(prepare(1))])
"""
PLAIN = 1 + 2 + 3 + 4 + (1 + 100)


def _compiled(tmp_path: Path):
    (tmp_path / "shape.py").write_text(textwrap.dedent(SCRIPT), encoding="utf-8")
    return compile_file(tmp_path / "shape.py", backend="ray", cluster=parse_cluster_spec("2"))


def _run(tmp_path: Path, name: str, *args: str, patience: float) -> tuple[list[dict], str]:
    program = tmp_path / "prog_ray.py"
    program.write_text(emit(_compiled(tmp_path), "ray", program))
    env = {**os.environ, "DAGC_TEST_MARK": str(tmp_path / f"mark-{name}"), "DAGC_TEST_PATIENCE": str(patience)}
    proc = run_python([str(program), "--run-dir", str(tmp_path / name), *args], env=env, capture_output=True,
                      text=True, timeout=300)
    events = [json.loads(line) for line in (tmp_path / name / "events.jsonl").read_text().splitlines()]
    assert proc.returncode == 0, proc.stderr + "\n" + "\n".join(map(json.dumps, events))
    return events, proc.stdout.strip().splitlines()[-1]


def test_ranks_follow_the_longest_path_to_the_end(tmp_path: Path) -> None:
    graph = _compiled(tmp_path)
    order = graph.topological_order()
    ranks = critical_path_ranks(graph, order)
    assert set(ranks) == {n for n in order if graph.node(n).op != "transfer"}
    for name, rank in ranks.items():  # its own duration plus the largest rank of what waits for it
        node = graph.node(name)
        after = max((ranks[s] for s in graph.successors(name)), default=0.0)
        assert abs(rank - (node.placement.finish - node.placement.start + after)) < 1e-5
    assert ranks["prepare"] > ranks["train"] > max(ranks[w] for w in ("work", "work.1", "work.2", "work.3"))


def test_a_ready_critical_task_takes_the_next_free_device(tmp_path: Path) -> None:
    events, result = _run(tmp_path, "run", patience=120)
    assert result == str(PLAIN)
    (start,) = [e for e in events if e["event"] == "run_start"]
    assert start["dispatch"] == "priority"
    started = [e["task"] for e in events if e["event"] == "start"]
    # two devices: the preparation and one short task first, then the training, as soon as its input is ready
    # (the short task granted first may record its start after the training does: its worker may start later)
    before = started[:started.index("train")]
    assert len([t for t in before if t.startswith("work")]) <= 1, started


def test_static_dispatch_keeps_rays_own_order(tmp_path: Path) -> None:
    events, result = _run(tmp_path, "static", "--dispatch", "static", patience=0)
    assert result == str(PLAIN)
    (start,) = [e for e in events if e["event"] == "run_start"]
    assert start["dispatch"] == "static"


DRIVER = """
import sys
from pathlib import Path

import ray

from dagc.runtime.dispatch import Dispatcher

ray.init(address=sys.argv[1], log_to_driver=False)
log = Path(sys.argv[2])


@ray.remote(num_cpus=0)
def step(name: str, *needs: object) -> str:
    with log.open("a") as out:  # (one slot: the tasks run one at a time, in the order they were granted)
        out.write(name + "\\n")
    return name


@ray.remote(num_cpus=0)
def broken() -> int:
    raise ValueError("an input that failed")


dispatcher = Dispatcher({"low": 1.0, "high": 3.0, "mid": 2.0, "after_failure": 10.0, "late": 0.5}, capacity=1)
refs = {}
for name, needs in (("low", []), ("high", []), ("mid", []), ("after_failure", [broken.remote()])):
    refs[name] = step.remote(name, *needs, dispatcher.slot(name))
    dispatcher.add(name, needs, refs[name])
dispatcher.start()
late_input = step.remote("late_input")
refs["late"] = step.remote("late", late_input, dispatcher.slot("late"))  # submitted after granting began
dispatcher.add("late", [late_input], refs["late"])
done, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=120)
assert len(done) == len(refs), "a gated task was never granted"
try:
    ray.get(refs["after_failure"])
except ray.exceptions.RayTaskError:
    pass
else:
    raise AssertionError("a task whose input failed ran")
dispatcher.close()
print(" ".join(ray.get([refs[n] for n in ("low", "high", "mid", "late")])))
"""


def test_the_dispatcher_grants_by_rank_and_never_holds_a_task_back(tmp_path: Path, ray_cluster) -> None:
    """One slot, tasks ready at the start: granted most critical first; a task whose input failed is granted
    (and fails), and one submitted after granting began is granted too."""
    (tmp_path / "driver.py").write_text(DRIVER, encoding="utf-8")
    log = tmp_path / "started.txt"
    proc = run_python([str(tmp_path / "driver.py"), ray_cluster.address, str(log)], capture_output=True, text=True,
                      timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split()[-4:] == ["low", "high", "mid", "late"]
    started = log.read_text().split()
    assert [n for n in started if n != "late_input"] == ["high", "mid", "low", "late"], started
