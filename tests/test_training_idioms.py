"""Pipeline bodies as training scripts write them (pytorch/examples, nanoGPT, reinforce), equal to plain:

- a module-level `torch.device`, tensor or environment object passed to a task, or read by attribute
  (`env.spec.reward_threshold`): read where the task runs, one node per object, so a task that changes the
  tensor in place changes the one object every later reader sees;
- nanoGPT's `while True:` loop left by `if iter_num > max_iters: break` on a counter;
- `for i in itertools.count(1):` left by a compile-time `break`;
- a plain helper called in the pipeline (`lr = get_lr(it)`): a node like a task's;
- `print(...)` of task results in the pipeline: printed where it runs, in the plain run's order locally;
- `except KeyboardInterrupt:` around the epoch loop: the body runs, the handler is DAGC183.

The pipeline runs as plain Python, on local, on Ray with 2 devices and on torch with 2 gloo ranks.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest

from dagc.driver import compile_file
from dagc.ir.core import MODULE_VALUE_ATTR
from tests.conftest import run_dagc
from tests.engines import run_local, run_ray, run_torch
from tests.plain import plain_result

SCRIPT = '''\
"""Idioms of training scripts, in one pipeline."""
import itertools
import math
import types

import torch

import dagc

DEVICE = torch.device("cpu")
WEIGHTS = torch.zeros(3)
env = types.SimpleNamespace(spec=types.SimpleNamespace(reward_threshold=7.5))
WARMUP = 2
MAX_ITERS = 5


def get_lr(it):
    """nanoGPT's schedule: linear warm-up, then cosine decay."""
    if it < WARMUP:
        return 0.1 * (it + 1) / WARMUP
    return 0.1 * 0.5 * (1.0 + math.cos(math.pi * it / MAX_ITERS))


@dagc.task
def bump(w, k):
    w += k
    return float(w.sum())


@dagc.task
def on_device(x, device):
    return torch.tensor(x).to(device).mul(2).item()


@dagc.task
def step(state, lr):
    return state + lr


@dagc.task
def episode(i):
    return i * 1.5


@dagc.task
def solved(reward, threshold):
    return reward > threshold


@dagc.task
def total(w):
    return float(w.sum())


@dagc.pipeline
def idioms():
    first = bump(WEIGHTS, 1)
    second = bump(WEIGHTS, 2)
    print(f"bumped {first} then {second}")
    scaled = on_device(second, DEVICE)
    state = 0.0
    iter_num = 0
    try:
        while True:
            lr = get_lr(iter_num)
            state = step(state, lr)
            iter_num += 1
            if iter_num > MAX_ITERS:
                break
    except KeyboardInterrupt:
        print("Exiting from training early")
    print("state", state, sep=": ")
    rewards = []
    for i in itertools.count(1):
        rewards.append(episode(i))
        if i >= 4:
            break
    done = solved(rewards[-1], env.spec.reward_threshold)
    return first, second, scaled, state, rewards, done, total(WEIGHTS)
'''


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    root = tmp_path_factory.mktemp("idioms")
    script = root / "training_idioms.py"
    script.write_text(SCRIPT, encoding="utf-8")
    return script, plain_result(script, "idioms", tmp_path_factory.mktemp("plain"))


def test_the_plain_run(project) -> None:
    _, plain = project
    lrs = [0.1 * (it + 1) / 2 if it < 2 else 0.1 * 0.5 * (1.0 + math.cos(math.pi * it / 5)) for it in range(6)]
    state = 0.0
    for lr in lrs:
        state += lr
    rewards = [i * 1.5 for i in itertools.islice(itertools.count(1), 4)]
    assert plain == (3.0, 9.0, 18.0, state, rewards, False, 9.0)


def test_the_graph_reads_each_module_object_once_and_unrolls_the_loops(project) -> None:
    script, _ = project
    graph = compile_file(script, pipeline_name="idioms")
    read = sorted(n.target for n in graph if n.attrs.get(MODULE_VALUE_ATTR))
    assert read == ["training_idioms:DEVICE", "training_idioms:WEIGHTS", "training_idioms:env"]
    names = [n.name for n in graph]
    assert [n for n in names if n.startswith("get_lr")] == [f"get_lr[{k}]" for k in range(6)]
    assert [n for n in names if n.startswith("episode")] == [f"episode[{k}]" for k in range(4)]
    bumps = [n for n in graph if n.name.startswith("bump")]
    assert len(bumps) == 2 and "bump" in bumps[1].deps  # the second change waits for the first


def test_check_warns_once_at_the_interrupt_handler(project) -> None:
    script, _ = project
    proc = run_dagc("check", str(script))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("warning[") == 1 and "warning[DAGC183]" in proc.stderr, proc.stderr
    assert "training_idioms.py:70:5" in proc.stderr


def test_local_equals_plain_and_prints_in_order(tmp_path: Path, project) -> None:
    script, plain = project
    assert run_local(script, "idioms", {}, tmp_path) == plain
    proc = run_dagc("run", str(script), "--pipeline", "idioms", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith(("bumped", "state"))]
    assert lines == ["bumped 3.0 then 9.0", f"state: {plain[3]}"]  # type: ignore[index]


@pytest.mark.slow
def test_ray_on_two_devices_equals_plain(tmp_path: Path, project, ray_cluster) -> None:
    script, plain = project
    assert run_ray(script, "idioms", {}, tmp_path, ray_cluster.address) == plain


@pytest.mark.slow
def test_torch_on_two_ranks_equals_plain(tmp_path: Path, project) -> None:
    script, plain = project
    assert run_torch(script, "idioms", {}, tmp_path) == plain
