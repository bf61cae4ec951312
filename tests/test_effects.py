"""Effects and state: what dagc infers a task may change, and that every backend keeps plain Python's
results for code that updates arguments in place, shares objects between tasks, or draws random
numbers (docs/ir.md, "Effects and state")."""

from __future__ import annotations

import pickle
import random
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dagc.backends import emit
from dagc.cluster import parse_cluster_spec
from dagc.diagnostics import DiagnosticSink
from dagc.driver import compile_file
from dagc.frontend.effects import EffectAnalyzer, Effects
from dagc.frontend.modules import Project
from dagc.ir.effects import state_groups
from tests.engines import each_form_equals
from tests.interpreters import run_python
from tests.property import examples
from tests.test_backend_local import _plain_result, _ruff_clean

HEAD = "import random\nimport dagc\n\n"


def _write(tmp_path: Path, source: str, name: str = "m.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


def effects_of(tmp_path: Path, source: str) -> dict[str, Effects]:
    path = _write(tmp_path, HEAD + textwrap.dedent(source))
    project = Project(path, DiagnosticSink())
    info = project.load_entry()
    assert info is not None
    analyzer = EffectAnalyzer(project)
    return {name: analyzer.of_task(task) for name, task in info.tasks.items()}


# ---- inference ------------------------------------------------------------------------------------
def test_in_place_training_step_mutates_model_and_optimizer(tmp_path: Path) -> None:
    found = effects_of(tmp_path, """
        @dagc.task
        def train(model, optimizer, loader, epoch: int) -> None:
            model.train()
            for x, y in loader:
                optimizer.zero_grad()
                loss = ((model(x) - y) ** 2).mean()
                loss.backward()
                optimizer.step()
    """)
    assert {"model", "optimizer"} <= set(found["train"].mutates)
    assert "epoch" not in found["train"].mutates  # an int cannot change in place
    assert found["train"].definite["model"].reason == "calls `.train()` on `model`"


@pytest.mark.parametrize("body, param", [
    ("log.append(1)", "log"),
    ("log['k'] = 1", "log"),
    ("log.attr = 1", "log"),
    ("del log[0]", "log"),
    ("log += [1]", "log"),
    ("setattr(log, 'x', 1)", "log"),
    ("first = log[0]\nfirst.append(2)", "log"),
    ("for item in log:\n    item.clear()", "log"),
    ("log.fill_(0)", "log"),
    ("log.set_epoch(3)", "log"),
    ("log.sort()", "log"),
    ("log.fit([[1]], [1])", "log"),
    ("log.drop(columns=['a'], inplace=True)", "log"),
    ("log.normal(size=3)", "log"),  # a generator passed in: each draw advances it
    ("import random\nrandom.Random(0).shuffle(log)", "log"),
])
def test_evidence_of_mutation(tmp_path: Path, body: str, param: str) -> None:
    found = effects_of(tmp_path, "@dagc.task\ndef change(log, other):\n" + textwrap.indent(body, "    ") + "\n")
    assert param in found["change"].mutates
    assert "other" not in found["change"].mutates


@pytest.mark.parametrize("body", [
    "return len(log) + sum(log)",
    "return sorted(log)[0]",
    "copy = dict(log)\ncopy['k'] = 1\nreturn copy",
    "new = list(log)\nnew.append(1)\nreturn new",
    "return [x * 2 for x in log]",
    "return {k: v for k, v in log.items()}",
    "return log.get('k', 0)",
    "import json\nreturn json.dumps(log)",
    # a library call reads its arguments unless its metadata says otherwise (the run-time check is the backstop)
    "return unknown_library_call(log)",
    "return log.some_method_dagc_does_not_know()",
    "import pandas as pd\nreturn pd.json_normalize(log)",
    "return log.drop(columns=['a'])",
    "return log.drop(columns=['a'], inplace=False)",
    "return log.to_json()",
    "return log.predict([[1]])",
])
def test_read_only_bodies_mutate_nothing(tmp_path: Path, body: str) -> None:
    found = effects_of(tmp_path, "@dagc.task\ndef read(log):\n" + textwrap.indent(body, "    ") + "\n")
    assert not found["read"].mutates


def test_helpers_and_user_classes_are_analysed(tmp_path: Path) -> None:
    found = effects_of(tmp_path, """
        def _push(xs, v):
            xs.append(v)

        def _peek(xs):
            return xs[-1]

        @dagc.task
        def push(log, other):
            _push(log, 1)
            return _peek(other)
    """)
    assert set(found["push"].mutates) == {"log"}


def test_module_state_and_the_world(tmp_path: Path) -> None:
    found = effects_of(tmp_path, """
        HISTORY = []

        @dagc.task
        def record(x: int) -> None:
            HISTORY.append(x)

        @dagc.task
        def count() -> int:
            return len(HISTORY)

        @dagc.task
        def shout(x: int) -> None:
            print(x)

        @dagc.task
        def quiet(x: int) -> str:
            return str(x)
    """)
    assert set(found["record"].globals_written) == {"m.HISTORY"}
    assert found["count"].globals_read == {"m.HISTORY"} and not found["count"].globals_written
    # printing is an output channel: kept, but not state and not an action on the world
    assert found["shout"].output is not None and found["shout"].world is None and found["quiet"].output is None
    assert found["quiet"].is_pure


def test_file_reads_and_writes(tmp_path: Path) -> None:
    found = effects_of(tmp_path, """
        import json
        import pathlib
        import torch

        def _dump(obj, path):
            with open(path, "w") as f:
                json.dump(obj, f)

        @dagc.task
        def reads(path: str) -> str:
            with open(path) as f:
                return f.read()

        @dagc.task
        def reads_binary(path: str) -> bytes:
            return open(path, mode="rb").read()

        @dagc.task
        def saves(model, path: str) -> None:
            torch.save(model, path)

        @dagc.task
        def writes_text(path: str) -> None:
            pathlib.Path(path).write_text("x")

        @dagc.task
        def appends(path: str, mode: str) -> None:
            open(path, mode).close()

        @dagc.task
        def through_helper(path: str) -> None:
            _dump({"a": 1}, path)

        @dagc.task
        def no_files(x: int) -> int:
            return x + 1
    """)
    def mode(name: str) -> str | None:
        e = found[name]
        return "write" if e.file_write else "read" if e.file_read else None

    assert {name: mode(name) for name in found} == {
        "reads": "read", "reads_binary": "read", "saves": "write", "writes_text": "write",
        "appends": "write",  # a mode dagc cannot read is a write
        "through_helper": "write", "no_files": None}


def test_files_order_writers_and_readers_not_readers_among_themselves(tmp_path: Path) -> None:
    path = _write(tmp_path, HEAD + textwrap.dedent("""
        @dagc.task
        def save(path: str, v: int) -> None:
            with open(path, "w") as f:
                f.write(str(v))

        @dagc.task
        def load(path: str) -> int:
            with open(path) as f:
                return int(f.read())

        @dagc.pipeline
        def p(path: str = "x.txt"):
            save(path, 1)
            a = load(path)
            b = load(path)
            save(path, 2)
            return a, b, load(path)
    """))
    graph = compile_file(path)
    deps = {n.name: set(n.deps) for n in graph}
    assert deps == {"save": set(), "load": {"save"}, "load.1": {"save"}, "save.1": {"load", "load.1"},
                    "load.2": {"save.1"}}


def test_global_random_generators(tmp_path: Path) -> None:
    found = effects_of(tmp_path, """
        import numpy as np
        import torch

        @dagc.task
        def flip() -> int:
            return random.randint(0, 1)

        @dagc.task
        def seeded(seed: int) -> float:
            random.seed(seed)
            return random.random()

        @dagc.task
        def own_generator(seed: int) -> float:
            return float(torch.randn(2, generator=torch.Generator().manual_seed(seed)).sum())

        @dagc.task
        def numpy_draw() -> float:
            return float(np.random.rand())

        @dagc.task
        def init_layer() -> dict:
            return torch.nn.Linear(2, 2).state_dict()
    """)
    assert found["flip"].rng is not None and not found["flip"].seeds
    assert found["seeded"].rng is not None and found["seeded"].seeds
    assert found["own_generator"].rng is None
    assert found["numpy_draw"].rng is not None
    assert found["init_layer"].rng is not None


def test_declarations_relax_and_are_checked(tmp_path: Path) -> None:
    path = _write(tmp_path, HEAD + textwrap.dedent("""
        @dagc.task
        def load() -> list:
            return [1]

        @dagc.task(readonly=["data"])
        def peek(data, log):
            unknown(data)
            log.append(1)

        @dagc.task(readonly=["data"])
        def lies(data):
            data.append(2)

        @dagc.pipeline
        def p():
            d = load()
            log = load()
            peek(d, log)
            lies(d)
            return d, log
    """))
    compilation = compile_file(path, details=True, passes="verify")
    graph = compilation.graph
    assert graph.node("peek").attributes()["effects.mutates"] == ["load.1"]  # not `load`: declared readonly
    assert "effects.mutates" not in graph.node("lies").attributes()  # trusted, but...
    warnings = [(d.code, d.span.line) for d in compilation.warnings]
    assert warnings == [("DAGC155", 16),  # ...the certain change is reported at its line,
                        ("DAGC151", 23)]  # and the call, now without effects, at the call


# ---- what the passes may do ---------------------------------------------------------------------------
def test_in_place_updates_are_kept_and_ordered(tmp_path: Path) -> None:
    path = _write(tmp_path, HEAD + textwrap.dedent("""
        @dagc.task
        def build() -> dict:
            return {"w": 0}

        @dagc.task
        def train(model, epoch: int):
            model["w"] += epoch

        @dagc.task
        def evaluate(model) -> int:
            return model["w"]

        @dagc.pipeline
        def p(epochs: int = 3):
            model = build()
            for e in range(epochs):
                train(model, e)
            return evaluate(model)
    """))
    compilation = compile_file(path, details=True)
    graph = compilation.graph
    assert [n.name for n in graph] == ["build", "train[0]", "train[1]", "train[2]", "evaluate"]
    assert graph.node("train[1]").deps == ("train[0]",)
    assert "train[2]" in graph.node("evaluate").deps
    assert not compilation.warnings  # a task that returns None and updates its argument is the common case


SHARED_PIPELINE_OBJECTS = HEAD + """
@dagc.task
def push(xs: list, v: int) -> None:
    xs.append(v)

@dagc.task
def push_into(d: dict) -> None:
    d["k"].append(9)

@dagc.task
def n() -> int:
    return 3
"""


@pytest.mark.parametrize("body, text, line", [
    ('d = {"k": []}\n    push(d["k"], 1)\n    return d', "`d['k']` is part of an object built in the pipeline", 2),
    ('k = []\n    d = {"k": k}\n    push(k, 1)\n    return d', "`k` shares a list or dict with `d`", 3),
    ('k = []\n    d = {"k": k, "n": n()}\n    push(k, 1)\n    return d', "`k` shares a list or dict with `d`", 3),
    ('k = []\n    d = {"k": k}\n    push_into(d)\n    return k', "`d` shares a list or dict with `k`", 3),
])
def test_changing_an_object_other_pipeline_objects_hold_is_refused(tmp_path: Path, body: str, text: str,
                                                                   line: int) -> None:
    """Plain Python would show the change through the other holder; dagc would keep a copy there."""
    from dagc.diagnostics import CompileError

    path = _write(tmp_path, SHARED_PIPELINE_OBJECTS + "\n@dagc.pipeline\ndef p():\n    " + body + "\n")
    first = SHARED_PIPELINE_OBJECTS.count("\n") + 4
    with pytest.raises(CompileError) as caught:
        compile_file(path)
    (error,) = [d for d in caught.value.diagnostics if d.severity == "error"]
    assert error.code == "DAGC154" and text in error.message and error.span.line == first + line - 1
    assert "build the object in a task" in (error.hint or "")


@pytest.mark.parametrize("body, text", [
    ("log_metric(1.0)\n    return HISTORY", "the pipeline reads module-level `HISTORY`, which task `log_metric` changes"),
    ("push(HISTORY, 3)\n    return 0", "`HISTORY` is module-level `m.HISTORY`, and `push` changes it in place"),
])
def test_module_level_objects_changed_at_run_time_are_refused(tmp_path: Path, body: str, text: str) -> None:
    """The pipeline body reads module-level names when compiling; plain Python reads them when it runs."""
    from dagc.diagnostics import CompileError

    source = SHARED_PIPELINE_OBJECTS + textwrap.dedent("""
        HISTORY = []

        @dagc.task
        def log_metric(x: float) -> None:
            HISTORY.append(x)
    """) + "\n@dagc.pipeline\ndef p():\n    " + body + "\n"
    path = _write(tmp_path, source)
    with pytest.raises(CompileError) as caught:
        compile_file(path)
    (error,) = [d for d in caught.value.diagnostics if d.severity == "error"]
    assert error.code == "DAGC154" and text in error.message, error.message
    assert error.span.line == source.count("\n") - (0 if "return HISTORY" in body else 1)


def test_objects_written_at_the_call_or_held_by_one_name_are_fine(tmp_path: Path) -> None:
    path = _write(tmp_path, SHARED_PIPELINE_OBJECTS + textwrap.dedent("""
        @dagc.pipeline
        def p():
            push([5], 1)         # nobody else sees this list: the call may go
            xs = []
            push(xs, 2)
            push(xs, 3)
            d = {"k": []}
            push_into(d)
            return xs, d
    """))
    graph = compile_file(path)
    program = tmp_path / "p_local.py"
    program.write_text(emit(graph, "local", program))
    run_python([str(program), "--result", str(tmp_path / "r.pkl")], check=True, timeout=120)
    assert pickle.loads((tmp_path / "r.pkl").read_bytes()) == _plain_result(path, "p", tmp_path) == ([2, 3],
                                                                                                        {"k": [9]})


def test_cse_merges_only_pure_tasks_and_says_so(tmp_path: Path) -> None:
    source = HEAD + textwrap.dedent("""
        @dagc.task{decorator}
        def flip() -> int:
            return random.randint(0, 1)

        @dagc.pipeline
        def p():
            return [flip(), flip(), flip(), flip()]
    """)
    plain = compile_file(_write(tmp_path, source.format(decorator=""), "a.py"), details=True)
    assert [n.name for n in plain.graph] == ["flip", "flip.1", "flip.2", "flip.3"]
    pure = compile_file(_write(tmp_path, source.format(decorator="(pure=True)"), "b.py"), details=True)
    assert [n.name for n in pure.graph] == ["flip"]
    assert [d.code for d in pure.warnings].count("DAGC153") == 3


def test_cse_keeps_apart_pure_results_that_are_changed_later(tmp_path: Path) -> None:
    path = _write(tmp_path, HEAD + textwrap.dedent("""
        @dagc.task(pure=True)
        def zeros(n: int) -> list:
            return [0] * n

        @dagc.task
        def bump(xs: list) -> None:
            xs[0] += 1

        @dagc.pipeline
        def p():
            a = zeros(3)
            b = zeros(3)
            bump(a)
            c = zeros(2)
            d = zeros(2)
            return a, b, c, d
    """))
    compilation = compile_file(path, details=True)
    assert [n.name for n in compilation.graph] == ["zeros", "zeros.1", "bump", "zeros.2"]  # c and d: merged
    assert [d.code for d in compilation.warnings] == ["DAGC153"]
    program = tmp_path / "p_local.py"
    program.write_text(emit(compilation.graph, "local", program))
    run_python([str(program), "--result", str(tmp_path / "r.pkl")], check=True, timeout=120)
    assert pickle.loads((tmp_path / "r.pkl").read_bytes()) == _plain_result(path, "p", tmp_path) == (
        [1, 0, 0], [0, 0, 0], [0, 0], [0, 0])


def test_discarded_results_and_removals_are_reported(tmp_path: Path) -> None:
    path = _write(tmp_path, HEAD + textwrap.dedent("""
        @dagc.task
        def load() -> list:
            return [1]

        @dagc.task
        def add(log: list) -> None:
            log.append(2)

        @dagc.pipeline
        def p():
            log = load()
            load()
            add(log)
            unused = load()
            return log
    """))
    compilation = compile_file(path, details=True)
    codes = sorted((d.code, d.span.line) for d in compilation.warnings)
    assert codes == [("DAGC151", 16), ("DAGC152", 18)]  # said once per call
    assert [n.name for n in compilation.graph] == ["load", "add"]


def test_state_is_placed_on_one_device(tmp_path: Path) -> None:
    path = _write(tmp_path, HEAD + textwrap.dedent("""
        @dagc.task(cost="1s")
        def new_log() -> list:
            return []

        @dagc.task(cost="1s")
        def add(log: list, x: int) -> None:
            log.append(x)

        @dagc.task(cost="1s", pure=True)
        def work(x: int) -> int:
            return x * 2

        @dagc.pipeline
        def p():
            log = new_log()
            for i in range(4):
                add(log, work(i))
            return log
    """))
    graph = compile_file(path, cluster=parse_cluster_spec("4"))
    (group,) = state_groups(graph)
    assert group.nodes == ["new_log", "add[0]", "add[1]", "add[2]", "add[3]"]
    assert len({graph.node(n).attributes()["partition.device"] for n in group.nodes}) == 1
    assert len({graph.node(f"work[{i}]").attributes()["partition.device"] for i in range(4)}) > 1  # free to spread


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


# ---- copies, forward passes, library metadata ------------------------------------------------------------
@pytest.mark.parametrize("body, changed", [
    ("log = log.copy()\nlog['c'] = 1", False),
    ("import copy\nlog = copy.deepcopy(log)\nlog['a']['b'] = 1", False),
    ("log = dict(log)\nlog['k'] = 1", False),
    ("log = dict(log)\nlog['k'].append(1)", True),  # a shallow copy: its items are still the caller's
    ("log = list(log)\nlog.append(1)", False),
    ("log = log.clone()\nlog.add_(1)", False),
    ("print(len(log))\nlog = log.copy()\nlog['c'] = 1", True),  # (conservative: mentioned before the copy)
    ("log['c'] = 0\nlog = log.copy()", True),  # changed before it was copied
    ("log = log.to('cpu')\nlog.fill_(0)", True),  # not a copy: a module's .to() returns itself
])
def test_a_parameter_rebound_to_a_copy_is_a_new_object(tmp_path: Path, body: str, changed: bool) -> None:
    found = effects_of(tmp_path, "@dagc.task\ndef change(log):\n" + textwrap.indent(body, "    ") + "\n")
    assert ("log" in found["change"].mutates) is changed


def test_a_forward_pass_reads_its_inputs(tmp_path: Path) -> None:
    found = effects_of(tmp_path, """
        @dagc.task
        def evaluate(model, data) -> float:
            model.eval()
            return float(model(data).sum())

        @dagc.task
        def forward(model, data):
            return model(data)
    """)
    assert "data" not in found["evaluate"].mutates and "data" not in found["forward"].mutates
    assert found["evaluate"].mutates["model"].reason == "calls `.eval()` on `model`"
    assert "batch-norm running statistics" in found["forward"].mutates["model"].reason


@pytest.mark.parametrize("body, rng", [
    ("from sklearn.ensemble import RandomForestClassifier\nRandomForestClassifier().fit(x, y)", True),
    ("from sklearn.ensemble import RandomForestClassifier\nRandomForestClassifier(random_state=0).fit(x, y)", False),
    ("from sklearn.ensemble import RandomForestClassifier\nRandomForestClassifier(random_state=None).fit(x, y)", True),
    ("from sklearn.linear_model import LogisticRegression\nLogisticRegression(C=p['C']).fit(x, y)", False),
    ("from sklearn.svm import OneClassSVM\nOneClassSVM().fit(x)", True),  # libsvm: no seed to give
    ("from sklearn.model_selection import train_test_split\ntrain_test_split(x, y)", True),
    ("from sklearn.model_selection import train_test_split\ntrain_test_split(x, y, random_state=3)", False),
    ("import numpy as np\nnp.random.permutation(5)", True),
    ("import numpy as np\nnp.random.default_rng(0).permutation(5)", False),
])
def test_scikit_learn_and_numpy_draws_follow_their_metadata(tmp_path: Path, body: str, rng: bool) -> None:
    found = effects_of(tmp_path, "@dagc.task\ndef fit(x, y, p):\n" + textwrap.indent(body, "    ") + "\n")
    assert (found["fit"].rng is not None) is rng
    assert not found["fit"].mutates and found["fit"].world is None  # reads x, y and its hyperparameters


@pytest.mark.parametrize("body, changed", [
    ("import numpy as np\nnp.add(x, 1, out=x)", {"x"}),
    ("import numpy as np\nnp.copyto(x, y)", {"x"}),
    ("import numpy as np\nreturn np.add(x, y)", set()),
    ("import heapq\nheapq.heappush(x, 1)", {"x"}),
    ("import pandas as pd\nreturn pd.concat([x, y])", set()),
    ("x.sort_values('a', inplace=True)", {"x"}),
    ("return x.sort_values('a')", set()),
    ("x.pop('a')", {"x"}),
    ("x.update(y)", {"x"}),
    ("return x.merge(y, on='k')", set()),
])
def test_numpy_pandas_and_the_standard_library_change_what_their_metadata_says(
        tmp_path: Path, body: str, changed: set[str]) -> None:
    found = effects_of(tmp_path, "@dagc.task\ndef f(x, y):\n" + textwrap.indent(body, "    ") + "\n")
    assert set(found["f"].mutates) == changed
    assert found["f"].world is None


def test_an_immutable_result_is_never_state(tmp_path: Path) -> None:
    script = _write(tmp_path, HEAD + textwrap.dedent("""
        from pathlib import Path

        @dagc.task
        def base() -> str:
            return "http://example.com/"

        @dagc.task
        def root() -> Path:
            return Path("/tmp")

        @dagc.task
        def fetch(url, i: int) -> str:
            url += str(i)  # rebinds a str: changes nothing the caller holds
            return url

        @dagc.task
        def under(root, name: str) -> str:
            root /= name
            return str(root)

        @dagc.pipeline
        def p():
            b = base()
            r = root()
            return [fetch(b, i) for i in range(4)], under(r, "a"), under(r, "b")
    """))
    graph = compile_file(script)
    assert not state_groups(graph)
    assert not any(n.attributes().get("effects.mutates") for n in graph)


@pytest.mark.parametrize("body, rng, depends", [
    ("from sklearn.svm import SVC\nSVC(gamma=0.1).fit(x, y)", True, False),  # libsvm's draw: probability only
    ("from sklearn.svm import SVC\nSVC(probability=True).fit(x, y)", True, True),
    ("from sklearn.model_selection import train_test_split\ntrain_test_split(x, y, shuffle=False)", False, False),
    ("from sklearn.ensemble import RandomForestClassifier\nRandomForestClassifier().fit(x, y)", True, True),
])
def test_a_draw_that_decides_nothing_only_advances_the_generator(tmp_path: Path, body: str, rng: bool,
                                                                  depends: bool) -> None:
    found = effects_of(tmp_path, "@dagc.task\ndef fit(x, y):\n" + textwrap.indent(body, "    ") + "\n")
    assert (found["fit"].rng is not None) is rng
    assert found["fit"].rng_depends is depends


def test_trainings_that_only_advance_the_generator_run_anywhere(tmp_path: Path) -> None:
    script = _write(tmp_path, HEAD + textwrap.dedent("""
        import numpy as np
        from sklearn.svm import SVC
        from sklearn.ensemble import RandomForestClassifier

        @dagc.task
        def data(n: int) -> tuple:
            rng = np.random.default_rng(0)
            x = rng.random((n, 3))
            return x, (x[:, 0] > 0.5).astype(int)

        @dagc.task
        def svc(d: tuple, gamma: float) -> float:
            return float(SVC(gamma=gamma).fit(*d).score(*d))

        @dagc.task
        def forest(d: tuple) -> float:
            return float(RandomForestClassifier(n_estimators=5).fit(*d).score(*d))

        @dagc.pipeline
        def p(with_forest: bool = False):
            d = data(40)
            scores = [svc(d, g) for g in (0.1, 1.0, 10.0)]
            if with_forest:
                scores.append(forest(d))
            return scores
    """))
    assert not state_groups(compile_file(script))
    # a task whose result depends on the draws: the SVC fits before it change what it draws, in plain Python's order
    (group,) = state_groups(compile_file(script, params={"with_forest": True}))
    assert group.name == "rng:global" and group.nodes == ["svc[0]", "svc[1]", "svc[2]", "forest"]


JOINED = '''\
import pandas as pd

import dagc


@dagc.task
def load(n: int) -> pd.DataFrame:
    return pd.DataFrame({"id": list(range(n)), "v": ["1%"] * n})


@dagc.task
def clean(df: pd.DataFrame) -> pd.DataFrame:
    df["v"] = df["v"].str.rstrip("%").astype(float)
    return df


@dagc.task
def join(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    return a.merge(b, on="id")


@dagc.pipeline
def p(n: int = 3):
    return join(clean(load(n)), clean(load(n + 1)))
'''


def test_a_task_joining_two_changed_objects_is_explained_at_its_call(tmp_path: Path) -> None:
    from dagc.frontend import compile_source

    script = _write(tmp_path, JOINED)
    (found,) = [d for d in compile_source(script).sink.diagnostics if d.code == "DAGC159"]
    assert "`join` reads objects that `clean` and `clean.1` change in place" in found.message
    assert found.span.line == 24 and "copy()" in (found.hint or "")
    assert [n.message.split(":")[0] for n in found.notes] == ["`clean` changes its argument `df` in place",
                                                             "`clean.1` changes its argument `df` in place"]
    # each cleaning made its own: the two run side by side, and nothing is said
    script.write_text(JOINED.replace('    df["v"] =', '    df = df.copy()\n    df["v"] ='), encoding="utf-8")
    assert not [d for d in compile_source(script).sink.diagnostics if d.code == "DAGC159"]
    assert not state_groups(compile_file(script))


LOADERS = '''\
import torch
from torch.utils.data import DataLoader, TensorDataset

import dagc


@dagc.task
def make_loader(n: int):
    return DataLoader(TensorDataset(torch.arange(n, dtype=torch.float32).unsqueeze(1)), batch_size=2, shuffle=True)


@dagc.task
def annotated_loader(n: int) -> DataLoader:
    return DataLoader(TensorDataset(torch.zeros(n, 1)), batch_size=2)


@dagc.task
def test(model, device, test_loader):  # as pytorch/examples write it: no annotations
    return sum(float(x.sum()) for (x,) in test_loader)


@dagc.task
def count(items) -> int:
    return sum(1 for _ in items)


@dagc.pipeline
def p():
    return test(None, "cpu", make_loader(6)), test(None, "cpu", annotated_loader(4)), count([1, 2])
'''


def test_an_unannotated_parameter_takes_the_type_of_what_the_call_passes(tmp_path: Path) -> None:
    graph = compile_file(_write(tmp_path, LOADERS))
    for name in ("test", "test.1"):  # the loader's type: from the producer's annotation, or the class it returns
        assert "(a DataLoader) draws a seed" in graph.node(name).attributes().get("effects.rng", ""), name
    assert "effects.rng" not in graph.node("count").attributes()  # a literal list: no type, nothing drawn
    (group,) = state_groups(graph)
    assert group.name == "rng:global" and group.nodes == ["test", "test.1"]


# ---- a property over random mixes of library calls whose effects the libraries' metadata gives ------------
# (statement, parameters it changes, whether it depends on the global generator); each reads or writes the
# parameters directly, so a body of several changes exactly the union, and draws when any one does
LIBRARY_CALLS = [
    ("frame.sort_values('a', inplace=True)", {"frame"}, False),
    ("frame.drop(columns=['a'], inplace=False)", set(), False),
    ("frame.pop('a')", {"frame"}, False),
    ("out = frame.merge(table, on='a')\nout['z'] = 1", set(), False),
    ("copy = frame.copy()\ncopy['c'] = 1", set(), False),
    ("pd.concat([frame, table]).reset_index(drop=True)", set(), False),
    ("pd.json_normalize(rows)", set(), False),
    ("np.add(arr, 1, out=arr)", {"arr"}, False),
    ("np.copyto(arr, 0)", {"arr"}, False),
    ("np.sort(arr)", set(), False),
    ("arr.sort()", {"arr"}, False),
    ("arr.mean()", set(), False),
    ("heapq.heappush(rows, 1)", {"rows"}, False),
    ("sorted(rows)", set(), False),
    ("model.fit(arr, arr)", {"model"}, False),
    ("model.predict(arr)", set(), False),
    ("model.set_params(C=1.0)", {"model"}, False),
    ("gen.normal(size=2)", {"gen"}, False),
    ("np.random.rand(2)", set(), True),
    ("train_test_split(frame, random_state=0)", set(), False),
    ("train_test_split(frame)", set(), True),
    ("RandomForestClassifier(random_state=1).fit(arr, arr)", set(), False),
    ("SVC().fit(arr, arr)", set(), False),  # draws, but only advances the generator
    ("list(csv.reader(io.StringIO(text)))", set(), False),
    ("json.dumps(rows)", set(), False),
]
LIBRARY_HEAD = '''\
import csv
import heapq
import io
import json

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import train_test_split
from sklearn.svm import SVC

import dagc


@dagc.task
def t(frame: pd.DataFrame, table: pd.DataFrame, arr: np.ndarray, rows, model, gen, text: str):
'''


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(range(len(LIBRARY_CALLS))), min_size=1, max_size=6))
def test_random_mixes_of_library_calls_have_the_effects_their_metadata_gives(tmp_path: Path, picks: list[int]) -> None:
    body = "".join(textwrap.indent(LIBRARY_CALLS[k][0], "    ") + "\n" for k in picks)
    found = effects_of(tmp_path, LIBRARY_HEAD + body)["t"]
    changed = set().union(*(LIBRARY_CALLS[k][1] for k in picks))
    assert set(found.mutates) == changed, body
    assert (found.rng is not None and found.rng_depends) is any(LIBRARY_CALLS[k][2] for k in picks), body
    assert found.world is None, body


