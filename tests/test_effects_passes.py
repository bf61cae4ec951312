"""What compiling does with the effects it inferred: the order it keeps between tasks that share state or
files, the pipelines it refuses or explains, the calls CSE may merge and DCE may drop, the state groups and
their placement on one device, declarations that relax or order effects, and which tasks may be cached
(docs/ir.md, "Effects and state")."""

from __future__ import annotations

import pickle
import textwrap
from pathlib import Path

import pytest

from dagc.backends import emit
from dagc.cluster import parse_cluster_spec
from dagc.driver import compile_file
from dagc.ir.effects import state_groups
from tests.effect_sources import HEAD, _write
from tests.interpreters import run_python
from tests.test_backend_local import _plain_result


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
