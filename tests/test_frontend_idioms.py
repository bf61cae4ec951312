"""The forms real training code is written in (pytorch/examples, nanoGPT, Metaflow, Kubeflow):
each one is accepted (and then the local program computes what plain Python computes) or
diagnosed at the right line with a hint that shows the accepted form."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from dagc.backends import emit
from dagc.diagnostics import Diagnostic
from dagc.driver import compile_file
from dagc.frontend import compile_source
from tests.conftest import run_dagc
from tests.interpreters import run_python
from tests.test_backend_local import _plain_result, _ruff_clean


def _diagnostics(write_project, source: str, **kw: object) -> list[Diagnostic]:
    root = write_project({"flow.py": source})
    return compile_source(root / "flow.py", **kw).sink.sorted()  # type: ignore[arg-type]


def _only(diagnostics: list[Diagnostic], code: str) -> Diagnostic:
    found = [d for d in diagnostics if d.code == code]
    assert len(found) == 1, [(d.code, d.message) for d in diagnostics]
    return found[0]


def _line(source: str, text: str) -> int:
    """The line of `text` in the file written from `source` (write_project drops leading newlines)."""
    body = source.lstrip("\n")
    return body.count("\n", 0, body.index(text)) + 1


def _errors(diagnostics: list[Diagnostic]) -> list[tuple[str, int | None]]:
    return [(d.code, d.span.line if d.span else None) for d in diagnostics if d.is_error]


def _local_equals_plain(write_project, tmp_path: Path, source: str, files: dict[str, str] | None = None,
                        pipeline: str | None = None, **params: object) -> object:
    """Compile `source`, run its local program, and check the result against the plain run."""
    root = write_project({"flow.py": source, **(files or {})})
    graph = compile_file(root / "flow.py", pipeline_name=pipeline, params=params or None)
    program = tmp_path / "prog" / "flow_local.py"
    program.parent.mkdir()
    program.write_text(emit(graph, "local", program))
    _ruff_clean(program)
    out = tmp_path / "local.pkl"
    run_python([str(program), "--result", str(out)], check=True, timeout=120)
    local = pickle.loads(out.read_bytes())
    plain = _plain_result(root / "flow.py", graph.name, tmp_path, **params)
    assert local == plain
    return local


# ---- resource units --------------------------------------------------------------------------------
UNITS = """
import dagc

@dagc.task(memory="500Mi", cpus="500m", out_size="2Gi")
def small(x: int) -> int:
    return x

@dagc.task(memory=4000)
def big(x: int) -> int:
    return x

@dagc.pipeline
def p():
    return big(small(1))
"""


def test_kubernetes_quantities_and_a_bare_small_memory(write_project) -> None:
    root = write_project({"flow.py": UNITS})
    result = compile_source(root / "flow.py")
    small = result.graph.node("small").options
    assert (small.memory, small.cpus, small.out_size) == (500 * 2**20, 0.5, 2 * 2**30)
    [warning] = result.sink.diagnostics
    assert (warning.code, warning.span.line, warning.is_error) == ("DAGC129", _line(UNITS, "memory=4000"), False)
    assert 'memory="4000MB"' in warning.hint
    bad = _diagnostics(write_project, UNITS.replace('cpus="500m"', 'cpus="half"'))
    assert _errors(bad) == [("DAGC122", _line(UNITS, "@dagc.task(memory=\"500Mi\""))]
    assert "500m" in _only(bad, "DAGC122").hint


# ---- signature hints and Kubeflow's step methods ------------------------------------------------------
SIGNATURE = """
import dagc

@dagc.task
def train(data: list, /, lr: float = 0.1, *, epochs: int = 1, **extra) -> dict:
    return {"n": len(data), "lr": lr, "epochs": epochs, **extra}

@dagc.task
def load(path: str) -> list:
    return [path]

@dagc.pipeline
def p():
    d = load("a")
    return train()
