"""`map` regions: loops and list comprehensions over a task result (data-dependent fan-out).

Each form is compared with the plain run, for widths 0, 1 and many: locally here, and on Ray (two
devices) and torch (two gloo ranks) in the slow tests.
"""

from __future__ import annotations

import pickle
import re
import subprocess
from pathlib import Path

import pytest

from dagc.backends import emit
from dagc.cluster import parse_cluster_spec
from dagc.driver import compile_file
from dagc.frontend import compile_source
from dagc.ir import verify
from dagc.ir.parser import parse_graph
from dagc.ir.printer import print_graph
from dagc.ir.regions import expected_work
from dagc.ir.serialize import dumps, loads
from tests.interpreters import run_python
from tests.test_backend_local import _plain_result, _ruff_clean

FLOW = '''
import dagc


@dagc.task
def list_shards(n: int) -> list:
    return [f"s{i}" for i in range(n)]


@dagc.task
def prep(shard: str) -> int:
    return len(shard) * 10 + int(shard[1:])


@dagc.task
def scale(x: int, k: int) -> int:
    return x * k


@dagc.task
def merge(xs: list) -> list:
    return list(xs)


@dagc.pipeline
def forms(n: int = 5) -> tuple:
    shards = list_shards(n)
    out = []
    for s in shards:                              # a loop, with a static loop inside
        p = prep(s)
        for k in range(2):
            out.append(scale(p, k + 1))
    comp = [prep(s) for s in shards]              # a list comprehension
    pairs = [scale(1, 0)]                         # a list that is not empty before the loop
    for i, s in enumerate(shards, 1):
        pairs.append(scale(prep(s), i))
    zipped = []
    for a, b in zip(shards, comp):
        zipped.append(scale(prep(a), b))
    nested = [[scale(prep(s), k) for k in range(2)] for s in dagc.each(shards, expected=4, max_items=50, concurrency=2)]
    return merge(out), merge(comp), merge(pairs), merge(zipped), nested


@dagc.pipeline
def widths() -> tuple:
    return forms(0), forms(1), forms(5)         # widths 0, 1 and many in one run
'''

STATE = '''
import dagc


@dagc.task
def list_shards(n: int) -> list:
    return [f"s{i}" for i in range(n)]


@dagc.task
def make_counter() -> dict:
    return {"seen": []}


@dagc.task
def bump(counter: dict, shard: str) -> int:
    counter["seen"].append(shard)
    return len(counter["seen"])


@dagc.pipeline
def counted(n: int = 4) -> tuple:
    counter = make_counter()
    out = []
    for s in list_shards(n):
        out.append(bump(counter, s))
    return out, counter
'''


def _project(tmp_path: Path, source: str) -> Path:
    script = tmp_path / "src" / "flow.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(source, encoding="utf-8")
    return script


def _run_local(script: Path, tmp_path: Path, pipeline: str | None = None, **params: object) -> object:
    graph = compile_file(script, pipeline_name=pipeline, params=params or None)
    program = tmp_path / "prog" / "local.py"
    program.parent.mkdir(exist_ok=True)
    program.write_text(emit(graph, "local", program))
    _ruff_clean(program)
    result = tmp_path / "local.pkl"
    run_python([str(program), "--result", str(result)], check=True, timeout=120)
    return pickle.loads(result.read_bytes())


def test_map_ir_round_trips_and_verifies(tmp_path: Path) -> None:
    script = _project(tmp_path, FLOW)
    graph = compile_file(script, pipeline_name="forms", passes=())
    maps = [n for n in graph if n.op == "map"]
    assert [n.name for n in maps] == ["map", "map.1", "map.2", "map.3", "map.4"]
    assert maps[2].attrs["region.enumerate"] == 1 and maps[3].attrs["region.over"] == 2
    assert maps[4].attrs["region.width"] == 4 and maps[4].attrs["region.max_items"] == 50
    assert maps[4].attrs["region.concurrency"] == 2
    assert verify(graph) == []
    text = print_graph(graph)
    assert print_graph(parse_graph(text)) == text
    assert dumps(parse_graph(text)) == dumps(graph) == dumps(loads(dumps(graph)))


@pytest.mark.parametrize("n", [0, 1, 5])
def test_map_forms_run_like_the_plain_run(tmp_path: Path, n: int) -> None:
    script = _project(tmp_path, FLOW)
    assert _run_local(script, tmp_path, "forms", n=n) == _plain_result(script, "forms", tmp_path, n=n)


