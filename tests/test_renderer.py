"""Pictures without system Graphviz: with `dot` hidden from PATH, dagc draws SVG and PNG through the
pip-installed graphviz-pure (same clusters and tooltips), deterministically, and refuses PDF clearly."""

from __future__ import annotations

import os
import re
import shutil
import struct
from pathlib import Path

import pytest

from dagc.backends.graphviz import to_dot
from dagc.cluster import parse_cluster_spec
from dagc.driver import compile_file
from dagc.renderer import RenderError, find_renderer, render_dot
from tests.conftest import REPO, run_dagc

PASSES = "verify,dce,cse,partition{algo=heft},schedule"


def path_without(program: str, scratch: Path) -> str:
    """PATH with `program` hidden: each folder that holds it is replaced by a folder of links to the
    rest of its entries, so every other command still resolves."""
    folders = []
    for i, entry in enumerate(os.environ.get("PATH", "").split(os.pathsep)):
        folder = Path(entry)
        if not (folder / program).exists():
            folders.append(entry)
            continue
        shadow = scratch / f"path{i}"
        shadow.mkdir(parents=True)
        for item in folder.iterdir():
            if item.name != program:
                (shadow / item.name).symlink_to(item)
        folders.append(str(shadow))
    return os.pathsep.join(folders)


@pytest.fixture
def no_dot(tmp_path: Path, monkeypatch) -> str:
    """PATH without `dot`, set for this process (and returned for subprocesses)."""
    path = path_without("dot", tmp_path / "bin")
    monkeypatch.setenv("PATH", path)
    assert shutil.which("dot") is None
    return path


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_path_without_hides_only_that_program(tmp_path: Path) -> None:
    folder = tmp_path / "tools"
    folder.mkdir()
    for name in ("dot", "other"):
        (folder / name).write_text("#!/bin/sh\n")
        (folder / name).chmod(0o755)
    old = os.environ["PATH"]
    try:
        os.environ["PATH"] = f"{folder}{os.pathsep}{old}"
        hidden = path_without("dot", tmp_path / "scratch")
    finally:
        os.environ["PATH"] = old
    assert shutil.which("dot", path=hidden) is None
    assert shutil.which("other", path=hidden) is not None and shutil.which("sh", path=hidden) is not None


def test_without_dot_the_pip_renderer_draws_svg_with_clusters_and_tooltips(no_dot: str, monkeypatch) -> None:
    renderer = find_renderer()
    assert renderer is not None and renderer.name == "graphviz-pure"
    assert renderer.draws("svg") and renderer.draws("png") and not renderer.draws("pdf")
    monkeypatch.chdir(REPO)
    cluster = parse_cluster_spec("2x2")
    graph = compile_file("samples/quickstart.py", passes=PASSES, cluster=cluster)
    dot = to_dot(graph, cluster=cluster)
    # the legend draws its lines and boxes with table cells: no glyph the bundled fonts lack (box drawing,
    # geometric shapes, dingbats) to come out as empty squares
    assert not re.search("[\u2500-\u257f\u25a0-\u25ff\u2700-\u27bf]", dot)
    svg = render_dot(dot, "svg").decode()
    assert svg.lstrip().startswith("<?xml") and svg.rstrip().endswith("</svg>")
    assert "graphviz-pure" in svg[:400]
    # the same structure the system `dot` draws: one cluster per node and device, tooltips, critical path
    assert "<title>cluster_device_3</title>" in svg and "<title>cluster_node_1</title>" in svg
    assert 'xlink:title="quickstart:train' in svg and "placement: device" in svg
    assert "#c2185b" in svg


def test_pip_renderer_is_deterministic_and_reports_bad_dot(no_dot: str) -> None:
    source = 'digraph g {\n\ta [label="a" tooltip="first"]\n\ta -> b\n}\n'
    assert render_dot(source, "svg") == render_dot(source, "svg")
    assert render_dot(source, "png") == render_dot(source, "png")
    with pytest.raises(RenderError, match="graphviz-pure.*syntax error"):
        render_dot("digraph { a -> }", "svg")
    with pytest.raises(RenderError, match="PDF needs Graphviz's `dot` program"):
        render_dot(source, "pdf")


def test_cli_without_dot_renders_svg_png_and_timeline(no_dot: str, tmp_path: Path) -> None:
    env = {"PATH": no_dot}
    out = tmp_path / "out"
    proc = run_dagc("compile", "samples/quickstart.py", "-o", str(out), env=env)
    assert proc.returncode == 0, proc.stderr
    assert "graph (SVG)" in proc.stdout and "note:" not in proc.stderr
    assert "<title>quickstart</title>" in (out / "quickstart.svg").read_text()

    svg, png = tmp_path / "g.svg", tmp_path / "g.png"
    for picture in (svg, png):
        proc = run_dagc("viz", "samples/quickstart.py", "--cluster", "2x2", "-o", str(picture), env=env)
        assert proc.returncode == 0 and "Warning" not in proc.stderr, proc.stderr
    assert "<title>cluster_device_0</title>" in svg.read_text()
    width, height = png_size(png.read_bytes())
    assert width > 600 and height > 600  # 110 dpi: the whole partitioned graph, not a blank page

    timeline = tmp_path / "t.png"
    proc = run_dagc("timeline", "samples/quickstart.py", "--cluster", "2x2", "-o", str(timeline), env=env)
    assert proc.returncode == 0 and "Warning" not in proc.stderr, proc.stderr
    assert png_size(timeline.read_bytes())[0] >= 900  # the pinned 960-point-wide chart

    pdf = tmp_path / "g.pdf"
    proc = run_dagc("viz", "samples/quickstart.py", "-o", str(pdf), env=env)
    assert proc.returncode == 1 and "PDF needs Graphviz's `dot` program" in proc.stderr
    assert "Traceback" not in proc.stderr and (tmp_path / "g.dot").exists() and not pdf.exists()
