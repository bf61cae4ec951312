"""The run-time check of effects (dagc.runtime.effectcheck): a change no static reading can follow ends
the run at that task with an error naming it, what changed and the annotation that says so, on local
Ray (2 devices) and torch (2 gloo ranks), on by default everywhere; never rc 0 with another result. Declaring it (`mutates=[...]`) makes every backend equal the plain run."""

from __future__ import annotations

import pickle
import subprocess
from pathlib import Path

import pytest

from dagc.backends import emit
from dagc.cluster import parse_cluster_spec
from dagc.driver import compile_file
from dagc.runtime.effectcheck import Assumed, EffectViolation, watch
from tests.interpreters import run_python
from tests.test_backend_local import _plain_result
from tests.test_effects import _torch_program

SNEAKY = '''\
import random

import torch

import dagc


@dagc.task
def make() -> list:
    return [torch.zeros(2), torch.zeros(2)]


@dagc.task(cost="5s")
def sneaky(xs: list) -> int:
    method = "add" + "_"
    getattr(xs[0], method)(1)  # a method looked up by name: no static reading follows it
    return 0


@dagc.task
def read(xs: list) -> list:
    return [x.tolist() for x in xs]


@dagc.pipeline
def p():
    xs = make()
    n = sneaky(xs)
    return read(xs), n
'''


def _script(tmp_path: Path, declared: bool = False) -> Path:
    text = SNEAKY.replace('@dagc.task(cost="5s")', '@dagc.task(cost="5s", mutates=["xs"])') if declared else SNEAKY
    script = tmp_path / "sneaky.py"
    script.write_text(text, encoding="utf-8")
    return script


def _local(tmp_path: Path, script: Path, *extra: str) -> subprocess.CompletedProcess:
    program = tmp_path / "sneaky_local.py"
    program.write_text(emit(compile_file(script), "local", program))
    return run_python([str(program), "--result", str(tmp_path / "r.pkl"), *extra],
                          capture_output=True, text=True, timeout=120)


def _assert_named(stderr: str) -> None:
    assert "task `sneaky` did more than dagc assumed: it changed `xs` in place" in stderr, stderr[-2000:]
    assert "@dagc.task(mutates=['xs'])" in stderr


def test_local_stops_at_the_task_and_names_the_fix(tmp_path: Path) -> None:
    proc = _local(tmp_path, _script(tmp_path))
    assert proc.returncode == 1
    _assert_named(proc.stderr)


def test_declared_it_equals_plain_everywhere_locally(tmp_path: Path) -> None:
    script = _script(tmp_path, declared=True)
    plain = _plain_result(script, "p", tmp_path)
    assert plain == ([[1.0, 1.0], [0.0, 0.0]], 0)
    graph = compile_file(script)
    assert graph.node("read").deps == ("sneaky",)  # now ordered after the change
    proc = _local(tmp_path, script)
    assert proc.returncode == 0, proc.stderr
    assert pickle.loads((tmp_path / "r.pkl").read_bytes()) == plain


def test_switched_off_it_runs_as_before(tmp_path: Path) -> None:
    proc = _local(tmp_path, _script(tmp_path), "--no-check-effects")
    assert proc.returncode == 0, proc.stderr
    assert "did more than dagc assumed" not in proc.stderr  # nothing checked, nothing said
    read, n = pickle.loads((tmp_path / "r.pkl").read_bytes())
    assert n == 0 and len(read) == 2 and all(len(x) == 2 for x in read), (read, n)


@pytest.mark.slow
def test_ray_and_torch_stop_by_default(tmp_path: Path, ray_cluster) -> None:
    from tests.test_backend_torch import launch

    script = _script(tmp_path)
    program = tmp_path / "sneaky_ray.py"
    program.write_text(emit(compile_file(script, cluster=parse_cluster_spec("2")), "ray", program))
    # (compiled before any run: a compile after the Ray run would assume the change it recorded)
    torch_program = _torch_program(script, "p", {}, tmp_path / "sneaky_torch.py", split=("sneaky", "read"))
    proc = run_python([str(program), "--address", ray_cluster.address,
                       "--result", str(tmp_path / "ray.pkl")], capture_output=True, text=True, timeout=300,
                      cwd=tmp_path)
    assert proc.returncode == 1
    _assert_named(proc.stderr)
    with pytest.raises(Exception) as failure:  # the launcher reports the failed rank
        launch(torch_program, 2, ["--result", str(tmp_path / "torch.pkl")])
    assert not (tmp_path / "torch.pkl").exists()
    del failure


