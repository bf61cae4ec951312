"""Airflow DAGs compiled and checked, without running them: a DAG's `default_args` given to its tasks, the
trigger rule of a task imported from the user's modules, a task of those modules that needs Airflow's run
context, and branches lowered to conditional regions (or reported where dagc cannot lower them). The programs'
results against Airflow's own `dag.test()` are in tests/test_dialect_airflow.py."""

from __future__ import annotations

from pathlib import Path

from dagc.driver import compile_file
from tests.conftest import run_dagc

PORTS = Path(__file__).parent / "ports"


DEFAULTS = '''\
from datetime import datetime, timedelta

from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG, dag, task

DEFAULTS = {"owner": "ml", "retries": 2, "email_on_failure": False, "retry_delay": timedelta(minutes=1),
            "execution_timeout": timedelta(minutes=5), "pool_slots": 2}


@task
def top(x: int) -> int:
    return x + 1


@task(retries=5)
def own(x: int) -> int:
    return x


def plain(x):
    return x


@dag(schedule=None, start_date=datetime(2024, 1, 1), default_args=DEFAULTS)
def defaults():
    @task(execution_timeout=timedelta(seconds=10))
    def inner(x: int) -> int:
        return x

    e = PythonOperator(task_id="e", python_callable=plain, op_args=[inner(own(top(1)))], retries=0)
    return top.override(retries=7)(e.output)


defaults()

with DAG("block", default_args={"retries": 1, "depends_on_past": True, "sla": 3}) as blk:
    blk.add_result(top(1))
'''


def test_default_args_give_each_task_the_options_it_does_not_set(tmp_path: Path) -> None:
    """`default_args` (a module-level dict constant or a literal) give retries and a timeout to every task of
    their DAG that does not set its own, as Airflow does: module-level tasks at the call (another DAG calling
    them keeps its own defaults); keys that change nothing are ignored, any other is warned about at its line."""
    script = tmp_path / "defaults.py"
    script.write_text(DEFAULTS)
    graph = compile_file(script, pipeline_name="defaults")
    options = {n.name: (n.options.retries, n.options.timeout) for n in graph if n.op == "task"}
    assert options == {"top": (2, 300.0), "own": (5, 300.0), "inner": (2, 10.0), "e": (0, 300.0),
                       "top.1": (7, 300.0)}
    block = compile_file(script, pipeline_name="block")
    assert [(n.name, n.options.retries, n.options.timeout) for n in block if n.op == "task"] == [("top", 1, None)]
    proc = run_dagc("check", str(script))
    assert proc.returncode == 0, proc.stderr
    warned = [line for line in proc.stderr.splitlines() if "warning[" in line]
    assert len(warned) == 2 and "defaults.py:7:56:" in warned[0] and "`pool_slots`" in warned[0]
    assert "defaults.py:36:72:" in warned[1] and "`sla`" in warned[1]


BLOCK_DEFAULTS = '''\
from airflow.sdk import DAG, task

with DAG("first", schedule=None, default_args={"retries": 2}) as first:
    @task
    def step(x: int) -> int:
        return x + 1

    first.add_result(step(1))

with DAG("second", schedule=None) as second:
    second.add_result(step(2))

with DAG("third", schedule=None, default_args={"retries": 4}) as third:
    third.add_result(step(3))
'''


def test_default_args_of_a_with_dag_block_stay_with_its_calls(tmp_path: Path) -> None:
    """A task defined in one `with DAG(...)` block is a function of the module that later blocks may call: each
    call takes the `default_args` of the DAG it is made in, as Airflow gives them to the operator it makes."""
    script = tmp_path / "blocks.py"
    script.write_text(BLOCK_DEFAULTS)
    retries = {dag: [(n.name, n.options.retries) for n in compile_file(script, pipeline_name=dag) if n.op == "task"]
               for dag in ("first", "second", "third")}
    assert retries == {"first": [("step", 2)], "second": [("step", 0)], "third": [("step", 4)]}


IMPORTED_RULE = '''\
from airflow.sdk import DAG, task
from helpers.tasks import tail


@task.branch
def pick() -> str:
    return "a"


@task
def step(name: str) -> str:
    return name


with DAG("imported_rule", schedule=None) as dag:
    chosen = pick()
    a = step.override(task_id="a")("a")
    b = step.override(task_id="b")("b")
    chosen >> [a, b]
    dag.add_result(tail.override(task_id="end")(b))
'''


def test_trigger_rule_of_a_task_imported_from_the_users_modules(tmp_path: Path) -> None:
    """A `@task(trigger_rule=TriggerRule.NONE_FAILED)` of another module, called through `.override(task_id=...)`
    in a DAG file that does not import TriggerRule, keeps its rule: it runs after a skipped upstream task, outside
    any conditional region, with nothing reported."""
    (tmp_path / "helpers").mkdir()
    (tmp_path / "helpers" / "__init__.py").write_text("")
    (tmp_path / "helpers" / "tasks.py").write_text("from airflow.sdk import TriggerRule, task\n\n\n"
                                                   "@task(trigger_rule=TriggerRule.NONE_FAILED)\n"
                                                   "def tail(x):\n    return x\n")
    script = tmp_path / "imported_rule.py"
    script.write_text(IMPORTED_RULE)
    proc = run_dagc("check", str(script))
    assert proc.returncode == 0 and "error[" not in proc.stderr, proc.stderr
    graph = compile_file(script, pipeline_name="imported_rule")
    assert [n.function for n in graph if n.op == "task" and n.function.endswith("tail")] == ["tail"]
    assert sum(n.op == "cond" for n in graph) == 2  # (a and b, each under the branch's choice)


