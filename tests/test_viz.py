"""`dagc viz`: partition-aware DOT (golden), SVG/PNG/PDF drawn by Graphviz (the system `dot`, else the
pip-installed graphviz-pure, which has no PDF), critical path,
fused groups, loop collapsing, --focus, and determinism."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dagc.backends.graphviz import (
    CRITICAL_COLOUR,
    FocusError,
    critical_path,
    device_colour,
    loop_pattern,
    to_dot,
)
from dagc.cluster import parse_cluster_spec
from dagc.cost import CostModel
from dagc.driver import compile_file
from dagc.ir.core import Graph, Node, Param
from dagc.ir.location import SourceSpan
from dagc.ir.payload import Region
from dagc.ir.types import Const, Ref, Seq, TaskOptions
from dagc.passes.base import PassContext, PassManager, parse_pipeline
from dagc.renderer import find_renderer
from dagc.renderer import render_dot as pipe
from tests.conftest import REPO, run_dagc

PASSES = "verify,dce,cse,partition{algo=heft},schedule"


def loop_graph(shards: int = 6, steps: int = 3, name: str = "loopy") -> Graph:
    """Unrolled-loop names as the frontend writes them: `shard[i].load`, `shard[i].tokenize`,
    `train[s]`."""
    span = SourceSpan("loopy.py", 10, 1)
    g = Graph(name, module="loopy", params=[Param("n", Const(shards), "int", SourceSpan("loopy.py", 10, 12))],
              span=span)
    outs = []
    for i in range(shards):
        g.add_node(Node(f"shard[{i}].load", "task", "loopy:load", args=(Const(i),),
                        options=TaskOptions(cost=1.0, out_size=10 << 20), span=SourceSpan("loopy.py", 12, 9)))
        g.add_node(Node(f"shard[{i}].tokenize", "task", "loopy:tokenize", args=(Ref(f"shard[{i}].load"),),
                        options=TaskOptions(cost=2.0, out_size=1 << 20), span=SourceSpan("loopy.py", 13, 9)))
        outs.append(Ref(f"shard[{i}].tokenize"))
    g.add_node(Node("merge", "task", "loopy:merge", args=(Seq("list", tuple(outs)),),
                    options=TaskOptions(cost=0.5, out_size=1 << 20), span=SourceSpan("loopy.py", 14, 5)))
    prev = "merge"
    for s in range(steps):
        g.add_node(Node(f"train[{s}]", "task", "loopy:train", args=(Ref(prev), Ref("n")),
                        options=TaskOptions(cost=5.0, gpus=1, out_size=4 << 20), span=SourceSpan("loopy.py", 16, 9)))
        prev = f"train[{s}]"
    g.add_node(Node("report", "task", "loopy:report", args=(Ref(prev),),
                    options=TaskOptions(cost=0.0001), span=SourceSpan("loopy.py", 17, 5)))
    g.returns = Ref("report")
    return g


def run_passes(graph: Graph, passes: str, cluster_spec: str) -> tuple[Graph, object]:
    cluster = parse_cluster_spec(cluster_spec)
    ctx = PassContext(cluster=cluster, cost_model=CostModel())
    PassManager(parse_pipeline(passes)).run(ctx, graph)
    return graph, cluster


@pytest.fixture
def quickstart_2x2(monkeypatch):
    monkeypatch.chdir(REPO)
    cluster = parse_cluster_spec("2x2")
    return compile_file("samples/quickstart.py", passes=PASSES, cluster=cluster), cluster


def test_golden_partitioned_quickstart(quickstart_2x2, golden) -> None:
    graph, cluster = quickstart_2x2
    golden("quickstart_2x2.dot", to_dot(graph, cluster=cluster))


def test_golden_fused_and_transfers(golden) -> None:
    graph, cluster = run_passes(loop_graph(), "verify,partition{algo=heft},schedule,fuse,comm", "2x2")
    assert any(n.op == "fused" for n in graph) and any(n.op == "transfer" for n in graph)
    golden("loopy_fused_2x2.dot", to_dot(graph, cluster=cluster))


def test_golden_collapsed_loops(golden) -> None:
    graph, cluster = run_passes(loop_graph(), "verify,partition{algo=heft},schedule,comm", "2x2")
    golden("loopy_collapsed_2x2.dot", to_dot(graph, cluster=cluster, collapse=True))


def test_partitioned_picture_structure(quickstart_2x2) -> None:
    graph, cluster = quickstart_2x2
    dot = to_dot(graph, cluster=cluster)
    # one cluster per node, one nested cluster per device (idle ones too), each in its own colour
    for node in (0, 1):
        assert f"subgraph cluster_node_{node} {{" in dot
    for device in range(4):
        assert f"subgraph cluster_device_{device} {{" in dot
        assert f'color="{device_colour(device)}"' in dot
    # cross-device edges are thick and labelled with bytes
    cut = graph.attrs["schedule.cut_edges"]
    assert cut, "the heft placement of quickstart on 2x2 crosses devices"
    assert re.search(r'label="\d+KiB" color="#333333" fontname="Helvetica-Bold" penwidth=3', dot)
    # the critical path is highlighted, and there is a legend
    assert CRITICAL_COLOUR in dot and "critical path" in dot and "legend" in dot
    # tooltips: source location, resources, estimated cost, placement
    tip = re.search(r'"task.train" \[.*?tooltip="([^"]*)"', dot, re.S).group(1)
    assert f"samples/quickstart.py:{graph.node('train').span.line}:" in tip
    assert "memory=1GiB" in tip and "estimated 20s" in tip
    assert "placement: device" in tip and "node" in tip


def test_critical_path_of_quickstart(quickstart_2x2) -> None:
    graph, cluster = quickstart_2x2
    path = critical_path(graph, CostModel(), cluster)
    assert path[0] == "make_data" and path[-1] == "report"
    assert path[path.index("concat") + 1:] == ["train", "evaluate", "report"]
    total = sum(float(graph.node(n).attributes()["schedule.finish"]) - float(graph.node(n).attributes()["schedule.start"])
                for n in path)
    assert total <= graph.attrs["schedule.makespan"] + 1e-9


def test_svg_rendered_by_dot_has_clusters_and_tooltips(quickstart_2x2) -> None:
    graph, cluster = quickstart_2x2
    svg = pipe(to_dot(graph, cluster=cluster), "svg").decode()
    assert svg.lstrip().startswith("<?xml") and "</svg>" in svg
    assert "<title>cluster_device_3</title>" in svg and "<title>cluster_node_1</title>" in svg
    assert 'xlink:title="quickstart:train' in svg and "placement: device" in svg
    assert CRITICAL_COLOUR in svg


@pytest.mark.parametrize("fmt,magic", [("svg", b"<?xml"), ("png", b"\x89PNG"), ("pdf", b"%PDF"), ("dot", b"digraph")])
def test_viz_cli_formats_after_pass(tmp_path: Path, fmt: str, magic: bytes) -> None:
    out = tmp_path / f"g.{fmt}"
    proc = run_dagc("viz", "samples/quickstart.py", "--cluster", "2x2", "--after", "partition", "-o", str(out))
    renderer = find_renderer()
    if fmt == "pdf" and renderer is not None and not renderer.draws("pdf"):
        # graphviz-pure draws no PDF: a clear error, and the DOT source written instead
        assert proc.returncode == 1 and "PDF needs Graphviz's `dot` program" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr and out.with_suffix(".dot").read_text().startswith("digraph")
        return
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes().startswith(magic)
    assert f"wrote {out}" in proc.stderr


def test_viz_after_early_pass_has_no_devices(tmp_path: Path) -> None:
    out = tmp_path / "g.dot"
    proc = run_dagc("viz", "samples/quickstart.py", "--cluster", "2x2", "--after", "cse", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "cluster_device" not in out.read_text() and "legend" not in out.read_text()


def test_fused_groups_are_boxes_inside_their_device() -> None:
    graph, cluster = run_passes(loop_graph(), "verify,partition{algo=heft},schedule,fuse", "2x2")
    dot = to_dot(graph, cluster=cluster)
    fused = [n for n in graph if n.op == "fused"]
    assert fused
    for node in fused:
        device = node.attributes()["partition.device"]
        body = dot[dot.index(f"subgraph cluster_device_{device} {{"):]
        box = body.index(f"subgraph cluster_fused_{re.sub(r'[^A-Za-z0-9_]', '_', node.name)} {{")
        assert box < body.index("\n\t\t}") or box < len(body)
        for member in node.bodies["members"]:
            assert f'"task.{member.name}"' in dot


def test_loop_pattern() -> None:
    assert loop_pattern("train[3]") == "train[*]"
    assert loop_pattern("shard[2].tokenize") == "shard[*].tokenize"
    assert loop_pattern("a[1][2]") == "a[*][*]"
    assert loop_pattern("plain") is None


def test_collapse_groups_loop_instances_per_device() -> None:
    graph, cluster = run_passes(loop_graph(), "verify,partition{algo=heft},schedule", "2x2")
    dot = to_dot(graph, cluster=cluster, collapse=True)
    assert "train[*]" in dot and "×3" in dot and "shape=box3d" in dot
    assert '"task.train[1]"' not in dot
    expanded = to_dot(graph, cluster=cluster, collapse=False)
    assert '"task.train[1]"' in expanded and "cluster_loop_train" in expanded and "dashed" in expanded


def test_large_graph_stays_readable() -> None:
    graph, cluster = run_passes(loop_graph(shards=600, steps=20, name="big"),
                                "verify,partition{algo=heft budget=0},schedule", "2x4")
    assert len(graph) > 1200
    dot = to_dot(graph, cluster=cluster)  # collapse="auto"
    boxes = re.findall(r'^\t+"(?:task|loop)\.[^"]*" \[', dot, re.M)
    assert len(boxes) <= 60, len(boxes)
    svg = pipe(dot, "svg")  # dot lays out the collapsed picture: as many boxes as the DOT has, not 1,200
    assert b"</svg>" in svg and len(re.findall(rb'<g id="node\d+" class="node"', svg)) <= len(boxes) + 10


def test_focus_draws_a_neighbourhood(quickstart_2x2) -> None:
    graph, cluster = quickstart_2x2
    dot = to_dot(graph, cluster=cluster, focus="concat", depth=1)
    for name in ("standardize", "fourier_features", "concat", "train", "evaluate"):
        assert f'"task.{name}"' in dot
    for name in ("make_data", "report"):
        assert f'"task.{name}"' not in dot
    assert "neighbourhood of concat: 5 of 8 tasks" in dot
    with pytest.raises(FocusError, match="did you mean concat"):
        to_dot(graph, focus="concatt")


def test_focus_cli(tmp_path: Path) -> None:
    out = tmp_path / "g.dot"
    proc = run_dagc("viz", "samples/quickstart.py", "--focus", "train", "--depth", "1", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert '"task.make_data"' not in out.read_text()
    proc = run_dagc("viz", "samples/quickstart.py", "--focus", "trian", "-o", str(out))
    assert proc.returncode == 2 and "did you mean train" in proc.stderr


def test_partitioned_dot_is_identical_across_hash_seeds(tmp_path: Path) -> None:
    texts = []
    for seed in ("0", "77"):
        out = tmp_path / f"g{seed}.dot"
        proc = run_dagc("viz", "samples/quickstart.py", "--cluster", "2x2", "-p", PASSES + ",comm", "-o", str(out),
                        env={"PYTHONHASHSEED": seed})
        assert proc.returncode == 0, proc.stderr
        texts.append(out.read_text())
    assert texts[0] == texts[1]


def test_cond_and_loop_regions_are_dashed_boxes() -> None:
    span = SourceSpan("r.py", 3, 5)
    g = Graph("regions", params=[Param("flag", Const(True), "bool", span)], span=span)
    g.add_node(Node("data", "task", "r:data", options=TaskOptions(cost=1.0), span=span))
    body = [Node("loop.step", "task", "r:step", args=(Ref("data"),), span=span),
            Node("loop.check", "task", "r:check", args=(Ref("loop.step"),), span=span)]
    g.add_node(Node("loop", "loop", "for", args=(Ref("data"),), span=span,
                    region=Region(iter=Seq("list", tuple(Const(i) for i in range(5)))), bodies={"body": body}))
    g.add_node(Node("pick", "cond", "if", args=(Ref("flag"), Ref("loop")), span=span,
                    bodies={"then": [Node("then.a", "task", "r:a", span=span)],
                            "else": [Node("else.b", "task", "r:b", span=span)]}))
    g.returns = Ref("pick")
    dot = to_dot(g)
    assert "subgraph cluster_region_loop {" in dot and "subgraph cluster_region_pick {" in dot
    assert re.search(r'cluster_region_loop \{\n\t\tlabel="loop loop"\n\t\tstyle="dashed,rounded"', dot) or \
        'style="dashed,rounded"' in dot
    assert "≤ 5 trips" in dot and "<B>if</B> %flag" in dot
    assert '"region.loop.body.loop.step" -> "region.loop.body.loop.check"' in dot
    assert '"task.data" -> "task.loop"' in dot and '"task.loop" -> "task.pick"' in dot
    assert b"</svg>" in pipe(dot, "svg")


def test_saved_ir_remembers_its_cluster(tmp_path: Path) -> None:
    ir = tmp_path / "q.ir.json"
    assert run_dagc("ir", "samples/quickstart.py", "--cluster", "2x2", "--format", "json", "-o", str(ir)).returncode == 0
    out = tmp_path / "g.dot"
    proc = run_dagc("viz", str(ir), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert "subgraph cluster_node_1 {" in text and "subgraph cluster_device_3 {" in text
