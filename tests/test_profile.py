"""Profile-guided compiles: a run's event log replaces the annotations (`--profile RUN_DIR`).

The local backend runs tasks one after another in one process, so its runs are compared with the
plan for one device (`--cluster 1`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from dagc.driver import compile_file
from dagc.profile import ProfileError, RunRecord, TaskRecord, apply_profile, load_run
from tests.conftest import run_dagc
from tests.interpreters import run_python

SLEEPY = '''
"""Tasks that sleep for known times; their annotations are far off on purpose."""
import time

import dagc


@dagc.task(cost="1h", out_size="1GiB")
def load(n: int) -> list:
    time.sleep(0.15)
    return list(range(n))


@dagc.task(cost="1h")
def double(xs: list) -> list:
    time.sleep(0.25)
    return [2 * x for x in xs]


@dagc.task(cost="10ms")
def square(xs: list) -> list:
    time.sleep(0.12)
    return [x * x for x in xs]


@dagc.task(cost="1h")
def total(a: list, b: list) -> int:
    time.sleep(0.06)
    if FAIL:
        raise RuntimeError("total refuses to add")
    return sum(a) + sum(b)


@dagc.pipeline
def sleepy(n: int = 2000):
    xs = load(n)
    return total(double(xs), square(xs))
'''


def write_sleepy(directory: Path, fail: bool = False) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "sleepy.py"
    path.write_text(SLEEPY.replace("if FAIL:", f"if {fail}:"), encoding="utf-8")
    return path


def run_local(script: Path, run_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    """Emit the local program for `script` and run it with an event log in `run_dir`."""
    program = script.parent / "sleepy_local.py"
    proc = run_dagc("emit", str(script), "-o", str(program), *extra)
    assert proc.returncode == 0, proc.stderr
    return run_python([str(program), "--run-dir", str(run_dir)], capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="module")
def sleepy_run(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("sleepy")
    script = write_sleepy(root)
    proc = run_local(script, root / "run1")
    assert proc.returncode == 0, proc.stderr
    return script, root / "run1"


def test_local_program_writes_an_event_log(sleepy_run) -> None:
    _, run_dir = sleepy_run
    run = load_run(run_dir)
    assert run.status == "ok" and run.pipeline == "sleepy"
    assert set(run.tasks) == {"load", "double", "square", "total"}
    # (it sleeps 0.25 s; the run, which holds it, lasts longer than it)
    assert 0.24 <= run.tasks["double"].duration <= run.duration
    assert run.tasks["load"].bytes and run.tasks["load"].bytes > 1000
    assert (run_dir / "run.json").is_file() and (run_dir / "result.pkl").is_file()


def test_profile_replaces_annotations(sleepy_run) -> None:
    script, run_dir = sleepy_run
    graph = compile_file(script, profile=run_dir)
    double = graph.node("double")
    assert 0.24 <= double.options.cost < 1.0
    assert double.attrs["profile.annotated"]["cost"] == 3600.0
    assert graph.node("load").options.out_size == load_run(run_dir).tasks["load"].bytes
    assert graph.attrs["profile.run"] == load_run(run_dir).run_id


def test_profiled_makespan_is_within_15_percent_of_a_rerun(sleepy_run, tmp_path: Path) -> None:
    script, run_dir = sleepy_run
    from dagc.cluster import parse_cluster_spec

    one = parse_cluster_spec("1")
    annotated = compile_file(script, cluster=one)
    profiled = compile_file(script, cluster=one, profile=run_dir)
    rerun = run_local(script, tmp_path / "run2")
    assert rerun.returncode == 0, rerun.stderr
    measured = load_run(tmp_path / "run2").makespan
    estimate = profiled.attrs["schedule.makespan"]
    assert abs(estimate - measured) / measured <= 0.15, (estimate, measured)
    assert annotated.attrs["schedule.makespan"] > 100 * measured  # the annotations were far off


def test_plan_states_which_costs_came_from_the_profile(sleepy_run) -> None:
    script, run_dir = sleepy_run
    proc = run_dagc("plan", str(script), "--cluster", "2", "--profile", str(run_dir))
    assert proc.returncode == 0, proc.stderr
    assert "measured in run" in proc.stdout and "load, double, square, total" in proc.stdout
    proc = run_dagc("plan", str(script), "--cluster", "2", "--profile", str(run_dir), "--json")
    assert "measured in run" in json.loads(proc.stdout)["profile"]  # JSON Lines: one file, one line


@pytest.mark.parametrize("command", ["compile", "ir", "emit", "viz"])
def test_profile_option_on_every_compiling_command(sleepy_run, tmp_path: Path, command: str) -> None:
    script, run_dir = sleepy_run
    out = {"compile": [str(tmp_path / "out")], "ir": [], "emit": [], "viz": [str(tmp_path / "g.dot")]}[command]
    args = [command, str(script), "--profile", str(run_dir), *(["-o", *out] if out else [])]
    proc = run_dagc(*args)
    assert proc.returncode == 0, proc.stderr
    if command == "ir":
        assert "profile.duration" in proc.stdout


def test_bad_profile_is_a_diagnostic(tmp_path: Path, sleepy_run) -> None:
    script, _ = sleepy_run
    proc = run_dagc("ir", str(script), "--profile", str(tmp_path / "nowhere"))
    assert proc.returncode == 1
    assert "error[DAGC007]" in proc.stderr and "no event log" in proc.stderr
    with pytest.raises(ProfileError):
        load_run(tmp_path / "nowhere")


def test_fused_groups_and_profiles() -> None:
    from tests.test_viz import loop_graph, run_passes

    # members measured one by one: the fused node's cost is their sum
    graph, _ = run_passes(loop_graph(shards=2, steps=1), "verify,fuse{siblings=false}", "1")
    fused = next(n for n in graph if n.op == "fused" and n.name.startswith("fused.shard[0]"))
    members = [m.name for m in fused.bodies["members"]]
    run = RunRecord(Path("."), "r1", tasks={m: TaskRecord(m, 0, 1, 0.5, 7, 1, "ok") for m in members})
    apply_profile(graph, run)
    assert graph.node(fused.name).options.cost == pytest.approx(0.5 * len(members))
    # a group measured as a whole, compiled unfused: split over the chain by annotated cost (1s, 2s)
    graph = loop_graph(shards=2, steps=1)
    run = RunRecord(Path("."), "r2", tasks={"fused.shard[1].load": TaskRecord("fused.shard[1].load", 0, 3, 3.0, 9,
                                                                               1, "ok")})
    names = apply_profile(graph, run)
    assert names == ["shard[1].load", "shard[1].tokenize"]
    assert graph.node("shard[1].load").options.cost == pytest.approx(1.0)
    assert graph.node("shard[1].tokenize").options.cost == pytest.approx(2.0)
    assert graph.node("shard[1].tokenize").options.out_size == 9