"""


def test_signature_hint_shows_keyword_only_parameters_and_kwargs(write_project) -> None:
    diag = _only(_diagnostics(write_project, SIGNATURE), "DAGC104")
    assert diag.span.line == _line(SIGNATURE, "return train()")
    assert diag.hint == "signature: train(data, /, lr=0.1, *, epochs=1, **extra)"


@pytest.mark.parametrize("line,hint", [
    ("    m = train(d).after(d)", "dagc.after(train(data), prepared)"),
    ("    m = train(d)\n    m.set_memory_limit('4G')", '@dagc.task(memory="4G")'),  # the user's own values
    ("    m = train(d)\n    m.set_cpu_limit('2')", '@dagc.task(cpus="2")'),
])
def test_kubeflow_step_methods_name_the_dagc_form(write_project, line: str, hint: str) -> None:
    source = SIGNATURE.replace("    return train()\n", line + "\n    return d\n")
    diag = _only(_diagnostics(write_project, source), "DAGC107")
    assert "Kubeflow" in diag.message and hint in diag.hint
    assert diag.span.line == _line(source, line.splitlines()[-1])


# ---- statements and exits ------------------------------------------------------------------------------
NESTED = """
import dagc

@dagc.task
def load(path: str) -> list:
    return [path]

@dagc.pipeline
def p():
    import os
    def helper(x):
        return x
    d = load(os.sep)
    return helper(d)
"""


def test_nested_import_and_def_are_one_diagnostic_each(write_project) -> None:
    diagnostics = _diagnostics(write_project, NESTED)
    assert _errors(diagnostics) == [("DAGC108", _line(NESTED, "import os")), ("DAGC108", _line(NESTED, "def helper"))]
    assert "module level" in diagnostics[0].hint


FALSE_BREAK = """
import dagc

DEBUG = False

@dagc.task
def train(m: int) -> int:
    return m + 1

@dagc.task
def converged(m: int) -> bool:
    return m >= 3

@dagc.pipeline
def p(epochs: int = 10):
    m = 0
    for epoch in range(epochs):
        m = train(m)
        if DEBUG and epoch > 1:
            break
        if converged(m):
            break
    return m, epoch
"""


def test_constant_false_break_is_folded_before_counting_exits(write_project, tmp_path: Path) -> None:
    assert _local_equals_plain(write_project, tmp_path, FALSE_BREAK) == (3, 2)


# ---- pipeline parameters -------------------------------------------------------------------------------
PARAMS = """
import dagc

@dagc.task
def train(lr: float, name: str) -> str:
    return f"{name}:{lr}"

@dagc.pipeline
def p(lr: float = 0.1,
      name: str = "run"):
    return train(lr, name)
"""


def test_param_values_are_checked_against_the_annotation_at_the_parameter(write_project) -> None:
    diag = _only(_diagnostics(write_project, PARAMS, params={"lr": "fast"}), "DAGC005")
    assert diag.span.line == _line(PARAMS, "lr: float = 0.1") and "`float`" in diag.message and "literal" in diag.hint
    diag = _only(_diagnostics(write_project, PARAMS, params={"name": 3}), "DAGC005")
    assert diag.span.line == _line(PARAMS, "name: str =")
    assert not _diagnostics(write_project, PARAMS, params={"lr": 1, "name": "x"})  # an int is a float


# ---- dagc check ----------------------------------------------------------------------------------------
def test_check_checks_every_pipeline_in_a_file(write_project) -> None:
    root = write_project({"flows.py": """
        import dagc

        @dagc.task
        def load(path: str) -> list:
            return [path]

        @dagc.pipeline
        def first():
            return load("a")

        @dagc.pipeline
        def second():
            return load("a", "b")

        @dagc.pipeline
        def third():
            return load(missing)
        """})
    proc = run_dagc("check", str(root / "flows.py"))
    assert proc.returncode == 1
    assert "flows.py:13:22: error[DAGC105]" in proc.stderr
    assert "flows.py:17:17: error[DAGC101]" in proc.stderr
    good = root / "good.py"
    good.write_text((root / "flows.py").read_text().replace('"a", "b"', '"b"').replace("missing", '"c"'))
    proc = run_dagc("check", str(good))
    assert proc.returncode == 0, proc.stderr
    assert "3 pipelines" in proc.stderr


# ---- a class of steps (Metaflow's FlowSpec style) -----------------------------------------------------
FLOW_CLASS = """
import dagc


