"""A map region's measured width in run reports and timelines: the items it listed in a real run
(local here; Ray on two devices and torch on two gloo ranks in the slow tests), how many were resumed,
beside the width it was planned for."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import pytest

from dagc.backends import emit, timeline
from dagc.cluster import parse_cluster_spec
from dagc.driver import compile_file
from dagc.profile import load_run
from dagc.report import build_report
from tests.conftest import run_dagc
from tests.interpreters import run_python
from tests.test_backend_local import _plain_result
from tests.test_maps import RESUME, _project, _ray_program, _run_ray

WIDTHS = '''
import dagc


@dagc.task
def list_items(n: int) -> list:
    return list(range(n))


@dagc.task
def groups(n: int) -> list:
    return [list(range(i)) for i in range(n)]


@dagc.task
def sq(x: int) -> int:
    return x * x


@dagc.pipeline
def widths(n: int = 6) -> tuple:
    squares = [sq(i) for i in dagc.each(list_items(n), expected=4)]   # map: 6 items, planned for 4
    none = [sq(i) for i in list_items(0)]                             # map.1: no item
    nested = []
    for g in groups(4):                                               # map.2: 4 items
        inner = []
        for x in g:                                                   # map.2.map: 0 + 1 + 2 + 3 items
            inner.append(sq(x))
        nested.append(inner)
    return squares, none, nested
'''

# map -> (expected width, measured width, items run, resumed, listings, ranks)
LOCAL_ROWS = {"map": ("4", "6", "6", "0", "1", "1"), "map.1": ("—", "0", "0", "0", "1", "1"),
              "map.2": ("—", "4", "4", "0", "1", "1"), "map.2.map": ("—", "6", "6", "0", "4", "1")}


def map_rows(page: str) -> dict[str, tuple[str, ...]]:
    """The map-width table of a report page: map -> its cells after the name and the loop's line."""
    rows = {}
    for name, cells in re.findall(r'<tr data-map="([^"]+)" data-width="\d*">(.*?)</tr>', page):
        rows[name] = tuple(re.findall(r"<td[^>]*>(.*?)</td>", cells)[2:])
    return rows


def run_local(script: Path, tmp_path: Path) -> Path:
    program = tmp_path / "prog" / "local.py"
    program.parent.mkdir(parents=True, exist_ok=True)
    program.write_text(emit(compile_file(script), "local", program))
    run_dir = tmp_path / "run"
    run_python([str(program), "--run-dir", str(run_dir), "--result", str(tmp_path / "r.pkl")],
                   check=True, capture_output=True, timeout=120)
    assert pickle.loads((tmp_path / "r.pkl").read_bytes()) == _plain_result(script, "widths", tmp_path)
    return run_dir


