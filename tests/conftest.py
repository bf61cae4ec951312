"""Shared fixtures. `pytest --update-golden` rewrites golden files instead of comparing."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.interpreters import run_python

REPO = Path(__file__).resolve().parent.parent
# Every sample and ported pipeline, each a script that compiles on its own (a flow's base class in a module of its
# own is no flow by itself: metaflow_template.py derives from metaflow_template_base.py's)
PIPELINE_SOURCES = sorted(p for p in [*(REPO / "samples").glob("*.py"), *(REPO / "tests" / "ports").glob("*.py")]
                          if p.name != "metaflow_template_base.py")
# the values of the pipeline parameters a script leaves without a default, by script name (as its upstream wrote it)
PIPELINE_PARAMS: dict[str, dict[str, object]] = {
    "prefect_concurrent_subflows.py": {"n_subflows": 3, "n_tasks_per_subflow": 4},
}
SAMPLES = REPO / "samples"
GOLDEN = Path(__file__).resolve().parent / "golden"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", help="rewrite golden files")


# Tests that start engines of their own and take far longer than any other (35-40 s on 2 cores), run first:
# each xdist worker takes the tests in collection order and the other steals from its end, so that a long test
# left to the end would run alone while the other core idles.
FIRST = ("tests/test_backend_ray.py::test_program_on_a_two_process_ray_cluster",)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.nodeid not in FIRST)  # (a stable sort: the rest keep their order)


@pytest.fixture(scope="session", autouse=True)
def _plain_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Plain runs are kept for the session (tests/plain.py), in a directory every xdist worker shares."""
    from tests import plain

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # (pytest-N/popen-gwK: pytest-N)
    (shared / "plain-cache").mkdir(exist_ok=True)
    plain.CACHE[:] = [shared / "plain-cache"]
    # the programs tests run record task costs in a store of the session's (not the repository's .dagc/), and
    # compiles plan from annotations unless a test names a store: the same input, the same plan
    os.environ["DAGC_COST_STORE"] = str(shared / "costs")
    os.environ["DAGC_NO_LEARNED_COSTS"] = "1"


@pytest.fixture
def golden(request: pytest.FixtureRequest):
    """`golden("name.txt", text)` compares with tests/golden/name.txt (or rewrites it)."""
    update = request.config.getoption("--update-golden")

    def check(name: str, text: str) -> None:
        path = GOLDEN / name
        if update or not path.exists():
            if not update:
                pytest.fail(f"golden file {path} is missing; run pytest --update-golden and review it")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            return
        expected = path.read_text(encoding="utf-8")
        assert text == expected, f"output differs from {path}; if intended, run pytest --update-golden"

    return check


@pytest.fixture
def write_project(tmp_path: Path):
    """Write `{relative path: source}` under a temporary directory; returns the directory."""

    def write(files: dict[str, str]) -> Path:
        for rel, text in files.items():
            path = tmp_path / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(text, bytes):
                path.write_bytes(text)
            else:
                path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return tmp_path

    return write


def run_dagc(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run the real `dagc` command line in a subprocess."""
    full_env = {**os.environ, **(env or {})}
    return run_python(["-m", "dagc.cli", *args], cwd=cwd or REPO, env=full_env,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="session")
def ray_cluster():
    """One local Ray cluster (3 CPUs, no GPUs) that the emitted Ray programs of many test modules connect
    to with `--address`; each program is its own driver process, so the tests do not share state.

    Each program is a new Ray job, and a job's tasks run in worker processes of its own, each importing
    torch (1-2 s of CPU): with 3 CPUs (the most a test's plan asks of one node: a task of `cpus=2` beside
    one of 1), a program starts at most 3 such workers, not 4 that the machine's two cores run no faster.
    The object store holds a sample's live tensors (sgd_allreduce: 4 shards of 16 MiB, replicas of 8 MiB),
    so that nothing is spilled to disk, which stalled runs by seconds."""
    from ray.cluster_utils import Cluster

    from tests.rayfork import forked_workers

    with forked_workers():
        cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 3, "num_gpus": 0, "include_dashboard": False, "object_store_memory": 400 * 2**20})
    cluster.wait_for_nodes()
    yield cluster
    cluster.shutdown()