WRITES = '''\
import os

import dagc


@dagc.task
def save(rows: list, name: str) -> None:
    with open(os.path.join(os.environ.get("OUT", "/tmp"), name + ".csv"), "w") as f:
        f.write(",".join(map(str, rows)))


@dagc.task(reads=["/tmp/{name}.csv"])
def load(name: str) -> str:
    with open(os.path.join("/tmp", name + ".csv")) as f:
        return f.read()


@dagc.pipeline
def p():
    save([1, 2], "a")
    save([3, 4], "b")
    return load("a")
'''


def test_an_ordering_by_files_is_explained_and_declared_paths_free_it(tmp_path: Path) -> None:
    from dagc.frontend import compile_source

    script = _write(tmp_path, WRITES)
    (found,) = [d for d in compile_source(script).sink.diagnostics if d.code == "DAGC164"]
    assert "`save` writes files whose paths dagc cannot name at this call" in found.message
    assert "(`save.1`, `load`)" in found.message and "writes=[...]" in (found.hint or "")
    assert compile_file(script).node("save.1").deps == ("save",)
    script.write_text(WRITES.replace('@dagc.task\ndef save', '@dagc.task(writes=["/tmp/{name}.csv"])\ndef save'),
                      encoding="utf-8")
    assert not [d for d in compile_source(script).sink.diagnostics if d.code == "DAGC164"]
    graph = compile_file(script)
    assert graph.node("save.1").deps == () and graph.node("load").deps == ("save",)  # only the file it reads


