"""A loop, a branch or a map region in the local program is one task, stored and reused as a whole, as the
Ray and torch programs run it: a resumed run does not run a finished training loop again, nor the other
tasks of a state group the loop belongs to; the tasks inside keep their own retries and events, and a
failure inside is reported as theirs."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from dagc.backends import emit
from dagc.driver import compile_file
from dagc.runtime.events import read_events
from tests.interpreters import run_python
from tests.test_backend_local import _plain_result

LOOPED = '''\
import random
import sys
from pathlib import Path

import dagc


@dagc.task
def init(seed: int) -> dict:
    random.seed(seed)
    return {"w": 0.0, "step": 0}


@dagc.task
def step(model: dict, k: int) -> dict:
    return {"w": model["w"] + random.random(), "step": k}


@dagc.task
def done(model: dict) -> bool:
    return model["w"] > 2.0


@dagc.task
def report(model: dict, flag: str) -> dict:
    if Path(flag).exists():  # fails once, after the loop: a crash the resumed run recovers from
        Path(flag).unlink()
        sys.exit("report: crashed")
    return {"steps": model["step"] + 1, "w": round(model["w"], 6)}


@dagc.pipeline
def looped(seed: int = 3, flag: str = "crash"):
    model = init(seed)
    for k in range(20):
        model = step(model, k)
        if done(model):
            break
    return report(model, flag)
'''


def _events(run_dir: Path, event: str) -> set[str]:
    records = read_events(run_dir / "events.jsonl")
    last = records[-1]["run"]
    return {r["task"] for r in records if r["run"] == last and r["event"] == event and "task" in r}


def _looped(tmp_path: Path, backend: str = "local") -> tuple[Path, Path]:
    """`LOOPED` compiled for `backend`, and the flag file that makes its `report` crash once."""
    from dagc.backends.torch import REQUIRED_PASSES
    from dagc.cluster import parse_cluster_spec

    script, flag = tmp_path / "looped.py", tmp_path / "crash"
    script.write_text(LOOPED, encoding="utf-8")
    program = tmp_path / f"looped_{backend}.py"
    options = {"passes": REQUIRED_PASSES, "cluster": parse_cluster_spec("2"), "backend": "torch"} \
        if backend == "torch" else {}
    program.write_text(emit(compile_file(script, params={"flag": str(flag)}, **options), backend, program))
    return program, flag


def _crash_after_the_loop(program: Path, flag: Path, run_dir: Path) -> None:
    flag.touch()
    crashed = run_python([str(program), "--run-dir", str(run_dir)], capture_output=True, text=True, timeout=120)
    assert crashed.returncode != 0 and "report: crashed" in crashed.stderr


def _plain_looped(tmp_path: Path) -> object:
    return _plain_result(tmp_path / "looped.py", "looped", tmp_path, flag=str(tmp_path / "never"))


def test_a_resumed_run_reuses_the_finished_loop_and_its_state_group(tmp_path: Path) -> None:
    program, flag = _looped(tmp_path)
    assert "rt.region('loop'" in program.read_text()
    run_dir, result = tmp_path / "run", tmp_path / "result.pkl"
    _crash_after_the_loop(program, flag, run_dir)
    resumed = run_python([str(program), "--resume", str(run_dir), "--result", str(result)], capture_output=True,
                         text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert pickle.loads(result.read_bytes()) == _plain_looped(tmp_path)
    # the loop, and `init` (which shares the random state with it), are taken from the run directory
    assert _events(run_dir, "skip") == {"init", "loop"}
    assert _events(run_dir, "start") == {"report"}


def test_a_failure_inside_a_loop_is_the_failure_of_the_task_that_failed(tmp_path: Path) -> None:
    script = tmp_path / "looped.py"
    script.write_text(LOOPED.replace('return model["w"] > 2.0', 'raise ValueError("no convergence test")'),
                      encoding="utf-8")
    program = tmp_path / "looped_local.py"
    program.write_text(emit(compile_file(script), "local", program))
    proc = run_python([str(program), "--run-dir", str(tmp_path / "run")], capture_output=True, text=True,
                      timeout=120)
    assert proc.returncode != 0
    assert "task `loop.done` failed" in proc.stderr and "no convergence test" in proc.stderr
    assert "task `loop` failed" not in proc.stderr


@pytest.mark.slow
def test_ray_and_torch_resume_a_loop_the_local_program_stored(tmp_path: Path, ray_cluster) -> None:  # type: ignore[no-untyped-def]
    """The loop's stored outputs are the file Ray and torch read for the same task."""
    from tests.test_backend_torch import launch

    local, flag = _looped(tmp_path)
    plain = _plain_looped(tmp_path)
    ray_program, _ = _looped(tmp_path, "ray")
    torch_program, _ = _looped(tmp_path, "torch")
    for name, resume in (
        ("ray", lambda argv: run_python([str(ray_program), "--address", ray_cluster.address, *argv],
                                        capture_output=True, text=True, timeout=300, cwd=tmp_path)),
        ("torch", lambda argv: launch(torch_program, 2, argv)),
    ):
        run_dir, result = tmp_path / f"run_{name}", tmp_path / f"{name}.pkl"
        _crash_after_the_loop(local, flag, run_dir)
        proc = resume(["--resume", str(run_dir), "--result", str(result)])
        assert getattr(proc, "returncode", 0) == 0, getattr(proc, "stderr", "")[-3000:]
        assert pickle.loads(result.read_bytes()) == plain, name
        assert _events(run_dir, "skip") == {"init", "loop"}, name


TRAINED_IN_A_LOOP = '''\
import torch

import dagc


@dagc.task
def build(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Linear(4, 1)


@dagc.task
def make_optimizer(model: torch.nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=0.1)


@dagc.task
def train_epoch(model: torch.nn.Module, optimizer: torch.optim.Optimizer, epoch: int) -> float:
    g = torch.Generator().manual_seed(epoch)
    optimizer.zero_grad()
    loss = model(torch.randn(8, 4, generator=g)).pow(2).mean()
    loss.backward()
    optimizer.step()
    return loss.item()


@dagc.pipeline
def trained(seed: int = 0, epochs: int = 4):
    model = build(seed)
    optimizer = make_optimizer(model)
    for epoch in range(epochs):
        if train_epoch(model, optimizer, epoch) < 1e-9:  # (a loop left by `break`: one region)
            break
    return model, optimizer
'''


def test_a_model_trained_in_place_in_a_loop_and_returned_is_reused_trained(tmp_path: Path) -> None:
    """The training loop changes the returned model in place: its state group (build, the optimizer, the
    loop) is stored at its end, with the loop as one task; a resumed run returns the trained model, still
    the one its optimizer holds."""
    import torch

    script = tmp_path / "trained.py"
    script.write_text(TRAINED_IN_A_LOOP, encoding="utf-8")
    plain_model, _ = _plain_result(script, "trained", tmp_path)
    program = tmp_path / "trained_local.py"
    program.write_text(emit(compile_file(script), "local", program))
    text = program.read_text()
    assert "FINAL_STATE" in text and "rt.region(" in text
    run_dir, result = tmp_path / "run", tmp_path / "result.pkl"
    for reuse in ("--run-dir", "--resume"):
        proc = run_python([str(program), reuse, str(run_dir), "--result", str(result)], capture_output=True,
                          text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        model, optimizer = pickle.loads(result.read_bytes())
        assert torch.equal(model.weight, plain_model.weight), reuse
        assert optimizer.param_groups[0]["params"][0] is model.weight, reuse
    assert _events(run_dir, "start") == set()  # the resumed run ran nothing
    assert len(_events(run_dir, "skip")) == 3
