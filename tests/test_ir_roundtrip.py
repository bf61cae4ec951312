"""Text and JSON forms of the IR: golden output, exact round trips, error positions."""

from __future__ import annotations

import json
import math
import os
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dagc.ir as ir
from dagc.ir import (
    Const,
    Graph,
    IRFormatError,
    IRParseError,
    Map,
    Node,
    Param,
    Ref,
    Seq,
    SourceSpan,
    TaskOptions,
    dumps,
    loads,
    parse_graph,
    print_graph,
)
from dagc.ir.parser import parse_operand
from dagc.ir.printer import format_operand, print_node
from dagc.ir.serialize import graph_from_json, graph_to_json, node_from_json, node_to_json
from tests.conftest import PIPELINE_PARAMS, PIPELINE_SOURCES
from tests.interpreters import run_python
from tests.ir_strategies import graphs
from tests.property import examples

REPO = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((REPO / "ir" / "schema.json").read_text(encoding="utf-8"))
PROPERTY = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def span(line: int, col: int, end_line: int = 0, end_col: int = 0) -> SourceSpan:
    return SourceSpan("samples/quickstart.py", line, col, end_line, end_col)


def quickstart() -> Graph:
    g = Graph(
        "quickstart",
        root="samples",
        module="quickstart",
        params=[Param("n", Const(512), "int", span(60, 17)), Param("lr", Const(0.1), "float", span(60, 27))],
        modules={"quickstart": "quickstart.py", "pkg.data": "pkg/data.py"},
        span=span(60, 1, 70, 20),
        attrs={"schedule.makespan": 12.5},
    )
    g.add_node(Node("prep", "task", "quickstart:prep", span=span(39, 5, 39, 11),
                    options=TaskOptions(side_effects=True, writes=("out/data.bin",))))
    g.add_node(Node(
        "make_data", "task", "pkg.data:make_data", (Ref("n"),), (("seed", Const(0)),),
        outputs=("make_data#0", "make_data#1"), types=("Tensor", None),
        options=TaskOptions(cost=1.0, out_size=64 * 1024), span=span(40, 5, 40, 30),
    ))
    g.add_node(Node(
        "train[3]", "task", "quickstart:train",
        (Ref("make_data#0"), Seq("list", (Ref("n"), Ref("make_data#1"), Const(3)))),
        (("lr", Ref("lr")), ("tag", Const("it's \"v1\"\n"))),
        outputs=("train[3]#0", "train[3]#1"), types=("Model", "float"),
        options=TaskOptions(cpus=2, gpus=1, retries=2, cost=150.0, memory=16 * 2**30,
                            resources=(("tpu", 1),)),
        span=span(44, 5, 44, 40), deps=("prep",),
        attrs={"schedule.start": 1.5, "partition.device": 3},
    ))
    g.add_node(Node(
        "evaluate", "glue", "quickstart:evaluate",
        (Ref("train[3]#0"), Seq("tuple", (Const(-0.0),)), Map(((Const("k"), Const(None)),))),
        span=span(46, 5),
    ))
    g.returns = Map(((Const("accuracy"), Ref("evaluate")), (Const("loss"), Ref("train[3]#1"))))
    return g


GOLDEN = """\
dagc_ir 4
graph @quickstart  # samples/quickstart.py:60:1-70:20
  root 'samples'
  module 'quickstart'
  modules {'pkg.data': 'pkg/data.py', 'quickstart': 'quickstart.py'}
  attr schedule.makespan = 12.5
  param %n : int = 512  # samples/quickstart.py:60:17
  param %lr : float = 0.1  # samples/quickstart.py:60:27
  %prep = task @quickstart:prep() {side_effects=True, writes=['out/data.bin']}  # samples/quickstart.py:39:5-39:11
  %make_data#0 : Tensor, %make_data#1 = make_data: task @pkg.data:make_data(%n, seed=0) {cost=1s, out_size=64KiB}  # samples/quickstart.py:40:5-40:30
  %train[3]#0 : Model, %train[3]#1 : float = train[3]: task @quickstart:train(%make_data#0, [%n, %make_data#1, 3], lr=%lr, tag='it\\'s "v1"\\n') {cpus=2, gpus=1, memory=16GiB, cost=2m30s, retries=2, resources={'tpu': 1}} [partition.device=3, schedule.start=1.5] after(prep)  # samples/quickstart.py:44:5-44:40
  %evaluate = glue @quickstart:evaluate(%train[3]#0, (-0.0,), {'k': None})  # samples/quickstart.py:46:5
  return {'accuracy': %evaluate, 'loss': %train[3]#1}
"""


