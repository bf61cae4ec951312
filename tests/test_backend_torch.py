"""The torch.distributed backend: emitted programs run on gloo ranks and compute the plain result.

Programs are launched in-process with `elastic_launch(start_method="fork")` (about 0.3 s a launch)
rather than through a torchrun subprocess.
"""

from __future__ import annotations

import json
import multiprocessing
import pickle
import runpy
import socket
import sys
import uuid
from pathlib import Path

import pytest

from tests.interpreters import run_python

torch = pytest.importorskip("torch")

from torch.distributed.launcher.api import elastic_launch  # noqa: E402

from dagc.backends import emit  # noqa: E402
from dagc.backends.torch import (  # noqa: E402
    PIPELINE_PASSES,
    REQUIRED_PASSES,
    CommunicationError,
    build_plan,
    pipeline_steps,
    static_tensor,
)
from dagc.cluster import parse_cluster_spec  # noqa: E402
from dagc.driver import compile_file  # noqa: E402
from dagc.runtime.events import read_events  # noqa: E402
from tests.conftest import SAMPLES  # noqa: E402

PASSES = REQUIRED_PASSES


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _entry(program: str, argv: list[str], env: dict[str, str]) -> None:
    import os

    os.environ.update(env)
    namespace = runpy.run_path(program, run_name="dagc_program")
    code = namespace["main"](argv)
    if code:
        raise SystemExit(code)


# Ranks are forked from a clean fork server (started once, torch preloaded), not from pytest
# itself: forking a process that already runs threads (BLAS pools, earlier agents' stores) can
# leave a child stuck on a lock held at the time of the fork.
multiprocessing.set_forkserver_preload(["torch", "torch.distributed", "dagc.runtime.distributed",
                                        "tests.test_backend_torch"])


def launch(program: Path, nproc: int, argv: list[str], *, max_restarts: int = 0, nnodes: int = 1,
           port: int | None = None, run_id: str | None = None, is_host: bool | None = None,
           env: dict[str, str] | None = None) -> None:
    """Run `program` on `nproc` local ranks (one elastic agent), as torchrun would."""
    _launch(lambda free: _config(nproc, nnodes=nnodes, port=port or free, run_id=run_id, is_host=is_host,
                                 max_restarts=max_restarts), _entry, (str(program), argv, env or {}), port is None)


def _launch(config, entry, args: tuple, may_move: bool) -> None:  # type: ignore[no-untyped-def]
    """`elastic_launch(config(port), entry)(*args)` on a port free when asked. Another process of the suite (a
    Ray worker) may take that port before the rendezvous binds it: no rank has started then, and the launch
    is tried once more on another port (a rendezvous that cannot bind its port fails only after 60 s)."""
    from torch.distributed.elastic.rendezvous.api import RendezvousConnectionError

    for last in (False, True):
        try:
            elastic_launch(config(_free_port()), entry)(*args)
            return
        except RendezvousConnectionError:
            if last or not may_move:
                raise


def _config(nproc: int, *, nnodes: int = 1, port: int | None = None, run_id: str | None = None,
            is_host: bool | None = None, max_restarts: int = 0):
    from torch.distributed.launcher.api import LaunchConfig

    return LaunchConfig(
        min_nodes=nnodes, max_nodes=nnodes, nproc_per_node=nproc, run_id=run_id or uuid.uuid4().hex,
        rdzv_backend="c10d", rdzv_endpoint=f"127.0.0.1:{port or _free_port()}",
        rdzv_configs={} if is_host is None else {"is_host": is_host},
        max_restarts=max_restarts, monitor_interval=0.05, start_method="forkserver",
    )


def _emit(path: Path, out: Path, ranks: int, **params: object) -> Path:
    graph = compile_file(path, passes=PASSES, cluster=parse_cluster_spec(str(ranks)), backend="torch",
                         params=params)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(emit(graph, "torch", out))
    return out


