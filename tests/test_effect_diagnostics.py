"""Effect diagnostics that explain, and no false ones: a multi-rank task that reads its config and a kept
seeding task, the hint that names the fix, `dagc plan` saying why devices are idle; and the effect catalogues,
generated from the installed torch, numpy, pandas and scikit-learn (docs/ir.md, "Effects and state")."""

from __future__ import annotations

import textwrap
from pathlib import Path

from dagc.driver import compile_file
from tests.effect_sources import HISTORY_TASKS
from tests.interpreters import run_python

# ---- diagnostics that explain, and no false ones ---------------------------------------------------------------
RANKS = '''\
import random

import torch

import dagc


@dagc.task
def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)


@dagc.task
def make_config() -> dict:
    return {"lr": 0.1, "steps": 3}


@dagc.task(ranks=2)
def train(config: dict) -> float:
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=config["lr"])
    for _ in range(config["steps"]):
        opt.zero_grad()
        model(torch.ones(1, 2)).sum().backward()
        opt.step()
    return float(model.weight.sum())


@dagc.task
def noise() -> float:
    return random.random()


@dagc.pipeline
def flow():
    seed_everything(0)
    config = make_config()
    return train(config), noise()
'''


def test_a_multi_rank_task_reading_its_config_and_a_kept_seeding_task_are_fine(tmp_path: Path) -> None:
    from dagc.frontend import compile_source

    script = tmp_path / "flow.py"
    # the multi-rank task reads its config and draws only after seeding itself: no shared state
    script.write_text(RANKS.replace("return train(config), noise()", "return train(config)"), encoding="utf-8")
    assert "DAGC304" not in [d.code for d in compile_source(script).sink.diagnostics]
    # a seeding task called as a statement is kept for the draws after it: no "dce removes this call"
    script.write_text(RANKS.replace("@dagc.task(ranks=2)", "@dagc.task"), encoding="utf-8")
    assert "DAGC151" not in [d.code for d in compile_source(script).sink.diagnostics]
    graph = compile_file(script)
    assert "seed_everything" in graph


def test_the_multi_rank_hint_names_the_fix(tmp_path: Path) -> None:
    from dagc.frontend import compile_source

    script = tmp_path / "flow.py"
    script.write_text(RANKS.replace("    torch.manual_seed(0)\n    model", "    model").replace(
        "    return float(model.weight.sum())", "    config[\"done\"] = True\n    return float(model.weight.sum())"),
        encoding="utf-8")
    found = [d for d in compile_source(script).sink.diagnostics if d.code == "DAGC304"]
    assert found and "seed inside `train`" in (found[0].hint or "")
    script.write_text(RANKS.replace("    return float(model.weight.sum())",
                                    "    config[\"done\"] = True\n    return float(model.weight.sum())").replace(
        "    return train(config), noise()", "    t = train(config)\n    return t, config"), encoding="utf-8")
    found = [d for d in compile_source(script).sink.diagnostics if d.code == "DAGC304"]
    assert found and "readonly=['config']" in (found[0].hint or ""), [d.hint for d in found]


def test_the_catalogue_is_what_torch_says() -> None:
    """dagc/frontend/torch_effects.json is generated from the installed torch, not written by hand."""
    from tests.conftest import REPO

    proc = run_python([str(REPO / "scripts" / "gen_effect_catalog.py"), "--check"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


def test_the_library_catalogue_is_what_numpy_pandas_and_scikit_learn_say() -> None:
    """dagc/frontend/library_effects.json is generated from the installed libraries' metadata."""
    from tests.conftest import REPO

    proc = run_python([str(REPO / "scripts" / "gen_library_catalog.py"), "--check"],
                      capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


def test_plan_says_why_devices_are_idle(tmp_path: Path) -> None:
    from tests.conftest import run_dagc

    script = tmp_path / "flow.py"
    script.write_text("import dagc\n\n" + HISTORY_TASKS + textwrap.dedent('''\


        @dagc.pipeline
        def p():
            record(1)
            record(2)
            return count()
        '''), encoding="utf-8")
    proc = run_dagc("plan", str(script), "--cluster", "3")
    assert proc.returncode == 0, proc.stderr
    assert "device(s) 1, 2 idle; 3 tasks share `flow.HISTORY` and run in one process" in proc.stdout
    assert "`record` changes `flow.HISTORY`" in proc.stdout
