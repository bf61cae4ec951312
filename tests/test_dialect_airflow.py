"""Airflow 3 TaskFlow DAGs compiled as written (tests/ports/airflow_*.py): each program (local, Ray on 2 devices,
torch on 2 gloo ranks) computes the DAG result Airflow itself computes with `dag.test()` (its metadata database
and DAG folder in a temporary AIRFLOW_HOME); the mapped tasks spread over the plan's devices; `>>` and `chain`
order tasks; and `dagc check` names each Airflow construct dagc does not compile, at its line. (Default args,
branches and trigger rules, compiled without a run: tests/test_dialect_airflow_compile.py.)

Compiling needs no Airflow; running the programs does (the DAG files import it), as does Airflow's own run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dagc.backends import emit
from dagc.backends.torch import REQUIRED_PASSES
from dagc.cluster import parse_cluster_spec
from dagc.driver import compile_file
from tests.conftest import run_dagc
from tests.dialect_runs import framework_run
from tests.engines import run_local, run_ray, run_torch

PORTS = Path(__file__).parent / "ports"

# DAG (a `@dag` function's name, or a `with DAG(...)` block's dag_id) -> its port
CASES: dict[str, str] = {
    "tutorial_taskflow_api": "airflow_taskflow_etl",
    "mapping_second_order": "airflow_dynamic_mapping",
    "ridge_training": "airflow_model_training",
    "task_group_mapping": "airflow_task_groups",
    "example_python_operator": "airflow_python_operator",
    "tutorial_dag": "airflow_tutorial_dag",
    "example_xcom_args": "airflow_xcom_args",
    "example_xcom_args_with_operators": "airflow_xcom_args",
    "example_nested_branch_dag": "airflow_nested_branch",
    "example_branch_dop_operator_v3": "airflow_branch_dop",
    "branch_rules": "airflow_branch_rules",
    "my-etl.v2": "airflow_dotted_id",
}
PORTED = sorted(set(CASES.values()))

OWN_RUN = '''\
import pickle, runpy
from airflow.models.xcom import XComModel
from airflow.sdk import DAG
from airflow.utils.db import upgradedb
from airflow.utils.session import create_session

upgradedb()
out, files = {}, {}
for name, port in CASES.items():
    if port not in files:
        files[port] = runpy.run_path(f"dags/{port}.py", run_name="airflow_port")
    found = files[port].get(name)
    dag = found() if callable(found) else next(  # a `@dag` function, or the DAG a `with DAG(...)` block built
        d for d in files[port].values() if isinstance(d, DAG) and d.dag_id == name)
    run = dag.test()
    assert run.state == "success", (port, run.state)
    (result,) = [t.task_id for t in dag.tasks if getattr(t, "returns_dag_result", False)]
    with create_session() as session:
        (row,) = session.query(XComModel).filter(
            XComModel.dag_id == dag.dag_id, XComModel.run_id == run.run_id, XComModel.task_id == result,
            XComModel.key == "return_value").all()
        out[name] = XComModel.deserialize_value(row)
pickle.dump(out, open("out.pkl", "wb"))
'''


@pytest.fixture(scope="module")
def airflow_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Each DAG's result as `dag.test()` computes it: the DAG result's XCom, all DAGs in one interpreter."""
    tmp = tmp_path_factory.mktemp("airflow_own")
    (tmp / "dags").mkdir()
    for port in PORTED:  # dag.test() finds the DAG through its DAG folder
        shutil.copy(PORTS / f"{port}.py", tmp / "dags" / f"{port}.py")
    env = {"AIRFLOW_HOME": str(tmp / "home"), "AIRFLOW__CORE__DAGS_FOLDER": str(tmp / "dags"),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW__CORE__HOSTNAME_CALLABLE": "socket.gethostname"}
    return framework_run("airflow", f"CASES = {CASES!r}\n{OWN_RUN}", [PORTS / f"{p}.py" for p in PORTED], env, tmp)


@pytest.fixture
def airflow_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the programs' import of Airflow keeps its configuration (not the user's ~/airflow)."""
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))
    return tmp_path


@pytest.mark.parametrize("dag", sorted(CASES))
def test_local_program_equals_dag_test(airflow_home: Path, airflow_results, dag: str) -> None:
    assert run_local(PORTS / f"{CASES[dag]}.py", dag, {}, airflow_home) == airflow_results[dag]


@pytest.mark.slow
def test_ray_and_torch_programs_equal_dag_test(airflow_home: Path, airflow_results, ray_cluster) -> None:
    """The DAG with mapped tasks over a task's result, tasks at module level and in the DAG function, and `>>`."""
    dag = "mapping_second_order"
    script = PORTS / f"{CASES[dag]}.py"
    assert run_ray(script, dag, {}, airflow_home, ray_cluster.address) == airflow_results[dag]
    assert run_torch(script, dag, {}, airflow_home) == airflow_results[dag]


