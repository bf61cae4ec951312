"""Priorities and preemption on a shared Ray cluster (dagc.runtime.admission): the queue's decisions on a
fake clock, and real programs sharing a real local Ray cluster started for the test."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dagc.runtime.admission import AdmissionQueue
from tests.deadlines import scaled

# ---- the queue's decisions ---------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _queue(cpus: float = 1.0, aging: float = 30.0) -> tuple[AdmissionQueue, Clock]:
    clock = Clock()
    return AdmissionQueue(aging=aging, idle=1e9, capacity=lambda: {"CPU": cpus, "node:x": 1.0}, clock=clock), clock


def _run(coroutine_fn):
    return asyncio.run(coroutine_fn())


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def _ask(queue: AdmissionQueue, key: str, priority: int, cpus: float = 1.0, preemptible: bool = True):
    """A gate's request, made now (at the clock's time); returns the pending answer."""
    program = key.split("/")[0]
    answer = asyncio.ensure_future(queue.request(key, program, key, priority, {"CPU": cpus, "memory": 1e9},
                                                 preemptible))
    await _settle()
    return answer


def test_a_higher_priority_preempts_at_once_and_equals_go_longest_waiting_first():
    async def scenario():
        queue, clock = _queue(cpus=1)
        first = await _ask(queue, "a/t0", 0)
        await _settle()
        assert first.done() and list(queue.running) == ["a/t0"]
        clock.now += 1
        low = await _ask(queue, "a/t1", 0)
        clock.now += 1
        other_low = await _ask(queue, "b/t0", 0)
        await _settle()
        assert not (low.done() or other_low.done())  # nothing fits, and priority 0 does not preempt 0
        clock.now += 1
        high = await _ask(queue, "c/t0", 3)
        await _settle()
        assert high.done() and await queue.until_stopped("a/t0") is True
        assert list(queue.running) == ["c/t0"] and queue.snapshot()["preemptions"] == 1
        queue.release("c/t0")
        await _settle()
        assert low.done() and not other_low.done()  # equals: the one waiting longer
        queue.release("a/t1")
        await _settle()
        assert other_low.done()

    _run(scenario)


def test_preemption_stops_the_lowest_then_latest_started_and_only_what_is_needed():
    async def scenario():
        queue, clock = _queue(cpus=3)
        for key, priority in (("a/t0", 1), ("b/t0", 0), ("b/t1", 0)):
            await _ask(queue, key, priority)
            await _settle()
            clock.now += 1
        high = await _ask(queue, "c/t0", 5)
        await _settle()
        assert high.done()
        # priority 0 before 1; among the two of priority 0, the one started last
        assert sorted(queue.running) == ["a/t0", "b/t0", "c/t0"]
        assert await queue.until_stopped("b/t1") is True
        big = await _ask(queue, "d/t0", 9, cpus=2)
        await _settle()
        assert big.done() and sorted(queue.running) == ["c/t0", "d/t0"]  # b/t0 (0), then a/t0 (1)

    _run(scenario)


def test_a_task_declared_preemptible_false_is_never_stopped():
    async def scenario():
        queue, clock = _queue(cpus=1)
        await _ask(queue, "a/t0", 0, preemptible=False)
        await _settle()
        high = await _ask(queue, "c/t0", 5)
        await _settle()
        assert not high.done() and list(queue.running) == ["a/t0"]
        queue.release("a/t0")
        await _settle()
        assert high.done()

    _run(scenario)


def test_aging_admits_a_long_waiting_low_priority_ahead_of_fresh_high_ones_for_good():
    async def scenario():
        queue, clock = _queue(cpus=1, aging=2.0)
        await _ask(queue, "h/t0", 5, preemptible=False)
        await _settle()
        low = await _ask(queue, "l/t0", 0)
        clock.now += 11.0  # 5.5 levels: above a fresh 5
        high = await _ask(queue, "h/t1", 5)
        queue.release("h/t0")
        await _settle()
        assert low.done() and not high.done()
        for _ in range(6):  # the high one ages too, but never preempts what was admitted at its level or above
            clock.now += 10.0
            queue.renew("l/t0")  # (its gate renews its lease while it runs)
            queue.tick()
        await _settle()
        assert not high.done() and list(queue.running) == ["l/t0"]
        queue.release("l/t0")
        await _settle()
        assert high.done()

    _run(scenario)


def test_a_task_sent_back_by_a_preemption_keeps_the_aging_it_earned():
    async def scenario():
        queue, clock = _queue(cpus=1, aging=1.0)
        await _ask(queue, "h/t0", 5, preemptible=False)
        program = "l"
        back = asyncio.ensure_future(queue.request("l/t0/1", program, "t0", 0, {"CPU": 1.0}, True, 4.0))
        await _settle()  # asked again after 4 s of waiting before: level 4 now
        clock.now += 1.5  # 5.5: above a fresh 5
        fresh = await _ask(queue, "h/t1", 5)
        queue.release("h/t0")
        await _settle()
        assert back.done() and back.result() == pytest.approx(5.5) and not fresh.done()

    _run(scenario)


def test_a_lease_not_renewed_hands_its_resources_on_and_a_program_can_forget_its_tickets():
    async def scenario():
        queue, clock = _queue(cpus=1)
        await _ask(queue, "gone/t0", 0)
        await _settle()
        waiting = await _ask(queue, "b/t0", 0)
        clock.now += 5
        queue.renew("gone/t0")
        queue.tick()
        await _settle()
        assert not waiting.done()  # renewed: still running
        clock.now += 60
        queue.tick()
        await _settle()
        assert waiting.done() and list(queue.running) == ["b/t0"]
        stranded = await _ask(queue, "c/t0", 0)  # waiting behind b when c's program ends
        assert not stranded.done()
        assert queue.forget("c") == 1 and not queue.waiting
        await _settle()
        assert stranded.done()  # its request ends too: nothing is left waiting in the queue
        assert queue.forget("b") == 1 and not queue.running

    _run(scenario)


def test_a_request_larger_than_the_cluster_does_not_block_the_others():
    async def scenario():
        queue, _ = _queue(cpus=2)
        huge = await _ask(queue, "a/t0", 9, cpus=8)
        small = await _ask(queue, "b/t0", 0)
        await _settle()
        assert small.done() and not huge.done()

    _run(scenario)


# ---- real programs on a real cluster -------------------------------------------------------------------
LOW = """
import os
import time

