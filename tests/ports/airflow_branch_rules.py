"""Branching as Airflow runs it, each trigger rule dagc lowers meeting skipped upstream tasks: a
`BranchPythonOperator` that picks two of three paths (a list of task ids), a skip passed on through a path, and
joins under `none_failed`, `none_failed_min_one_success`, `one_success`, `all_done`, and the default
`all_success`; a `@task.branch` in the DAG function that returns None (skipping all it leads to); a branch that
is itself skipped; an item of a skipped task's result. The DAG's result gathers what each task returned (None for a skipped one).
"""

from __future__ import annotations

from datetime import datetime

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.providers.standard.operators.python import BranchPythonOperator, PythonOperator
from airflow.sdk import Label, TriggerRule, dag, task


def pick_paths(threshold):
    return ["path_a", "path_c"] if threshold > 2 else "path_b"


def walk(name, steps):
    return f"{name}:{steps}"


@task
def follow(before):
    return None if before is None else before + "+"


@task(multiple_outputs=True)
def split(name: str) -> dict:
    return {"head": name[:1], "tail": name[1:]}


@task(trigger_rule=TriggerRule.NONE_FAILED)
def none_failed(a, b, c):
    return ["none_failed", a, b, c]


@task(trigger_rule="none_failed_min_one_success")
def min_one(a, b):
    return ["min_one", a, b]


@task(trigger_rule=TriggerRule.ONE_SUCCESS)
def one_success(b, after_b):
    return ["one_success", b, after_b]


@task(trigger_rule=TriggerRule.ALL_DONE)
def all_done(a, b):
    return ["all_done", a, b]


@task
def all_success(a, c):
    return ["all_success", a, c]


@task(trigger_rule=TriggerRule.ALL_DONE)
def results(outcomes: dict) -> dict:
    return outcomes


@dag(schedule=None, start_date=datetime(2024, 1, 1))
def branch_rules():
    @task.branch
    def nothing() -> None:
        return None

    @task.branch
    def inner(name: str) -> str:
        return name

    choose = BranchPythonOperator(task_id="choose", python_callable=pick_paths, op_args=[3])
    a = PythonOperator(task_id="path_a", python_callable=walk, op_args=["a", 1])
    b = PythonOperator(task_id="path_b", python_callable=walk, op_args=["b", 2])
    c = PythonOperator(task_id="path_c", python_callable=walk, op_args=["c", 3])
    choose >> Label("pick") >> [a, b, c]
    after_b = follow(b.output)
    gate = nothing()
    behind = EmptyOperator(task_id="behind")
    late = PythonOperator(task_id="late", python_callable=walk, op_args=["late", 5])
    gate >> behind >> late
    skipped_branch = inner("x")
    b >> skipped_branch
    x = PythonOperator(task_id="x", python_callable=walk, op_args=["x", 4])
    skipped_branch >> x
    parts = split("path")
    b >> parts
    head = parts["head"]
    done = all_done(a.output, late.output)
    done_before = all_done(a.output, b.output)
    return results({
        "none_failed": none_failed(a.output, b.output, c.output),
        "min_one": min_one(a.output, b.output),
        "one_success": one_success(b.output, after_b),
        "all_done": [done, done_before],
        "all_success": all_success(a.output, c.output),
        "x": x.output,
        "head": head,
        "tail": all_done(parts["tail"], None),
    })


branch_rules()
