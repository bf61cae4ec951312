"""A `with DAG(...)` block whose dag_id is no Python name ("my-etl.v2": Airflow allows dashes and dots), its
result gathered by a `@task` defined in the block; and a task downstream of two branches, chosen by one and not
by the other: Airflow skips it whatever its trigger rule, and the skip goes on through two levels of default
(`all_success`) tasks below it, up to a `none_failed` join that runs.
"""

from __future__ import annotations

from datetime import datetime

from airflow.providers.standard.operators.python import BranchPythonOperator, PythonOperator
from airflow.sdk import DAG, TriggerRule, task


def pick(choice):
    return choice


def step(name):
    return name


with DAG("my-etl.v2", schedule=None, start_date=datetime(2024, 1, 1)) as dag:
    @task(trigger_rule=TriggerRule.ALL_DONE)
    def gather(outcomes: dict) -> dict:
        return outcomes

    first = BranchPythonOperator(task_id="first", python_callable=pick, op_args=["both"])
    second = BranchPythonOperator(task_id="second", python_callable=pick, op_args=["only_second"])
    both = PythonOperator(task_id="both", python_callable=step, op_args=["both"],
                          trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS)
    only_second = PythonOperator(task_id="only_second", python_callable=step, op_args=["only_second"])
    deeper = PythonOperator(task_id="deeper", python_callable=step, op_args=["deeper"])
    deepest = PythonOperator(task_id="deepest", python_callable=step, op_args=["deepest"])
    joined = PythonOperator(task_id="joined", python_callable=step, op_args=["joined"], trigger_rule="none_failed")
    [first, second] >> both
    second >> only_second
    both >> deeper >> deepest
    [deepest, only_second] >> joined
    dag.add_result(gather({"both": both.output, "only_second": only_second.output, "deeper": deeper.output,
                           "deepest": deepest.output, "joined": joined.output}))
