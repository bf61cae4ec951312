"""The Ray backend's programs on a real Ray: results, placement on two nodes, resource requests refused at
once, multi-rank tasks, regions, a value read on several nodes, and a real multi-process Ray cluster.

One simulated two-node Ray cluster (`ray.cluster_utils.Cluster`, 2 CPUs and 2 fake GPUs per node,
tests/ray_programs.py) serves the module; each emitted program runs as a subprocess connected to it with
--address. Retries, resume, timeouts and the cache on Ray: tests/test_backend_ray_executor.py.
"""

from __future__ import annotations

import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dagc.backends.ray import emit_ray
from dagc.cluster import parse_cluster_spec
from dagc.driver import compile_file
from dagc.runtime import read_events
from tests.conftest import SAMPLES
from tests.deadlines import scaled
from tests.interpreters import run_python
from tests.ray_programs import MB, _ran, _run, _write, two_node_cluster
from tests.test_backend_local import _plain_result, _ruff_clean

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster():
    """Two nodes of 2 CPUs and 2 (simulated) GPUs each: placement across nodes."""
    yield from two_node_cluster()


def test_quickstart_ray_equals_plain_run(tmp_path: Path, cluster) -> None:
    graph = compile_file(SAMPLES / "quickstart.py")
    program = _write(tmp_path, graph)
    _ruff_clean(program)
    helped = run_python([str(program), "--help"], capture_output=True, text=True, check=True)
    for option in ("--address", "--resume", "--result", "--run-dir", "--source-root"):
        assert option in helped.stdout
    proc = _run(program, cluster, "--run-dir", str(tmp_path / "run"), "--result", str(tmp_path / "ray.pkl"))
    assert proc.returncode == 0, proc.stderr
    result = pickle.loads((tmp_path / "ray.pkl").read_bytes())
    assert result == _plain_result(SAMPLES / "quickstart.py", "quickstart", tmp_path)
    assert _ran(tmp_path / "run") == {n.name for n in graph}
    ends = read_events(tmp_path / "run" / "events.jsonl", event="end")
    assert all(e["bytes"] > 0 and e["duration"] >= 0 and e["node"] for e in ends)