def _ruff_clean(path: Path) -> None:
    proc = run_python(["-m", "ruff", "check", "--isolated", str(path)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def quickstart_plain(tmp_path_factory: pytest.TempPathFactory) -> object:
    from tests.plain import plain_result

    return plain_result(SAMPLES / "quickstart.py", "quickstart", tmp_path_factory.mktemp("plain"))


@pytest.mark.slow
@pytest.mark.parametrize("ranks", [2, 4])
def test_quickstart_equals_plain_run(tmp_path: Path, ranks: int, quickstart_plain: object) -> None:
    program = _emit(SAMPLES / "quickstart.py", tmp_path / f"quickstart_torch{ranks}.py", ranks)
    _ruff_clean(program)
    result = tmp_path / "result.pkl"
    run_dir = tmp_path / "run"
    launch(program, ranks, ["--result", str(result), "--run-dir", str(run_dir)])
    assert pickle.loads(result.read_bytes()) == quickstart_plain
    events = read_events(run_dir / "events.jsonl")
    ended = {e["task"] for e in events if e["event"] == "end"}
    assert ended == {"make_data", "split", "standardize", "fourier_features", "concat", "train", "evaluate",
                     "report"}
    assert [e["event"] for e in events][0] == "run_start" and events[-1]["event"] == "run_end"
    assert {e["pid"] for e in events if e["event"] == "end"} and len({e["rank"] for e in events
                                                                      if e["event"] == "end"}) >= 2


PROJECT = {
    "proj.py": '''
        import os
        from pathlib import Path

        import torch

        import dagc


        @dagc.task(cost="1s", out_size="1MiB")
        def make(n: int, seed: int) -> torch.Tensor:
            return torch.arange(n, dtype=torch.float32) * seed


        @dagc.task(cost="1s")
        def static(n: int) -> "Tensor[float32, 64]":
            return torch.ones(64) * n


        @dagc.task(cost="2s")
        def crunch(x: torch.Tensor, k: int) -> torch.Tensor:
            marker = os.environ.get("DAGC_TEST_CRASH")
            if marker and k == 2 and not Path(marker).exists():
                Path(marker).write_text("crashed once")
                os._exit(3)           # this rank dies in the middle of the task
            return x * k + 1


        @dagc.task(cost="1s")
        def stats(a: torch.Tensor, b: torch.Tensor, s) -> dict:
            return {"sum": float(a.sum() + b.sum() + s.sum()), "shape": list(a.shape), "tag": "ok"}


        @dagc.task(cost="1s", ranks=2)
        def allreduce(x: torch.Tensor) -> float:
            ctx = dagc.context()
            t = x.sum().reshape(1) * (ctx.rank + 1)
            if ctx.group is not None:
                torch.distributed.all_reduce(t, group=ctx.group)
            return float(t.item()) if ctx.is_main else None


        @dagc.pipeline
        def p(n: int = 1000):
            x = make(n, seed=3)
            s = static(n)
            a = crunch(x, k=2)
            b = crunch(x, k=5)
            st = stats(a, b, s)
            r = allreduce(a)
            return st, r
    ''',
}


def _plain_project(root: Path) -> object:
    sys.path.insert(0, str(root))
    try:
        namespace = runpy.run_path(str(root / "proj.py"), run_name="plain_proj")
        value = namespace["p"]()
    finally:
        sys.path.remove(str(root))
    return value


@pytest.mark.slow
def test_crash_restart_skips_completed_tasks(tmp_path: Path, write_project) -> None:
    root = write_project(PROJECT)
    expected_st = _plain_project(root)[0]
    program = _emit(root / "proj.py", tmp_path / "out" / "proj_torch.py", 2)
    _ruff_clean(program)
    marker = tmp_path / "crashed"
    result, run_dir = tmp_path / "r.pkl", tmp_path / "run"
    # a short process-group timeout: a restarted rank that cannot reach its peer fails fast and the
    # agent restarts the group again, instead of waiting for the default half hour
    launch(program, 2, ["--result", str(result), "--run-dir", str(run_dir), "--timeout", "20"], max_restarts=3,
           env={"DAGC_TEST_CRASH": str(marker)})
    assert marker.exists()  # the crash happened
    st, reduced = pickle.loads(result.read_bytes())
    assert st == expected_st
    assert reduced == pytest.approx(3 * float((torch.arange(1000, dtype=torch.float32) * 3 * 2 + 1).sum()))
    events = read_events(run_dir / "events.jsonl")
    runs = list(dict.fromkeys(e["run"] for e in events))
    assert len(runs) >= 2  # the first attempt, then the restart(s)
    first_done = {e["task"] for e in events if e["run"] == runs[0] and e["event"] == "end"}
    second_ran = {e["task"] for e in events if e["run"] == runs[-1] and e["event"] == "start"}
    skipped = {e["task"] for e in events if e["run"] == runs[-1] and e["event"] == "skip"}
    assert "make" in first_done and not (first_done & second_ran)
    assert first_done <= skipped
    assert events[-1]["event"] == "run_end"


def _node(program: str, port: int, run_id: str, is_host: bool, argv: list[str]) -> None:
    # a forked agent inherits the parent's fork server handle but is not its parent: start its own
    from multiprocessing import forkserver

    server = forkserver._forkserver  # type: ignore[attr-defined]
    server._forkserver_pid = server._forkserver_address = server._forkserver_alive_fd = None
    launch(Path(program), 1, argv, nnodes=2, port=port, run_id=run_id, is_host=is_host)


@pytest.mark.slow
def test_two_nodes_with_c10d_rendezvous(tmp_path: Path, write_project) -> None:
    root = write_project(PROJECT)
    expected = _plain_project(root)
    program = _emit(root / "proj.py", tmp_path / "out" / "proj_torch.py", 2)
    port, run_id = _free_port(), uuid.uuid4().hex
    result = tmp_path / "r.pkl"
    ctx = multiprocessing.get_context("fork")
    agents = [ctx.Process(target=_node, args=(str(program), port, run_id, i == 0, ["--result", str(result)]))
              for i in range(2)]
    for agent in agents:
        agent.start()
    for agent in agents:
        agent.join(timeout=120)
    assert [a.exitcode for a in agents] == [0, 0]
    st, reduced = pickle.loads(result.read_bytes())
    assert st == expected[0]
    assert reduced == pytest.approx(3 * expected[1])  # ranks 1 and 2 of the group: (1 + 2) × the plain value


def test_static_tensor_types() -> None:
    assert static_tensor("Tensor[float32, 1024, 64]") == ("float32", (1024, 64))
    assert static_tensor("torch.Tensor[long, 3]") == ("int64", (3,))
    assert static_tensor("torch.Tensor") is None
    assert static_tensor("Tensor[banana, 3]") is None
    assert static_tensor("'Tensor[float32, 64]'") == ("float32", (64,))


def test_emitted_plan_is_checked(tmp_path: Path, write_project) -> None:
    root = write_project(PROJECT)
    graph = compile_file(root / "proj.py", passes=PASSES, cluster=parse_cluster_spec("3"), backend="torch")
    plan = build_plan(graph)
    assert graph.attrs["commcheck.messages"] == len(plan.moves)
    allreduce = [s for s in plan.steps if s.node == "allreduce" and s.kind == "run"][0]
    assert len(allreduce.ranks) == 2
    # both ranks of the multi-rank task receive its input
    assert {s.dst for s in plan.moves if s.out in ("crunch", "crunch@1", "crunch@2")} | {
        plan.home["crunch"][0]} >= set(allreduce.ranks)


def test_program_help_lists_options(tmp_path: Path) -> None:
    program = _emit(SAMPLES / "quickstart.py", tmp_path / "q.py", 2)
    out = run_python([str(program), "--help"], capture_output=True, text=True, check=True)
    for option in ("--result", "--run-dir", "--timeout", "--nproc", "--max-restarts"):
        assert option in out.stdout


def test_communication_error_is_a_diagnostic() -> None:
    assert issubclass(CommunicationError, ValueError)
    assert json.dumps(PASSES)


# ---- pipeline parallelism ------------------------------------------------------------------------------
def _pp_model() -> list:
    torch.manual_seed(0)
    dim, vocab = 16, 32
    layers = [torch.nn.Embedding(vocab, dim)]
    for _ in range(2):
        layers.append(torch.nn.TransformerEncoderLayer(dim, nhead=2, dim_feedforward=32, dropout=0.0,
                                                       batch_first=True))
    layers.append(torch.nn.Sequential(torch.nn.Flatten(1), torch.nn.Linear(dim * 6, vocab)))
    return layers


def _pp_batches() -> list:
    g = torch.Generator().manual_seed(1)
    batch = (torch.randint(0, 32, (8, 6), generator=g), torch.randint(0, 32, (8,), generator=g))
    return [batch] * 3  # the same batch three times: the loss must go down


def _pp_entry(out: str, schedule: str) -> None:
    import torch.distributed as dist

    from dagc.runtime.distributed import train_pipeline

    dist.init_process_group("gloo")
    losses = train_pipeline(_pp_model(), [0, 0, 1, 1], _pp_batches(), torch.nn.functional.cross_entropy,
                            microbatches=4, make_optimizer=lambda p: torch.optim.SGD(p, lr=0.1),
                            schedule=schedule)
    if dist.get_rank() == 0:
        Path(out).write_text(json.dumps(losses))
    dist.destroy_process_group()


@pytest.mark.slow
@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_pipeline_parallel_loss_matches_single_process(tmp_path: Path, schedule: str) -> None:
    out = tmp_path / "losses.json"
    _launch(lambda free: _config(2, port=free), _pp_entry, (str(out), schedule), True)
    got = json.loads(out.read_text())
    model = torch.nn.Sequential(*_pp_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    expected = []
    for inputs, targets in _pp_batches():
        optimizer.zero_grad()
        losses = []
        for x, y in zip(inputs.chunk(4), targets.chunk(4)):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            (loss / 4).backward()
            losses.append(loss.item())
        optimizer.step()
        expected.append(sum(losses) / 4)
    assert got == pytest.approx(expected, abs=1e-5)
    assert got[-1] < got[0]


# ---- regions and glue ----------------------------------------------------------------------------------
REGION_SAMPLES = {"hparam_sweep": "cond", "early_stopping": "loop"}


@pytest.mark.parametrize("sample", sorted(REGION_SAMPLES))
@pytest.mark.parametrize("ranks", [2, 4])
def test_region_is_one_step_of_its_rank(tmp_path: Path, sample: str, ranks: int) -> None:
    """A region runs as one task on its `partition.device`; the values its bodies read from other
    ranks are received under their transfer names, which the bodies use (comm renames inside)."""
    graph = compile_file(SAMPLES / f"{sample}.py", passes=PASSES, cluster=parse_cluster_spec(str(ranks)),
                         backend="torch")
    region = graph.node(REGION_SAMPLES[sample])
    plan = build_plan(graph)
    assert [s.ranks for s in plan.steps if s.node == region.name and s.kind == "run"] == [plan.home[region.name]]
    from dagc.ir.core import region_bodies

    inner = [n for body in region_bodies(region).values() for n in body]
    defined = {v for n in inner for v in n.outputs} | set(region.region.args.get("body", ()))
    reads = {v for n in inner for v in n.input_values()} - defined
    assert reads and reads <= set(region.input_values())
    if (sample, ranks) == ("hparam_sweep", 2):  # on rank 1, its bodies read values received from rank 0
        assert any("@" in v for v in reads)
    program = tmp_path / f"{sample}.py"
    program.write_text(emit(graph, "torch", program))
    _ruff_clean(program)
    assert f"def run_{region.name}() -> object:" in program.read_text()


@pytest.mark.slow
@pytest.mark.parametrize("sample", sorted(REGION_SAMPLES))
def test_regions_equal_plain_run_on_four_ranks(tmp_path: Path, sample: str) -> None:
    from tests.test_backend_local import _plain_result
    from tests.test_samples import _params

    params = _params(sample, tmp_path)  # smaller data, the same graph
    expected = _plain_result(SAMPLES / f"{sample}.py", sample, tmp_path, **params)
    program = _emit(SAMPLES / f"{sample}.py", tmp_path / "prog" / f"{sample}_torch4.py", 4, **params)
    result = tmp_path / "result.pkl"
    launch(program, 4, ["--result", str(result)])
    assert pickle.loads(result.read_bytes()) == expected


# ---- pipeline-parallel training steps from the `stages` pass ------------------------------------------
PP_PROJECT = {
    "model.py": '''
        from __future__ import annotations

        import torch

        import dagc
        from dagc.runtime.distributed import train_layers

        DIM, VOCAB, SEQ = 16, 32, 6


        @dagc.task(cost="2ms", out_size="4KiB")
        def embedding(seed: int) -> torch.nn.Module:
            torch.manual_seed(seed)
            return torch.nn.Embedding(VOCAB, DIM)


        @dagc.task(cost="10ms", out_size="4KiB")
        def block(seed: int) -> torch.nn.Module:
            torch.manual_seed(seed)
            return torch.nn.TransformerEncoderLayer(DIM, nhead=2, dim_feedforward=32, dropout=0.0, batch_first=True)


        @dagc.task(cost="3ms", out_size="1KiB")
        def head(seed: int) -> torch.nn.Module:
            torch.manual_seed(seed)
            return torch.nn.Sequential(torch.nn.Flatten(1), torch.nn.Linear(DIM * SEQ, VOCAB))


        @dagc.task(cost="1ms")
        def make_batches(steps: int, seed: int) -> list:
            g = torch.Generator().manual_seed(seed)
            batch = (torch.randint(0, VOCAB, (8, SEQ), generator=g), torch.randint(0, VOCAB, (8,), generator=g))
            return [batch] * steps  # the same batch each step: the loss must go down


        @dagc.task(cost="1ms")
        def train(layers: list, batches: list, lr: float, schedule: str) -> dict:
            losses = train_layers(layers, batches, torch.nn.functional.cross_entropy, microbatches=4,
                                  make_optimizer=lambda params: torch.optim.SGD(params, lr=lr), schedule=schedule)
            return {"losses": losses, "ranks": dagc.context().world_size,
                    "weights": [round(sum(p.abs().sum().item() for p in layer.parameters()), 4) for layer in layers]}


        @dagc.pipeline
        def model(steps: int = 3, lr: float = 0.1, schedule: str = "gpipe"):
            layers = [embedding(0), block(1), block(2), head(3)]
            return train(layers, make_batches(steps, seed=1), lr, schedule)
    ''',
}


def _pp_reference() -> list[float]:
    """The same training as one ordinary process: whole batches, one backward per step."""
    torch.manual_seed(0)
    layers = []
    for seed, make in [(0, lambda: torch.nn.Embedding(32, 16))] + [
            (s, lambda: torch.nn.TransformerEncoderLayer(16, nhead=2, dim_feedforward=32, dropout=0.0,
                                                         batch_first=True)) for s in (1, 2)] + [
            (3, lambda: torch.nn.Sequential(torch.nn.Flatten(1), torch.nn.Linear(16 * 6, 32)))]:
        torch.manual_seed(seed)
        layers.append(make())
    model = torch.nn.Sequential(*layers)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randint(0, 32, (8, 6), generator=g), torch.randint(0, 32, (8,), generator=g))] * 3
    losses = []
    for inputs, targets in batches:
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def test_stages_make_a_pipeline_training_step(tmp_path: Path, write_project) -> None:
    root = write_project(PP_PROJECT)
    graph = compile_file(root / "model.py", passes=PIPELINE_PASSES, cluster=parse_cluster_spec("2"), backend="torch")
    assert pipeline_steps(graph) == {"train": ((0, 0, 1, 1), (0, 1))}
    plan = build_plan(graph)  # the graph itself is unchanged; the emitted plan runs `train` on both ranks
    assert graph.node("train").attributes()["partition.device"] in (0, 1)
    program = tmp_path / "model_torch.py"
    program.write_text(emit(graph, "torch", program))
    _ruff_clean(program)
    text = program.read_text()
    assert "STAGES = {'train': (0, 0, 1, 1)}" in text
    train = next(line for line in text.splitlines() if line.strip().startswith("'train': TaskRow("))
    assert "ranks=(0, 1)," in train
    assert plan.world == 2


@pytest.mark.slow
@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_emitted_pipeline_loss_matches_single_process(tmp_path: Path, write_project, schedule: str) -> None:
    """`stages{k=2}` → the emitted program trains through PipelineStage + ScheduleGPipe/Schedule1F1B on 2
    gloo ranks; its losses equal the plain run's and an ordinary full-batch run's within 1e-5."""
    root = write_project(PP_PROJECT)
    plain = _plain_project_module(root, "model", schedule=schedule)
    graph = compile_file(root / "model.py", passes=PIPELINE_PASSES, cluster=parse_cluster_spec("2"), backend="torch",
                         params={"schedule": schedule})
    program = tmp_path / "out" / "model_torch.py"
    program.parent.mkdir()
    program.write_text(emit(graph, "torch", program))
    result = tmp_path / "r.pkl"
    launch(program, 2, ["--result", str(result)])
    got = pickle.loads(result.read_bytes())
    assert got["ranks"] == 2 and plain["ranks"] == 1  # pipelined on two ranks; the plain run in one process
    reference = _pp_reference()
    assert got["losses"] == pytest.approx(reference, abs=1e-5)
    assert plain["losses"] == pytest.approx(reference, abs=1e-5)
    assert got["losses"][-1] < got["losses"][0]
    assert got["weights"] == pytest.approx(plain["weights"], abs=1e-3)  # every stage's trained weights on rank 0


def _plain_project_module(root: Path, module: str, **params: object) -> object:
    sys.path.insert(0, str(root))
    try:
        namespace = runpy.run_path(str(root / f"{module}.py"), run_name=f"plain_{module}")
        return namespace[module](**params)
    finally:
        sys.path.remove(str(root))


STATEFUL = {
    "stateful.py": '''
        import os
        from pathlib import Path

        import torch

        import dagc

        STEPS = 6


        @dagc.task(cost="1s", ranks=2)
        def fit(seed: int) -> dict:
            """Each step adds 1 to a replicated weight and rank+1 to a per-rank state; the state is
            checkpointed after every step, so a restarted run continues where the crash left it."""
            ctx = dagc.context()
            shared = {"w": torch.zeros(4), "step": torch.zeros(1, dtype=torch.int64)}
            own = {"acc": torch.zeros(2)}
            if ctx.distributed:
                ctx.load_state(shared, name="shared")
                ctx.load_state(own, name="own", replicated=False)
            start = int(shared["step"].item())
            for step in range(start, STEPS):
                shared["w"] += 1
                own["acc"] += ctx.rank + 1
                shared["step"][0] = step + 1
                if ctx.distributed:
                    ctx.save_state(shared, name="shared")
                    ctx.save_state(own, name="own", replicated=False)
                marker = os.environ.get("DAGC_TEST_CRASH")
                if marker and step == 2 and ctx.rank == 1 and not Path(marker).exists():
                    Path(marker).write_text(str(step))
                    os._exit(3)  # rank 1 dies after three checkpointed steps
            acc = own["acc"].clone()
            if ctx.group is not None:
                gathered = [torch.zeros(2) for _ in range(ctx.world_size)]
                torch.distributed.all_gather(gathered, acc, group=ctx.group)
            else:
                gathered = [acc]
            return {"w": shared["w"].tolist(), "start": start, "acc": [g.tolist() for g in gathered]}


        @dagc.pipeline
        def p(seed: int = 0):
            return fit(seed)
    ''',
}


@pytest.mark.slow
def test_multi_rank_state_survives_a_restart(tmp_path: Path, write_project) -> None:
    """A multi-rank task's torch.distributed.checkpoint state, replicated and per rank, is reloaded
    when torchrun restarts the job, so training resumes after the last checkpoint."""
    root = write_project(STATEFUL)
    program = _emit(root / "stateful.py", tmp_path / "out" / "stateful_torch.py", 2)
    _ruff_clean(program)
    marker = tmp_path / "crashed"
    result, run_dir = tmp_path / "r.pkl", tmp_path / "run"
    launch(program, 2, ["--result", str(result), "--run-dir", str(run_dir), "--timeout", "20"], max_restarts=3,
           env={"DAGC_TEST_CRASH": str(marker)})
    assert marker.read_text() == "2"  # the crash happened after step 2 (three steps saved)
    value = pickle.loads(result.read_bytes())
    assert value["w"] == [6.0] * 4  # every step applied exactly once across the two attempts
    assert value["start"] == 3  # the restarted attempt resumed from the checkpoint, not from zero
    assert value["acc"] == [[6.0, 6.0], [12.0, 12.0]]  # each rank got its own state back
    assert (run_dir / "state" / "fit" / "own").is_dir()


@pytest.mark.slow
def test_the_mnist_program_exits_0_after_every_correct_run(tmp_path: Path) -> None:
    """Started as a user starts it (`python prog.py`, which launches torchrun), on a terminal (rank 0 then
    follows the progress of every rank from a thread): each run ends with status 0 and no abort at exit
    (`terminate called without an active exception` came from that thread still in the store's C++ code)."""
    import os
    import pty
    import select
    import subprocess

    graph = compile_file(SAMPLES / "mnist.py", cluster=parse_cluster_spec("2"), backend="torch")
    program = tmp_path / "mnist_torch.py"
    program.write_text(emit(graph, "torch", program))
    for run in range(2):  # (50 runs in a row measured by hand: 50 exited 0)
        leader, follower = pty.openpty()
        proc = subprocess.Popen([sys.executable, str(program), "--result", str(tmp_path / f"{run}.pkl")],
                                stdout=follower, stderr=follower, stdin=subprocess.DEVNULL, cwd=tmp_path)
        os.close(follower)
        seen = b""
        while True:  # (read the terminal as the program writes, so that it never blocks on a full one)
            ready, _, _ = select.select([leader], [], [], 1.0)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # the program closed the terminal: it has ended
                    break
                if not chunk:
                    break
                seen += chunk
            elif proc.poll() is not None:
                break
        os.close(leader)
        status = proc.wait(timeout=300)
        text = seen.decode("utf-8", "replace")
        assert status == 0 and "terminate called" not in text, text[-3000:]
        assert "17/17 tasks" in text  # the bar did run
        assert pickle.loads((tmp_path / f"{run}.pkl").read_bytes())["lr"] > 0
