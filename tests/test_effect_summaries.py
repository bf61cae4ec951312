"""Effect summaries across the user's call graph (mutual recursion), the one immutable-type predicate and the
one data file of effect knowledge."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from dagc.diagnostics import DiagnosticSink
from dagc.driver import compile_file
from dagc.frontend import library as lib
from dagc.frontend.effects import EffectAnalyzer, Effects, is_scalar_type
from dagc.frontend.modules import Project
from dagc.ir.effects import is_immutable_type, node_effects

HEAD = "import random\nimport dagc\n\n"


def effects_of(tmp_path: Path, source: str) -> dict[str, Effects]:
    path = tmp_path / "m.py"
    path.write_text(HEAD + textwrap.dedent(source), encoding="utf-8")
    project = Project(path, DiagnosticSink())
    info = project.load_entry()
    assert info is not None
    analyzer = EffectAnalyzer(project)
    return {name: analyzer.of_task(task) for name, task in info.tasks.items()}


# ---- mutual recursion: one summary per strongly connected component -------------------------------------------
MUTATING_PAIR = """
    def _a(xs, ys, n):
        xs.append(n)
        if n:
            _b(ys, xs, n - 1)

    def _b(p, q, n):
        _a(p, q, n)

    @dagc.task
    def through_a(log: list, other: list, n: int) -> None:
        _a(log, other, n)

    @dagc.task
    def through_b(log: list, other: list, n: int) -> None:
        _b(log, other, n)