# ---- golden ---------------------------------------------------------------------------------------
def test_golden_text() -> None:
    assert print_graph(quickstart()) == GOLDEN


def test_golden_text_parses_back_to_the_same_graph() -> None:
    g = parse_graph(GOLDEN)
    assert dumps(g) == dumps(quickstart())
    train = g.node("train[3]")
    assert train.options.cost == 150.0 and isinstance(train.options.cost, float)
    assert train.options.memory == 16 * 2**30 and train.options.resources == (("tpu", 1),)
    assert train.kwargs[1] == ("tag", Const("it's \"v1\"\n"))
    assert g.node("evaluate").args[1] == Seq("tuple", (Const(-0.0),))
    assert math.copysign(1.0, g.node("evaluate").args[1].items[0].value) == -1.0
    assert [p.name for p in g.params] == ["n", "lr"] and g.param("lr").span == span(60, 27)
    assert g.modules == {"pkg.data": "pkg/data.py", "quickstart": "quickstart.py"}


def test_golden_json_shape() -> None:
    data = json.loads(dumps(quickstart()))
    assert data["dagc_ir"] == 4
    assert data["nodes"][1]["kwargs"] == [["seed", {"const": 0}]]
    assert data["nodes"][1]["options"] == {"cost": 1.0, "out_size": 65536}
    assert data["nodes"][2]["args"][1] == {"list": [{"ref": "n"}, {"ref": "make_data#1"}, {"const": 3}]}
    assert data["nodes"][3]["args"][2] == {"map": [[{"const": "k"}, {"const": None}]]}
    assert data["span"] == ["samples/quickstart.py", 60, 1, 70, 20]
    assert data["returns"]["map"][1] == [{"const": "loss"}, {"ref": "train[3]#1"}]


def test_dumps_is_canonical_json() -> None:
    g = quickstart()
    text = dumps(g)
    data = json.loads(text)
    assert text == json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    assert dumps(loads(text)) == text


# ---- properties -------------------------------------------------------------------------------------
@PROPERTY
@given(graphs())
def test_json_round_trip_is_exact(g: Graph) -> None:
    text = dumps(g)
    assert dumps(loads(text)) == text


@PROPERTY
@given(graphs())
def test_text_round_trip_is_exact_and_loses_nothing(g: Graph) -> None:
    text = print_graph(g)
    back = parse_graph(text)
    assert print_graph(back) == text
    assert dumps(back) == dumps(g)
    assert [n.name for n in back] == [n.name for n in g]


@PROPERTY
@given(graphs(max_nodes=5))
def test_json_validates_against_schema(g: Graph) -> None:
    jsonschema.Draft202012Validator(SCHEMA).validate(json.loads(dumps(g)))


@PROPERTY
@given(graphs(min_nodes=1, max_nodes=4))
def test_node_json_round_trip(g: Graph) -> None:
    for node in g:
        data = node_to_json(node)
        assert json.loads(json.dumps(data)) == data  # plain JSON
        back = node_from_json(json.loads(json.dumps(data)))
        assert node_to_json(back) == data
        assert print_node(back) == print_node(node)


@PROPERTY
@given(graphs(max_nodes=4), st.randoms(use_true_random=False))
def test_output_does_not_depend_on_attr_insertion_order(g: Graph, rnd) -> None:
    text, js = print_graph(g), dumps(g)

    def shuffled(d: dict) -> dict:
        items = list(d.items())
        rnd.shuffle(items)
        return dict(items)

    g.attrs = shuffled(g.attrs)
    g.modules = shuffled(g.modules)
    for node in g:
        node.attrs = shuffled(node.attrs)
    assert print_graph(g) == text
    assert dumps(g) == js


def test_schema_is_valid_and_rejects_bad_documents() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    validator = jsonschema.Draft202012Validator(SCHEMA)
    good = json.loads(dumps(quickstart()))
    assert validator.is_valid(good)
    for mutate in (
        lambda d: d.update(dagc_ir=5),
        lambda d: d["nodes"][0].pop("span"),
        lambda d: d["nodes"][0]["args"].append({"ref": 3}),
        lambda d: d["nodes"][0]["args"].append({"cosnt": 3}),
        lambda d: d["nodes"][0]["options"].update(cpuz=1),
        lambda d: d.update(span=["f.py", 1, 2]),
    ):
        bad = json.loads(json.dumps(good))
        mutate(bad)
        assert not validator.is_valid(bad)


