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
    script = _project(tmp_path)
    helpers = script.parent / "helpers.py"
    program = tmp_path / "p_ray.py"
    program.write_text(emit(compile_file(script, cluster=parse_cluster_spec("2")), "ray", program))
    torch_program = _torch_program(script, "p", {}, tmp_path / "p_torch.py", split=("transform", "shift"))
    for name, run in ray_and_torch(program, torch_program, ray_cluster.address, tmp_path):
        helpers.write_text(HELPERS, encoding="utf-8")
        run_dir = tmp_path / f"run_{name}"
        ok(run(["--run-dir", str(run_dir), "--result", str(tmp_path / f"{name}_a.pkl")]))
        assert pickle.loads((tmp_path / f"{name}_a.pkl").read_bytes()) == 48
        helpers.write_text(HELPERS.replace("x * 2", "x * 3"), encoding="utf-8")
        ok(run(["--resume", str(run_dir), "--result", str(tmp_path / f"{name}_b.pkl")]))
        assert pickle.loads((tmp_path / f"{name}_b.pkl").read_bytes()) == 54
        assert _ran(run_dir).count("load") == 1 and _ran(run_dir).count("transform") == 2


def ray_and_torch(ray_program: Path, torch_program: Path, address: str, cwd: Path) -> list[tuple[str, object]]:
    """(name, run(argv)) for the Ray program on the test cluster and the torch program on 2 ranks: run(argv)
    returns what it finished with (a failed launch raises)."""
    from tests.test_backend_torch import launch

    return [("ray", lambda argv: run_python([str(ray_program), "--address", address, *argv],
                                            capture_output=True, text=True, timeout=300, cwd=cwd)),
            ("torch", lambda argv: launch(torch_program, 2, argv))]


def ok(finished: object) -> None:
    """A run of `ray_and_torch` ended well (a torch launch returns None)."""
    assert getattr(finished, "returncode", 0) == 0, getattr(finished, "stderr", "")[-2000:]


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
        rows = {line.split(":")[0].strip() for line in program.read_text().splitlines() if "state=0," in line}
        assert {"'make_model'", "'make_optimizer'"} <= rows
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


# ---- module-level values a task reads: constants, config dicts, values of another module ---------------------
VALUES_FLOW = '''\
import dagc
import settings
from settings import SCALE

BASE = 0.1
LR = BASE * 2
CONFIG = {"shift": 1}
CONFIG["shift"] += 1


def shifted(x):
    return x + CONFIG["shift"]


@dagc.task
def make(n: int) -> list:
    return [i * LR for i in range(n)]


@dagc.task
def scale(xs: list) -> list:
    return [shifted(x) * SCALE for x in xs]


@dagc.task
def offset(xs: list) -> list:
    return [x + settings.OFFSET for x in xs]


@dagc.task
def untouched(n: int) -> int:
    return n + 1


@dagc.pipeline
def p(n: int = 3):
    xs = make(n)
    return scale(xs), offset(xs), untouched(n)
'''

SETTINGS = '''\
SCALE = 10
OFFSET = 100
'''


def _values_project(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "flow.py").write_text(VALUES_FLOW, encoding="utf-8")
    (src / "settings.py").write_text(SETTINGS, encoding="utf-8")
    return src / "flow.py"


def _expected(lr: float = 0.2, shift: int = 2, scale: int = 10, offset: int = 100) -> tuple:
    xs = [i * lr for i in range(3)]
    return [(x + shift) * scale for x in xs], [x + offset for x in xs], 4


# (the edit, the file it is in, the result after it, the tasks it runs again)
VALUE_EDITS = [
    ("BASE = 0.1", "BASE = 0.5", "flow.py", _expected(lr=1.0), {"make", "scale", "offset"}),
    ('CONFIG["shift"] += 1', 'CONFIG["shift"] += 5', "flow.py", _expected(shift=6), {"scale"}),
    ("SCALE = 10", "SCALE = 7", "settings.py", _expected(scale=7), {"scale"}),
    ("OFFSET = 100", "OFFSET = 50", "settings.py", _expected(offset=50), {"offset"}),
]


