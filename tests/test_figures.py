"""The README's partitioned-graph picture is what `python scripts/figures.py` draws today, byte for byte."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from tests.conftest import REPO

IMG = REPO / "docs" / "img"


def _figures() -> ModuleType:
    spec = importlib.util.spec_from_file_location("figures", REPO / "scripts" / "figures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_graph_picture_is_what_the_script_draws(tmp_path: Path) -> None:
    figures = _figures()
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    dot, png = figures.draw_graph(first)
    again_dot, again_png = figures.draw_graph(second)
    assert dot.read_bytes() == again_dot.read_bytes(), "the DOT differs from one drawing to the next"
    assert png.read_bytes() == again_png.read_bytes(), "graphviz-pure's PNG differs from one drawing to the next"
    regenerate = "run `python scripts/figures.py --only graph` and commit docs/img"
    assert dot.read_text(encoding="utf-8") == (IMG / dot.name).read_text(encoding="utf-8"), \
        f"docs/img/{dot.name} is not what scripts/figures.py draws: {regenerate}"
    assert png.read_bytes() == (IMG / png.name).read_bytes(), \
        f"docs/img/{png.name} is not what scripts/figures.py draws: {regenerate}"


def test_readme_shows_the_pictures_the_script_writes() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    figures = _figures()
    for name in (f"{figures.GRAPH}.png", figures.TIMELINE):
        assert f"(docs/img/{name})" in readme, f"README.md does not show docs/img/{name}"
        assert (IMG / name).is_file(), f"docs/img/{name} is missing: run `python scripts/figures.py`"
