"""Cost model: task time, transfer time, launch overhead, defaults."""

from __future__ import annotations

import pytest

from dagc.cluster import Cluster, Device
from dagc.cost import DEFAULT_COST, DEFAULT_OUT_SIZE, LAUNCH_OVERHEAD, CostModel
from dagc.ir.core import Graph, Node
from dagc.ir.types import Ref, TaskOptions


def _graph() -> Graph:
    g = Graph("p")
    g.add_node(Node("a", "task", "m:a", options=TaskOptions(cost=10.0, out_size=1000)))
    g.add_node(Node("b", "task", "m:b", args=(Ref("a"),), options=TaskOptions(flops=2e14)))
    g.add_node(Node("c", "task", "m:c", args=(Ref("b"),)))
    return g


def test_task_time_cost_flops_default():
    g = _graph()
    fast = Device(0, 0, kind="gpu", speed=2.0)
    cm = CostModel(backend="local")
    oh = LAUNCH_OVERHEAD["local"]
    assert cm.task_time(g.node("a"), fast) == pytest.approx(5.0 + oh)
    assert cm.task_time(g.node("b"), fast) == pytest.approx(2e14 / (2 * 100e12) + oh)
    assert cm.task_time(g.node("c"), fast) == pytest.approx(DEFAULT_COST / 2 + oh)


def test_backend_overheads_are_one_table():
    assert LAUNCH_OVERHEAD["local"] < LAUNCH_OVERHEAD["torch"] < LAUNCH_OVERHEAD["ray"]
    assert CostModel(backend="ray").overhead == LAUNCH_OVERHEAD["ray"]
    assert CostModel(backend="ray", launch_overhead=0.0).overhead == 0.0


def test_transfer_time():
    c = Cluster.uniform(2, 2)
    cm = CostModel()
    assert cm.transfer_time(c, 1e6, 1, 1) == 0.0
    assert cm.transfer_time(c, 1e6, 0, 1) == pytest.approx(c.intra.latency + 1e6 / c.intra.bandwidth)
    assert cm.transfer_time(c, 1e6, 0, 2) == pytest.approx(c.inter.latency + 1e6 / c.inter.bandwidth)


def test_defaults_are_reported():
    g = _graph()
    cm = CostModel()
    assert cm.value_bytes(g.node("a")) == 1000
    assert cm.value_bytes(g.node("b")) == DEFAULT_OUT_SIZE
    assert cm.defaulted(g) == {"cost": ["c"], "out_size": ["b"]}


def test_an_unknown_backend_is_an_error_not_another_backends_overhead() -> None:
    import pytest

    from dagc.cost import CostModel

    with pytest.raises(ValueError, match="unknown backend 'spark'; known: local, ray, torch"):
        CostModel(backend="spark")
    assert CostModel(backend="spark", launch_overhead=0.5).overhead == 0.5