# ---- exact values -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value",
    [0.0, -0.0, 0.1, 1e300, -1e300, 5e-324, 1e16, 2.5, 123456789.123456789, float("inf"), float("-inf"),
     10**30, -(2**70), 0, True, False, None, "", "it's", 'say "hi"', "both ' and \"", "a\\b",
     "line\nbreak\r\n", "\x00\x7f\x85\u2028", "ünïcödé 🚀", "%x", "# y"],
)
def test_constants_round_trip_exactly(value: object) -> None:
    operand = Seq("list", (Const(value),))
    for back in (parse_operand(format_operand(operand)),):
        (const,) = back.items
        assert type(const.value) is type(value)
        assert repr(const.value) == repr(value)
    g = Graph("g", params=[Param("p", Const(value), span=span(1, 1))])
    for back_graph in (loads(dumps(g)), parse_graph(print_graph(g))):
        got = back_graph.param("p").value.value
        assert type(got) is type(value) and repr(got) == repr(value)


def test_nan_round_trips() -> None:
    g = Graph("g", params=[Param("p", Const(float("nan")), span=span(1, 1))])
    assert "param %p = nan" in print_graph(g)
    assert json.loads(dumps(g))["params"][0]["value"] == {"float": "nan"}
    for back in (loads(dumps(g)), parse_graph(print_graph(g))):
        assert math.isnan(back.param("p").value.value)


def test_operand_kinds_stay_distinct() -> None:
    kinds = [Const(1), Const(1.0), Const(True), Const("1"), Seq("list", ()), Seq("tuple", ()),
             Seq("tuple", (Const(1),)), Map(()), Seq("list", (Seq("tuple", (Const(1), Const(2))),))]
    texts = [format_operand(k) for k in kinds]
    assert texts == ["1", "1.0", "True", "'1'", "[]", "()", "(1,)", "{}", "[(1, 2)]"]
    assert [parse_operand(t) for t in texts] == kinds


@pytest.mark.parametrize("name", ["train[3]", "shard[2].tokenize", "x@dev1", "a-b", "t#1", "ü.v", "a.b[1][2]"])
def test_bare_names(name: str) -> None:
    operand = Seq("list", (Ref(name), Map(((Ref(name), Ref(name)),))))
    text = format_operand(operand)
    assert text == f"[%{name}, {{%{name}: %{name}}}]"
    assert parse_operand(text) == operand


@pytest.mark.parametrize("name", ["x]", "a[b", "with space", "", "q'uote", "colon:name", "comma,name", "%"])
def test_odd_names_are_quoted(name: str) -> None:
    operand = Seq("tuple", (Ref(name), Ref(name)))
    text = format_operand(operand)
    assert text == f"(%{name!r}, %{name!r})"
    assert parse_operand(text) == operand
    g = Graph(name, params=[Param(name, Const(1), name, span(1, 1))], span=span(1, 1))
    g.add_node(Node(name + "n", name, name, (Ref(name),), ((name, Const(2)),), outputs=(name + "o",),
                    types=(name,), deps=(), attrs={name: name}, span=SourceSpan(name or "f", 2, 3)))
    g.add_node(Node(name + "m", "task", "m:f", deps=(name + "n",), span=span(3, 1)))
    text = print_graph(g)
    assert print_graph(parse_graph(text)) == text
    assert dumps(parse_graph(text)) == dumps(g)


