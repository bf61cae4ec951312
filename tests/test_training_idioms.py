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


MNIST_ARGS = '''\
"""pytorch/examples mnist's option parsing, in the pipeline body."""
import argparse
import os
import pickle

import torch

import dagc


@dagc.task
def train(args, epoch):
    torch.manual_seed(args.seed + epoch)
    return float(torch.randn(3).sum()) * args.lr


@dagc.task
def test(args, losses):
    return {"n": len(losses), "batch": args.batch_size, "dry": args.dry_run, "total": sum(losses)}


@dagc.pipeline
def main():
    parser = argparse.ArgumentParser(description="PyTorch MNIST Example",
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=64, metavar="N",
                        help="input batch size for training (default: 64)")
    parser.add_argument("--epochs", type=int, default=3, metavar="N", help="number of epochs to train")
    parser.add_argument("--lr", type=float, default=1.0, metavar="LR", help="learning rate (default: 1.0)")
    parser.add_argument("--dry-run", action="store_true", default=False, help="quickly check a single pass")
    parser.add_argument("--seed", type=int, default=1, metavar="S", help="random seed (default: 1)")
    args = parser.parse_args()
    losses = []
    for epoch in range(1, args.epochs + 1):
        losses.append(train(args, epoch))
        if args.dry_run:
            break
    print(f"trained {len(losses)} epochs")
    return test(args, losses)


if __name__ == "__main__":
    pickle.dump(main(), open(os.environ["PLAIN_RESULT"], "wb"))
'''

ARGS = ("--epochs", "2", "--lr", "0.5")


