"""Effects and state on every backend: for code that updates arguments in place, shares objects between
tasks, orders tasks by the files it writes or draws random numbers, the local, Ray and torch programs compute
what `python script.py` computes (docs/ir.md, "Effects and state"). What dagc infers a task may change is
tested in tests/test_effects_inference.py, what compiling does with it in tests/test_effects_passes.py."""

from __future__ import annotations

import pickle
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dagc.backends import emit
from dagc.cluster import parse_cluster_spec
from dagc.driver import compile_file
from tests.effect_sources import HEAD
from tests.engines import each_form_equals
from tests.interpreters import run_python
from tests.property import examples
from tests.test_backend_local import _plain_result, _ruff_clean

# ---- one value semantics on every backend --------------------------------------------------------------
IDIOMS = HEAD + '''\
import os
import time

random.seed(1234)  # the module seeds the global generator, as scripts do


@dagc.task
def build() -> dict:
    return {"w": 0.0, "steps": 0}


@dagc.task
def make_optimizer(model: dict, lr: float) -> dict:
    return {"params": model, "lr": lr}  # shares the model, as torch.optim does


@dagc.task
def train(model: dict, optimizer: dict, epoch: int) -> None:
    """Updates the model in place, through the optimizer that aliases it; returns nothing."""
    optimizer["params"]["w"] += optimizer["lr"] * epoch
    model["steps"] += 1


@dagc.task
def evaluate(model: dict) -> tuple[float, int]:
    return round(model["w"], 6), model["steps"]


@dagc.pipeline
def inplace_training(epochs: int = 4):
    model = build()
    optimizer = make_optimizer(model, 0.5)
    for epoch in range(epochs):
        train(model, optimizer, epoch)
    return evaluate(model), model


@dagc.task
def new_list() -> list:
    return []


@dagc.task
def append_a(log: list) -> None:
    log.append("a")


@dagc.task
def append_b(log: list) -> None:
    log.append("b")


@dagc.task
def summarize(log: list) -> str:
    return "+".join(log)


@dagc.pipeline
def shared_list():
    log = new_list()
    append_a(log)
    append_b(log)
    built_here = []
    append_b(built_here)
    append_a(built_here)
    return summarize(log), built_here, log


@dagc.task
def flip_coin() -> int:
    return random.randint(0, 10**6)


@dagc.pipeline
def coin_flips():
    return [flip_coin(), flip_coin(), flip_coin(), flip_coin()]


@dagc.task(side_effects=True, cost="1s")
def write_marker(path: str) -> None:
    time.sleep(0.5)
    with open(path, "w") as f:
        f.write("written")


@dagc.task(after=["write_marker"], cost="1s")
def read_marker(path: str) -> str:
    with open(path) as f:
        return f.read() + " " + str(os.path.getsize(path))


@dagc.pipeline
def ordering(path: str = "marker.txt"):
    write_marker(path)
    return read_marker(path)


@dagc.task(cost="1s")
def save_checkpoint(path: str, step: int) -> None:
    """Writes a file a later task reads: no value passes between them, only the file."""
    time.sleep(0.3)
    with open(path, "w") as f:
        f.write(str(step))


@dagc.task(cost="1s")
def load_checkpoint(path: str) -> int:
    with open(path) as f:
        return int(f.read())


@dagc.task(cost="5s")
def slow_branch() -> int:
    return 100


@dagc.pipeline
def checkpoint(path: str = "ckpt.txt"):
    other = slow_branch()
    save_checkpoint(path, 1)
    first = load_checkpoint(path)
    save_checkpoint(path, 2)
    return first, load_checkpoint(path), other


# every form above in one pipeline, so that Ray runs them all in one program
@dagc.pipeline
def every_effect(marker: str = "marker.txt", ckpt: str = "ckpt.txt"):
    return {
        "inplace_training": inplace_training(),
        "shared_list": shared_list(),
        "coin_flips": coin_flips(),
        "ordering": ordering(marker),
        "checkpoint": checkpoint(ckpt),
    }
'''
PIPELINES = ["inplace_training", "shared_list", "coin_flips", "ordering", "checkpoint"]


def _params(name: str, tmp: Path) -> dict[str, object]:
    return {"path": str(tmp / "marker.txt")} if name in ("ordering", "checkpoint") else {}


