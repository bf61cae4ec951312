"""`dagc plan --json`: JSON Lines, one object per file, each carrying its schedule and transfers; an
independent checker recomputes every time from the script's annotations and the link given on the
command line (durations, precedence with transfer times, no overlap on a device, makespan)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from dagc.cost import CostModel
from tests.conftest import run_dagc

SCRIPT = '''
import dagc


@dagc.task(cost="4s", out_size="2MB")
def load(n: int) -> list:
    return list(range(n))


@dagc.task(cost="6s", out_size="1MB")
def branch(x: list, k: int) -> list:
    return [v * k for v in x]


@dagc.task(cost="3s", out_size="500KB")
def merge(a: list, b: list, c: list) -> list:
    return a + b + c


@dagc.task(cost="1s", out_size="1KB", ranks=2)
def train(data: list) -> int:
    return sum(data)


@dagc.pipeline
def fan(n: int = 10):
    x = load(n)
    a = branch(x, 1)
    b = branch(x, 2)
    c = branch(x, 3)
    return train(merge(a, b, c))
'''
# what the script says, read by hand: costs (seconds), data on each edge (bytes), devices per task
COST = {"load": 4.0, "branch": 6.0, "merge": 3.0, "train": 1.0}
EDGES = {("load", "branch"): 2e6, ("load", "branch.1"): 2e6, ("load", "branch.2"): 2e6,
         ("branch", "merge"): 1e6, ("branch.1", "merge"): 1e6, ("branch.2", "merge"): 1e6,
         ("merge", "train"): 5e5}
NEED = {"train": 2}
BANDWIDTH, LATENCY = 1e6, 0.0  # given on the command line below
TOL = 1e-9


def plan_lines(tmp_path: Path, *args: str) -> list[dict[str, Any]]:
    script = tmp_path / "fan.py"
    script.write_text(textwrap.dedent(SCRIPT).lstrip())
    proc = run_dagc("plan", str(script), *args, "--json")
    assert proc.returncode in (0, 1), proc.stderr
    lines = proc.stdout.splitlines()
    assert proc.stdout.endswith("\n") and all(line.startswith("{") and line.endswith("}") for line in lines)
    return [json.loads(line) for line in lines]


def check_plan(plan: dict[str, Any], n_devices: int) -> None:
    """Recompute everything from COST, EDGES, NEED and the link; share no code with the schedulers."""
    overhead = CostModel(backend="ray").overhead  # `dagc plan` plans for the Ray program by default
    tasks = {t["task"]: t for t in plan["schedule"]}
    assert len(tasks) == len(plan["schedule"]) == plan["tasks"]
    devices = {name: t.get("devices", [t["device"]]) for name, t in tasks.items()}
    for name, t in tasks.items():
        assert t["device"] == devices[name][0] and all(0 <= d < n_devices for d in devices[name])
        assert len(set(devices[name])) == NEED.get(name, 1)
        # durations: the annotated cost plus the launch overhead, on devices of speed 1
        assert t["end"] - t["start"] == pytest.approx(COST[name.partition(".")[0]] + overhead, abs=TOL)
        assert t["start"] >= 0
    # precedence, with each transfer's time: leaves when the producer ends, arrives before the consumer starts
    transfers = {(x["src"], x["dst"], x["to_device"]): x for x in plan["transfers"]}
    assert len(transfers) == len(plan["transfers"])
    expected_transfers = set()
    for (src, dst), nbytes in EDGES.items():
        for d in devices[dst]:
            if d in devices[src]:
                assert tasks[dst]["start"] >= tasks[src]["end"] - TOL
                continue
            expected_transfers.add((src, dst, d))
            x = transfers[(src, dst, d)]
            assert x["bytes"] == nbytes and x["from_device"] in devices[src]
            assert x["start"] == pytest.approx(tasks[src]["end"], abs=TOL)
            assert x["end"] == pytest.approx(x["start"] + LATENCY + nbytes / BANDWIDTH, abs=TOL)
            assert tasks[dst]["start"] >= x["end"] - TOL
    assert set(transfers) == expected_transfers
    # no two tasks at once on a device
    for d in range(n_devices):
        spans = sorted((t["start"], t["end"], name) for name, t in tasks.items() if d in devices[name])
        for (_, end, a), (start, _, b) in zip(spans, spans[1:]):
            assert start >= end - TOL, f"device {d}: {a} overlaps {b}"
    assert plan["makespan"] == pytest.approx(max(t["end"] for t in tasks.values()), abs=TOL)
    assert plan["valid"] is True and plan["problems"] == []


@pytest.mark.parametrize("algo", ["dagc", "heft"])
def test_plan_json_schedules_check_out_independently(tmp_path: Path, algo: str) -> None:
    (plan,) = plan_lines(tmp_path, "--cluster", "2x2", "--link-bandwidth", "1e6", "--link-latency", "0",
                         "--algo", algo)
    assert set(plan["schedule"][0]) >= {"task", "device", "start", "end"}
    check_plan(plan, 4)
    # the fan-out is worth spreading over devices even at 1 MB/s: the plan has transfers to check
    assert plan["transfers"] and plan["cut_edges"] >= 1


def test_plan_json_lines_one_object_per_file(tmp_path: Path) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("hello")
    script = tmp_path / "fan.py"
    script.write_text(textwrap.dedent(SCRIPT).lstrip())
    proc = run_dagc("plan", str(script), str(bad), str(script), "--cluster", "2", "--json")
    assert proc.returncode == 1  # one file has no valid plan
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["file"] for r in rows] == [str(script), str(bad), str(script)]
    assert rows[1]["valid"] is False and rows[1]["errors"][0]["code"] == "DAGC006" and "schedule" not in rows[1]
    assert rows[0]["schedule"] == rows[2]["schedule"]  # deterministic
    help_text = run_dagc("plan", "--help").stdout
    assert "JSON Lines" in help_text and "1e9" in help_text


@pytest.mark.parametrize("plain,with_unit", [("1.25e9", "10Gbit/s"), ("1250000000", "1250MB/s"),
                                             ("2.5E10", "25GB/s")])
def test_link_bandwidth_takes_plain_numbers_and_exponents(tmp_path: Path, plain: str, with_unit: str) -> None:
    (a,) = plan_lines(tmp_path, "--cluster", "2x2", "--link-bandwidth", plain)
    (b,) = plan_lines(tmp_path, "--cluster", "2x2", "--link-bandwidth", with_unit)
    assert a["makespan"] == b["makespan"] and a["transfers"] == b["transfers"]


def test_link_bandwidth_rejects_what_is_not_a_rate(tmp_path: Path) -> None:
    script = tmp_path / "fan.py"
    script.write_text(textwrap.dedent(SCRIPT).lstrip())
    for bad in ("1e", "fast", "-5", "0"):
        proc = run_dagc("plan", str(script), "--cluster", "2", f"--link-bandwidth={bad}", "--json")
        assert proc.returncode == 2 and "DAGC301" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_parse_bandwidth_forms() -> None:
    from dagc.units import UnitError, parse_bandwidth

    assert parse_bandwidth("1e9") == parse_bandwidth("1000000000") == parse_bandwidth(1e9) == 1e9
    assert parse_bandwidth("1.25e10") == parse_bandwidth("100Gbit/s") == 1.25e10
    assert parse_bandwidth("1.5e3MB/s") == 1.5e9 and parse_bandwidth(" 42 ") == 42.0
    for bad in ("1e", "e9", "inf", "nan", "1e400", "1e9x", "10Gbit"):
        with pytest.raises(UnitError, match="bandwidth"):
            parse_bandwidth(bad)