"""


def test_mutually_recursive_helpers_pass_on_what_each_changes(tmp_path: Path) -> None:
    # `_a` changes its first argument and, through `_b`, which calls it back with the two swapped, its second
    found = effects_of(tmp_path, MUTATING_PAIR)
    assert set(found["through_a"].mutates) == {"log", "other"}
    assert set(found["through_b"].mutates) == {"log", "other"}


def test_a_longer_cycle_reaches_its_fixpoint(tmp_path: Path) -> None:
    found = effects_of(tmp_path, """
        def _one(x, y, z, n):
            if n:
                _two(y, z, x, n - 1)

        def _two(x, y, z, n):
            _three(x, y, z, n)

        def _three(x, y, z, n):
            x.append(n)
            _one(x, y, z, n)

        @dagc.task
        def turn(a: list, b: list, c: list, n: int) -> None:
            _one(a, b, c, n)

        @dagc.task
        def turn_third(a: list, b: list, c: list, n: int) -> None:
            _three(a, b, c, n)
    """)
    # `_three` changes its first argument, and the cycle rotates the three through every position
    assert set(found["turn"].mutates) == {"a", "b", "c"}
    assert set(found["turn_third"].mutates) == {"a", "b", "c"}


def test_mutually_recursive_helpers_that_draw(tmp_path: Path) -> None:
    found = effects_of(tmp_path, """
        def _noisy(n):
            if n:
                return _quiet(n - 1) + random.random()
            return 0.0

        def _quiet(n):
            return _noisy(n)

        @dagc.task
        def first(n: int) -> float:
            return _noisy(n)

        @dagc.task
        def second(n: int) -> float:
            return _quiet(n)
    """)
    assert found["first"].rng is not None
    assert found["second"].rng is not None  # (summarised with `_noisy`, not before it)
    assert not found["second"].mutates and found["second"].world is None


def test_mutually_recursive_readers_have_no_effects(tmp_path: Path) -> None:
    found = effects_of(tmp_path, """
        def _even(xs, n):
            return True if n == 0 else _odd(xs, n - 1)

        def _odd(xs, n):
            return xs[0] if n == 0 else _even(xs, n - 1)

        @dagc.task
        def parity(xs: list, n: int) -> bool:
            return _even(xs, n) and _odd(xs, n)
    """)
    assert found["parity"].is_pure and found["parity"].output is None
    assert found["parity"].rng is None and not found["parity"].mutates


def test_a_pipeline_orders_and_keeps_tasks_changing_state_through_recursion(tmp_path: Path) -> None:
    path = tmp_path / "p.py"
    path.write_text(HEAD + textwrap.dedent(MUTATING_PAIR) + textwrap.dedent("""
        def _roll(n):
            return random.random() if n == 0 else _again(n - 1)

        def _again(n):
            return _roll(n)

        @dagc.task
        def roll(n: int) -> float:
            return _roll(n)

        @dagc.task
        def size(xs: list) -> int:
            return len(xs)

        @dagc.pipeline
        def p(n: int = 2):
            log, other = [], []
            through_b(log, other, n)
            return size(other), roll(n)
    """), encoding="utf-8")
    graph = compile_file(path)
    nodes = {n.name: n for n in graph}
    assert "other" in " ".join(node_effects(nodes["through_b"]).mutates)
    assert node_effects(nodes["roll"]).rng
    assert "through_b" in nodes["size"].deps  # it reads what `through_b` changed through `_a`


# ---- the one immutable-type predicate ---------------------------------------------------------------------------
@pytest.mark.parametrize(("annotation", "immutable"), [
    ("int", True), ("str", True), ("None", True), ("pathlib.Path", True), ("torch.device", True),
    ("Literal['a', 'b']", True), ("typing.Literal[1, 2]", True), ("Literal", True),
    ("Optional[int]", True), ("typing.Optional[str]", True), ("Optional[list[int]]", False),
    ("int | None", True), ("None | str", True), ("list | None", False), ("int|str|None", True),
    ("Union[int, str]", True), ("typing.Union[int, None]", True), ("Union[int, dict]", False),
    ("tuple[int, str]", True), ("tuple[int, ...]", True), ("Tuple[int, float]", True), ("tuple[()]", True),
    ("tuple[int, list[int]]", False), ("tuple", False),
    ("frozenset[int]", True), ("frozenset", True), ("FrozenSet[str]", True), ("frozenset[tuple[int, list]]", False),
    ("Optional[tuple[int, Literal['x']]]", True), ("Annotated[int, 'unit']", True), ("Annotated[list, 1]", False),
    ("'int'", True), ("'Optional[list]'", False),
    ("list[int]", False), ("dict", False), ("Tensor", False), ("Optional[Tensor]", False), (None, False), ("", False),
])
def test_one_immutable_type_predicate(annotation: str | None, immutable: bool) -> None:
    assert is_immutable_type(annotation) is immutable
    assert is_scalar_type(annotation) is immutable  # the frontend's name for the same predicate


def test_immutable_constructors_follow_the_type_predicate() -> None:
    for name in ("int", "str", "pathlib.Path", "datetime.datetime", "torch.device", "torch.Size"):
        assert lib.is_immutable_constructor(name), name
    for name in ("tuple", "os.path.join", "re.compile"):  # results listed in effect_knowledge.json
        assert lib.is_immutable_constructor(name), name
    for name in ("list", "dict", "torch.nn.Linear", "collections.OrderedDict"):
        assert not lib.is_immutable_constructor(name), name


# ---- one data file, one loader -----------------------------------------------------------------------------------
KNOWLEDGE = Path(lib.__file__).with_name("effect_knowledge.json")


def test_every_hand_written_section_is_documented_and_of_one_kind() -> None:
    data = json.loads(KNOWLEDGE.read_text(encoding="utf-8"))
    assert isinstance(data["$doc"], str)
    sections = {k: v for k, v in data.items() if not k.startswith("$")}
    assert len(sections) > 30
    for name, section in sections.items():
        assert section["$doc"].strip(), name
        assert [k for k in section if k != "$doc"][0] in ("names", "prefixes", "positions", "functions", "methods")


def test_a_malformed_section_is_refused_when_read() -> None:
    with pytest.raises(ValueError, match="needs a `\\$doc`"):
        lib.Knowledge({"read_methods": {"names": ["get"]}})
    with pytest.raises(ValueError, match="section `read_methods`"):
        lib.Knowledge({"read_methods": {"$doc": "x", "names": "get"}})
    with pytest.raises(ValueError, match="section `read_methods`"):
        lib.Knowledge({"read_methods": {"$doc": "x", "names": ["get"], "prefixes": ["g"]}})
    with pytest.raises(KeyError, match="no `prefixes` section `read_methods`"):
        lib.Knowledge({"read_methods": {"$doc": "x", "names": ["get"]}}).prefixes("read_methods")


def test_one_list_of_seeding_functions() -> None:
    assert lib.knowledge() is lib.knowledge()  # read once
    assert {"random.seed", "numpy.random.seed", "torch.manual_seed", "lightning.seed_everything"} <= lib.SEEDING
    assert lib.SEEDING <= lib.RNG_FUNCTIONS  # seeding changes what later draws give: an effect on the generator
    assert lib.catalogue().library_function("numpy.random.seed").seeds
    assert not lib.catalogue().library_function("numpy.random.rand").seeds


def test_hand_written_library_facts_are_merged_over_the_generated_ones() -> None:
    generated = json.loads(KNOWLEDGE.with_name("library_effects.json").read_text(encoding="utf-8"))
    assert "numpy.copyto" not in generated["functions"] and "tables" not in generated
    assert lib.catalogue().library_function("numpy.copyto").mutates == (0,)
    assert lib.catalogue().method("fill").changes_self  # ndarray.fill: no signature says so


def test_the_three_data_files_are_packaged_with_the_frontend() -> None:
    import tomllib

    from tests.conftest import REPO

    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    assert {"torch_effects.json", "library_effects.json", "effect_knowledge.json"} <= set(
        config["package-data"]["dagc.frontend"])
