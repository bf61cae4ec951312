"""The IR verifier: each invariant, where its diagnostics point, and that it stays linear."""

from __future__ import annotations

import sys

from hypothesis import HealthCheck, given, settings

from dagc.diagnostics import Diagnostic, Severity, render_text
from dagc.ir import Const, Graph, Map, Node, Param, Ref, Seq, SourceSpan, TaskOptions, parse_graph, verify
from tests.ir_strategies import graphs
from tests.property import examples
from tests.test_ir_roundtrip import quickstart


def span(line: int, col: int = 5) -> SourceSpan:
    return SourceSpan("p.py", line, col, line, col + 10)


def task(name: str, *args, line: int, **fields) -> Node:
    return Node(name, "task", f"p:{name}", tuple(args), span=span(line), **fields)


def codes(diags: list[Diagnostic]) -> list[str]:
    return [d.code for d in diags]


def ir(body: str) -> Graph:
    return parse_graph("dagc_ir 1\ngraph @g  # p.py:1:1\n" + body)


# ---- valid graphs ----------------------------------------------------------------------------------
@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_generated_graphs_are_valid(g: Graph) -> None:
    assert verify(g) == []


def test_quickstart_is_valid() -> None:
    assert verify(quickstart()) == []


def test_every_diagnostic_is_an_error_that_renders() -> None:
    g = ir("  %a = bogus @p:a(%nowhere)  # p.py:3:5\n")
    diags = verify(g)
    assert codes(diags) == ["DAGC205", "DAGC202"]
    assert all(d.severity is Severity.ERROR for d in diags)
    text = render_text(diags, {"p.py": "\n\n    a = bogus(nowhere)\n"})
    assert "p.py:3:5: error[DAGC205]: node `a` has unknown op 'bogus'" in text
    assert "p.py:3:5: error[DAGC202]: `a` uses `%nowhere`, which no parameter or node produces" in text


# ---- DAGC201 cycles ----------------------------------------------------------------------------------
def test_cycle_lists_the_path_with_one_note_per_task() -> None:
    g = Graph("g", params=[Param("x", Const(1), span=span(1))], span=span(1))
    g.add_node(task("a", Ref("x"), Ref("c"), line=3))
    g.add_node(task("b", Ref("a"), line=4))
    g.add_node(task("c", Ref("b"), line=5))
    g.add_node(task("d", Ref("c"), line=6))  # downstream of the cycle, not on it
    diags = verify(g)
    assert codes(diags) == ["DAGC201"]  # no program-order noise on top of the cycle
    (diag,) = diags
    assert diag.message == "cycle in the graph: `a` -> `b` -> `c` -> `a`"
    assert diag.span == span(3)
    assert [n.message for n in diag.notes] == [
        "`b` uses `%a` from `a`",
        "`c` uses `%b` from `b`",
        "`a` uses `%c` from `c`",
    ]
    assert [n.span for n in diag.notes] == [span(4), span(5), span(3)]


def test_cycle_through_deps_and_self_dependence() -> None:
    g = Graph("g")
    g.add_node(task("a", line=3, deps=("b",)))
    g.add_node(task("b", Ref("a"), line=4))
    (diag,) = verify(g)
    assert diag.code == "DAGC201" and diag.message == "cycle in the graph: `a` -> `b` -> `a`"
    assert [n.message for n in diag.notes] == ["`b` uses `%a` from `a`", "`a` runs after `b`"]

    h = Graph("h")
    h.add_node(task("loop", line=3, deps=("loop",)))
    (diag,) = verify(h)
    assert diag.code == "DAGC201" and diag.message == "cycle in the graph: `loop` -> `loop`"
    assert len(diag.notes) == 1 and diag.notes[0].span == span(3)


def test_cycle_found_from_text_form() -> None:
    g = ir(
        "  %a#0, %a#1 = a: task @p:a(%c)  # p.py:3:5\n"
        "  %b = task @p:b([%a#1])  # p.py:4:5\n"
        "  %c = task @p:c({'k': %b})  # p.py:5:5\n"
    )
    (diag,) = verify(g)
    assert diag.message == "cycle in the graph: `a` -> `b` -> `c` -> `a`"
    assert diag.notes[0].message == "`b` uses `%a#1` from `a`"


def test_long_cycle_does_not_recurse() -> None:
    n = 20_000
    g = Graph("g")
    for i in range(n):
        g.add_node(task(f"t{i}", Ref(f"t{(i - 1) % n}"), line=i + 2))
    (diag,) = verify(g)
    assert diag.code == "DAGC201" and len(diag.notes) == n
    assert diag.message.startswith("cycle in the graph: `t0` -> `t1` -> `t2`")
    assert diag.message.endswith(f"`t{n - 1}` -> `t0`")


