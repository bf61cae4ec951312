"""An Airflow DAG in the shape of Airflow's example_dags/example_python_operator.py ("example_python_operator"):
a module-level `with DAG(dag_id=...)` block whose functions, defined in the block, run as classic
`PythonOperator`s; one callable given `op_kwargs` in a loop of five operators, each ordered after the same two
with `>>`.

Kept as Airflow users write it. Trimmed what dagc reports: `print_context(ds=None, **kwargs)` takes the run
context (it prints the names given in `op_args` instead), `log_sql` reads a `templates_dict=` (it takes its
query in `op_kwargs`), and the virtualenv and external-Python operators. Changed: the sleeping function returns
what it slept, a last operator gathers the naps (`op_args` of the operators' `.output`), and the block binds the
DAG (`as dag`) to mark that as the DAG's result (`dag.add_result`), so that runs can be compared.
"""

from __future__ import annotations

import logging
import time
from pprint import pprint

import pendulum
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG

log = logging.getLogger(__name__)

QUERY = "SELECT customer, sum(amount) FROM orders GROUP BY customer"

with DAG(
    dag_id="example_python_operator",
    schedule=None,
    start_date=pendulum.datetime(2021, 1, 1, tz="UTC"),
    catchup=False,
    tags=["example"],
) as dag:
    # [START howto_operator_python]
    def print_context(first, second):
        """Print the names this task is given."""
        print("::group::All names")
        pprint({"first": first, "second": second})
        print("::endgroup::")
        return "Whatever you return gets printed in the logs"

    run_this = PythonOperator(task_id="print_the_context", python_callable=print_context, op_args=["ds", "ti"])
    # [END howto_operator_python]

    # [START howto_operator_python_render_sql]
    def log_sql(query):
        log.info("Python task decorator query: %s", query)
        return query.split()

    log_the_sql = PythonOperator(task_id="log_sql_query", python_callable=log_sql, op_kwargs={"query": QUERY})
    # [END howto_operator_python_render_sql]

    # [START howto_operator_python_kwargs]
    # Generate 5 sleeping tasks, sleeping from 0.0 to 0.4 seconds respectively
    def my_sleeping_function(random_base):
        """This is a function that will run within the DAG execution"""
        time.sleep(random_base)
        return random_base

    naps = []
    for i in range(5):
        sleeping_task = PythonOperator(
            task_id=f"sleep_for_{i}", python_callable=my_sleeping_function, op_kwargs={"random_base": i / 10}
        )

        run_this >> log_the_sql >> sleeping_task
        naps.append(sleeping_task.output)
    # [END howto_operator_python_kwargs]

    def gather(slept, words, greeting):
        return {"slept": slept, "total": round(sum(slept), 6), "words": len(words), "greeting": greeting}

    gathered = PythonOperator(
        task_id="gather", python_callable=gather, op_args=[naps, log_the_sql.output, run_this.output], retries=1
    )
    dag.add_result(gathered.output)
