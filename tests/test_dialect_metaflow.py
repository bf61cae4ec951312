"""Metaflow flows, unmodified (tests/ports/metaflow_*.py: three of Metaflow's tutorials, a sweep with nested
foreach, merge_artifacts and step decorators, flows derived from base flow classes of another module or of
their own, with Configs read from a file or given as values, and a @parallel gang), compile to dagc's IR and
compute on local, Ray and torch what Metaflow's own `python flow.py run` computes: the artifacts of the `end`
step, read back with Metaflow's client."""

from __future__ import annotations

import fcntl
import os
import pickle
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dagc.cluster import parse_cluster_spec
from dagc.driver import compile_file
from dagc.frontend import compile_source, list_pipelines
from dagc.ir.core import DIALECT_ATTR
from dagc.ir.regions import walk
from dagc.runtime.events import read_events
from tests.conftest import run_dagc
from tests.engines import run_local, run_ray, run_torch
from tests.interpreters import run_python

PORTS = Path(__file__).parent / "ports"
FLOWS = {"metaflow_helloworld": "HelloFlow", "metaflow_playlist": "PlayListFlow", "metaflow_stats": "MovieStatsFlow",
         "metaflow_sweep": "SweepFlow", "metaflow_switch": "SizeFlow", "metaflow_template": "LinearFitFlow",
         "metaflow_diamond": "CleanReport", "metaflow_parallel": "ShardedSumFlow"}
_READ_END = """
import pickle, sys
from metaflow import Flow, namespace
namespace(None)
task = Flow(sys.argv[1]).latest_run["end"].task
pickle.dump({artifact.id: artifact.data for artifact in task}, open(sys.argv[2], "wb"))
"""


