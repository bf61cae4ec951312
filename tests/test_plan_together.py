"""Priorities across pipelines: `@dagc.pipeline(priority=N)`, and planning several pipelines together on one
cluster (`dagc plan --together`, `dagc viz --together`)."""

from __future__ import annotations

import io
import json
import textwrap
from pathlib import Path

import pytest

from dagc.cluster import parse_cluster_spec
from dagc.frontend import compile_source
from dagc.plan_together import plan_together, run_plan_together
from dagc.sched import schedule, validate
from dagc.sched.random_dag import random_problem
from dagc.sched.shared import overlaps, priority_order, schedule_together
from tests.property import examples

URGENT = """
import dagc

LEVEL = 5


@dagc.task(cost="4s")
def step(x: int) -> int:
    return x + 1


@dagc.pipeline(priority=LEVEL)
def urgent(n: int = 3) -> int:
    x = 0
    for _ in range(n):
        x = step(x)
    return x
"""

BATCH = """
import dagc


@dagc.task(cost="10s")
def shard(k: int) -> int:
    return k * k


@dagc.task(cost="2s")
def total(xs: list) -> int:
    return sum(xs)


@dagc.pipeline
def batch(n: int = 6) -> int:
    return total([shard(k) for k in range(n)])
"""


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


# ---- the declaration -------------------------------------------------------------------------------
def _compile(tmp_path: Path, text: str, name: str = "pipe.py"):
    return compile_source(_write(tmp_path, name, text))


def test_priority_is_read_from_the_decorator_and_kept_in_the_ir(tmp_path):
    graph = _compile(tmp_path, URGENT).graph
    assert graph.attrs["pipeline.priority"] == 5
    assert "pipeline.priority" not in _compile(tmp_path, BATCH).graph.attrs  # default 0: IR unchanged


def test_negative_priority_and_class_pipelines(tmp_path):
    text = URGENT.replace("priority=LEVEL", "priority=-2")
    assert _compile(tmp_path, text).graph.attrs["pipeline.priority"] == -2
    flow = """
    import dagc


    class Flow:
        @dagc.task
        @staticmethod
        def one() -> int:
            return 1

        @dagc.pipeline(priority=3)
        @staticmethod
        def run() -> int:
            return Flow.one()
    """
    assert _compile(tmp_path, flow).graph.attrs["pipeline.priority"] == 3


@pytest.mark.parametrize("value", ['"high"', "1.5", "True", "os.cpu_count()"])
def test_a_priority_that_is_not_a_compile_time_integer_is_an_error_at_its_value(tmp_path, value):
    text = URGENT.replace("priority=LEVEL", f"priority={value}")
    [diag] = [d for d in _compile(tmp_path, text).sink.diagnostics if d.code == "DAGC124"]
    line = text.splitlines().index(f"@dagc.pipeline(priority={value})") + 1
    assert (diag.span.line, diag.span.col) == (line, len("@dagc.pipeline(priority=") + 1)
    assert "integer" in diag.message and "priority=2" in diag.hint


# ---- the shared scheduler --------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(examples(12)))
def test_shared_plans_keep_the_highest_priority_as_if_alone_and_never_overlap(seed):
    problems = [random_problem(20 + 5 * k, 4, seed=seed * 7 + k, nodes=2) for k in range(3)]
    priorities = [seed % 3, 2, -1]
    alone = [schedule(p, "heft") for p in problems]
    shared = schedule_together(problems, priorities, alone)
    top = priority_order(priorities)[0]
    assert shared[top].together.makespan == pytest.approx(alone[top].makespan)
    assert overlaps(shared) == []
    for plan in shared:
        assert validate(plan.problem, plan.together) == []
        assert plan.together.makespan >= plan.alone.makespan - 1e-9
    # planning in another order delays another pipeline: the order is what priority decides
    flipped = schedule_together(problems, priorities, alone, order=list(reversed(priority_order(priorities))))
    last = priority_order(priorities)[-1]
    assert flipped[last].together.makespan == pytest.approx(alone[last].makespan)


def test_overlaps_names_two_pipelines_on_one_device_at_once():
    p = random_problem(6, 1, seed=1)
    s = schedule(p, "heft")
    shared = schedule_together([p, p], [1, 0], [s, s], order=[0, 1])
    assert overlaps(shared) == []
    shared[1].together = s  # the second pipeline put on top of the first
    problems = overlaps(shared)
    assert problems and "overlaps" in problems[0] and problems[0].startswith("device 0: ")