@pytest.mark.slow
def test_ray_and_torch_programs_of_a_with_dag_block_equal_dag_test(airflow_home: Path, airflow_results,
                                                                   ray_cluster) -> None:
    """A `with DAG(...)` block of `PythonOperator`s (defined in the block, given `op_args`/`op_kwargs` and other
    operators' `.output`, made in a loop, ordered by `>>`): the programs import the DAG file as the module."""
    dag = "example_python_operator"
    script = PORTS / f"{CASES[dag]}.py"
    assert run_ray(script, dag, {}, airflow_home, ray_cluster.address) == airflow_results[dag]
    assert run_torch(script, dag, {}, airflow_home) == airflow_results[dag]


@pytest.mark.slow
def test_ray_and_torch_programs_of_a_dag_id_that_is_no_python_name_equal_dag_test(airflow_home: Path, airflow_results,
                                                                                  ray_cluster) -> None:
    """A `with DAG("my-etl.v2")` block (its pipeline, run directory and programs named after an id Python could
    not bind), whose task downstream of two branches is skipped by the one that does not choose it."""
    dag = "my-etl.v2"
    script = PORTS / f"{CASES[dag]}.py"
    assert run_ray(script, dag, {}, airflow_home, ray_cluster.address) == airflow_results[dag]
    assert run_torch(script, dag, {}, airflow_home) == airflow_results[dag]


@pytest.mark.slow
def test_ray_and_torch_programs_of_a_branching_dag_equal_dag_test(airflow_home: Path, airflow_results,
                                                                  ray_cluster) -> None:
    """Branches (a `BranchPythonOperator` choosing a list, a `@task.branch` of the DAG function choosing none)
    and the trigger rules that meet their skips: the tasks Airflow skips do not run in either program."""
    dag = "branch_rules"
    script = PORTS / f"{CASES[dag]}.py"
    assert run_ray(script, dag, {}, airflow_home, ray_cluster.address) == airflow_results[dag]
    assert run_torch(script, dag, {}, airflow_home) == airflow_results[dag]


def test_forms_compile_to_dagcs_own() -> None:
    """`.expand` over a constant list unrolls into calls the plan spreads; over a task's result it is a map region
    (spread over the torch ranks); `>>` and `chain` order without data; nested tasks keep their qualified names."""
    training = compile_file(PORTS / "airflow_model_training.py", pipeline_name="ridge_training",
                            cluster=parse_cluster_spec("4"))
    trained = [n for n in training if n.name.startswith("train[")]
    assert len(trained) == 4 and len({n.attributes()["partition.device"] for n in trained}) == 4
    assert trained[0].target == "airflow_model_training:ridge_training.<locals>.train"
    assert trained[0].options.retries == 1 and "validate" in training.node("choose").deps
    mapping = compile_file(PORTS / "airflow_dynamic_mapping.py", pipeline_name="mapping_second_order",
                           passes=REQUIRED_PASSES, cluster=parse_cluster_spec("2"), backend="torch")
    maps = [n for n in mapping if n.op == "map"]
    assert len(maps) == 2 and all(n.options.ranks == 2 for n in maps)
    assert "audit" in mapping.node("sum_it").deps


