"""The test helper that forks fresh interpreters from a preloaded server behaves like `subprocess.run`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.interpreters import run_python

SCRIPT = '''\
import atexit, os, random, sys, threading, time
print("argv", sys.argv[1:])
print("cwd", os.getcwd())
print("path0", sys.path[0])
print("env", os.environ.get("DAGC_PROBE"))
print("main", __name__)
print("input", sys.stdin.read())
print("draw", random.random())
atexit.register(lambda: print("at exit"))
threading.Thread(target=lambda: (time.sleep(0.05), print("thread done"))).start()
print("to stderr", file=sys.stderr)
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
'''


def _both(*args, **kwargs):  # type: ignore[no-untyped-def]
    real = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120, **kwargs)
    forked = run_python(list(args), capture_output=True, text=True, timeout=120, **kwargs)
    return real, forked


def _without_draws(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith("draw"))


def test_a_script_run_is_a_fresh_interpreters(tmp_path: Path) -> None:
    script = tmp_path / "probe.py"
    script.write_text(SCRIPT, encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    env = {**__import__("os").environ, "DAGC_PROBE": "yes"}
    real, forked = _both(str(script), "3", "x", cwd=work, env=env, input="hello")
    assert forked.returncode == real.returncode == 3
    assert _without_draws(forked.stdout) == _without_draws(real.stdout)
    assert "thread done" in forked.stdout and forked.stdout.rstrip().endswith("at exit")
    assert forked.stderr == real.stderr == "to stderr\n"
    again = run_python([str(script)], capture_output=True, text=True, cwd=work, timeout=120)
    draws = [line for out in (forked.stdout, again.stdout) for line in out.splitlines() if line.startswith("draw")]
    assert len(set(draws)) == 2  # each run draws from its own seed


def test_failures_c_and_m(tmp_path: Path) -> None:
    real, forked = _both("-c", "import sys; print(sys.argv, sys.path[0] == ''); raise ValueError('boom')", "a",
                         cwd=tmp_path)
    assert forked.returncode == real.returncode == 1
    assert forked.stdout == real.stdout
    assert forked.stderr.splitlines()[-1] == real.stderr.splitlines()[-1] == "ValueError: boom"
    (tmp_path / "modprobe.py").write_text("import sys\nprint(__name__, sys.argv[1:])\nsys.exit('said')\n")
    real, forked = _both("-m", "modprobe", "z", cwd=tmp_path)
    assert (forked.returncode, forked.stdout, forked.stderr) == (real.returncode, real.stdout, real.stderr)
    with pytest.raises(subprocess.CalledProcessError):
        run_python(["-c", "raise SystemExit(4)"], check=True, timeout=60)
    with pytest.raises(subprocess.TimeoutExpired):
        run_python(["-c", "import time; time.sleep(60)"], timeout=1)
    assert run_python(["-c", "print('still serving')"], capture_output=True, text=True, timeout=60).stdout \
        == "still serving\n"
