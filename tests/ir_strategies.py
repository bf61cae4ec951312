"""Hypothesis strategies for random valid IR graphs (for round-trip and pass property tests).

    from hypothesis import given
    from tests.ir_strategies import graphs

    @given(graphs(max_nodes=20))
    def test_something(graph): ...

Every graph drawn passes `verify`: nodes are in a topological program order, every reference is
bound, every value has one producer, options are valid and every node has a span. The contents
are chosen to be awkward for serializers: names such as `train[3]`, `shard[2].tokenize` and
`x@dev1` (and a few that need quoting), constants such as -0.0, 1e300, inf, nan, unicode,
quotes, backslashes and newlines, nested lists/tuples/dicts, multi-output nodes, every
`TaskOptions` field, namespaced attributes holding arbitrary JSON, ordering deps, and spans
whose file names contain colons or spaces.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from functools import cache
from typing import Any

from hypothesis import strategies as st

from dagc.ir.core import OPS, Graph, Node, Param, output_name
from dagc.ir.facts import Effects, FilePaths, Placement, Reduction, Transfer
from dagc.ir.location import SourceSpan
from dagc.ir.types import Const, Map, Operand, Ref, Seq, TaskOptions

__all__ = [
    "graphs",
    "spans",
    "scalars",
    "constants",
    "operands",
    "task_options",
    "json_values",
    "attrs",
    "type_names",
    "TRICKY_STRINGS",
    "TRICKY_FLOATS",
]

TRICKY_STRINGS = (
    "",
    "plain",
    "it's",
    'say "hi"',
    "both ' and \"",
    "back\\slash",
    "line\nbreak\r\n",
    "tab\there",
    "ünïcödé ✓ 日本語",
    "emoji 🚀",
    "\x00\x1f\x7f",
    "\u2028\u2029\x85",
    "%not_a_ref",
    "# not a comment",
    "[brackets], {braces}: (parens)",
)
TRICKY_FLOATS = (0.0, -0.0, 1.0, 0.1, 1e300, -1e300, 5e-324, 1e-7, 2.5e16, float("inf"), float("-inf"), float("nan"))

# Node name shapes: PREFIX + index + SUFFIX, which is injective because prefixes have no digits and
# suffixes do not start with one. Parameters use the prefix "p", which no node uses.
_NODE_PREFIXES = ("t", "train", "shard", "load_data", "Ü", "weird name ", "q'uote")
_NODE_SUFFIXES = ("", "[3]", ".tokenize", "[2].tokenize", "@dev1", "-x", ".1", "_v")
_SPAN_FILES = (
    "samples/quickstart.py",
    "pkg/data.py",
    "C:\\Users\\me\\train.py",
    "dir with spaces/a:b:c.py",
    "ü/ß.py",
    "x.py:12:3",
    "file#1.py",
)
_TYPES = ("Tensor", "int", "float", "list[int]", "dict[str, Tensor]", "tuple[int, ...]", "int | None",
          "torch.nn.Module", "Optional[list[dict[str, int]]]", "'quoted'")
_ATTR_KEYS = ("partition.device", "schedule.start", "schedule.finish", "cost.estimate",
              "comm.bytes", "x.with-dash", "odd key.with space")
_NODE_ATTR_KEYS = ("cost.estimate", "stages.stage", "x.with-dash", "odd key.with space")
_MODULE_NAMES = st.sampled_from(("quickstart", "pkg.data", "models.resnet", "ü.mod"))
_MODULE_MAPS = st.dictionaries(_MODULE_NAMES, st.sampled_from(("quickstart.py", "pkg/data.py", "ü.py")), max_size=3)
_GRAPH_NAMES = st.one_of(st.sampled_from(("quickstart", "train-pipeline", "my pipeline")), st.text(max_size=8))
_ROOTS = st.sampled_from((".", "samples", "/abs/path with space", "C:\\work"))
_MODULES = st.sampled_from(("", "quickstart", "pkg.main"))
_PARAM_SUFFIXES = st.sampled_from(("", "_lr", "[0]", ".x"))
_NODE_PREFIX = st.sampled_from(_NODE_PREFIXES)
_NODE_SUFFIX = st.sampled_from(_NODE_SUFFIXES)
_OPS = st.sampled_from(OPS)
_TARGETS = st.sampled_from(("quickstart:train", "pkg.data:load", "m:Cls.method", "m:f.<locals>.g", "odd target",
                            "m:a:b"))
_KWARG_NAMES = st.lists(st.sampled_from(("lr", "seed", "x", "data", "None", "odd-key", "ü")), max_size=3,
                        unique=True)
_DEP_PICKS = st.lists(st.integers(min_value=0, max_value=2**16), max_size=2)


@cache
def scalars() -> st.SearchStrategy[object]:
    """Python values a `Const` may hold, biased towards the awkward ones."""
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.sampled_from(TRICKY_FLOATS),
        st.floats(),
        st.sampled_from(TRICKY_STRINGS),
        st.text(max_size=12),
    )


@cache
def constants() -> st.SearchStrategy[Const]:
    return scalars().map(Const)


@dataclass(frozen=True)
class _Hole:
    """A place for a reference in an operand template, filled by `_bind` with a known value name."""

    index: int


@cache
def _templates(max_depth: int) -> st.SearchStrategy[Any]:
    # Built once per depth and bound to the names in scope afterwards: hypothesis strategies are
    # costly to create and validate, and graphs need a different set of names at every node.
    leaves = st.one_of(st.integers(min_value=0, max_value=2**16).map(_Hole), constants())
    if max_depth <= 0:
        return leaves

    def extend(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.one_of(
            st.lists(inner, max_size=3).map(lambda items: Seq("list", tuple(items))),
            st.lists(inner, max_size=3).map(lambda items: Seq("tuple", tuple(items))),
            st.lists(st.tuples(leaves, inner), max_size=3).map(lambda items: Map(tuple(items))),
        )

    return st.recursive(leaves, extend, max_leaves=6 * max_depth)


def _bind(template: Any, refs: list[str]) -> Operand:
    if isinstance(template, _Hole):
        return Ref(refs[template.index % len(refs)]) if refs else Const(template.index)
    if isinstance(template, Seq):
        return Seq(template.kind, tuple(_bind(item, refs) for item in template.items))
    if isinstance(template, Map):
        return Map(tuple((_bind(k, refs), _bind(v, refs)) for k, v in template.items))
    return template


def operands(refs: list[str], *, max_depth: int = 2) -> st.SearchStrategy[Operand]:
    """Operands using only the value names in `refs` (constants only when it is empty)."""
    names = list(refs)
    return _templates(max_depth).map(lambda template: _bind(template, names))


@cache
def spans(*, valid: bool = True) -> st.SearchStrategy[SourceSpan]:
    """Source spans; with `valid`, line >= 1 (line 0 means "no location")."""
    files = st.one_of(st.sampled_from(_SPAN_FILES), st.text(min_size=1, max_size=10))
    line = st.integers(min_value=1 if valid else 0, max_value=10**6)
    small = st.integers(min_value=0, max_value=500)
    return st.builds(SourceSpan, files, line, small, st.one_of(st.just(0), small), st.one_of(st.just(0), small))


@cache
def task_options() -> st.SearchStrategy[TaskOptions]:
    """Valid options, each field either left at its default or set (often all of them at once)."""
    nonneg = st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False)
    durations = st.one_of(st.sampled_from((0.5, 1.0, 1.5, 90.0, 150.0, 3600.0, 7.25, 0.001)), nonneg)
    sizes = st.one_of(st.sampled_from((1000, 1024, 65536, 2**30, 3 * 2**29, 16 * 2**30)),
                      st.integers(min_value=0, max_value=2**45))
    names = st.text(string.ascii_letters + "/._- üé'\"", max_size=12)
    fields_: dict[str, st.SearchStrategy[Any]] = {
        "cpus": st.one_of(st.sampled_from((0, 0.5, 2, 4.0, 96)), nonneg),
        "gpus": st.one_of(st.sampled_from((0, 0.5, 0.25)), st.integers(min_value=1, max_value=8),
                          st.integers(min_value=1, max_value=8).map(float)),
        "memory": st.one_of(st.none(), sizes),
        "cost": st.one_of(st.none(), durations),
        "flops": st.one_of(st.none(), nonneg, st.sampled_from((1e15, 3.2e12))),
        "out_size": st.one_of(st.none(), sizes),
        "retries": st.integers(min_value=0, max_value=5),
        "priority": st.integers(min_value=-10, max_value=10),
        "side_effects": st.booleans(),
        "ranks": st.integers(min_value=1, max_value=8),
        "resources": st.lists(st.tuples(names, st.one_of(nonneg, st.integers(0, 8))), max_size=3).map(tuple),
        "reads": st.lists(names, max_size=3).map(tuple),
        "writes": st.lists(names, max_size=3).map(tuple),
    }
    every = st.fixed_dictionaries(fields_)
    some = st.fixed_dictionaries({}, optional=fields_)
    return st.one_of(st.just({}), some, every).map(lambda kw: TaskOptions(**kw))


@cache
def json_values(*, max_leaves: int = 8) -> st.SearchStrategy[Any]:
    """JSON values: nested dicts/lists of null, booleans, integers, finite floats and strings."""
    leaves = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**64), max_value=2**64),
        st.sampled_from((0.0, -0.0, 1e300, 5e-324, 0.1, 12.5)),
        st.floats(allow_nan=False, allow_infinity=False),
        st.sampled_from(TRICKY_STRINGS),
        st.text(max_size=8),
    )
    return st.recursive(
        leaves,
        lambda inner: st.one_of(st.lists(inner, max_size=3),
                                st.dictionaries(st.text(max_size=6), inner, max_size=3)),
        max_leaves=max_leaves,
    )


@cache
def attrs() -> st.SearchStrategy[dict[str, Any]]:
    """Namespaced attributes with JSON values."""
    keys = st.one_of(st.sampled_from(_ATTR_KEYS), st.text(min_size=1, max_size=8).map(lambda s: "ns." + s))
    return st.dictionaries(keys, json_values(), max_size=3)


@cache
def node_attrs() -> st.SearchStrategy[dict[str, Any]]:
    """A node's untyped attributes (the typed ones are drawn as records: `placements`, `effect_records`)."""
    keys = st.one_of(st.sampled_from(_NODE_ATTR_KEYS), st.text(min_size=1, max_size=8).map(lambda s: "ns." + s))
    return st.dictionaries(keys, json_values(), max_size=3)


