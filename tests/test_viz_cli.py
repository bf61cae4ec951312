"""Console conventions of the commands: -v / -q, and the status line drawn only on a terminal."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest

from dagc.console import setup_logging, status
from tests.conftest import run_dagc


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("flags", [("-q",), ("--quiet",), ("AFTER", "-q")])
def test_quiet_prints_nothing_on_success(tmp_path: Path, flags: tuple[str, ...]) -> None:
    out = tmp_path / "g.svg"
    before = [f for f in flags if f != "AFTER"] if "AFTER" not in flags else []
    after = [f for f in flags if f != "AFTER"] if "AFTER" in flags else []
    proc = run_dagc(*before, "viz", "samples/quickstart.py", "--cluster", "2", "-o", str(out), *after)
    assert proc.returncode == 0 and proc.stderr == "" and proc.stdout == ""
    assert out.is_file()


def test_default_says_what_it_wrote_and_verbose_says_more(tmp_path: Path) -> None:
    out = tmp_path / "g.dot"
    proc = run_dagc("viz", "samples/quickstart.py", "--cluster", "2", "-o", str(out))
    assert proc.stderr == f"wrote {out}\n"
    proc = run_dagc("-v", "viz", "samples/quickstart.py", "--cluster", "2", "-o", str(out))
    assert "read pipeline `quickstart` from samples/quickstart.py: 8 tasks" in proc.stderr
    assert "pass partition" in proc.stderr and f"wrote {out}" in proc.stderr
    proc = run_dagc("-vv", "viz", "samples/quickstart.py", "-o", str(out))
    assert proc.returncode == 0


def test_quiet_errors_still_show(tmp_path: Path) -> None:
    proc = run_dagc("-q", "viz", "samples/quickstart.py", "--focus", "nope", "-o", str(tmp_path / "g.dot"))
    assert proc.returncode == 2 and "no task named 'nope'" in proc.stderr


def test_status_line_only_on_a_terminal() -> None:
    setup_logging(0, 0)
    tty = Terminal()
    with status(lambda: "compiling big: pass 2/5 partition", stream=tty, delay=0.0, interval=0.02):
        time.sleep(0.15)
    text = tty.getvalue()
    assert "\rcompiling big: pass 2/5 partition" in text and text.endswith("\r")
    log = io.StringIO()
    with status(lambda: "compiling", stream=log, delay=0.0, interval=0.02):
        time.sleep(0.1)
    assert log.getvalue() == ""
    quiet = Terminal()
    setup_logging(0, 1)
    try:
        with status(lambda: "compiling", stream=quiet, delay=0.0, interval=0.02):
            time.sleep(0.1)
    finally:
        setup_logging(0, 0)
    assert quiet.getvalue() == ""


def test_short_work_draws_nothing() -> None:
    tty = Terminal()
    with status(lambda: "fast", stream=tty, delay=1.0):
        pass
    assert tty.getvalue() == ""