# ---- the check on its own ---------------------------------------------------------------------------------
def test_what_the_check_sees() -> None:
    import torch

    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    assumed = Assumed(params=("model", "optimizer", "log"), mutable=frozenset({"optimizer"}))
    # an optimizer step changes the model's parameters it holds: allowed through the optimizer
    w = watch("step", assumed, (model, optimizer, []), {}, [])
    model(torch.ones(1, 2)).sum().backward()
    optimizer.step()
    w.finish()  # the model's parameters and gradients are the optimizer's too
    w = watch("backward", Assumed(params=("model",)), (model,), {}, [])
    model(torch.ones(1, 2)).sum().backward()
    with pytest.raises(EffectViolation, match="it changed `model` in place"):  # its gradients
        w.finish()
    log: list = []
    w = watch("push", Assumed(params=("log",)), (log,), {}, [])
    log.append(1)
    with pytest.raises(EffectViolation, match="it changed `log` in place"):
        w.finish()
    import random

    w = watch("draw", Assumed(params=()), (), {}, [])
    random.random()
    with pytest.raises(EffectViolation, match="global random generator"):
        w.finish()
    w = watch("quiet", Assumed(params=("log",)), (log,), {}, [])
    w.finish()  # nothing changed: no error


def test_arrays_and_frames_are_compared_by_content() -> None:
    import numpy as np
    import pandas as pd

    series, frame, array = pd.Series([1.0, 2.0]), pd.DataFrame({"a": [1, 2], "b": ["x", "y"]}), np.zeros(3)
    assumed = Assumed(params=("s", "f", "a"))
    w = watch("read", assumed, (series, frame, array), {}, [])
    np.asarray(series), frame["a"].sum(), frame.describe(), array.sum()  # pandas fills its caches: no change
    w.finish()
    for change, name in ((lambda: array.__setitem__(0, 1.0), "a"), (lambda: frame.loc.__setitem__((0, "a"), 5), "f"),
                         (lambda: series.__setitem__(1, 7.0), "s")):
        w = watch("write", assumed, (series, frame, array), {}, [])
        change()
        with pytest.raises(EffectViolation, match=f"it changed `{name}` in place"):
            w.finish()


def test_a_frame_holding_lists_is_compared_by_its_cells() -> None:
    """Cells pandas cannot hash (lists in an object column) are compared by identity, and the numbers beside them
    (NaN too) by value: reading such a frame is no change, and changing a list in it is."""
    import numpy as np
    import pandas as pd

    frame = pd.DataFrame({"tags": [["a"], ["b", "c"]], "n": [1, 2], "x": [np.nan, 0.5]})
    assumed = Assumed(params=("f",))
    w = watch("read", assumed, (frame,), {}, [])
    frame.to_csv(), frame.sort_values("n").iloc[0], frame["n"].sum()
    w.finish()
    w = watch("write", assumed, (frame,), {}, [])
    frame.at[0, "tags"] = ["z"]
    with pytest.raises(EffectViolation, match="it changed `f` in place"):
        w.finish()


def test_a_draw_nobody_else_depends_on_is_recorded_not_fatal() -> None:
    import numpy as np

    w = watch("fit", Assumed(params=(), alone=True), (), {}, [])
    np.random.rand()
    w.finish()
    assert w.drawn == ["numpy.random"]


# ---- the other direction: effects assumed but never seen (dagc check --profile RUN_DIR) -----------------------
LOOSE = '''\
import dagc


@dagc.task
def make() -> dict:
    return {"lr": 0.1, "seen": []}


@dagc.task
def use(config: dict, extra: list) -> float:
    if config["lr"] > 10:  # never true in this run: the change dagc must assume never happens
        config["lr"] = 1.0
    extra.append(1)
    return config["lr"] * 2 + len(extra)


@dagc.pipeline
def p():
    config = make()
    xs = make()
    return use(config, xs["seen"]), use(config, xs["seen"])
'''