@pytest.fixture(scope="module")
def idioms(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    """The idioms script and, per pipeline, its plain-Python result."""
    root = tmp_path_factory.mktemp("idioms")
    script = root / "idioms.py"
    script.write_text(IDIOMS, encoding="utf-8")
    plain = {}
    for name in PIPELINES:
        tmp = tmp_path_factory.mktemp(f"plain_{name}")
        plain[name] = _plain_result(script, name, tmp, **_params(name, tmp))
    return script, plain


def test_plain_results_are_what_the_idioms_say(idioms) -> None:
    _, plain = idioms
    assert plain["inplace_training"] == ((3.0, 4), {"w": 3.0, "steps": 4})
    assert plain["shared_list"] == ("a+b", ["b", "a"], ["a", "b"])
    assert len(set(plain["coin_flips"])) == 4
    assert plain["ordering"] == "written 7"
    assert plain["checkpoint"] == (1, 2, 100)


@pytest.mark.parametrize("name", PIPELINES)
def test_local_equals_plain_run(tmp_path: Path, idioms, name: str) -> None:
    script, plain = idioms
    params = _params(name, tmp_path)
    graph = compile_file(script, pipeline_name=name, params=params)
    program = tmp_path / f"{name}_local.py"
    program.write_text(emit(graph, "local", program))
    _ruff_clean(program)
    run_python([str(program), "--result", str(tmp_path / "r.pkl")], check=True, timeout=120)
    assert pickle.loads((tmp_path / "r.pkl").read_bytes()) == plain[name]




def _every_params(tmp: Path) -> dict[str, object]:
    return {"marker": str(tmp / "marker.txt"), "ckpt": str(tmp / "ckpt.txt")}


@pytest.mark.slow
def test_ray_on_two_devices_equals_plain_run(tmp_path: Path, idioms, ray_cluster) -> None:
    """Every form in one Ray program (`every_effect`: one engine start), each form's result compared on its own
    with the plain run of the same pipeline."""
    script, _ = idioms
    plain_dir = tmp_path / "plain"
    plain_dir.mkdir()
    plain = _plain_result(script, "every_effect", plain_dir, **_every_params(plain_dir))
    graph = compile_file(script, pipeline_name="every_effect", params=_every_params(tmp_path),
                         cluster=parse_cluster_spec("2"))
    program = tmp_path / "every_effect_ray.py"
    program.write_text(emit(graph, "ray", program))
    _ruff_clean(program)
    proc = run_python([str(program), "--address", ray_cluster.address, "--result",
                       str(tmp_path / "r.pkl"), "--run-dir", str(tmp_path / "run")],
                      capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    each_form_equals(pickle.loads((tmp_path / "r.pkl").read_bytes()), plain, PIPELINES)


def _torch_program(script: Path, name: str, params: dict[str, object], out: Path, *,
                   split: tuple[str, str] | None = None) -> Path:
    """The torch program of pipeline `name` on 2 ranks; `split=(a, b)` puts task b on the rank a is not on (a
    keeps the rank the partitioner chose for it and the tasks sharing state with it)."""
    from dagc.backends.torch import REQUIRED_PASSES
    from dagc.cost import CostModel
    from dagc.passes.base import PassContext, PassManager, parse_pipeline

    cluster = parse_cluster_spec("2")
    if split is None:
        graph = compile_file(script, pipeline_name=name, params=params, passes=REQUIRED_PASSES, cluster=cluster,
                             backend="torch")
    else:
        graph = compile_file(script, pipeline_name=name, params=params, passes="verify,dce,cse,partition",
                             cluster=cluster, backend="torch")
        first, second = split
        graph.node(second).placement = graph.node(second).placement.on((1 - int(graph.node(first).attributes()["partition.device"]),))
        ctx = PassContext(cluster=cluster, cost_model=CostModel(backend="torch"), backend="torch")
        PassManager(parse_pipeline("schedule,comm,commcheck")).run(ctx, graph)
    out.write_text(emit(graph, "torch", out))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", PIPELINES)
def test_torch_on_two_ranks_equals_plain_run(tmp_path: Path, idioms, name: str) -> None:
    from tests.test_backend_torch import launch

    script, plain = idioms
    split = {"ordering": ("write_marker", "read_marker"),
             "checkpoint": ("save_checkpoint", "load_checkpoint")}.get(name)
    program = _torch_program(script, name, _params(name, tmp_path), tmp_path / f"{name}_torch.py", split=split)
    _ruff_clean(program)
    if split:  # the wait crosses ranks: an empty message from the writer's rank
        assert "rt.recv(" in program.read_text() and "has finished" in program.read_text()
    launch(program, 2, ["--result", str(tmp_path / "r.pkl")])
    assert pickle.loads((tmp_path / "r.pkl").read_bytes()) == plain[name]


# ---- random patterns of shared-list mutation -------------------------------------------------------------
RANDOM_HEAD = HEAD + '''\
@dagc.task
def new_list(tag: str) -> list:
    return [tag]


@dagc.task
def add(xs: list, v: int) -> None:
    xs.append(v)


@dagc.task
def add_count(xs: list, v: int) -> int:
    xs.append(v)
    return len(xs)


@dagc.task
def merge(xs: list, ys: list) -> None:
    xs.extend(ys)


@dagc.task
def snapshot(xs: list) -> str:
    return ",".join(map(str, xs))


@dagc.task
def alias(xs: list) -> list:
    return xs


'''


def random_pipeline(rng: random.Random, name: str) -> str:
    n_lists = rng.randint(1, 3)
    lines = [f"@dagc.pipeline\ndef {name}():"]
    lines += [f"    l{i} = new_list('l{i}')" for i in range(n_lists)]
    live = [f"l{i}" for i in range(n_lists)]
    results = []
    for step in range(rng.randint(3, 9)):
        kind = rng.choice(["add", "add_count", "merge", "snapshot", "alias", "add"])
        a, b = rng.choice(live), rng.choice(live)
        if kind == "add":
            lines.append(f"    add({a}, {step})")
        elif kind == "add_count":
            lines.append(f"    c{step} = add_count({a}, {step})")
            results.append(f"c{step}")
        elif kind == "merge" and a != b:
            lines.append(f"    merge({a}, {b})")
        elif kind == "snapshot":
            lines.append(f"    s{step} = snapshot({a})")
            results.append(f"s{step}")
        elif kind == "alias":
            lines.append(f"    a{step} = alias({a})")
            live.append(f"a{step}")
    lines.append(f"    return ({', '.join([*results, *live])},)")
    return "\n".join(lines) + "\n"


@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6))
def test_random_mutation_patterns_local_equals_plain(tmp_path: Path, seed: int) -> None:
    directory = tmp_path / f"s{seed}"
    directory.mkdir(exist_ok=True)
    script = directory / "rnd.py"
    script.write_text(RANDOM_HEAD + random_pipeline(random.Random(seed), "rnd"), encoding="utf-8")
    plain = _plain_result(script, "rnd", directory)
    graph = compile_file(script)
    program = directory / "rnd_local.py"
    program.write_text(emit(graph, "local", program))
    run_python([str(program), "--result", str(directory / "r.pkl")], check=True, timeout=60)
    assert pickle.loads((directory / "r.pkl").read_bytes()) == plain


