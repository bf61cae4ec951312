"""Airflow's `with DAG(...)` form: a module-level block whose body calls tasks and builds operators, read as the
body of a `@dag` function would be (dagc.frontend.dialects.airflow lowers both).

    with DAG(dag_id="etl", schedule=None) as dag:      →  @dag def etl():
        @task def extract(): ...                              (extract: a task of the module, as Python binds it)
        load(extract())                                        load(extract())
        dag.add_result(...)                                    return ...   (Airflow 3's DAG result)

The pipeline is named after a literal `dag_id` (the first argument or `dag_id=`), else after the `as` name.
"""

from __future__ import annotations

import ast

from dagc.frontend.dialects import pipeline_context
from dagc.frontend.modules import ModuleInfo, Project

__all__ = ["dag_function"]


def dag_function(project: Project, info: ModuleInfo,
                 node: ast.With) -> tuple[ast.FunctionDef, str | None, ast.Call | None] | None:
    """The block as a function without parameters named after the DAG, the name `as` binds (None without `as`)
    and the DAG call (None for a bare `with dag:`); None, reported, when the DAG has no name dagc can read."""
    found = pipeline_context(info, node)
    assert found is not None  # (the block is read because its context is a DAG)
    item = found[1]
    call = item.context_expr
    variable = item.optional_vars.id if isinstance(item.optional_vars, ast.Name) else None
    dag_id = None
    if isinstance(call, ast.Call):
        given = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "dag_id"), None)
        if isinstance(given, ast.Constant) and isinstance(given.value, str) and given.value:
            dag_id = given.value
    name = dag_id or variable
    if name is None:
        project.sink.error("DAGC108", "this DAG has no name dagc can read", info.source.span(call),
                           hint="give it a literal id, `with DAG(dag_id=\"etl\", ...)`, or bind it: "
                           "`with DAG(...) as etl:`")
        return None
    if name in info.pipelines:
        project.sink.error("DAGC108", f"a second DAG named `{name}` in this file", info.source.span(call),
                           hint="give each DAG its own `dag_id`")
        return None
    fn = ast.FunctionDef(name=name, args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[],
                                                       kw_defaults=[], kwarg=None, defaults=[]),
                         body=node.body, decorator_list=[], returns=None, type_params=[])
    return ast.copy_location(fn, node), variable, call if isinstance(call, ast.Call) else None