@pytest.mark.parametrize(
    "options, text",
    [
        (TaskOptions(cost=150.0), "{cost=2m30s}"),
        (TaskOptions(cost=150), "{cost=150}"),
        (TaskOptions(cost=0.5), "{cost=500ms}"),
        (TaskOptions(cost=7.25), "{cost=7.25s}"),
        (TaskOptions(cost=3600.0), "{cost=1h}"),
        (TaskOptions(cost=0.1 + 0.2), "{cost=0.30000000000000004}"),
        (TaskOptions(cost=-0.0), "{cost=-0.0}"),
        (TaskOptions(memory=2**30, out_size=1000), "{memory=1GiB, out_size=1000}"),
        (TaskOptions(memory=3 * 2**29), "{memory=1.5GiB}"),
        (TaskOptions(memory=2**30 + 1), "{memory=1073741825}"),
        (TaskOptions(cpus=2, gpus=0.5), "{cpus=2, gpus=0.5}"),
        (TaskOptions(cpus=2.0), "{cpus=2.0}"),
        (TaskOptions(side_effects=True, ranks=4, priority=-1), "{priority=-1, side_effects=True, ranks=4}"),
        (TaskOptions(resources=(("tpu", 1.0), ("x y", 2))), "{resources={'tpu': 1.0, 'x y': 2}}"),
        (TaskOptions(reads=("a.txt", "b'c"), writes=("o",)), "{reads=['a.txt', \"b'c\"], writes=['o']}"),
        (TaskOptions(cost=float("inf"), cpus=float("nan")), "{cpus=nan, cost=inf}"),
    ],
)
def test_option_forms(options: TaskOptions, text: str) -> None:
    node = Node("t", "task", "m:f", options=options, span=span(1, 1))
    line = print_node(node)
    assert line == f"%t = task @m:f() {text}  # samples/quickstart.py:1:1"
    g = Graph("g")
    g.add_node(node)
    back = parse_graph(print_graph(g)).node("t").options
    assert repr(back) == repr(options)


def test_spans_are_exact() -> None:
    cases = [
        SourceSpan("a.py", 3, 4),
        SourceSpan("a.py", 3, 4, 3, 4),  # an end equal to the start is still kept
        SourceSpan("a.py", 3, 4, 0, 7),
        SourceSpan("C:\\x:y.py:1", 10, 2, 11, 0),
        SourceSpan("x.py:12:3-4:5", 1, 1),
        SourceSpan("file with spaces#1.py", 1, 1),
        SourceSpan(" leading", 1, 1),
        SourceSpan("'quoted'", 1, 1),
        SourceSpan("new\nline", 1, 1),
        SourceSpan("", 0, 0),
    ]
    g = Graph("g")
    for i, s in enumerate(cases):
        g.add_node(Node(f"t{i}", "task", "m:f", span=s))
    back = parse_graph(print_graph(g))
    assert [n.span for n in back] == cases
    assert [n.span for n in loads(dumps(g))] == cases


def test_node_without_outputs_and_mismatched_types() -> None:
    g = Graph("g")
    node = Node("sink", "task", "m:f", span=span(1, 1))
    node.outputs, node.types = (), ()
    g.add_node(node)
    odd = Node("odd", "task", "m:f", span=span(2, 1))
    odd.types = ("int", "str")  # malformed, but JSON keeps it as it is
    g.add_node(odd)
    assert "  () = sink: task @m:f()  #" in print_graph(g)
    back = parse_graph(print_graph(g))
    assert back.node("sink").outputs == () and back.node("sink").types == ()
    assert loads(dumps(g)).node("odd").types == ("int", "str")
    assert loads(dumps(g)).node("sink").outputs == ()


def test_returns_none_and_const_none_differ() -> None:
    g = Graph("g")
    assert "return" not in print_graph(g)
    assert parse_graph(print_graph(g)).returns is None and loads(dumps(g)).returns is None
    g.returns = Const(None)
    assert print_graph(g).endswith("  return None\n")
    assert parse_graph(print_graph(g)).returns == Const(None) and loads(dumps(g)).returns == Const(None)


def test_fused_members_are_its_body_and_round_trip() -> None:
    g = quickstart()
    members = [g.node("make_data"), g.node("train[3]")]
    fused = Node("fused0", "fused", "", (Ref("n"),), outputs=("fused0",), span=span(40, 5),
                 bodies={"members": members})
    h = Graph("h", params=[Param("n", Const(1), span=span(1, 1))])
    h.add_node(fused)
    assert "    members:\n" in print_graph(h) and fused.region is None
    for back in (loads(dumps(h)), parse_graph(print_graph(h))):
        stored = back.node("fused0").bodies["members"]
        assert [node_to_json(m) for m in stored] == [node_to_json(m) for m in members]
        assert print_graph(back) == print_graph(h) and dumps(back) == dumps(h)


def test_parser_skips_blank_and_comment_lines_and_crlf() -> None:
    text = "// ----- IR after dce -----\r\n\r\n" + GOLDEN.replace("\n", "\r\n").replace(
        "  param %n", "\n  // a comment\n  param %n"
    )
    assert dumps(parse_graph(text)) == dumps(quickstart())


