"""An Airflow 3 TaskFlow DAG with a task group, as Airflow's example_dags/example_dynamic_task_mapping.py maps one
("example_task_group_mapping"): a `@task_group` function whose body defines and calls its own tasks, mapped
with `.expand(num=[...])` and also called once on a task's result, inside a `@dag` function.

Kept as Airflow users write it; the DAG function returns the final task's result (Airflow 3's DAG result).
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import dag, task, task_group


@dag(schedule=None, catchup=False, start_date=datetime(2022, 3, 4), tags=["example"])
def task_group_mapping():
    @task
    def base() -> int:
        return 100

    @task_group
    def op(num):
        @task
        def add_1(num):
            return num + 1

        @task
        def mul_2(num):
            return num * 2

        return mul_2(add_1(num))

    @task
    def total(values, first: int) -> dict:
        print(f"mapped results: {list(values)}")
        return {"sum": sum(values), "values": list(values), "first": first}

    results = op.expand(num=[1, 2, 3])
    return total(results, op(base()))


task_group_mapping()
