"""Code identity at run time (dagc.runtime.code): a task's fingerprint covers the source it runs as it is
when the program starts — its own function and the functions and classes of the user's it reaches, in
other modules too — so editing a helper and resuming with the same emitted program recomputes that task
and everything after it, on local, Ray and torch, and says so."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from dagc.backends import emit
from dagc.cluster import parse_cluster_spec
from dagc.driver import compile_file
from dagc.runtime import read_events
from tests.interpreters import run_python
from tests.test_effects import _torch_program

FLOW = '''\
import dagc
from helpers import Scaler, scale


@dagc.task
def load() -> list:
    return [1, 2, 3]


@dagc.task
def transform(xs: list) -> list:
    return [scale(x) for x in xs]


@dagc.task
def shift(xs: list) -> list:
    return Scaler(10).apply(xs)


@dagc.task
def total(ys: list, zs: list) -> int:
    return sum(ys) + sum(zs)


@dagc.pipeline
def p():
    xs = load()
    return total(transform(xs), shift(xs))
'''

HELPERS = '''\
def scale(x):
    return x * 2


class Scaler:
    def __init__(self, k):
        self.k = k

    def apply(self, xs):
        return [x + self.k for x in xs]
'''


def _project(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "flow.py").write_text(FLOW, encoding="utf-8")
    (src / "helpers.py").write_text(HELPERS, encoding="utf-8")
    return src / "flow.py"


def _ran(run_dir: Path) -> list[str]:
    return sorted(e["task"] for e in read_events(run_dir / "events.jsonl", event="end"))


def test_the_compiler_records_the_code_each_task_reaches(tmp_path: Path) -> None:
    graph = compile_file(_project(tmp_path))
    assert graph.node("transform").attrs["code.reaches"] == ["helpers:scale"]
    assert graph.node("shift").attrs["code.reaches"] == ["helpers:Scaler"]
    assert "code.reaches" not in graph.node("load").attrs


def test_local_resume_after_editing_a_helper_recomputes_what_runs_it(tmp_path: Path) -> None:
    script = _project(tmp_path)
    program = tmp_path / "p_local.py"
    program.write_text(emit(compile_file(script), "local", program))
    run_dir = tmp_path / "run"
    run_python([str(program), "--run-dir", str(run_dir), "--result", str(tmp_path / "a.pkl")],
                   check=True, timeout=120)
    assert pickle.loads((tmp_path / "a.pkl").read_bytes()) == 12 + 36
    helpers = script.parent / "helpers.py"
    helpers.write_text(HELPERS.replace("x * 2", "x * 3"), encoding="utf-8")  # the same emitted program
    proc = run_python([str(program), "--resume", str(run_dir), "--result",
                           str(tmp_path / "b.pkl")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert pickle.loads((tmp_path / "b.pkl").read_bytes()) == 18 + 36
    assert "code changed since this program was emitted: `transform`" in proc.stderr
    # first run: all four; the resume: the edited task and what follows it, not `load` nor `shift`
    assert _ran(run_dir) == sorted(["load", "transform", "shift", "total", "transform", "total"])
    helpers.write_text(HELPERS.replace("x + self.k", "x - self.k"), encoding="utf-8")  # a method of a class
    proc = run_python([str(program), "--resume", str(run_dir), "--result",
                           str(tmp_path / "c.pkl")], capture_output=True, text=True, timeout=120)
    assert pickle.loads((tmp_path / "c.pkl").read_bytes()) == 12 + (1 + 2 + 3 - 30)
    assert "`shift`" in proc.stderr


@pytest.mark.slow
def test_ray_and_torch_resume_after_editing_a_helper(tmp_path: Path, ray_cluster) -> None:
    from tests.test_backend_torch import launch

    script = _project(tmp_path)
    helpers = script.parent / "helpers.py"
    program = tmp_path / "p_ray.py"
    program.write_text(emit(compile_file(script, cluster=parse_cluster_spec("2")), "ray", program))
    torch_program = _torch_program(script, "p", {}, tmp_path / "p_torch.py", split=("transform", "shift"))
    for name, run in (
        ("ray", lambda argv: run_python([str(program), "--address", ray_cluster.address, *argv],
                                            capture_output=True, text=True, timeout=300, cwd=tmp_path)),
        ("torch", lambda argv: launch(torch_program, 2, argv)),
    ):
        helpers.write_text(HELPERS, encoding="utf-8")
        run_dir = tmp_path / f"run_{name}"
        first = run(["--run-dir", str(run_dir), "--result", str(tmp_path / f"{name}_a.pkl")])
        assert getattr(first, "returncode", 0) == 0, getattr(first, "stderr", "")[-2000:]
        assert pickle.loads((tmp_path / f"{name}_a.pkl").read_bytes()) == 48
        helpers.write_text(HELPERS.replace("x * 2", "x * 3"), encoding="utf-8")
        again = run(["--resume", str(run_dir), "--result", str(tmp_path / f"{name}_b.pkl")])
        assert getattr(again, "returncode", 0) == 0, getattr(again, "stderr", "")[-2000:]
        assert pickle.loads((tmp_path / f"{name}_b.pkl").read_bytes()) == 54
        assert _ran(run_dir).count("load") == 1 and _ran(run_dir).count("transform") == 2


# ---- resume after a failure in the middle of training, with model and optimizer built by separate tasks -------
TRAINING = '''\
import os

import torch

import dagc

MARKER = os.environ.get("DAGC_TEST_MARKER", "")


@dagc.task
def make_model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Linear(3, 1)


@dagc.task
def make_optimizer(model: torch.nn.Module, lr: float) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=lr)


@dagc.task
def train(model: torch.nn.Module, optimizer: torch.optim.Optimizer, epoch: int) -> None:
    if epoch == 2 and MARKER and not os.path.exists(MARKER):
        open(MARKER, "w").close()
        if os.environ.get("DAGC_TEST_HARD"):
            os._exit(9)  # the process dies as under kill -9: no exception, no cleanup
        raise RuntimeError("injected failure in the middle of training")
    optimizer.zero_grad()
    model(torch.ones(4, 3) * epoch).pow(2).mean().backward()
    optimizer.step()


@dagc.task
def weights(model: torch.nn.Module) -> list:
    return [round(v, 6) for v in model.weight.detach().flatten().tolist()]


@dagc.pipeline
def training(epochs: int = 4):
    model = make_model(0)
    optimizer = make_optimizer(model, 0.1)
    for epoch in range(epochs):
        train(model, optimizer, epoch)
    return weights(model)
'''


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["local", "torch", "torch-restart"])
def test_resume_after_a_failure_mid_training_equals_an_uninterrupted_run(tmp_path: Path, backend: str) -> None:
    import os

    from tests.test_backend_local import _plain_result
    from tests.test_backend_torch import launch

    script = tmp_path / "training.py"
    script.write_text(TRAINING, encoding="utf-8")
    plain = _plain_result(script, "training", tmp_path)
    run_dir = tmp_path / "run"
    # (given to the ranks through the launcher: a fork server started by an earlier test keeps its environment)
    env = {"DAGC_TEST_MARKER": str(tmp_path / "failed-once")}
    if backend == "torch-restart":  # the rank dies hard, as under kill -9; torchrun's own restart finishes the run
        program = _torch_program(script, "training", {}, tmp_path / "training_torch.py")
        launch(program, 2, ["--run-dir", str(run_dir), "--timeout", "20", "--result", str(tmp_path / "r.pkl")],
               max_restarts=3, env={**env, "DAGC_TEST_HARD": "1"})
        events = read_events(run_dir / "events.jsonl")
        assert len({e["run"] for e in events}) >= 2  # the first attempt, then the restart
    elif backend == "torch":
        program = _torch_program(script, "training", {}, tmp_path / "training_torch.py")
        assert "STATE = {'make_model': 0, 'make_optimizer': 0" in program.read_text()
        with pytest.raises(Exception):  # noqa: B017 - the launcher reports the failed rank
            launch(program, 2, ["--run-dir", str(run_dir)], env=env)
        launch(program, 2, ["--resume", str(run_dir), "--result", str(tmp_path / "r.pkl")], env=env)
    else:
        program = tmp_path / "training_local.py"
        program.write_text(emit(compile_file(script), "local", program))
        first = run_python([str(program), "--run-dir", str(run_dir)], capture_output=True,
                               text=True, timeout=120, env={**os.environ, **env})
        assert first.returncode == 1 and "injected failure" in first.stderr
        run_python([str(program), "--resume", str(run_dir), "--result", str(tmp_path / "r.pkl")],
                       check=True, timeout=120, env={**os.environ, **env})
    assert (tmp_path / "failed-once").exists()  # the failure happened
    # the model and its optimizer are rebuilt together (a state is reused only whole): the optimizer still
    # updates the model, so the weights are the uninterrupted run's
    assert pickle.loads((tmp_path / "r.pkl").read_bytes()) == plain