def test_hand_written_text_with_defaults() -> None:
    g = parse_graph("dagc_ir 1\ngraph @g\n%a = task @m:f()\n%b = task @m:g(%a, k = [ 1 , 2 , ])\n")
    assert g.root == "." and g.module == "" and g.span == SourceSpan("<unknown>", 0, 0)
    assert g.node("b").kwargs == (("k", Seq("list", (Const(1), Const(2)))),)
    assert g.node("a").span.line == 0


def test_straight_line_10k_nodes_round_trip() -> None:
    g = Graph("chain", params=[Param("x", Const(0), "int", span(1, 1))], span=span(1, 1))
    prev = "x"
    for i in range(10_000):
        g.add_node(Node(f"step[{i}]", "task", "m:step", (Ref(prev), Const(i * 0.5)), (("lr", Const(1e-3)),),
                        types=("Tensor",), options=TaskOptions(cost=1.5, gpus=1), span=span(i + 2, 5),
                        attrs={"partition.device": i % 8}))
        prev = f"step[{i}]"
    g.returns = Ref(prev)
    text, js = print_graph(g), dumps(g)
    assert print_graph(parse_graph(text)) == text
    assert dumps(loads(js)) == js
    assert dumps(parse_graph(text)) == js


# ---- errors -----------------------------------------------------------------------------------------
HEAD = "dagc_ir 4\ngraph @g  # g.py:1:1\n"


@pytest.mark.parametrize(
    "text, line, col, fragment",
    [
        ("", 1, 1, "empty input"),
        ("dagc_ir 5\ngraph @g\n", 1, 9, "unsupported IR version 5"),
        ("dagc 1\n", 1, 1, "expected the header 'dagc_ir 4'"),
        ("dagc_ir 1\n", 2, 1, "expected a 'graph @name' line"),
        ("dagc_ir 1\nnode @g\n", 2, 1, "expected 'graph @name'"),
        (HEAD + "  %a = task @m:f(1, 'open)\n", 3, 21, "unterminated string"),
        (HEAD + "  %a = task @m:f(x=1, 2)\n", 3, 23, "positional operand after keyword operands"),
        (HEAD + "  %a = task @m:f() {cpuz=2}\n", 3, 21, "unknown task option 'cpuz'"),
        (HEAD + "  %a = task @m:f() {cpus=2, cpus=3}\n", 3, 29, "task option 'cpus' given twice"),
        (HEAD + "  %a = task @m:f(%)\n", 3, 19, "expected a value name after '%'"),
        (HEAD + "  %a = task @m:f(1 2)\n", 3, 20, "expected ',' or ')'"),
        (HEAD + "  %a = task @m:f((1))\n", 3, 18, "one-item tuple needs a trailing comma"),
        (HEAD + "  %a = task @m:f(3abc)\n", 3, 18, "malformed number"),
        (HEAD + "  %a = task @m:f(bogus)\n", 3, 18, "expected an operand"),
        (HEAD + "  %a = task @m:f('\\q')\n", 3, 19, "unknown escape sequence '\\\\q'"),
        (HEAD + "  %a = task @m:f() [k={bad}]\n", 3, 24, "bad JSON value"),
        (HEAD + "  %a = task @m:f()  # nowhere\n", 3, 23, "malformed source location"),
        (HEAD + "  %a = task @m:f() extra\n", 3, 20, "expected '# file:line:col' or the end of the line"),
        (HEAD + "  %a = task m:f()\n", 3, 13, "expected '@' before the target"),
        (HEAD + "  %a = task @m:f()\n\n  %a = task @m:f()\n", 5, 3, "duplicate node name 'a'"),
        (HEAD + "  root samples\n", 3, 8, "expected a quoted string after 'root'"),
        (HEAD + "  root 'a'\n  root 'b'\n", 4, 3, "'root' given twice"),
        (HEAD + "  modules {'a': 1}\n", 3, 11, "'modules' takes a dict"),
        (HEAD + "  attr a.b = 1\n  attr a.b = 2\n", 4, 8, "graph attribute 'a.b' given twice"),
        (HEAD + "  bogus 1\n", 3, 3, "expected a node"),
        (HEAD + "  param n = 1\n", 3, 9, "expected '%' before the parameter name"),
        (HEAD + "  %a = task @m:f() after(b\n", 3, 27, "expected ',' or ')' in after(...)"),
        (HEAD + "  %a = task @m:f() {cost=[%x]}\n", 3, 26, "option 'cost' must be a constant"),
        (HEAD + "  () = task @m:f()\n", 3, 8, "a node without outputs must be named"),
    ],
)
def test_parse_errors_point_at_line_and_column(text: str, line: int, col: int, fragment: str) -> None:
    with pytest.raises(IRParseError) as info:
        parse_graph(text)
    err = info.value
    assert fragment in err.message
    assert (err.line, err.col) == (line, col), err.message
    assert str(err).startswith(f"{line}:{col}: ")


