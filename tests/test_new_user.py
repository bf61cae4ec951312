"""A new user's path: one mistake gives one diagnostic with the user's own values, every command takes
`--pipeline`/`--param`, errors name the command, and a flow may call another flow as Python does."""

from __future__ import annotations

import json
import socket
import textwrap
from pathlib import Path

import pytest

from dagc.driver import compile_file
from tests.conftest import REPO, run_dagc
from tests.interpreters import run_python

TASKS = '''\
import dagc


@dagc.task
def inc(x: int) -> int:
    return x + 1


@dagc.task
def done(x: int) -> bool:
    return x > 2


@dagc.pipeline
def p(n: int, k: int = 2):
    a = inc(n)
    b = inc(k)
    return a, b, inc(n)
'''


def test_a_bad_parameter_is_one_diagnostic(tmp_path: Path) -> None:
    script = tmp_path / "params.py"
    script.write_text(TASKS, encoding="utf-8")
    proc = run_dagc("check", str(script))
    assert proc.returncode == 1
    assert proc.stderr.count("error[") == 1 and "error[DAGC005]" in proc.stderr, proc.stderr
    proc = run_dagc("check", str(script), "--param", "n=1", "--param", "k='abc'")
    assert proc.stderr.count("error[") == 1 and "annotated `int`" in proc.stderr, proc.stderr
    assert run_dagc("check", str(script), "--param", "n=1").returncode == 0


def test_plan_takes_pipeline_and_param(tmp_path: Path) -> None:
    script = tmp_path / "params.py"
    script.write_text(TASKS, encoding="utf-8")
    proc = run_dagc("plan", str(script), "--param", "n=1", "--cluster", "2")
    assert proc.returncode == 0, proc.stderr
    proc = run_dagc("plan", str(script), "--pipeline", "p", "--param", "n=1", "--param", "k=7", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout.splitlines()[0])["tasks"] == 3


def test_command_errors_name_the_command(tmp_path: Path) -> None:
    proc = run_dagc("plan", "samples/quickstart.py", "--bogus")
    assert proc.returncode == 2
    assert "usage: dagc plan" in proc.stderr and "dagc plan: error: unrecognized arguments: --bogus" in proc.stderr
    proc = run_dagc("check", "samples/quickstart.py", "--param", "=3")
    assert proc.returncode == 2 and "dagc check: error: --param '=3'" in proc.stderr


def test_an_output_path_in_the_way_is_one_line_with_a_hint(tmp_path: Path) -> None:
    blocker = tmp_path / "out"
    blocker.write_text("keep me")
    proc = run_dagc("compile", "samples/quickstart.py", "-o", str(blocker))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"-o {blocker} is a file" in proc.stderr and "dagc emit -o FILE" in proc.stderr
    for args in (("compile", "samples/quickstart.py", "-o", str(blocker / "sub")),
                 ("emit", "samples/quickstart.py", "-o", str(blocker / "sub" / "p.py"))):
        proc = run_dagc(*args)
        assert proc.returncode == 74 and "Traceback" not in proc.stderr, proc.stderr
        assert f"dagc {args[0]}: error: {blocker}" in proc.stderr and "hint: " in proc.stderr
    assert blocker.read_text() == "keep me"


def test_json_diagnostics_go_to_stdout(tmp_path: Path) -> None:
    proc = run_dagc("check", "samples/quickstart.py", "--diagnostics-format", "json")
    assert proc.returncode == 0 and json.loads(proc.stdout) == []  # `| jq` gets a list, even an empty one


