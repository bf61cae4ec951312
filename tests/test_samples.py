"""Every sample compiles, and every backend's emitted program computes what the plain run computes.

The plain run (`pipeline()` called as ordinary Python, in a fresh interpreter) is computed once per
sample per module and compared with the result of the local program, the Ray program (one
simulated Ray cluster for the module, programs connected to it as subprocesses) and the
torch.distributed program (gloo ranks launched in-process), for every backend registered in
`BACKENDS`. The quickstart's own cross-backend tests live with each backend's tests.
"""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import pytest

from dagc.backends import BACKENDS, emit
from dagc.cluster import parse_cluster_spec
from dagc.driver import compile_file
from tests.conftest import SAMPLES
from tests.interpreters import run_python
from tests.test_backend_local import _plain_result, _ruff_clean

ALL_SAMPLES = sorted(p.stem for p in SAMPLES.glob("*.py") if not p.name.startswith("_"))
# The quickstart is compared on every backend by tests/test_backend_{local,ray,torch}.py.
SAMPLES_HERE = [s for s in ALL_SAMPLES if s != "quickstart"]
# Parameters a sample needs for a run (both runs); `{out}` becomes a directory of that run's own.
NEEDED: dict[str, dict[str, object]] = {"file_pipeline": {"out_dir": "{out}/files"}}
# Smaller data and fewer steps inside tasks, so that each of the five runs of a sample is quick: they change
# no task and no edge of the graph (test_smaller_runs_keep_the_graph), only how long the tasks compute.
SMALLER: dict[str, dict[str, object]] = {
    "early_stopping": {"n": 300},
    "file_pipeline": {"n": 200, "epochs": 20},
    "gpt_pretrain": {"n_docs": 120},
    "hparam_sweep": {"n": 300, "epochs": 15},
    "kfp_training": {"n": 100},
    "mixed_precision_step": {"batch": 64},
    "mnist": {"batch_size": 128},
    "pipeline_parallel": {"n": 64},
    "sharded_training": {"epochs": 50},
}
PARAMS = {sample: {**SMALLER.get(sample, {}), **NEEDED.get(sample, {})} for sample in {*NEEDED, *SMALLER}}
# What a backend does not support yet, by (backend, sample). Not strict: a fix shows up as XPASS,
# and the entry should then be removed.
KNOWN_GAPS: dict[tuple[str, str], str] = {
}


def _known_gap(request: pytest.FixtureRequest, backend: str, sample: str) -> None:
    reason = KNOWN_GAPS.get((backend, sample))
    if reason:
        request.applymarker(pytest.mark.xfail(reason=reason, strict=False))


def _params(sample: str, out: Path) -> dict[str, object]:
    return {k: v.replace("{out}", str(out)) if isinstance(v, str) else v
            for k, v in PARAMS.get(sample, {}).items()}


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory):
    """`plain(sample)`: the plain run's result (cached for the module)."""
    cache: dict[str, object] = {}

    def get(sample: str) -> object:
        if sample not in cache:
            tmp = tmp_path_factory.mktemp(f"plain_{sample}")
            graph = compile_file(SAMPLES / f"{sample}.py", params=_params(sample, tmp / "compile"))
            cache[sample] = _plain_result(SAMPLES / f"{sample}.py", graph.name, tmp, **_params(sample, tmp))
        return cache[sample]

    return get


@pytest.mark.parametrize("sample", ALL_SAMPLES)
def test_sample_compiles_cleanly(sample: str) -> None:
    compilation = compile_file(SAMPLES / f"{sample}.py", details=True, params=_params(sample, Path("/tmp/x")))
    assert len(compilation.graph) > 0
    assert not compilation.warnings, [d.message for d in compilation.warnings]


def _shape(graph) -> list[tuple[str, str, tuple[str, ...]]]:  # type: ignore[no-untyped-def]
    return sorted((n.name, n.op, tuple(sorted(graph.predecessors(n.name)))) for n in graph)


@pytest.mark.parametrize("sample", sorted(SMALLER))
def test_smaller_runs_keep_the_graph(sample: str) -> None:
    needed = {k: v.replace("{out}", "/tmp/x") for k, v in NEEDED.get(sample, {}).items()}  # type: ignore[union-attr]
    default = compile_file(SAMPLES / f"{sample}.py", params=needed)
    smaller = compile_file(SAMPLES / f"{sample}.py", params=_params(sample, Path("/tmp")))
    assert _shape(smaller) == _shape(default)
    assert {k for k in SMALLER[sample]} <= {p.name for p in smaller.params}, "a smaller size names no parameter"


@pytest.mark.parametrize("sample", SAMPLES_HERE)
def test_local_equals_plain_run(tmp_path: Path, sample: str, plain) -> None:
    params = _params(sample, tmp_path)
    graph = compile_file(SAMPLES / f"{sample}.py", params=params)
    program = tmp_path / "prog" / f"{sample}_local.py"
    program.parent.mkdir()
    program.write_text(emit(graph, "local", program))
    _ruff_clean(program)
    result = tmp_path / "local.pkl"
    run_python([str(program), "--result", str(result)], check=True, timeout=300)
    assert pickle.loads(result.read_bytes()) == plain(sample)