@pytest.mark.parametrize(
    "mutate, fragment",
    [
        (lambda d: d.update(dagc_ir=5), "unsupported dagc IR version 5: this dagc reads versions 1, 2, 3, 4"),
        (lambda d: d.update(dagc_ir=True), "unsupported dagc IR version True"),
        (lambda d: d.pop("dagc_ir"), "not a dagc IR document"),
        (lambda d: d.pop("nodes"), "graph has no 'nodes' key"),
        (lambda d: d.update(extra=1), "graph has unknown key 'extra'"),
        (lambda d: d["nodes"][1].update(args=[{"cosnt": 1}]), "nodes[1]: node 'make_data': unknown operand tag"),
        (lambda d: d["nodes"][1].update(span=["f", 1]), "span must be [file, line, col, end_line, end_col]"),
        (lambda d: d["nodes"][1]["options"].update(cpuz=1), "unknown task option 'cpuz'"),
        (lambda d: d["nodes"][1].update(outputs="x"), "'outputs' must be an array of strings"),
        (lambda d: d["nodes"].append(d["nodes"][0]), "nodes[4]: duplicate node name 'prep'"),
        (lambda d: d["params"][0].update(value={"float": "infinity"}), "param 'n': 'float' operand must be"),
    ],
)
def test_json_errors_are_clear(mutate, fragment: str) -> None:
    data = json.loads(dumps(quickstart()))
    mutate(data)
    with pytest.raises(IRFormatError) as info:
        graph_from_json(data)
    assert fragment in str(info.value)


def test_loads_rejects_non_json_and_nan_attrs() -> None:
    with pytest.raises(IRFormatError, match="not valid JSON"):
        loads("{")
    g = Graph("g", attrs={"x.y": float("nan")})
    with pytest.raises(IRFormatError, match="NaN and infinite floats"):
        dumps(g)
    assert parse_graph(print_graph(g)).attrs["x.y"] != parse_graph(print_graph(g)).attrs["x.y"]  # NaN
    with pytest.raises(IRFormatError, match="string keys"):
        dumps(Graph("g", attrs={"x.y": {1: "a", "b": 2}}))


def test_graph_to_json_matches_loads_input() -> None:
    g = quickstart()
    assert graph_to_json(graph_from_json(graph_to_json(g))) == json.loads(dumps(g))


# ---- packaging --------------------------------------------------------------------------------------
def test_public_api_is_exported() -> None:
    for name in ("Graph", "Node", "Param", "Ref", "Const", "Seq", "Map", "SourceSpan", "TaskOptions",
                 "print_graph", "parse_graph", "dumps", "loads", "verify"):
        assert name in ir.__all__ and getattr(ir, name) is not None
    from dagc.ir.verifier import verify

    assert ir.verify is verify


@pytest.mark.parametrize("first", ["dagc.diagnostics", "dagc.ir", "dagc.ir.verifier", "dagc.ir.parser"])
def test_import_order_has_no_cycle(first: str) -> None:
    code = f"import {first}\nfrom dagc.ir import verify, print_graph\nprint('ok')"
    result = run_python(["-c", code], capture_output=True, text=True, cwd=REPO)
    assert result.stdout.strip() == "ok", result.stderr


def test_output_is_independent_of_hash_seed() -> None:
    code = (
        "import sys; sys.path.insert(0, '.')\n"
        "from tests.test_ir_roundtrip import quickstart\n"
        "from dagc.ir import dumps, print_graph\n"
        "g = quickstart(); g.attrs.update({k: {str(k): [k, None]} for k in 'zyxwvu'})\n"
        "print(print_graph(g) + dumps(g))\n"
    )
    outputs = set()
    for seed in ("0", "1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        result = run_python(["-c", code], capture_output=True, text=True, cwd=REPO,
                                env=env)
        assert result.returncode == 0, result.stderr
        outputs.add(result.stdout)
    assert len(outputs) == 1


# ---- version 1 -----------------------------------------------------------------------------------------
V1 = REPO / "tests" / "golden" / "v1"


# facts the frontend computes that it did not when the versioned files were saved (not part of the format)
_NEWER_FACTS = ("effects.fresh", "effects.rng_advances")