class StatsFlow:
    \"\"\"Steps as static and class methods; the pipeline is a method that calls them in order.\"\"\"

    SCALE = 2

    @dagc.task
    @staticmethod
    def start(n: int) -> list:
        return list(range(n))

    @staticmethod
    @dagc.task(cpus="500m")
    def square(xs: list) -> list:
        return [x * x for x in xs]

    @dagc.task
    @classmethod
    def total(cls, xs: list) -> int:
        return sum(xs) * cls.SCALE

    @dagc.pipeline
    def run(self, n: int = 5):
        xs = self.start(n)
        squares = StatsFlow.square(xs)
        return self.total(squares), len(squares), str(n)
"""


def test_static_and_class_method_tasks_and_a_pipeline_method(write_project, tmp_path: Path) -> None:
    root = write_project({"flow.py": FLOW_CLASS})
    graph = compile_file(root / "flow.py")
    assert graph.name == "StatsFlow.run"
    assert [n.target for n in graph if n.op == "task"] == [
        "flow:StatsFlow.start", "flow:StatsFlow.square", "flow:StatsFlow.total"]
    assert graph.node("square").options.cpus == 0.5
    assert _local_equals_plain(write_project, tmp_path, FLOW_CLASS, n=4) == (28, 4, "4")


METAFLOW_AS_WRITTEN = """
import dagc


class HelloFlow:
    @dagc.task
    def start(self):
        self.x = 1

    @dagc.task
    @staticmethod
    def hello(x: int) -> int:
        return x + 1

    @dagc.pipeline
    def run(self):
        self.next(self.hello)
        self.data = self.hello(1)
        return self.helper()

    def helper(self):
        return 1
"""


def test_metaflow_shapes_are_diagnosed_at_the_line_with_the_dagc_form(write_project) -> None:
    diagnostics = _diagnostics(write_project, METAFLOW_AS_WRITTEN)
    src = METAFLOW_AS_WRITTEN
    assert _errors(diagnostics) == [("DAGC133", _line(src, "def start(self)")), ("DAGC111", _line(src, "self.next(")),
                                    ("DAGC109", _line(src, "self.data =")), ("DAGC111", _line(src, "self.helper()"))]
    start, transition, artifact, helper = [d for d in diagnostics if d.is_error]
    assert "@staticmethod" in start.hint and "instance method" in start.message
    assert "`data = self.start()`" in transition.hint
    assert "returns its value" in artifact.message
    assert "@dagc.task and @staticmethod" in helper.hint


def test_a_flow_without_its_end_step_is_pointed_at(write_project) -> None:
    """A Metaflow flow is a pipeline as written (tests/test_dialect_metaflow.py); one without `end` is told so."""
    source = "from metaflow import FlowSpec, step\n\n\nclass F(FlowSpec):\n    @step\n    def start(self):\n" \
             "        self.next(self.end)\n"
    flow, transition = _diagnostics(write_project, source)
    assert flow.code == "DAGC117" and flow.span is not None and flow.span.line == 4 and "named `end`" in flow.hint
    assert transition.code == "DAGC117" and transition.span is not None and transition.span.line == 7


# ---- configs and constants --------------------------------------------------------------------------
CONFIGS = """
import os
from dataclasses import dataclass, field

import dagc

HERE = os.path.dirname(__file__)
DATA = os.path.join(HERE, "data", "shard.txt")

with open(os.devnull) as _null:
    SEED = 7


@dataclass(frozen=True)
class ModelConfig:
    n_layer: int = 2
    n_head: int = 4


@dataclass
class TrainConfig:
    lr: float = 3e-4
    epochs: int = 2
    tags: list = field(default_factory=list)


BASE = ModelConfig(n_layer=3)


@dagc.task
def build(cfg: ModelConfig, seed: int) -> dict:
    return {"layers": cfg.n_layer, "heads": cfg.n_head, "seed": seed}


@dagc.task
def train(model: dict, tc: TrainConfig, path: str) -> dict:
    tc.tags.append("trained")
    return {**model, "lr": tc.lr, "file": os.path.basename(path), "dir": os.path.basename(os.path.dirname(path))}


@dagc.task
def report(tc: TrainConfig) -> list:
    return list(tc.tags)


@dagc.pipeline
def p(epochs: int = 3):
    tc = TrainConfig(epochs=epochs)
    model = build(BASE, SEED)
    for _ in range(tc.epochs):
        model = train(model, tc, DATA)
    settings = dict(n_layer=BASE.n_layer, lr=tc.lr, sizes=list((1, 2)))
    return model, report(tc), settings, str(model["seed"]), tuple([model["layers"], 1]), len(DATA) > 0
