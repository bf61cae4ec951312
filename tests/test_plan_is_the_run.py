"""What `dagc plan` reports is what the programs do: for every sample and every ported pipeline, on 3 devices,
the device the plan gives each task is the device the Ray program submits it to, and the tasks the plan keeps
in one process (its shared-state groups) are the tasks the Ray program runs in one actor and the torch program
on one rank, read from the emitted programs' own tables."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from dagc.backends import emit
from dagc.cluster import parse_cluster_spec
from dagc.driver import compile_file
from dagc.frontend import list_pipelines
from dagc.ir.effects import state_groups
from dagc.plan import plan_file
from tests.conftest import PIPELINE_PARAMS, PIPELINE_SOURCES, REPO

SCRIPTS = sorted([*PIPELINE_SOURCES, REPO / "tests" / "ports" / "nanogpt" / "train.py"])
CASES = [(script, name) for script in SCRIPTS for name in list_pipelines(script)]
_SUBMIT = re.compile(r"driver\.submit(?:_state)?\(\w+, '([^']+)'.*?device=(\d+|\[[\d, ]+\])")


def _table(program: str, name: str) -> dict:
    """The literal dict the program assigns to `name` at its top level; a typed row (`TaskRow(...)`) as the
    TaskRow it makes."""
    from dagc.runtime.rows import TaskRow

    for stmt in ast.parse(program).body:
        targets = [stmt.target] if isinstance(stmt, ast.AnnAssign) else getattr(stmt, "targets", [])
        if any(isinstance(t, ast.Name) and t.id == name for t in targets) and stmt.value is not None:
            return eval(compile(ast.Expression(stmt.value), "<table>", "eval"), {"TaskRow": TaskRow})
    raise AssertionError(f"the program assigns no {name}")


def _groups(owner: dict[str, object]) -> set[frozenset[str]]:
    """Tasks by what holds them (a group index, a rank), as a set of groups."""
    out: dict[object, set[str]] = {}
    for task, holder in owner.items():
        out.setdefault(holder, set()).add(task)
    return {frozenset(g) for g in out.values()}


@pytest.mark.parametrize("script, pipeline", CASES, ids=[f"{s.stem}:{p}" for s, p in CASES])
def test_the_plan_is_what_the_programs_run(tmp_path: Path, script: Path, pipeline: str) -> None:
    cluster = parse_cluster_spec("3")
    params = PIPELINE_PARAMS.get(script.name)
    plan = plan_file(str(script), cluster, pipeline=pipeline, params=params, with_transfers=False, backend="ray")
    assert not plan.errors, [d.message for d in plan.errors]
    planned = {row["task"]: row["device"] for row in plan.schedule}
    groups = state_groups(plan.graph)
    for group in groups:  # the plan keeps each piece of state on one device
        assert len({planned[n] for n in group.nodes}) == 1, (group.name, {n: planned[n] for n in group.nodes})

    graph = compile_file(script, pipeline_name=pipeline, params=params, cluster=cluster, backend="ray")
    program = emit(graph, "ray", tmp_path / "p_ray.py")
    submitted = {task: ast.literal_eval(device) for task, device in _SUBMIT.findall(program)}
    submitted = {task: device[0] if isinstance(device, list) else device for task, device in submitted.items()}
    assert submitted and submitted == {task: planned[task] for task in submitted}
    state = _table(program, "STATE")
    assert _groups(state) == {frozenset(g.nodes) for g in groups}

    # torch: planned for its program (maps spread over ranks), each task on the rank(s) the plan gives it
    plan = plan_file(str(script), cluster, pipeline=pipeline, params=params, with_transfers=False, backend="torch")
    assert not plan.errors, [d.message for d in plan.errors]
    planned = {row["task"]: tuple(row.get("devices", [row["device"]])) for row in plan.schedule}
    graph = compile_file(script, pipeline_name=pipeline, params=params, cluster=cluster, backend="torch")
    program = emit(graph, "torch", tmp_path / "p_torch.py")
    ranks = {task: row.ranks for task, row in _table(program, "TASKS").items() if task in planned}
    assert ranks == planned
    for group in groups:  # one rank runs every task of a piece of state, as the plan and Ray do
        assert len({ranks[n] for n in group.nodes}) == 1, (group.name, {n: ranks[n] for n in group.nodes})
