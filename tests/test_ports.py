"""Real pipelines ported in their own idioms (tests/ports/: pytorch/examples, Metaflow, Kubeflow, Flyte,
Hamilton, Ray Tune): each equals its plain run on local, Ray (2 devices) and torch (2 gloo ranks), and
gets the parallelism its data flow allows on a 4-device plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagc.cluster import parse_cluster_spec
from dagc.driver import compile_file
from dagc.ir.effects import state_groups
from tests.engines import run_local, run_ray, run_torch
from tests.test_backend_local import _plain_result

PORTS = Path(__file__).parent / "ports"

# port -> (pipeline, tasks that the data flow leaves independent, how many devices of 4 they must use)
CASES: dict[str, tuple[str, str | None, int]] = {
    "word_language_model": ("main", None, 0),
    "playlist_redux": ("PlayListFlow.run", None, 0),
    "kfp_components": ("training_pipeline", "train_model[", 4),
    "flyte_hyperparameters": ("tune_wf", "train[", 4),
    "hamilton_features": ("features", None, 0),
    "ray_tune_train": ("tune", "train_func[", 3),
}


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    out = {}
    for port, (pipeline, _, _) in CASES.items():
        out[port] = _plain_result(PORTS / f"{port}.py", pipeline, tmp_path_factory.mktemp(f"plain_{port}"))
    return out


@pytest.mark.parametrize("port", sorted(CASES))
def test_port_compiles_without_errors_and_keeps_its_parallelism(port: str) -> None:
    pipeline, independent, devices = CASES[port]
    graph = compile_file(PORTS / f"{port}.py", pipeline_name=pipeline, cluster=parse_cluster_spec("4"))
    if independent is not None:
        nodes = [n for n in graph if n.name.startswith(independent)]
        assert len({n.attributes()["partition.device"] for n in nodes}) == devices, [
            (n.name, n.attributes()["partition.device"], n.deps) for n in nodes]
        grouped = {name for group in state_groups(graph) for name in group.nodes}
        assert not grouped & {n.name for n in nodes}  # module-level logger, config, device: not state


def test_what_must_stay_together_does() -> None:
    """The language model is trained in place (one piece of state); the playlist's two branches draw from
    the global generator (plain Python's order, one process); Hamilton's features share nothing."""
    lm = compile_file(PORTS / "word_language_model.py", pipeline_name="main")
    (group,) = [g for g in state_groups(lm) if "build_model" in g.nodes]
    assert {"train[0]", "evaluate[2]"} <= set(group.nodes)
    flow = compile_file(PORTS / "playlist_redux.py", pipeline_name="PlayListFlow.run")
    (rng,) = state_groups(flow)
    assert rng.name == "rng:global" and rng.nodes == ["bonus_movie", "genre_movies"]
    features = compile_file(PORTS / "hamilton_features.py", pipeline_name="features", cluster=parse_cluster_spec("4"))
    assert state_groups(features) == []
    branches = ["avg_3wk_spend", "spend_per_signup", "spend_zero_mean_unit_variance"]
    assert len({features.node(b).attributes()["partition.device"] for b in branches}) >= 2


@pytest.mark.parametrize("port", sorted(CASES))
def test_port_local_equals_plain_run(tmp_path: Path, plain, port: str) -> None:
    assert run_local(PORTS / f"{port}.py", CASES[port][0], {}, tmp_path) == plain[port]


@pytest.mark.slow
@pytest.mark.parametrize("port", sorted(CASES))
def test_port_on_ray_and_torch_equals_plain_run(tmp_path: Path, plain, ray_cluster, port: str) -> None:
    script, pipeline = PORTS / f"{port}.py", CASES[port][0]
    assert run_ray(script, pipeline, {}, tmp_path, ray_cluster.address) == plain[port]
    assert run_torch(script, pipeline, {}, tmp_path) == plain[port]
