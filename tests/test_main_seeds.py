"""Seeds in the main block (DAGC156), and the idiom that keeps the plain run's numbers on every backend:
a module-level seed, tasks drawing from the global generator inside a map, items trained in place."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import pytest

from dagc.backends import emit
from dagc.cluster import parse_cluster_spec
from dagc.driver import compile_file
from dagc.frontend import compile_source
from tests.test_backend_local import _plain_result, _ruff_clean
from tests.test_maps import _project, _ray_program, _run_local, _run_ray

TASKS = '''
import random

import numpy as np

import dagc
{module_seed}

@dagc.task
def count(seed: int) -> int:
    return 2 + seed % 3


@dagc.task
def make_models(n: int) -> list:
    return [{{"id": i, "w": 0.0}} for i in range(n)]


@dagc.task
def train_inplace(model: dict, lr: float) -> None:
    model["w"] += lr * (model["id"] + 1)


@dagc.task
def score(model: dict) -> float:
    return model["w"] * 2


@dagc.task
def ids(n: int) -> list:
    return list(range(n))


@dagc.task
def noisy(x: int) -> float:
    return x + random.random()


def set_seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)


@dagc.pipeline
def p(seed: int = 4):
    n = count(seed)
    models = make_models(n)
    for m in models:
        train_inplace(m, 0.5)
    scores = [score(m) for m in models]
    noise = [noisy(i) for i in ids(n)]
    return scores, models, noise


if __name__ == "__main__":
{main}
    print(p())
'''


def _codes(tmp_path: Path, module_seed: str = "", main: str = "    pass") -> list[tuple[str, int]]:
    script = _project(tmp_path, TASKS.format(module_seed=module_seed, main=main))
    result = compile_source(script)
    return [(d.code, d.span.line) for d in result.sink.diagnostics if d.is_error and d.span]


def _line_of(tmp_path: Path, text: str) -> int:
    lines = (tmp_path / "src" / "flow.py").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.strip() == text)


@pytest.mark.parametrize("seed", ["random.seed(0)", "np.random.seed(0)", "set_seed(0)"])
def test_a_seed_in_the_main_block_is_dagc156_at_its_line(tmp_path: Path, seed: str) -> None:
    found = _codes(tmp_path, main=f"    {seed}")
    assert found == [("DAGC156", _line_of(tmp_path, seed))]


@pytest.mark.parametrize(("imported", "seed"), [("from numpy.random import seed as reseed", "reseed(0)"),
                                                ("import torch as t", "t.random.manual_seed(0)"),
                                                ("from random import seed", "seed(0)")])
def test_a_seed_imported_under_another_name_is_dagc156(tmp_path: Path, imported: str, seed: str) -> None:
    # (the one list of seeding functions, matched on the name the module's imports give the call)
    found = _codes(tmp_path, module_seed=imported, main=f"    {seed}")
    assert found == [("DAGC156", _line_of(tmp_path, seed))]


def test_a_module_level_seed_or_no_unseeded_draw_is_fine(tmp_path: Path) -> None:
    assert _codes(tmp_path, module_seed="random.seed(0)") == []
    seeded_task = TASKS.replace("return x + random.random()", "return x + random.Random(x).random()")
    script = _project(tmp_path, seeded_task.format(module_seed="", main="    random.seed(0)"))
    assert [d.code for d in compile_source(script).sink.diagnostics if d.is_error] == []


def _script(tmp_path: Path) -> Path:
    return _project(tmp_path, TASKS.format(module_seed="\nrandom.seed(1)\n", main="    pass"))


def test_module_seed_draws_and_in_place_items_on_local(tmp_path: Path) -> None:
    script = _script(tmp_path)
    plain = _plain_result(script, "p", tmp_path)
    assert plain[1] == [{"id": 0, "w": 0.5}, {"id": 1, "w": 1.0}, {"id": 2, "w": 1.5}]  # trained in place
    assert _run_local(script, tmp_path) == plain


@pytest.mark.slow
def test_module_seed_draws_and_in_place_items_on_ray(tmp_path: Path, ray_cluster) -> None:
    script = _script(tmp_path)
    proc = _run_ray(_ray_program(script, tmp_path), ray_cluster.address, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert pickle.loads((tmp_path / "ray.pkl").read_bytes()) == _plain_result(script, "p", tmp_path)


@pytest.mark.slow
def test_module_seed_draws_and_in_place_items_on_torch(tmp_path: Path) -> None:
    """A map that reads items another map changed in place stays where they live (it is not spread
    over the ranks, which would make it DAGC304)."""
    from dagc.backends.torch import REQUIRED_PASSES
    from tests.test_backend_torch import launch

    script = _script(tmp_path)
    graph = compile_file(script, passes=REQUIRED_PASSES, cluster=parse_cluster_spec("2"), backend="torch")
    assert [n.options.ranks for n in graph if n.op == "map"] == [1, 1, 1]
    program = tmp_path / "prog" / "torch_prog.py"
    program.parent.mkdir(exist_ok=True)
    program.write_text(emit(graph, "torch", program))
    _ruff_clean(program)
    ranks = int(re.search(r"^RANKS = (\d+)$", program.read_text(), re.M).group(1))
    result = tmp_path / "torch.pkl"
    launch(program, ranks, ["--result", str(result)])
    assert pickle.loads(result.read_bytes()) == _plain_result(script, "p", tmp_path)