UNSUPPORTED = '''\
from datetime import datetime

from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import dag, task


@dag(schedule=None, start_date=datetime(2024, 1, 1))
def nightly():
    @task.bash
    def shell():
        return "echo hi"

    @task
    def with_context(**context):
        return context["ds"]

    @task
    def double(x: int) -> int:
        return 2 * x

    echo = BashOperator(task_id="echo", bash_command="echo hi")
    pairs = double.expand_kwargs([{"x": 1}])
    return double(1)


nightly()
'''


def test_check_names_each_unsupported_construct_at_its_line(tmp_path: Path) -> None:
    script = tmp_path / "nightly.py"
    script.write_text(UNSUPPORTED)
    proc = run_dagc("check", str(script))
    assert proc.returncode != 0
    for line, what in ((9, "`@task.bash`"), (14, "task `with_context` takes Airflow's run context"),
                       (21, "operator `BashOperator`"), (22, "`.expand_kwargs(...)`")):
        assert f"nightly.py:{line}:" in proc.stderr and what in proc.stderr, (line, what, proc.stderr)
    assert "Traceback" not in proc.stderr


def test_program_says_when_airflow_is_missing(tmp_path: Path) -> None:
    """Where the programs run without Airflow, the import of the DAG file fails: one line says what to install."""
    program = tmp_path / "etl_local.py"
    graph = compile_file(PORTS / "airflow_taskflow_etl.py", pipeline_name="tutorial_taskflow_api")
    program.write_text(emit(graph, "local", program))
    absent = tmp_path / "absent" / "airflow"  # an environment whose `import airflow` fails as without it
    absent.mkdir(parents=True)
    (absent / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'airflow'\", name='airflow')\n")
    env = {**os.environ, "PYTHONPATH": str(absent.parent), "AIRFLOW_HOME": str(tmp_path / "home")}
    proc = subprocess.run([sys.executable, str(program)], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "imports `airflow`, which is not installed" in proc.stderr and "Traceback" not in proc.stderr


ORDERS = '''\
from datetime import datetime

from airflow.sdk import chain, dag, task


@task
def step(name: str) -> str:
    print(name)
    return name


@task
def pair(x: int, y: int) -> tuple:
    return (x, y)


@dag(schedule=None, start_date=datetime(2024, 1, 1))
def orders():
    a = step("a")
    b = step("b")
    c = step("c")
    d = step("d")
    a >> [b, c]
    d << c
    chain(step("e"), [step("f"), step("g")], d)
    return pair.expand(x=[1, 2], y=[3, 4, 5])


orders()
'''


def test_orderings_and_cross_products(tmp_path: Path) -> None:
    """`a >> [b, c]`, `d << c` and `chain(...)` (of calls written in it too) order without data; `.expand` over
    two keywords is Airflow's cross product, the first keyword outermost."""
    script = tmp_path / "orders.py"
    script.write_text(ORDERS)
    graph = compile_file(script, pipeline_name="orders")
    steps = {n.args[0].value: n for n in graph if n.op == "task" and n.function == "step"}  # type: ignore[union-attr]
    deps = {name: {graph.node(d).args[0].value for d in node.deps} for name, node in steps.items()}  # type: ignore[union-attr]
    assert deps == {"a": set(), "b": {"a"}, "c": {"a"}, "d": {"c", "f", "g"}, "e": set(), "f": {"e"}, "g": {"e"}}
    pairs = [n for n in graph.topological_order() if graph.node(n).function == "pair"]
    got = [tuple(v.value for _, v in graph.node(n).kwargs) for n in pairs]  # type: ignore[union-attr]
    assert got == [(x, y) for x in (1, 2) for y in (3, 4, 5)]


CLOSURE = '''\
from airflow.sdk import dag, task


@dag
def scaled():
    factor = {factor}

    @task
    def scale(x: int) -> int:
        return x * factor

    return scale(2)
'''


def test_nested_task_code_sees_what_it_closes_over(tmp_path: Path) -> None:
    """A task defined in the DAG function reads the function's locals: editing one changes the digest the program
    compares at start, so a cached result of the task is not reused."""
    from dagc.backends.fingerprint import code_table
    from dagc.runtime.code import code_digest

    script = tmp_path / "scaled.py"
    script.write_text(CLOSURE.format(factor=3))
    table, files = code_table(compile_file(script, pipeline_name="scaled"))
    names, _upstream, emitted = table["scale"]
    assert code_digest(names, tmp_path, files) == emitted
    script.write_text(CLOSURE.format(factor=4))
    assert code_digest(names, tmp_path, files) != emitted


GROUP_CLOSURE = '''\
from airflow.sdk import dag, task, task_group


@dag(schedule=None)
def groups():
    @task_group
    def shifted(x: int):
        offset = x * 2

        @task
        def shift(v: int) -> int:
            return v + {read}

        return shift(1)

    @task
    def both(a: int, b: int) -> list:
        return [a, b]

    return both({calls})


groups()
'''


@pytest.mark.parametrize(("read", "calls", "reported"), [
    ("x + offset", "shifted(10), shifted(20)", True),  # each call's task closes over its own x: Airflow's [31, 61]
    ("1", "shifted(10), shifted(20)", False),
    ("x", "shifted(10), 0", False),
    ("x", "*[shifted(n) for n in (1, 2)]", True),
])
def test_check_names_a_group_task_that_reads_what_each_call_of_its_group_binds(tmp_path: Path, read: str,
                                                                             calls: str, reported: bool) -> None:
    """A task of a task group that reads the group's parameters or variables, in a DAG that calls the group more
    than once (or in a loop), is reported at its definition: Airflow makes a task per call, closing over that
    call's values, while the programs find one function by its name."""
    script = tmp_path / "groups.py"
    script.write_text(GROUP_CLOSURE.format(read=read, calls=calls))
    proc = run_dagc("check", str(script))
    assert (proc.returncode != 0) == reported, proc.stderr
    if reported:
        assert "groups.py:11:9:" in proc.stderr and "task `shift` reads" in proc.stderr
        assert ("`offset`" in proc.stderr) == ("offset" in read) and "Traceback" not in proc.stderr


FORMS_HEAD = '''\
from datetime import datetime

{imports}
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import chain, dag, task


@task(retries=2)
def double(x: int) -> int:
    return 2 * x


def report(numbers: list) -> int:
    return len(numbers)


'''

FORMS_BODY = '''\
    @task
    def extract() -> list:
        return [1, 2, 3]

    @task
    def total(values) -> int:
        return sum(values)

    start = EmptyOperator(task_id="start")
    numbers = extract()
    doubled = double.expand(x=numbers)
    summed = total(doubled)
    audit = PythonOperator(task_id="audit", python_callable=report, op_args=[numbers], retries=3)
    start >> numbers
    chain(audit, summed)
'''

WITH_FORMS = {  # imports, the `with` line, the line that marks the DAG's result
    "sdk": ("from airflow.sdk import DAG", 'with DAG(dag_id="etl", schedule=None) as dag:', "    dag.add_result(summed)"),
    "airflow": ("import airflow", 'with airflow.DAG("etl", start_date=datetime(2024, 1, 1)) as etl_dag:',
                "    etl_dag.add_result(summed)"),
    "models": ("from airflow.models.dag import DAG", "with DAG(schedule=None) as etl:", "    etl.add_result(summed)"),
    "no_as": ("from airflow.models.dag import DAG", 'with DAG("etl", schedule=None):', ""),
}


def _shape(graph) -> list[tuple[object, ...]]:
    """Each node's name, operation, arguments, options and the nodes it waits for: what a DAG computes."""
    return sorted((n.name, n.op, repr(n.args), repr(n.kwargs), n.options.retries, tuple(sorted(n.deps)))
                  for n in graph)


@pytest.mark.parametrize("form", sorted(WITH_FORMS))
def test_with_dag_block_compiles_as_the_dag_function(tmp_path: Path, form: str) -> None:
    """A module-level `with DAG(...)` block (any spelling of DAG; named by its id, or by its variable) is the
    pipeline the same body makes as a `@dag` function: tasks defined in it and at module level, `.expand`, an
    `EmptyOperator` that only orders, a `PythonOperator` with its own retries, `chain`; `dag.add_result(x)` is
    the DAG's result, as the function's `return x`."""
    imports, with_line, result = WITH_FORMS[form]
    function = tmp_path / "as_function.py"
    function.write_text(FORMS_HEAD.format(imports=imports) + "@dag(schedule=None)\ndef etl():\n" + FORMS_BODY
                        + ("    return summed\n" if result else "") + "\n\netl()\n")
    block = tmp_path / "as_block.py"
    block.write_text(FORMS_HEAD.format(imports=imports) + with_line + "\n" + FORMS_BODY + result + "\n")
    from_function = compile_file(function, pipeline_name="etl")
    from_block = compile_file(block, pipeline_name="etl")
    assert _shape(from_block) == _shape(from_function)
    assert from_block.node("audit").options.retries == 3 and "audit" in from_block.node("total").deps
    assert from_block.node("total").target == "as_block:total"  # defined in the block: a name of the module
    assert repr(from_block.returns) == repr(from_function.returns)
    assert ("None" in repr(from_block.returns)) == (not result)


JUNCTIONS = '''\
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, task


@task
def step(name: str) -> str:
    return name


with DAG("junctions", schedule=None) as dag:
    join = EmptyOperator(task_id="join")
    fork = EmptyOperator(task_id="fork")
    a = step("a")
    b = step("b")
    c = step("c")
    d = step("d")
    join >> d
    [a, b] >> join >> fork >> c
    for name in ["e", "f"]:
        e = step(name)
        fork >> e
'''


def test_empty_operators_order_what_follows_them_after_what_precedes_them(tmp_path: Path) -> None:
    """An `EmptyOperator` is no task: a task ordered after it (before or after its own upstreams are given, in a
    loop too) waits for the tasks ordered before it."""
    script = tmp_path / "junctions.py"
    script.write_text(JUNCTIONS)
    graph = compile_file(script, pipeline_name="junctions")
    steps = {n.args[0].value: n for n in graph if n.op == "task"}  # type: ignore[union-attr]
    deps = {name: {graph.node(d).args[0].value for d in node.deps} for name, node in steps.items()}  # type: ignore[union-attr]
    assert deps == {"a": set(), "b": set(), "c": {"a", "b"}, "d": {"a", "b"}, "e": {"a", "b"}, "f": {"a", "b"}}


CONTEXT = '''\
from datetime import datetime

from airflow.models.dag import DAG
from airflow.providers.standard.operators.bash import BashOperator
from airflow.providers.standard.operators.python import PythonOperator, get_current_context
from airflow.sdk import task


@task
def stamp(x, ti=None, **context):
    return x


@task
def current(x):
    context = get_current_context()
    return context["ds"]


def pull(**kwargs):
    ti = kwargs["ti"]
    return ti.xcom_pull(task_ids="extract")


def day(value):
    return value


with DAG("context", schedule=None, start_date=datetime(2024, 1, 1)):
    a = stamp(1)
    b = current(2)
    c = PythonOperator(task_id="pull", python_callable=pull)
    d = BashOperator(task_id="echo", bash_command="echo hi")
    e = PythonOperator(task_id="day", python_callable=day, op_kwargs={"value": "{{ ds }}"})
    a >> b
'''


def test_check_names_what_needs_airflows_run_context_at_its_line(tmp_path: Path) -> None:
    """Context parameters (named in the message, the hint gives the signature without them),
    `get_current_context()`, `ti.xcom_pull`, a Jinja template and an operator dagc does not run: each reported
    at its line, in a `with DAG(...)` block."""
    script = tmp_path / "context.py"
    script.write_text(CONTEXT)
    proc = run_dagc("check", str(script))
    assert proc.returncode != 0
    for line, what in ((10, "task `stamp` takes Airflow's run context (`ti`, `**context`)"),
                       (10, "remove `ti`, `**context` from the signature (`def stamp(x)`)"),
                       (16, "`get_current_context()` in task `current`"),
                       (20, "callable `pull` takes Airflow's run context (`**kwargs`)"),
                       (22, "`.xcom_pull(...)` in callable `pull`"),
                       (33, "operator `BashOperator`"), (34, "a Jinja template")):
        assert f"context.py:{line}:" in proc.stderr and what in proc.stderr, (line, what, proc.stderr)
    assert "Traceback" not in proc.stderr


BLOCK = '''\
from airflow.sdk import DAG, task

with DAG("block") as dag:
    @task
    def scale(x: int) -> int:
        return x * {factor}

    dag.add_result(scale(2))
'''


def test_code_of_a_task_defined_in_a_with_dag_block_is_its_own(tmp_path: Path) -> None:
    """A task defined in a `with DAG(...)` block is a function of the module: editing it changes the digest the
    program compares at start, so a cached result of the task is not reused."""
    from dagc.backends.fingerprint import code_table
    from dagc.runtime.code import code_digest

    script = tmp_path / "block.py"
    script.write_text(BLOCK.format(factor=3))
    table, files = code_table(compile_file(script, pipeline_name="block"))
    names, _upstream, emitted = table["scale"]
    assert code_digest(names, tmp_path, files) == emitted
    script.write_text(BLOCK.format(factor=4))
    assert code_digest(names, tmp_path, files) != emitted


IMPORTING = '''\
from datetime import datetime

from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG

from helpers import etl
from helpers.etl import extract
from helpers.tasks import total

with DAG("imported", schedule=None, start_date=datetime(2024, 1, 1), default_args={"retries": 2}) as dag:
    got = PythonOperator(task_id="extract", python_callable=extract)
    scaled = PythonOperator(task_id="scale", python_callable=etl.scale, op_args=[got.output], op_kwargs={"factor": 3})
    dag.add_result(total(scaled.output))
'''


def test_callables_and_tasks_imported_from_the_users_modules(airflow_home: Path) -> None:
    """A `python_callable` imported from another module of the project (by name, or through its module) and a
    `@task` imported from one are tasks of those modules; the program imports them there."""
    import runpy

    project = airflow_home / "project"
    (project / "helpers").mkdir(parents=True)
    (project / "helpers" / "__init__.py").write_text("")
    (project / "helpers" / "etl.py").write_text(
        "def extract():\n    return [1, 2, 3]\n\n\ndef scale(values, factor):\n    return [v * factor for v in values]\n")
    (project / "helpers" / "tasks.py").write_text(
        "from airflow.sdk import task\n\n\n@task(retries=1)\ndef total(values: list) -> int:\n    return sum(values)\n")
    script = project / "imported.py"
    script.write_text(IMPORTING)
    graph = compile_file(script, pipeline_name="imported")
    assert {n.name: (n.target, n.options.retries) for n in graph if n.op == "task"} == {
        "extract": ("helpers.etl:extract", 2), "scale": ("helpers.etl:scale", 2), "total": ("helpers.tasks:total", 1)}
    etl = runpy.run_path(str(project / "helpers" / "etl.py"))
    assert run_local(script, "imported", {}, airflow_home) == sum(etl["scale"](etl["extract"](), 3))


def test_code_of_an_imported_callable_is_its_modules(tmp_path: Path) -> None:
    """A `python_callable` imported from another module of the project is that module's code: editing the function
    or a constant it reads there changes the digest the program compares at start, so a cached result of the
    operator's task is not reused; what `op_kwargs` pass are the task's arguments, compared as such."""
    from dagc.backends.fingerprint import code_table
    from dagc.runtime.code import code_digest

    (tmp_path / "helpers").mkdir()
    (tmp_path / "helpers" / "__init__.py").write_text("")
    etl = tmp_path / "helpers" / "etl.py"
    etl.write_text("BASE = 1\n\n\ndef extract():\n    return [1, 2, 3]\n\n\n"
                   "def scale(values, factor):\n    return [v * factor + BASE for v in values]\n")
    (tmp_path / "helpers" / "tasks.py").write_text(
        "from airflow.sdk import task\n\n\n@task\ndef total(values: list) -> int:\n    return sum(values)\n")
    script = tmp_path / "imported.py"
    script.write_text(IMPORTING)
    graph = compile_file(script, pipeline_name="imported")
    assert [(k, v.value) for k, v in graph.node("scale").kwargs] == [("factor", 3)]  # type: ignore[union-attr]
    table, files = code_table(graph)
    names, _upstream, emitted = table["scale"]
    assert code_digest(names, tmp_path, files) == emitted
    etl.write_text(etl.read_text().replace("BASE = 1", "BASE = 2"))
    assert code_digest(names, tmp_path, files) != emitted