def test_first_tasks_run_in_the_worker_warmed_while_the_gatekeeper_starts(tmp_path: Path, ray_cluster,
                                                                          write_project) -> None:
    """On a shared cluster, a program warms one worker (it loads the pipeline's module) while its gatekeeper
    starts, and its first task runs there: the module is loaded once, by the warm-up, in the worker that
    runs the task, not once more in a second worker started for the task."""
    root = write_project({"warm.py": f"""
        import os

        import ray

        import dagc

        with open({str(tmp_path / "loaded")!r}, "a") as f:  # each process that loads this module says so
            f.write(f"{{os.getpid()}} {{ray.get_runtime_context().get_task_name()}}\\n")


        @dagc.task
        def where() -> int:
            return os.getpid()


        @dagc.pipeline
        def warm() -> int:
            return where()
        """})
    program = _write(tmp_path, compile_file(root / "warm.py"))
    proc = _run(program, ray_cluster, "--run-dir", str(tmp_path / "run"), "--result", str(tmp_path / "r.pkl"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    pid = pickle.loads((tmp_path / "r.pkl").read_bytes())
    [(loaded_in, loaded_by)] = [line.split() for line in (tmp_path / "loaded").read_text().splitlines()]
    assert loaded_in == str(pid) and loaded_by.endswith("warm_up"), (loaded_in, loaded_by, pid)


@pytest.mark.parametrize("placement", ["node", "bundles"])
def test_placement_on_two_nodes_follows_partition(tmp_path: Path, cluster, write_project, placement: str) -> None:
    root = write_project({"fan.py": """
        import dagc

        @dagc.task(cost="2s", out_size="1KiB")
        def work(i: int) -> int:
            return i * i

        @dagc.task(cost="1s", out_size="1KiB")
        def total(parts: list) -> int:
            return sum(parts)

        @dagc.pipeline
        def fan():
            return total([work(0), work(1), work(2), work(3)])
    """})
    spec = parse_cluster_spec("2x2")
    graph = compile_file(root / "fan.py", passes="verify,dce,cse,partition", cluster=spec)
    graph.attrs["cluster"] = "2x2"
    device = {n.name: n.attributes()["partition.device"] for n in graph}
    assert {spec.devices[d].node for d in device.values()} == {0, 1}, device
    program = _write(tmp_path, graph)
    _ruff_clean(program)
    assert "PLACEMENT = 'node'" in program.read_text()  # the devices of each node are interchangeable
    proc = _run(program, cluster, "--placement", placement, "--run-dir", str(tmp_path / "run"),
                "--result", str(tmp_path / "r.pkl"))
    assert proc.returncode == 0, proc.stderr
    assert pickle.loads((tmp_path / "r.pkl").read_bytes()) == 14
    events = read_events(tmp_path / "run" / "events.jsonl")
    (start,) = [e for e in events if e["event"] == "run_start"]
    assert start["placement"] == placement
    nodes = {int(k): v for k, v in start["nodes"].items()}
    assert len(set(nodes.values())) == 2
    ends = {e["task"]: e for e in events if e["event"] == "end"}
    for task, dev in device.items():
        assert ends[task]["node"] == nodes[spec.devices[dev].node], task
        assert ends[task]["device"] == dev


def test_infeasible_request_fails_fast(tmp_path: Path, cluster, write_project) -> None:
    root = write_project({"big.py": """
        import dagc

        @dagc.task(resources={"tpu": 1})
        def needs_tpu(x: int) -> int:
            return x

        @dagc.task(gpus=3)
        def needs_3_gpus(x: int) -> int:
            return x

        @dagc.pipeline
        def tpu():
            return needs_tpu(1)

        @dagc.pipeline
        def gpus():
            return needs_3_gpus(1)
    """})
    proc = _run(_write(tmp_path, compile_file(root / "big.py", pipeline_name="tpu"), "tpu.py"), cluster,
                "--run-dir", str(tmp_path / "r1"), timeout=180)
    assert proc.returncode == 1
    assert "task `needs_tpu` needs {'CPU': 1, 'tpu': 1}" in proc.stderr, proc.stderr
    _assert_refused(tmp_path / "r1", proc, "task `needs_tpu` needs")
    # placed on a device whose node (2 GPUs each) cannot hold it: refused before anything runs
    graph = compile_file(root / "big.py", pipeline_name="gpus")
    graph.node("needs_3_gpus").placement = graph.node("needs_3_gpus").placement.on((0,))
    proc = _run(_write(tmp_path, graph, "gpus.py"), cluster, "--run-dir", str(tmp_path / "r2"), timeout=180)
    assert proc.returncode == 1
    assert "no Ray node can hold node 0 of the plan" in proc.stderr and "'GPU': 3" in proc.stderr, proc.stderr
    _assert_refused(tmp_path / "r2", proc, "no Ray node can hold node 0 of the plan")


def _assert_refused(run_dir: Path, proc: subprocess.CompletedProcess, reason: str) -> None:
    """The run was refused at once for `reason`: no task started, and not the pending-task watchdog (which
    would stop it only after --pending-timeout) but the refusal ended it."""
    assert not read_events(run_dir / "events.jsonl", event="start")
    (failed,) = read_events(run_dir / "events.jsonl", event="run_failed")
    assert reason in failed["error"], failed
    assert "has waited" not in proc.stderr, proc.stderr


def test_two_rank_gloo_task_matches_single_process(tmp_path: Path, cluster, write_project) -> None:
    root = write_project({"ddp.py": """
        import torch
        import torch.distributed as dist

        import dagc

        @dagc.task
        def make(n: int):
            g = torch.Generator().manual_seed(0)
            x = torch.randn(n, 4, generator=g)
            y = x @ torch.tensor([1.0, -2.0, 0.5, 3.0]) + 0.1 * torch.randn(n, generator=g)
            return x, y

        @dagc.task(ranks=2, gpus=1)
        def fit(x, y, steps: int) -> list:
            ctx = dagc.context()
            torch.manual_seed(0)
            model = torch.nn.Linear(4, 1)
            if ctx.distributed:
                model = torch.nn.parallel.DistributedDataParallel(model, process_group=ctx.group)
            lo, hi = ctx.rank * len(x) // ctx.world_size, (ctx.rank + 1) * len(x) // ctx.world_size
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            losses = []
            for _ in range(steps):
                opt.zero_grad()
                loss = ((model(x[lo:hi]).squeeze(1) - y[lo:hi]) ** 2).mean()
                loss.backward()
                opt.step()
                value = loss.detach().clone()
                if ctx.distributed:
                    dist.all_reduce(value, group=ctx.group)
                    value /= ctx.world_size
                losses.append(value.item())
            return {"losses": losses, "world_size": ctx.world_size}

        @dagc.pipeline
        def ddp(n: int = 64, steps: int = 8):
            x, y = make(n)
            return fit(x, y, steps)
    """})
    graph = compile_file(root / "ddp.py")
    assert graph.node("fit").options.ranks == 2
    program = _write(tmp_path, graph)
    _ruff_clean(program)
    proc = _run(program, cluster, "--run-dir", str(tmp_path / "run"), "--result", str(tmp_path / "r.pkl"))
    assert proc.returncode == 0, proc.stderr
    ranked = pickle.loads((tmp_path / "r.pkl").read_bytes())
    single = _plain_result(root / "ddp.py", "ddp", tmp_path)
    assert ranked["world_size"] == 2 and single["world_size"] == 1
    assert ranked["losses"] == pytest.approx(single["losses"], abs=1e-5)
    assert single["losses"][-1] < single["losses"][0]
    starts = read_events(tmp_path / "run" / "events.jsonl", event="start")
    assert sorted(e.get("rank") for e in starts if e["task"] == "fit") == [0, 1]


def test_emit_ray_is_deterministic_and_records_placement() -> None:
    graph = compile_file(SAMPLES / "quickstart.py", passes="verify,dce,cse,partition",
                         cluster=parse_cluster_spec("2x2"))
    first = emit_ray(graph, None, cluster=parse_cluster_spec("2x2"))
    assert first == emit_ray(graph, None, cluster=parse_cluster_spec("2x2"))
    assert "DEVICES = [" in first and "device=" in first


# ---- regions and glue ------------------------------------------------------------------------------
@pytest.mark.parametrize("sample", ["early_stopping", "hparam_sweep"])
def test_region_sample_placed_on_two_nodes_equals_plain_run(tmp_path: Path, cluster, sample: str) -> None:
    """A `loop` region (early stopping) and a `cond` region on a glue predicate (the sweep), placed on
    two nodes: each region runs as one task on its device's node and computes what plain Python does."""
    from tests.test_samples import _params

    spec = parse_cluster_spec("2x2")
    params = _params(sample, tmp_path)  # smaller data, the same graph
    graph = compile_file(SAMPLES / f"{sample}.py", passes="verify,dce,cse,partition,schedule", cluster=spec,
                         params=params)
    regions = {n.name: n.op for n in graph if n.op in ("cond", "loop", "glue")}
    assert regions and ({"loop"} <= set(regions.values()) if sample == "early_stopping"
                        else {"cond", "glue"} <= set(regions.values())), regions
    program = _write(tmp_path, graph, f"{sample}_ray.py")
    _ruff_clean(program)
    proc = _run(program, cluster, "--run-dir", str(tmp_path / "run"), "--result", str(tmp_path / "r.pkl"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert pickle.loads((tmp_path / "r.pkl").read_bytes()) == _plain_result(SAMPLES / f"{sample}.py", graph.name,
                                                                           tmp_path, **params)
    events = read_events(tmp_path / "run" / "events.jsonl")
    (start,) = [e for e in events if e["event"] == "run_start"]
    nodes = {int(k): v for k, v in start["nodes"].items()}
    ends = {e["task"]: e for e in events if e["event"] == "end"}
    assert set(ends) == {n.name for n in graph}
    for node in graph:
        assert ends[node.name]["node"] == nodes[spec.devices[node.attributes()["partition.device"]].node], node.name


def test_region_asks_for_what_its_body_needs(tmp_path: Path, write_project) -> None:
    """A region runs as one Ray task: it asks for the largest demand of the tasks inside it, is retried
    as often as its most retried task, and its program is lint-clean without unused names."""
    root = write_project({"r.py": """
        import dagc

        @dagc.task
        def score(x: int) -> float:
            return x / 10

        @dagc.task(gpus=1, retries=2)
        def refine(x: int) -> int:
            return x + 1

        @dagc.task
        def report(x: int) -> int:
            return x

        @dagc.pipeline
        def r(x: int = 7, unused: int = 3):
            s = score(x)
            if s > 0.5:
                y = refine(x)
            else:
                y = x
            return report(y)
    """})
    graph = compile_file(root / "r.py")
    (cond,) = [n for n in graph if n.op == "cond"]
    text = emit_ray(graph, tmp_path / "prog" / "r_ray.py")
    program = _write(tmp_path, graph, "r_ray.py", text)
    _ruff_clean(program)
    assert f"{cond.name!r}: {{'CPU': 1, 'GPU': 1}}," in text
    assert "num_gpus=1" in text and "max_retries=2" in text  # exceptions: retried by the executor
    assert "load_modules" not in text and "importlib" not in text and "unused = 3" not in text
    helped = run_python([str(program), "--help"], capture_output=True, text=True, check=True)
    assert "--placement" in helped.stdout


def test_ordering_dependencies_are_kept(tmp_path: Path, cluster, write_project) -> None:
    """Tasks that communicate through a file (declared reads/writes) run in order although no value
    passes between them; the slow writer is placed on the other node."""
    root = write_project({"files.py": """
        import time

        import dagc

        @dagc.task(writes=["{path}"], cost="1s")
        def write(path: str, text: str) -> None:
            time.sleep(1.0)
            with open(path, "w") as f:
                f.write(text)

        @dagc.task(reads=["{path}"], cost="1s")
        def read(path: str) -> str:
            with open(path) as f:
                return f.read().upper()

        @dagc.pipeline
        def files(path: str = "unset"):
            write(path, "hello")
            return read(path)
    """})
    graph = compile_file(root / "files.py", params={"path": str(tmp_path / "msg.txt")})
    assert graph.node("read").deps == ("write",)
    graph.node("write").placement = graph.node("write").placement.on((2,))  # node 1 of 2x2
    graph.node("read").placement = graph.node("read").placement.on((0,))
    graph.attrs["cluster"] = "2x2"
    program = _write(tmp_path, graph)
    _ruff_clean(program)
    assert "after=('write',)" in program.read_text()
    proc = _run(program, cluster, "--run-dir", str(tmp_path / "run"), "--result", str(tmp_path / "r.pkl"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert pickle.loads((tmp_path / "r.pkl").read_bytes()) == "HELLO"


# ---- a value read on several nodes is stored once ------------------------------------------------------
_SPY = '''
import json, pickle, runpy, sys

import ray
from ray.remote_function import RemoteFunction

calls, puts = [], []
_put = ray.put


def put(value, *args, **kwargs):  # counts, then does the real put
    puts.append(type(value).__name__)
    return _put(value, *args, **kwargs)


_remote = RemoteFunction._remote


def remote(self, args=None, kwargs=None, **options):  # records the refs each task gets, then submits it
    refs = _remote(self, args=args, kwargs=kwargs, **options)
    values = list(args or []) + list((kwargs or {}).values())
    calls.append({"task": values[0].task if values else None,
                  "refs": [a.hex() for a in values if isinstance(a, ray.ObjectRef)],
                  "inline": max([len(pickle.dumps(a)) for a in values if not isinstance(a, ray.ObjectRef)] or [0]),
                  "out": [r.hex() for r in (refs if isinstance(refs, list) else [refs])]})
    return refs


ray.put, RemoteFunction._remote = put, remote
program, out = sys.argv[1], sys.argv[2]
sys.argv = [program, *sys.argv[3:]]
try:
    runpy.run_path(program, run_name="__main__")
except SystemExit as exc:
    code = exc.code
else:
    code = 0
json.dump({"calls": calls, "puts": puts}, open(out, "w"))
sys.exit(code)
'''


def test_a_value_read_on_two_nodes_is_stored_once_and_fetched(tmp_path: Path, cluster, write_project) -> None:
    """The producer's output is one object in the object store; each reader (on both nodes) gets the
    same ObjectRef and fetches it, and the driver never puts or re-sends the data itself."""
    root = write_project({"share.py": """
        import dagc

        @dagc.task(cost="1s", out_size="4MiB")
        def make(n: int) -> bytes:
            return bytes(range(256)) * (n // 256)

        @dagc.task(cost="4s", out_size="1KiB")
        def use(data: bytes, k: int) -> int:
            return sum(data[k::4096]) + k

        @dagc.pipeline
        def share(n: int = 4 * 1024 * 1024) -> list:
            data = make(n)
            return [use(data, k) for k in range(4)]
    """})
    spec = parse_cluster_spec("2x2")
    graph = compile_file(root / "share.py", passes="verify,dce,cse,partition,schedule,comm", cluster=spec)
    graph.attrs["cluster"] = "2x2"
    readers = [n for n in graph if n.target.endswith(":use")]
    assert {spec.devices[n.attributes()["partition.device"]].node for n in readers} == {0, 1}
    program = _write(tmp_path, graph)
    _ruff_clean(program)
    spy, out = tmp_path / "spy.py", tmp_path / "calls.json"
    spy.write_text(_SPY)
    # (the driver's own submissions, which the spy sees: not through the cluster's admission queue)
    proc = run_python([str(spy), str(program), str(out), "--address", cluster.address, "--no-admission",
                           "--result", str(tmp_path / "r.pkl")], capture_output=True, text=True, timeout=180,
                          cwd=program.parent)
    assert proc.returncode == 0, proc.stderr
    assert pickle.loads((tmp_path / "r.pkl").read_bytes()) == _plain_result(root / "share.py", "share", tmp_path)
    import json

    seen = json.loads(out.read_text())
    by_task = {c["task"]: c for c in seen["calls"] if c["task"]}
    (made,) = [c for task, c in by_task.items() if task == "make"]
    uses = [c for task, c in by_task.items() if task.startswith("use")]
    assert len(uses) == 4 and all(made["out"][0] in c["refs"] for c in uses)  # one ref, passed to all readers
    assert seen["puts"] == []  # the driver stores nothing itself
    assert max(c["inline"] for c in seen["calls"]) < 64 * 1024  # and sends no copy of the data with a task


# ---- a real multi-process Ray cluster -----------------------------------------------------------------
def _ray_start(log: Path, *args: str) -> subprocess.Popen:
    """`ray start --block ...` in its own process group (so that stopping it stops only what it started), its
    output in `log`."""
    import os

    ray_cli = Path(sys.executable).with_name("ray")
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    with log.open("wb") as out:
        return subprocess.Popen([str(ray_cli), "start", "--block", "--node-ip-address", "127.0.0.1", "--num-cpus",
                                 "1", "--object-store-memory", str(80 * MB), "--disable-usage-stats", *args],
                                env=env, start_new_session=True, stdout=out, stderr=subprocess.STDOUT)


def _ray_stop(*processes: subprocess.Popen) -> None:
    import os

    # `ray start --block` stops the node's processes on SIGTERM, one after another, each given time to drain:
    # half a minute for a head node. The test is done with them: what is still there after a moment is killed
    # (every node told at once, so that the moment is not paid once per node)
    for process in processes:
        os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    for process in processes:
        try:
            process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _started(log: Path, process: subprocess.Popen) -> None:
    """Until `ray start` says its node runs (its own words, not a probe that connects: a second driver costs
    seconds), as long as the machine needs; its output when it ends first."""
    deadline = time.monotonic() + scaled(90)
    while "Ray runtime started." not in log.read_text(errors="replace"):
        if process.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"`ray start` did not start its node:\n{_ray_logs(log)}")
        time.sleep(0.1)


def _ray_logs(*logs: Path) -> str:
    """What the nodes said: each `ray start`'s output and the end of the raylets' logs."""
    parts = [f"--- {log.name}\n{log.read_text(errors='replace')[-2000:]}" for log in logs if log.exists()]
    session = Path("/tmp/ray/session_latest/logs")
    for raylet in sorted(session.glob("raylet*.out"))[-2:] if session.is_dir() else []:
        parts.append(f"--- {raylet}\n{raylet.read_text(errors='replace')[-2000:]}")
    return "\n".join(parts)


def test_program_on_a_two_process_ray_cluster(tmp_path: Path) -> None:
    """`ray start --head` and a second `ray start --address` on this machine: the emitted program,
    run with --address, places the plan's two nodes on the two Ray nodes and computes the plain result."""
    import os
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"127.0.0.1:{port}"
    graph = compile_file(SAMPLES / "quickstart.py", cluster=parse_cluster_spec("2x1"), backend="ray")
    program = _write(tmp_path, graph)
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    probe = ("import ray, sys; ray.init(address=sys.argv[1], log_to_driver=False); "
             "print(sum(n['Alive'] for n in ray.nodes()))")
    logs = (tmp_path / "head.log", tmp_path / "worker.log")

    def wait_for(alive: str) -> None:
        """Until the cluster has `alive` nodes: as long as the machine needs (the deadline grows with its
        load), with what the nodes said when it does not happen."""
        deadline, said = time.monotonic() + scaled(90), ""
        while time.monotonic() < deadline:
            try:
                nodes = subprocess.run([sys.executable, "-c", probe, address], capture_output=True, text=True,
                                       env=env, timeout=scaled(60))
            except subprocess.TimeoutExpired:
                said = "the probe could not connect"
                continue
            if nodes.stdout.strip() == alive:
                return
            said = f"{nodes.stdout} {nodes.stderr[-2000:]}"
            time.sleep(1)
        pytest.fail(f"the Ray cluster did not reach {alive} node(s): {said}\n{_ray_logs(*logs)}")

    head = _ray_start(logs[0], "--head", "--port", str(port), "--include-dashboard=false")
    worker = None
    try:
        _started(logs[0], head)
        worker = _ray_start(logs[1], "--address", address)
        _started(logs[1], worker)
        wait_for("2")  # and the head knows it
        proc = subprocess.run([sys.executable, str(program), "--address", address, "--run-dir",
                               str(tmp_path / "run"), "--result", str(tmp_path / "r.pkl")], capture_output=True,
                              text=True, timeout=scaled(240), cwd=tmp_path, env=env)
        assert proc.returncode == 0, proc.stderr[-3000:] + _ray_logs(*logs)
    finally:
        _ray_stop(*(p for p in (worker, head) if p is not None))
    assert pickle.loads((tmp_path / "r.pkl").read_bytes()) == _plain_result(SAMPLES / "quickstart.py", "quickstart",
                                                                           tmp_path)
    ends = read_events(tmp_path / "run" / "events.jsonl", event="end")
    assert len({e["node"] for e in ends}) == 2  # both Ray nodes ran tasks, as the plan placed them