def test_check_names_an_imported_task_that_takes_the_run_context(tmp_path: Path) -> None:
    """A `@task` imported from another module of the project that takes Airflow's run context is reported at its
    definition, in its own file, as one defined in the DAG's file is."""
    (tmp_path / "helpers").mkdir()
    (tmp_path / "helpers" / "__init__.py").write_text("")
    (tmp_path / "helpers" / "tasks.py").write_text("from airflow.sdk import task\n\n\n"
                                                   "@task\ndef stamp(x, ti=None):\n    return x\n")
    script = tmp_path / "stamped.py"
    script.write_text("from airflow.sdk import DAG\nfrom helpers.tasks import stamp\n\n"
                      "with DAG(\"stamped\", schedule=None) as dag:\n    dag.add_result(stamp(1))\n")
    proc = run_dagc("check", str(script))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "tasks.py:5:1:" in proc.stderr and "task `stamp` takes Airflow's run context (`ti`)" in proc.stderr


BRANCH_FORMS = '''\
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, TriggerRule, task


@task.branch
def pick() -> str:
    return "a"


@task
def step(name: str) -> str:
    return name


with DAG("forms", schedule=None) as dag:
    chosen = pick()
    a = step("a")
    b = step.override(trigger_rule="one_failed")("b")
    c = EmptyOperator(task_id="c", trigger_rule=TriggerRule.ALL_SKIPPED)
    chosen >> [a, b, c]
    for name in ["d", "e"]:
        a >> step(name)
'''


BRANCH_SHAPES = '''\
from airflow.sdk import DAG, task

NAME = "x"


@task.branch
def pick(n: int) -> str:
    return "a"


@task
def step(name: str) -> str:
    return name


with DAG("shapes", schedule=None) as dag:
    chosen = pick.expand(n=[1, 2])
    a = step.override(task_id=NAME + "y")("a")
    chosen >> a
'''


def test_check_names_what_branching_cannot_lower_at_its_line(tmp_path: Path) -> None:
    """A trigger rule that depends on failures or on all upstream tasks being skipped, a task made in a loop of a
    DAG that branches, a mapped branch, a task a branch may choose whose id is not a literal: each reported at
    the line naming it."""
    script = tmp_path / "forms.py"
    script.write_text(BRANCH_FORMS)
    proc = run_dagc("check", str(script))
    assert proc.returncode != 0
    for line, what in ((18, "trigger rule `one_failed`"), (19, "trigger rule `all_skipped`"),
                       (21, "a task made in a loop (or block) of a DAG that branches")):
        assert f"forms.py:{line}:" in proc.stderr and what in proc.stderr, (line, what, proc.stderr)
    assert proc.stderr.count("error[") == 3 and "Traceback" not in proc.stderr
    shapes = tmp_path / "shapes.py"
    shapes.write_text(BRANCH_SHAPES)
    proc = run_dagc("check", str(shapes))
    for line, what in ((17, "a mapped branch task"), (18, "the id of `a`, a task a branch may choose")):
        assert f"shapes.py:{line}:" in proc.stderr and what in proc.stderr, (line, what, proc.stderr)
    assert proc.stderr.count("error[") == 2 and "Traceback" not in proc.stderr


def test_branches_compile_to_conditional_regions() -> None:
    """Each task a branch may skip runs in a `cond` region on the branch's choice; a task no branch reaches
    does not."""
    graph = compile_file(PORTS / "airflow_branch_dop.py", pipeline_name="example_branch_dop_operator_v3")
    top = {n.name: n for n in graph}
    assert "should_run" in top and [n.op for n in top.values()].count("cond") == 3
    conds = [n for n in graph if n.op == "cond"]
    inside = sorted(b.function for c in conds for body in c.bodies.values() for b in body if b.op == "task")
    assert inside == ["side", "side", "which"]
    assert graph.node("should_run").op == "task"  # (no branch reaches it: it runs unconditionally)


BRANCH_GROUP = '''\
from airflow.sdk import DAG, task, task_group


@task.branch
def pick() -> str:
    return "other"


@task
def step(name: str) -> str:
    return name


with DAG("branch_group", schedule=None) as dag:
    @task_group
    def group(x: str):
        return step.override(task_id="inner")(x)

    chosen = pick()
    grouped = group("in-group")
    other = step.override(task_id="other")("other")
    chosen >> [grouped, other]
'''


def test_check_names_a_task_group_called_in_a_dag_that_branches(tmp_path: Path) -> None:
    """A task group called in a DAG that branches is reported at the call (Airflow would skip the group's tasks
    a branch does not choose; they are not in the graph dagc's branching reads); the same DAG without the branch
    compiles."""
    script = tmp_path / "branch_group.py"
    script.write_text(BRANCH_GROUP)
    proc = run_dagc("check", str(script))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "branch_group.py:20:15:" in proc.stderr and "a task group called in a DAG that branches" in proc.stderr
    script.write_text(BRANCH_GROUP.replace("@task.branch", "@task"))
    proc = run_dagc("check", str(script))
    assert proc.returncode == 0, proc.stderr