# ---- what a review of the library model found: each case really changes what the plain run sees -------------
@pytest.mark.parametrize("body, changed", [
    ("cfg = dict(cfg)\ncfg = cfg['model']\ncfg['lr'] = 99.0", True),  # an item of a shallow copy is the caller's
    ("from collections import deque\ncfg.appendleft(1)", True),
    ("cfg.rotate(1)", True),
    ("cfg.move_to_end('a')", True),
    ("cfg.difference_update({1})", True),
    ("import numpy as np\nnp.nan_to_num(cfg, copy=False)", True),
    ("import numpy as np\nnp.add.at(cfg, [0], 1)", True),
    ("import numpy as np\nreturn np.nan_to_num(cfg)", False),
])
def test_changes_the_library_model_must_not_miss(tmp_path: Path, body: str, changed: bool) -> None:
    found = effects_of(tmp_path, "@dagc.task\ndef t(cfg):\n" + textwrap.indent(body, "    ") + "\n")
    assert ("cfg" in found["t"].mutates) is changed


def test_a_container_the_task_stores_an_argument_into_is_not_a_fresh_result(tmp_path: Path) -> None:
    found = effects_of(tmp_path, """
        @dagc.task
        def wrap(model):
            out = {}
            out["m"] = model
            return out

        @dagc.task
        def collect(models):
            out = []
            for m in models:
                out.append(m)
            return out

        @dagc.task
        def summary(model) -> dict:
            out = {}
            out["n"] = len(model)
            return out
    """)
    assert not found["wrap"].fresh_result and not found["collect"].fresh_result
    assert found["summary"].fresh_result