"""


def test_dataclass_configs_stdlib_constants_and_glue_builtins(write_project, tmp_path: Path) -> None:
    result = _local_equals_plain(write_project, tmp_path, CONFIGS, epochs=2)
    model, tags, settings, seed, layers, _ = result
    assert model["layers"] == 3 and model["file"] == "shard.txt" and model["dir"] == "data"
    assert tags == ["trained", "trained"]  # one TrainConfig object, changed by each train() in order
    assert settings == {"n_layer": 3, "lr": 3e-4, "sizes": [1, 2]} and seed == "7" and layers == (3, 1)
    graph = compile_file(write_project({"flow.py": CONFIGS}) / "flow.py")
    configs = [n for n in graph if n.function in ("ModelConfig", "TrainConfig")]
    assert [(n.function, n.options.pure) for n in configs] == [("ModelConfig", True), ("TrainConfig", False)]


@pytest.mark.parametrize("change,code,text,hint", [
    ("    tc = TrainConfig(epoch=3)", "DAGC109", "TrainConfig(epoch=3)", "arguments"),
    ("    tc = TrainConfig(lr=os.getcwd())", "DAGC109", "os.getcwd", "os.path"),
    ("    tc = TrainConfig(lr=os.path.abspath('rel'))", "DAGC109", "os.path.abspath", "arguments"),
])
def test_configs_and_stdlib_calls_that_cannot_be_folded(write_project, change: str, code: str, text: str,
                                                        hint: str) -> None:
    source = CONFIGS.replace("    tc = TrainConfig(epochs=epochs)", change)
    diagnostics = _diagnostics(write_project, source)
    diag = _only(diagnostics, code)
    assert diag.span.line == _line(source, change.strip())
    assert text in ast_text(source, diag) and hint in (diag.hint or "") + diag.message


def ast_text(source: str, diag: Diagnostic) -> str:
    line = source.lstrip("\n").splitlines()[diag.span.line - 1]
    return line[diag.span.col - 1:]


@pytest.mark.parametrize("change", ["BASE.n_layer = 5", "setattr(BASE, 'n_layer', 5)",
                                    "def grow():\n    BASE.__dict__.update(n_layer=5)"])
def test_a_config_changed_in_its_module_is_not_folded(write_project, change: str) -> None:
    source = CONFIGS.replace("@dataclass(frozen=True)", "@dataclass").replace(
        "BASE = ModelConfig(n_layer=3)\n", f"BASE = ModelConfig(n_layer=3)\n{change}\n")
    diagnostics = _diagnostics(write_project, source)
    assert _errors(diagnostics) == [("DAGC109", _line(source, "build(BASE, SEED)")),
                                    ("DAGC109", _line(source, "settings = dict("))]
    assert all("module changes" in d.message and "frozen=True" in d.hint for d in diagnostics)


# ---- run-time configuration (nanoGPT's configurator, argparse, the environment) -------------------------
NANOGPT = """
import os
import sys

import dagc

batch_size = 12
learning_rate = 6e-4
max_iters = 3
config_keys = [k for k, v in globals().items() if not k.startswith("_") and isinstance(v, (int, float, str))]
exec(open(os.path.join(os.path.dirname(__file__), "configurator.py")).read())
config = {k: globals()[k] for k in config_keys}


@dagc.task
def step(i: int, lr: float, bs: int) -> float:
    return i * lr * bs


@dagc.pipeline
def train():
    return [step(i, learning_rate, batch_size) for i in range(max_iters)]
