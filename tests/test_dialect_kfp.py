"""Kubeflow Pipelines v2 pipelines, unmodified, compile into dagc's IR and run on local, Ray and torch with
the results of KFP's own local run (`kfp.local.SubprocessRunner`); `dagc check` names the constructs dagc
does not compile at their line."""

from __future__ import annotations

import ast
import json
import pickle
import re
import textwrap
from pathlib import Path

import pytest

from dagc.cluster import parse_cluster_spec
from dagc.driver import compile_file
from dagc.frontend import compile_source
from dagc.ir.regions import walk
from tests.engines import run_local, run_ray, run_torch
from tests.interpreters import run_python

PORTS = Path(__file__).parent / "ports"

# KFP's local run of one pipeline: its output (pickled), its pipeline root for the artifacts it wrote
_KFP_RUN = """
import pickle, sys
sys.path.insert(0, {folder!r})
from kfp import local
import {module} as m
local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root={root!r})
task = m.{pipeline}(**{params!r})
outputs = task.outputs if len(task.outputs) > 1 else task.output if task.outputs else None
open({out!r}, "wb").write(pickle.dumps(outputs))
"""


def kfp_run(script: Path, pipeline: str, params: dict[str, object], tmp: Path) -> object:
    out = tmp / "kfp.pkl"
    code = _KFP_RUN.format(folder=str(script.parent), module=script.stem, root=str(tmp / "kfp-root"),
                           pipeline=pipeline, params=params, out=str(out))
    run_python(["-c", code], cwd=tmp, check=True, timeout=120, capture_output=True)
    return pickle.loads(out.read_bytes())


FEATURES = textwrap.dedent('''
    from typing import List, NamedTuple

    from kfp import dsl
    from kfp.dsl import Dataset, Input, Output


    @dsl.component
    def make_items(n: int) -> list:
        return [{"name": f"item{i}", "size": i * 10} for i in range(n)]


    @dsl.component
    def measure(name: str, size: int) -> int:
        return len(name) + size


    @dsl.component
    def stats(values: List[int]) -> NamedTuple("Stats", [("total", int), ("largest", int)]):
        from collections import namedtuple
        return namedtuple("Stats", ["total", "largest"])(int(sum(values)), int(max(values)))


    @dsl.component
    def write_report(total: int, report: Output[Dataset]):
        with open(report.path, "w") as f:
            f.write(f"total={total}")
        report.metadata["total"] = total


    @dsl.component
    def read_report(report: Input[Dataset]) -> str:
        with open(report.path) as f:
            return f.read().upper()


    @dsl.component
    def label(text: str, grade: str) -> str:
        return f"{grade}:{text}"


    @dsl.pipeline
    def features(n: int = 4) -> str:
        items = make_items(n=n).set_cpu_limit("500m").set_memory_limit("1Gi").set_retry(2)
        with dsl.ParallelFor(items.output, parallelism=2) as item:
            sized = measure(name=item.name, size=item.size).set_caching_options(False)
        summary = stats(values=dsl.Collected(sized.output))
        report = write_report(total=summary.outputs["total"])
        report.after(items)
        text = read_report(report=report.outputs["report"])
        with dsl.If(summary.outputs["largest"] > 100):
            graded = label(text=text.output, grade="big")
        with dsl.Elif(summary.outputs["largest"] > 20):
            graded = label(text=text.output, grade="medium")
        with dsl.Else():
            graded = label(text=text.output, grade="small")
        return text.output
''')