_FINITE = st.floats(allow_nan=False, allow_infinity=False, width=32)
_DEVICE = st.one_of(st.integers(0, 7), st.lists(st.integers(0, 7), min_size=2, max_size=3).map(tuple))
_WHY = st.one_of(st.none(), st.text(min_size=1, max_size=12))


@cache
def placements() -> st.SearchStrategy[Placement]:
    return st.builds(Placement, st.one_of(st.none(), _DEVICE), st.one_of(st.none(), _FINITE),
                     st.one_of(st.none(), _FINITE), st.one_of(st.none(), st.integers(0, 50)))


@cache
def effect_records() -> st.SearchStrategy[Effects]:
    names = st.lists(st.text(min_size=1, max_size=6), max_size=2).map(tuple)
    paths = st.one_of(st.none(), st.builds(FilePaths, st.one_of(st.none(), names), st.one_of(st.none(), names)))
    # (no values named: a drawn graph's values are not known here; renaming is tested on real graphs)
    return st.builds(Effects, st.just(()), _WHY, _WHY, st.booleans(), st.booleans(), names, names, names,
        st.sampled_from((None, "read", "write")), paths, _WHY, st.booleans(),
        st.one_of(st.none(), st.lists(st.booleans(), max_size=3).map(tuple)), _WHY)