import dagc

RELEASE = RELEASE_PATH


@dagc.task(cpus=1)
def crunch(k: int) -> int:
    while not os.path.exists(RELEASE):  # the test says when the crunching may end
        time.sleep(0.05)
    return k * k


@dagc.task(cpus=1)
def total(xs: list) -> int:
    return sum(xs)


@dagc.pipeline
def low(n: int = 4) -> int:
    return total([crunch(k) for k in range(n)])


if __name__ == "__main__":
    print(low())
"""

HIGH = """
import os
import time

import dagc


RELEASE = RELEASE_PATH


@dagc.task(cpus=1)
def step(x: int) -> int:
    if not os.path.exists(RELEASE):  # released: the rest of the chain goes at once
        time.sleep(SECONDS)
    return x + 1


@dagc.pipeline(priority=5)
def high(n: int = STEPS) -> int:
    x = 0
    for _ in range(n):
        x = step(x)
    return x


if __name__ == "__main__":
    print(high())
"""


@pytest.fixture
def start_cluster():
    """Starts a local Ray cluster of its own for a test (its admission queue starts fresh)."""
    from ray.cluster_utils import Cluster

    from tests.rayfork import forked_workers

    started = []

    def start(cpus: int) -> Cluster:
        with forked_workers():
            cluster = Cluster(initialize_head=True, head_node_args={
                "num_cpus": cpus, "num_gpus": 0, "include_dashboard": False, "object_store_memory": 80 * 2**20})
        cluster.wait_for_nodes()
        started.append(cluster)
        return cluster

    yield start
    for cluster in started:
        cluster.shutdown()


def _program(tmp_path: Path, name: str, text: str) -> tuple[Path, Path]:
    from dagc.backends import emit
    from dagc.driver import compile_file

    script = tmp_path / f"{name}.py"
    script.write_text(text)
    program = tmp_path / f"{name}_ray.py"
    program.write_text(emit(compile_file(script, backend="ray"), "ray", program))
    return script, program


def _start(program: Path, cluster, run_dir: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(program), "--address", cluster.address, "--run-dir", str(run_dir),
                             "--result", str(run_dir.with_suffix(".pkl")), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=program.parent,
                            env={**os.environ, "RAY_ADDRESS": ""})


def _events(run_dir: Path) -> list[dict]:
    try:
        return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        return []


def _finish(proc: subprocess.Popen, run_dir: Path) -> object:
    import pickle

    out, err = proc.communicate(timeout=scaled(240))
    assert proc.returncode == 0, f"{err[-4000:]}\nevents: {_events(run_dir)}"
    return pickle.loads(run_dir.with_suffix(".pkl").read_bytes())


def _wait_for(predicate, what: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + scaled(120)
    while not predicate():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"{what}: never happened ({proc.communicate()[1][-3000:]})")
        time.sleep(0.05)


def _plain(script: Path) -> str:
    from tests.interpreters import run_python

    return run_python([str(script)], capture_output=True, text=True, cwd=script.parent).stdout.strip()


# the high chain as two chains whose steps alternate
INTERLEAVE = ("""    x = 0
    for _ in range(n):
        x = step(x)
    return x
