"""Files a task reads (dagc.runtime.filetrace): recorded when it runs, checked before its stored output is
reused. A task that reads a file whose contents changed runs again, and so does every task downstream of it,
under --cache and --resume, on local, Ray and torch; a file written again with the same bytes changes nothing."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from dagc.backends import emit
from dagc.cluster import parse_cluster_spec
from dagc.driver import compile_file
from dagc.runtime import read_events
from dagc.runtime.filetrace import changed, recording, snapshot, stale_downstream
from tests.interpreters import run_python
from tests.test_effects import _torch_program

FLOW = '''\
import csv
import io
import os

import dagc

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


@dagc.task
def load(name: str) -> list:
    with open(os.path.join(DATA, name)) as f:  # a path computed at run time
        return [int(row[0]) for row in csv.reader(io.StringIO(f.read()))]


@dagc.task
def total(rows: list) -> int:
    return sum(rows)


@dagc.task
def listing() -> list:
    return sorted(os.listdir(DATA))


@dagc.task
def constant() -> int:
    return 7


@dagc.pipeline
def p():
    rows = load("numbers.csv")
    return total(rows), listing(), constant()
'''


def _project(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    (src / "data").mkdir(parents=True)
    (src / "flow.py").write_text(FLOW, encoding="utf-8")
    (src / "data" / "numbers.csv").write_text("1\n2\n3\n", encoding="utf-8")
    return src / "flow.py"


def _ran(run_dir: Path) -> set[str]:
    events = run_dir / "events.jsonl"
    last = read_events(events, event="run_start")[-1]["run"]
    return {e["task"] for e in read_events(events, event="end") if e["run"] == last}


def test_a_task_that_reads_files_is_cacheable(tmp_path: Path) -> None:
    graph = compile_file(_project(tmp_path))
    for name in ("load", "total", "listing", "constant"):
        assert "effects.io" not in graph.node(name).attributes(), name


def test_snapshot_and_change(tmp_path: Path) -> None:
    data = tmp_path / "d.txt"
    data.write_text("a", encoding="utf-8")
    with recording() as found:
        data.read_text(encoding="utf-8")
        os.listdir(tmp_path)
        (tmp_path / "out.txt").write_text("x", encoding="utf-8")
    entries = snapshot(found)
    assert [(e["path"], e["kind"]) for e in entries] == [(str(tmp_path.resolve()), "list"),
                                                         (str(data.resolve()), "file")]
    assert changed(entries) is None
    os.utime(data, ns=(1, 1))  # touched, same bytes: unchanged
    assert changed(entries) is None
    data.write_text("b", encoding="utf-8")
    assert changed(entries) == str(data.resolve())
    data.write_text("a", encoding="utf-8")
    (tmp_path / "new.txt").write_text("", encoding="utf-8")  # the listing changed
    assert changed(entries) == str(tmp_path.resolve())


def test_stale_downstream_follows_every_path() -> None:
    upstream = {"b": ("a",), "c": ("b",), "d": ("x",), "e": ("c", "d")}
    assert stale_downstream({"a"}, upstream) == {"a", "b", "c", "e"}


@pytest.mark.parametrize("how", ["--cache", "--resume"])
def test_local_a_changed_file_recomputes_its_reader_and_what_follows(tmp_path: Path, how: str) -> None:
    script = _project(tmp_path)
    program = tmp_path / "p_local.py"
    program.write_text(emit(compile_file(script), "local", program))
    store = tmp_path / "store"
    first = ["--cache", str(store), "--run-dir", str(tmp_path / "r0")] if how == "--cache" else ["--run-dir", str(store)]
    run_python([str(program), *first, "--result", str(tmp_path / "a.pkl")], check=True, timeout=120)
    assert pickle.loads((tmp_path / "a.pkl").read_bytes()) == (6, ["numbers.csv"], 7)

    def again(k: int) -> tuple[object, set[str], str]:
        run_dir = tmp_path / f"r{k}"
        argv = ["--cache", str(store), "--run-dir", str(run_dir)] if how == "--cache" else ["--resume", str(store)]
        proc = run_python([str(program), *argv, "--result", str(tmp_path / f"{k}.pkl")], capture_output=True,
                          text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return pickle.loads((tmp_path / f"{k}.pkl").read_bytes()), _ran(run_dir if how == "--cache" else store), \
            proc.stderr

    assert again(1)[:2] == ((6, ["numbers.csv"], 7), set())  # nothing changed: everything reused
    numbers = script.parent / "data" / "numbers.csv"
    numbers.write_text("1\n2\n3\n", encoding="utf-8")  # the same bytes again
    assert again(2)[:2] == ((6, ["numbers.csv"], 7), set())
    numbers.write_text("10\n20\n", encoding="utf-8")
    result, ran, err = again(3)
    assert result == (30, ["numbers.csv"], 7)
    assert ran == {"load", "total"}  # `listing` read the directory, whose names did not change
    assert "numbers.csv, which changed since its output was stored" in err
    (script.parent / "data" / "more.csv").write_text("5\n", encoding="utf-8")
    assert again(4)[:2] == ((30, ["more.csv", "numbers.csv"], 7), {"listing"})
    assert again(5)[:2] == ((30, ["more.csv", "numbers.csv"], 7), set())


@pytest.mark.slow
def test_ray_and_torch_a_changed_file_recomputes_its_reader_and_what_follows(tmp_path: Path, ray_cluster) -> None:
    from tests.test_code_identity import ok, ray_and_torch

    script = _project(tmp_path)
    numbers = script.parent / "data" / "numbers.csv"
    program = tmp_path / "p_ray.py"
    program.write_text(emit(compile_file(script, cluster=parse_cluster_spec("2")), "ray", program))
    torch_program = _torch_program(script, "p", {}, tmp_path / "p_torch.py", split=("load", "listing"))
    for name, run in ray_and_torch(program, torch_program, ray_cluster.address, tmp_path):
        numbers.write_text("1\n2\n3\n", encoding="utf-8")
        cache = tmp_path / f"cache_{name}"
        ok(run(["--cache", str(cache), "--result", str(tmp_path / f"{name}_a.pkl")]))
        assert pickle.loads((tmp_path / f"{name}_a.pkl").read_bytes()) == (6, ["numbers.csv"], 7)
        numbers.write_text("10\n20\n", encoding="utf-8")
        run_dir = tmp_path / f"run_{name}"
        ok(run(["--cache", str(cache), "--run-dir", str(run_dir), "--result", str(tmp_path / f"{name}_b.pkl")]))
        assert pickle.loads((tmp_path / f"{name}_b.pkl").read_bytes()) == (30, ["numbers.csv"], 7)
        assert _ran(run_dir) == {"load", "total"}


WORLD = '''\
import itertools
import os

import dagc

COUNTER = os.environ["DAGC_TEST_COUNTER"]


@dagc.task(side_effects=True)
def fetch() -> int:  # acts on the world: another value each run
    with open(COUNTER) as f:
        n = int(f.read())
    with open(COUNTER, "w") as f:
        f.write(str(n + 1))
    return n


@dagc.task
def double(n: int) -> int:
    return 2 * n


@dagc.task
def constant() -> int:
    return 5


@dagc.pipeline
def p():
    return double(fetch()), constant()
'''


def test_a_task_reading_the_output_of_one_that_acts_on_the_world_is_not_cached(tmp_path: Path) -> None:
    script = tmp_path / "flow.py"
    script.write_text(WORLD, encoding="utf-8")
    counter = tmp_path / "counter"
    counter.write_text("1", encoding="utf-8")
    graph = compile_file(script)
    program = tmp_path / "p_local.py"
    program.write_text(emit(graph, "local", program))
    env = {**os.environ, "DAGC_TEST_COUNTER": str(counter)}
    results = []
    for k in range(2):
        proc = run_python([str(program), "--cache", str(tmp_path / "cache"), "--run-dir", str(tmp_path / f"r{k}"),
                           "--result", str(tmp_path / f"{k}.pkl")], capture_output=True, text=True, timeout=120,
                          env=env)
        assert proc.returncode == 0, proc.stderr
        results.append(pickle.loads((tmp_path / f"{k}.pkl").read_bytes()))
    assert results == [(2, 5), (4, 5)]  # the second run's `double` reads the second fetch
    assert _ran(tmp_path / "r1") == {"fetch", "double"}  # `constant` came from the cache
    assert "task `fetch` is not cached" in proc.stderr and "`double`" not in proc.stderr  # (keyed on its input)


def test_a_file_changed_while_the_task_ran_is_never_taken_as_read(tmp_path: Path) -> None:
    data = tmp_path / "d.txt"
    data.write_text("old", encoding="utf-8")
    with recording() as found:
        data.read_text(encoding="utf-8")
    data.write_text("newer", encoding="utf-8")  # (before the task's output is stored)
    (entry,) = snapshot(found)
    assert entry["changed_during"] and changed([entry]) == str(data.resolve())


GROUP = '''\
import os

import dagc

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lr.txt")


@dagc.task
def build() -> dict:
    return {"w": 1.0}


@dagc.task
def train(model: dict) -> None:
    with open(DATA) as f:
        model["w"] *= float(f.read())


@dagc.pipeline
def p():
    model = build()
    train(model)
    return model
'''


def test_a_state_group_stored_at_its_end_is_reused_only_while_the_files_it_read_are(tmp_path: Path) -> None:
    from dagc.backends.fingerprint import final_state_groups

    script = tmp_path / "flow.py"
    script.write_text(GROUP, encoding="utf-8")
    (tmp_path / "lr.txt").write_text("2", encoding="utf-8")
    graph = compile_file(script)
    assert final_state_groups(graph)  # the returned model is changed after it was made: stored at the group's end
    program = tmp_path / "p_local.py"
    program.write_text(emit(graph, "local", program))
    store = tmp_path / "run"
    results = []
    for k, argv in enumerate((["--run-dir", str(store)], ["--resume", str(store)], ["--resume", str(store)])):
        if k == 2:
            (tmp_path / "lr.txt").write_text("3", encoding="utf-8")
        proc = run_python([str(program), *argv, "--result", str(tmp_path / f"{k}.pkl")], capture_output=True,
                          text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        results.append((pickle.loads((tmp_path / f"{k}.pkl").read_bytes()), _ran(store)))
    assert results == [({"w": 2.0}, {"build", "train"}), ({"w": 2.0}, set()), ({"w": 3.0}, {"build", "train"})]



CHECKPOINT = '''\
import json
import os

import numpy as np
import torch

import dagc

HERE = os.path.dirname(os.path.abspath(__file__))
CKPT = os.path.join(HERE, "ckpt.pt")
OUT = os.path.join(HERE, "out", "model.pt")


@dagc.task(reads=["{path}"])
def load(path: str) -> float:
    state = torch.load(path, map_location="cpu", weights_only=True)
    return float(state["w"].sum())


@dagc.task
def scale(total: float) -> float:
    return 2 * total


@dagc.task
def stats(array: str, meta: str) -> tuple:  # nothing declared: the files it opens are recorded when it runs
    return float(np.load(array).sum()), json.load(open(meta))["n"]


@dagc.task(writes=["{path}"])
def save(path: str) -> None:
    torch.save({"w": torch.zeros(1)}, path)


@dagc.pipeline
def p():
    save(OUT)
    return scale(load(CKPT)), stats(CKPT + ".npy", CKPT + ".json")
'''


def test_a_task_loading_a_checkpoint_is_cached_until_the_checkpoint_changes(tmp_path: Path) -> None:
    """torch.load, np.load and json.load read files: their tasks are cacheable, and reused only while those files
    are as they were; torch.save still acts on the world (never reused)."""
    torch = pytest.importorskip("torch")
    import numpy as np

    from dagc.backends.fingerprint import task_rows

    script = tmp_path / "flow.py"
    script.write_text(CHECKPOINT, encoding="utf-8")
    ckpt = tmp_path / "ckpt.pt"
    torch.save({"w": torch.ones(3)}, ckpt)
    np.save(tmp_path / "ckpt.pt.npy", np.ones(4))
    (tmp_path / "ckpt.pt.json").write_text('{"n": 1}', encoding="utf-8")
    (tmp_path / "out").mkdir()
    graph = compile_file(script)
    rows = task_rows(graph)
    for name in ("load", "scale", "stats"):
        assert "effects.io" not in graph.node(name).attributes(), name
        assert rows[name][3] is True, (name, rows[name][3])
    assert graph.node("load").attributes()["effects.paths"] == {"read": [str(ckpt)]}
    assert "torch.save" in graph.node("save").attributes()["effects.io"]
    assert "acts on the world" in rows["save"][3]
    program = tmp_path / "p_local.py"
    program.write_text(emit(graph, "local", program))

    def run(k: int) -> tuple[object, set[str], str]:
        run_dir = tmp_path / f"r{k}"
        proc = run_python([str(program), "--cache", str(tmp_path / "cache"), "--run-dir", str(run_dir),
                           "--result", str(tmp_path / f"{k}.pkl")], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return pickle.loads((tmp_path / f"{k}.pkl").read_bytes()), _ran(run_dir), proc.stderr

    assert run(0)[:2] == ((6.0, (4.0, 1)), {"save", "load", "scale", "stats"})
    assert run(1)[:2] == ((6.0, (4.0, 1)), {"save"})  # the readers and what follows them: from the cache
    torch.save({"w": torch.full((3,), 5.0)}, ckpt)  # another checkpoint at the same path
    result, ran, err = run(2)
    assert (result, ran) == ((30.0, (4.0, 1)), {"save", "load", "scale"})
    assert f"`load` read {ckpt.resolve()}, which changed since its output was stored" in err
    assert run(3)[:2] == ((30.0, (4.0, 1)), {"save"})
    np.save(tmp_path / "ckpt.pt.npy", np.full(4, 2.0))  # a file the undeclared reader opened
    assert run(4)[:2] == ((30.0, (8.0, 1)), {"save", "stats"})


TRAIN_THEN_EVALUATE = '''\
import os

import torch

import dagc

HERE = os.path.dirname(os.path.abspath(__file__))


@dagc.task{writes}
def train(out_dir: str, epochs: int) -> None:
    for epoch in range(epochs):  # a path joined inside the task: dagc cannot name it at the call
        torch.save({{"w": torch.ones(3)}}, os.path.join(out_dir, f"epoch{{epoch}}.pt"))


@dagc.task(reads=["{{path}}"])
def evaluate(path: str) -> float:
    return float(torch.load(path)["w"].sum())


@dagc.pipeline
def p():
    train(os.path.join(HERE, "runs"), 2)
    return evaluate(os.path.join(HERE, "ckpts", "best.pt"))
'''


def test_a_checkpoint_reader_after_a_writer_of_unnamed_files_is_cached_once_they_are_named(tmp_path: Path) -> None:
    """A reader that follows a task writing files dagc cannot name (it may write the one read) is computed again
    with it on every run, and says what to declare; once the writer's files are named, the two are independent."""
    from dagc.backends.fingerprint import task_rows

    script = tmp_path / "flow.py"
    script.write_text(TRAIN_THEN_EVALUATE.format(writes=""), encoding="utf-8")
    graph = compile_file(script)
    assert graph.node("evaluate").deps == ("train",)
    assert task_rows(graph)["evaluate"][3] == (
        "keyed on its inputs: it runs after `train`, which is computed again on every run (it acts on the world) and may change what it "
        "reads; declare the files `train` writes (`writes=[...]`) to keep the two independent")
    script.write_text(TRAIN_THEN_EVALUATE.format(writes='(writes=["{out_dir}"])'), encoding="utf-8")
    graph = compile_file(script)
    assert graph.node("evaluate").deps == ()
    rows = task_rows(graph)
    assert rows["evaluate"][3] is True and "torch.save" in rows["train"][3]


