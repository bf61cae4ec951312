"""The shape of the graphs the loop, branch and file samples compile to.

(That each sample's emitted program gives the plain run's result, on every backend, is
tests/test_samples.py.)"""

from __future__ import annotations

from dagc.driver import compile_file
from tests.conftest import SAMPLES


def test_sweep_shape() -> None:
    graph = compile_file(SAMPLES / "hparam_sweep.py", params={"n_configs": 3})
    names = [n.name for n in graph]
    assert [n for n in names if n.startswith("train[")] == ["train[0]", "train[1]", "train[2]"]
    assert graph.node("cond").op == "cond"


def test_early_stopping_is_one_loop_region() -> None:
    graph = compile_file(SAMPLES / "early_stopping.py")
    [loop] = [n for n in graph if n.op == "loop"]
    assert len(loop.region.iter.items) == 40
    assert loop.region.exit is not None


def test_file_pipeline_orders_writer_before_reader() -> None:
    graph = compile_file(SAMPLES / "file_pipeline.py", params={"out_dir": "/data/run"})
    assert graph.node("normalize").deps == ("make_dataset",)
    assert set(graph.node("evaluate").deps) == {"train", "normalize"}
    assert graph.node("train").options.writes == ("/data/run/model.pt",)