# ---- DAGC202 unbound inputs ----------------------------------------------------------------------------
def test_unbound_reference_dep_and_return() -> None:
    g = ir(
        "  %a#0, %a#1 = a: task @p:a()  # p.py:3:5\n"
        "  %b = task @p:b(%a, [%typo])  # p.py:4:5\n"
        "  %c = task @p:c() after(nobody)  # p.py:5:5\n"
        "  return (%b, %gone)\n"
    )
    diags = verify(g)
    assert codes(diags) == ["DAGC202"] * 4
    assert diags[0].message == "`b` uses `%a`, which no parameter or node produces"
    assert diags[0].hint == "node `a` produces %a#0, %a#1"
    assert diags[0].span == SourceSpan("p.py", 4, 5)
    assert diags[1].message == "`b` uses `%typo`, which no parameter or node produces"
    assert diags[1].hint is None
    assert diags[2].message == "`c` must run after `nobody`, but there is no node `nobody`"
    assert diags[2].span == SourceSpan("p.py", 5, 5)
    assert diags[3].message == "the graph returns `%gone`, which no parameter or node produces"
    assert diags[3].span == SourceSpan("p.py", 1, 1)


def test_parameters_bind_references() -> None:
    g = ir("  param %lr = 0.1  # p.py:2:1\n  %a = task @p:a(lr=%lr)  # p.py:3:5\n  return %lr\n")
    assert verify(g) == []


# ---- DAGC203 producers -----------------------------------------------------------------------------------
def test_value_with_two_producers() -> None:
    g = Graph("g")
    g.add_node(task("a", line=3, outputs=("x",)))
    g.add_node(task("b", line=4, outputs=("x",)))
    (diag,) = verify(g)
    assert diag.code == "DAGC203"
    assert diag.message == "value `%x` is produced by both `a` and `b`"
    assert diag.span == span(4)
    assert diag.notes[0].message == "first produced by `a`" and diag.notes[0].span == span(3)


def test_parameter_clashes() -> None:
    g = Graph("g", params=[Param("x", Const(1), span=span(1)), Param("x", Const(2), span=span(2))])
    g.add_node(task("x", line=3))
    diags = verify(g)
    assert codes(diags) == ["DAGC203", "DAGC203"]
    assert diags[0].message == "parameter `x` is declared twice" and diags[0].span == span(2)
    assert diags[0].notes[0].span == span(1)
    assert diags[1].message == "`%x` is both a parameter and an output of `x`" and diags[1].span == span(3)


# ---- DAGC204 resources -------------------------------------------------------------------------------------
def test_invalid_resources() -> None:
    g = Graph("g")
    g.add_node(task("a", line=3, options=TaskOptions(cpus=-1, gpus=1.5, ranks=0, memory=-5)))
    g.add_node(task("b", line=4, options=TaskOptions(cost=float("inf"), retries=-1,
                                                     resources=(("tpu", -2.0),))))
    diags = verify(g)
    assert codes(diags) == ["DAGC204"] * 7
    messages = [d.message for d in diags]
    assert messages[0] == "task `a`: cpus must be a non-negative number, got -1"
    assert "task `a`: gpus above 1 must be a whole number, got 1.5" in messages
    assert "task `a`: ranks must be a positive integer, got 0" in messages
    assert "task `a`: memory must be a non-negative number of bytes, got -5" in messages
    assert [d.span for d in diags[4:]] == [span(4)] * 3


def test_options_of_the_wrong_type_are_reported_not_raised() -> None:
    g = Graph("g")
    g.add_node(task("a", line=3, options=TaskOptions(cost="1s")))  # type: ignore[arg-type]
    g.add_node(task("b", line=4, options={"cpus": 1}))  # type: ignore[arg-type]
    diags = verify(g)
    assert codes(diags) == ["DAGC204", "DAGC204"]
    assert diags[0].message.startswith("task `a`: an option has the wrong type")
    assert diags[1].message == "node `b` has options of type dict"


# ---- DAGC205 malformed ----------------------------------------------------------------------------------------
def test_malformed_nodes() -> None:
    g = Graph("g")
    g.add_node(Node("a", "frobnicate", "p:a", span=span(3)))
    g.add_node(Node("b", "task", "", span=span(4)))
    g.add_node(Node("g", "glue", "", span=span(5)))  # only tasks need a target
    c = task("c", line=6, outputs=("c#0", "c#1"))
    c.types = ("int",)
    g.add_node(c)
    g.add_node(task("d", line=7, outputs=("d", "d")))
    e = task("e", line=8)
    e.outputs, e.types = (), ()
    g.add_node(e)
    diags = verify(g)
    assert [(d.code, d.message) for d in diags] == [
        ("DAGC205", "node `a` has unknown op 'frobnicate'"),
        ("DAGC205", "task `b` has no target"),
        ("DAGC205", "node `c` has 2 outputs but 1 types"),
        ("DAGC205", "node `d` lists output `%d` twice"),
        ("DAGC205", "node `e` has no outputs"),
    ]
    assert diags[0].hint == "ops are: task, fused, transfer, glue, cond, loop, map, try"
    assert [d.span for d in diags] == [span(3), span(4), span(6), span(7), span(8)]