@pytest.fixture(scope="module")
def features(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("features") / "kfp_features.py"
    path.write_text(FEATURES, encoding="utf-8")
    return path


def test_features_compile_to_maps_conditions_and_options(features: Path) -> None:
    graph = compile_file(features, pipeline_name="features", cluster=parse_cluster_spec("4"))
    make = graph.node("make_items")
    assert (make.options.cpus, make.options.memory, make.options.retries) == (0.5, 2**30, 2)
    assert make.attributes()["task.dialect"] == "kfp"
    (loop,) = [n for n in graph if n.op == "map"]
    assert loop.attributes()["region.concurrency"] == 2
    (measure,) = [m for m in walk(loop) if m.op == "task"]
    assert not measure.options.cache
    assert "make_items" in graph.node("write_report").deps  # `.after(items)` as a statement
    assert [n.op for n in graph if n.op == "cond"] == ["cond"]


def test_features_run_locally_and_on_torch_as_the_components_compute(tmp_path: Path, features: Path) -> None:
    """(KFP 2.17's local runner reads `item.name` of a loop over dicts wrongly, so the components' own
    arithmetic is the reference here: measure(item_i) = len(name) + size. Ray runs the other pipelines.)"""
    expected = f"TOTAL={sum(len(f'item{i}') + i * 10 for i in range(4))}"
    assert run_local(features, "features", {"n": 4}, tmp_path) == expected
    assert run_torch(features, "features", {"n": 4}, tmp_path) == expected


SWEEP = textwrap.dedent('''
    from kfp import dsl


    @dsl.component
    def train(lr: float) -> float:
        return round(1.0 / (1.0 + lr), 6)


    @dsl.component
    def best(scores: list) -> float:
        return min(scores)


    @dsl.pipeline
    def sweep() -> float:
        with dsl.ParallelFor([0.1, 0.2, 0.3, 0.4], parallelism=4) as lr:
            t = train(lr=lr).set_cpu_limit("1")
        done = best(scores=dsl.Collected(t.output)).after(t)
        return done.output
''')


def test_parallel_for_items_spread_over_devices(tmp_path: Path) -> None:
    (tmp_path / "sweep.py").write_text(SWEEP, encoding="utf-8")
    graph = compile_file(tmp_path / "sweep.py", cluster=parse_cluster_spec("4"))
    trains = [n for n in graph if n.name.startswith("train[")]
    assert len(trains) == 4
    assert len({n.attributes()["partition.device"] for n in trains}) == 4
    assert set(graph.node("best").deps) == {n.name for n in trains}  # `.after(t)` of a loop's task: all items
    assert run_local(tmp_path / "sweep.py", "sweep", {}, tmp_path) == kfp_run(tmp_path / "sweep.py", "sweep", {},
                                                                               tmp_path) == round(1 / 1.4, 6)


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> object:
    return kfp_run(PORTS / "kfp_collected_parameters.py", "collecting_parameters", {"model_ids": "s1,s2,s3"},
                   tmp_path_factory.mktemp("kfp_collected"))


def test_collected_parameters_equal_kfp_on_every_backend(tmp_path: Path, collected: object, ray_cluster) -> None:
    script, params = PORTS / "kfp_collected_parameters.py", {"model_ids": "s1,s2,s3"}
    assert collected == ["model_id_s1", "model_id_s2", "model_id_s3"]
    assert run_local(script, "collecting_parameters", params, tmp_path) == collected
    assert run_ray(script, "collecting_parameters", params, tmp_path, ray_cluster.address) == collected
    assert run_torch(script, "collecting_parameters", params, tmp_path) == collected


def test_the_outer_pipeline_runs_the_inner_one(tmp_path: Path) -> None:
    script = PORTS / "kfp_collected_parameters.py"
    graph = compile_file(script, pipeline_name="collected_param_pipeline")
    assert {n.name for n in graph if n.op == "task"} == {
        "collecting_parameters.split_ids", "collecting_parameters.consume_ids", "consume_ids"}
    assert run_local(script, "collected_param_pipeline", {}, tmp_path) is None


def test_graph_components_nest(tmp_path: Path) -> None:
    script = PORTS / "kfp_subdag_parameter.py"
    assert run_local(script, "mantle", {}, tmp_path) == kfp_run(script, "mantle", {}, tmp_path) == "foo"
    assert [n.name for n in compile_file(script) if n.op == "task"] == ["mantle.core.core_comp", "crust_comp"]


def _model_file(root: Path) -> tuple[str, list[dict]]:
    """The model file `train` wrote, with its dicts apart (protobuf's Struct orders keys its own way)."""
    (found,) = [p for p in root.rglob("model") if p.is_file()]
    text = found.read_text()
    dicts = [ast.literal_eval(d) for d in re.findall(r"input_dict: (\{.*?\}), type", text)]
    return re.sub(r"input_dict: \{.*?\}, type", "input_dict: {...}, type", text), dicts


def test_artifacts_and_output_files_pass_as_in_kfp(tmp_path: Path, ray_cluster) -> None:
    script = PORTS / "kfp_lightweight_artifacts.py"
    kfp_run(script, "pipeline", {}, tmp_path)
    expected = _model_file(tmp_path / "kfp-root")
    assert expected[1][0] == {"A": 1.0, "B": 2.0} and isinstance(expected[1][0]["A"], float)  # as protobuf makes it
    run_local(script, "pipeline", {}, tmp_path, "--run-dir", str(tmp_path / "local-run"))
    assert _model_file(tmp_path / "local-run") == expected
    run_ray(script, "pipeline", {}, tmp_path, ray_cluster.address)
    assert _model_file(tmp_path / "ray-run") == expected


def test_exit_handler_runs_after_a_failure_as_in_kfp(tmp_path: Path) -> None:
    from dagc.backends import emit

    script = PORTS / "kfp_exit_handler.py"
    code = _KFP_RUN.format(folder=str(script.parent), module=script.stem, root=str(tmp_path / "kfp-root"),
                           pipeline="pipeline_exit_handler", params={}, out=str(tmp_path / "kfp.pkl"))
    program = tmp_path / "exit_local.py"
    program.write_text(emit(compile_file(script), "local", program))
    for command in (["-c", code], [str(program)]):  # KFP's local run, then dagc's
        proc = run_python(command, capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert proc.returncode != 0 and "Hello World!" in proc.stdout + proc.stderr
        (stream,) = [out for out in (proc.stdout, proc.stderr) if "Exit handler has worked!" in out]
        assert "Task failed." in stream and stream.rindex("Task failed.") < stream.rindex("Exit handler has worked!")


@pytest.mark.parametrize(("body", "line", "needle"), [
    ("    t = greet(name=name)\n    t.set_env_variable('MODE', 'fast')\n", 22, "set_env_variable"),
    ("    x = dsl.OneOf(greet(name=name).output, greet(name='b').output)\n", 21, "OneOf"),
    ("    t = greet(name=name)\n    with dsl.If(t.output == 'x'):\n        a = greet(name='a')\n"
     "    greet(name=dsl.OneOf(a.output))\n", 24, "`dsl.Else`"),
    ("    t = greet(name=name)\n    with dsl.If(t.output == 'x'):\n        a = greet(name='a')\n    with dsl.Else():\n"
     "        b = greet(name='b')\n    greet(name=dsl.OneOf(a.output, name))\n", 26, "`name`"),
    ("    greet(name=dsl.PIPELINE_JOB_NAME_PLACEHOLDER)\n", 21, "PIPELINE_JOB_NAME_PLACEHOLDER"),
    ("    shell(text=name)\n", 21, "container component"),
    ("    e = report(status=name)\n    with dsl.ExitHandler(e):\n        greet(name=name)\n", 21, "final status"),
])
def test_check_names_unsupported_constructs_at_their_line(tmp_path: Path, body: str, line: int,
                                                          needle: str) -> None:
    source = ("from kfp import dsl\n\n\n@dsl.component\ndef greet(name: str) -> str:\n    return name\n\n\n"
              "@dsl.pipeline\ndef p(name: str = 'x'):\n" + body)
    source = source.replace("@dsl.pipeline", "@dsl.container_component\ndef shell(text: str):\n"
                            "    return dsl.ContainerSpec(image='alpine', command=['echo', text])\n\n\n@dsl.pipeline")
    source = source.replace("@dsl.pipeline", "@dsl.component\ndef report(status: dsl.PipelineTaskFinalStatus):\n"
                            "    print(status.state)\n\n\n@dsl.pipeline")
    (tmp_path / "p.py").write_text(source, encoding="utf-8")
    result = compile_source(tmp_path / "p.py")
    (found,) = [d for d in result.sink.diagnostics if d.code == "DAGC196"]
    assert found.is_error and found.span.line == line and needle in found.message and found.hint
    if needle == "container component":  # the component named, and how to write it as one dagc runs
        assert "`shell`" in found.message and "`shell`" in found.hint and "subprocess" in found.hint


def test_cluster_settings_are_warned_about_not_silently_dropped(tmp_path: Path) -> None:
    (tmp_path / "p.py").write_text(
        "from kfp import dsl\n\n\n@dsl.component\ndef train(steps: int) -> float:\n    return 0.5 * steps\n\n\n"
        "@dsl.pipeline\ndef p() -> float:\n    return train(steps=3).set_accelerator_type('T4').output\n")
    result = compile_source(tmp_path / "p.py")
    (found,) = [d for d in result.sink.diagnostics if d.code == "DAGC197"]
    assert found.span.line == 11 and result.graph is not None
    assert json.dumps(found.message).count("set_accelerator_type") == 1


def test_components_imported_from_another_module_keep_their_outputs_and_options(tmp_path: Path) -> None:
    (tmp_path / "comps.py").write_text(textwrap.dedent('''
        from typing import NamedTuple
        from kfp import dsl


        @dsl.component
        def split(x: int) -> NamedTuple("Parts", [("half", int), ("rest", int)]):
            from collections import namedtuple
            return namedtuple("Parts", ["half", "rest"])(x // 2, x - x // 2)
    '''), encoding="utf-8")
    (tmp_path / "pipe.py").write_text(textwrap.dedent('''
        from kfp import dsl
        from comps import split


        @dsl.component
        def add(a: int, b: int) -> int:
            return a + b


        @dsl.pipeline
        def p(x: int = 7) -> int:
            s = split(x=x).set_retry(3)
            return add(a=s.outputs["half"], b=s.outputs["rest"]).output
    '''), encoding="utf-8")
    graph = compile_file(tmp_path / "pipe.py")
    assert graph.node("split").options.retries == 3 and graph.node("split").target == "comps:split"
    assert run_local(tmp_path / "pipe.py", "p", {"x": 9}, tmp_path) == 9


def test_dagc_check_prints_the_unsupported_line_with_its_hint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dagc.cli import main

    (tmp_path / "p.py").write_text(
        "from kfp import dsl\n\n\n@dsl.component\ndef greet(name: str) -> str:\n    return name\n\n\n"
        "@dsl.pipeline\ndef p(name: str = 'x') -> str:\n    t = greet(name=name).ignore_upstream_failure()\n"
        "    return t.output\n", encoding="utf-8")
    assert main(["check", str(tmp_path / "p.py")]) != 0
    err = capsys.readouterr().err
    assert "p.py:11:9: error[DAGC196]: `.ignore_upstream_failure()` is not supported by dagc" in err
    assert "t = greet(name=name).ignore_upstream_failure()" in err and "= hint: a dagc run stops" in err


KEPT = '''
from kfp import dsl


@dsl.component
def double(x: int) -> int:
    return 2 * x


@dsl.component
def note(x: int) -> str:
    print("noted", x)
    return "ok"


@dsl.pipeline
def kept(n: int = 3) -> int:
    doubled = double(x=n)
    note(x=doubled.output)
    return doubled.output
'''


def test_every_component_runs_once_and_is_reused_by_the_cache(tmp_path: Path) -> None:
    """As in KFP, a component runs even when nothing reads its result; and its result is stored and reused as
    any task's (no component is taken to act on the world)."""
    from dagc.runtime.events import read_events

    script = tmp_path / "kept.py"
    script.write_text(KEPT, encoding="utf-8")
    graph = compile_file(script)
    assert {n.name for n in graph if n.op == "task"} == {"double", "note"}
    for name in ("first", "second"):
        assert run_local(script, "kept", {}, tmp_path, "--cache", str(tmp_path / "cache"), "--run-dir",
                         str(tmp_path / name)) == 6
    assert {e["task"] for e in read_events(tmp_path / "first" / "events.jsonl", event="start")} == {"double", "note"}
    second = read_events(tmp_path / "second" / "events.jsonl")
    assert not [e for e in second if e["event"] == "start"]
    assert {e["task"] for e in second if e["event"] == "skip"} == {"double", "note"}


CONSTRUCTS = textwrap.dedent('''
    from typing import List

    from kfp import dsl
    from kfp.dsl import Dataset, Input


    @dsl.component
    def multiply(a: int, b: int) -> int:
        return a * b


    @dsl.component
    def show(grid: List[List[int]]) -> str:
        return repr(grid)


    @dsl.component
    def summary(data: Input[Dataset], grid: str, label: str) -> str:
        with open(data.path) as f:
            return "|".join([f.read(), type(data).__name__, str(sorted(data.metadata.items())), grid, label])


    @dsl.pipeline
    def constructs(uri: str) -> str:
        with dsl.ParallelFor([1, 2]) as x:
            with dsl.ParallelFor([10, 20]) as y:
                product = multiply(a=x, b=y)
        grid = show(grid=dsl.Collected(product.output))
        count = multiply(a=2, b=3)
        with dsl.If(count.output > 5):
            big = show(grid=[[1]])
        with dsl.Else():
            small = show(grid=[[0]])
        imported = dsl.importer(artifact_uri=uri, artifact_class=dsl.Dataset, reimport=False,
                                metadata={"source": "words", "rows": 3})
        return summary(data=imported.output, grid=grid.output, label=dsl.OneOf(big.output, small.output)).output
''')


@pytest.fixture(scope="module")
def constructs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object], object]:
    """The pipeline, its parameters, and KFP's own local run of it."""
    folder = tmp_path_factory.mktemp("constructs")
    (folder / "words.txt").write_text("one two three", encoding="utf-8")
    (folder / "kfp_constructs.py").write_text(CONSTRUCTS, encoding="utf-8")
    params: dict[str, object] = {"uri": str(folder / "words.txt")}
    return folder / "kfp_constructs.py", params, kfp_run(folder / "kfp_constructs.py", "constructs", params, folder)