def test_native_file_readers_act_on_the_world(tmp_path: Path) -> None:
    found = effects_of(tmp_path, """
        @dagc.task
        def load(db: str) -> int:
            import sqlite3
            return sqlite3.connect(db).execute("select 1").fetchone()[0]
    """)
    assert found["load"].world is not None and "native code" in found["load"].world.reason


def test_a_library_reader_given_a_file_opened_at_the_call_reads_that_file(tmp_path: Path) -> None:
    found = effects_of(tmp_path, """
        import json
        import pickle

        import numpy as np
        import torch

        @dagc.task
        def load(meta: str, weights: str, array: str) -> tuple:
            return json.load(open(meta)), pickle.load(open(weights, "rb")), torch.load(array), np.load(array)

        @dagc.task
        def dump(x: dict, path: str) -> None:
            json.dump(x, open(path, "w"))
    """)
    load, dump = found["load"], found["dump"]
    assert load.world is None and load.file_write is None and load.file_paths_known  # a read, of named files
    assert load.file_paths["read"] == {"param:meta", "param:weights", "param:array"}
    assert dump.world is not None and dump.file_paths_known and dump.file_paths["write"] == {"param:path"}


def test_a_path_opened_to_read_is_a_read_and_opened_otherwise_a_write(tmp_path: Path) -> None:
    found = effects_of(tmp_path, """
        from pathlib import Path

        @dagc.task
        def load(path: str) -> bytes:
            with Path(path).open("rb") as f:
                head = f.read(4)
            return head + Path(path).open().read().encode() + Path(path).open(mode="r", encoding="utf-8").read().encode()

        @dagc.task
        def save(path: str, text: str) -> None:
            with Path(path).open("w") as f:
                f.write(text)
    """)
    load, save = found["load"], found["save"]
    assert load.file_write is None and load.file_paths_known and load.file_paths["read"] == {"param:path"}
    assert save.file_write is not None and save.file_paths["write"] == {"param:path"}