# ---- Ray ---------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.skipif("ray" not in BACKENDS, reason="the Ray backend is not registered")
@pytest.mark.parametrize("sample", SAMPLES_HERE)
def test_ray_equals_plain_run(tmp_path: Path, sample: str, plain, ray_cluster, request) -> None:
    _known_gap(request, "ray", sample)
    params = _params(sample, tmp_path)
    graph = compile_file(SAMPLES / f"{sample}.py", params=params)
    program = tmp_path / "prog" / f"{sample}_ray.py"
    program.parent.mkdir()
    program.write_text(emit(graph, "ray", program))
    _ruff_clean(program)
    result = tmp_path / "ray.pkl"
    proc = run_python([str(program), "--address", ray_cluster.address, "--result", str(result),
                           "--run-dir", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=300, cwd=program.parent)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert pickle.loads(result.read_bytes()) == plain(sample)


# ---- torch.distributed -------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.skipif("torch" not in BACKENDS, reason="the torch backend is not registered")
@pytest.mark.parametrize("devices", ["2", "4"])
@pytest.mark.parametrize("sample", SAMPLES_HERE)
def test_torch_equals_plain_run(tmp_path: Path, sample: str, devices: str, plain, request) -> None:
    _known_gap(request, "torch", sample)
    from dagc.backends.torch import REQUIRED_PASSES
    from tests.test_backend_torch import launch

    params = _params(sample, tmp_path)
    graph = compile_file(SAMPLES / f"{sample}.py", passes=REQUIRED_PASSES, cluster=parse_cluster_spec(devices),
                         backend="torch", params=params)
    program = tmp_path / "prog" / f"{sample}_torch.py"
    program.parent.mkdir()
    program.write_text(emit(graph, "torch", program))
    _ruff_clean(program)
    ranks = int(re.search(r"^RANKS = (\d+)$", program.read_text(), re.M).group(1))
    result = tmp_path / "torch.pkl"
    launch(program, ranks, ["--result", str(result)])
    assert pickle.loads(result.read_bytes()) == plain(sample)


# ---- what the samples are for ------------------------------------------------------------------------
def _overlap(a, b) -> bool:
    return a.attributes()["schedule.start"] < b.attributes()["schedule.finish"] and b.attributes()["schedule.start"] < a.attributes()[
        "schedule.finish"]


def test_mixed_precision_updates_run_in_parallel() -> None:
    """`dagc plan samples/mixed_precision_step.py --cluster 4`: per-layer master-weight updates overlap."""
    graph = compile_file(SAMPLES / "mixed_precision_step.py", cluster=parse_cluster_spec("4"))
    updates = [n for n in graph if n.name.startswith("update[")]
    assert len(updates) == 4
    # each update depends on its own layer's gradient only, never on another update
    for node in updates:
        assert not any(dep.startswith(("update[", "cast_half[")) for dep in graph.ancestors(node.name))
    pairs = [(a, b) for i, a in enumerate(updates) for b in updates[i + 1:] if _overlap(a, b)]
    assert pairs, "no two updates overlap in the schedule"
    assert all(a.attributes()["partition.device"] != b.attributes()["partition.device"] for a, b in pairs)


def test_gpt_pretrain_fans_out_and_trains_on_two_ranks() -> None:
    graph = compile_file(SAMPLES / "gpt_pretrain.py", params={"n_shards": 3})
    names = [n.name for n in graph]
    assert [n for n in names if n.startswith("tokenize[")] == ["tokenize[0]", "tokenize[1]", "tokenize[2]"]
    assert graph.node("train").options.ranks == 2
    assert set(graph.predecessors("pack")) >= {"tokenize[0]", "tokenize[1]", "tokenize[2]"}


def test_pipeline_parallel_loss_matches_single_process(plain) -> None:
    code = ("import runpy, sys\n"
            f"sys.path.insert(0, {str(SAMPLES)!r})\n"
            f"ns = runpy.run_path({str(SAMPLES / 'pipeline_parallel.py')!r}, run_name='plain')\n"
            f"print(repr(ns['single_process_losses'](**{SMALLER['pipeline_parallel']!r})))\n")
    proc = run_python(["-c", code], capture_output=True, text=True, check=True, timeout=300)
    reference = eval(proc.stdout.strip())  # a list of floats
    losses = plain("pipeline_parallel")["losses"]
    assert len(losses) == len(reference) >= 2
    assert losses == pytest.approx(reference, abs=1e-5)
    assert losses[-1] < losses[0]


def test_pipeline_parallel_places_layers_as_a_pipeline() -> None:
    """On 4 devices, the micro-batches keep every device busy (the schedule is a pipeline)."""
    graph = compile_file(SAMPLES / "pipeline_parallel.py", cluster=parse_cluster_spec("4"))
    used = {n.attributes()["partition.device"] for n in graph if n.op == "task" and n.function == "block_forward"}
    assert len(used) >= 2
    utilization = graph.attrs["schedule.utilization"]
    assert sum(utilization) / len(utilization) > 0.8, utilization


def test_plan_says_all_reduce_beats_a_parameter_server_on_slow_links() -> None:
    """`dagc plan samples/sgd_{param_server,allreduce}.py --cluster 5 --link-bandwidth 1GB/s`: once `comm`
    has chosen the transfers, the all-reduce form's estimate is the shorter one; both forms' tasks
    give the same schedule before transfers are priced per collective."""
    from dagc.plan import plan_file

    cluster = parse_cluster_spec("5", link_bandwidth="1GB/s")
    ps = plan_file(str(SAMPLES / "sgd_param_server.py"), cluster)
    ar = plan_file(str(SAMPLES / "sgd_allreduce.py"), cluster)
    assert ps.valid and ar.valid and ps.comm_makespan and ar.comm_makespan
    assert ar.comm_makespan < ps.comm_makespan
    assert ar.comm_makespan < ar.p2p_makespan  # the all-reduces are what make it faster
    graph = compile_file(SAMPLES / "sgd_allreduce.py", passes="verify,dce,cse,partition,schedule,comm",
                         cluster=cluster)
    assert sum(1 for n in graph if n.attributes().get("comm.reduce") == "all") == 3  # one all-reduce per step