"""


def test_command_line_overrides_are_named_with_what_was_folded(write_project) -> None:
    root = write_project({"flow.py": NANOGPT, "configurator.py": "\n"})
    diagnostics = compile_source(root / "flow.py").sink.sorted()
    diag = _only(diagnostics, "DAGC134")
    assert not diag.is_error and diag.span.line == _line(NANOGPT, "exec(open(")
    assert "batch_size=12, learning_rate=0.0006, max_iters=3" in diag.message
    assert "--param batch_size=VALUE" in diag.hint


@pytest.mark.parametrize("setting,source", [
    ("EPOCHS = int(sys.argv[1]) if len(sys.argv) > 1 else 2", "sys.argv"),
    # (a parser dagc cannot read: one it can is read at compile time, dagc.frontend.arguments)
    ("ARGS = argparse.ArgumentParser(fromfile_prefix_chars='@').parse_args()\nEPOCHS = ARGS.epochs", "argparse"),
    ("EPOCHS = int(os.environ.get('EPOCHS', '2'))", "os.environ"),
])
def test_values_read_when_the_script_runs_are_diagnosed_at_the_use(write_project, setting: str, source: str) -> None:
    text = NANOGPT.replace("exec(open(", "# exec(open(").replace(
        "config = {", f"import argparse\n{setting}\nconfig = {{").replace(
        "range(max_iters)]", "range(EPOCHS)]")
    diag = _only(_diagnostics(write_project, text), "DAGC109")
    assert diag.span.line == _line(text, "range(EPOCHS)") and source in diag.message
    assert "--param EPOCHS=VALUE" in diag.hint


# ---- files written again and again -------------------------------------------------------------------
CHECKPOINTS = """
import os

import dagc


@dagc.task(writes=["{path}"])
def save(path: str, epoch: int) -> int:
    with open(path, "a") as f:
        f.write(f"{epoch}\\n")
    return epoch


@dagc.task(reads=["{path}"])
def last(path: str, epoch: int) -> str:
    with open(path) as f:
        return f.read().split()[-1] + f"@{epoch}"


@dagc.pipeline
def p(out: str = "ckpt.txt"):
    seen = []
    for epoch in range(4):
        save(out, epoch)
        seen.append(last(out, epoch))
    return seen
"""


def test_a_checkpoint_saved_in_a_loop_is_a_chain_of_writes(write_project, tmp_path: Path) -> None:
    root = write_project({"flow.py": CHECKPOINTS})
    graph = compile_file(root / "flow.py", params={"out": str(tmp_path / "compile.txt")})
    for k in range(1, 4):  # each write waits for the previous write and for the read of that version
        assert {f"save[{k - 1}]", f"last[{k - 1}]"} <= set(graph.predecessors(f"save[{k}]"))
        assert f"save[{k}]" in graph.predecessors(f"last[{k}]")
    result = _local_equals_plain(write_project, tmp_path, CHECKPOINTS, out=str(tmp_path / "ckpt.txt"))
    assert result == ["0@0", "1@1", "2@2", "3@3"]


def test_two_independent_writers_stay_an_error(write_project) -> None:
    source = CHECKPOINTS.replace("        save(out, epoch)\n", "        save(out, epoch)\n        save(out, -epoch)\n")
    diag = _only(_diagnostics(write_project, source), "DAGC126")
    assert diag.span.line == _line(source, "save(out, -epoch)")


# ---- effects of method tasks, and the fan-out map regions will take ------------------------------------
METHOD_EFFECTS = """
import dagc


class Trainer:
    @dagc.task
    @staticmethod
    def make() -> dict:
        return {"seen": []}

    @dagc.task
    @staticmethod
    def grow(model: dict, k: int) -> None:
        model["seen"].append(k)

    @dagc.task
    @staticmethod
    def start(n: int) -> list:
        return list(range(n))

    @dagc.task
    @staticmethod
    def square(x: int) -> int:
        return x * x

    @dagc.pipeline
    def run(self):
        model = self.make()
        for k in range(3):
            self.grow(model, k)
        return model
"""


def test_a_static_method_task_body_is_analysed_for_effects(write_project, tmp_path: Path) -> None:
    graph = compile_file(write_project({"flow.py": METHOD_EFFECTS}) / "flow.py")
    assert [n.attributes().get("effects.mutates") for n in graph if n.name.startswith("grow")] == [["make"]] * 3
    assert _local_equals_plain(write_project, tmp_path, METHOD_EFFECTS) == {"seen": [0, 1, 2]}


def test_a_foreach_over_a_step_result_is_a_map(write_project, tmp_path: Path) -> None:
    source = METHOD_EFFECTS.replace("""        model = self.make()
        for k in range(3):
            self.grow(model, k)
        return model""", """        items = self.start(3)
        return [self.square(x) for x in items]""")
    graph = compile_file(write_project({"flow.py": source}) / "flow.py")
    assert [n.op for n in graph if n.op == "map"] == ["map"]
    assert _local_equals_plain(write_project, tmp_path, source) == [0, 1, 4]


CHANGED_CONFIG = """
from dataclasses import dataclass

