"""Prefect 3 flows compiled as written (tests/ports/prefect_*.py): each program (local, Ray on 2 devices, torch on
2 gloo ranks) computes what Prefect itself computes when the flow is called, under Prefect's test harness (its
temporary API server and database, with PREFECT_HOME in a temporary directory); the fan-outs spread over the
plan's devices; async flows and `.with_options(...)` calls compile to dagc's own forms; and `dagc check` names each
Prefect construct dagc does not compile, at its line."""

from __future__ import annotations

import re
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
    "prefect_concurrent_subflows": ("parent_flow", {"n_subflows": 3, "n_tasks_per_subflow": 4}),
    "prefect_elevator": ("elevator", {}),
}

# Prefect's async and per-call option forms in one file: each flow's result is compared with Prefect's own
FORMS = '''\
import asyncio

from prefect import flow, task
from prefect.cache_policies import INPUTS, NO_CACHE


@task(retries=1)
def scale(x: int, k: int) -> int:
    return x * k


@task
async def square(x: int) -> int:
    await asyncio.sleep(0)
    return x * x


careful = scale.with_options(retries=4, timeout_seconds=30)


@flow
async def forms(n: int = 4):
    first = await square(n)
    pair = await asyncio.gather(square(1), square(2))
    each = [await square(i) for i in range(n)]
    pending = [square(i) for i in each]
    gathered = await asyncio.gather(*pending)
    fast = scale.with_options(cache_policy=NO_CACHE, name="fast")
    direct = scale.with_options(retries=2, cache_policy=INPUTS)(first, 3)
    submitted = fast.submit(first, 2).result()
    mapped = fast.map(gathered, 10).result()
    return first, pair, each, gathered, direct, submitted, mapped, careful(n, 5), square.submit(n).result()


@flow
def sync_forms(n: int = 3):
    doubled = square.submit(n)
    return doubled.result(), [f.result() for f in square.map(range(n))], careful(n, 2)
'''
FORM_FLOWS = ("forms", "sync_forms")


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
    forms = tmp / "prefect_forms.py"
    forms.write_text(FORMS)
    calls = "\n".join(
        f"    mod = runpy.run_path({str(PORTS / f'{port}.py')!r}, run_name='prefect_port')\n"
        f"    out[{port!r}] = result(mod[{flow!r}](**{_params(port, Path('.'))!r}))"
        for port, (flow, _) in CASES.items())
    calls += f"\n    mod = runpy.run_path({str(forms)!r}, run_name='prefect_port')\n" + "\n".join(
        f"    out[{flow!r}] = result(mod[{flow!r}]())" for flow in FORM_FLOWS)
    code = ("import asyncio, pickle, runpy\n"
            "from prefect.testing.utilities import prefect_test_harness\n"
            "def result(value):  # an async flow's call gives its coroutine, which `asyncio.run` runs\n"
            "    return asyncio.run(value) if asyncio.iscoroutine(value) else value\n"
            "out = {}\n"
            "with prefect_test_harness():\n"
            f"{calls}\n"
            "pickle.dump(out, open('out.pkl', 'wb'))\n")
    env = {"PREFECT_HOME": str(tmp / "home"), "PREFECT_LOGGING_LEVEL": "WARNING"}
    return framework_run("prefect", code, [PORTS / f"{port}.py" for port in CASES] + [forms], env, tmp)


@pytest.mark.parametrize("port", sorted(CASES))
def test_local_program_equals_prefects_own_run(tmp_path: Path, prefect_results, port: str) -> None:
    flow = CASES[port][0]
    assert run_local(PORTS / f"{port}.py", flow, _params(port, tmp_path), tmp_path) == prefect_results[port]


@pytest.mark.parametrize("flow", FORM_FLOWS)
def test_async_and_with_options_forms_equal_prefects_own_run(tmp_path: Path, prefect_results, flow: str) -> None:
    script = tmp_path / "prefect_forms.py"
    script.write_text(FORMS)
    assert run_local(script, flow, {}, tmp_path) == prefect_results[flow]


@pytest.mark.slow
@pytest.mark.parametrize("port", ["prefect_word_count", "prefect_concurrent_subflows"])
def test_ray_and_torch_programs_equal_prefects_own_run(tmp_path: Path, prefect_results, ray_cluster,
                                                      port: str) -> None:
    """The flow with every sync Prefect call form (futures, `.map` over a task's result, `wait`, `wait_for=`), and
    the async one gathering async subflows of `.with_options(...)` task calls."""
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


