"""What `python script.py` computes, every backend computes: the holes found by porting real pipelines.

- appends (and `d[key] = v`) in a loop left by `break`, also in a bounded `while` (they were lost);
- the pipeline's own script runs its module-level code (a seed) even when it defines no task;
- torchrun's variables (RANK, WORLD_SIZE, ...) do not leak into user modules (nanoGPT reads them at
  import and starts its own process group);
- a task computes on the threads the plain run uses, or on those its `cpus=` declares; with `--threads
  share`, on its device's share of the cores; a conv net trained on two devices equals plain to the bit.

Each pipeline runs as plain Python, on local, on Ray with 2 devices and on torch with 2 gloo ranks.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dagc.driver import compile_file
from dagc.runtime.threads import physical_cores
from tests.engines import run_local, run_ray, run_torch
from tests.test_backend_local import _plain_result

TASKS = '''\
"""Tasks of the fidelity pipelines, in a module of their own (the entry script defines none)."""
import os
import random

import torch
import torch.distributed as dist

import dagc

# nanoGPT's train.py: a module that asks the environment whether it runs under torchrun
ddp = int(os.environ.get("RANK", -1)) != -1
if ddp:
    dist.init_process_group(backend="gloo")
    seed_offset = int(os.environ["RANK"])
else:
    seed_offset = 0


@dagc.task
def step(x: int) -> int:
    return x + 1


@dagc.task
def done(x: int) -> bool:
    return x >= 3


@dagc.task
def big(x: int) -> bool:
    return x >= 6


@dagc.task
def odd(x: int) -> bool:
    return x % 2 == 1


@dagc.task
def total(xs: list) -> int:
    return sum(xs)


@dagc.task
def draw(n: int) -> list:
    return [random.random() for _ in range(n)]


@dagc.task
def environment() -> tuple:
    return (os.environ.get("RANK"), os.environ.get("WORLD_SIZE"), os.environ.get("MASTER_ADDR"), ddp,
            seed_offset)


@dagc.task
def threads() -> int:
    return torch.get_num_threads()


@dagc.task(cpus=2)
def threads_declared() -> int:
    return torch.get_num_threads()


@dagc.task
def train_conv(seed: int) -> list:
    """A small conv net trained a few steps: its float reductions depend on the threads it runs on."""
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3), torch.nn.ReLU(), torch.nn.Conv2d(8, 16, 3),
                              torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(16 * 12 * 12, 10))
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    x, y = torch.randn(64, 1, 16, 16), torch.randint(0, 10, (64,))
    for _ in range(12):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    return [p.detach().double().sum().item() for p in net.parameters()]
'''

ENTRY = '''\
"""The entry script: pipelines only, and module-level code the plain run executes first."""
import random

import dagc
from fidelity_tasks import (big, done, draw, environment, odd, step, threads, threads_declared, total,\n                            train_conv)

random.seed(42)
NAMES = ["a", "b", "c", "d", "e"]


@dagc.pipeline
def break_appends(start: int = 0):
    x = start
    history = [100]
    odds = []
    scores = {}
    for i in range(5):
        x = step(x)
        history.append(x)
        scores[NAMES[i]] = x
        if odd(x):
            odds.append(x)
        if done(x):
            break
        history.extend([x, x])
    history.append(-1)
    i = 0
    grown = []
    while i < 5 and not big(x):
        x = step(x)
        grown.append(x)
        i += 1
    return history, odds, scores, total(history), grown


@dagc.pipeline
def seeded_draws():
    return draw(3)


@dagc.pipeline
def launcher_environment():
    return environment()


@dagc.pipeline
def thread_counts():
    return threads(), threads_declared()


@dagc.pipeline
def conv_trainings():
    return train_conv(0), train_conv(1)
'''

PIPELINES = ["break_appends", "seeded_draws", "launcher_environment", "conv_trainings"]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    root = tmp_path_factory.mktemp("fidelity")
    (root / "fidelity_tasks.py").write_text(TASKS, encoding="utf-8")
    script = root / "fidelity.py"
    script.write_text(ENTRY, encoding="utf-8")
    plain = {name: _plain_result(script, name, tmp_path_factory.mktemp(f"plain_{name}"))
             for name in [*PIPELINES, "thread_counts"]}
    return script, plain


def test_plain_results(project) -> None:
    _, plain = project
    history, odds, scores, total, grown = plain["break_appends"]  # type: ignore[misc]
    assert history == [100, 1, 1, 1, 2, 2, 2, 3, -1] and odds == [1, 3] and total == 111
    assert scores == {"a": 1, "b": 2, "c": 3} and grown == [4, 5, 6]
    import random

    random.seed(42)
    assert plain["seeded_draws"] == [random.random() for _ in range(3)]  # the entry's seed
    assert plain["launcher_environment"] == (None, None, None, False, 0)


def test_a_loop_left_by_break_carries_what_it_appends(project) -> None:
    script, _ = project
    graph = compile_file(script, pipeline_name="break_appends")
    (loop,) = [n for n in graph if n.op == "loop" and any(i.op == "task" and i.target.endswith(":done")
                                                          for i in loop_body(n))]
    carried = list(loop.region.args["body"])
    assert {"loop@history", "loop@odds", "loop@scores"} <= set(carried)


def loop_body(node):  # type: ignore[no-untyped-def]
    from dagc.ir.regions import walk

    return list(walk(node))


@pytest.mark.parametrize("name", [*PIPELINES, "thread_counts"])
def test_local_equals_plain_run(tmp_path: Path, project, name: str) -> None:
    script, plain = project
    assert run_local(script, name, {}, tmp_path) == plain[name]


@pytest.mark.slow
@pytest.mark.parametrize("name", [*PIPELINES, "thread_counts"])
def test_ray_on_two_devices_equals_plain_run(tmp_path: Path, project, ray_cluster, name: str) -> None:
    script, plain = project
    assert run_ray(script, name, {}, tmp_path, ray_cluster.address) == plain[name]


@pytest.mark.slow
@pytest.mark.parametrize("name", [*PIPELINES, "thread_counts"])
def test_torch_on_two_ranks_equals_plain_run(tmp_path: Path, project, name: str) -> None:
    script, plain = project
    assert run_torch(script, name, {}, tmp_path) == plain[name]


@pytest.mark.slow
def test_threads_share_caps_a_default_task_at_its_devices_share(tmp_path: Path, project, ray_cluster) -> None:
    """`--threads share`: a task that declares no cpus= computes on the plain run's count at most this
    machine's cores over the devices sharing it; a declared cpus= stands (dagc.runtime.threads)."""
    script, plain = project
    default, declared = plain["thread_counts"]  # type: ignore[misc]
    assert declared == 2
    shared = (max(1, min(default, physical_cores() // 2)), 2)
    (tmp_path / "ray").mkdir()
    (tmp_path / "torch").mkdir()
    assert run_ray(script, "thread_counts", {}, (tmp_path / "ray"), ray_cluster.address, 2, "--threads", "share") \
        == shared
    assert run_torch(script, "thread_counts", {}, tmp_path / "torch", args=("--threads", "share")) == shared


def test_check_warns_at_a_multi_rank_task(tmp_path: Path) -> None:
    from tests.conftest import run_dagc

    script = tmp_path / "ranks.py"
    script.write_text("import dagc\n\n\n@dagc.task(ranks=4)\ndef train(n: int) -> float:\n"
                      "    ctx = dagc.context()\n    return n / ctx.world_size\n\n\n"
                      "@dagc.pipeline\ndef p():\n    return train(8)\n", encoding="utf-8")
    for backend in ([], ["--backend", "local"], ["--backend", "ray"], ["--backend", "torch"]):
        proc = run_dagc("check", str(script), *backend)
        assert proc.returncode == 0, proc.stderr
        assert "warning[DAGC161]" in proc.stderr and "ranks.py:12:12" in proc.stderr, proc.stderr
        assert "returns rank 0's value" in proc.stderr
    local = run_dagc("check", str(script), "--backend", "local")
    assert "the result is the same" not in local.stderr  # DAGC160 no longer claims it for ranks