def test_oneof_importer_and_nested_collected_equal_kfp_on_every_backend(
        tmp_path: Path, constructs: tuple[Path, dict[str, object], object], ray_cluster) -> None:
    script, params, expected = constructs
    assert isinstance(expected, str) and "[[10.0, 20.0], [20.0, 40.0]]" in expected  # as KFP nests it
    assert run_local(script, "constructs", params, tmp_path) == expected
    assert run_ray(script, "constructs", params, tmp_path, ray_cluster.address) == expected
    assert run_torch(script, "constructs", params, tmp_path) == expected


def test_importer_is_a_task_and_oneof_a_condition_output(constructs: tuple[Path, dict[str, object], object]) -> None:
    script, params, _ = constructs
    graph = compile_file(script, pipeline_name="constructs", params=params)
    importer = graph.node("importer")
    assert importer.target == "kfp.dsl:importer" and importer.attributes()["task.dialect"] == "kfp"
    assert dict(importer.kwargs)["artifact_class"].value == "Dataset"
    (cond,) = [n for n in graph if n.op == "cond"]
    assert set(graph.predecessors("summary")) == {cond.name, "importer", "show"}


ONEOF = PORTS / "kfp_oneof.py"


def test_oneof_port_equals_kfp(tmp_path: Path, ray_cluster) -> None:
    params = {"pick_a": False}  # (the `Else` branch; the `If` branch is the constructs test's)
    expected = kfp_run(ONEOF, "pipeline_with_oneof", params, tmp_path)
    assert expected == "selected:B"
    assert run_local(ONEOF, "pipeline_with_oneof", params, tmp_path) == expected
    assert run_ray(ONEOF, "pipeline_with_oneof", params, tmp_path, ray_cluster.address) == expected