def test_a_task_ordered_after_one_that_acts_on_the_world_is_not_cached(tmp_path: Path) -> None:
    from dagc.backends.fingerprint import task_rows

    script = _write(tmp_path, HEAD + textwrap.dedent("""
        import shutil

        @dagc.task
        def write() -> None:
            shutil.copy("src.txt", "data.txt")

        @dagc.task
        def read() -> int:
            with open("data.txt") as f:
                return int(f.read())

        @dagc.task
        def consume(x: int) -> int:
            return 10 * x

        @dagc.pipeline
        def p():
            write()
            return consume(read())
    """))
    from dagc.runtime.executor import CONTENT_KEYED

    rows = task_rows(compile_file(script))  # (reused only while their arguments' content is what it was)
    assert rows["read"][3].startswith(f"{CONTENT_KEYED}it runs after `write`")
    assert rows["consume"][3].startswith(f"{CONTENT_KEYED}it reads the output")


def test_a_value_built_from_an_imported_one_or_changed_by_a_module_level_call_is_covered(tmp_path: Path) -> None:
    from dagc.runtime.code import definitions

    (tmp_path / "settings.py").write_text("BASE_LR = 0.1\n", encoding="utf-8")
    script = _write(tmp_path, HEAD + textwrap.dedent("""
        from settings import BASE_LR

        LR = BASE_LR * 2
        CONFIG = {"lr": 1}

        def tweak(cfg, v):
            cfg["lr"] = v

        tweak(CONFIG, 7)

        @dagc.task
        def show() -> float:
            return LR + CONFIG["lr"]

        @dagc.pipeline
        def p():
            return show()
    """))
    assert compile_file(script).node("show").attrs["code.reaches"] == ["m:CONFIG", "m:LR", "settings:BASE_LR"]
    before = definitions(str(script), 1, 1)["CONFIG"]
    script.write_text(script.read_text(encoding="utf-8").replace("tweak(CONFIG, 7)", "tweak(CONFIG, 9)"),
                      encoding="utf-8")
    assert definitions(str(script), 2, 2)["CONFIG"] != before