import dagc


@dataclass
class TrainConfig:
    lr: float = 0.1
    epochs: int = 2


SHARED = TrainConfig()


@dagc.task
def warmup(tc: TrainConfig) -> int:
    tc.lr = tc.lr * 10
    return 1


@dagc.task
def use(lr: float) -> float:
    return lr


@dagc.pipeline
def p():
    tc = TrainConfig()
    n = tc.epochs
    warmup(tc)
    return use(tc.lr), n, tc.lr, SHARED.lr
"""


def test_a_config_a_task_changes_is_read_at_run_time_after_the_change(write_project, tmp_path: Path) -> None:
    assert _local_equals_plain(write_project, tmp_path, CHANGED_CONFIG) == (1.0, 2, 1.0, 0.1)


def test_a_module_level_config_that_is_not_frozen_is_not_passed_whole(write_project) -> None:
    source = CHANGED_CONFIG.replace("    warmup(tc)\n", "    warmup(SHARED)\n")
    diag = _only(_diagnostics(write_project, source), "DAGC109")
    assert diag.span.line == _line(source, "warmup(SHARED)") and "frozen=True" in diag.hint


CLASS_CONSTANTS = """
import dagc


class Flow:
    GENRES = ("a", "b", "c")
    N = 3

    @dagc.task
    @staticmethod
    def repeat(x: str, n: int) -> str:
        return x * n

    @dagc.pipeline
    def run(self):
        out = [self.repeat(g, self.N) for g in self.GENRES]
        return out, Flow.N, len(Flow.GENRES)
"""


def test_class_constants_fold_through_the_class_and_self(write_project, tmp_path: Path) -> None:
    assert _local_equals_plain(write_project, tmp_path, CLASS_CONSTANTS) == (["aaa", "bbb", "ccc"], 3, 3)
    # an __init__ may set instance attributes that hide the class's: `self.N` is not folded then
    source = CLASS_CONSTANTS.replace("    N = 3\n", "    N = 3\n\n    def __init__(self):\n        self.N = 4\n")
    diag = _only(_diagnostics(write_project, source), "DAGC109")
    assert diag.span.line == _line(source, "self.N) for g")


def test_config_from_a_user_module_and_glue_over_a_task_call_in_a_pipeline_method(write_project,
                                                                                   tmp_path: Path) -> None:
    config = ("import dataclasses\n\n\n@dataclasses.dataclass(frozen=True)\nclass GPTConfig:\n"
              "    n_layer: int = 2\n    n_embd: int = 8\n")
    flow = """
import dagc
from config import GPTConfig

CFG = GPTConfig(n_layer=4)


@dagc.task
def width(cfg: GPTConfig) -> int:
    return cfg.n_embd * cfg.n_layer


@dagc.task
def layers(n: int) -> int:
    return n + 1


class Flow:
    @dagc.pipeline
    @staticmethod
    def prep(n: int = 2):
        return layers(n)

    @dagc.pipeline
    def run(self):
        k = self.prep(CFG.n_layer)
        return dict(n_layer=k, n_embd=CFG.n_embd, w=width(CFG)), str(k)
"""
    root = write_project({"flow.py": flow, "config.py": config})
    result = compile_source(root / "flow.py", pipeline_name="Flow.run")
    assert not result.sink.diagnostics  # the task call inside dict(...) is made once
    assert [n.function for n in result.graph if n.op == "task"] == ["layers", "GPTConfig", "width"]
    assert result.graph.node("GPTConfig").target == "config:GPTConfig"
    expected = ({"n_layer": 5, "n_embd": 8, "w": 32}, "5")
    assert _local_equals_plain(write_project, tmp_path, flow, {"config.py": config}, pipeline="Flow.run") == expected


def test_the_event_log_records_method_tasks(write_project, tmp_path: Path) -> None:
    from dagc.profile import load_run

    root = write_project({"flow.py": FLOW_CLASS})
    program = tmp_path / "flow_local.py"
    program.write_text(emit(compile_file(root / "flow.py"), "local", program))
    run_python([str(program), "--run-dir", str(tmp_path / "run")], check=True, timeout=120)
    run = load_run(tmp_path / "run")
    assert run.status == "ok" and set(run.tasks) == {"start", "square", "total"}