@cache
def comms() -> st.SearchStrategy[Transfer | Reduction | None]:
    return st.one_of(
        st.none(),
        st.builds(Transfer, st.sampled_from((None, "broadcast", "gather")), st.one_of(st.none(), _DEVICE),
                  st.one_of(st.none(), _DEVICE), st.one_of(st.none(), st.integers(0, 10**9)),
                  st.one_of(st.none(), st.text(min_size=1, max_size=6)),
                  st.one_of(st.none(), st.lists(st.integers(0, 7), max_size=3).map(tuple))),
        st.builds(Reduction, st.sampled_from(("sum", "all")), st.just(()), st.lists(st.integers(0, 7), max_size=3).map(tuple),
            st.one_of(st.none(), st.integers(0, 10**9)), st.sampled_from((None, 2, 4.0)), st.sampled_from((None, 0)),
            st.one_of(st.none(), st.lists(st.integers(0, 7), max_size=3).map(tuple))))


@cache
def type_names() -> st.SearchStrategy[str | None]:
    return st.one_of(st.none(), st.sampled_from(_TYPES), st.text(max_size=8))


@st.composite
def _graph(
    draw: st.DrawFn,
    min_nodes: int,
    max_nodes: int,
    max_params: int,
    max_outputs: int,
    max_args: int,
    max_depth: int,
) -> Graph:
    n_params = draw(st.integers(min_value=0, max_value=max_params))
    params = [
        Param(f"p{j}{draw(_PARAM_SUFFIXES)}", _bind(draw(_templates(1)), []), draw(type_names()), draw(spans()))
        for j in range(n_params)
    ]
    graph = Graph(
        draw(_GRAPH_NAMES),
        root=draw(_ROOTS),
        module=draw(_MODULES),
        params=params,
        modules=draw(_MODULE_MAPS),
        span=draw(spans()),
        attrs=draw(attrs()),
    )
    values = [p.name for p in params]
    templates = _templates(max_depth)
    args = st.lists(templates, max_size=max_args)
    n_nodes = draw(st.integers(min_value=min_nodes, max_value=max_nodes))
    n_outputs = st.integers(min_value=1, max_value=max_outputs)
    for i in range(n_nodes):
        name = f"{draw(_NODE_PREFIX)}{i}{draw(_NODE_SUFFIX)}"
        count = draw(n_outputs)
        outputs = tuple(output_name(name, k, count) for k in range(count))
        names_before = [node.name for node in graph]
        deps = [names_before[k % len(names_before)] for k in draw(_DEP_PICKS)] if names_before else []
        node = Node(
            name,
            draw(_OPS),
            draw(_TARGETS),
            args=tuple(_bind(t, values) for t in draw(args)),
            kwargs=tuple((k, _bind(draw(templates), values)) for k in draw(_KWARG_NAMES)),
            outputs=outputs,
            types=tuple(draw(type_names()) for _ in outputs),
            options=draw(task_options()),
            span=draw(spans()),
            deps=tuple(dict.fromkeys(deps)),
            attrs=draw(node_attrs()),
            effects=draw(effect_records()),
            placement=draw(placements()),
            comm=draw(comms()),
        )
        graph.add_node(node)
        values.extend(outputs)
    if draw(st.booleans()):
        graph.returns = _bind(draw(templates), values)
    return graph


def graphs(
    *,
    min_nodes: int = 0,
    max_nodes: int = 8,
    max_params: int = 3,
    max_outputs: int = 3,
    max_args: int = 3,
    max_depth: int = 2,
) -> st.SearchStrategy[Graph]:
    """Random valid graphs (see the module docstring).

    `max_nodes`/`min_nodes` bound the node count, `max_params` the parameters, `max_outputs` the
    outputs per node, `max_args` the positional operands per node, and `max_depth` the nesting of
    list/tuple/dict operands.
    """
    return _graph(min_nodes, max_nodes, max_params, max_outputs, max_args, max_depth)