""", """    x = 0
    y = 0
    for _ in range(n):
        x = step(x)
        y = step(y)
    return x + y
""")


def _high(seconds: float, steps: int, release: Path | None = None) -> str:
    """The high-priority chain of `steps` steps of `seconds` each; once `release` exists, the rest goes at once."""
    return (HIGH.replace("SECONDS", repr(seconds)).replace("STEPS", str(steps))
            .replace("RELEASE_PATH", repr(str(release or ""))))


def _released(tmp_path: Path, text: str) -> tuple[str, Path]:
    """`text` with its RELEASE_PATH, and that path: a file the test creates to let the tasks waiting for it end."""
    release = tmp_path / "release"
    return text.replace("RELEASE_PATH", repr(str(release))), release


def test_a_high_priority_pipeline_preempts_a_low_one_that_fills_the_cluster(tmp_path, start_cluster):
    """Two CPUs, both taken by a low-priority program whose tasks end only when the test says so: the
    high-priority program can run only by preempting them. It does, and finishes while the low one still
    waits to be released; the low one then finishes with the plain run's result, each preempted task run
    again from its inputs with its attempt count unchanged."""
    shared_cluster = start_cluster(2)
    low_text, release = _released(tmp_path, LOW)
    high_text = _high(0.5, 2)
    low_script, low = _program(tmp_path, "low", low_text)
    high_script, high = _program(tmp_path, "high", high_text)

    slow = _start(low, shared_cluster, tmp_path / "low")
    _wait_for(lambda: sum(e["event"] == "start" for e in _events(tmp_path / "low")) >= 2,
              "the low pipeline fills both CPUs", slow)
    urgent = _start(high, shared_cluster, tmp_path / "high")
    try:
        assert _finish(urgent, tmp_path / "high") == 2  # (the low tasks hold both CPUs until released)
    finally:
        release.touch()
    assert _finish(slow, tmp_path / "low") == int(_plain(low_script)) == 14
    assert int(_plain(high_script)) == 2

    events = _events(tmp_path / "low")
    preempted = [e["task"] for e in events if e["event"] == "preempted"]
    assert preempted, events
    high_end = max(e["ts"] for e in _events(tmp_path / "high") if e["event"] == "end")
    assert high_end < min(e["ts"] for e in events if e["event"] == "end")  # high went first, low was not done
    # a preempted task ran again from its inputs, its attempt count unchanged, and only once to the end
    for task in preempted:
        starts = [e["attempt"] for e in events if e["event"] == "start" and e["task"] == task]
        assert len(starts) >= 2 and set(starts) == {1}, (task, starts)
        assert sum(e["event"] == "end" and e["task"] == task for e in events) == 1
    assert any(e["event"] == "admitted" and e["waited"] > 0 for e in events)

    # the report says how often and where: a row, a column per task, and the stopped runs on the timeline
    from dagc.profile import load_run
    from dagc.report import write_report

    record = load_run(tmp_path / "low")
    assert record.preemptions == len(preempted) and all(record.tasks[t].preemptions for t in preempted)
    page = write_report(tmp_path / "low").read_text()
    assert f"<td class=muted>preemptions</td><td>{len(preempted)} (" in page
    assert '<th data-key="preempted"' in page
    assert page.count("preempted at ") >= len(preempted)  # a dashed bar per stopped run, its tooltip saying when
    assert ">preempted</text>" in page  # and the timeline's legend says what such a bar is


def test_aging_lets_a_low_priority_finish_under_a_stream_of_high_ones(tmp_path, start_cluster):
    """One CPU, a high-priority stream of two interleaved chains of one-second steps, and a low-priority task
    that arrives once the stream runs: a waiting task gains a level per 0.5 s here, so the low task runs
    between two steps instead of after the stream (with the default 30 s a level, it would wait for all
    of it). Two chains, so that when a step ends, the other chain's next step is already waiting: the CPU
    is never free for the low task to slip in between, however slowly the machine passes a step's output
    on. Once the low program has finished, the test lets the rest of the stream go at once."""
    cluster = start_cluster(1)
    low_text, release = _released(tmp_path, LOW.replace("n: int = 4", "n: int = 1"))
    release.touch()  # the low task itself does not wait
    _, low = _program(tmp_path, "low", low_text)
    chain_release = tmp_path / "chain-release"
    high_text = _high(1.0, 30, chain_release)
    assert INTERLEAVE[0] in high_text
    high_text = high_text.replace(*INTERLEAVE)
    _, high = _program(tmp_path, "high", high_text)
    stream = _start(high, cluster, tmp_path / "high", "--aging", "0.5")  # it starts the queue: its aging
    try:
        _wait_for(lambda: sum(e["event"] == "start" for e in _events(tmp_path / "high")) >= 2, "the stream runs",
                  stream)
        slow = _start(low, cluster, tmp_path / "low", "--aging", "0.5")
        assert _finish(slow, tmp_path / "low") == 0  # total([crunch(0)])
    finally:
        chain_release.touch()
    assert _finish(stream, tmp_path / "high") == 60  # two chains of 30 steps
    low_end = max(e["ts"] for e in _events(tmp_path / "low") if e["event"] == "end")
    high_starts = sorted(e["ts"] for e in _events(tmp_path / "high") if e["event"] == "start")
    assert low_end < high_starts[-1], (low_end, high_starts)  # it did not wait for the stream to end
    waits = [e["waited"] for e in _events(tmp_path / "low") if e["event"] == "admitted"]
    assert sum(waits) >= 2.5 - 0.1  # it waited until aging lifted it to the chain's level (5 × 0.5 s)


TRAINER = """
import os
import time