def test_state_changing_body_keeps_the_plain_order(tmp_path: Path) -> None:
    script = _project(tmp_path, STATE)
    plain = _plain_result(script, "counted", tmp_path)
    assert plain == ([1, 2, 3, 4], {"seen": ["s0", "s1", "s2", "s3"]})
    assert _run_local(script, tmp_path) == plain


def test_expected_width_plans_the_body_that_many_times(tmp_path: Path) -> None:
    script = _project(tmp_path, FLOW)
    graph = compile_file(script, pipeline_name="forms", passes=())
    region = graph.node("map.4")
    seconds, _ = expected_work(region, lambda node: (2.0, 0.0))
    assert seconds == 4 * (4 * 2.0)  # 4 items x (2 preps + 2 scales, 2 s each)
    assert expected_work(graph.node("map.1"), lambda node: (2.0, 0.0))[0] == 2.0  # no annotation: 1 item


def test_max_items_is_a_run_time_error_naming_the_loop(tmp_path: Path) -> None:
    script = _project(tmp_path, FLOW.replace("max_items=50", "max_items=3"))
    graph = compile_file(script, pipeline_name="forms", params={"n": 5})
    program = tmp_path / "local.py"
    program.write_text(emit(graph, "local", program))
    proc = run_python([str(program)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "map.4" in proc.stderr and "flow.py:" in proc.stderr and "5 items, more than its max_items=3" in proc.stderr
    assert "Traceback" not in proc.stderr


PRELUDE = '''
import dagc


@dagc.task
def load(path: str) -> list:
    return [path]


@dagc.task
def train(data: list) -> dict:
    return {"n": len(data)}


@dagc.task
def score(model: dict) -> float:
    return 1.0

'''


@pytest.mark.parametrize(("code", "line", "body"), [
    ("DAGC170", 3, "xs = load('a')\n    out = []\n    for x in dagc.each(xs, max_items=0):\n        out.append(train([x]))\n    return out"),
    ("DAGC170", 2, "xs = load('a')\n    ys = dagc.each(xs)\n    return ys"),
    ("DAGC171", 4, "xs = load('a')\n    m = train([])\n    for x in xs:\n        m = train([x, m])\n    return m"),
    ("DAGC172", 4, "xs = load('a')\n    out = []\n    for x in xs:\n        out.append(train([x, out]))\n    return out"),
    ("DAGC173", 3, "xs = load('a')\n    out = []\n    for x in xs:\n        m = train([x])\n        if score(m) > 0.5:\n            out.append(m)\n    return out"),
    ("DAGC173", 2, "xs = load('a')\n    return [train([x]) for x in xs if x]"),
    ("DAGC174", 5, "xs = load('a')\n    out = []\n    for x in xs:\n        if x == 'stop':\n            break\n        out.append(train([x]))\n    return out"),
    ("DAGC175", 3, "xs = load('a')\n    out = []\n    for i, (a, b) in enumerate(xs):\n        out.append(train([a]))\n    return out"),
    ("DAGC176", 4, "xs = load('a')\n    for x in xs:\n        m = train([x])\n    s = score(m)\n    return s"),
])
def test_map_diagnostics(tmp_path: Path, code: str, line: int, body: str) -> None:
    script = tmp_path / "example.py"
    script.write_text(PRELUDE + "\n@dagc.pipeline\ndef p():\n    " + body + "\n", encoding="utf-8")
    result = compile_source(script)
    errors = [d for d in result.sink.diagnostics if d.is_error]
    assert [d.code for d in errors] == [code], [str(d.message) for d in errors]
    first_body_line = PRELUDE.count("\n") + 4
    assert errors[0].span.line == first_body_line + line - 1
    assert errors[0].hint


# ---- other engines ----------------------------------------------------------------------------------


def _ray_program(script: Path, tmp_path: Path, pipeline: str | None = None, **params: object) -> Path:
    graph = compile_file(script, pipeline_name=pipeline, params=params or None, cluster=parse_cluster_spec("2"))
    program = tmp_path / "prog" / "ray_prog.py"
    program.parent.mkdir(exist_ok=True)
    program.write_text(emit(graph, "ray", program))
    _ruff_clean(program)
    return program


def _run_ray(program: Path, address: str, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    result = tmp_path / "ray.pkl"
    return run_python([str(program), "--address", address, "--result", str(result), *extra],
                          capture_output=True, text=True, timeout=300, cwd=program.parent)


@pytest.mark.slow
def test_map_forms_on_ray_equal_the_plain_run(tmp_path: Path, ray_cluster) -> None:
    script = _project(tmp_path, FLOW)
    program = _ray_program(script, tmp_path, "widths")
    assert program.read_text().count("return run_map(job, ") == 15  # the items of every map fan out
    proc = _run_ray(program, ray_cluster.address, tmp_path, "--run-dir", str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert pickle.loads((tmp_path / "ray.pkl").read_bytes()) == _plain_result(script, "widths", tmp_path)


@pytest.mark.slow
def test_state_changing_map_on_ray_keeps_the_plain_order(tmp_path: Path, ray_cluster) -> None:
    script = _project(tmp_path, STATE)
    program = _ray_program(script, tmp_path)
    proc = _run_ray(program, ray_cluster.address, tmp_path, "--run-dir", str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert pickle.loads((tmp_path / "ray.pkl").read_bytes()) == _plain_result(script, "counted", tmp_path)


@pytest.mark.slow
def test_map_forms_on_torch_equal_the_plain_run(tmp_path: Path) -> None:
    from dagc.backends.torch import REQUIRED_PASSES
    from tests.test_backend_torch import launch

    script = _project(tmp_path, FLOW)
    graph = compile_file(script, pipeline_name="widths", passes=REQUIRED_PASSES, cluster=parse_cluster_spec("2"),
                         backend="torch")
    assert all(n.options.ranks == 2 for n in graph if n.op == "map")  # the items spread over both ranks
    program = tmp_path / "prog" / "torch_prog.py"
    program.parent.mkdir()
    program.write_text(emit(graph, "torch", program))
    _ruff_clean(program)
    ranks = int(re.search(r"^RANKS = (\d+)$", program.read_text(), re.M).group(1))
    result = tmp_path / "torch.pkl"
    launch(program, ranks, ["--result", str(result)])
    assert pickle.loads(result.read_bytes()) == _plain_result(script, "widths", tmp_path)


RESUME = '''
import os
import time

import dagc


@dagc.task
def list_items(n: int) -> list:
    return list(range(n))


@dagc.task
def work(i: int) -> int:
    if i == 3 and not os.path.exists(os.path.join(os.path.dirname(__file__), "fixed")):
        time.sleep(1.0)  # the others finish first
        raise ValueError("item 3 is broken")
    return i * i


@dagc.task
def total(xs: list) -> int:
    return sum(xs)


@dagc.pipeline
def resumable(n: int = 6) -> int:
    return total([work(i) for i in list_items(n)])
'''


@pytest.mark.slow
def test_resumed_map_reruns_only_unfinished_items(tmp_path: Path, ray_cluster) -> None:
    from dagc.runtime.events import read_events

    script = _project(tmp_path, RESUME)
    program = _ray_program(script, tmp_path)
    assert "run_map(job, map_item" in program.read_text()  # the items fan out
    run_dir = tmp_path / "run"
    result = tmp_path / "ray.pkl"
    first = run_python([str(program), "--address", ray_cluster.address, "--run-dir",
                            str(run_dir)], capture_output=True, text=True, timeout=300,
                           )
    assert first.returncode == 1 and "item 3 is broken" in first.stderr and "map[3]" in first.stderr

    def ends() -> dict[str, int]:  # how often each item ran to the end, over both runs
        counts: dict[str, int] = {}
        for event in read_events(run_dir / "events.jsonl"):
            if event.get("event") in ("end", "failure") and str(event.get("task", "")).startswith("map["):
                counts[event["task"]] = counts.get(event["task"], 0) + 1
        return counts

    before = ends()
    (script.parent / "fixed").write_text("")
    second = run_python([str(program), "--address", ray_cluster.address, "--resume",
                             str(run_dir), "--result", str(result)], capture_output=True, text=True, timeout=300,
                            )
    assert second.returncode == 0, second.stderr[-3000:]
    assert pickle.loads(result.read_bytes()) == sum(i * i for i in range(6))
    after = ends()
    finished_first = [t for t in before if t != "map[3]"]
    assert finished_first, before  # the fast items finished before item 3 failed
    assert all(after[t] == before[t] == 1 for t in finished_first), (before, after)  # not run again
    assert after["map[3]"] == before["map[3]"] + 1
    assert len(after) == 6


def test_a_map_is_drawn_as_a_stacked_box_with_its_expected_width(tmp_path: Path) -> None:
    from dagc.backends.graphviz import to_dot

    graph = compile_file(_project(tmp_path, FLOW), pipeline_name="forms")
    dot = to_dot(graph)
    assert dot.count("shape=box3d") == 5
    assert "×4 expected" in dot and "width known at run time" in dot
    assert 'label="map map.4: one body per item"' in dot


def test_spread_gives_an_independent_map_its_ranks_and_keeps_a_stateful_one_on_one(tmp_path: Path) -> None:
    from dagc.backends.torch import REQUIRED_PASSES

    assert "spread,partition" in REQUIRED_PASSES
    spread = compile_file(_project(tmp_path / "a", FLOW), pipeline_name="forms", passes=REQUIRED_PASSES, cluster=parse_cluster_spec("2"),
                          backend="torch")
    for node in (n for n in spread if n.op == "map"):
        assert node.options.ranks == 2 and sorted(node.attributes()["partition.device"]) == [0, 1], node.name
    stateful = compile_file(_project(tmp_path / "b", STATE), passes=REQUIRED_PASSES,
                            cluster=parse_cluster_spec("2"), backend="torch")
    assert [n.options.ranks for n in stateful if n.op == "map"] == [1]


FAILING = """
import dagc


@dagc.task
def list_items(n: int) -> list:
    return list(range(n))


@dagc.task
def work(i: int) -> int:
    if i == 3:
        raise ValueError("item 3 is broken")
    return i


@dagc.pipeline
def failing(n: int = 6) -> list:
    return [work(i) for i in list_items(n)]
"""


@pytest.mark.slow
def test_a_failing_item_on_one_rank_fails_the_torch_run_without_hanging(tmp_path: Path) -> None:
    from dagc.backends.torch import REQUIRED_PASSES

    script = _project(tmp_path, FAILING)
    graph = compile_file(script, passes=REQUIRED_PASSES, cluster=parse_cluster_spec("2"), backend="torch")
    program = tmp_path / "prog" / "torch_prog.py"
    program.parent.mkdir()
    program.write_text(emit(graph, "torch", program))
    proc = run_python([str(program)], capture_output=True, text=True,
                          timeout=180, cwd=program.parent)
    assert proc.returncode != 0
    assert "item 3 of the map failed: ValueError: item 3 is broken" in proc.stderr


def test_profile_gives_a_map_its_measured_width(tmp_path: Path) -> None:
    script = _project(tmp_path, FLOW)
    program = tmp_path / "local.py"
    program.write_text(emit(compile_file(script, pipeline_name="forms", params={"n": 5}), "local", program))
    run_python([str(program), "--run-dir", str(tmp_path / "run")], check=True,
                   capture_output=True, timeout=120)
    graph = compile_file(script, pipeline_name="forms", params={"n": 5}, profile=tmp_path / "run", passes="verify,partition,schedule")
    assert graph.node("map.1").attrs["region.width"] == 5 == graph.node("map.1").attrs["profile.width"]
    annotated = graph.node("map.4")  # dagc.each(..., expected=4), measured 5
    assert annotated.attrs["region.width"] == 5 and annotated.attrs["profile.annotated"] == {"width": 4}


NESTED = '''
import dagc


@dagc.task
def groups(n: int) -> list:
    return [list(range(i)) for i in range(n)]


@dagc.task
def sq(x: int) -> int:
    return x * x


@dagc.pipeline
def nested(n: int = 4) -> list:
    out = []
    for g in groups(n):
        inner = []
        for x in g:                               # a map over an item of a map
            inner.append(sq(x))
        out.append(inner)
    return out
'''


def test_a_map_over_an_item_of_a_map_runs_like_the_plain_run(tmp_path: Path) -> None:
    script = _project(tmp_path, NESTED)
    assert _run_local(script, tmp_path) == _plain_result(script, "nested", tmp_path) == [[], [0], [0, 1], [0, 1, 4]]
    bad = _project(tmp_path / "bad", NESTED.replace("            inner.append(sq(x))\n        out.append(inner)",
                                                    "            out.append(sq(x))"))
    errors = [d for d in compile_source(bad).sink.diagnostics if d.is_error]
    assert [d.code for d in errors] == ["DAGC173"] and "nested loop" in errors[0].message
