"""`dagc fix` on the diagnostics of Prefect, Metaflow and Airflow scripts whose hint names one edit: a Prefect flow
called at module level put under `if __name__ == "__main__":`, an Airflow `async def` that awaits nothing made a
plain `def`, a Metaflow `@step(...)` made bare. As in tests/test_fix.py, the fixed script checks clean, keeps
every other line, `--diff` writes nothing, a second fix has nothing to do, and the local program computes what
the framework's own run of the fixed script computes."""

from __future__ import annotations

import os
import pickle
import shutil
from pathlib import Path

from tests.dialect_runs import framework_run
from tests.interpreters import run_python
from tests.test_dialect_airflow import OWN_RUN
from tests.test_fix import Case, _fix_and_verify

PREFECT = Case("DAGC110", '''\
from prefect import flow, task


@task
def double(x: int) -> int:
    return 2 * x


@task
def total(xs: list) -> int:
    return sum(xs)


@flow
def main(n: int = 3):
    doubled = [double(i) for i in range(n)]
    return total(doubled)


# runs the flow when the script runs
result = main()
print(result)
''', frozenset({21, 22}), ('if __name__ == "__main__":', "    result = main()", "    print(result)"))


def _prefect_run(script: Path, flow: str, tmp: Path) -> object:
    """The flow called as Prefect calls it, under its test harness (a temporary API server and database)."""
    code = ("import pickle, runpy\n"
            "from prefect.testing.utilities import prefect_test_harness\n"
            "with prefect_test_harness(server_startup_timeout=180):\n"  # (a busy machine starts it slowly)
            f"    out = runpy.run_path({str(script)!r}, run_name='prefect_flow')[{flow!r}]()\n"
            "pickle.dump(out, open('out.pkl', 'wb'))\n")
    env = {"PREFECT_HOME": str(tmp / "prefect"), "PREFECT_LOGGING_LEVEL": "WARNING"}
    return framework_run("prefect-fix", code, [script], env, tmp)


def test_prefect_flow_call_at_module_level_is_guarded(tmp_path: Path) -> None:
    """The module-level call goes under the guard with the statement that prints its result."""
    script = tmp_path / "job.py"
    script.write_text(PREFECT.source, encoding="utf-8")
    said = _fix_and_verify(script, PREFECT, tmp_path, plain=_prefect_run)
    assert "fixed[DAGC110]" in said and "fixed[DAGC108]" not in said, said


METAFLOW = Case("DAGC124", '''\
from metaflow import FlowSpec, step


class Counts(FlowSpec):
    @step
    def start(self):
        self.xs = [1, 2, 3]
        self.next(self.end)

    @step(name="finish")  # the last step
    def end(self):
        self.total = sum(self.xs)


if __name__ == "__main__":
    Counts()
''', frozenset({10}), ("    @step  # the last step",), pipeline="Counts",
    runs_as_before=False)  # (Metaflow refuses `@step(...)`)

_READ_END = """
import pickle, sys
from metaflow import Flow, namespace
namespace(None)
task = Flow(sys.argv[1]).latest_run["end"].task
pickle.dump({artifact.id: artifact.data for artifact in task}, open(sys.argv[2], "wb"))
"""


def _metaflow_run(script: Path, flow: str, tmp: Path) -> object:
    """The `end` step's artifacts of `python flow.py run`, its datastore and metadata under `tmp`."""
    env = {**os.environ, "METAFLOW_HOME": str(tmp / "home"), "METAFLOW_DATASTORE_SYSROOT_LOCAL": str(tmp / "ds"),
           "METAFLOW_DEFAULT_METADATA": "local", "METAFLOW_DEFAULT_DATASTORE": "local", "USERNAME": "dagc-tests"}
    run = run_python([str(script), "--no-pylint", "run"], env=env, cwd=tmp, capture_output=True, text=True,
                     timeout=120)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    run_python(["-c", _READ_END, flow, str(tmp / "metaflow.pkl")], env=env, cwd=tmp, check=True, timeout=60)
    return pickle.loads((tmp / "metaflow.pkl").read_bytes())


def test_metaflow_step_with_arguments_becomes_a_bare_step(tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text(METAFLOW.source, encoding="utf-8")
    _fix_and_verify(script, METAFLOW, tmp_path, plain=_metaflow_run)


AIRFLOW = Case("DAGC108", '''\
from airflow.sdk import dag, task


@task
def load(n: int) -> list:
    return list(range(n))


@task
def total(xs: list) -> int:
    return sum(xs)


@dag(schedule=None)
async def numbers():
    return total(load(4))


numbers()
''', frozenset({15}), ("def numbers():",), pipeline="numbers", runs_as_before=False)  # (an async DAG function)


def _airflow_run(script: Path, dag: str, tmp: Path) -> object:
    """The DAG result `dag.test()` computes (the DAG found through its DAG folder, in a temporary AIRFLOW_HOME)."""
    (tmp / "dags").mkdir()
    shutil.copy(script, tmp / "dags" / "job.py")
    env = {"AIRFLOW_HOME": str(tmp / "home"), "AIRFLOW__CORE__DAGS_FOLDER": str(tmp / "dags"),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW__CORE__HOSTNAME_CALLABLE": "socket.gethostname"}
    return framework_run("airflow-fix", f"CASES = {{{dag!r}: 'job'}}\n{OWN_RUN}", [script], env, tmp)[dag]


def test_airflow_async_dag_function_becomes_plain(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))  # (the local program imports Airflow)
    script = tmp_path / "job.py"
    script.write_text(AIRFLOW.source, encoding="utf-8")
    _fix_and_verify(script, AIRFLOW, tmp_path, plain=_airflow_run)
