"""Energy: measured where the machine has counters (dagc.runtime.energy, through Zeus), estimated by the plan
from the devices' power (dagc.energy, `dagc plan --objective time|energy|edp`).

This machine exposes no counter (no GPU, RAPL not in the container): the runs record no energy and the report
says so, never a figure in a measurement's place. The recording path is checked with a counter that counts
the joules a test says were drawn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dagc.cluster import ClusterError, cluster_from_toml, parse_cluster_spec
from tests.conftest import run_dagc
from tests.test_map_widths import SPREAD


def _plan(tmp_path: Path, *options: str) -> dict:
    script = tmp_path / "spread.py"
    script.write_text(SPREAD, encoding="utf-8")
    proc = run_dagc("plan", str(script), "--cluster", "4", "--json", *options, cwd=tmp_path,
                    env={"DAGC_NO_LEARNED_COSTS": "1"})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[0])


def _energy_of(plan: dict, idle: float = 60.0, busy: float = 300.0) -> float:
    """The plan's energy recomputed from its schedule: busy watts while a device runs a task, idle watts for
    the rest of the makespan on every device the schedule uses."""
    busy_time: dict[int, float] = {}
    for row in plan["schedule"]:
        for device in row.get("devices", [row["device"]]):
            busy_time[device] = busy_time.get(device, 0.0) + row["end"] - row["start"]
    return sum(busy * t + idle * (plan["makespan"] - t) for t in busy_time.values())


def test_the_plan_estimates_energy_and_the_objective_chooses_the_devices(tmp_path: Path) -> None:
    """Four 10 s items after a 1 s task: on four devices 12 s; on one, 42 s with less idle power."""
    fast = _plan(tmp_path)
    assert fast["objective"] == "time" and fast["devices_used"] == 4 and fast["makespan"] == pytest.approx(12, abs=0.1)
    assert fast["energy"] == pytest.approx(_energy_of(fast), rel=1e-6)
    frugal = _plan(tmp_path, "--objective", "energy")
    assert frugal["devices"] == 1 and frugal["makespan"] == pytest.approx(42, abs=0.1)
    assert frugal["energy"] == pytest.approx(_energy_of(frugal), rel=1e-6) and frugal["energy"] < fast["energy"]
    balanced = _plan(tmp_path, "--objective", "edp")
    assert balanced["devices_used"] == 4  # 3.5x the time for 3 % less energy is no trade under edp
    said = run_dagc("plan", str(tmp_path / "spread.py"), "--cluster", "4", "--objective", "energy", cwd=tmp_path,
                    env={"DAGC_NO_LEARNED_COSTS": "1"}).stdout
    assert "J estimated on 1 of the cluster's 4 devices (objective: energy" in said


def test_device_power_comes_from_the_cluster_file(tmp_path: Path) -> None:
    cluster = cluster_from_toml({"nodes": [{"devices": 2, "idle_watts": 20, "busy_watts": 100}]})
    assert [(d.idle_power, d.busy_power) for d in cluster.devices] == [(20.0, 100.0)] * 2
    assert parse_cluster_spec("2").devices[0].busy_power == 300.0  # a GPU's default
    with pytest.raises(ClusterError, match="busy_watts must be a non-negative number"):
        cluster_from_toml({"nodes": [{"devices": 1, "busy_watts": "lots"}]})


def test_a_machine_without_counters_records_no_energy_and_the_report_says_so(tmp_path: Path) -> None:
    from dagc.runtime import energy

    assert energy.meter() is None and energy.unavailable()  # (this machine: no GPU, no RAPL)
    script = tmp_path / "spread.py"
    script.write_text(SPREAD.replace('cost="10s"', 'cost="1ms"'), encoding="utf-8")
    store, run_dir = tmp_path / "store", tmp_path / "run"
    proc = run_dagc("run", str(script), "--backend", "local", "--", "--run-dir", str(run_dir), "--cost-store",
                    str(store), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "energy" not in (store / "costs.jsonl").read_text()
    report = run_dagc("report", str(run_dir), "-o", str(tmp_path / "r.html"), cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert "not measured: no energy counter was readable" in (tmp_path / "r.html").read_text()


class _Counter:
    """A counter that rose by 2.5 J during each task (what Zeus reads from NVML or RAPL on a machine that has
    them)."""

    def __init__(self) -> None:
        self.joules = 100.0

    def read(self) -> float:
        self.joules += 1.25
        return self.joules


def test_measured_energy_goes_to_the_event_log_the_cost_store_and_the_report(tmp_path: Path, monkeypatch) -> None:
    from dagc.profile import load_run
    from dagc.report import build_report
    from dagc.runtime import energy, executor
    from dagc.runtime.costs import CostLog, read_costs
    from dagc.runtime.events import EventLog
    from dagc.runtime.store import RunStore

    monkeypatch.setattr(executor, "meter", lambda: _Counter())
    store = RunStore(tmp_path / "run")
    log = EventLog(store.events_path, "r1")
    log.write("run_start", pipeline="p", tasks=1)
    costs = CostLog(tmp_path / "store", "p", {"double": "c0de"})
    rows = {"double": ("f" * 32, 0, None, True, None)}
    ex = executor.Executor(rows, store=store, log=log, costs=costs)
    assert ex.run(ex.spec("double"), lambda x: 2 * x, 4) == 8
    log.write("run_end")
    (record,), _ = read_costs(tmp_path / "store")
    assert record["energy"] == pytest.approx(1.25)
    run = load_run(store.root)
    assert run.tasks["double"].energy == pytest.approx(1.25)
    page = build_report(run)
    assert "energy (J)" in page and "1.2 J measured over 1 task(s)" in page
    assert energy.meter() is None  # (the real one, untouched)
