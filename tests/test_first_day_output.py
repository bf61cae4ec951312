"""What a new user's first plans and pictures show: timeline legends clear of the time axis, device colours
distinct past 10 devices, devices named by what the cluster states, and `dagc plan`'s per-device table."""

from __future__ import annotations

import itertools
import re
import textwrap
from pathlib import Path

import pytest

from dagc.backends import timeline
from dagc.backends.graphviz import device_colour, to_dot
from dagc.cluster import cluster_from_toml, parse_cluster_spec
from dagc.driver import compile_file
from dagc.plan import plan_file, run_plan
from tests.conftest import REPO

PASSES = "verify,dce,cse,partition{algo=heft},schedule,comm"
TEXT = re.compile(r'<text x="[-\d.]+" y="([-\d.]+)" font-size="([\d.]+)"[^>]*>([^<]*)</text>')
RECT = re.compile(r'<rect x="[-\d.]+" y="([-\d.]+)" width="14.0" height="([\d.]+)"')

FAN_OUT = """
import dagc

@dagc.task(cost="2s")
def load(i: int) -> list:
    return [i]

@dagc.task(cost="3s")
def train(d: list) -> int:
    return len(d)

@dagc.task(cost="3s", out_size="1GB")
def shard(d: list) -> list:
    return d

@dagc.task(cost="1s")
def merge(a: int, b: list) -> int:
    return a + len(b)

@dagc.pipeline
def p():
    return merge(train(load(1)), shard(load(2)))
"""


@pytest.fixture
def quickstart(monkeypatch):
    monkeypatch.chdir(REPO)
    cluster = parse_cluster_spec("2x2")
    return compile_file("samples/quickstart.py", passes=PASSES, cluster=cluster), cluster


@pytest.mark.parametrize("with_chart_legend", [False, True])
def test_timeline_legends_sit_below_the_time_labels(quickstart, with_chart_legend: bool) -> None:
    graph, cluster = quickstart
    chart = timeline.estimated(graph, cluster)
    if with_chart_legend:
        chart.legend = [(device_colour(0), "planned on device 0"), (device_colour(1), "planned on device 1")]
    svg = timeline.to_svg([chart])
    texts = [(float(y), float(size), text) for y, size, text in TEXT.findall(svg)]
    axis = [y for y, size, text in texts if size == 10 and re.fullmatch(r"[\d.]+\s?(ms|s|min|h|µs)", text)]
    assert axis, "no time labels found"
    axis_bottom = max(axis) + 3  # a 10 px label's descenders reach about 3 px under its baseline
    swatches = [float(y) for y, h in RECT.findall(svg)]
    assert len(swatches) >= 3 + 2 * with_chart_legend  # the key (critical path, transfer, failed) and the legend
    assert min(swatches) > axis_bottom
    key = next(y for y, _, text in texts if text == "critical path")
    assert key - 8 > axis_bottom  # (a 10 px label's top: ~8 px over its baseline)
    if with_chart_legend:  # the key's row under the chart's legend row, not across it
        legend = next(y for y, _, text in texts if text == "planned on device 0")
        assert legend - 8 > axis_bottom and key - 8 > legend + 3
    height = float(re.search(r'height="(\d+)"', svg).group(1))
    assert max(swatches) + 10 <= height


def _rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


def test_sixteen_devices_get_sixteen_distinct_colours() -> None:
    colours = [device_colour(d) for d in range(16)]
    assert len(set(colours)) == 16
    closest = min(sum((a - b) ** 2 for a, b in zip(_rgb(x), _rgb(y))) ** 0.5
                  for x, y in itertools.combinations(colours, 2))
    assert closest > 40  # told apart at a glance, not merely different strings
    assert colours == [device_colour(d) for d in range(16)]  # the same every time
    assert len({device_colour(d) for d in range(64)}) == 64


def test_devices_are_named_by_what_the_cluster_states(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.chdir(REPO)
    cpus = cluster_from_toml({"device": {"kind": "cpu"}, "nodes": [{"devices": 2}]})
    assert [cpus.device_name(d) for d in range(2)] == ["cpu 0", "cpu 1"]
    assert "gpu" not in cpus.describe()
    graph = compile_file("samples/quickstart.py", passes=PASSES, cluster=cpus)
    chart = timeline.estimated(graph, cpus)
    assert chart.lanes == ["cpu 0 (node0)", "cpu 1 (node0)"]
    dot = to_dot(graph, cluster=cpus)
    assert "cpu 0" in dot and not re.search(r"\bgpu\b", dot)
    shorthand = parse_cluster_spec("4")  # says how many devices, not what they are
    assert "gpu" not in shorthand.describe() and shorthand.device_name(3) == "device 3"
    out = tmp_path / "plan.txt"
    with out.open("w") as sink:
        run_plan(["samples/quickstart.py"], shorthand, "heft", False, sink)
    assert not re.search(r"\bgpu\b", out.read_text())


def test_plan_text_has_a_per_device_table_with_idle_reasons(tmp_path: Path) -> None:
    script = tmp_path / "fan.py"
    script.write_text(textwrap.dedent(FAN_OUT))
    cluster = parse_cluster_spec("2", link_bandwidth="10GB/s")
    result = plan_file(str(script), cluster, "heft")
    out = tmp_path / "plan.txt"
    with out.open("w") as sink:
        run_plan([str(script)], cluster, "heft", False, sink)
    text = out.read_text()
    assert "per device (tasks in the order each device runs them; times in seconds):" in text
    rows: dict[str, list[str]] = {}
    device = ""
    for line in text.splitlines():
        if re.fullmatch(r"  device \d \(node0\)", line):
            device = line.strip()
        elif device and line.startswith("    ") and not line.strip().startswith("task"):
            rows.setdefault(device, []).append(line.split()[0])
        elif not line.startswith("  "):
            device = ""
    by_device: dict[int, list[str]] = {}
    for row in result.schedule:
        by_device.setdefault(row["device"], []).append(row["task"])
    assert rows == {f"device {d} (node0)": tasks for d, tasks in by_device.items()}
    # train and shard end together on two devices: merge waits for the input that crosses devices, said
    # with where it comes from
    merge = next(line for line in text.splitlines() if line.strip().startswith("merge "))
    crossing = next(t for t in result.transfers if t["dst"] == "merge")
    assert f"waiting for `{crossing['src']}` from device {crossing['from_device']}" in merge
    starts = {row["task"]: row["start"] for row in result.schedule}
    assert f"{starts['merge']:.6g}" in merge