def test_local_run_report_and_timeline_show_measured_widths(tmp_path: Path) -> None:
    script = _project(tmp_path, WIDTHS)
    run_dir = run_local(script, tmp_path)
    run = load_run(run_dir)
    assert {n: (m.items, m.runs) for n, m in run.maps.items()} == {
        "map": (6, 1), "map.1": (0, 1), "map.2": (4, 1), "map.2.map": (6, 4)}
    page = tmp_path / "report.html"
    proc = run_dagc("report", str(run_dir), "--ir", str(script), "-o", str(page))
    assert proc.returncode == 0, proc.stderr
    text = page.read_text()
    assert '<h2 id="maps">Map widths</h2>' in text and "flow.py:21" in text
    assert map_rows(text) == LOCAL_ROWS
    # the same run, reported twice: the same bytes
    graph = compile_file(script)
    assert build_report(run, graph) == build_report(load_run(run_dir), compile_file(script))
    chart = timeline.measured(run, graph)
    assert "map widths: map ×6, map.1 ×0, map.2 ×4, map.2.map ×6" in chart.note
    out = tmp_path / "t.svg"
    proc = run_dagc("timeline", str(script), "--cluster", "2", "--run-dir", str(run_dir), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "map widths: map ×6, map.1 ×0, map.2 ×4, map.2.map ×6" in out.read_text()


def test_a_map_the_run_did_not_reach_is_said_so(tmp_path: Path) -> None:
    script = _project(tmp_path, WIDTHS.replace("return [list(range(i)) for i in range(n)]",
                                               "raise RuntimeError('no groups today')"))
    program = tmp_path / "local.py"
    program.write_text(emit(compile_file(script), "local", program))
    proc = run_python([str(program), "--run-dir", str(tmp_path / "run")], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1 and "no groups today" in proc.stderr
    text = build_report(load_run(tmp_path / "run"), compile_file(script))
    rows = map_rows(text)
    assert rows["map"][:2] == ("4", "6") and rows["map.2"][1] == "not listed in this run"


def test_profile_takes_the_width_of_an_empty_map(tmp_path: Path) -> None:
    """A map that listed no item is measured as width 0 (no body task ran to count)."""
    script = _project(tmp_path, WIDTHS)
    run_dir = run_local(script, tmp_path)
    graph = compile_file(script, profile=run_dir, passes="verify")
    assert graph.node("map.1").attrs["region.width"] == 0 and graph.node("map").attrs["region.width"] == 6


@pytest.mark.slow
def test_ray_run_report_shows_widths_and_resumed_items(tmp_path: Path, ray_cluster) -> None:
    from dagc.runtime.events import read_events

    script = _project(tmp_path, WIDTHS)
    program = _ray_program(script, tmp_path)
    proc = _run_ray(program, ray_cluster.address, tmp_path, "--run-dir", str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert pickle.loads((tmp_path / "ray.pkl").read_bytes()) == _plain_result(script, "widths", tmp_path)
    page = tmp_path / "report.html"
    proc = run_dagc("report", str(tmp_path / "run"), "--ir", str(script), "--cluster", "2", "-o", str(page))
    assert proc.returncode == 0, proc.stderr
    assert map_rows(page.read_text()) == LOCAL_ROWS
    run = load_run(tmp_path / "run")
    chart = timeline.measured(run, compile_file(script, cluster=parse_cluster_spec("2")))
    bar = next(b for b in chart.bars if b.name.startswith("map ×"))  # the region's own task, labelled
    assert bar.name == "map ×6" and "map: 6 items" in bar.tooltip

    # a map resumed after one of its items failed: the items finished before are resumed, not run
    resume = _project(tmp_path / "resume", RESUME)
    program = _ray_program(resume, tmp_path / "resume")
    run_dir = tmp_path / "resume" / "run"
    first = _run_ray(program, ray_cluster.address, tmp_path, "--run-dir", str(run_dir))
    assert first.returncode == 1 and "item 3 is broken" in first.stderr
    finished = {e["task"] for e in read_events(run_dir / "events.jsonl", event="end") if e["task"].startswith("map[")}
    assert finished and "map[3]" not in finished
    (resume.parent / "fixed").write_text("")
    second = _run_ray(program, ray_cluster.address, tmp_path, "--resume", str(run_dir))
    assert second.returncode == 0, second.stderr[-3000:]
    found = load_run(run_dir).maps["map"]
    assert (found.items, found.resumed, found.ran) == (6, len(finished), 6 - len(finished))
    text = build_report(load_run(run_dir), compile_file(resume))
    assert map_rows(text)["map"] == ("—", "6", str(6 - len(finished)), str(len(finished)), "1", "1")
    assert f"map ×6 ({len(finished)} resumed)" in timeline.measured(load_run(run_dir)).note


@pytest.mark.slow
def test_torch_run_report_shows_widths_spread_over_ranks(tmp_path: Path) -> None:
    from dagc.backends.torch import REQUIRED_PASSES
    from tests.test_backend_torch import launch

    script = _project(tmp_path, WIDTHS)
    graph = compile_file(script, passes=REQUIRED_PASSES, cluster=parse_cluster_spec("2"), backend="torch")
    program = tmp_path / "prog" / "torch_prog.py"
    program.parent.mkdir()
    program.write_text(emit(graph, "torch", program))
    ranks = int(re.search(r"^RANKS = (\d+)$", program.read_text(), re.M).group(1))
    launch(program, ranks, ["--run-dir", str(tmp_path / "run"), "--result", str(tmp_path / "torch.pkl")])
    assert pickle.loads((tmp_path / "torch.pkl").read_bytes()) == _plain_result(script, "widths", tmp_path)
    page = tmp_path / "report.html"
    proc = run_dagc("report", str(tmp_path / "run"), "--ir", str(script), "--cluster", "2", "--backend", "torch",
                    "-o", str(page))
    assert proc.returncode == 0, proc.stderr
    # the items of map and map.2 spread over both ranks; the nested map's listings come from both
    spread = {name: row[:5] + ("2",) for name, row in LOCAL_ROWS.items() if name != "map.2.map"}
    assert map_rows(page.read_text()) == {**spread, "map.2.map": LOCAL_ROWS["map.2.map"]}


def test_report_of_a_map_resumed_whole(tmp_path: Path) -> None:
    """A map whose region output was stored is skipped on --resume: no width, and the table says why."""
    from tests.test_viz_timeline import write_events

    script = _project(tmp_path, WIDTHS)
    run_dir = write_events(tmp_path / "run", [
        {"event": "run_start", "ts": 0.0, "pipeline": "widths", "tasks": 9},
        {"event": "skip", "task": "map", "ts": 0.1, "fingerprint": "f"},
        {"event": "start", "task": "map.2", "ts": 0.2},
        {"event": "width", "task": "map.2", "ts": 0.3, "items": 4, "resumed": 3},
        {"event": "end", "task": "map.2", "ts": 0.9, "duration": 0.7, "bytes": 10},
        {"event": "run_end", "ts": 1.0, "duration": 1.0},
    ])
    run = load_run(run_dir)
    rows = map_rows(build_report(run, compile_file(script)))
    assert rows["map"] == ("4", "resumed whole: its output was stored", "", "", "", "")
    assert rows["map.1"][1] == "not listed in this run"
    assert rows["map.2"] == ("—", "4", "1", "3", "1", "1")
    chart = timeline.measured(run)
    assert chart.note.endswith("map widths: map.2 ×4 (3 resumed)")
    assert [b.name for b in chart.bars if b.kind == "task"] == ["map.2 ×4"]


SPREAD = '''
import dagc


@dagc.task(cost="1s")
def shards() -> list:
    return [1, 2, 3, 4]


@dagc.task(cost="10s")
def work(s: int) -> int:
    return s * 2


@dagc.task(cost="1s")
def total(xs: list) -> int:
    return sum(xs)


@dagc.pipeline
def p():
    out = []
    for s in dagc.each(shards(), expected=4):
        out.append(work(s))
    return total(out)
'''


@pytest.mark.parametrize("devices, makespan", [(1, 42.0), (2, 22.0), (4, 12.0), (8, 12.0)])
def test_a_map_is_planned_at_its_expected_width(tmp_path: Path, devices: int, makespan: float) -> None:
    """`dagc.each(items, expected=4)` of 10 s items: planned over as many devices as fit, up to its width, each
    running its share of the items (before: one device ran all four, 42 s whatever the cluster)."""
    from dagc.plan import plan_file

    script = tmp_path / "spread.py"
    script.write_text(SPREAD, encoding="utf-8")
    result = plan_file(str(script), parse_cluster_spec(str(devices)))
    assert result.valid and not result.errors
    assert result.makespan == pytest.approx(makespan, abs=0.5)
    placed = next(row for row in result.schedule if row["task"] == "map")
    assert len(placed.get("devices", [placed["device"]])) == min(devices, 4)
    # torch: the `spread` pass gives the map as many ranks as its expected width, not every device
    graph = compile_file(script, backend="torch", cluster=parse_cluster_spec(str(devices)))
    assert graph.node("map").options.ranks == (min(devices, 4) if devices > 1 else 1)
