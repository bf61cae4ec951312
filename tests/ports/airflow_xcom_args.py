"""Two Airflow DAGs in one file, in the shape of Airflow's example_dags/example_xcomargs.py: module-level
`@task` functions called in two `with DAG(...)` blocks ("example_xcom_args" and
"example_xcom_args_with_operators"), the second ordering task calls with `>>` around `EmptyOperator`s.

Kept as Airflow users write it. Trimmed what dagc reports: `print_value`'s `ts=None` parameter (Airflow fills
it from the run context), and the two `BashOperator`s, here `EmptyOperator`s that only order. Changed:
`print_value` returns the line it logs, and each block marks a task's result as the DAG's result
(`dag.add_result`), so that runs can be compared.
"""

from __future__ import annotations

import logging

import pendulum
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, task

log = logging.getLogger(__name__)


@task
def generate_value():
    """Empty function"""
    return "Bring me a shrubbery!"


@task
def print_value(value):
    """Empty function"""
    log.info("The knights of Ni say: %s", value)
    return f"The knights of Ni say: {value}"


with DAG(
    dag_id="example_xcom_args",
    start_date=pendulum.datetime(2021, 1, 1, tz="UTC"),
    catchup=False,
    schedule=None,
    tags=["example"],
) as dag:
    dag.add_result(print_value(generate_value()))

with DAG(
    "example_xcom_args_with_operators",
    start_date=pendulum.datetime(2021, 1, 1, tz="UTC"),
    catchup=False,
    schedule=None,
    tags=["example"],
) as dag2:
    bash_op1 = EmptyOperator(task_id="c")
    bash_op2 = EmptyOperator(task_id="d")
    xcom_args_a = print_value("first!")
    xcom_args_b = print_value("second!")

    bash_op1 >> xcom_args_a >> xcom_args_b >> bash_op2
    dag2.add_result(xcom_args_b)