import dagc

RELEASE = RELEASE_PATH


@dagc.task(cpus=1)
def init(seed: int) -> dict:
    return {"w": seed, "steps": 0}


@dagc.task(cpus=1)
def step(model: dict, k: int) -> None:
    while k == 1 and not os.path.exists(RELEASE):  # the test says when the second step may end
        time.sleep(0.05)
    model["w"] = model["w"] * 3 + k
    model["steps"] += 1


@dagc.task(cpus=1)
def read(model: dict) -> int:
    return model["w"] * 1000 + model["steps"]


@dagc.pipeline
def trainer(n: int = 4) -> int:
    model = init(2)
    for k in range(n):
        step(model, k)
    return read(model)


if __name__ == "__main__":
    print(trainer())
"""


def test_a_state_group_is_admitted_as_a_whole_and_restarted_from_its_first_task_when_preempted(tmp_path,
                                                                                            start_cluster):
    """A training loop that updates its model in place runs in one actor: the queue admits it for as long
    as the actor lives. A high-priority task arrives while its second step runs: the group is stopped, the
    high task runs, and the group starts again on a new actor from its first task (the model lived only in
    the stopped one); the result equals the plain run's."""
    cluster = start_cluster(1)
    release = tmp_path / "release"
    script, low = _program(tmp_path, "trainer", TRAINER.replace("RELEASE_PATH", repr(str(release))))
    _, high = _program(tmp_path, "high", _high(0.2, 1))
    slow = _start(low, cluster, tmp_path / "low")
    _wait_for(lambda: any(e["event"] == "start" and e["task"] == "step[1]" for e in _events(tmp_path / "low")),
              "the trainer's second step runs", slow)
    urgent = _start(high, cluster, tmp_path / "high")
    assert _finish(urgent, tmp_path / "high") == 1
    release.touch()
    got = _finish(slow, tmp_path / "low")
    # w: 2 -> 6 -> 19 -> 59 -> 180 after four steps, not more: the restart ran them on a fresh model
    assert got == int(_plain(script)) == 180_004

    events = _events(tmp_path / "low")
    [stop] = [e for e in events if e["event"] == "preempted"]
    assert stop["task"] == "step[1]" and stop["group"] == 0
    starts = [e["task"] for e in events if e["event"] == "start"]
    assert starts.count("init") == 2 and starts.count("step[0]") == 2 and starts.count("step[3]") == 1
    assert all(e["attempt"] == 1 for e in events if e["event"] == "start")  # a preemption is no failed attempt
    high_end = max(e["ts"] for e in _events(tmp_path / "high") if e["event"] == "end")
    assert high_end < max(e["ts"] for e in events if e["event"] == "end")


