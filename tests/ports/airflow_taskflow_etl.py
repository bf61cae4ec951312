"""An Airflow 3 TaskFlow DAG in the shape of Airflow's TaskFlow tutorial (example_dags/tutorial_taskflow_api.py):
extract, transform and load tasks defined inside the `@dag` function, `multiple_outputs=True` with its result
subscripted, the DAG function called at module level to build the DAG.

Kept as Airflow users write it. Changed: the orders are a larger JSON document with a currency per order,
`load` returns the value it reports, and the DAG function returns that result (Airflow 3 keeps it as the
DAG's result), so that runs can be compared.
"""

from __future__ import annotations

import json

import pendulum
from airflow.sdk import dag, task

ORDERS = json.dumps({str(1000 + i): {"value": round(17.5 * i + (i % 7) * 3.25, 2), "currency": "USD" if i % 3 else "EUR"}
                     for i in range(1, 41)})


@dag(
    schedule=None,
    start_date=pendulum.datetime(2021, 1, 1, tz="UTC"),
    catchup=False,
    tags=["example"],
)
def tutorial_taskflow_api():
    """
    ### TaskFlow API Tutorial Documentation
    A simple data pipeline with three tasks for Extract, Transform, and Load.
    """

    @task()
    def extract():
        """Get the order data: here read from a JSON string."""
        order_data_dict = json.loads(ORDERS)
        return order_data_dict

    @task(multiple_outputs=True)
    def transform(order_data_dict: dict):
        """Compute the total order value, in dollars, and count the orders per currency."""
        total_order_value = 0
        currencies: dict[str, int] = {}
        for order in order_data_dict.values():
            rate = 1.08 if order["currency"] == "EUR" else 1.0
            total_order_value += order["value"] * rate
            currencies[order["currency"]] = currencies.get(order["currency"], 0) + 1
        return {"total_order_value": round(total_order_value, 2), "currencies": currencies}

    @task()
    def load(total_order_value: float, currencies: dict):
        """Print the total (instead of saving it for review) and return it."""
        print(f"Total order value is: {total_order_value:.2f}")
        return {"total": total_order_value, "orders": sum(currencies.values())}

    order_data = extract()
    order_summary = transform(order_data)
    return load(order_summary["total_order_value"], order_summary["currencies"])


tutorial_taskflow_api()