def test_malformed_operands_and_arguments() -> None:
    g = Graph("g")
    g.add_node(task("a", Const(object()), Seq("set", ()), 3, line=3))  # type: ignore[arg-type]
    g.add_node(task("b", line=4, kwargs=(("k", Const(1)), ("k", Const(2)))))
    g.add_node(task("c", Map(((Const(1),),)), line=5))  # type: ignore[arg-type]
    diags = verify(g)
    assert codes(diags) == ["DAGC205"] * 5
    assert diags[0].message == "node `a` has a malformed operand: constant of type object"
    assert diags[1].message == "node `a` has a malformed operand: sequence of kind 'set'"
    assert diags[2].message == "node `a` has a malformed operand: int value 3 is not an operand"
    assert diags[3].message == "node `b` has a malformed operand: argument 'k' is given twice"
    assert diags[4].message.startswith("node `c` has a malformed operand: dict item")


def test_node_renamed_in_place() -> None:
    g = Graph("g")
    g.add_node(task("a", line=3))
    g.add_node(task("b", line=4))
    g.node("b").name = "a"
    diags = verify(g)
    assert codes(diags) == ["DAGC205", "DAGC205"]  # its output is still `%b`
    assert diags[0].message == "node `a` is registered in the graph under the name `b`"
    assert diags[1].message == "two nodes are named `a`"


def test_program_order_must_be_topological() -> None:
    g = ir(
        "  %a = task @p:a(%b)  # p.py:3:5\n"
        "  %b = task @p:b()  # p.py:4:5\n"
        "  %c = task @p:c() after(d)  # p.py:5:5\n"
        "  %d = task @p:d()  # p.py:6:5\n"
    )
    diags = verify(g)
    assert [(d.code, d.message) for d in diags] == [
        ("DAGC205", "`a` depends on `%b` of `b`, which comes later in program order"),
        ("DAGC205", "`c` depends on node `d` of `d`, which comes later in program order"),
    ]
    assert diags[0].span == SourceSpan("p.py", 3, 5)
    g.reorder(g.topological_order())
    assert verify(g) == []


# ---- DAGC206 spans --------------------------------------------------------------------------------------------
def test_missing_span() -> None:
    g = Graph("g")
    g.add_node(Node("a", "task", "p:a"))
    g.add_node(Node("b", "task", "p:b", span=SourceSpan("p.py", 0, 0)))
    g.add_node(Node("c", "task", "p:c", span=SourceSpan("p.py", 9, 1)))
    diags = verify(g)
    assert [(d.code, d.message) for d in diags] == [
        ("DAGC206", "node `a` has no source location"),
        ("DAGC206", "node `b` has no source location"),
    ]
    assert "span of the node it replaces" in (diags[0].hint or "")


def test_all_problems_are_collected() -> None:
    g = Graph("g")
    g.add_node(Node("a", "nope", "", (Ref("zz"),), options=TaskOptions(cpus=-1)))
    assert sorted(codes(verify(g))) == ["DAGC202", "DAGC204", "DAGC205", "DAGC206"]


# ---- speed -----------------------------------------------------------------------------------------------------
def _graphs(n: int) -> tuple[Graph, Graph]:
    """A chain of `n` tasks, and `n` leaves that one sink reads."""
    chain = Graph("chain", params=[Param("x", Const(0), span=span(1))])
    prev = "x"
    for i in range(n):
        chain.add_node(task(f"t{i}", Ref(prev), Const(i), line=i + 2, deps=(f"t{i - 1}",) if i else ()))
        prev = f"t{i}"
    wide = Graph("wide")
    for i in range(n):
        wide.add_node(task(f"leaf{i}", line=i + 2))
    wide.add_node(task("sink", Seq("list", tuple(Ref(f"leaf{i}") for i in range(n))), line=1))
    return chain, wide


def _calls_to_verify(graph: Graph) -> int:
    """The function calls (Python and C) that verifying `graph` makes: a count of its work that, unlike its
    duration, does not depend on the machine or its load."""
    calls = 0

    def count(frame, event: str, arg) -> None:  # type: ignore[no-untyped-def]
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    sys.setprofile(count)
    try:
        assert verify(graph) == []
    finally:
        sys.setprofile(None)
    return calls


def test_verify_work_grows_linearly_with_the_graph() -> None:
    for index, shape in enumerate(("chain", "wide")):
        work = [_calls_to_verify(_graphs(n)[index]) for n in (2_000, 8_000)]
        # four times the tasks: four times the work when linear (sixteen times were it quadratic)
        assert work[1] <= 4.5 * work[0], (shape, work)
