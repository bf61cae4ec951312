"""Effects and the task cache: state has versions, so a cache two runs share never serves an earlier epoch's
value, and a reused task's console output is replayed while a task that acts on the world says why it is not
cached; on local, Ray (2 devices) and torch (2 gloo ranks) (docs/ir.md, "Effects and state")."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from dagc.backends import emit
from dagc.cluster import parse_cluster_spec
from dagc.driver import compile_file
from tests.interpreters import run_python
from tests.test_effects import _torch_program

# ---- state has versions: a cache shared by two runs never serves an earlier epoch's value --------------------
CHAIN = '''\
import dagc


@dagc.task
def build() -> dict:
    return {"w": 0.0}


@dagc.task
def step(model: dict) -> None:
    model["w"] += 1.0


@dagc.task
def score(model: dict) -> float:
    print("score", model["w"])  # an output channel: the task stays cacheable
    return model["w"]


@dagc.pipeline
def chain():
    model = build()
    scores = []
    for _ in range(3):
        step(model)
        scores.append(score(model))
    return scores
'''


def test_identical_calls_on_changed_state_have_different_fingerprints(tmp_path: Path) -> None:
    from dagc.backends.fingerprint import task_rows

    script = tmp_path / "chain.py"
    script.write_text(CHAIN, encoding="utf-8")
    rows = task_rows(compile_file(script))
    scores = [rows[f"score[{i}]"] for i in range(3)]
    assert len({row[0] for row in scores}) == 3
    assert all(row[3] for row in scores)  # printing does not stop caching
    assert len({row[4] for row in rows.values()}) == 1  # one state group: reused only whole


def _twice_with_one_cache(run: object, tmp_path: Path) -> list[object]:
    results = []
    for attempt in range(2):
        out = tmp_path / f"r{attempt}.pkl"
        run(["--cache", str(tmp_path / "cache"), "--result", str(out)])  # type: ignore[operator]
        results.append(pickle.loads(out.read_bytes()))
    return results


def test_local_cache_twice_equals_plain_run(tmp_path: Path) -> None:
    script = tmp_path / "chain.py"
    script.write_text(CHAIN, encoding="utf-8")
    program = tmp_path / "chain_local.py"
    program.write_text(emit(compile_file(script), "local", program))
    first, second = _twice_with_one_cache(
        lambda argv: run_python([str(program), *argv], check=True, timeout=120), tmp_path)
    assert first == second == [1.0, 2.0, 3.0]


@pytest.mark.slow
def test_ray_cache_twice_equals_plain_run(tmp_path: Path, ray_cluster) -> None:
    script = tmp_path / "chain.py"
    script.write_text(CHAIN, encoding="utf-8")
    program = tmp_path / "chain_ray.py"
    program.write_text(emit(compile_file(script, cluster=parse_cluster_spec("2")), "ray", program))

    def run(argv: list[str]) -> None:
        proc = run_python([str(program), "--address", ray_cluster.address, *argv],
                              capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]

    first, second = _twice_with_one_cache(run, tmp_path)
    assert first == second == [1.0, 2.0, 3.0]


@pytest.mark.slow
def test_torch_cache_twice_equals_plain_run(tmp_path: Path) -> None:
    from tests.test_backend_torch import launch

    script = tmp_path / "chain.py"
    script.write_text(CHAIN, encoding="utf-8")
    program = _torch_program(script, "chain", {}, tmp_path / "chain_torch.py")
    assert any(line.strip().startswith("'build': TaskRow(") and "state=0," in line
               for line in program.read_text().splitlines())
    first, second = _twice_with_one_cache(lambda argv: launch(program, 2, argv), tmp_path)
    assert first == second == [1.0, 2.0, 3.0]


# ---- output channels with the cache: printed again when reused, and a task not cached says why ------------------
LOUD = '''\
import logging
import sys
import textwrap

import dagc

logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(message)s")
log = logging.getLogger("loud")


@dagc.task
def shout(x: int) -> int:
    print(f"shouting {x}")
    log.info("logged %s", x)
    return x * 2


@dagc.task
def save(x: int, path: str) -> int:
    with open(path, "w") as f:
        f.write(str(x))
    return x


@dagc.pipeline
def loud(path: str = "out.txt"):
    a = shout(1)
    b = shout(2)
    return save(a + b, path)
'''


def _check_replayed(first: str, second: str) -> None:
    assert "shouting 1" in first and "INFO logged 1" in first
    assert "its output, replayed:" in second
    assert "shouting 1" in second and "shouting 2" in second and "INFO logged 2" in second
    assert "task `save` is not cached: `save` acts on the world" in first


def test_local_cache_replays_console_output_and_names_what_it_cannot_cache(tmp_path: Path) -> None:
    script = tmp_path / "loud.py"
    script.write_text(LOUD, encoding="utf-8")
    graph = compile_file(script, params={"path": str(tmp_path / "out.txt")})
    program = tmp_path / "loud_local.py"
    program.write_text(emit(graph, "local", program))
    runs = [run_python([str(program), "--cache", str(tmp_path / "cache")], capture_output=True,
                           text=True, timeout=120, check=True) for _ in range(2)]
    _check_replayed(runs[0].stdout + runs[0].stderr, runs[1].stdout + runs[1].stderr)


@pytest.mark.slow
def test_ray_and_torch_cache_replay_console_output(tmp_path: Path, ray_cluster) -> None:
    script = tmp_path / "loud.py"
    script.write_text(LOUD, encoding="utf-8")
    params = {"path": str(tmp_path / "out.txt")}
    graph = compile_file(script, params=params, cluster=parse_cluster_spec("2"))
    program = tmp_path / "loud_ray.py"
    program.write_text(emit(graph, "ray", program))
    runs = [run_python([str(program), "--address", ray_cluster.address, "--cache",
                            str(tmp_path / "ray_cache")], capture_output=True, text=True, timeout=300, cwd=tmp_path)
            for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[-1].stderr[-3000:]
    # the second run's reused tasks are replayed on the driver's console
    assert "reused from the cache; its output, replayed:" in runs[1].stderr
    assert "shouting 1" in runs[1].stdout and "shouting 2" in runs[1].stdout
    torch_program = _torch_program(script, "loud", params, tmp_path / "loud_torch.py")
    runs = [run_python([str(torch_program), "--cache", str(tmp_path / "tc")],
                           capture_output=True, text=True, timeout=300, cwd=tmp_path) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[-1].stderr[-3000:]
    _check_replayed(runs[0].stdout + runs[0].stderr, runs[1].stdout + runs[1].stderr)
