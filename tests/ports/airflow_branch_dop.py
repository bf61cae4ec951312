"""An Airflow DAG in the shape of Airflow's example_dags/example_branch_python_dop_operator_3.py
("example_branch_dop_operator_v3"): a module-level `@task.branch` function picks one of two `EmptyOperator`s
of a `with DAG(...)` block from the minute of the run; the DAG's `default_args` set `depends_on_past` (which
changes nothing in what one run computes).

Kept as Airflow users write it. Trimmed what dagc reports: `should_run(**kwargs)` read the minute from the run's
context (`kwargs["logical_date"]`); it takes the minute as an argument instead. Changed: the DAG is not
scheduled, and, so that runs can be compared, a `@task` follows each empty task, and a join run when either side
ran (`trigger_rule="none_failed_min_one_success"`, with `retries` from `default_args`) says which side ran, as
the DAG's result (`dag.add_result`).
"""

from __future__ import annotations

import pendulum
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, task


@task.branch()
def should_run(minute: int) -> str:
    """
    Determine which empty_task should be run based on if the logical date minute is even or odd.

    :param minute: the minute of the logical date
    :return: Id of the task to run
    """
    print(f"------------- minute = {minute}")
    if minute % 2 == 0:
        return "empty_task_1"
    return "empty_task_2"


@task
def side(name: str, minute: int) -> str:
    return f"{name} at minute {minute}"


@task(trigger_rule="none_failed_min_one_success")
def which(even, odd) -> dict:
    return {"even": even, "odd": odd}


with DAG(
    dag_id="example_branch_dop_operator_v3",
    schedule=None,
    start_date=pendulum.datetime(2021, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"depends_on_past": True, "retries": 1},
    tags=["example"],
) as dag:
    cond = should_run(37)

    empty_task_1 = EmptyOperator(task_id="empty_task_1")
    empty_task_2 = EmptyOperator(task_id="empty_task_2")
    cond >> [empty_task_1, empty_task_2]

    even = side("even", 37)
    odd = side("odd", 37)
    empty_task_1 >> even
    empty_task_2 >> odd
    dag.add_result(which(even, odd))
