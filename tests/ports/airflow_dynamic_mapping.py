"""An Airflow 3 TaskFlow DAG using dynamic task mapping as Airflow's example_dags/example_dynamic_task_mapping.py
and its "second order" mapping do: `@task` functions at module level, a mapped task over a task's result
(`.expand(num=...)`), a mapped task of a mapped task, `.partial(...)` for the arguments every item shares, a
reduce over the mapped results, `retries=` and `execution_timeout=`, and `>>` for an order without data (an
audit task, defined in the DAG function, that must run before the report).

Kept as Airflow users write it, in the `@dag` form; the DAG function returns the report (Airflow 3's DAG result)
so that runs can be compared.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import dag, task


@task
def get_nums(count: int):
    return [3 * i + 1 for i in range(count)]


@task(retries=2)
def times_2(num):
    return num * 2


@task(execution_timeout=timedelta(minutes=5))
def add_offset(num, offset):
    return num + offset


@task
def sum_it(values, extra):
    total = sum(values)
    print(f"Total was {total}")
    return {"total": total, "values": list(values), "extra": extra}


@dag(dag_id="example_task_mapping_second_order", schedule=None, catchup=False, start_date=datetime(2022, 3, 4),
     tags=["example"])
def mapping_second_order(count: int = 6):
    @task
    def audit(values):
        print(f"audited {len(values)} values")
        return len(values)

    _get_nums = get_nums(count)
    _times_2 = times_2.expand(num=_get_nums)
    _added = add_offset.partial(offset=10).expand(num=_times_2)
    checked = audit(_added)
    report = sum_it(_added, [1, 2])
    checked >> report
    return report


mapping_second_order()
