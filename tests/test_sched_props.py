"""Property tests of the schedulers on random DAGs and clusters."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dagc.sched import Problem, dagc_schedule, heft, lower_bound, validate
from dagc.sched.listsched import decode
from dagc.sched.problem import Schedule
from tests.property import examples


@st.composite
def problems(draw, max_tasks: int = 14, multi: bool = True) -> Problem:
    n = draw(st.integers(1, max_tasks))
    nodes = draw(st.integers(1, 3))
    per_node = draw(st.integers(1, 3))
    D = nodes * per_node
    speed = [draw(st.sampled_from([0.5, 1.0, 1.0, 2.0])) for _ in range(D)]
    dev_gpus = [draw(st.sampled_from([0, 1, 1])) for _ in range(D)]
    dev_memory = [draw(st.sampled_from([None, 100, 1000])) for _ in range(D)]
    for d in range(per_node):  # the first node is all unlimited GPU devices: every task fits
        dev_gpus[d], dev_memory[d] = 1, None
    preds = []
    for i in range(n):
        ps = draw(st.lists(st.integers(0, max(0, i - 1)), max_size=min(3, i), unique=True)) if i else []
        preds.append([(j, float(draw(st.sampled_from([0, 10, 1000, 10**6])))) for j in ps])
    work = [float(draw(st.sampled_from([0, 1, 2, 3, 5, 8, 0.25]))) for _ in range(n)]
    gpus = [draw(st.sampled_from([0.0, 0.0, 0.5, 1.0] + ([2.0] if multi and per_node >= 2 else []))) for _ in range(n)]
    memory = [draw(st.sampled_from([None, None, 50, 500])) for _ in range(n)]
    priority = [draw(st.integers(0, 2)) for _ in range(n)]
    return Problem(
        names=[f"t{i}" for i in range(n)],
        work=work,
        preds=preds,
        gpus=gpus,
        memory=memory,
        priority=priority,
        speed=speed,
        node_of=[d // per_node for d in range(D)],
        dev_gpus=dev_gpus,
        dev_memory=dev_memory,
        intra=(draw(st.sampled_from([0.0, 0.01])), 1e3),
        inter=(draw(st.sampled_from([0.0, 0.1])), 1e2),
        overhead=draw(st.sampled_from([0.0, 0.001])),
    )


SETTINGS = settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(problems())
def test_heft_valid_and_above_bound(p):
    assert not p.infeasible
    s = heft(p)
    assert validate(p, s) == [], (s, validate(p, s))
    assert s.makespan >= lower_bound(p) - 1e-9


@SETTINGS
@given(problems(), st.integers(0, 3))
def test_dagc_valid_deterministic_never_worse(p, seed):
    a = dagc_schedule(p, seed=seed, budget=0.02)
    assert validate(p, a) == []
    assert a.makespan >= lower_bound(p) - 1e-9
    assert a.makespan <= heft(p).makespan + 1e-9
    b = dagc_schedule(p, seed=seed, budget=0.02)
    assert (a.devices, a.start, a.finish) == (b.devices, b.start, b.finish)


@SETTINGS
@given(problems(multi=False))
def test_fixed_assignment_decode_is_valid(p):
    s = heft(p)
    # HEFT's own order: by start, and among tasks that start together, the one that ends first (a task of no
    # work starts and ends at once: put after another that starts then, it would wait for that one)
    again = decode(p, [-(start + 1e-6 * finish) for start, finish in zip(s.start, s.finish)], assign=s.devices)
    assert validate(p, again) == []
    assert again.makespan <= s.makespan + 1e-9


def test_validator_catches_errors():
    p = Problem(names=["a", "b"], work=[2.0, 3.0], preds=[[], [(0, 100.0)]], speed=[1.0, 1.0],
                intra=(1.0, 100.0))
    ok = Schedule([(0,), (1,)], [0.0, 4.0], [2.0, 7.0])
    assert validate(p, ok) == []
    early = Schedule([(0,), (1,)], [0.0, 2.5], [2.0, 5.5])
    assert any("before data" in m for m in validate(p, early))
    overlap = Schedule([(0,), (0,)], [0.0, 1.0], [2.0, 4.0])
    assert any("overlaps" in m or "before data" in m for m in validate(p, overlap))
    wrong = Schedule([(0,), (0,)], [0.0, 2.0], [2.0, 4.0])
    assert any("expected" in m for m in validate(p, wrong))


def test_multi_device_task_on_one_node():
    p = Problem(names=["a", "b"], work=[1.0, 1.0], preds=[[], [(0, 0.0)]], gpus=[2.0, 1.0],
                speed=[1.0] * 4, node_of=[0, 1, 1, 1])
    s = heft(p)
    assert len(s.devices[0]) == 2 and {p.node_of[d] for d in s.devices[0]} == {1}
    assert validate(p, s) == []
    bad = Schedule([(0, 1), (2,)], [0.0, 1.0], [1.0, 2.0])
    assert any("different nodes" in m for m in validate(p, bad))


def test_infeasible_reported():
    p = Problem(names=["a"], work=[1.0], preds=[[]], gpus=[1.0], memory=[10**9], speed=[1.0],
                dev_gpus=[1], dev_memory=[10**6])
    assert p.infeasible and "memory" in p.infeasible[0][1]
    p = Problem(names=["a"], work=[1.0], preds=[[]], gpus=[4.0], speed=[1.0] * 4, node_of=[0, 0, 1, 1])
    assert p.infeasible and "4 devices on one node" in p.infeasible[0][1]


def test_ties_broken_by_priority():
    p = Problem(names=["lo", "hi"], work=[1.0, 1.0], preds=[[], []], priority=[0, 5], speed=[1.0])
    s = heft(p)
    assert s.start[1] == 0.0 and s.start[0] == 1.0


def test_bounds():
    p = Problem(names=list("abcd"), work=[3.0, 1.0, 1.0, 1.0], preds=[[], [(0, 0)], [], []], speed=[1.0, 1.0])
    assert lower_bound(p) == 4.0  # critical path a→b
    p = Problem(names=list("abcd"), work=[3.0, 3.0, 3.0, 3.0], preds=[[], [], [], []], speed=[1.0, 1.0])
    assert lower_bound(p) == 6.0
    assert math.isclose(dagc_schedule(p).makespan, 6.0)
