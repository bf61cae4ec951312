"""Airflow 3 TaskFlow DAGs compiled as written (tests/ports/airflow_*.py): each program (local, Ray on 2 devices,
torch on 2 gloo ranks) computes the DAG result Airflow itself computes with `dag.test()` (its metadata database
and DAG folder in a temporary AIRFLOW_HOME); the mapped tasks spread over the plan's devices; `>>` and `chain`
order tasks; and `dagc check` names each Airflow construct dagc does not compile, at its line.

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

# port -> its DAG function
CASES: dict[str, str] = {
    "airflow_taskflow_etl": "tutorial_taskflow_api",
    "airflow_dynamic_mapping": "mapping_second_order",
    "airflow_model_training": "ridge_training",
    "airflow_task_groups": "task_group_mapping",
}

OWN_RUN = '''\
import pickle, runpy
from airflow.models.xcom import XComModel
from airflow.utils.db import upgradedb
from airflow.utils.session import create_session

upgradedb()
out = {}
for port, name in CASES.items():
    dag = runpy.run_path(f"dags/{port}.py", run_name="airflow_port")[name]()
    run = dag.test()
    assert run.state == "success", (port, run.state)
    (result,) = [t.task_id for t in dag.tasks if getattr(t, "returns_dag_result", False)]
    with create_session() as session:
        (row,) = session.query(XComModel).filter(
            XComModel.dag_id == dag.dag_id, XComModel.run_id == run.run_id, XComModel.task_id == result,
            XComModel.key == "return_value").all()
        out[port] = XComModel.deserialize_value(row)
pickle.dump(out, open("out.pkl", "wb"))
'''


@pytest.fixture(scope="module")
def airflow_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Each DAG's result as `dag.test()` computes it: the DAG result's XCom, all DAGs in one interpreter."""
    tmp = tmp_path_factory.mktemp("airflow_own")
    (tmp / "dags").mkdir()
    for port in CASES:  # dag.test() finds the DAG through its DAG folder
        shutil.copy(PORTS / f"{port}.py", tmp / "dags" / f"{port}.py")
    env = {"AIRFLOW_HOME": str(tmp / "home"), "AIRFLOW__CORE__DAGS_FOLDER": str(tmp / "dags"),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW__CORE__HOSTNAME_CALLABLE": "socket.gethostname"}
    return framework_run("airflow", f"CASES = {CASES!r}\n{OWN_RUN}", [PORTS / f"{p}.py" for p in CASES], env, tmp)


@pytest.fixture
def airflow_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the programs' import of Airflow keeps its configuration (not the user's ~/airflow)."""
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))
    return tmp_path


@pytest.mark.parametrize("port", sorted(CASES))
def test_local_program_equals_dag_test(airflow_home: Path, airflow_results, port: str) -> None:
    assert run_local(PORTS / f"{port}.py", CASES[port], {}, airflow_home) == airflow_results[port]


@pytest.mark.slow
def test_ray_and_torch_programs_equal_dag_test(airflow_home: Path, airflow_results, ray_cluster) -> None:
    """The DAG with mapped tasks over a task's result, tasks at module level and in the DAG function, and `>>`."""
    port = "airflow_dynamic_mapping"
    script, dag = PORTS / f"{port}.py", CASES[port]
    assert run_ray(script, dag, {}, airflow_home, ray_cluster.address) == airflow_results[port]
    assert run_torch(script, dag, {}, airflow_home) == airflow_results[port]


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
    graph = compile_file(PORTS / "airflow_taskflow_etl.py", pipeline_name=CASES["airflow_taskflow_etl"])
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
