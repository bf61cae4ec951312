"""An Airflow DAG in the shape of Airflow's classic tutorial, example_dags/tutorial_dag.py ("tutorial_dag"):
`with DAG("tutorial_dag", default_args=...) as dag:` spelled with `airflow.models.dag.DAG`, the DAG's and each
task's `doc_md`, extract, transform and load functions run by `PythonOperator`s, ordered by
`extract_task >> transform_task >> load_task`.

Kept as Airflow users write it. Trimmed what dagc reports: the functions took `**kwargs` to reach the task
instance and passed their data with `ti.xcom_push`/`ti.xcom_pull`; here each returns its value (its XCom) and
the next one takes it through `op_args=[upstream.output]`, the classic operators' way to hand on an XCom.
Changed: the orders are a larger JSON document, and `load` returns the value it prints, which the block marks
as the DAG's result (`dag.add_result`), so that runs can be compared.
"""

from __future__ import annotations

import json
import textwrap
from datetime import timedelta

import pendulum
from airflow.models.dag import DAG
from airflow.providers.standard.operators.python import PythonOperator

ORDERS = json.dumps({str(1000 + i): round(301.27 + 13.5 * i - (i % 4) * 2.25, 2) for i in range(1, 31)})

with DAG(
    "tutorial_dag",
    default_args={"retries": 2},
    description="DAG tutorial",
    schedule=None,
    start_date=pendulum.datetime(2021, 1, 1, tz="UTC"),
    catchup=False,
    tags=["example"],
) as dag:
    dag.doc_md = __doc__

    def extract():
        data_string = ORDERS
        return data_string

    def transform(extract_data_string):
        order_data = json.loads(extract_data_string)

        total_order_value = 0
        for value in order_data.values():
            total_order_value += value

        total_value = {"total_order_value": round(total_order_value, 2), "orders": len(order_data)}
        total_value_json_string = json.dumps(total_value)
        return total_value_json_string

    def load(total_value_string):
        total_order_value = json.loads(total_value_string)

        print(total_order_value)
        return total_order_value

    extract_task = PythonOperator(
        task_id="extract",
        python_callable=extract,
    )
    extract_task.doc_md = textwrap.dedent(
        """\
    #### Extract task
    A simple Extract task to get data ready for the rest of the data pipeline.
    In this case, getting data is simulated by reading from a hardcoded JSON string.
    """
    )

    transform_task = PythonOperator(
        task_id="transform",
        python_callable=transform,
        op_args=[extract_task.output],
        execution_timeout=timedelta(minutes=5),
    )
    transform_task.doc_md = textwrap.dedent(
        """\
    #### Transform task
    A simple Transform task which takes in the collection of order data and computes the total order value.
    """
    )

    load_task = PythonOperator(
        task_id="load",
        python_callable=load,
        op_args=[transform_task.output],
    )
    load_task.doc_md = textwrap.dedent(
        """\
    #### Load task
    A simple Load task which takes in the result of the Transform task and prints it out.
    """
    )

    extract_task >> transform_task >> load_task
    dag.add_result(load_task.output)
