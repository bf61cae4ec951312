"""Module-level values drawn at import with no seed (`W = torch.randn(3)`, `model = Net()` of `nn.Linear`
layers): the plain run imports the module once and every task reads one `W`; each process of a Ray or torch run
imports it again and draws its own. The tasks reading one such value run in one process (DAGC165 says so, at the
line that draws); a seed above the line frees them, and the runs then equal plain."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagc.diagnostics import DiagnosticSink
from dagc.driver import compile_file
from dagc.frontend import compile_source
from dagc.ir.effects import state_groups
from tests.engines import run_ray, run_torch
from tests.plain import plain_result

SCRIPT = '''\
import torch
from torch import nn

import dagc

{seed}
W = torch.randn(3)
W2 = W * 2


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 1)

    def forward(self, x):
        return self.fc(x)


MODEL = Net()
ONES = torch.ones(3)


@dagc.task(cost="1s")
def a(k: int) -> float:
    return float(W.sum()) + k


@dagc.task(cost="1s")
def b(k: int) -> float:
    return float(W2.sum()) / 2 + k


@dagc.task(cost="1s")
def c(k: int) -> float:
    return float(MODEL.fc.weight.sum()) + k


@dagc.task(cost="1s")
def d(k: int) -> float:
    return float(MODEL.fc.weight.sum()) + k


@dagc.task(cost="1s")
def e(k: int) -> float:
    return float(ONES.sum()) + k


@dagc.pipeline
def p():
    return a(1), b(1), c(1), d(1), e(1), e(2)
'''


def _script(tmp_path: Path, seed: str = "") -> Path:
    path = tmp_path / "draws.py"
    path.write_text(SCRIPT.format(seed=seed), encoding="utf-8")
    return path


def test_readers_of_a_value_drawn_at_import_share_a_process(tmp_path: Path) -> None:
    script = _script(tmp_path)
    groups = state_groups(compile_file(script))
    # `W2 = W * 2` is computed from `W`: its reader shares `W`'s draw; `ONES` is no draw and links nothing
    assert [g.nodes for g in groups] == [["a", "b"], ["c", "d"]]
    assert "drawn:draws.W" in groups[0].cells and "drawn:draws.MODEL" in groups[1].cells
    assert "`W2` is computed from `W`" in groups[0].why or "`W` is drawn" in groups[0].why
    sink = DiagnosticSink()
    compile_source(script, sink=sink)
    warnings = [d for d in sink.diagnostics if d.code == "DAGC165"]
    assert [(d.span.line, d.message.split("`")[1]) for d in warnings] == [(7, "W"), (20, "MODEL")]
    assert "`a`, `b`" in warnings[0].message and "torch.manual_seed(0)" in (warnings[0].hint or "")


def test_a_seed_above_the_draw_frees_the_readers(tmp_path: Path) -> None:
    script = _script(tmp_path, seed="torch.manual_seed(0)")
    assert state_groups(compile_file(script)) == []
    sink = DiagnosticSink()
    compile_source(script, sink=sink)
    assert not [d for d in sink.diagnostics if d.code == "DAGC165"]


@pytest.mark.slow
def test_readers_read_one_draw_on_ray_and_torch(tmp_path: Path, ray_cluster) -> None:
    script = _script(tmp_path)
    for backend in ("ray", "torch"):
        work = tmp_path / backend
        work.mkdir()
        got = run_ray(script, "p", {}, work, ray_cluster.address, 3) if backend == "ray" else \
            run_torch(script, "p", {}, work)
        w_a, w_b, m_c, m_d, e1, e2 = got  # type: ignore[misc]
        assert w_a == pytest.approx(w_b, rel=1e-6), backend  # one `W`, as in the plain run
        assert m_c == m_d, backend  # one `MODEL`
        assert (e1, e2) == (4.0, 5.0)
    (tmp_path / "seeded").mkdir()
    seeded = _script(tmp_path / "seeded", seed="torch.manual_seed(0)")
    work = tmp_path / "seeded" / "torch"
    work.mkdir()
    assert run_torch(seeded, "p", {}, work) == plain_result(seeded, "p", tmp_path / "seeded")


def test_a_module_level_function_that_draws_when_called_is_no_draw_at_import(tmp_path: Path) -> None:
    """`aug = lambda x: x + torch.randn(1)` draws when a task calls it (that task's own draw), not at import."""
    path = tmp_path / "aug.py"
    path.write_text('''import torch

import dagc

aug = lambda x: x + torch.randn(1)  # noqa: E731


@dagc.task
def a(k: int) -> float:
    torch.manual_seed(k)
    return float(aug(torch.zeros(1)))


@dagc.pipeline
def p():
    return a(1), a(2)
''', encoding="utf-8")
    graph = compile_file(path)
    assert [n.attributes().get("effects.drawn") for n in graph] == [None, None]