def test_a_written_directory_covers_the_files_read_in_it_and_not_its_neighbours(tmp_path: Path) -> None:
    """`writes=["{out_dir}"]` names a directory: a declared read of a file in it waits for the writer, and a read
    of a file beside it (in its parent) is no DAGC127 "which no task writes"."""
    script = tmp_path / "flow.py"
    text = TRAIN_THEN_EVALUATE.format(writes='(writes=["{out_dir}"])')
    script.write_text(text.replace('os.path.join(HERE, "ckpts", "best.pt")', 'os.path.join(HERE, "best.pt")'),
                      encoding="utf-8")
    graph = compile_file(script)  # raises on an error diagnostic
    assert graph.node("evaluate").deps == ()
    script.write_text(text.replace('os.path.join(HERE, "ckpts", "best.pt")', 'os.path.join(HERE, "runs", "epoch1.pt")'),
                      encoding="utf-8")
    assert compile_file(script).node("evaluate").deps == ("train",)


FETCH_THEN_TRAIN = '''\
import json
from pathlib import Path

import dagc

HERE = Path(__file__).parent


@dagc.task(side_effects=True)
def fetch(name: str) -> list:
    """Acts on the world (declared): computed again on every run, whatever the cache holds."""
    return json.loads((HERE / name).read_text())


@dagc.task
def train(rows: list, scale: int) -> int:
    return sum(rows) * scale


@dagc.task
def report(total: int) -> str:
    return f"total {total}"


@dagc.pipeline
def p():
    total = train(fetch("rows.json"), 2)
    if total > 15:  # a region reading what the world-acting task made: keyed on `total` too
        line = report(total)
    else:
        line = report(-total)
    return line
'''


