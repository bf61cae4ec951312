"""Benchmark loaders on real data files, and schedule quality on a subset of STG-50."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest

from dagc.sched import dagc_schedule, heft, lower_bound, validate
from dagc.sched.loaders import ccr, make_problem, read_stg, read_wfcommons, scale_to_ccr

DATA = Path(os.environ.get("DAGC_DATA", Path(__file__).resolve().parents[1] / "benchmarks" / "data"))
STG = DATA / "stg" / "50"
WF = DATA / "wfcommons"
needs_data = pytest.mark.skipif(not STG.is_dir(), reason=f"benchmark data not found at {DATA}")


@needs_data
def test_read_stg():
    g = read_stg(str(STG / "rand0000.stg"))
    assert len(g.names) == 52  # 50 tasks + dummy entry and exit
    assert g.work[0] == 0 and g.work[-1] == 0
    assert g.work[1] == 9 and g.preds[1] == [(0, 0.0)]
    assert g.preds[10] == [(2, 0.0), (6, 0.0), (8, 0.0)]
    p = make_problem(g, 1)
    assert lower_bound(p) == sum(g.work)


@needs_data
def test_read_wfcommons():
    g = read_wfcommons(str(WF / "helloworld-forkjoin-10-chameleon.json"))
    assert len(g.names) == 10
    first = g.names.index("cpuhog_forkjoin_00000001")
    assert g.work[first] == pytest.approx(100.187)
    child = g.names.index("cpuhog_forkjoin_00000002")
    assert g.preds[child] == [(first, 9090910.0)]


@needs_data
@pytest.mark.parametrize("target", [0.1, 1.0, 5.0])
def test_scale_to_ccr(target):
    g = read_wfcommons(str(WF / "montage-chameleon-dss-05d-001.json"))
    p = scale_to_ccr(g, 4, target)
    assert ccr(p) == pytest.approx(target, rel=0.05)
    h, s = heft(p), dagc_schedule(p, budget=0.05)
    assert validate(p, s) == [] and validate(p, h) == []
    assert s.makespan <= h.makespan + 1e-9


def _best_known(P: int) -> dict[str, float]:
    with open(DATA / "stg" / "optima" / "best_known_50.csv", encoding="utf-8") as f:
        return {r["graph"].split("/")[-1]: float(r["best_UB"]) for r in csv.DictReader(f) if int(r["P"]) == P}


@needs_data
def test_stg_p4_gap_on_subset():
    best = _best_known(4)
    files = sorted(STG.glob("*.stg"))[::6]
    gaps_heft, gaps = [], []
    for path in files:
        p = make_problem(read_stg(str(path)), 4)
        s = dagc_schedule(p, budget=0.3)
        assert validate(p, s) == []
        gaps.append(s.makespan / best[path.name] - 1)
        gaps_heft.append(heft(p).makespan / best[path.name] - 1)
    mean = sum(gaps) / len(gaps)
    assert mean <= 0.003
    assert mean < sum(gaps_heft) / len(gaps_heft)