GANG = """
import os
import time

import torch
import torch.distributed as dist

import dagc

RELEASE = RELEASE_PATH


@dagc.task(cpus=1, ranks=2)
def total(x: int) -> int:
    ctx = dagc.context()
    value = torch.tensor([float(x + ctx.rank)])
    if ctx.distributed:
        dist.all_reduce(value, group=ctx.group)
    else:  # what the two ranks sum to
        value = value * 2 + 1
    while not os.path.exists(RELEASE):  # the test says when it may end
        time.sleep(0.05)
    return int(value.item())


@dagc.pipeline
def ganged(x: int = 5) -> int:
    return total(x)


if __name__ == "__main__":
    print(ganged())
"""


def test_a_multi_rank_task_is_admitted_with_every_ranks_resources_and_preempted_as_one(tmp_path, start_cluster):
    """A 2-rank task takes both CPUs of the cluster; a high-priority task stops it (its launcher and both
    rank actors), runs, and the gang runs again on both ranks; the result equals the plain run's."""
    cluster = start_cluster(2)
    release = tmp_path / "release"
    script, low = _program(tmp_path, "ganged", GANG.replace("RELEASE_PATH", repr(str(release))))
    _, high = _program(tmp_path, "high", _high(0.2, 1))
    slow = _start(low, cluster, tmp_path / "low")
    _wait_for(lambda: any(e["event"] == "start" for e in _events(tmp_path / "low")), "the gang runs", slow)
    urgent = _start(high, cluster, tmp_path / "high")
    assert _finish(urgent, tmp_path / "high") == 1
    release.touch()
    assert _finish(slow, tmp_path / "low") == int(_plain(script)) == 11
    events = _events(tmp_path / "low")
    assert [e["task"] for e in events if e["event"] == "preempted"] == ["total"]
    starts = [(e.get("rank", 0), e["attempt"]) for e in events if e["event"] == "start"]
    assert sorted(starts) == [(0, 1), (0, 1), (1, 1), (1, 1)], events  # each rank stopped, then run again
    assert sum(e["event"] == "end" for e in events) == 1  # its rank 0's outputs, once
    assert not any(e["event"] == "failure" for e in events)  # the stopped ranks are no failed attempt


@pytest.mark.parametrize("backend", ["local", "torch"])
def test_without_a_shared_cluster_a_priority_orders_nothing_and_says_so_once(tmp_path, backend):
    from dagc.backends import emit
    from dagc.driver import compile_file
    from tests.interpreters import run_python

    script = tmp_path / "high.py"
    script.write_text(_high(0.0, 2))
    program = tmp_path / f"high_{backend}.py"
    program.write_text(emit(compile_file(script, backend=backend), backend, program))
    proc = run_python([str(program), "--priority", "3", "--result", str(tmp_path / "r.pkl")], capture_output=True,
                      text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("dagc: priority 3 orders nothing here") == 1, proc.stderr
    quiet = run_python([str(program)], capture_output=True, text=True, cwd=tmp_path)
    assert quiet.returncode == 0 and "orders nothing" not in quiet.stderr  # declared 5, but not asked for here