def test_check_profile_names_what_no_call_changed(tmp_path: Path) -> None:
    from tests.conftest import run_dagc

    script = tmp_path / "loose.py"
    script.write_text(LOOSE, encoding="utf-8")
    graph = compile_file(script)
    assert "make" in graph.node("use").attributes()["effects.mutates"]  # `config` may be changed
    program = tmp_path / "loose_local.py"
    program.write_text(emit(graph, "local", program))
    run_python([str(program), "--run-dir", str(tmp_path / "run")], check=True, timeout=120)
    proc = run_dagc("check", str(script), "--profile", str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stderr
    assert "warning[DAGC158]: task `use` never changed `config` in the 2 call(s)" in proc.stderr
    assert "@dagc.task(readonly=['config'])" in proc.stderr
    assert "`extra`" not in proc.stderr.split("DAGC158")[1].split("hint")[0]  # it did change `extra`


def test_check_reads_the_scripts_own_runs_once_there_are_enough(tmp_path: Path) -> None:
    """Without --profile, `dagc check` reads the script's runs under `.dagc/runs/` (here, of the script's
    directory) once there are RUNS_FOR_HINT of them since the script last changed."""
    from dagc.unseen import RUNS_FOR_HINT
    from tests.conftest import run_dagc

    script = tmp_path / "loose.py"
    script.write_text(LOOSE, encoding="utf-8")
    program = tmp_path / "loose_local.py"
    program.write_text(emit(compile_file(script), "local", program))
    for k in range(RUNS_FOR_HINT):
        assert "DAGC158" not in run_dagc("check", str(script)).stderr  # (k runs: not yet)
        run_python([str(program), "--run-dir", str(tmp_path / ".dagc" / "runs" / f"p-{k}")], check=True, timeout=120)
    proc = run_dagc("check", str(script))
    assert proc.returncode == 0, proc.stderr
    assert f"task `use` never changed `config` in the {2 * RUNS_FOR_HINT} call(s) recorded in {RUNS_FOR_HINT} runs " \
           "under .dagc/runs" in proc.stderr


def test_the_next_compile_assumes_what_a_run_saw(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check stops a run at a hidden change and records it; compiling the script again assumes it
    (DAGC163, naming the run), and the new program equals the plain run. Editing the script drops it."""
    from dagc.frontend import compile_source

    script = _script(tmp_path)
    monkeypatch.chdir(tmp_path)
    program = tmp_path / "sneaky_local.py"
    program.write_text(emit(compile_file(script), "local", program))
    run_dir = tmp_path / ".dagc" / "runs" / "p-first"
    proc = run_python([str(program), "--run-dir", str(run_dir)], capture_output=True, text=True, timeout=120,
                      cwd=tmp_path)
    assert proc.returncode == 1
    _assert_named(proc.stderr)
    (found,) = [d for d in compile_source(script).sink.diagnostics if d.code == "DAGC163"]
    assert "task `sneaky` changed `xs` in place in an earlier run" in found.message and str(run_dir) in found.message
    assert "mutates=['xs']" in (found.hint or "")
    graph = compile_file(script)
    assert graph.node("read").deps == ("sneaky",)  # ordered after the change it makes
    program.write_text(emit(graph, "local", program))
    proc = run_python([str(program), "--run-dir", str(tmp_path / ".dagc" / "runs" / "p-second"),
                       "--result", str(tmp_path / "r.pkl")], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert pickle.loads((tmp_path / "r.pkl").read_bytes()) == _plain_result(script, "p", tmp_path)
    import os
    import time

    script.write_text(script.read_text(encoding="utf-8") + "\n", encoding="utf-8")  # the script changed since
    os.utime(script, (time.time() + 5, time.time() + 5))
    assert not [d for d in compile_source(script).sink.diagnostics if d.code == "DAGC163"]
