"""Every sample compiles, and its emitted local program gives what the plain run gives."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from dagc.backends import emit

from dagc.driver import compile_file
from tests.conftest import SAMPLES
from tests.test_backend_local import _plain_result, _ruff_clean

# (sample, pipeline, parameters for both runs; `{tmp}` is replaced by a temporary directory)
CASES = [
    ("hparam_sweep", {}),
    ("early_stopping", {}),
    ("file_pipeline", {"out_dir": "{tmp}/files"}),
]


@pytest.mark.parametrize("sample,params", CASES, ids=[c[0] for c in CASES])
def test_sample_local_equals_plain_run(tmp_path: Path, sample: str, params: dict) -> None:
    params = {k: v.replace("{tmp}", str(tmp_path / "compiled")) if isinstance(v, str) else v
              for k, v in params.items()}
    graph = compile_file(SAMPLES / f"{sample}.py", params=params)
    program = tmp_path / "prog" / f"{sample}_local.py"
    program.parent.mkdir()
    program.write_text(emit(graph, "local", program))
    _ruff_clean(program)
    result_path = tmp_path / "local.pkl"
    subprocess.run([sys.executable, str(program), "--result", str(result_path)], check=True, timeout=300)
    local = pickle.loads(result_path.read_bytes())
    plain_params = {k: v.replace(str(tmp_path / "compiled"), str(tmp_path / "plain")) if isinstance(v, str) else v
                    for k, v in params.items()}
    plain = _plain_result(SAMPLES / f"{sample}.py", sample, tmp_path, **plain_params)
    assert local == plain


def test_sweep_shape() -> None:
    graph = compile_file(SAMPLES / "hparam_sweep.py", params={"n_configs": 3})
    names = [n.name for n in graph]
    assert [n for n in names if n.startswith("train[")] == ["train[0]", "train[1]", "train[2]"]
    assert graph.node("cond").op == "cond"


def test_early_stopping_is_one_loop_region() -> None:
    graph = compile_file(SAMPLES / "early_stopping.py")
    [loop] = [n for n in graph if n.op == "loop"]
    assert len(loop.attrs["region.iter"]["list"]) == 40
    assert loop.attrs["region.break"] is not None


def test_file_pipeline_orders_writer_before_reader() -> None:
    graph = compile_file(SAMPLES / "file_pipeline.py", params={"out_dir": "/data/run"})
    assert graph.node("normalize").deps == ("make_dataset",)
    assert set(graph.node("evaluate").deps) == {"train", "normalize"}
    assert graph.node("train").options.writes == ("/data/run/model.pt",)