def test_importer_metadata_port_runs_as_in_kfp(tmp_path: Path) -> None:
    script = PORTS / "kfp_importer_metadata.py"
    graph = compile_file(script)
    importers = [n for n in graph if n.op == "task" and n.target == "kfp.dsl:importer"]
    assert len(importers) == 2 and "make_name" in graph.predecessors(importers[1].name)  # read in its metadata
    assert kfp_run(script, "my_pipeline", {}, tmp_path) is None
    assert run_local(script, "my_pipeline", {}, tmp_path) is None


IMPORTED = '''
from kfp import dsl
from kfp.dsl import Dataset, Input


@dsl.component
def count_words(data: Input[Dataset]) -> int:
    with open(data.path) as f:
        return len(f.read().split())


@dsl.pipeline
def imported(uri: str) -> int:
    words = dsl.importer(artifact_uri=uri, artifact_class=Dataset)
    return count_words(data=words.output).output
'''


def test_a_cached_reader_of_an_imported_file_runs_again_when_the_file_changes(tmp_path: Path) -> None:
    from dagc.runtime.events import read_events

    script, data = tmp_path / "imported.py", tmp_path / "words.txt"
    script.write_text(IMPORTED, encoding="utf-8")
    data.write_text("one two three", encoding="utf-8")
    params = {"uri": str(data)}
    counts, started = [], []
    for run, text in enumerate([None, None, "one two three four"]):
        if text is not None:
            data.write_text(text, encoding="utf-8")
        counts.append(run_local(script, "imported", params, tmp_path, "--cache", str(tmp_path / "cache"),
                                "--run-dir", str(tmp_path / f"run{run}")))
        events = read_events(tmp_path / f"run{run}" / "events.jsonl", event="start")
        started.append({e["task"] for e in events})
    assert counts == [3, 3, 4]
    assert started == [{"importer", "count_words"}, set(), {"importer", "count_words"}]


