"""Pipelines ported from projects built on pandas and scikit-learn (tests/ports/: Kedro's spaceflights, a
Hamilton dataflow over Series, a ZenML training pipeline, a Prefect ETL flow, a sweep over estimators): each
compiles without errors, keeps the parallelism its data flow allows on a 4-device plan (calls into the
libraries read their arguments and return new values; a `df = df.copy()` is a new frame; a string passed to
several tasks is shared by none), equals its plain run on local, Ray and torch, is reused whole from the
cache on a second run, and resumes only the tasks whose stored outputs are gone."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import pytest

from dagc.cluster import parse_cluster_spec
from dagc.driver import compile_file
from dagc.ir.effects import state_groups
from dagc.runtime import read_events
from tests.engines import run_local, run_ray, run_torch
from tests.interpreters import run_python
from tests.test_backend_local import _plain_result

PORTS = Path(__file__).parent / "ports"

# port -> (pipeline, tasks the data flow leaves independent, the last task(s): what a resume recomputes
# once their stored outputs are deleted)
CASES: dict[str, tuple[str, list[str], list[str]]] = {
    "kedro_spaceflights": ("spaceflights", ["train_model[0]", "train_model[1]"], ["summarise"]),
    "hamilton_pandas": ("hello_world", ["avg_3wk_spend", "spend_per_signup", "spend_zero_mean", "log_spend",
                                        "signups_pct_change"], ["build_result"]),
    "zenml_sklearn": ("digits_pipeline", ["svc_trainer", "svc_trainer.1", "random_forest_trainer"],
                      ["select_model"]),
    "prefect_etl": ("etl", ["extract_orders", "extract_customers", "transform_orders", "transform_customers"],
                    ["load"]),
    "tabular_sweep": ("sweep", [f"fit_and_score[{i}]" for i in range(7)], ["pick_best"]),
}


def _plain(port: str, tmp: Path) -> object:
    """The plain run's result (computed once per session, whichever worker asks first)."""
    (tmp / f"plain_{port}").mkdir(exist_ok=True)
    return _plain_result(PORTS / f"{port}.py", CASES[port][0], tmp / f"plain_{port}")


def _run(program: Path, tmp: Path, name: str, *argv: str) -> object:
    """The program's result, run with `argv`."""
    result = tmp / f"{name}.pkl"
    proc = run_python([str(program), *argv, "--result", str(result)], capture_output=True, text=True,
                      timeout=120, cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return pickle.loads(result.read_bytes())


def _ran(run_dir: Path) -> set[str]:
    """The tasks the last run recorded in `run_dir` ran (not reused)."""
    events = run_dir / "events.jsonl"
    last = read_events(events, event="run_start")[-1]["run"]
    return {e["task"] for e in read_events(events, event="end") if e["run"] == last}


# (one test per port: the workers share them out, instead of one waiting on a single long test)
@pytest.mark.slow
@pytest.mark.parametrize("port", sorted(CASES))
def test_ports_on_ray_and_torch_equal_plain_run(tmp_path: Path, ray_cluster, port: str) -> None:
    script, pipeline = PORTS / f"{port}.py", CASES[port][0]
    (tmp_path / port).mkdir()
    plain = _plain(port, tmp_path)
    got = {"ray": run_ray(script, pipeline, {}, tmp_path / port, ray_cluster.address),
           "torch": run_torch(script, pipeline, {}, tmp_path / port)}
    assert {engine: value for engine, value in got.items() if value != plain} == {}


@pytest.mark.parametrize("port", sorted(CASES))
def test_port_compiles_without_errors_and_keeps_its_parallelism(port: str) -> None:
    pipeline, independent, _ = CASES[port]
    # (an error raises CompileError)
    compiled = compile_file(PORTS / f"{port}.py", pipeline_name=pipeline, cluster=parse_cluster_spec("4"),
                            details=True)
    assert not [d for d in compiled.warnings if d.is_error]
    graph = compiled.graph
    nodes = [graph.node(name) for name in independent]
    devices = {n.attributes()["partition.device"] for n in nodes}
    assert len(devices) > 1, [(n.name, n.attributes()["partition.device"], n.deps) for n in nodes]
    grouped = {name: group.name for group in state_groups(graph) for name in group.nodes}
    assert not {n.name: grouped[n.name] for n in nodes if n.name in grouped}, [
        (g.name, g.nodes, g.why) for g in state_groups(graph)]


@pytest.mark.parametrize("port", sorted(CASES))
def test_port_local_run_cache_and_resume(tmp_path: Path, port: str) -> None:
    """The local program equals the plain run; run again with the same --cache, it reuses every task;
    resumed after the stored outputs of its last task(s) are deleted, it runs only those again."""
    pipeline, _, last = CASES[port]
    cache, first_run, second_run = tmp_path / "cache", tmp_path / "run1", tmp_path / "run2"
    plain, problems = _plain(port, tmp_path), []
    first = run_local(PORTS / f"{port}.py", pipeline, {}, tmp_path, "--cache", str(cache), "--run-dir", str(first_run))
    if first != plain:
        problems.append(("local differs from plain", first, plain))
    program = tmp_path / f"{pipeline}_local.py"  # (what run_local emitted)
    again = _run(program, tmp_path, "again", "--cache", str(cache), "--run-dir", str(second_run))
    if again != plain or _ran(second_run):
        problems.append(("second --cache run", "ran", sorted(_ran(second_run)), "equal", again == plain))
    for task in last:
        stored = first_run / "outputs" / task
        assert list(stored.glob("*.pkl")), sorted(p.name for p in (first_run / "outputs").iterdir())
        shutil.rmtree(stored)
    resumed = _run(program, tmp_path, "resumed", "--resume", str(first_run))
    if resumed != plain or _ran(first_run) != set(last):
        problems.append(("--resume", "ran", sorted(_ran(first_run)), "expected", last, "equal", resumed == plain))
    assert not problems, problems
