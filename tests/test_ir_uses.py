"""The graph's users and waiters indexes stay current however a node changes, and rewrites use them."""

from __future__ import annotations

import copy

import pytest

from dagc.ir import regions
from dagc.ir.core import Graph, Node, clone_node
from dagc.ir.facts import Effects, Placement, Reduction
from dagc.ir.location import SourceSpan
from dagc.ir.order import CycleError, topological_order
from dagc.ir.types import Ref, Seq


def chain(n: int) -> Graph:
    g = Graph("g")
    g.add_node(Node("n0", "task", "m:f"))
    for i in range(1, n):
        g.add_node(Node(f"n{i}", "task", "m:f", (Ref(f"n{i - 1}"),)))
    return g


def test_setters_keep_readers_and_successors_current() -> None:
    g = chain(3)
    assert g.consumers("n0") == ["n1"] and g.successors("n0") == ["n1"]
    g.node("n2").args = (Seq("list", (Ref("n0"), Ref("n1"))),)  # written directly, not through the graph
    assert g.consumers("n0") == ["n1", "n2"] and g.successors("n0") == ["n1", "n2"]
    g.node("n1").kwargs = (("x", Ref("n2")),)
    g.node("n1").args = ()
    assert g.consumers("n0") == ["n2"] and g.find_cycle() == ["n1", "n2"]
    g.node("n1").kwargs = ()
    g.node("n1").deps = ("n0",)
    assert g.waiters("n0") == ["n1"] and g.successors("n0") == ["n1", "n2"] and g.find_cycle() is None
    g.node("n0").outputs = ("a", "b")
    assert g.producer("n0") is None and g.producer("a") is g.node("n0") and g.successors("n0") == ["n1"]


def test_removing_and_replacing_nodes_updates_the_indexes() -> None:
    g = chain(4)
    removed = g.remove_node("n2")
    removed.args = (Ref("n0"),)  # a node the graph no longer holds changes nothing in it
    assert g.consumers("n1") == [] and g.consumers("n0") == ["n1"] and g.producer("n2") is None
    g.replace_node("n1", Node("m1", "task", "m:g", (Ref("n0"), Ref("n3"))))
    assert [n.name for n in g] == ["n0", "m1", "n3"] and g.consumers("n3") == ["m1"]
    assert g.successors("n3") == ["m1"] and g.topological_order() == ["n0", "n3", "m1"]
    g.reorder(["n0", "n3", "m1"])
    assert g.consumers("n0") == ["m1"] and g.successors("n0") == ["m1"]


def test_replace_uses_touches_only_the_readers() -> None:
    g = chain(500)
    touched: list[str] = []
    original = regions.substitute_node

    def counting(node: Node, mapping: object) -> None:
        touched.append(node.name)
        original(node, mapping)  # type: ignore[arg-type]

    regions.substitute_node = counting  # type: ignore[assignment]
    try:
        g.replace_uses({"n10": "n9"})
    finally:
        regions.substitute_node = original  # type: ignore[assignment]
    assert touched == ["n11"] and g.node("n11").args == (Ref("n9"),) and g.consumers("n9") == ["n10", "n11"]


def test_typed_records_are_renamed_and_read_like_operands() -> None:
    g = chain(2)
    g.add_node(Node("s", "glue", "_0 + _1", (Ref("n0"), Ref("n1")), comm=Reduction("sum", (Ref("n0"), Ref("n1")))))
    g.node("n1").effects = Effects(mutates=(Ref("n0"),), rng="draws")
    g.replace_uses({"n0": "x"})
    assert g.node("n1").effects.mutated == ("x",) and g.node("s").comm.operands == (Ref("x"), Ref("n1"))
    assert [o for o in regions.operands_read(g.node("n1")) if o == Ref("x")] == [Ref("x"), Ref("x")]


def test_text_spelling_in_attrs_goes_to_the_records() -> None:
    node = Node("a", "task", "m:f", attrs={"partition.device": [1, 2], "schedule.start": 1.5, "stages.stage": 0})
    assert node.attrs == {"stages.stage": 0} and node.placement == Placement((1, 2), 1.5) and node.devices == (1, 2)
    node.attrs = {"effects.rng": "why", "effects.seeded": True}
    assert node.attrs == {} and node.effects.rng == "why" and node.effects.seeded
    assert node.attributes() == {"effects.rng": "why", "effects.seeded": True, "partition.device": [1, 2],
                                 "schedule.start": 1.5}


def test_a_node_belongs_to_one_graph_and_copies_to_none() -> None:
    g, other = chain(2), Graph("other")
    with pytest.raises(ValueError, match="belongs to another graph"):
        other.add_node(g.node("n1"))
    twin, deep = clone_node(g.node("n1")), copy.deepcopy(g.node("n1"))
    other.add_node(twin)
    twin.args = ()
    deep.args = ()
    assert g.consumers("n0") == ["n1"] and other.consumers("n0") == []


def test_a_change_behind_the_setters_is_reported_by_the_verifier() -> None:
    from dagc.ir.verifier import verify

    g = chain(3)
    for node in g:
        node.span = SourceSpan("g.py", 1, 1)
    assert verify(g) == [] and g.consumers("n0") == ["n1"]  # (the users index is built at its first use)
    g.node("n2").__dict__["args"] = (Ref("n0"),)
    (diag,) = verify(g)
    assert diag.code == "DAGC205" and "what `n2` reads" in diag.message
    g.invalidate()
    assert verify(g) == [] and g.consumers("n0") == ["n1", "n2"]
    g.node("n2").__dict__["outputs"] = ("renamed",)
    (diag,) = verify(g)
    assert diag.code == "DAGC205" and "what `n2` makes" in diag.message


def test_the_users_index_built_at_its_first_use_sees_the_nodes_as_they_are_then() -> None:
    from dagc.ir.verifier import verify

    g = chain(3)
    for node in g:
        node.span = SourceSpan("g.py", 1, 1)
    g.node("n2").__dict__["args"] = (Ref("n0"),)  # before anything asked who reads a value
    assert verify(g) == []
    assert g.consumers("n0") == ["n1", "n2"] and g.successors("n0") == ["n1", "n2"] and g.consumers("n1") == []


def test_renaming_an_output_before_the_index_is_built_moves_its_producer() -> None:
    g = chain(3)
    g.node("n1").outputs = ("m1",)
    assert g.producer("m1") is g.node("n1") and g.producer("n1") is None
    assert g.predecessors("n2") == [] and g.consumers("n1") == ["n2"]


def test_one_order_prefers_the_given_order_and_names_a_cycle() -> None:
    assert topological_order(["c", "a", "b"], {"c": [], "a": ["b"], "b": []}.__getitem__) == ["c", "b", "a"]
    assert topological_order([1, 2, 3], lambda i: [], priority=lambda i: -i) == [3, 2, 1]
    with pytest.raises(CycleError) as info:
        topological_order(["a", "b", "c"], {"a": ["c"], "b": ["a"], "c": ["b"]}.__getitem__)
    cycle = info.value.cycle
    assert sorted(cycle) == ["a", "b", "c"] and all(  # each is read by the next: data-flow order
        {"a": "b", "b": "c", "c": "a"}[x] == cycle[(k + 1) % 3] for k, x in enumerate(cycle))
