"""Effects right in both directions, on code written the way real training code is written.

Too narrow is a wrong result: `p -= lr * p.grad` through a loop alias, `t = x[0]; t -= 1`,
`torch.nn.init.*_` on a model another task built, `import random` inside a task body, a method of the
user's own class that saves a checkpoint. Too coarse is lost parallelism and cache: a sweep of
independent trainings written with a module-level logger, config dict, device and loss module must
spread over every device. Each pipeline equals its plain run on local, Ray (2 devices) and torch (2 gloo
ranks); docs/ir.md, "Effects and state"."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dagc.backends import emit
from dagc.cluster import parse_cluster_spec
from dagc.driver import compile_file
from dagc.ir.effects import node_effects, state_groups
from tests.engines import each_form_equals, run_local, run_ray, run_torch
from tests.interpreters import run_python
from tests.property import examples
from tests.test_backend_local import _plain_result
from tests.test_effects import _torch_program

IDIOMS = '''\
"""Effect idioms from real training code (pytorch/examples, Metaflow, Kubeflow)."""
import logging
import os
import random

import torch
from torch import nn

import dagc

log = logging.getLogger(__name__)
CFG = {"dim": 4, "steps": 5}
DEVICE = torch.device("cpu")
criterion = nn.MSELoss()
random.seed(7)
torch.manual_seed(0)


# ---- hand-written SGD through a loop alias (pytorch/examples' word_language_model) ----------------------
@dagc.task
def make_model(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Linear(CFG["dim"], 1)


@dagc.task
def backward(model: nn.Module, scale: float) -> None:
    model.zero_grad()
    x = torch.ones(8, CFG["dim"]) * scale
    loss = criterion(model(x), torch.zeros(8, 1))
    loss.backward()


@dagc.task
def sgd_update(model: nn.Module, lr: float) -> None:
    with torch.no_grad():
        for p in model.parameters():
            p -= lr * p.grad


@dagc.task
def weights(model: nn.Module) -> list:
    return [round(v, 5) for v in model.weight.detach().flatten().tolist()]


@dagc.pipeline
def sgd_alias(steps: int = 3):
    model = make_model(1)
    for step in range(steps):
        backward(model, 1.0 + step)
        sgd_update(model, 0.1)
    return weights(model)


# ---- an alias of an element, updated in place -------------------------------------------------------------
@dagc.task
def make_rows() -> list:
    return [torch.zeros(2), torch.zeros(2)]


@dagc.task
def bump_first(rows: list) -> None:
    t = rows[0]
    t -= 1


@dagc.task
def as_lists(rows: list) -> list:
    return [r.tolist() for r in rows]


@dagc.pipeline
def element_alias():
    rows = make_rows()
    bump_first(rows)
    return as_lists(rows)


# ---- torch.nn.init on a model another task built ----------------------------------------------------------
@dagc.task
def reset(model: nn.Module, value: float) -> None:
    nn.init.constant_(model.bias, value)
    torch.nn.init.zeros_(model.weight)


@dagc.task
def parameters(model: nn.Module) -> list:
    return model.bias.detach().tolist() + model.weight.detach().flatten().tolist()


@dagc.pipeline
def init_in_place():
    model = make_model(2)
    reset(model, 0.5)
    return parameters(model)


# ---- `import random` inside a task body (Metaflow steps, Kubeflow components) -------------------------------
@dagc.task
def draw_numbers(n: int) -> list:
    import random

    return [random.randint(0, 1000) for _ in range(n)]


@dagc.task
def draw_choice(options: list) -> str:
    from random import choice

    return choice(options)


@dagc.pipeline
def local_imports():
    return draw_numbers(3), draw_choice(["x", "y", "z", "w"]), draw_numbers(2), draw_choice(["p", "q", "r"])


# ---- a method of the user's own class that saves a checkpoint ----------------------------------------------
class Trainer:
    def __init__(self, scale: float) -> None:
        self.scale = scale
        self.steps = 0

    def fit(self, xs: list) -> None:
        self.steps += len(xs)

    def save_checkpoint(self, path: str) -> None:
        print("saving", path)
        torch.save({"steps": self.steps, "scale": self.scale}, path)


@dagc.task
def new_trainer(scale: float) -> Trainer:
    return Trainer(scale)


@dagc.task
def fit(trainer: Trainer, xs: list) -> None:
    trainer.fit(xs)


@dagc.task
def checkpoint(trainer: Trainer, path: str) -> None:
    trainer.save_checkpoint(path)


@dagc.task(cost="5s")
def load(path: str) -> dict:
    return torch.load(path)


@dagc.pipeline
def user_methods(path: str = "trainer.pt"):
    trainer = new_trainer(2.0)
    fit(trainer, [1, 2, 3])
    checkpoint(trainer, path)
    first = load(path)
    fit(trainer, [4])
    checkpoint(trainer, path)
    return first, load(path)


# ---- a sweep written with a module-level logger, config, device and loss -----------------------------------
@dagc.task(cost="10s")
def make_data(seed: int) -> tuple:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(32, CFG["dim"], generator=g)
    return x, x.sum(dim=1, keepdim=True)


@dagc.task(cost="60s")
def train(data: tuple, lr: float, seed: int) -> float:
    torch.manual_seed(seed)
    x, y = data
    model = nn.Linear(CFG["dim"], 1).to(DEVICE)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(CFG["steps"]):
        opt.zero_grad()
        loss = criterion(model(x.to(DEVICE)), y.to(DEVICE))
        loss.backward()
        opt.step()
    log.info("lr=%s loss=%.4f", lr, loss.item())
    print(f"trained lr={lr} in process {os.getpid()}")
    return round(loss.item(), 4)


@dagc.pipeline
def sweep():
    data = make_data(0)
    return [train(data, lr, i) for i, lr in enumerate((0.01, 0.03, 0.1, 0.3))]


# ---- a search grid read by the pipeline and by tasks, seeded by a task (the mnist idiom) -------------------
GRID = [{"lr": 0.1, "wd": 0.0}, {"lr": 0.01, "wd": 1e-4}, {"lr": 0.3, "wd": 0.0}]


@dagc.task
def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)


@dagc.task
def fit_params(params: dict) -> float:
    model = nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=params["lr"], weight_decay=params["wd"])
    for _ in range(3):
        opt.zero_grad()
        model(torch.ones(1, 2)).sum().backward()
        opt.step()
    return round(float(model.weight.sum()), 5)


@dagc.task
def best(scores: list) -> dict:
    i = max(range(len(scores)), key=lambda k: scores[k])
    return GRID[i]


@dagc.pipeline
def search(seed: int = 3):
    seed_everything(seed)
    scores = [fit_params(params) for params in GRID]
    return best(scores), scores


# ---- fit/predict pairs per region, each with its own file (Kubeflow/Flyte style) ---------------------------------
@dagc.task(cost="10s")
def fit_region(region: str, path: str) -> None:
    torch.save({"region": region, "n": len(region)}, path)


@dagc.task(cost="10s")
def predict_region(path: str) -> str:
    found = torch.load(path)
    return f"{found['region']}:{found['n']}"


@dagc.pipeline
def regions(root: str = "models"):
    out = []
    for region in ("eu", "us", "asia"):
        path = f"{root}/{region}.pt"
        fit_region(region, path)
        out.append(predict_region(path))
    return out



# every form above in one pipeline, so that an engine runs them all in one program
@dagc.pipeline
def every_idiom(path: str = "trainer.pt", root: str = "models"):
    return {
        "sgd_alias": sgd_alias(),
        "element_alias": element_alias(),
        "init_in_place": init_in_place(),
        "local_imports": local_imports(),
        "user_methods": user_methods(path),
        "sweep": sweep(),
        "search": search(),
        "regions": regions(root),
    }


if __name__ == "__main__":
    seed_everything(1)
    print(search())
'''
PIPELINES = ["sgd_alias", "element_alias", "init_in_place", "local_imports", "user_methods", "sweep", "search",
             "regions"]


def _params(name: str, tmp: Path) -> dict[str, object]:
    if name == "regions":
        return {"root": str(tmp)}
    return {"path": str(tmp / "trainer.pt")} if name == "user_methods" else {}


@pytest.fixture(scope="module")
def idioms(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    root = tmp_path_factory.mktemp("effect_idioms")
    script = root / "effect_idioms.py"
    script.write_text(IDIOMS, encoding="utf-8")
    plain = {}
    for name in PIPELINES:
        tmp = tmp_path_factory.mktemp(f"plain_{name}")
        plain[name] = _plain_result(script, name, tmp, **_params(name, tmp))
    return script, plain


def test_plain_results_show_each_effect(idioms) -> None:
    _, plain = idioms
    untrained = [round(v, 5) for v in _untrained_weights()]
    assert plain["sgd_alias"] != untrained  # the update through the loop alias happened
    assert plain["element_alias"] == [[-1.0, -1.0], [0.0, 0.0]]
    assert plain["init_in_place"] == [0.5, 0.0, 0.0, 0.0, 0.0]
    assert plain["user_methods"] == ({"steps": 3, "scale": 2.0}, {"steps": 4, "scale": 2.0})
    assert len(plain["sweep"]) == 4 and len(set(plain["sweep"])) == 4


def _untrained_weights() -> list[float]:
    import torch

    torch.manual_seed(1)
    return torch.nn.Linear(4, 1).weight.detach().flatten().tolist()


# ---- what the compiler infers ---------------------------------------------------------------------------
def test_mutations_through_aliases_and_init_functions_are_seen(idioms) -> None:
    script, _ = idioms
    sgd = compile_file(script, pipeline_name="sgd_alias", passes="verify,dce")
    update = node_effects(sgd.node("sgd_update[0]"))
    assert update.mutates == ("make_model",) and "p -= lr * p.grad" in (
        sgd.node("sgd_update[0]").attrs.get("frontend.why", "") or _why(script, "sgd_update", "model"))
    element = compile_file(script, pipeline_name="element_alias", passes="verify,dce")
    assert node_effects(element.node("bump_first")).mutates == ("make_rows",)  # kept by dce
    init = compile_file(script, pipeline_name="init_in_place", passes="verify,dce")
    effects = node_effects(init.node("reset"))
    assert effects.mutates == ("make_model",) and effects.rng is None  # constant_ and zeros_ draw nothing


def _why(script: Path, task: str, param: str) -> str:
    from dagc.diagnostics import DiagnosticSink
    from dagc.frontend.effects import EffectAnalyzer
    from dagc.frontend.modules import Project

    project = Project(script, DiagnosticSink())
    info = project.load_entry()
    assert info is not None
    return EffectAnalyzer(project).of_task(info.tasks[task]).mutates[param].reason


def test_imports_inside_a_task_body_draw_from_the_global_generator(idioms) -> None:
    script, _ = idioms
    graph = compile_file(script, pipeline_name="local_imports")
    draws = [n for n in graph if n.op == "task"]
    assert all(node_effects(n).rng for n in draws)
    (group,) = state_groups(graph)  # one generator: the draws keep plain Python's order in one process
    assert group.name == "rng:global" and len(group.nodes) == 4


def test_methods_of_the_users_classes_are_analysed(idioms) -> None:
    script, _ = idioms
    graph = compile_file(script, pipeline_name="user_methods", params={"path": "ckpt.pt"})
    saving = node_effects(graph.node("checkpoint"))
    assert saving.files == "write" and saving.output and "trainer.save_checkpoint" in saving.output
    # the load waits for the checkpoint written through the method, the second save for the first load
    assert "checkpoint" in graph.node("load").deps or "checkpoint" in graph.predecessors("load")
    assert "load" in graph.node("checkpoint.1").deps


def test_module_level_logger_config_device_and_loss_are_not_state(idioms) -> None:
    script, _ = idioms
    graph = compile_file(script, pipeline_name="sweep", cluster=parse_cluster_spec("4"))
    trains = [graph.node(f"train[{i}]") for i in range(4)]
    assert state_groups(graph) == []
    for node in trains:
        effects = node_effects(node)
        assert not effects.mutates and not effects.writes and effects.io is None
        assert effects.output is not None  # it prints and logs: kept, cached, never ordered
        assert not [d for d in node.deps if d.startswith("train")]
    assert len({n.attributes()["partition.device"] for n in trains}) == 4


def test_a_search_grid_and_a_seeding_task_are_not_refused(idioms) -> None:
    from dagc.frontend import compile_source

    script, _ = idioms
    result = compile_source(script, pipeline_name="search")
    assert not [d for d in result.sink.diagnostics if d.is_error], [d.message for d in result.sink.diagnostics]
    assert {d.code for d in result.sink.diagnostics} <= {"DAGC150"}


def test_tasks_writing_different_files_are_independent(idioms) -> None:
    script, plain = idioms
    assert plain["regions"] == ["eu:2", "us:2", "asia:4"]
    graph = compile_file(script, pipeline_name="regions", params={"root": "/data/models"},
                         cluster=parse_cluster_spec("3"))
    fits = ["fit_region[0]", "fit_region[1]", "fit_region[2]"]
    assert graph.node(fits[0]).attributes()["effects.paths"] == {"write": ["/data/models/eu.pt"]}
    for i, fit in enumerate(fits):
        predict = graph.node(f"predict_region[{i}]")
        assert predict.deps == (fit,)  # each prediction waits for its own model's file only
        assert not [d for d in graph.node(fit).deps if d.startswith(("fit", "predict"))]
    assert len({graph.node(f).attributes()["partition.device"] for f in fits}) == 3


def test_a_sweep_plan_uses_every_device(idioms) -> None:
    from tests.conftest import run_dagc

    script, _ = idioms
    proc = run_dagc("plan", str(script), "--pipeline", "sweep", "--cluster", "4")
    assert proc.returncode == 0, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("utilization per device"))
    assert "0%" not in line.replace("100%", ""), line


# ---- every backend computes what plain Python computes ----------------------------------------------------
@pytest.mark.parametrize("name", PIPELINES)
def test_local_equals_plain_run(tmp_path: Path, idioms, name: str) -> None:
    script, plain = idioms
    assert run_local(script, name, _params(name, tmp_path), tmp_path) == plain[name]


# Ray and torch run every form in one program (`every_idiom`), each form's result compared on its own: one
# engine start instead of one per form.
def _every_params(tmp: Path) -> dict[str, object]:
    return {"path": str(tmp / "trainer.pt"), "root": str(tmp)}


@pytest.fixture(scope="module")
def every_plain(idioms, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    script, _ = idioms
    tmp = tmp_path_factory.mktemp("plain_every")
    return _plain_result(script, "every_idiom", tmp, **_every_params(tmp))  # type: ignore[return-value]


@pytest.mark.slow
def test_ray_on_two_devices_equals_plain_run(tmp_path: Path, idioms, every_plain, ray_cluster) -> None:
    script, _ = idioms
    each_form_equals(run_ray(script, "every_idiom", _every_params(tmp_path), tmp_path, ray_cluster.address),
                     every_plain, PIPELINES)


@pytest.mark.slow
def test_torch_on_two_ranks_equals_plain_run(tmp_path: Path, idioms, every_plain) -> None:
    script, _ = idioms
    # the trainer's checkpoint is written on one rank and loaded on the other
    got = run_torch(script, "every_idiom", _every_params(tmp_path), tmp_path,
                    split=("user_methods.checkpoint", "user_methods.load"))
    each_form_equals(got, every_plain, PIPELINES)


def test_the_sweep_spreads_over_both_torch_ranks(tmp_path: Path, idioms) -> None:
    import re

    script, _ = idioms
    program = _torch_program(script, "sweep", {}, tmp_path / "sweep_torch.py")
    text = program.read_text()
    bodies = re.split(r"\ndef (rank_\d+)\(", text)[1:]
    trains = {bodies[i]: bodies[i + 1].count("effect_idioms.train,") for i in range(0, len(bodies), 2)}
    assert trains == {"rank_0": 2, "rank_1": 2}, trains


# ---- random pipelines mixing immutable globals, output channels and changes through aliases --------------------
MIXED_HEAD = '''\
import logging

import dagc

log = logging.getLogger("mixed")
CFG = {"scale": 3, "offset": 1}
DEVICE = "cpu"


@dagc.task
def new_box(tag: str) -> list:
    return [[tag]]


@dagc.task
def push_alias(box: list, v: int) -> None:
    inner = box[0]
    inner += [v * CFG["scale"]]
    log.info("push %s", v)


@dagc.task
def push_loop(box: list, v: int) -> None:
    for inner in box:
        inner.append(v + CFG["offset"])
    print("loop", v)


@dagc.task
def read(box: list) -> str:
    print("read on", DEVICE)
    return ",".join(map(str, box[0]))


@dagc.task
def compute(v: int) -> int:
    log.info("compute %s", v)
    return v * CFG["scale"] + CFG["offset"]


'''


def mixed_pipeline(rng: object, name: str) -> str:
    import random as _random

    assert isinstance(rng, _random.Random)
    boxes = [f"b{i}" for i in range(rng.randint(1, 3))]
    lines = [f"@dagc.pipeline\ndef {name}():"] + [f"    {b} = new_box('{b}')" for b in boxes]
    results: list[str] = []
    for step in range(rng.randint(3, 10)):
        kind = rng.choice(["push_alias", "push_loop", "read", "compute", "push_alias"])
        box = rng.choice(boxes)
        if kind == "compute":
            lines.append(f"    c{step} = compute({step})")
            results.append(f"c{step}")
        elif kind == "read":
            lines.append(f"    r{step} = read({box})")
            results.append(f"r{step}")
        else:
            value = f"c{step - 1}" if f"c{step - 1}" in results else str(step)
            lines.append(f"    {kind}({box}, {value})")
    lines.append(f"    return ({', '.join([*results, *boxes])},)")
    return "\n".join(lines) + "\n"


def _mixed_script(directory: Path, seed: int) -> Path:
    import random as _random

    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "mixed.py"
    script.write_text(MIXED_HEAD + mixed_pipeline(_random.Random(seed), "mixed"), encoding="utf-8")
    return script


@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6))
def test_mixed_effects_local_equals_plain(tmp_path: Path, seed: int) -> None:
    script = _mixed_script(tmp_path / f"s{seed}", seed)
    plain = _plain_result(script, "mixed", script.parent)
    graph = compile_file(script)
    # only the boxes are state: the config, the device string and the logger never are
    for group in state_groups(graph):
        assert not [c for c in group.cells if c.startswith("global:")], group
    program = script.parent / "mixed_local.py"
    program.write_text(emit(graph, "local", program))
    run_python([str(program), "--result", str(script.parent / "r.pkl")], check=True,
                   timeout=60, capture_output=True)
    assert pickle.loads((script.parent / "r.pkl").read_bytes()) == plain


@pytest.mark.slow
@pytest.mark.parametrize("seed", [5, 23, 777])
def test_mixed_effects_ray_and_torch_equal_plain(tmp_path: Path, ray_cluster, seed: int) -> None:
    from tests.test_backend_torch import launch

    script = _mixed_script(tmp_path, seed)
    plain = _plain_result(script, "mixed", tmp_path)
    graph = compile_file(script, cluster=parse_cluster_spec("2"))
    program = tmp_path / "mixed_ray.py"
    program.write_text(emit(graph, "ray", program))
    proc = run_python([str(program), "--address", ray_cluster.address, "--result",
                           str(tmp_path / "ray.pkl")], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert pickle.loads((tmp_path / "ray.pkl").read_bytes()) == plain
    torch_program = _torch_program(script, "mixed", {}, tmp_path / "mixed_torch.py")
    launch(torch_program, 2, ["--result", str(tmp_path / "torch.pkl")])
    assert pickle.loads((tmp_path / "torch.pkl").read_bytes()) == plain