def test_the_compiler_records_the_module_level_values_each_task_reads(tmp_path: Path) -> None:
    graph = compile_file(_values_project(tmp_path))
    assert graph.node("make").attrs["code.reaches"] == ["flow:LR"]
    assert graph.node("scale").attrs["code.reaches"] == ["flow:CONFIG", "flow:shifted", "settings:SCALE"]
    assert graph.node("offset").attrs["code.reaches"] == ["settings:OFFSET"]
    assert "code.reaches" not in graph.node("untouched").attrs
    assert "settings" in graph.modules


def test_the_definition_of_a_value_covers_the_values_it_is_built_from(tmp_path: Path) -> None:
    from dagc.runtime.code import definitions

    path = tmp_path / "m.py"
    digests = []
    for text in ("BASE = 1\nLR = BASE * 2\n", "BASE = 2\nLR = BASE * 2\n", "BASE = 2\nLR = BASE * 2\nLR += 1\n",
                 "BASE = 2\nLR = BASE * 2\nLR += 1\nif True:\n    OTHER = 3\n"):
        path.write_text(text, encoding="utf-8")
        found = definitions(str(path), path.stat().st_mtime_ns + len(digests), path.stat().st_size)
        digests.append(found["LR"])
    assert digests[0] != digests[1] != digests[2]
    assert digests[2] == digests[3]  # a value it does not read changes nothing
    assert found["OTHER"]


@pytest.mark.parametrize("how", ["--cache", "--resume"])
def test_local_editing_a_module_level_value_recomputes_its_readers(tmp_path: Path, how: str) -> None:
    script = _values_project(tmp_path)
    program = tmp_path / "p_local.py"
    program.write_text(emit(compile_file(script), "local", program))
    store = tmp_path / "store"
    for k, (before, after, file, expected, again) in enumerate(VALUE_EDITS):
        target = script.parent / file
        run_dir = tmp_path / f"run{k}"
        argv = ["--cache", str(store), "--run-dir", str(run_dir)] if how == "--cache" else ["--resume", str(store)]
        if k == 0 or how == "--cache":
            first = ["--cache", str(store)] if how == "--cache" else ["--run-dir", str(store)]
            run_python([str(program), *first, "--result", str(tmp_path / "a.pkl")], check=True, timeout=120)
        target.write_text(target.read_text(encoding="utf-8").replace(before, after), encoding="utf-8")
        result = tmp_path / f"r{k}.pkl"
        proc = run_python([str(program), *argv, "--result", str(result)], capture_output=True, text=True,
                          timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert pickle.loads(result.read_bytes()) == expected, (before, after)
        events = run_dir if how == "--cache" else store
        ran = {e["task"] for e in read_events(events / "events.jsonl", event="end")
               if e["run"] == read_events(events / "events.jsonl", event="run_start")[-1]["run"]}
        assert ran == again, (before, after)
        target.write_text(target.read_text(encoding="utf-8").replace(after, before), encoding="utf-8")
        if how == "--resume":  # the value back as it was: the next resume starts from the first state again
            run_python([str(program), "--resume", str(store)], check=True, timeout=120)


@pytest.mark.slow
def test_ray_and_torch_editing_a_module_level_value_recomputes_its_readers(tmp_path: Path, ray_cluster) -> None:
    script = _values_project(tmp_path)
    settings = script.parent / "settings.py"
    program = tmp_path / "p_ray.py"
    program.write_text(emit(compile_file(script, cluster=parse_cluster_spec("2")), "ray", program))
    torch_program = _torch_program(script, "p", {}, tmp_path / "p_torch.py", split=("scale", "offset"))
    for name, run in ray_and_torch(program, torch_program, ray_cluster.address, tmp_path):
        settings.write_text(SETTINGS, encoding="utf-8")
        cache = tmp_path / f"cache_{name}"
        ok(run(["--cache", str(cache), "--result", str(tmp_path / f"{name}_a.pkl")]))
        assert pickle.loads((tmp_path / f"{name}_a.pkl").read_bytes()) == _expected()
        settings.write_text(SETTINGS.replace("SCALE = 10", "SCALE = 7"), encoding="utf-8")
        run_dir = tmp_path / f"run_{name}"
        ok(run(["--cache", str(cache), "--run-dir", str(run_dir), "--result", str(tmp_path / f"{name}_b.pkl")]))
        assert pickle.loads((tmp_path / f"{name}_b.pkl").read_bytes()) == _expected(scale=7)
        assert set(_ran(run_dir)) == {"scale"}