def _without_newer_facts(graph):  # type: ignore[no-untyped-def]
    from dagc.ir.regions import walk

    for node in list(graph):
        for n in (node, *walk(node)):
            n.effects = replace(n.effects, fresh=False, rng_advances=False)
    return graph


def test_version_1_files_load_as_the_current_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    """IR saved by a release that kept region bodies as node JSON in attributes (version 1) loads, from
    JSON and from text, as exactly the graph this release compiles from the same script."""
    from dagc.frontend import compile_source

    old_json = (V1 / "regions_v1.ir.json").read_text(encoding="utf-8")
    old_text = (V1 / "regions_v1.ir.txt").read_text(encoding="utf-8")
    assert '"dagc_ir": 1' in old_json and '"region.body"' in old_json and old_text.startswith("dagc_ir 1\n")
    monkeypatch.chdir(V1)
    fresh = compile_source(Path("regions_v1.py")).graph
    assert fresh is not None
    fresh = _without_newer_facts(fresh)
    from_json, from_text = loads(old_json), parse_graph(old_text)
    assert dumps(from_json) == dumps(fresh) == dumps(from_text)
    assert ir.verify(from_json) == []
    [loop] = [n for n in from_json if n.op == "loop"]
    assert "region.body" not in loop.attrs and [n.op for n in loop.bodies["body"]] == ["glue", "cond", "glue"]
    cond = loop.bodies["body"][1]
    assert [n.name for n in cond.bodies["then"]] == ["loop.cond.then.step"]
    assert json.loads(dumps(from_json))["dagc_ir"] == 4


# ---- every sample and port ---------------------------------------------------------------------------
_SOURCES = PIPELINE_SOURCES


@pytest.mark.parametrize("source", _SOURCES, ids=lambda p: p.stem)
def test_compiled_samples_round_trip_through_text_and_json(source: Path) -> None:
    """Every region kind, payload and fused group a real pipeline compiles to reads back exactly (each pipeline
    of a file that defines several)."""
    from dagc.driver import compile_file
    from dagc.frontend import list_pipelines

    for pipeline in list_pipelines(source):
        g = compile_file(source, pipeline_name=pipeline, passes="verify,dce,cse,fuse",
                         params=PIPELINE_PARAMS.get(source.name))
        text, js = print_graph(g), dumps(g)
        assert print_graph(parse_graph(text)) == text and dumps(parse_graph(text)) == js
        assert dumps(loads(js)) == js and print_graph(loads(js)) == text
        assert ir.verify(parse_graph(text)) == []


# ---- version 3 -----------------------------------------------------------------------------------------
V3 = REPO / "tests" / "golden" / "v3"