@pytest.mark.slow
@pytest.mark.parametrize("seed", [3, 17, 42, 1001])
def test_random_mutation_patterns_torch_equals_plain(tmp_path: Path, seed: int) -> None:
    from tests.test_backend_torch import launch

    script = tmp_path / "rnd.py"
    script.write_text(RANDOM_HEAD + random_pipeline(random.Random(seed), "rnd"), encoding="utf-8")
    plain = _plain_result(script, "rnd", tmp_path)
    program = _torch_program(script, "rnd", {}, tmp_path / "rnd_torch.py")
    launch(program, 2, ["--result", str(tmp_path / "r.pkl")])
    assert pickle.loads((tmp_path / "r.pkl").read_bytes()) == plain


def test_tasks_sharing_state_placed_apart_by_hand_are_refused(idioms) -> None:
    """A placement edited in saved IR that splits a state group would train two copies of the model: the comm
    pass refuses it at the task's line (DAGC304) instead of emitting a program that differs silently."""
    from dagc.cost import CostModel
    from dagc.diagnostics import CompileError
    from dagc.ir.effects import state_groups
    from dagc.passes.base import PassContext, PassManager, parse_pipeline

    script, _ = idioms
    cluster = parse_cluster_spec("2")
    graph = compile_file(script, pipeline_name="inplace_training", passes="verify,dce,cse,partition", cluster=cluster)
    [group] = [g for g in state_groups(graph) if len(g.nodes) > 1][:1]
    moved = graph.node(group.nodes[-1])
    moved.placement = moved.placement.on((1 - int(moved.attributes()["partition.device"]),))
    ctx = PassContext(cluster=cluster, cost_model=CostModel(backend="torch"), backend="torch")
    with pytest.raises(CompileError) as failure:
        PassManager(parse_pipeline("schedule,comm")).run(ctx, graph)
    [diag] = failure.value.diagnostics
    assert diag.code == "DAGC304" and "placed on different devices" in diag.message and moved.name in diag.message