def test_an_async_task_that_awaits_is_cached_like_any_task() -> None:
    """An async task's `await asyncio.sleep(...)` is no effect on the world (its coroutine is run to completion,
    and what it awaits is a call read as any): the task and its readers are stored and reused like any."""
    from dagc.backends.fingerprint import task_rows

    graph = compile_file(PORTS / "prefect_elevator.py", pipeline_name="elevator")
    stops = [n for n in graph if n.op == "task" and n.target.endswith(":stop_at_floor")]
    assert stops and all(n.effects.io is None for n in stops)
    rows = task_rows(graph)
    assert all(rows[name][3] is True for name in rows), {name: row[3] for name, row in rows.items()}


def test_with_options_set_the_options_of_that_call(tmp_path: Path) -> None:
    """`.with_options(...)` replaces the options it names for that call only, called at once, bound in the flow or
    at the module's top level; `name=` sets none; an awaited async task is a task call like any other."""
    script = tmp_path / "prefect_forms.py"
    script.write_text(FORMS)
    graph = compile_file(script, pipeline_name="forms")
    options = {n.name: n.options for n in graph if n.op == "task"}
    direct, submitted, careful = options["scale"], options["scale.1"], options["scale.2"]
    assert (direct.retries, direct.pure, direct.cache) == (2, True, True)  # `retries=2, cache_policy=INPUTS`
    assert (submitted.retries, submitted.cache, submitted.pure) == (1, False, False)  # the decorator's retries
    assert [options[f"scale[{i}]"].cache for i in range(4)] == [False] * 4  # `fast.map(...)`
    assert (careful.retries, careful.timeout) == (4, 30.0)  # bound at the module's top level
    assert sum(name.startswith("square") for name in options) == 12 and options["square"].retries == 0


UNSUPPORTED = '''\
import asyncio

from prefect import flow, task


@task
def double(x: int) -> int:
    return 2 * x


@task
async def fetch(x: int) -> int:
    return x


@task
async def stream(n: int):
    yield n


async def helper(x: int) -> int:
    return x


@flow
def sub(x: int) -> int:
    return double(x)


@flow
def main(x: int = 3):
    a = double.with_options(retries=3)
    b = double(x, return_state=True)
    c = double.map(*[[1, 2]])
    d = sub.with_options(retries=2)(x)
    return a, b, c, d, fetch(x)


@flow
async def later(x: int = 3):
    stored = fetch(x)
    now = double(x)
    background = asyncio.create_task(fetch(x))
    return await stored, now, await helper(x), double(fetch(x)), background


main()
asyncio.run(later())
'''


def test_check_names_each_unsupported_construct_at_its_line(tmp_path: Path) -> None:
    script = tmp_path / "flows.py"
    script.write_text(UNSUPPORTED)
    proc = run_dagc("check", str(script))
    assert proc.returncode != 0
    lines = UNSUPPORTED.splitlines()
    for marker, what in (("a = double.with_options", "`.with_options(...)` is supported where the flow calls"),
                         ("return_state=True", "`return_state=`"), ("double.map(*", "`.map()` with `*args`"),
                         ("async def stream", "async generator task `stream`"),
                         ("sub.with_options", "options of flow `sub` set by `.with_options(...)`"),
                         ("return a, b, c, d, fetch(x)", "async task `fetch` is called in a sync flow"),
                         ("stored = fetch(x)", "the coroutines stored in `stored` are not awaited before other work"),
                         ("asyncio.create_task", "`asyncio.create_task(...)` is not supported"),
                         ("await helper(x)", "awaiting `helper`, which is not a Prefect task"),
                         ("double(fetch(x))", "the call of async task `fetch` is not awaited"),
                         ("main()", "flow `main` is called at the module's top level"),
                         ("asyncio.run(later())", "flow `later` is called at the module's top level")):
        line = next(i for i, text in enumerate(lines, 1) if marker in text and not text.startswith("def"))
        said = re.findall(rf"flows\.py:{line}:\d+: error\[DAGC1\d\d\]: (.*)", proc.stderr)
        assert any(what in message for message in said), (marker, what, proc.stderr)
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