def test_version_3_files_load_as_the_current_graph(capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """IR saved by a release that kept effects, placement and schedule as attributes (version 3) loads, from
    JSON and from text, as exactly the graph this release compiles: typed records, the same text but for the
    version line, and the values they name renamed like operands."""
    from dagc.cli import main

    old_json = (V3 / "quickstart_v3.ir.json").read_text(encoding="utf-8")
    old_text = (V3 / "quickstart_v3.ir.txt").read_text(encoding="utf-8")
    assert '"dagc_ir": 3' in old_json and '"partition.device"' in old_json and old_text.startswith("dagc_ir 3\n")
    monkeypatch.chdir(REPO)
    assert main(["ir", "samples/quickstart.py", "--format", "json", "--cluster", "2"]) == 0
    fresh = capsys.readouterr().out
    from_json, from_text = loads(old_json), parse_graph(old_text)
    assert dumps(from_json) == dumps(from_text) == fresh
    assert print_graph(from_text) == "dagc_ir 4" + old_text[len("dagc_ir 3"):]
    train = from_json.node("train")
    assert "partition.device" not in train.attrs and train.placement.devices == (1,)
    assert train.effects.rng and train.effects.seeded and train.placement.finish > train.placement.start
    data = json.loads(fresh)
    assert data["dagc_ir"] == 4 and all("partition.device" not in n["attrs"] for n in data["nodes"])


def test_typed_records_name_values_as_operands() -> None:
    """A value a record names (what a task mutates) is renamed with the node's arguments, and its readers are
    found from the graph's users index."""
    g = parse_graph(HEAD + "  %x = task @m:f()  # g.py:2:1\n"
                    "  %y = task @m:g(%x) [effects.mutates=[\"x\"]]  # g.py:3:1\n")
    assert g.node("y").effects.mutated == ("x",) and g.consumers("x") == ["y"]
    g.replace_uses({"x": "x2"})
    assert g.node("y").effects.mutated == ("x2",) and g.node("y").args == (Ref("x2"),)
    assert g.consumers("x") == [] and g.consumers("x2") == ["y"]
    with pytest.raises(IRParseError, match="partition.device"):
        parse_graph(HEAD + "  %x = task @m:f() [partition.device=\"gpu\"]  # g.py:2:1\n")


# ---- version 2 -----------------------------------------------------------------------------------------
V2 = REPO / "tests" / "golden" / "v2"


def test_version_2_files_load_as_the_current_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    """IR saved by a release that kept region payloads as JSON in attributes and fused members in
    `fuse.members` (version 2) loads, from JSON and from text, as exactly the graph this release compiles:
    a loop with a branch and a break, a map, a try, a fused group."""
    from dagc.driver import compile_file

    old_json = (V2 / "regions_v2.ir.json").read_text(encoding="utf-8")
    old_text = (V2 / "regions_v2.ir.txt").read_text(encoding="utf-8")
    assert '"dagc_ir": 2' in old_json and '"fuse.members"' in old_json and old_text.startswith("dagc_ir 2\n")
    assert "region.carried=" in old_text and "region.items=" in old_text
    monkeypatch.chdir(V2)
    fresh = _without_newer_facts(compile_file(Path("regions_v2.py"), passes="verify,dce,fuse"))
    from_json, from_text = loads(old_json), parse_graph(old_text)
    assert dumps(from_json) == dumps(fresh) == dumps(from_text)
    assert print_graph(from_text) == print_graph(fresh)
    assert ir.verify(from_json) == []
    loop, map_, try_, fused = (from_json.node(n) for n in ("loop", "map", "try", "fused.small"))
    assert loop.region.args == {"body": ("loop@i", "loop@x")} and loop.region.exit.at == 3
    assert loop.region.iter == Seq("list", tuple(Const(i) for i in range(5)))
    assert map_.region.args == {"body": ("map@s",)} and map_.region.init == (Seq("list", ()),)
    assert set(try_.region.yields) == {"body", "finally"}
    assert [m.name for m in fused.bodies["members"]] == ["small", "smaller"]
    assert not any(k in n.attrs for n in from_json for k in ("region.yield", "region.carried", "fuse.members"))


def test_a_malformed_version_2_payload_is_an_error_at_its_line() -> None:
    with pytest.raises(IRParseError, match=r"region 'c': `region.then.yield`.*bogus") as info:
        parse_graph("dagc_ir 2\ngraph @g  # g.py:1:1\n  %x = task @m:f()  # g.py:2:1\n"
                    "  %c = cond @if(%x) [region.then.yield=[{\"bogus\": 1}], region.else.yield=[]]  # g.py:3:1\n"
                    "    then:\n      %c.then.a = task @m:a(%x)  # g.py:4:1\n    else:\n")
    assert info.value.line == 4


def test_a_region_whose_block_yields_nothing_round_trips_and_is_reported() -> None:
    g = parse_graph(HEAD + "  %x = task @m:f()  # g.py:2:1\n"
                    "  %c = cond @if(%x)  # g.py:3:1\n"
                    "    then:\n      %c.then.a = task @m:a(%x)  # g.py:4:1\n      yield %c.then.a\n    else:\n")
    c = g.node("c")
    assert [n.name for n in c.bodies["then"]] == ["c.then.a"] and c.bodies["else"] == []
    assert set(c.region.yields) == {"then"}
    text = print_graph(g)
    assert print_graph(parse_graph(text)) == text and dumps(parse_graph(text)) == dumps(g) == dumps(loads(dumps(g)))
    assert [d.code for d in ir.verify(g)] == ["DAGC205"] and "`else` body yields nothing" in ir.verify(g)[0].message


def test_bodies_on_a_task_or_an_unknown_body_are_malformed() -> None:
    g = parse_graph(HEAD + "  %x = task @m:f()  # g.py:2:1\n    then:\n      %y = task @m:g()  # g.py:3:1\n")
    assert [d.code for d in ir.verify(g)] == ["DAGC205"]
    assert "a `task` node has no `then` body" in ir.verify(g)[0].message
    text = print_graph(g)
    assert dumps(parse_graph(text)) == dumps(loads(dumps(g)))
