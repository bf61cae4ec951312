"""Costs learned from runs (dagc.runtime.costs, dagc.learned): every run records what each task took, every
compile plans with it by default.

- local, Ray and torch programs append one line per finished task to the store (pipeline, task, code digest,
  wall and CPU seconds, output bytes, peak memory);
- `dagc plan` plans with the median of the recent runs of the same code, says so, and names the guesses;
  `--no-learned-costs` and `--profile` plan without them;
- a task whose code changed has no figures until it runs again;
- two runs writing the store at once leave whole lines; a damaged line is skipped with one warning.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dagc.backends import emit
from dagc.driver import compile_file
from dagc.runtime.costs import COST_FILE, read_costs
from tests.conftest import run_dagc
from tests.interpreters import run_python

SCRIPT = '''\
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
    xs = [work(i, 0.01) for i in range(3)]
    xs.append(work(3, 0.3))
    return gather(xs)
'''


def _project(tmp_path: Path) -> Path:
    script = tmp_path / "skewed.py"
    script.write_text(SCRIPT, encoding="utf-8")
    return script


def _run_local(script: Path, store: Path, *extra: str) -> subprocess.CompletedProcess:
    program = script.parent / "skewed_local.py"
    if not program.exists():
        program.write_text(emit(compile_file(script), "local", program))
    proc = run_python([str(program), "--cost-store", str(store), *extra], capture_output=True, text=True,
                      timeout=120, cwd=script.parent)
    assert proc.returncode == 0, proc.stderr
    return proc


def _plan(script: Path, *options: str) -> dict:
    proc = run_dagc("plan", str(script), "--cluster", "2", "--json", *options, cwd=script.parent,
                    env={"DAGC_NO_LEARNED_COSTS": ""})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[0])


def test_a_run_records_each_task_and_the_next_plan_uses_it(tmp_path: Path) -> None:
    script = _project(tmp_path)
    store = tmp_path / "store"
    before = _plan(script, "--cost-store", str(store))  # no runs yet: every task is taken to take 1 s
    assert before["makespan"] == pytest.approx(3.0, abs=0.01)
    _run_local(script, store)
    records, skipped = read_costs(store)
    assert skipped == 0 and sorted(r["task"] for r in records) == ["gather", "work", "work[0]", "work[1]", "work[2]"]
    slow = next(r for r in records if r["task"] == "work")
    assert slow["pipeline"] == "skewed" and slow["wall"] >= 0.3 and slow["cpu"] < slow["wall"]
    assert slow["rss"] > 0 and len(slow["code"]) == 16
    after = _plan(script, "--cost-store", str(store))
    assert 0.3 <= after["makespan"] < 1.0  # the long task alone on one device, the short ones on the other
    said = run_dagc("plan", str(script), "--cluster", "2", "--cost-store", str(store), cwd=tmp_path,
                    env={"DAGC_NO_LEARNED_COSTS": ""}).stdout
    assert "costs of 5 task(s) learned from earlier runs (median of the last 1 run(s)" in said
    without = _plan(script, "--cost-store", str(store), "--no-learned-costs")
    assert without["makespan"] == pytest.approx(before["makespan"])


def test_a_task_whose_code_changed_is_a_guess_again(tmp_path: Path) -> None:
    script = _project(tmp_path)
    store = tmp_path / "store"
    _run_local(script, store)
    script.write_text(SCRIPT.replace("return sum(xs)", "return sum(xs) + 0"), encoding="utf-8")
    from dagc.learned import apply_learned_costs

    graph = compile_file(script)
    learned, _ = apply_learned_costs(graph, store)
    assert "gather" not in learned and {"work", "work[0]"} <= set(learned)
    assert graph.node("work").options.cost >= 0.3 and graph.node("gather").options.cost is None


def test_the_median_of_recent_runs_and_a_damaged_line(tmp_path: Path) -> None:
    from dagc.learned import RECENT, apply_learned_costs

    script = _project(tmp_path)
    store = tmp_path / "store"
    graph = compile_file(script)
    from dagc.backends.fingerprint import code_table

    digest = code_table(graph)[0]["work"][2]
    lines = [json.dumps({"pipeline": "skewed", "task": "work", "code": digest, "wall": w, "bytes": 10})
             for w in (100.0, 1.0, 2.0, 3.0, 50.0, 4.0, 5.0)]  # the first falls out of the recent runs
    store.mkdir()
    (store / COST_FILE).write_text("\n".join([*lines[:3], "{not json", '{"task": 3}', *lines[3:]]) + "\n")
    learned, skipped = apply_learned_costs(graph, store)
    assert learned == ["work"] and skipped == 2
    assert graph.node("work").options.cost == 4.0 and RECENT == 5  # median of 3, 50, 4, 5 and 2
    assert graph.node("work").attrs["costs.runs"] == 5
    proc = run_dagc("emit", str(script), "--cost-store", str(store), "-o", str(tmp_path / "p.py"), cwd=tmp_path,
                    env={"DAGC_NO_LEARNED_COSTS": ""})
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    assert proc.stderr.count("warning[DAGC008]") == 1 and "2 damaged line(s)" in proc.stderr


def test_two_runs_writing_the_store_at_once_leave_whole_lines(tmp_path: Path) -> None:
    script = _project(tmp_path)
    store = tmp_path / "store"
    program = tmp_path / "skewed_local.py"
    program.write_text(emit(compile_file(script), "local", program))
    procs = [subprocess.Popen([sys.executable, str(program), "--cost-store", str(store)], cwd=tmp_path,
                              env={**os.environ}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for _ in range(3)]
    for proc in procs:
        assert proc.wait(timeout=120) == 0, proc.stderr.read() if proc.stderr else ""
    records, skipped = read_costs(store)
    assert skipped == 0 and len(records) == 15


def test_an_unwritable_store_is_one_warning_and_the_run_goes_on(tmp_path: Path) -> None:
    script = _project(tmp_path)
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a directory", encoding="utf-8")
    proc = _run_local(script, blocker / "store")
    assert proc.stderr.count("cannot record task costs") == 1


@pytest.mark.slow
def test_ray_and_torch_programs_record_costs(tmp_path: Path, ray_cluster) -> None:
    from tests.engines import run_ray, run_torch

    script = _project(tmp_path)
    for backend in ("ray", "torch"):
        store = tmp_path / f"store-{backend}"
        work = tmp_path / backend
        work.mkdir()
        if backend == "ray":
            assert run_ray(script, "skewed", {}, work, ray_cluster.address, 2, "--cost-store", str(store)) == 6
        else:
            assert run_torch(script, "skewed", {}, work, args=("--cost-store", str(store))) == 6
        records, _ = read_costs(store)
        assert sorted(r["task"] for r in records) == ["gather", "work", "work[0]", "work[1]", "work[2]"], backend
        assert next(r for r in records if r["task"] == "work")["wall"] >= 0.3
        # a map's listing is recorded by the task that runs it (Ray's region task, torch's ranks' rank 0)
        folder = tmp_path / f"map-{backend}"
        folder.mkdir()
        sweep = _map_project(folder)
        store = tmp_path / f"map-store-{backend}"
        if backend == "ray":
            assert run_ray(sweep, "sweep", {}, sweep.parent, ray_cluster.address, 2, "--cost-store", str(store)) == 30
        else:
            assert run_torch(sweep, "sweep", {}, sweep.parent, args=("--cost-store", str(store))) == 30
        records, _ = read_costs(store)
        assert [r["width"] for r in records if "width" in r] == [6], backend


MAP_SCRIPT = '''\
import time

import dagc


@dagc.task
def shards(n: int) -> list:
    return list(range(n))


@dagc.task
def work(s: int) -> int:
    time.sleep(0.05)
    return s * 2


@dagc.task
def total(xs: list) -> int:
    return sum(xs)


@dagc.pipeline
def sweep(n: int = 6):
    return total([work(s) for s in shards(n)])
'''


def _map_project(tmp_path: Path) -> Path:
    script = tmp_path / "sweep.py"
    script.write_text(MAP_SCRIPT, encoding="utf-8")
    return script


def test_a_map_learns_its_width_and_its_items_cost(tmp_path: Path) -> None:
    """A map without `expected=`: its run records how many items it listed and what each took (under the map's
    code); the next compile plans it at that width, spread over the devices, with the items' measured cost."""
    from dagc.learned import apply_learned_costs
    from dagc.plan import plan_file

    script = _map_project(tmp_path)
    store = tmp_path / "store"
    program = tmp_path / "sweep_local.py"
    program.write_text(emit(compile_file(script), "local", program))
    proc = run_python([str(program), "--cost-store", str(store)], capture_output=True, text=True, timeout=120,
                      cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    records, _ = read_costs(store)
    assert [r["width"] for r in records if "width" in r] == [6]
    items = [r for r in records if r["task"] == "map.work"]
    assert len(items) == 6 and all(r["wall"] >= 0.05 and r["code"] == items[0]["code"] for r in items)
    graph = compile_file(script)
    learned, _ = apply_learned_costs(graph, store)
    assert {"map", "map.work"} <= set(learned)
    assert graph.node("map").attrs["region.width"] == 6
    from dagc.ir.regions import walk

    inner = next(n for n in walk(graph.node("map")) if n.name == "map.work")
    assert inner.options.cost >= 0.05
    from dagc.cluster import parse_cluster_spec
    from dagc.learned import DEFAULT_STORE

    token = DEFAULT_STORE.set(store)
    try:
        on_three = plan_file(str(script), parse_cluster_spec("3"))
    finally:
        DEFAULT_STORE.reset(token)
    placed = next(row for row in on_three.schedule if row["task"] == "map")
    assert len(placed["devices"]) == 3  # six items of 0.05 s over three devices: two each
    assert on_three.makespan < 6 * inner.options.cost