SUB_PIPELINE = '''
from kfp import dsl


@dsl.component
def say(text: str) -> str:
    return text


@dsl.pipeline
def inner(text: str) -> str:
    first = say(text=text)
    say(text="side")
    with dsl.If(first.output == "x"):
        say(text="inside")
    return say(text=first.output).output


@dsl.pipeline
def outer() -> str:
    start = say(text="start")
    run = inner(text="x").after(start)
    run.set_retry(2)
    run.set_caching_options(False)
    return run.output
'''


def test_after_on_a_pipeline_orders_all_its_tasks_and_other_settings_are_reported(tmp_path: Path) -> None:
    script = tmp_path / "sub.py"
    script.write_text(SUB_PIPELINE, encoding="utf-8")
    result = compile_source(script)
    warned = sorted((d.span.line, d.message.split("`")[1]) for d in result.sink.diagnostics if d.code == "DAGC197")
    assert warned == [(23, ".set_retry()"), (24, ".set_caching_options()")]
    graph = compile_file(script)
    inner = [n for n in graph if n.name.startswith("inner.") and n.op in ("task", "cond")]
    assert len(inner) == 4 and all("say" in graph.predecessors(n.name) for n in inner)  # every task of the pipeline waits, as in KFP
    (nested,) = [m for n in inner if n.op == "cond" for m in walk(n) if m.op == "task"]
    assert "say" in nested.deps
    assert run_local(script, "outer", {}, tmp_path) == "x"
    script.write_text(SUB_PIPELINE.replace("run.set_retry(2)", "run.set_cpu_limit('2')"), encoding="utf-8")
    (found,) = [d for d in compile_source(script).sink.diagnostics if d.code == "DAGC196"]
    assert found.span.line == 23 and "set_cpu_limit" in found.message and found.is_error