# ---- the command -----------------------------------------------------------------------------------
def test_plan_together_puts_the_urgent_pipeline_first_and_the_batch_in_the_gaps(tmp_path):
    batch, urgent = _write(tmp_path, "batch.py", BATCH), _write(tmp_path, "urgent.py", URGENT)
    cluster = parse_cluster_spec("2")
    result = plan_together([batch, urgent], cluster)  # given in arrival order: the batch first
    assert result.valid, result.problems
    by_name = {r.pipeline: s for r, s in zip(result.planned, result.shared)}
    assert by_name["urgent"].together.makespan == pytest.approx(12.0, rel=1e-3)  # three 4 s steps, alone
    assert by_name["urgent"].delay == pytest.approx(0.0, abs=1e-6)
    # the batch (60 s of shards, then 2 s) waits for nothing but the 12 s the urgent steps hold one device
    assert by_name["batch"].alone.makespan == pytest.approx(32.0, rel=1e-3)
    assert by_name["batch"].together.makespan == pytest.approx(42.0, rel=1e-3)
    assert result.makespan == pytest.approx(42.0, rel=1e-3)
    assert sum(result.utilization) * result.makespan == pytest.approx(74.0, rel=1e-3)  # all the work, once

    # first come, first served instead: the urgent pipeline waits behind the batch
    fcfs = plan_together([batch, urgent], cluster, order=[0, 1])
    urgent_fcfs = {r.pipeline: s for r, s in zip(fcfs.planned, fcfs.shared)}["urgent"]
    assert urgent_fcfs.together.makespan > 12.0 + 1.0


def test_plan_together_table_and_json(tmp_path):
    batch, urgent = _write(tmp_path, "batch.py", BATCH), _write(tmp_path, "urgent.py", URGENT)
    cluster = parse_cluster_spec("2")
    out = io.StringIO()
    assert run_plan_together([batch, urgent], cluster, "dagc", False, out) == 0
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("plan together: dagc on ")
    assert lines[2].split()[:3] == ["5", urgent, "urgent"]  # highest priority first
    assert lines[3].split()[:3] == ["0", batch, "batch"]
    assert lines[-1].startswith("cluster: makespan 42")

    first, second = io.StringIO(), io.StringIO()
    assert run_plan_together([batch, urgent], cluster, "dagc", True, first) == 0
    run_plan_together([batch, urgent], cluster, "dagc", True, second)
    assert first.getvalue() == second.getvalue()  # deterministic
    data = json.loads(first.getvalue())
    assert data["together"] is True and data["valid"] is True and data["devices"] == 2
    assert [p["pipeline"] for p in data["pipelines"]] == ["batch", "urgent"]  # the order given
    urgent_json = data["pipelines"][1]
    assert urgent_json["priority"] == 5 and urgent_json["delay"] == pytest.approx(0.0, abs=1e-6)
    assert [t["task"] for t in urgent_json["schedule"]] == ["step[0]", "step[1]", "step[2]"]
    assert data["pipelines"][0]["delay"] == pytest.approx(10.0, rel=1e-3)


def test_plan_together_reports_a_broken_file_and_plans_the_rest(tmp_path):
    batch = _write(tmp_path, "batch.py", BATCH)
    broken = _write(tmp_path, "broken.py", "import dagc\n\n@dagc.pipeline\ndef p():\n    return missing()\n")
    out = io.StringIO()
    assert run_plan_together([batch, broken], parse_cluster_spec("2"), "dagc", False, out) == 1
    assert "error" in out.getvalue() and "batch" in out.getvalue()


def test_viz_together_draws_the_shared_schedule_one_colour_per_pipeline(tmp_path):
    from tests.conftest import run_dagc

    batch, urgent = _write(tmp_path, "batch.py", BATCH), _write(tmp_path, "urgent.py", URGENT)
    svg = tmp_path / "shared.svg"
    proc = run_dagc("viz", urgent, "--together", batch, "--cluster", "2", "-o", str(svg))
    assert proc.returncode == 0, proc.stderr
    text = svg.read_text()
    assert "urgent (priority 5)" in text and "batch (priority 0)" in text
    assert text.count(">step[") == 3 and text.count(">shard[") == 6
    proc = run_dagc("viz", urgent, "--together", batch, "-o", str(tmp_path / "shared.dot"))
    assert proc.returncode == 2 and "FILE.svg" in proc.stderr
