"""Maps over a run-time dict: `for k, v in <task result>.items():` (and `.keys()`, `.values()`) and
dict comprehensions `{k: f(v) for k, v in <task result>.items()}`, whose result is a dict in item
order. Each is compared with the plain run: locally here, on Ray (two devices) and torch (two gloo
ranks) in the slow tests."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import pytest

from dagc.backends import emit
from dagc.cluster import parse_cluster_spec
from dagc.driver import compile_file
from dagc.frontend import compile_source
from dagc.ir import verify
from dagc.ir.parser import parse_graph
from dagc.ir.printer import print_graph
from dagc.ir.serialize import dumps, loads
from tests.test_backend_local import _plain_result, _ruff_clean
from tests.test_maps import _project, _ray_program, _run_local, _run_ray

DICTS = '''
import dagc


@dagc.task
def table(n: int) -> dict:
    return {f"k{i % 3}": i for i in range(n)}   # repeated keys: the dict keeps the last value


@dagc.task
def sq(x: int) -> int:
    return x * x


@dagc.task
def label(k: str, v: int) -> str:
    return f"{k}={v}"


@dagc.pipeline
def dicts(n: int = 5) -> tuple:
    d = table(n)
    labels = []
    for k, v in d.items():                               # a loop over the items of a run-time dict
        labels.append(label(k, sq(v)))
    keys = [label(k, 0) for k in table(n).keys()]
    values = []
    for i, v in enumerate(d.values(), 1):
        values.append(sq(v + i))
    squares = {k: sq(v) for k, v in d.items()}             # a dict comprehension: a dict in item order
    parity = {v % 2: k for k, v in dagc.each(d.items(), expected=3)}   # repeated keys: the last value wins
    nested = {k: [sq(v), sq(v + 1)] for k, v in table(n).items()}
    return labels, keys, values, squares, list(squares), parity, list(parity), nested


@dagc.pipeline
def widths() -> tuple:
    return dicts(0), dicts(1), dicts(7)
'''


def test_dict_maps_ir_round_trips_and_verifies(tmp_path: Path) -> None:
    graph = compile_file(_project(tmp_path, DICTS), pipeline_name="dicts", passes=())
    maps = [n for n in graph if n.op == "map"]
    assert [n.attrs.get("region.method") for n in maps] == ["items", "keys", "values", "items", "items", "items"]
    assert maps[2].attrs["region.enumerate"] == 1 and maps[4].attrs["region.width"] == 3
    assert [n.name for n in graph if n.op == "glue" and n.target == "dict(_0)"] == ["dict", "dict.1", "dict.2"]
    assert verify(graph) == []
    text = print_graph(graph)
    assert print_graph(parse_graph(text)) == text
    assert dumps(parse_graph(text)) == dumps(graph) == dumps(loads(dumps(graph)))
    maps[0].attrs["region.method"] = "popitem"
    assert any("region.method" in str(p) for p in verify(graph))


@pytest.mark.parametrize("n", [0, 1, 7])
def test_dict_maps_run_like_the_plain_run(tmp_path: Path, n: int) -> None:
    script = _project(tmp_path, DICTS)
    plain = _plain_result(script, "dicts", tmp_path, n=n)
    if n == 7:  # the keys repeat, and the comprehension's keys keep their first place
        assert plain[4] == ["k0", "k1", "k2"] and plain[5] == {0: "k1", 1: "k2"} and plain[6] == [0, 1]
    assert _run_local(script, tmp_path, "dicts", n=n) == plain


def test_the_dict_map_is_drawn_over_the_view(tmp_path: Path) -> None:
    from dagc.backends.graphviz import to_dot

    dot = to_dot(compile_file(_project(tmp_path, DICTS), pipeline_name="dicts"))
    assert "of %table.items()" in dot and "of %table.1.keys()" in dot


PRELUDE = '''
import dagc


@dagc.task
def table(n: int) -> dict:
    return {"a": n}


@dagc.task
def sq(x: int) -> int:
    return x * x

'''


@pytest.mark.parametrize(("code", "body"), [
    # a view of a run-time dict zipped with another run-time list: the method is not a task
    ("DAGC107", "d = table(1)\n    out = []\n    for a, b in zip(d.items(), d):\n        out.append(sq(1))\n    return out"),
    ("DAGC173", "d = table(1)\n    return {k: sq(v) for k, v in d.items() if v}"),
])
def test_dict_map_diagnostics(tmp_path: Path, code: str, body: str) -> None:
    script = tmp_path / "example.py"
    script.write_text(PRELUDE + "\n@dagc.pipeline\ndef p():\n    " + body + "\n", encoding="utf-8")
    errors = [d for d in compile_source(script).sink.diagnostics if d.is_error]
    assert [d.code for d in errors] == [code], [str(d.message) for d in errors]
    assert errors[0].hint and errors[0].span.line > PRELUDE.count("\n")


def test_a_shadowed_dict_keeps_the_diagnostic(tmp_path: Path) -> None:
    """`dict` rebound in the pipeline is no longer the builtin that builds the result: no map."""
    script = tmp_path / "example.py"
    script.write_text(PRELUDE + "\n@dagc.pipeline\ndef p():\n    dict = table(2)\n"
                      "    return {k: sq(v) for k, v in dict.items()}\n", encoding="utf-8")
    errors = [d for d in compile_source(script).sink.diagnostics if d.is_error]
    assert [d.code for d in errors] == ["DAGC116"]


@pytest.mark.slow
def test_dict_maps_on_ray_equal_the_plain_run(tmp_path: Path, ray_cluster) -> None:
    script = _project(tmp_path, DICTS)
    program = _ray_program(script, tmp_path, "widths")
    text = program.read_text()
    assert text.count("return run_map(job, ") == 18 and text.count("method='items'") == 12  # every map fans out
    proc = _run_ray(program, ray_cluster.address, tmp_path, "--run-dir", str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert pickle.loads((tmp_path / "ray.pkl").read_bytes()) == _plain_result(script, "widths", tmp_path)


@pytest.mark.slow
def test_dict_maps_on_torch_equal_the_plain_run(tmp_path: Path) -> None:
    from dagc.backends.torch import REQUIRED_PASSES
    from tests.test_backend_torch import launch

    script = _project(tmp_path, DICTS)
    graph = compile_file(script, pipeline_name="widths", passes=REQUIRED_PASSES, cluster=parse_cluster_spec("2"),
                         backend="torch")
    assert all(n.options.ranks == 2 for n in graph if n.op == "map")  # the items spread over both ranks
    program = tmp_path / "prog" / "torch_prog.py"
    program.parent.mkdir()
    program.write_text(emit(graph, "torch", program))
    _ruff_clean(program)
    ranks = int(re.search(r"^RANKS = (\d+)$", program.read_text(), re.M).group(1))
    launch(program, ranks, ["--result", str(tmp_path / "torch.pkl")])
    assert pickle.loads((tmp_path / "torch.pkl").read_bytes()) == _plain_result(script, "widths", tmp_path)
