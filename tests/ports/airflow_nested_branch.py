"""An Airflow DAG in the shape of Airflow's example_dags/example_nested_branch_dag.py ("example_nested_branch_dag"):
a `with DAG(...)` block whose `@task.branch` task, called twice under two ids (`.override(task_id=...)`), picks
one of two `EmptyOperator`s; the second branch is downstream of the first branch's unchosen side, and each
branch joins again under `TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS`.

Kept as Airflow users write it. Changed: the DAG is not scheduled (`schedule=None`), and, so that runs can be
compared, a `@task` marks each end of a path (`reached`, ordered after it with `>>`) and a last task, run
whatever was skipped (`TriggerRule.ALL_DONE`), gathers what they returned (None for a skipped one) as the
DAG's result (`dag.add_result`).
"""

from __future__ import annotations

import pendulum
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, TriggerRule, task

with DAG(
    dag_id="example_nested_branch_dag",
    start_date=pendulum.datetime(2021, 1, 1, tz="UTC"),
    catchup=False,
    schedule=None,
    tags=["example"],
) as dag:

    @task.branch()
    def branch(task_id_to_return: str) -> str:
        return task_id_to_return

    branch_1 = branch.override(task_id="branch_1")(task_id_to_return="false_1")
    join_1 = EmptyOperator(task_id="join_1", trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS)
    true_1 = EmptyOperator(task_id="true_1")
    false_1 = EmptyOperator(task_id="false_1")

    branch_2 = branch.override(task_id="branch_2")(task_id_to_return="true_2")
    join_2 = EmptyOperator(task_id="join_2", trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS)
    true_2 = EmptyOperator(task_id="true_2")
    false_2 = EmptyOperator(task_id="false_2")
    false_3 = EmptyOperator(task_id="false_3")

    branch_1 >> true_1 >> join_1
    branch_1 >> false_1 >> branch_2 >> [true_2, false_2] >> join_2 >> false_3 >> join_1

    @task
    def reached(where: str) -> str:
        return where

    @task(trigger_rule=TriggerRule.ALL_DONE)
    def paths(ends: list) -> dict:
        return {"ran": [end for end in ends if end is not None], "skipped": ends.count(None)}

    at_true_1 = reached.override(task_id="at_true_1")("true_1")
    at_true_2 = reached.override(task_id="at_true_2")("true_2")
    at_false_2 = reached.override(task_id="at_false_2")("false_2")
    at_join_2 = reached.override(task_id="at_join_2")("join_2")
    at_join_1 = reached.override(task_id="at_join_1")("join_1")
    true_1 >> at_true_1
    true_2 >> at_true_2
    false_2 >> at_false_2
    join_2 >> at_join_2
    join_1 >> at_join_1
    dag.add_result(paths([at_true_1, at_true_2, at_false_2, at_join_2, at_join_1]))