def test_a_missing_engine_is_one_line(tmp_path: Path) -> None:
    """`dagc run --backend ray` where Ray is not installed (its import spec hidden)."""
    code = ("import importlib.util, sys\n"
            "real = importlib.util.find_spec\n"
            "importlib.util.find_spec = lambda name, *a: None if name == 'ray' else real(name, *a)\n"
            "from dagc.cli import main\n"
            "sys.exit(main(['run', 'samples/quickstart.py', '--backend', 'ray']))\n")
    proc = run_python(["-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "dagc run: error: the ray backend needs ray, which is not installed" in proc.stderr
    assert "pip install 'dagc[ray]'" in proc.stderr


def test_files_of_a_flow_are_named_without_dots(tmp_path: Path) -> None:
    proc = run_dagc("compile", "samples/stats_flow.py", "-o", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out" / "MovieStatsFlow_run_local.py").exists()
    assert not list((tmp_path / "out").glob("*.run*"))


FLOWS = '''\
import dagc
from stats_flow import MovieStatsFlow


class ReportFlow:
    @dagc.task
    @staticmethod
    def render(summary: dict, note: str) -> str:
        return f"{summary['rarest']}: {note}"

    @dagc.pipeline
    def run(self):
        summary, note, n = MovieStatsFlow().run()
        flow = MovieStatsFlow()
        again = flow.run(min_count=10)
        return self.render(summary, note), n, again[1]
'''


def test_a_flow_calls_another_flow_as_python_does(tmp_path: Path) -> None:
    from tests.test_backend_local import _plain_result

    (tmp_path / "stats_flow.py").write_text((REPO / "samples" / "stats_flow.py").read_text(), encoding="utf-8")
    script = tmp_path / "report.py"
    script.write_text(FLOWS, encoding="utf-8")
    plain = _plain_result(script, "ReportFlow.run", tmp_path)
    assert plain[1] == 4 and plain[2] == "every genre has enough movies"
    graph = compile_file(script, pipeline_name="ReportFlow.run")
    assert any(n.name.startswith("MovieStatsFlow.run.1.") for n in graph)  # the second call, inlined again
    out = tmp_path / "r.pkl"
    proc = run_dagc("run", str(script), "--pipeline", "ReportFlow.run", "--result", str(out))
    assert proc.returncode == 0, proc.stderr
    import pickle

    assert pickle.loads(out.read_bytes()) == plain


def test_a_flow_with_arguments_says_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "stats_flow.py").write_text((REPO / "samples" / "stats_flow.py").read_text(), encoding="utf-8")
    script = tmp_path / "bad.py"
    script.write_text(FLOWS.replace("MovieStatsFlow().run()", "MovieStatsFlow(3).run()"), encoding="utf-8")
    proc = run_dagc("check", str(script))
    assert proc.returncode == 1 and "`MovieStatsFlow` is built with arguments" in proc.stderr, proc.stderr


HINTS = '''\
import dagc


@dagc.task
def train(x: int) -> int:
    return x


class Helper:
    pass


@dagc.pipeline
def kfp():
    return train(1).set_cpu_limit("2").set_memory_limit("650M")


@dagc.pipeline
def helper():
    return Helper()
'''


def test_hints_name_the_users_values(tmp_path: Path) -> None:
    script = tmp_path / "hints.py"
    script.write_text(HINTS, encoding="utf-8")
    proc = run_dagc("check", str(script), "--pipeline", "kfp")
    assert "`.set_cpu_limit()`, `.set_memory_limit()` on a task result are Kubeflow's form" in proc.stderr
    assert '`@dagc.task(cpus="2", memory="650M")` on `train`' in proc.stderr and "4Gi" not in proc.stderr
    proc = run_dagc("check", str(script), "--pipeline", "helper")
    assert "class `Helper` is not a task" in proc.stderr and "decorate it" not in proc.stderr


EXIT = '''\
import dagc
from params import inc, done


@dagc.pipeline
def p():
    x = 0
    for i in range(5):
        x = inc(x)
        if done(x):
            x = inc(x * 10)
            break
    return x
'''


def test_an_exit_that_does_something_first(tmp_path: Path) -> None:
    from tests.test_backend_local import _plain_result

    (tmp_path / "params.py").write_text(TASKS, encoding="utf-8")
    script = tmp_path / "exit.py"
    script.write_text(EXIT, encoding="utf-8")
    plain = _plain_result(script, "p", tmp_path)
    assert plain == 31
    graph = compile_file(script)
    (loop,) = [n for n in graph if n.op == "loop"]
    from dagc.ir.regions import walk

    assert sum(1 for n in walk(loop) if n.op == "task" and n.target.endswith(":done")) == 1  # tested once
    out = tmp_path / "r.pkl"
    proc = run_dagc("run", str(script), "--result", str(out))
    assert proc.returncode == 0, proc.stderr
    import pickle

    assert pickle.loads(out.read_bytes()) == plain and loop.region.exit is not None


def test_check_points_at_torchrun_variables_read_at_import(tmp_path: Path) -> None:
    script = tmp_path / "nano.py"
    script.write_text('import os\n\nimport dagc\n\nddp = int(os.environ.get("RANK", -1)) != -1\n'
                      'local = os.getenv("LOCAL_RANK")\n\n\n@dagc.task\ndef f() -> int:\n'
                      '    return int(os.environ.get("RANK", 0))\n\n\n@dagc.pipeline\ndef p():\n    return f()\n',
                      encoding="utf-8")
    proc = run_dagc("check", str(script), "--backend", "torch")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("warning[DAGC162]") == 2  # the module-level reads, not the one in a task
    assert "nano.py:5:11: warning[DAGC162]: `RANK`" in proc.stderr and "`LOCAL_RANK`" in proc.stderr
    assert "DAGC162" not in run_dagc("check", str(script), "--backend", "ray").stderr


def test_a_failing_task_shows_the_users_traceback_and_keeps_its_run(tmp_path: Path) -> None:
    """`dagc run --backend local` of a failing task: the error line, then the frames of the user's own code
    (none of dagc's, none of the emitted program's), then how to finish the run, from the run directory it
    kept under .dagc/runs as Ray and torch programs do; the resumed run finishes once the bug is fixed."""
    script = tmp_path / "flow.py"
    script.write_text(textwrap.dedent("""
        import dagc


        def helper(x):
            return 1 / x


        @dagc.task
        def boom(x: int) -> float:
            return helper(x)


        @dagc.pipeline
        def p(x: int = 0):
            return boom(x)
    """).lstrip(), encoding="utf-8")
    proc = run_dagc("run", str(script), "--backend", "local", cwd=tmp_path)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert lines[0] == "error: task `boom` failed (attempt 1): ZeroDivisionError: division by zero"
    assert lines[1].startswith("Traceback (most recent call last, the user's code only)")
    frames = [line for line in lines if line.strip().startswith("File ")]
    assert [f.split(", line ")[1].split(",")[0] for f in frames] == ["10", "5"]
    assert all("flow.py" in f for f in frames) and "dagc/" not in proc.stderr.replace(".dagc/", "")
    assert lines[-2] == "ZeroDivisionError: division by zero"
    run_dir = lines[-1].removeprefix("finish the run with: --resume ")
    assert (tmp_path / run_dir / "events.jsonl").is_file()


FAILING = '''
import dagc


def helper(x):
    return 1 / x


@dagc.task
def boom(x: int) -> float:
    return helper(x)


@dagc.task
def after(y: float) -> float:
    return y + 1


@dagc.task
def other(x: int) -> int:
    return x


@dagc.pipeline
def p():
    return after(boom(0)), other(1)
'''


@pytest.mark.slow
def test_a_failing_task_is_said_once_on_ray_and_torch(tmp_path: Path, ray_cluster) -> None:
    """The same three parts as locally, as the last lines, once: no Ray "Unhandled error" dump, no gloo
    traceback of the rank whose peer stopped, no torchrun report."""
    from dagc.backends import emit
    from dagc.cluster import parse_cluster_spec
    from tests.interpreters import run_python

    script = tmp_path / "flow.py"
    script.write_text(FAILING, encoding="utf-8")
    for backend in ("ray", "torch"):
        program = tmp_path / f"flow_{backend}.py"
        program.write_text(emit(compile_file(script, cluster=parse_cluster_spec("2"), backend=backend), backend,
                                program))
        extra = ["--address", ray_cluster.address] if backend == "ray" else []
        proc = run_python([str(program), "--run-dir", str(tmp_path / f"run-{backend}"), *extra],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert proc.returncode == 1, proc.stderr
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        error = next(i for i, line in enumerate(lines) if "error: task `boom` failed" in line)
        tail = lines[error:]
        assert tail[1].startswith("Traceback (most recent call last, the user's code only)"), backend
        assert [f.split(", line ")[1].split(",")[0] for f in tail if f.strip().startswith("File ")] == ["11", "6"]
        assert tail[-2] == "ZeroDivisionError: division by zero"
        assert tail[-1] == f"finish the run with: --resume {tmp_path / f'run-{backend}'}", backend
        for noise in ("Unhandled error", "Connection reset", "ChildFailedError", "[rank1]", "exitcode"):
            assert noise not in proc.stderr, (backend, noise, proc.stderr[-3000:])
        assert proc.stderr.count("error: task `boom` failed") == 1, backend


def test_an_option_typo_gets_the_option_meant(tmp_path: Path) -> None:
    proc = run_dagc("plan", "samples/quickstart.py", "--cluser", "2")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == ("dagc plan: error: unrecognized arguments: --cluser 2 "
                                                    "(did you mean --cluster?)")
    assert "did you mean" not in run_dagc("plan", "samples/quickstart.py", "--xyz").stderr


def test_decorators_without_import_dagc_say_so(tmp_path: Path) -> None:
    script = tmp_path / "flow.py"
    script.write_text("@dagc.task\ndef a() -> int:\n    return 1\n\n\n@dagc.pipeline\ndef p():\n    return a()\n",
                      encoding="utf-8")
    proc = run_dagc("check", str(script))
    assert proc.returncode == 1
    assert "flow.py:1:2: error[DAGC003]" in proc.stderr and "does not import dagc" in proc.stderr
    assert "add `import dagc`" in proc.stderr


def test_an_address_where_no_ray_answers_is_one_line(tmp_path: Path) -> None:
    """Ray itself would retry for minutes and then print a traceback: the program says it in one line."""
    from dagc.backends import emit
    from dagc.cluster import parse_cluster_spec
    from tests.interpreters import run_python

    with socket.socket() as s:  # a port where nothing listens
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    program = tmp_path / "quickstart_ray.py"
    program.write_text(emit(compile_file(REPO / "samples" / "quickstart.py", cluster=parse_cluster_spec("2"),
                                         backend="ray"), "ray", program))
    proc = run_python([str(program), "--address", f"127.0.0.1:{port}", "--connect-timeout", "1"],
                      capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: no Ray cluster answers at 127.0.0.1:{port}: Connection refused (tried for 1s; --connect-timeout); "
        "start one there (`ray start --head`), give the address `ray start` printed, or drop --address to run on "
        "a local Ray"]
    assert not (tmp_path / ".dagc").exists()  # nothing made before the address was known to answer


HANGS = '''
import time
from pathlib import Path

import dagc


@dagc.task
def quick(x: int) -> int:
    return x + 1


@dagc.task
def hangs(x: int) -> int:
    while not Path("never").exists():  # until Ctrl-C
        time.sleep(0.05)
    return x


@dagc.pipeline
def p():
    return hangs(quick(1))
'''


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["local", "ray", "torch"])
def test_ctrl_c_is_one_line_a_recorded_failure_and_a_resume_hint(tmp_path: Path, backend: str) -> None:
    """SIGINT while a task runs: exit status 130, `error: interrupted (Ctrl-C)…` and the resume line as the
    last lines, no KeyboardInterrupt traceback (on torch: from no rank, and no torchrun lines), a `run_failed`
    event, and the finished task recorded."""
    import signal
    import subprocess
    import sys
    import time

    from dagc.backends import emit
    from dagc.cluster import parse_cluster_spec
    from dagc.runtime.events import read_events

    script = tmp_path / "flow.py"
    script.write_text(HANGS, encoding="utf-8")
    cluster = parse_cluster_spec("2") if backend != "local" else None
    program = tmp_path / f"flow_{backend}.py"
    program.write_text(emit(compile_file(script, cluster=cluster, backend=backend), backend, program))
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, str(program), "--run-dir", str(run_dir)], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    events = run_dir / "events.jsonl"
    deadline = time.monotonic() + 240
    while not (events.exists() and any(e.get("task") == "hangs" for e in read_events(events, event="start"))):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1]
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[-2].removeprefix("dagc: ") == "error: interrupted (Ctrl-C): the tasks still running were stopped"
    assert lines[-1] == f"finish the run with: --resume {run_dir}", err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert [e["error"] for e in read_events(events, event="run_failed")] == [
        "interrupted (Ctrl-C): the tasks still running were stopped"]
    assert {e["task"] for e in read_events(events, event="end")} == {"quick"}
