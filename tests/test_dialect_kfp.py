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