def _keyed_project(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "rows.json").write_text("[1, 2, 3]", encoding="utf-8")
    script = tmp_path / "src" / "keyed.py"
    script.write_text(FETCH_THEN_TRAIN, encoding="utf-8")
    return script


def test_a_task_reading_what_a_world_acting_task_made_is_reused_while_that_is_the_same(tmp_path: Path) -> None:
    """Keyed on the content of its arguments: `train` is taken from the cache while `fetch` (computed again on
    every run) returns what it returned before, and computed again once that changes."""
    from dagc.backends.fingerprint import task_rows
    from dagc.runtime.executor import CONTENT_KEYED

    script = _keyed_project(tmp_path)
    graph = compile_file(script)
    rows = task_rows(graph)
    region = next(n.name for n in graph if n.op == "cond")
    assert rows["train"][3].startswith(CONTENT_KEYED) and rows[region][3].startswith(CONTENT_KEYED)
    program = tmp_path / "p_local.py"
    program.write_text(emit(graph, "local", program))

    def run(k: int) -> tuple[object, set[str]]:
        run_dir = tmp_path / f"r{k}"
        proc = run_python([str(program), "--cache", str(tmp_path / "cache"), "--run-dir", str(run_dir),
                           "--result", str(tmp_path / f"{k}.pkl")], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        said = [line for line in proc.stderr.splitlines() if "is not cached" in line]
        assert [line.split("`")[1] for line in said] == ["fetch"], proc.stderr  # the others are, by content
        return pickle.loads((tmp_path / f"{k}.pkl").read_bytes()), _ran(run_dir)

    first = run(0)
    assert first[0] == "total -12" and {"fetch", "train", region} <= first[1]
    assert run(1) == ("total -12", {"fetch"})  # fetched the same rows: the rest, the region too, from the cache
    (tmp_path / "src" / "rows.json").write_text("[1, 2, 3, 4]", encoding="utf-8")
    third = run(2)
    assert third[0] == "total 20" and {"fetch", "train", region} <= third[1]
    assert run(3) == ("total 20", {"fetch"})


@pytest.mark.slow
def test_content_keys_hold_on_ray_and_torch(tmp_path: Path, ray_cluster) -> None:
    from tests.engines import run_ray, run_torch

    script = _keyed_project(tmp_path)
    for backend in ("ray", "torch"):
        work = tmp_path / backend
        work.mkdir()
        (tmp_path / "src" / "rows.json").write_text("[1, 2, 3]", encoding="utf-8")
        cache = ("--cache", str(work / "cache"))

        def run(k: int, backend: str = backend, work: Path = work, cache: tuple = cache) -> tuple[object, set[str]]:
            if backend == "ray":
                return run_ray(script, "p", {}, work, ray_cluster.address, 2, *cache), _ran(work / "ray-run")
            run_dir = ("--run-dir", str(work / f"r{k}"))
            return run_torch(script, "p", {}, work, args=(*cache, *run_dir)), _ran(work / f"r{k}")

        first = run(0)
        assert first[0] == "total -12" and {"fetch", "train"} <= first[1], backend
        assert run(1) == ("total -12", {"fetch"}), backend  # the region too, keyed on what it reads
        (tmp_path / "src" / "rows.json").write_text("[1, 2, 3, 4]", encoding="utf-8")
        third = run(2)
        assert third[0] == "total 20" and {"fetch", "train"} <= third[1], backend