def test_an_estimator_fit_in_another_task_than_the_one_that_built_it_draws_at_the_fit(tmp_path: Path) -> None:
    """scikit-learn draws at `fit`, not at the constructor: a task fitting an estimator it was given (annotated,
    or the class the task that built it returns) may draw, since it cannot see whether `random_state` was given."""
    script = _write(tmp_path, HEAD + textwrap.dedent("""
        import numpy as np
        from sklearn.ensemble import RandomForestClassifier
        from sklearn.linear_model import LogisticRegression

        @dagc.task
        def make_forest():
            return RandomForestClassifier(n_estimators=5)

        @dagc.task
        def make_linear():
            return LogisticRegression()

        @dagc.task
        def fit(model, x: np.ndarray, y: np.ndarray) -> float:
            return float(model.fit(x, y).score(x, y))

        @dagc.task
        def fit_annotated(model: RandomForestClassifier, x: np.ndarray, y: np.ndarray) -> float:
            model.fit(x, y)
            return float(model.score(x, y))

        @dagc.task
        def data() -> tuple:
            x = np.random.default_rng(0).random((40, 3))
            return x, (x[:, 0] > 0.5).astype(int)

        @dagc.pipeline
        def p():
            x, y = data()
            return fit(make_forest(), x, y), fit(make_linear(), x, y), fit_annotated(make_forest(), x, y)
    """))
    graph = compile_file(script)
    drawing = {n.name for n in graph if n.attributes().get("effects.rng")}
    assert {"fit", "fit_annotated"} <= drawing  # the forest's fits
    assert "fit.1" not in drawing  # a LogisticRegression fit draws nothing
    assert "fits `model`" in graph.node("fit_annotated").attributes()["effects.rng"]