def test_after_on_a_pipeline_orders_its_body_not_the_tasks_of_its_arguments(tmp_path: Path) -> None:
    """A task made in the call's arguments is the calling pipeline's and does not wait (as in KFP); a task of the
    body with an `.after(...)` of its own waits for both."""
    script = tmp_path / "sub.py"
    script.write_text(SUB_PIPELINE.replace('inner(text="x")', 'inner(text=say(text="x").output)').replace(
        '    say(text="side")\n', '    say(text="side").after(first)\n'), encoding="utf-8")
    graph = compile_file(script)
    assert graph.node("say.1").deps == ()  # the argument's task
    inner = [n for n in graph if n.name.startswith("inner.") and n.op in ("task", "cond")]
    assert len(inner) == 4 and all("say" in n.deps for n in inner)
    assert set(graph.node("inner.say.1").deps) == {"say", "inner.say"}  # `say(text="side").after(first)`
    assert run_local(script, "outer", {}, tmp_path) == "x"


def test_oneof_of_artifacts_port_passes_the_branch_artifact(tmp_path: Path) -> None:
    """(KFP 2.17's local runner stops at a `dsl.OneOf` of artifacts: "Expected 1 artifact in
    ArtifactSelectorSpec. Got: 2". So the components' own work is the reference: the artifact the `If` branch
    wrote, holding the coin's side, which `flip_coin` always gives as 'heads'.)"""
    script = PORTS / "kfp_oneof_artifacts.py"
    (cond,) = [n for n in compile_file(script, pipeline_name="flip_coin_pipeline") if n.op == "cond"]
    assert [m.name for m in walk(cond) if m.op == "task"] == ["cond.then.param_to_artifact",
                                                               "cond.else.param_to_artifact"]
    artifact = run_local(script, "flip_coin_pipeline", {}, tmp_path, "--run-dir", str(tmp_path / "run"))
    assert type(artifact).__name__ == "Artifact" and Path(artifact.path).read_text() == "heads"
    assert Path(artifact.path).is_relative_to(tmp_path / "run")
