"""Prefect 3 flows compiled as written (tests/ports/prefect_*.py): each program (local, Ray on 2 devices, torch on
2 gloo ranks) computes what Prefect itself computes when the flow is called, under Prefect's test harness (its
temporary API server and database, with PREFECT_HOME in a temporary directory); the fan-outs spread over the
plan's devices; and `dagc check` names each Prefect construct dagc does not compile, at its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagc.backends.torch import REQUIRED_PASSES
from dagc.cluster import parse_cluster_spec
from dagc.driver import compile_file
from tests.conftest import run_dagc
from tests.dialect_runs import framework_run
from tests.engines import run_local, run_ray, run_torch

PORTS = Path(__file__).parent / "ports"

# port -> (flow, its parameters but the output file, which each run names for itself)
CASES: dict[str, tuple[str, dict[str, object]]] = {
    "prefect_api_etl": ("etl", {"api_base": "https://dev.example/api", "pages": 3, "per_page": 20}),
    "prefect_word_count": ("word_count", {}),
    "prefect_model_training": ("training", {"n_samples": 400}),
}


def _params(port: str, where: Path) -> dict[str, object]:
    params = dict(CASES[port][1])
    if port == "prefect_api_etl":
        params["output_file"] = str(where / "articles.csv")
    return params


@pytest.fixture(scope="module")
def prefect_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Each flow's result as Prefect computes it: the flow called inside `prefect_test_harness()`, all in one
    interpreter (one temporary server for the three)."""
    tmp = tmp_path_factory.mktemp("prefect_own")
    calls = "\n".join(
        f"    mod = runpy.run_path({str(PORTS / f'{port}.py')!r}, run_name='prefect_port')\n"
        f"    out[{port!r}] = mod[{flow!r}](**{_params(port, Path('.'))!r})"
        for port, (flow, _) in CASES.items())
    code = ("import pickle, runpy\n"
            "from prefect.testing.utilities import prefect_test_harness\n"
            "out = {}\n"
            "with prefect_test_harness():\n"
            f"{calls}\n"
            "pickle.dump(out, open('out.pkl', 'wb'))\n")
    env = {"PREFECT_HOME": str(tmp / "home"), "PREFECT_LOGGING_LEVEL": "WARNING"}
    return framework_run("prefect", code, [PORTS / f"{port}.py" for port in CASES], env, tmp)


@pytest.mark.parametrize("port", sorted(CASES))
def test_local_program_equals_prefects_own_run(tmp_path: Path, prefect_results, port: str) -> None:
    flow = CASES[port][0]
    assert run_local(PORTS / f"{port}.py", flow, _params(port, tmp_path), tmp_path) == prefect_results[port]


@pytest.mark.slow
def test_ray_and_torch_programs_equal_prefects_own_run(tmp_path: Path, prefect_results, ray_cluster) -> None:
    """The flow with every Prefect call form: futures, `.map` over a task's result, `wait`, `wait_for=`."""
    port = "prefect_word_count"
    script, (flow, _) = PORTS / f"{port}.py", CASES[port]
    assert run_ray(script, flow, _params(port, tmp_path), tmp_path, ray_cluster.address) == prefect_results[port]
    assert run_torch(script, flow, _params(port, tmp_path), tmp_path) == prefect_results[port]


def test_forms_compile_to_dagcs_own() -> None:
    """`.map` over a constant list unrolls into calls the plan spreads; over a task's result it is a map region
    (spread over the torch ranks); `wait_for=` orders without data; task options carry over."""
    training = compile_file(PORTS / "prefect_model_training.py", pipeline_name="training",
                            cluster=parse_cluster_spec("4"))
    trained = [n for n in training if n.name.startswith("train[")]
    assert len(trained) == 4 and len({n.attributes()["partition.device"] for n in trained}) == 4
    assert training.node("train[0]").options.retries == 1 and training.node("load_data").options.pure
    assert training.node("coefficients").options.timeout == 120
    words = compile_file(PORTS / "prefect_word_count.py", pipeline_name="word_count", passes=REQUIRED_PASSES,
                         cluster=parse_cluster_spec("2"), backend="torch")
    (mapped,) = [n for n in words if n.op == "map"]
    assert mapped.options.ranks == 2
    assert {"top_words[0]", "top_words[1]", "top_words[2]"} <= set(words.node("describe").deps)


UNSUPPORTED = '''\
from prefect import flow, task


@task
def double(x: int) -> int:
    return 2 * x


@flow
def main(x: int = 3):
    a = double.with_options(retries=3)(x)
    b = double(x, return_state=True)
    c = double.map(*[[1, 2]])
    return a, b, c


@flow
async def later(x: int = 3):
    return double(x)


@task
async def fetch(x: int) -> int:
    return x


@flow
def gather(x: int = 3):
    return fetch(x)


main()
'''


def test_check_names_each_unsupported_construct_at_its_line(tmp_path: Path) -> None:
    script = tmp_path / "flows.py"
    script.write_text(UNSUPPORTED)
    proc = run_dagc("check", str(script))
    assert proc.returncode != 0
    for line, what in ((11, "`.with_options()`"), (12, "`return_state=`"), (13, "`.map()` with `*args`"),
                       (18, "async flow `later`"), (23, "async task `fetch`"),
                       (32, "flow `main` is called at the module's top level")):
        assert f"flows.py:{line}:" in proc.stderr and what in proc.stderr, (line, what, proc.stderr)
    assert "Traceback" not in proc.stderr


WAITS = '''\
from prefect import flow, task
from prefect.futures import wait


@task
def note(x: int) -> int:
    print(x)
    return x


@flow
def waits(x: int = 3):
    note.submit(x).wait()
    wait([note.submit(x + 1), note.submit(x + 2)])
    done = note.submit(x + 3)
    done.wait()
    wait(done)
    return done.result()
'''


def test_waits_keep_the_calls_they_wait_on(tmp_path: Path) -> None:
    """`t.submit(x).wait()` and `wait([t.submit(...), ...])` still call the task; waiting on a named future
    adds nothing (the programs wait for every task)."""
    script = tmp_path / "waits.py"
    script.write_text(WAITS)
    graph = compile_file(script, pipeline_name="waits")
    assert sorted(n.name for n in graph if n.op == "task") == ["note", "note.1", "note.2", "note.3"]