@pytest.fixture(scope="module")
def mnist(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    import os
    import pickle

    from tests.interpreters import run_python

    root = tmp_path_factory.mktemp("mnist_args")
    script = root / "mnist_args.py"
    script.write_text(MNIST_ARGS, encoding="utf-8")
    out = root / "plain.pkl"
    run_python([str(script), *ARGS], check=True, timeout=120, env={**os.environ, "PLAIN_RESULT": str(out)})
    return script, pickle.loads(out.read_bytes())


@pytest.fixture
def script_args():  # type: ignore[no-untyped-def]
    """Compile with the script's arguments ARGS, as `dagc run SCRIPT -- -- ARGS` does."""
    from dagc.frontend.arguments import SCRIPT_ARGS

    token = SCRIPT_ARGS.set(ARGS)
    yield
    SCRIPT_ARGS.reset(token)


def test_argparse_in_the_pipeline_is_read_at_compile_time(mnist, script_args) -> None:
    script, plain = mnist
    assert plain["n"] == 2 and plain["batch"] == 64  # type: ignore[index]
    graph = compile_file(script)
    assert [n.name for n in graph if n.name.startswith("train")] == ["train[0]", "train[1]"]
    (namespace,) = [n for n in graph if n.target == "argparse:Namespace"]
    assert dict(namespace.kwargs)["lr"].value == 0.5  # type: ignore[union-attr]
    spec = graph.attrs["script.arguments"]
    assert spec["given"] == list(ARGS) and spec["values"]["epochs"] == 2


def test_local_with_the_script_arguments_equals_plain(tmp_path: Path, mnist, script_args) -> None:
    script, plain = mnist
    assert run_local(script, "main", {}, tmp_path, "--", *ARGS) == plain


def test_dagc_run_takes_the_script_arguments_after_a_second_separator(tmp_path: Path, mnist) -> None:
    import pickle

    script, plain = mnist
    proc = run_dagc("run", str(script), "--result", str(tmp_path / "r.pkl"), "--", "--", *ARGS, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert pickle.loads((tmp_path / "r.pkl").read_bytes()) == plain
    assert "trained 2 epochs" in proc.stdout


def test_a_program_refuses_arguments_it_was_not_compiled_for(tmp_path: Path, mnist) -> None:
    from dagc.backends import emit
    from tests.interpreters import run_python

    script, _ = mnist
    program = tmp_path / "mnist_local.py"
    program.write_text(emit(compile_file(script), "local", program))  # compiled without arguments: 3 epochs
    proc = run_python([str(program), "--", *ARGS], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "the script's arguments give epochs=2, lr=0.5, but this program was compiled for epochs=3, lr=1.0" \
        in proc.stderr
    assert f"dagc run {script.name} -- -- --epochs 2 --lr 0.5" in proc.stderr or "-- -- --epochs 2" in proc.stderr
    bad = run_python([str(program), "--", "--epochs", "x"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "argument --epochs: invalid int value: 'x'" in bad.stderr, bad.stderr
    assert bad.stderr.startswith("usage: mnist_args.py")  # argparse's own usage, as `python SCRIPT` prints it


def test_script_arguments_the_parser_rejects_are_a_diagnostic_at_the_parse(tmp_path: Path, mnist) -> None:
    script, _ = mnist
    proc = run_dagc("check", str(script), "--script-args", "--epochs x")
    assert proc.returncode == 1
    assert "mnist_args.py:32:12: error[DAGC109]: argparse: the script's arguments ['--epochs', 'x'] are " \
        "rejected: argument --epochs: invalid int value: 'x'" in proc.stderr, proc.stderr


def test_range_of_a_task_result_names_the_bound_and_the_fixes(tmp_path: Path) -> None:
    script = tmp_path / "loop.py"
    script.write_text("import dagc\n\n\n@dagc.task\ndef parse():\n    return 3\n\n\n@dagc.task\ndef step(e):\n"
                      "    return e\n\n\n@dagc.pipeline\ndef p():\n    n = parse()\n    out = []\n"
                      "    for e in range(1, n + 1):\n        out.append(step(e))\n    return out\n", encoding="utf-8")
    proc = run_dagc("check", str(script))
    assert proc.returncode == 1
    assert "loop.py:18:14: error[DAGC107]: `range` of a task result (`n + 1`)" in proc.stderr, proc.stderr
    assert "argparse" in proc.stderr and "def main(epochs: int = 14)" in proc.stderr


@pytest.mark.slow
def test_ray_and_torch_with_the_script_arguments_equal_plain(tmp_path: Path, mnist, script_args,
                                                             ray_cluster) -> None:
    script, plain = mnist
    (tmp_path / "ray").mkdir()
    (tmp_path / "torch").mkdir()
    assert run_ray(script, "main", {}, tmp_path / "ray", ray_cluster.address, 2, "--", *ARGS) == plain
    assert run_torch(script, "main", {}, tmp_path / "torch", args=("--", *ARGS)) == plain


MODULE_ARGS = '''\
"""reinforce.py's shape: options parsed at module level, an episode budget beside a run-time exit, logs that
mix compile-time values and task results, a helper chosen by a conditional expression."""
import argparse
import itertools
import os
import pickle

import dagc

parser = argparse.ArgumentParser(description="PyTorch REINFORCE example")
parser.add_argument("--gamma", type=float, default=0.5, metavar="G", help="discount factor")
parser.add_argument("--budget", type=int, default=6)
parser.add_argument("--decay", action="store_true")
args = parser.parse_args()


def lr_at(i):
    return 0.1 / i


@dagc.task
def episode(i, lr):
    return i * args.gamma + lr


@dagc.task
def solved(reward):
    return reward > 2.0


@dagc.pipeline
def main():
    rewards = []
    for i in itertools.count(1):
        lr = lr_at(i) if args.decay else 0.0
        reward = episode(i, lr)
        rewards.append(reward)
        print(f"episode {i} (budget {args.budget}): reward {reward:.3f}")
        if solved(reward):
            break
        if i >= args.budget:
            break
    return rewards


if __name__ == "__main__":
    pickle.dump(main(), open(os.environ["PLAIN_RESULT"], "wb"))
'''


@pytest.mark.parametrize("argv", [(), ("--gamma", "0.25", "--decay")])
def test_module_level_options_budget_and_mixed_logs_equal_plain(tmp_path: Path, argv: tuple[str, ...]) -> None:
    import os
    import pickle

    from tests.interpreters import run_python

    script = tmp_path / "reinforce_args.py"
    script.write_text(MODULE_ARGS, encoding="utf-8")
    run_python([str(script), *argv], check=True, timeout=120, env={**os.environ, "PLAIN_RESULT": str(tmp_path / "p")})
    plain = pickle.loads((tmp_path / "p").read_bytes())
    assert len(plain) == (6 if argv else 5)  # solved at the 5th episode, or stopped by the budget of 6
    proc = run_dagc("run", str(script), "--result", str(tmp_path / "r.pkl"), "--", "--", *argv, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert pickle.loads((tmp_path / "r.pkl").read_bytes()) == plain
    assert f"episode 1 (budget 6): reward {plain[0]:.3f}" in proc.stdout
    from dagc.frontend.arguments import SCRIPT_ARGS

    token = SCRIPT_ARGS.set(argv)
    try:  # the conditional expression's test is known: the helper is called only with --decay
        from dagc.ir.regions import walk

        helpers = [m.name for n in compile_file(script) for m in (n, *walk(n)) if "lr_at" in m.name]
    finally:
        SCRIPT_ARGS.reset(token)
    assert bool(helpers) == ("--decay" in argv), helpers


CHANGED_ENV = '''\
import types

import dagc


class Env:
    def __init__(self):
        self.spec = types.SimpleNamespace(reward_threshold=4.0)
        self.steps = 0

    def step(self):
        self.steps += 1
        return self.steps * 1.5


env = Env()


@dagc.task
def run_episode():
    return env.step()


@dagc.task
def solved(reward, threshold, steps):
    return reward > threshold, steps


@dagc.pipeline
def main():
    rewards = []
    for i in range(3):
        rewards.append(run_episode())
    return rewards, solved(rewards[-1], env.spec.reward_threshold, env.steps)
'''


def test_a_module_object_a_task_changes_through_its_name_is_read_after_the_change(tmp_path: Path) -> None:
    """reinforce's `env.step()` inside a task, `env.spec.reward_threshold` and `env.steps` in the pipeline: the
    object is read where the tasks that change it ran, after them, as Python reads it (3 steps taken)."""
    script = tmp_path / "changed_env.py"
    script.write_text(CHANGED_ENV, encoding="utf-8")
    plain = plain_result(script, "main", tmp_path)
    assert plain == ([1.5, 3.0, 4.5], (True, 3))
    graph = compile_file(script)
    (read,) = [n for n in graph if n.attrs.get(MODULE_VALUE_ATTR)]
    assert {f"run_episode[{k}]" for k in range(3)} <= set(graph.ancestors(read.name))
    assert run_local(script, "main", {}, tmp_path) == plain


TUPLE_OF_NEW_AND_HELD = '''\
import torch
from torch.utils.data import DataLoader, TensorDataset

import dagc


@dagc.task(cost="2s")
def make_dataset(n):
    g = torch.Generator().manual_seed(n)
    return TensorDataset(torch.randn(n, 4, generator=g))


@dagc.task
def setup(dataset1, dataset2):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    return model, DataLoader(dataset1, batch_size=8), DataLoader(dataset2, batch_size=8)


@dagc.task
def train(model, train_loader):
    with torch.no_grad():
        for (x,) in train_loader:
            model.weight.add_(x.mean())
    return float(model.weight.sum())


@dagc.pipeline
def main():
    dataset1 = make_dataset(64)
    dataset2 = make_dataset(32)
    model, train_loader, test_loader = setup(dataset1, dataset2)
    return train(model, train_loader)
'''


def test_the_new_items_of_a_returned_tuple_are_no_part_of_the_arguments_state(tmp_path: Path) -> None:
    """`return model, DataLoader(dataset1), ...`: the model is new, the loaders hold the datasets. `train` changes
    the model only, so the two datasets, built before, are independent work on two devices."""
    from dagc.cluster import parse_cluster_spec

    script = tmp_path / "tuple_items.py"
    script.write_text(TUPLE_OF_NEW_AND_HELD, encoding="utf-8")
    graph = compile_file(script, cluster=parse_cluster_spec("2"))
    (setup,) = [n for n in graph if n.name == "setup"]
    assert setup.attributes()["effects.fresh_items"] == [True, False, False]
    assert {graph.node("make_dataset").attributes()["partition.device"],
            graph.node("make_dataset.1").attributes()["partition.device"]} == {0, 1}
    assert run_local(script, "main", {}, tmp_path) == plain_result(script, "main", tmp_path)
