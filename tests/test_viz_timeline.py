"""Timelines: the estimated schedule (one lane per device, transfers drawn) and a measured run from
its event log beside it; SVG (golden, deterministic), PNG and PDF."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dagc.backends import timeline
from dagc.backends.graphviz import CRITICAL_COLOUR, device_colour
from dagc.cluster import parse_cluster_spec
from dagc.driver import compile_file
from dagc.profile import load_run
from dagc.renderer import find_renderer
from tests.conftest import REPO, run_dagc

PASSES = "verify,dce,cse,partition{algo=heft},schedule,comm"


@pytest.fixture
def quickstart(monkeypatch):
    monkeypatch.chdir(REPO)
    cluster = parse_cluster_spec("2x2")
    return compile_file("samples/quickstart.py", passes=PASSES, cluster=cluster), cluster


def write_events(run_dir: Path, records: list[dict]) -> Path:
    """An event log with chosen timestamps (t0 = 1000.0)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "run.json").write_text(json.dumps({"format": 1, "pipeline": "quickstart"}))
    lines = [json.dumps({"run": "r1", "pid": 1, "host": "h", **r, "ts": 1000.0 + r["ts"]}) for r in records]
    (run_dir / "events.jsonl").write_text("\n".join(lines) + "\n")
    return run_dir


def fake_run(run_dir: Path) -> Path:
    return write_events(run_dir, [
        {"event": "run_start", "ts": 0.0, "pipeline": "quickstart", "tasks": 8},
        {"event": "start", "task": "make_data", "ts": 0.0, "rank": 0, "device": "cpu"},
        {"event": "end", "task": "make_data", "ts": 2.1, "duration": 2.1, "bytes": 1000, "rank": 0, "device": "cpu"},
        {"event": "start", "task": "split", "ts": 2.1, "rank": 0},
        {"event": "failure", "task": "split", "ts": 2.5, "duration": 0.4, "error": "OSError: disk",
         "traceback": "Traceback (most recent call last):\n  ...\nOSError: disk", "rank": 0},
        {"event": "retry", "task": "split", "ts": 2.6, "attempt": 2, "rank": 0},
        {"event": "start", "task": "split", "ts": 2.6, "attempt": 2, "rank": 0},
        {"event": "end", "task": "split", "ts": 3.5, "duration": 0.9, "bytes": 2000, "rank": 0},
        {"event": "start", "task": "standardize", "ts": 3.5, "rank": 1},
        {"event": "end", "task": "standardize", "ts": 6.0, "duration": 2.5, "bytes": 300, "rank": 1},
        {"event": "run_end", "ts": 6.1, "duration": 6.1},
    ])


def test_estimated_chart_has_a_lane_per_device_and_transfers(quickstart) -> None:
    graph, cluster = quickstart
    chart = timeline.estimated(graph, cluster)
    assert chart.lanes == ["device 0 (node0)", "device 1 (node0)", "device 2 (node1)", "device 3 (node1)"]
    tasks = [b for b in chart.bars if b.kind == "task"]
    assert {b.name for b in tasks} == {n.name for n in graph if n.op == "task"}
    transfers = [b for b in chart.bars if b.kind == "transfer"]
    assert len(transfers) == sum(1 for n in graph if n.op == "transfer") > 0
    assert any(b.critical for b in tasks)
    assert max(b.finish for b in chart.bars) == pytest.approx(graph.attrs["schedule.makespan"])


def test_transfers_from_cut_edges_without_comm(monkeypatch) -> None:
    monkeypatch.chdir(REPO)
    cluster = parse_cluster_spec("2x2")
    graph = compile_file("samples/quickstart.py", passes="verify,partition{algo=heft},schedule", cluster=cluster)
    chart = timeline.estimated(graph, cluster)
    assert len([b for b in chart.bars if b.kind == "transfer"]) == len(graph.attrs["schedule.cut_edges"])


def test_golden_timeline_svg(quickstart, golden) -> None:
    graph, cluster = quickstart
    svg = timeline.to_svg([timeline.estimated(graph, cluster)])
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert device_colour(0) in svg and CRITICAL_COLOUR in svg and "<title>train" in svg
    golden("quickstart_2x2_timeline.svg", svg)


def test_measured_chart_from_event_log(tmp_path: Path, quickstart) -> None:
    graph, _ = quickstart
    run = load_run(fake_run(tmp_path / "run"))
    assert run.tasks["split"].attempts == 2 and run.tasks["split"].status == "ok"
    assert run.tasks["split"].failures[0]["error"] == "OSError: disk"
    chart = timeline.measured(run, graph)
    assert chart.lanes == ["rank 0", "rank 1"]
    failed = [b for b in chart.bars if b.kind == "failed"]
    assert [(b.name, b.start, b.finish) for b in failed] == [("split", pytest.approx(2.1), pytest.approx(2.5))]
    standardize = next(b for b in chart.bars if b.name == "standardize")
    # coloured by the device the plan chose
    assert standardize.colour == device_colour(graph.node("standardize").attributes()["partition.device"])


@pytest.mark.parametrize("suffix,magic", [(".svg", b"<svg"), (".png", b"\x89PNG"), (".pdf", b"%PDF")])
def test_timeline_cli_draws_estimate_beside_run(tmp_path: Path, suffix: str, magic: bytes) -> None:
    run_dir = fake_run(tmp_path / "run")
    out = tmp_path / f"t{suffix}"
    proc = run_dagc("timeline", "samples/quickstart.py", "--cluster", "2x2", "--run-dir", str(run_dir),
                    "-o", str(out))
    renderer = find_renderer()
    if suffix == ".pdf" and renderer is not None and not renderer.draws("pdf"):
        # without the system `dot` (graphviz-pure draws no PDF): a clear error, no traceback, no file
        assert proc.returncode == 1 and "PDF needs Graphviz's `dot` program" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr and not out.exists()
        return
    assert proc.returncode == 0, proc.stderr
    data = out.read_bytes()
    assert data.startswith(magic)
    if suffix == ".svg":
        text = data.decode()
        assert "measured run r1" in text and "estimated schedule of `quickstart`" in text
    assert "Warning" not in proc.stderr


def test_timeline_cli_needs_a_schedule_or_a_run(tmp_path: Path) -> None:
    proc = run_dagc("timeline", "-o", str(tmp_path / "t.svg"))
    assert proc.returncode == 2 and "give a SCRIPT" in proc.stderr
    # without --cluster: the schedule on one device
    proc = run_dagc("timeline", "samples/quickstart.py", "-o", str(tmp_path / "t.svg"))
    assert proc.returncode == 0, proc.stderr
    assert "device 0" in (tmp_path / "t.svg").read_text() and "device 1" not in (tmp_path / "t.svg").read_text()


def test_svg_is_deterministic(quickstart) -> None:
    graph, cluster = quickstart
    charts = [timeline.estimated(graph, cluster)]
    assert timeline.to_svg(charts) == timeline.to_svg(charts)
    assert timeline.to_pinned_dot(charts) == timeline.to_pinned_dot(charts)