def _metaflow_result(port: str, tmp: Path, *args: str) -> dict[str, Any]:
    """The end step's artifacts of `python flow.py run`, with its datastore and metadata under `tmp`."""
    env = {**os.environ, "METAFLOW_HOME": str(tmp / "home"), "METAFLOW_DATASTORE_SYSROOT_LOCAL": str(tmp / "ds"),
           "METAFLOW_DEFAULT_METADATA": "local", "METAFLOW_DEFAULT_DATASTORE": "local", "USERNAME": "dagc-tests"}
    run = run_python([str(PORTS / f"{port}.py"), "--no-pylint", "run", "--max-workers", "2", *args], env=env,
                     cwd=tmp, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    run_python(["-c", _READ_END, FLOWS[port], str(tmp / "metaflow.pkl")], env=env, cwd=tmp, check=True, timeout=60)
    return pickle.loads((tmp / "metaflow.pkl").read_bytes())  # type: ignore[no-any-return]


def _comparable(port: str, result: Any) -> dict[str, Any]:
    """What two runs of `port` must agree on: every artifact, with a caught failure as its type and message, the
    sweep's scratch directory (each run has its own) left out, and the playlist's random draws (the tutorial does
    not seed them) as what they are drawn from."""
    from metaflow.exception import MetaflowExceptionWrapper

    assert isinstance(result, dict), result
    out = {k: (v.type, v.exception) if isinstance(v, MetaflowExceptionWrapper) else v for k, v in result.items()}
    if port == "metaflow_sweep":
        assert Path(out.pop("scratch")).name == "scratch"
    if port == "metaflow_playlist":
        out["playlist"] = sorted(out["playlist"])
        out["bonus"] = out["genre"].lower() not in out["bonus"][1].lower()
    return out


@pytest.fixture(scope="session")
def metaflow_run(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., dict[str, Any]]:
    """Metaflow's result of a port, run once for the whole session: the test processes share the directory above
    their own temporary ones, and the first to need a port runs it while the others wait on its lock."""
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "metaflow-runs"
    shared.mkdir(exist_ok=True)

    def result(port: str, *options: str) -> dict[str, Any]:
        key = "_".join((port, *(o.strip("-") for o in options)))
        done = shared / f"{key}.pkl"
        with open(shared / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not done.exists():
                tmp = Path(tempfile.mkdtemp(prefix=key, dir=shared))
                (tmp / "scratch").mkdir()
                args = ("--scratch", str(tmp / "scratch")) if port == "metaflow_sweep" else ()
                done.write_bytes(pickle.dumps(_metaflow_result(port, tmp, *args, *options)))
        return _comparable(port, pickle.loads(done.read_bytes()))

    return result


def _params(port: str, tmp: Path, backend: str) -> dict[str, Any]:
    if port != "metaflow_sweep":
        return {}
    scratch = tmp / backend / "scratch"
    scratch.mkdir(parents=True)
    return {"scratch": str(scratch)}


def test_a_flow_compiles_to_its_steps_in_the_order_of_its_transitions() -> None:
    graph = compile_file(PORTS / "metaflow_sweep.py")
    assert graph.name == "SweepFlow"
    assert [p.name for p in graph.params] == ["seed", "n_samples", "scratch"]
    top = [n.name for n in graph.nodes]
    assert top == ["start", "sweep", "map", "join_features", "describe", "join_branches", "flaky", "risky", "end"]
    steps = [n for n in (*graph.nodes, *(m for n in graph.nodes for m in walk(n))) if n.op == "task"]
    assert len(steps) == 11 and all(n.attrs.get(DIALECT_ATTR) == "metaflow" for n in steps)
    # a step's fingerprint covers its whole class: the helpers and class-level values it reads through `self`
    assert all("metaflow_sweep:SweepFlow" in n.attrs["code.reaches"] for n in steps)
    options = {n.name: n.options for n in graph.nodes if n.op == "task"}
    assert options["flaky"].retries == 2 and options["risky"].retries == 0  # @catch makes its own retries
    (outer,) = [n for n in graph.nodes if n.op == "map"]
    inside = {n.function: n for n in walk(outer) if n.op == "task"}
    assert set(inside) == {"SweepFlow.per_features", "SweepFlow.fit", "SweepFlow.join_alphas"}
    assert inside["SweepFlow.per_features"].options.cpus == 2
    assert inside["SweepFlow.per_features"].options.memory == 2048 * 2**20
    assert inside["SweepFlow.fit"].options.timeout == 120


def test_the_foreach_items_spread_over_the_devices_of_the_plan() -> None:
    """A foreach is a map whose items share nothing: the torch plan gives it a rank on every device."""
    graph = compile_file(PORTS / "metaflow_stats.py", cluster=parse_cluster_spec("4"), backend="torch")
    (foreach,) = [n for n in graph.nodes if n.op == "map"]
    assert foreach.options.ranks == 4 and foreach.attributes()["partition.device"] == [0, 1, 2, 3]


@pytest.mark.parametrize("port", sorted(FLOWS))
def test_flow_on_local_equals_metaflows_run(tmp_path: Path, metaflow_run, port: str) -> None:
    got = run_local(PORTS / f"{port}.py", FLOWS[port], _params(port, tmp_path, "local"), tmp_path)
    assert _comparable(port, got) == metaflow_run(port)


@pytest.mark.slow
@pytest.mark.parametrize("port", sorted(set(FLOWS) - {"metaflow_diamond"}))  # (its runtime path is the template's)
def test_flow_on_ray_and_torch_equals_metaflows_run(tmp_path: Path, metaflow_run, ray_cluster, port: str) -> None:
    script = PORTS / f"{port}.py"
    ray = run_ray(script, FLOWS[port], _params(port, tmp_path, "ray"), tmp_path, ray_cluster.address)
    assert _comparable(port, ray) == metaflow_run(port)
    # every step's artifacts were stored, a foreach's among them: resuming the finished run runs no step of it
    # again but those keyed on their inputs' content (after a step that acts on the world, like @retry's marker)
    program = tmp_path / f"{FLOWS[port].replace('.', '_')}_ray.py"
    again = run_python([str(program), "--address", ray_cluster.address, "--resume", str(tmp_path / "ray-run")],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    last = read_events(tmp_path / "ray-run" / "events.jsonl", event="run_start")[-1]["run"]
    rerun = {e["task"] for e in read_events(tmp_path / "ray-run" / "events.jsonl", run=last, event="start")}
    assert rerun <= {"risky", "end"} and not any(t.startswith("map") for t in rerun), (rerun, again.stderr[-3000:])
    torch = run_torch(script, FLOWS[port], _params(port, tmp_path, "torch"), tmp_path)
    assert _comparable(port, torch) == metaflow_run(port)


def test_a_derived_flow_runs_the_steps_python_finds_on_its_class() -> None:
    """Steps, parameters and Configs come from the flow's bases in Python's method resolution order; the program
    calls each step on the derived class, and a step's code identity covers the bases' code too."""
    graph = compile_file(PORTS / "metaflow_template.py")
    assert [p.name for p in graph.params] == ["lr", "seed"]  # (the Config is read by the start step, not passed)
    steps = {n.name: n for n in (*graph.nodes, *(m for n in graph.nodes for m in walk(n))) if n.op == "task"}
    assert set(steps) == {"start", "map.train", "pick", "end"}  # (train runs per item of the foreach)
    assert steps["start"].options.retries == 1  # the template's @retry, on the step it defines
    assert all(n.attrs["task.class"] == "LinearFitFlow" for n in steps.values())
    assert all({"metaflow_template:LinearFitFlow", "metaflow_template_base:TrainingTemplate"}
               <= set(n.attrs["code.reaches"]) for n in steps.values())
    assert graph.modules == {"metaflow_template": "metaflow_template.py",
                             "metaflow_template_base": "metaflow_template_base.py"}
    # bases in the flow's own file are read, not compiled as flows; the override of `clean` is the derived one's
    assert list_pipelines(PORTS / "metaflow_diamond.py") == ["CleanReport"]
    diamond = compile_file(PORTS / "metaflow_diamond.py")
    options = {n.name: n.options for n in diamond.nodes if n.op == "task"}
    assert options["clean"].retries == 1 and options["start"].retries == 0
    assert [p.name for p in diamond.params] == ["rows", "threshold"]  # (the bases' first)


def test_a_changed_config_file_makes_a_cached_run_read_it_again(tmp_path: Path) -> None:
    """The start step reads the Config's file, as Metaflow's run does when it starts: under --cache, a change to
    the file runs the start step and the steps after it again."""
    for name in ("metaflow_template.py", "metaflow_template_base.py", "metaflow_template.json"):
        (tmp_path / name).write_bytes((PORTS / name).read_bytes())
    cache = str(tmp_path / "cache")
    first = run_local(tmp_path / "metaflow_template.py", "LinearFitFlow", {}, tmp_path, "--cache", cache)
    config = tmp_path / "metaflow_template.json"
    config.write_text(config.read_text(encoding="utf-8").replace('"lr": 0.05', '"lr": 0.02'), encoding="utf-8")
    program = tmp_path / "LinearFitFlow_local.py"
    again = run_python([str(program), "--result", str(tmp_path / "again.pkl"), "--cache", cache],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "metaflow_template.json, which changed" in again.stderr and "`start`" in again.stderr, again.stderr
    second = pickle.loads((tmp_path / "again.pkl").read_bytes())
    assert first["train_args"]["lr"] == 0.05 and second["train_args"]["lr"] == 0.02  # type: ignore[index]
    assert sorted(second["losses"]) == [0.01, 0.02, 0.04]  # type: ignore[index]


_FOREACH_FLOW = '''
from metaflow import FlowSpec, Parameter, step


class ScaleFlow(FlowSpec):
    scale = Parameter("scale", default=2)

    @step
    def start(self):
        self.items = [1, 2, 3]
        self.next(self.times, foreach="items")

    @step
    def times(self):
        self.value = self.input * self.scale
        self.next(self.join)

    @step
    def join(self, inputs):
        self.values = sorted(inp.value for inp in inputs)
        self.next(self.end)

    @step
    def end(self):
        pass
'''


def test_a_second_cached_run_of_a_foreach_flow_reuses_every_step(tmp_path: Path) -> None:
    """Each `dagc run` compiles again, planning with what the runs before it measured (the foreach's width among
    it): the plan's estimates leave a step's fingerprint as it was, so a second run under --cache reuses every
    step; a changed Parameter runs again the steps that read it (the start step, and every step after it)."""
    (tmp_path / "scale.py").write_text(_FOREACH_FLOW, encoding="utf-8")

    def run(*options: str) -> tuple[set[str], set[str], object]:
        run_dir = tmp_path / f"run{len(list(tmp_path.glob('run*')))}"
        done = run_dagc("run", str(tmp_path / "scale.py"), "--cost-store", str(tmp_path / "costs"), *options,
                        "--result", str(tmp_path / "result.pkl"), "--", "--cache", str(tmp_path / "cache"),
                        "--run-dir", str(run_dir), cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        log = run_dir / "events.jsonl"
        started = {e["task"].partition(".")[0] for e in read_events(log, event="start")}
        return started, {e["task"] for e in read_events(log, event="skip")}, \
            pickle.loads((tmp_path / "result.pkl").read_bytes())["values"]  # type: ignore[index]

    steps = {"start", "map", "join", "end"}
    assert run() == (steps, set(), [2, 4, 6])
    assert run() == (set(), steps, [2, 4, 6])
    assert run("--param", "scale=3") == (steps, set(), [3, 6, 9])
    assert run("--param", "scale=3") == (set(), steps, [3, 6, 9])


_CLASS_VALUES_FLOW = '''
from metaflow import Config, FlowSpec, Parameter, step

CONFIG_PATH = "FOLDER/a.json"
SCALE = 10


def scaled(x):
    return x * SCALE


class ValuesFlow(FlowSpec):
    settings = Config("settings", default=CONFIG_PATH)
    n = Parameter("n", default=scaled(1))

    @step
    def start(self):
        self.k = self.settings.k
        self.next(self.end)

    @step
    def end(self):
        self.out = (self.k, self.n)
'''


def test_a_cached_step_runs_again_when_what_its_class_values_read_changes(tmp_path: Path) -> None:
    """A Parameter's or Config's default may read module-level code and values (`scaled(1)`, `CONFIG_PATH`): the
    flow's steps reach them, so that editing one runs the steps again under --cache, not reuse what the old
    value gave."""
    (tmp_path / "a.json").write_text('{"k": 1}', encoding="utf-8")
    (tmp_path / "b.json").write_text('{"k": 2}', encoding="utf-8")
    script, flow = tmp_path / "values.py", _CLASS_VALUES_FLOW.replace("FOLDER", tmp_path.as_posix())
    script.write_text(flow, encoding="utf-8")
    reaches = set(compile_file(script).node("start").attrs["code.reaches"])
    assert {"values:CONFIG_PATH", "values:scaled", "values:SCALE"} <= reaches
    cache = str(tmp_path / "cache")
    assert run_local(script, "ValuesFlow", {}, tmp_path, "--cache", cache)["out"] == (1, 10)  # type: ignore[index]
    script.write_text(flow.replace("/a.json", "/b.json").replace("SCALE = 10", "SCALE = 20"), encoding="utf-8")
    again = run_python([str(tmp_path / "ValuesFlow_local.py"), "--result", str(tmp_path / "again.pkl"), "--cache",
                        cache], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert pickle.loads((tmp_path / "again.pkl").read_bytes())["out"] == (2, 20)


_CONFIG_IN_OPTION = '''
from metaflow import Config, FlowSpec, config_expr, resources, retry, step


class TunedFlow(FlowSpec):
    settings = Config("settings", default_value={"retries": 2, "cpu": 4})

    @retry(times=config_expr("settings.retries"))
    @resources(cpu=settings.cpu)
    @step
    def start(self):
        self.next(self.end)

    @step
    def end(self):
        pass
'''


def test_a_config_in_a_step_option_is_reported_at_its_line(tmp_path: Path) -> None:
    (tmp_path / "tuned.py").write_text(_CONFIG_IN_OPTION, encoding="utf-8")
    result = compile_source(tmp_path / "tuned.py")
    found = [(d.code, d.span.line, d.span.col) for d in result.sink.diagnostics]  # type: ignore[union-attr]
    assert found == [("DAGC123", 8, 18), ("DAGC123", 9, 20)], result.sink.diagnostics
    assert all("before a run loads its configs" in (d.hint or "") for d in result.sink.diagnostics)


def test_a_switch_runs_the_case_its_condition_chooses(tmp_path: Path, metaflow_run) -> None:
    """(The default of `rows` takes the other case, on every backend above.)"""
    got = run_local(PORTS / "metaflow_switch.py", "SizeFlow", {"rows": 400}, tmp_path)
    assert _comparable("metaflow_switch", got) == metaflow_run("metaflow_switch", "--rows", "400")
    assert got["size"] == "large" and "sample_error" in got  # type: ignore[index,operator]


def test_a_class_of_steps_that_is_no_flow_still_gets_the_rewrite_hint(tmp_path: Path) -> None:
    (tmp_path / "steps.py").write_text(
        "class Flow:\n    @step\n    def start(self):\n        self.next(self.end)\n", encoding="utf-8")
    result = compile_source(tmp_path / "steps.py")
    (diagnostic,) = result.sink.diagnostics
    assert diagnostic.code == "DAGC003" and "metaflow.FlowSpec" in (diagnostic.hint or "")
    assert "class Flow(FlowSpec):" in (diagnostic.hint or "") and "@dagc.task" in (diagnostic.hint or "")


_UNSUPPORTED = '''
from metaflow import FlowSpec, Parameter, batch, card, conda_base, project, retry, step


@project(name="demo")
@conda_base(python="3.11")
class BadFlow(FlowSpec):
    mode = Parameter("mode", default="fast")

    @card
    @step
    def start(self):
        self.next(self.a, self.b)

    @batch(cpu=2)
    @step
    def a(self):
        self.next(self.gang, num_parallel=2)

    @retry(times="twice")
    @step
    def b(self):
        if self.mode == "fast":
            self.next(self.gang)

    @step
    def gang(self, inputs):
        self.next(self.end)

    @step
    def end(self):
        pass


if __name__ == "__main__":
    BadFlow()
'''


def test_check_says_which_constructs_are_not_supported_at_their_line(write_project) -> None:
    root = write_project({"bad_flow.py": _UNSUPPORTED})
    run = run_dagc("check", "bad_flow.py", cwd=root)
    assert run.returncode == 1 and "Traceback" not in run.stderr + run.stdout
    said = {line.split(": ", 1)[0] + ": " + line.split(": ", 2)[1] for line in (run.stdout + run.stderr).splitlines()
            if line.startswith("bad_flow.py:")}
    assert said == {
        "bad_flow.py:4:2: warning[DAGC124]",  # @project: ignored
        "bad_flow.py:5:2: error[DAGC124]",  # @conda_base
        "bad_flow.py:9:6: warning[DAGC124]",  # @card: ignored
        "bad_flow.py:14:6: error[DAGC124]",  # @batch
        "bad_flow.py:17:30: error[DAGC117]",  # num_parallel=
        "bad_flow.py:19:18: error[DAGC121]",  # times="twice"
        "bad_flow.py:23:13: error[DAGC117]",  # self.next inside an `if`
    }, run.stdout + run.stderr
    assert "dagc runs @step methods with @retry, @resources, @catch, @timeout and @parallel" in run.stdout + run.stderr
    assert "`num_parallel=` names one step decorated with @parallel" in run.stdout + run.stderr


_CONFLICT = '''
from metaflow import FlowSpec, step


class ConflictFlow(FlowSpec):
    @step
    def start(self):
        self.next(self.left, self.right)

    @step
    def left(self):
        self.x = 1
        self.next(self.join)

    @step
    def right(self):
        self.x = 2
        self.next(self.join)

    @step
    def join(self, inputs):
        self.merge_artifacts(inputs)
        self.next(self.end)

    @step
    def end(self):
        pass


if __name__ == "__main__":
    ConflictFlow()
'''


def test_merging_artifacts_that_differ_fails_as_in_metaflow(write_project, tmp_path: Path) -> None:
    from dagc.backends import emit

    root = write_project({"conflict.py": _CONFLICT})
    program = root / "conflict_local.py"
    program.write_text(emit(compile_file(root / "conflict.py"), "local", program), encoding="utf-8")
    run = run_python([str(program)], cwd=root, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert "UnhandledInMergeArtifactsException" in run.stderr and "conflicting values:\n[x]" in run.stderr, run.stderr
